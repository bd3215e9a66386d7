"""``tfplace``: the command line (``tfplace show``, ``tfplace export``, ``tfplace run``).

One job: parse the arguments, call the library, print. Nothing here knows more about traces
than the library does: loading is :func:`tfplace_widget.tracing.dispatch.as_trace`, tracing
:func:`~tfplace_widget.tracing.tracer.trace_placement`, predicting
:func:`~tfplace_widget.analyses.predict.predict_placement`, writing the trace's own ``save`` /
``to_chrome_trace`` / ``to_csv`` / ``to_parquet`` and ``export.html.write_html``.

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

from __future__ import annotations

import argparse
import contextlib
import errno
import fnmatch
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .model.devices import DeviceSpec
    from .model.trace import PlacementTrace

PROG = "tfplace"
EXIT_OK, EXIT_EXPECTATION, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
DEFAULT_LIMIT = 20  # op rows printed by `show`
DEFAULT_FINDINGS = 5  # findings printed
MAX_OFFENDERS = 50  # offending ops listed per failed expectation
_REST = " (--debug shows the rest)"
_TRACEBACK = " (--debug shows the traceback)"


class CliError(Exception):
    """Bad input found by the command line itself: one line on stderr, exit code 2."""


# -- parsing ------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error on one line (``tfplace run: error: ... (see --help)``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``tfplace`` parser and its three sub-commands."""
    from . import __version__
    from .tracing.options import cpu_count_argument

    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: `tfplace --debug show` and `tfplace show --debug` both work, neither resets it.
    common.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="on an error, print the traceback too",
    )
    common.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default=argparse.SUPPRESS,
        help="colour the summary: auto (default) when stdout is a terminal and NO_COLOR is unset",
    )
    parser = _Parser(
        prog=PROG,
        description="See where TensorFlow placed every op: summarise, export or record traces.",
        epilog="Exit codes: 0 done, 1 an --expect-device check failed, 2 bad input, "
        "3 internal error. `tfplace COMMAND --help` for each command.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"tfplace_widget {__version__}")
    # No set_defaults for these: it would change the shared actions' SUPPRESS default, and a
    # sub-command's False would then override `tfplace --debug show`; main() reads them.
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    show = commands.add_parser(
        "show",
        parents=[common],
        help="print a summary of a trace file (and write its HTML report)",
        description="Print devices, how the ops were placed, transfers, the top findings and "
        "the matching ops of FILE: a .tfplace file, a Chrome trace (.json, .json.gz) or a "
        "RunMetadata (.pb, .pbtxt), anything show_placement accepts.",
    )
    show.add_argument("file", metavar="FILE", help="the trace file")
    show.add_argument("--html", metavar="OUT", help="also write the HTML report to OUT (.html)")
    _add_force_option(show, "OUT if it exists")
    _add_listing_options(show, "the first ops")
    _add_expect_option(show)
    show.set_defaults(func=cmd_show)

    export = commands.add_parser(
        "export",
        parents=[common],
        help="write a trace file as a Chrome trace, CSV or Parquet tables",
        description="Convert FILE (anything `tfplace show` reads) to one or more formats.",
    )
    export.add_argument("file", metavar="FILE", help="the trace file")
    export.add_argument(
        "--chrome",
        metavar="OUT",
        help="Chrome trace JSON for Perfetto UI / chrome://tracing: OUT.json, or OUT.json.gz "
        "gzipped",
    )
    export.add_argument(
        "--csv", metavar="DIR", help="ops.csv, events.csv, transfers.csv into DIR (made if missing)"
    )
    export.add_argument(
        "--parquet", metavar="DIR", help="the same tables as Parquet into DIR (needs pyarrow)"
    )
    _add_force_option(export, "files that exist")
    export.set_defaults(func=cmd_export)

    run = commands.add_parser(
        "run",
        parents=[common],
        help="trace a graph builder or TF2 function and save the trace",
        description="Import FUNCTION from a module (mypkg.models:build) or a file "
        "(models/build.py:build), run it for real with a full trace (trace_placement), save "
        "the trace to OUT and print its summary. With --expect-device, exit 1 when an op is "
        "elsewhere; on a machine without the expected device type (a GPU), the check is "
        "against predict_placement(trace, gpus=1), and the output says so.",
    )
    run.add_argument(
        "target", metavar="MODULE_OR_FILE:FUNCTION", help="e.g. model.py:build or mypkg.model:build"
    )
    run.add_argument(
        "-o", "--output", metavar="OUT", required=True, help="the .tfplace file to write"
    )
    _add_force_option(run, "OUT if it exists")
    run.add_argument(
        "--cpus", type=cpu_count_argument, help="number of CPU devices (device_count), 1 to 64"
    )
    run.add_argument("--no-soft", action="store_true", help="turn soft placement off")
    run.add_argument(
        "--optimize", action="store_true", help="let Grappler optimize (TF's defaults)"
    )
    run.add_argument(
        "--device-scope", metavar="DEV", help="an outer tf.device around the builder, e.g. /cpu:1"
    )
    run.add_argument(
        "--mode",
        choices=("auto", "graph", "function"),
        default="auto",
        help="graph: a TF1 builder in a Session; function: TF2 code; auto (default) picks",
    )
    run.add_argument(
        "--cluster",
        metavar="SPEC",
        help="graph mode: run across a local TensorFlow cluster tfplace starts and stops, e.g. "
        "local:worker=2,ps=1 (--cpus then counts per task)",
    )
    run.add_argument("--steps", type=_positive_int, default=1, help="traced calls (default 1)")
    run.add_argument(
        "--warmup", type=_whole_number, default=1, help="untraced calls before them (default 1)"
    )
    _add_listing_options(run, "none")
    _add_expect_option(run)
    run.set_defaults(func=cmd_run)
    return parser


def _add_listing_options(parser: argparse.ArgumentParser, without_search: str) -> None:
    parser.add_argument(
        "--search",
        metavar="TEXT",
        default="",
        help="list the ops whose name contains TEXT (any case; * and ? are globs)",
    )
    parser.add_argument(
        "--limit",
        metavar="N",
        type=_whole_number,
        default=DEFAULT_LIMIT,
        help=f"op rows to list (default {DEFAULT_LIMIT}; 0: all); without --search, "
        f"{without_search}",
    )
    parser.add_argument(
        "--findings",
        metavar="N",
        type=_whole_number,
        default=DEFAULT_FINDINGS,
        help=f"findings to print, worst first (default {DEFAULT_FINDINGS})",
    )


def _add_force_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help=f"replace {what} (without --force, an existing file is never overwritten)",
    )


