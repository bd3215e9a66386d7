"""The ``tfplace`` argument parser: its three sub-commands (``show``, ``export``, ``run``) and
their options, each sub-command bound to its function in :mod:`tfplace_widget._cli.commands`."""

from __future__ import annotations

import argparse
from typing import NoReturn

from .._rendering.text_report import DEFAULT_FINDINGS, DEFAULT_LIMIT
from .commands import cmd_export, cmd_run, cmd_show
from .errors import EXIT_BAD_INPUT, PROG


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error on one line (``tfplace run: error: ... (see --help)``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``tfplace`` parser and its three sub-commands."""
    from .._model.version import __version__
    from .._tracing.options import cpu_count_argument

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
    run.add_argument(
        "--try-fixes",
        action="store_true",
        help="run the code again with each finding's fix (trace.try_fix) and print what it "
        "changed, then the verified fixes together (trace.suggest_placement)",
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
        help="list the ops whose name contains TEXT (any case; with * or ?, a glob over the whole "
        "name: 'A*' starts with A)",
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
