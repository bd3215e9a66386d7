"""What every ``tfplace`` command shares: the exit codes, :class:`CliError` and the one line an
error prints on stderr (``tfplace: error: ...``; the traceback too with ``--debug``)."""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from typing import TextIO

from .._rendering.text_report import printable  # names from a file drive no terminal

PROG = "tfplace"
EXIT_OK, EXIT_EXPECTATION, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
REST = " (--debug shows the rest)"
TRACEBACK = " (--debug shows the traceback)"
CHAINED = " (its traceback is chained above)"


class CliError(Exception):
    """Bad input found by the command line itself: one line on stderr, exit code 2."""


def print_error(message: str, debug: bool) -> None:
    """``tfplace: error: <message>`` on stderr, after the traceback with ``--debug``."""
    flush(sys.stdout)
    if debug:  # the whole message is in the traceback: no pointer to --debug
        print(printable(traceback.format_exc(), newlines=True), end="", file=sys.stderr)
        message = message.replace(REST, "").replace(TRACEBACK, "")
    else:  # a TraceError of the user's code points at a traceback only --debug shows
        message = message.replace(CHAINED, TRACEBACK)
    print(f"{PROG}: error: {printable(message)}", file=sys.stderr, flush=True)


def one_line(exc: BaseException, with_type: bool = False) -> str:
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
        line += REST
    return line


def flush(stream: TextIO) -> None:
    """Flush what was printed, so that it comes before the line on stderr."""
    with contextlib.suppress(OSError, ValueError):
        stream.flush()


def silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