def _add_expect_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--expect-device",
        metavar="PATTERN=DEVICE",
        action="append",
        default=[],
        help="fail (exit 1) when an op whose name matches the glob PATTERN is not on DEVICE: a "
        "type (GPU, CPU), a short name (GPU:0), a task (/job:ps/task:0) or a full name; "
        "repeatable. Without a device of that type here, checked against "
        "predict_placement(trace, gpus=1). Ops the runtime adds (_Send, _Recv, _Retval: how "
        "'runtime') are left out",
    )


def _whole_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, not {value}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 1:  # one rule, one message, for 0 and for -3
        raise argparse.ArgumentTypeError(f"expected 1 or more, not {value}")
    return value


# -- entry point --------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """Run ``tfplace`` with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    The console script ``tfplace`` and ``python -m tfplace_widget`` call it; tests call it
    in-process. Errors are one line on stderr (the traceback too with ``--debug``).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version, usage errors
        return exit_.code if isinstance(exit_.code, int) else EXIT_BAD_INPUT
    debug = bool(getattr(args, "debug", False))
    args.color = getattr(args, "color", "auto")
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        _error("interrupted", debug)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `tfplace show ... | head`: the reader left, nothing to say
        _silence_stdout()
        return EXIT_OK
    except (CliError, ImportError, OSError, TypeError, ValueError) as exc:
        _error(_one_line(exc), debug)
        return EXIT_BAD_INPUT
    except Exception as exc:  # TraceError is a RuntimeError: kept apart from real bugs below
        from .model.errors import TraceError

        if isinstance(exc, TraceError):
            _error(_one_line(exc), debug)
            return EXIT_BAD_INPUT
        _error(
            f"internal error, please report it with the --debug output: {_one_line(exc, True)}"
            + _TRACEBACK,
            debug,
        )
        return EXIT_INTERNAL


def _error(message: str, debug: bool) -> None:
    """``tfplace: error: <message>`` on stderr, after the traceback with ``--debug``."""
    _flush(sys.stdout)
    if debug:
        traceback.print_exc()  # the whole message is in it: no pointer to --debug
        message = message.replace(_REST, "").replace(_TRACEBACK, "")
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)


