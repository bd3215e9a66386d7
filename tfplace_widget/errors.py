"""The one exception type users catch: a trace that could not be made or read."""

from __future__ import annotations

import re

LOG_LINES_IN_MESSAGE = 12
_MAX_LINE = 300
# TensorFlow's C++ info and warning lines ("I0000 00:00:17.. 123 placer.cc:162] ...") and the
# placement log it prints because the trace turns log_device_placement on: they stay in
# ``log``, out of the message, which keeps what the code printed and TensorFlow's errors.
_INFO_OR_WARNING = re.compile(r"^[IW]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\] ")
_PLACEMENT = re.compile(r"\(\S+\): /job:\S+/device:\S+$|^Device mapping|^\S+ -> device: \d+")


class TraceError(RuntimeError):
    """A graph could not be traced, or a file is not a trace.

    The message says what went wrong and how to fix it; the original exception, if any,
    is chained as ``__cause__`` so its traceback is kept. When the failure happened while
    TensorFlow ran, ``log`` holds everything it printed meanwhile (what ``trace.log`` would
    have held), and the message ends with the last lines of it.
    """

    log: str = ""


def attach_log(error: BaseException, log: str, recent: str | None = None) -> BaseException:
    """Keep what the failed trace printed on ``error``: all of ``log`` as ``error.log`` and, for
    a :class:`TraceError`, the last lines of ``recent`` (default ``log``) at the end of its
    message, leaving out TensorFlow's info/warning logging and placement log."""
    error.log = log  # type: ignore[attr-defined]
    if not isinstance(error, TraceError) or not error.args or not isinstance(error.args[0], str):
        return error
    lines = [
        line if len(line) <= _MAX_LINE else line[: _MAX_LINE - 3] + "..."
        for line in _worth_showing(log if recent is None else recent)
    ][-LOG_LINES_IN_MESSAGE:]
    if lines:
        shown = "\n".join(f"  {line}" for line in lines)
        last = "its last line" if len(lines) == 1 else f"its last {len(lines)} lines"
        error.args = (
            f"{error.args[0]}\n\nPrinted by the traced run ({last}; the whole log is the "
            f"error's .log):\n{shown}",
            *error.args[1:],
        )
    return error


def _worth_showing(text: str) -> list[str]:
    """The lines of ``text`` but TensorFlow's info/warning logging (with the indented lines
    that continue an entry) and its placement log."""
    kept, skipping = [], False
    for line in text.splitlines():
        if skipping and line[:1].isspace():
            continue
        skipping = bool(_INFO_OR_WARNING.match(line))
        if not skipping and line.strip() and not _PLACEMENT.search(line):
            kept.append(line)
    return kept


def read_file(path: str, what: str, error: type[Exception] = TraceError) -> bytes:
    """The bytes of ``path``; ``error`` saying "Cannot read <what> <path>: <reason>." if not."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise error(f"Cannot read {what} {path!r}: {exc.strerror}.") from exc
