"""``tfplace``: the command line (``tfplace show``, ``tfplace export``, ``tfplace run``).

One job: parse the arguments, call the library, print. Nothing here knows more about traces
than the library does: loading is :func:`tfplace_widget._tracing.dispatch.as_trace`, tracing
:func:`~tfplace_widget._tracing.tracer.trace_placement`, predicting
:func:`~tfplace_widget._tracing.predict.predict_placement`, writing the trace's own ``save`` /
``to_chrome_trace`` / ``to_csv`` / ``to_parquet`` and ``export.html.write_html``, the printed
summary :mod:`tfplace_widget._rendering.text_report`, the ``--expect-device`` checks
:mod:`tfplace_widget._analyses.checks` (``assert_placement``'s too).

The package: ``main`` (parse, run, exit code), ``args`` (the parser), ``commands`` (``show``,
``export``, ``run``), ``inputs`` (trace files, builders), ``outputs`` (checked before any work),
``checks`` (``--expect-device``), ``errors`` (exit codes, the one line on stderr).

Only the standard library is imported at start-up, so ``tfplace --help`` is instant: pandas comes
with the first trace, and TensorFlow only with ``tfplace run`` (or a RunMetadata file).

Outputs are checked before any work: a file is never replaced without ``--force``, and its
name must end in its format's suffix (``.tfplace``, ``.html``, ``.json``/``.json.gz``): tfplace
and browsers open a file by its name.

Exit codes: 0 done; 1 an ``--expect-device`` check failed (the offending ops are printed);
2 bad input (a missing or unreadable file, a file that is not a trace, an output that cannot be
written or exists without ``--force``, a builder that cannot be imported or traced, a bad
argument); 3 an internal error (a bug: please report it with the ``--debug`` output); 130
interrupted. Every error is one line on stderr; ``--debug`` adds the traceback.
"""

from .._analyses.expectations import Expectation
from .._rendering.text_report import DEFAULT_FINDINGS, DEFAULT_LIMIT, MAX_OFFENDERS, print_summary
from .args import build_parser
from .checks import check_expectations, parse_expectations
from .commands import cmd_export, cmd_run, cmd_show
from .errors import (
    EXIT_BAD_INPUT,
    EXIT_EXPECTATION,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    PROG,
    CliError,
)
from .inputs import load_builder, load_trace
from .main import main
from .outputs import CHROME_TRACE, HTML_REPORT, SAVED_TRACE, OutputFormat, check_output

__all__ = [
    "CHROME_TRACE",
    "DEFAULT_FINDINGS",
    "DEFAULT_LIMIT",
    "EXIT_BAD_INPUT",
    "EXIT_EXPECTATION",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "HTML_REPORT",
    "MAX_OFFENDERS",
    "PROG",
    "SAVED_TRACE",
    "CliError",
    "Expectation",
    "OutputFormat",
    "build_parser",
    "check_expectations",
    "check_output",
    "cmd_export",
    "cmd_run",
    "cmd_show",
    "load_builder",
    "load_trace",
    "main",
    "parse_expectations",
    "print_summary",
]