def _one_line(exc: BaseException, with_type: bool = False) -> str:
    """The first paragraph of ``exc``'s message on one line (the rest, such as the last lines
    a failed trace printed, is in the ``--debug`` output)."""
    text = str(exc).strip()
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        text = str(exc.args[0])
    first, _, rest = text.partition("\n\n")
    line = " ".join(first.split()) or type(exc).__name__
    if (with_type or isinstance(exc, (ImportError, TypeError))) and not line.startswith(
        type(exc).__name__
    ):
        line = f"{type(exc).__name__}: {line}"
    if rest.strip():
        line += _REST
    return line


def _flush(stream: TextIO) -> None:
    """Flush what was printed, so that it comes before the line on stderr."""
    with contextlib.suppress(OSError, ValueError):
        stream.flush()


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


# -- commands -----------------------------------------------------------------------------------
def cmd_show(args: argparse.Namespace) -> int:
    """``tfplace show FILE``: the summary; the HTML report with ``--html``; the checks."""
    expectations = parse_expectations(args.expect_device)
    write_html = _html_writer() if args.html else None  # missing: fail before any output
    if args.html:
        check_output("--html", args.html, HTML_REPORT, args.force)
    trace = load_trace(args.file)
    out = _Output(sys.stdout, args.color)
    print_summary(trace, out, search=args.search, limit=args.limit, findings=args.findings)
    if write_html is not None:
        with _refusing_to_overwrite("--html", args.html):
            written = write_html(trace, args.html, search=args.search, overwrite=args.force)
        out.line(f"\nWrote the HTML report: {written or args.html}")
    if expectations:
        return check_expectations(trace, expectations, out, soft_placement=True)
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    """``tfplace export FILE --chrome OUT | --csv DIR | --parquet DIR`` (any of them)."""
    if not (args.chrome or args.csv or args.parquet):
        raise CliError(
            "tfplace export: say what to write: --chrome OUT.json.gz, --csv DIR or --parquet DIR"
        )
    if args.parquet:
        _require_pyarrow()  # before loading: the file may take seconds to read
    outputs = (("--csv", "CSV", args.csv), ("--parquet", "Parquet", args.parquet))
    tables = [(option, kind, folder) for option, kind, folder in outputs if folder]
    if args.chrome:
        check_output("--chrome", args.chrome, CHROME_TRACE, args.force)
    for option, kind, folder in tables:
        check_tables_output(option, folder, kind, args.force)
    trace = load_trace(args.file)
    if args.chrome:
        with _refusing_to_overwrite("--chrome", args.chrome):
            written = trace.to_chrome_trace(args.chrome, overwrite=args.force)
        print(f"Wrote the Chrome trace: {written}")
    for option, kind, folder in tables:
        writer = trace.to_csv if kind == "CSV" else trace.to_parquet
        with _refusing_to_overwrite(option, folder):
            paths = writer(folder, overwrite=args.force)
        print(f"Wrote the {kind} tables: {', '.join(paths.values())}")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    """``tfplace run MODULE_OR_FILE:FUNCTION -o OUT``: trace, save, summarise, check."""
    expectations = parse_expectations(args.expect_device)
    check_output("-o", args.output, SAVED_TRACE, args.force)  # before a trace of minutes
    from .model.capture import import_tensorflow

    # TensorFlow's start-up lines go to the trace's log, not the terminal, even when the
    # builder's module imports TensorFlow itself.
    _, startup_log = import_tensorflow()
    builder = load_builder(args.target)
    from .tracing.tracer import trace_placement

    options: dict[str, Any] = {
        "mode": args.mode,
        "soft_placement": not args.no_soft,
        "optimize": args.optimize,
        "steps": args.steps,
        "warmup": args.warmup,
    }
    if args.cpus is not None:
        options["device_count"] = {"CPU": args.cpus}
    if args.device_scope:
        options["device_scope"] = args.device_scope
    if args.cluster:
        options["cluster"] = args.cluster
    trace = trace_placement(builder, **options)
    if startup_log:
        trace.log = startup_log + trace.log
    saved = _save_run(trace, args.output, args.force)
    out = _Output(sys.stdout, args.color)
    print_summary(
        trace, out, search=args.search, limit=args.limit, findings=args.findings, list_ops=False
    )
    out.line(f"\nSaved the trace: {saved}")
    if expectations:
        return check_expectations(trace, expectations, out, soft_placement=not args.no_soft)
    return EXIT_OK


