"""The ``tfplace`` commands: ``show`` (the summary, the HTML report, the checks), ``export``
(Chrome trace, CSV, Parquet) and ``run`` (trace a builder, save, summarise, check).

One job: call the library and print. Nothing here knows more about traces than the library
does: loading is :func:`tfplace_widget._tracing.dispatch.as_trace`, tracing
:func:`~tfplace_widget._tracing.tracer.trace_placement`, writing the trace's own ``save`` /
``to_chrome_trace`` / ``to_csv`` / ``to_parquet`` and ``export.html.write_html``, the summary
:func:`~tfplace_widget._rendering.text_report.print_summary`.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from .._rendering.text_report import TextOutput, print_summary, printable
from .checks import check_expectations, parse_expectations
from .errors import EXIT_OK, CliError
from .inputs import load_builder, load_trace
from .outputs import (
    CHROME_TRACE,
    HTML_REPORT,
    SAVED_TRACE,
    check_output,
    check_tables_output,
    html_writer,
    refusing_to_overwrite,
    require_pyarrow,
    save_run,
)


def cmd_show(args: argparse.Namespace) -> int:
    """``tfplace show FILE``: the summary; the HTML report with ``--html``; the checks."""
    expectations = parse_expectations(args.expect_device)
    write_html = html_writer() if args.html else None  # missing: fail before any output
    if args.html:
        check_output("--html", args.html, HTML_REPORT, args.force)
    trace = load_trace(args.file)
    out = TextOutput(sys.stdout, args.color)
    print_summary(trace, out, search=args.search, limit=args.limit, findings=args.findings)
    if write_html is not None:
        with refusing_to_overwrite("--html", args.html):
            written = write_html(trace, args.html, search=args.search, overwrite=args.force)
        out.line()
        out.line(f"Wrote the HTML report: {written or args.html}")
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
        require_pyarrow()  # before loading: the file may take seconds to read
    outputs = (("--csv", "CSV", args.csv), ("--parquet", "Parquet", args.parquet))
    tables = [(option, kind, folder) for option, kind, folder in outputs if folder]
    if args.chrome:
        check_output("--chrome", args.chrome, CHROME_TRACE, args.force)
    for option, kind, folder in tables:
        check_tables_output(option, folder, kind, args.force)
    trace = load_trace(args.file)
    if args.chrome:
        with refusing_to_overwrite("--chrome", args.chrome):
            written = trace.to_chrome_trace(args.chrome, overwrite=args.force)
        print(printable(f"Wrote the Chrome trace: {written}"))
    for option, kind, folder in tables:
        writer = trace.to_csv if kind == "CSV" else trace.to_parquet
        with refusing_to_overwrite(option, folder):
            paths = writer(folder, overwrite=args.force)
        print(printable(f"Wrote the {kind} tables: {', '.join(paths.values())}"))
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    """``tfplace run MODULE_OR_FILE:FUNCTION -o OUT``: trace, save, summarise, check."""
    expectations = parse_expectations(args.expect_device)
    check_output("-o", args.output, SAVED_TRACE, args.force)  # before a trace of minutes
    from .._tfadapter.capture import import_tensorflow

    # TensorFlow's start-up lines go to the trace's log, not the terminal, even when the
    # builder's module imports TensorFlow itself.
    _, startup_log = import_tensorflow()
    builder = load_builder(args.target)
    from .._tracing.tracer import trace_placement

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
    # The findings, found now that TensorFlow is loaded (a CPU trace's read its registries), go
    # into the file: `tfplace show` prints them without importing it. A failure is reported by
    # print_summary, after the trace is saved.
    with contextlib.suppress(Exception):
        trace.findings  # noqa: B018
    saved = save_run(trace, args.output, args.force)
    out = TextOutput(sys.stdout, args.color)
    print_summary(
        trace, out, search=args.search, limit=args.limit, findings=args.findings, list_ops=False
    )
    out.line()  # a line of its own: line() shows a newline inside its text as "\\n"
    out.line(f"Saved the trace: {saved}")
    if args.try_fixes:
        print_fix_trials(trace, out)
    if expectations:
        return check_expectations(trace, expectations, out, soft_placement=not args.no_soft)
    return EXIT_OK


def print_fix_trials(trace: Any, out: Any) -> None:
    """``--try-fixes``: each fix tried alone (verified or why not), then the verified ones
    together against the code as it is."""
    findings = trace.findings
    fixes = [fix for fix in findings["fix"] if fix]
    by_hand = [fix for fix in fixes if fix.get("not_simulable")]
    if by_hand:
        out.line()
        out.line("Edits to make in your code (no overrides simulate them: not tried):")
        for fix in by_hand:
            out.line(f"  {fix['edit']} ({fix['not_simulable']})")
    if not any(fix.get("overrides") for fix in fixes):
        out.line()
        out.line("Fixes: no finding has a placement fix to try.")
        return
    effect = trace.suggest_placement()
    out.line()
    out.line("Fixes, each tried alone:")
    for trial in effect.trials:
        mark = "verified" if trial.verified else "not verified"
        out.line(f"  {trial.edit} -> {mark}: {trial.why}")
    if effect.verified:
        out.line("Verified fixes together, against the code as it is:")
        for row in effect.frame.itertuples():
            out.line(f"  {row.measure}: {row.before} -> {row.after}")
        for note in effect.notes:
            out.line(f"  note: {note}")