# -- inputs -------------------------------------------------------------------------------------
def load_trace(path: str) -> PlacementTrace:
    """The trace in ``path`` (anything ``show_placement`` opens), or a one-line error naming it."""
    from .model.errors import TraceError
    from .tracing.dispatch import as_trace

    if os.path.isdir(path):
        raise CliError(f"{path!r} is a folder, not a trace file.")
    try:
        return as_trace(path)
    except (TraceError, KeyboardInterrupt):
        raise
    except Exception as exc:  # a reader's own error: the file is not what its name says
        raise CliError(
            f"Cannot read {path!r} as a trace ({type(exc).__name__}: {_one_line(exc)}). "
            "tfplace reads .tfplace files, Chrome trace JSON and RunMetadata (.pb, .pbtxt)."
        ) from exc


def load_builder(target: str) -> Callable[..., Any]:
    """The function ``target`` names: ``path/to/file.py:name`` or ``package.module:name``
    (``name`` may be dotted: ``Model.build``). The file runs as a module named after it, not
    as ``__main__``; its folder (or, for a module, the working directory) goes first on
    ``sys.path`` so that its own imports work as with ``python file.py``."""
    import importlib
    import importlib.util

    where, colon, name = target.rpartition(":")
    if not colon or not where or not name:
        raise CliError(
            f"Expected MODULE_OR_FILE:FUNCTION (e.g. model.py:build or mypkg.model:build), "
            f"not {target!r}."
        )
    is_file = where.endswith(".py") or os.sep in where or "/" in where or os.path.isfile(where)
    try:
        if is_file:
            path = os.path.abspath(where)
            if not os.path.isfile(path):
                raise CliError(f"No such file: {where!r} (in {os.getcwd()!r}).")
            folder = os.path.dirname(path)
            if folder not in sys.path:
                sys.path.insert(0, folder)
            module_name = "_tfplace_" + re.sub(r"\W", "_", os.path.basename(path)[:-3] or "main")
            spec = importlib.util.spec_from_file_location(module_name, path)
            if spec is None or spec.loader is None:
                raise CliError(f"Cannot import {where!r}: not a Python file.")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path and "" not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(where)
    except CliError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and where.startswith(exc.name):
            raise CliError(
                f"No module named {exc.name!r} (from {os.getcwd()!r}); a file path must end in "
                ".py, e.g. model.py:build."
            ) from exc
        raise CliError(f"Importing {where!r} failed: {_one_line(exc, True)}") from exc
    except (Exception, SystemExit) as exc:  # the user's module: any error is bad input
        raise CliError(f"Importing {where!r} failed: {_one_line(exc, True)}") from exc
    found: Any = module
    for part in name.split("."):
        if not hasattr(found, part):
            callables = sorted(
                n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
            )
            hint = f" It defines: {', '.join(callables[:12])}." if callables else ""
            raise CliError(f"{where!r} has no {name!r}.{hint}")
        found = getattr(found, part)
    if not callable(found):
        raise CliError(f"{where}:{name} is a {type(found).__name__}, not a function.")
    return found


# -- outputs ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OutputFormat:
    """What an output holds and the suffixes (any case) tfplace reads it back by."""

    what: str
    suffixes: tuple[str, ...]
    why: str  # why the name matters


SAVED_TRACE = OutputFormat("the trace", (".tfplace",), "tfplace reads a file by its name")
HTML_REPORT = OutputFormat("the HTML report", (".html", ".htm"), "a browser opens it by its name")
CHROME_TRACE = OutputFormat(
    "the Chrome trace", (".json", ".json.gz"), "tfplace reads it by its name; .gz is gzipped"
)


def check_output(option: str, path: str, kind: OutputFormat, force: bool) -> None:
    """Refuse an output before any work: a folder, a missing folder, no permission, a name
    without its format's suffix, or (without ``--force``) a file that exists."""
    from .export.output import write_error

    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise CliError(
            str(write_error(kind.what, path, IsADirectoryError(errno.EISDIR, "Is a directory")))
        )
    if not os.path.isdir(folder):
        missing = FileNotFoundError(errno.ENOENT, "No such file or directory")
        raise CliError(str(write_error(kind.what, path, missing)))
    if not path.lower().endswith(kind.suffixes):
        stem = path[:-3] if path.lower().endswith(".gz") else path
        better = os.path.splitext(stem)[0] + kind.suffixes[0]
        raise CliError(
            f"{option} {path!r}: {kind.what} is a {' or '.join(kind.suffixes)} file "
            f"({kind.why}); name it {better!r}."
        )
    if os.path.lexists(path) and not force:
        raise CliError(_exists(option, path))
    if not os.access(folder, os.W_OK):
        denied = PermissionError(errno.EACCES, "Permission denied")
        raise CliError(str(write_error(kind.what, path, denied)))


def check_tables_output(option: str, folder: str, kind: str, force: bool) -> None:
    """Refuse a tables folder that is a file or (without ``--force``) holds a table file."""
    from .export.tables import table_paths

    if os.path.exists(folder) and not os.path.isdir(folder):
        raise CliError(
            f"Cannot write {kind} tables to {folder!r}: it is a file, not a folder. Pass a "
            "folder path (it is created if missing)."
        )
    suffix = ".csv" if kind == "CSV" else ".parquet"
    taken = [
        os.path.basename(p) for p in table_paths(folder, suffix).values() if os.path.lexists(p)
    ]
    if taken and not force:
        raise CliError(
            f"{option} {folder!r} already holds {', '.join(taken)}: pass --force to replace "
            f"{'them' if len(taken) > 1 else 'it'}, or pick another folder. Nothing was written."
        )


def _exists(option: str, path: str) -> str:
    return (
        f"{option} {path!r} already exists: pass --force to replace it, or pick another name. "
        "Nothing was written."
    )


@contextlib.contextmanager
def _refusing_to_overwrite(option: str, path: str) -> Iterator[None]:
    """A file made at ``path`` after :func:`check_output` (by another process) is kept: the
    writer's ``FileExistsError`` becomes the message ``--force`` answers."""
    try:
        yield
    except FileExistsError as exc:
        raise CliError(_exists(option, getattr(exc, "filename", None) or path)) from exc


def _save_run(trace: PlacementTrace, path: str, force: bool) -> str:
    """Save the trace ``tfplace run`` made. A file that appeared at ``path`` while it ran is
    kept, and the trace (maybe minutes of work) goes to a new name beside it, then an error."""
    from .export.output import write_new_file

    try:
        return trace.save(path, overwrite=force)
    except FileExistsError:
        base, suffix = os.path.splitext(path)
        saved = write_new_file(base, suffix, lambda p: trace.save(p, overwrite=False))
        raise CliError(
            f"-o {path!r} appeared while the trace ran and is kept (--force replaces it); "
            f"the trace was saved to {saved!r} instead."
        ) from None


def _html_writer() -> Callable[..., Any]:
    """``tfplace_widget.export.html.write_html``, or a clear error when this version has none."""
    try:
        from .export.html import write_html
    except ModuleNotFoundError as exc:
        if exc.name not in ("tfplace_widget.export.html", __package__ + ".export.html"):
            raise
        raise CliError(
            "--html needs the HTML report (tfplace_widget.export.html), which this version of "
            "tfplace_widget does not have yet; leave out --html, or export with tfplace export."
        ) from exc
    except ImportError as exc:
        raise CliError(f"--html: the HTML report cannot be loaded: {_one_line(exc, True)}") from exc
    return write_html


def _require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError as exc:
        from .export.tables import PARQUET_FIX

        raise CliError(PARQUET_FIX.replace("to_parquet", "--parquet", 1)) from exc


# -- expectations -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Expectation:
    """``--expect-device PATTERN=DEVICE``: ops matching the glob are on ``DEVICE``."""

    text: str
    pattern: str
    device: str
    spec: DeviceSpec

    def regex(self) -> re.Pattern:
        return re.compile(fnmatch.translate(self.pattern))


def parse_expectations(values: Sequence[str]) -> list[Expectation]:
    """The ``--expect-device`` values, checked before anything runs."""
    from .model.devices import parse_device

    found = []
    for text in values:
        pattern, equals, device = text.rpartition("=")
        pattern, device = pattern.strip(), device.strip()
        if not equals or not pattern or not device:
            raise CliError(
                f"--expect-device {text!r}: expected PATTERN=DEVICE, e.g. 'tower_*=GPU' or "
                "'loss=/device:CPU:0'."
            )
        try:
            spec = parse_device(device)
        except ValueError as exc:
            raise CliError(f"--expect-device {text!r}: {_one_line(exc)}") from exc
        if spec.type is None and spec.job is None and spec.task is None:
            raise CliError(
                f"--expect-device {text!r}: {device!r} names no device type or task; write "
                "GPU, CPU, GPU:0, a task of a cluster such as /job:ps/task:0, or a full name "
                "such as /job:localhost/replica:0/task:0/device:GPU:0."
            )
        found.append(Expectation(text, pattern, device, spec))
    return found


def check_expectations(
    trace: PlacementTrace,
    expectations: Sequence[Expectation],
    out: _Output,
    *,
    soft_placement: bool,
) -> int:
    """Print each expectation's result; 1 when an op is elsewhere, else 0.

    On a machine without a device type some expectation names (a GPU on a laptop or a CI
    runner), every expectation is checked against ``predict_placement(trace, gpus=N)``, the
    placement on this machine plus N GPUs (N = 1, or more when ``GPU:1``... is named): one
    placement for all, since an op on the CPU here may go to the GPU there.
    """
    from .model.devices import canonical_device, parse_device

    def device_type(name: str) -> str | None:
        try:
            return parse_device(canonical_device(name)).type
        except ValueError:
            return None

    present = {device_type(d) for d in trace.devices}
    asked = {e.spec.type for e in expectations if e.spec.type is not None}  # not a task's
    missing = sorted(asked - present)  # type: ignore[arg-type]
    checked, basis = trace, "the trace"
    out.line("")
    if missing:
        if missing != ["GPU"]:
            raise CliError(
                f"--expect-device: this trace has no {' or '.join(missing)} device, and only "
                "GPUs can be predicted (predict_placement); record the trace on such a machine."
            )
        from .tracing.predict import predict_placement

        gpus = max(
            [1]
            + [
                e.spec.index + 1
                for e in expectations
                if e.spec.type == "GPU" and e.spec.index is not None
            ]
        )
        checked = predict_placement(trace, gpus, soft_placement=soft_placement)
        basis = f"predict_placement(trace, gpus={gpus})"
        out.line(
            f"No GPU in this trace: checking against {basis}, where TensorFlow would place each "
            f"op on this machine plus {gpus} GPU{'s' if gpus > 1 else ''} (predicted, not run)."
        )
    out.heading(f"Expected devices (checked against {basis})")
    devices = checked.devices
    names = checked.ops["op"].astype(str)
    # _Send/_Recv named after the op they serve, _Retval...: not the user's ops to expect.
    theirs = (checked.ops["how"].astype(str) != "runtime").to_numpy(dtype=bool)
    failures: list[tuple[Expectation, pd.DataFrame]] = []
    rows = []
    for expectation in expectations:
        if not any(expectation.spec.matches(parse_device(canonical_device(d))) for d in devices):
            shown = ", ".join(_short_names(devices).values()) or "none"
            raise CliError(
                f"--expect-device {expectation.text!r}: no device {expectation.device!r} in "
                f"{basis} (its devices: {shown})."
            )
        matches = names.str.match(expectation.regex()).to_numpy(dtype=bool)
        matched = checked.ops[matches & theirs]
        if matched.empty:
            sample = ", ".join(names.head(5))
            raise CliError(
                f"--expect-device {expectation.text!r}: no op matches {expectation.pattern!r} "
                f"(globs match the whole name, case-sensitive, and ops the runtime adds are left "
                f"out; names look like: {sample})."
            )
        on = matched["device"].astype(str).map(lambda d, spec=expectation.spec: _on(spec, d))
        wrong = matched[~on.to_numpy(dtype=bool)]
        status = "ok" if wrong.empty else "FAIL"
        detail = (
            f"{len(matched):,} op{'s' if len(matched) != 1 else ''}"
            if wrong.empty
            else f"{len(wrong):,} of {len(matched):,} ops elsewhere"
        )
        rows.append([status, expectation.text, detail])
        if not wrong.empty:
            failures.append((expectation, wrong))
    out.table(rows, ["", "expectation", "ops"], styles={0: _status_style})
    if not failures:
        return EXIT_OK
    short = _short_names(devices)
    for expectation, wrong in failures:
        out.line("")
        out.heading(f"Not on {expectation.device} ({expectation.text})")
        listed = wrong.head(MAX_OFFENDERS)
        out.table(
            [
                [str(r.op), short.get(str(r.device), str(r.device)), str(r.how), str(r.reason)]
                for r in listed.itertuples(index=False)
            ],
            ["op", "device", "how", "reason"],
        )
        if len(wrong) > len(listed):
            out.line(f"  ... and {len(wrong) - len(listed):,} more")
    count = sum(len(w) for _, w in failures)
    _flush(out.stream)
    first_expectation, first_wrong = failures[0]
    example = first_wrong.iloc[0]
    print(
        f"{PROG}: {count:,} op{'s are' if count != 1 else ' is'} not on the expected device "
        f"(checked against {basis}), e.g. {example['op']} on "
        f"{short.get(str(example['device']), example['device'])} "
        f"({first_expectation.text})",
        file=sys.stderr,
        flush=True,
    )
    return EXIT_EXPECTATION


def _on(spec: DeviceSpec, device: str) -> bool:
    from .model.devices import canonical_device, parse_device

    try:
        return bool(device) and spec.matches(parse_device(canonical_device(device)))
    except ValueError:
        return False


# -- the summary --------------------------------------------------------------------------------
_STYLES = {"bold": "1", "dim": "2", "red": "31", "yellow": "33", "green": "32", "cyan": "36"}


class _Output:
    """Plain text to ``stream``, with ANSI styles only when asked or when it is a terminal."""

    def __init__(self, stream: TextIO, color: str = "auto") -> None:
        self.stream = stream
        if color == "auto":
            is_tty = getattr(stream, "isatty", lambda: False)()
            color = "always" if is_tty and not os.environ.get("NO_COLOR") else "never"
        self.color = color == "always"

    def style(self, text: str, *styles: str) -> str:
        if not self.color or not styles or not text:
            return text
        codes = ";".join(_STYLES[s] for s in styles)
        return f"\033[{codes}m{text}\033[0m"

    def line(self, text: str = "") -> None:
        print(text, file=self.stream)

    def heading(self, text: str) -> None:
        self.line(self.style(text, "bold"))

    def table(
        self,
        rows: list[list[str]],
        header: list[str],
        *,
        right: Sequence[int] = (),
        styles: dict[int, Callable[[str], tuple[str, ...]]] | None = None,
        indent: str = "  ",
    ) -> None:
        """Rows in aligned columns (the last one not padded), under a dimmed header."""
        widths = [max(len(str(v)) for v in column) for column in zip(header, *rows, strict=False)]
        last = len(header) - 1

        def cells(values: list[str], header_row: bool) -> str:
            parts = []
            for index, value in enumerate(values):
                text = str(value)
                if index < last:
                    pad = widths[index] - len(text)
                    text = " " * pad + text if index in right else text + " " * pad
                if header_row:
                    text = self.style(text, "dim")
                elif styles and index in styles:
                    text = self.style(text, *styles[index](str(value)))
                parts.append(text)
            return (indent + "  ".join(parts)).rstrip()

        self.line(cells(header, True))
        for row in rows:
            self.line(cells(row, False))


def _status_style(value: str) -> tuple[str, ...]:
    return ("green",) if value == "ok" else ("red", "bold")


def _severity_style(value: str) -> tuple[str, ...]:
    return {"high": ("red", "bold"), "medium": ("yellow",)}.get(value, ())


def _short_names(devices: Sequence[str]) -> dict[str, str]:
    """``GPU:0`` for each device, unless two devices share a short name (several tasks)."""
    from .model.devices import short_device

    short = {d: short_device(d) or d for d in devices}
    if len(set(short.values())) < len(short):
        return {d: d for d in devices}
    return short


def print_summary(
    trace: PlacementTrace,
    out: _Output,
    *,
    search: str = "",
    limit: int = DEFAULT_LIMIT,
    findings: int = DEFAULT_FINDINGS,
    list_ops: bool = True,
) -> None:
    """What the panel's header, findings and table say, as plain text: what ran, devices (ops,
    busy time), how the ops got there, transfers by direction, the worst findings, and the ops
    matching ``search`` (the panel's search: any case, ``*``/``?`` globs), ``limit`` rows
    (0: all); without a search, the first ops when ``list_ops``."""
    from .analyses.summary import device_summaries, format_bytes, format_us, how_counts
    from .analyses.summary import transfer_bytes_text as bytes_text
    from .model.reasons import HOW_VALUES
    from .rendering.html_parts import MODE_LABELS, PREDICTED_WORDS
    from .rendering.search import match_names

    ops, transfers = trace.ops, trace.transfers
    mode = PREDICTED_WORDS if trace.predicted else MODE_LABELS.get(trace.mode, "loaded from a file")
    source = trace.source or "trace"
    out.line(
        f"{out.style(source, 'bold')}: {len(ops):,} ops on {len(trace.devices)} devices ({mode})"
    )
    for note in trace.notes:
        out.line(f"  note: {note}")
    if trace.truncated:
        out.line("  note: TensorFlow stopped recording at 2^20 nodes per step: incomplete.")

    short = _short_names(list(dict.fromkeys([*trace.devices, *ops["device"].astype(str)])))
    out.line("")
    out.heading("Devices")
    summaries = device_summaries(ops, trace.events, list(trace.devices))
    device_rows = [
        [
            short.get(s.device, s.device),
            f"{s.ops:,}",
            "" if trace.predicted else format_us(s.busy_us),
            s.device if short.get(s.device) != s.device else "",
        ]
        for s in summaries
    ]
    out.table(device_rows, ["device", "ops", "busy", "full name"], right=(1, 2))

    counts = how_counts(ops)
    hows = [h for h in HOW_VALUES if counts.get(h, 0) or h in ("explicit", "implicit")]
    hows += [h for h in counts if h not in HOW_VALUES and counts[h]]
    out.line("")
    out.line(
        out.style("How placed: ", "bold") + ", ".join(f"{counts.get(h, 0):,} {h}" for h in hows)
    )

    out.line("")
    what = "Predicted copies" if trace.predicted else "Transfers"
    moved = bytes_text(transfers) if len(transfers) else "none"
    if trace.predicted and moved == "sizes not recorded":
        moved = "sizes unknown: nothing ran"
    out.heading(f"{what}: {len(transfers):,} ({moved})")
    if len(transfers):
        grouped = (
            transfers.assign(
                src=transfers["src_device"].astype(str), dst=transfers["dst_device"].astype(str)
            )
            .groupby(["src", "dst"], sort=False)["bytes"]
            .agg(["size", "sum", "count"])
            .sort_values("size", ascending=False, kind="stable")
        )
        rows = [
            [
                short.get(src, src),
                short.get(dst, dst),
                f"{int(row['size']):,}",
                format_bytes(row["sum"]) if row["count"] else "",
            ]
            for (src, dst), row in grouped.iterrows()
        ]
        out.table(rows, ["from", "to", "count", "bytes"], right=(2, 3))

    out.line("")
    found = trace.findings
    if found.empty:
        out.heading("Findings: none")
    else:
        shown = found.head(findings)
        if not findings:
            more = "; --findings N lists the first N"
        elif len(shown) < len(found):
            more = f", the first {len(shown)}; --findings {len(found)} lists all"
        else:
            more = ""
        out.heading(f"Findings: {len(found)} (worst first{more})")
        if len(shown):
            out.table(
                [[str(r.severity), str(r.kind), str(r.message)] for r in shown.itertuples()],
                ["severity", "kind", "message"],
                styles={0: _severity_style},
            )

    if not search and not list_ops:
        return
    out.line("")
    mask = match_names(ops["op"].astype(str), search)
    matching = ops[mask]
    listed = matching if not limit else matching.head(limit)
    title = f'Ops matching "{search}"' if search else "Ops"
    count = f"{len(matching):,} of {len(ops):,}" if search else f"{len(ops):,}"
    if len(listed) < len(matching):
        count = f"the first {len(listed):,} of {count}; --limit 0 lists all"
    out.heading(f"{title} ({count})")
    if len(listed):
        timed = not trace.predicted
        rows = [
            [
                str(r.op),
                str(r.type),
                short.get(str(r.device), str(r.device)),
                str(r.how),
                _time(r.start_us, format_us) if timed else "",
                _time(r.duration_us, format_us) if timed else "",
                str(r.reason),
            ]
            for r in listed.itertuples(index=False)
        ]
        out.table(
            rows,
            ["op", "type", "device", "how", "start", "duration", "reason"],
            right=(4, 5),
        )


def _time(value: Any, format_us: Callable[[float], str]) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return ""
    return format_us(number)
