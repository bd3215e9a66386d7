"""The one exception type users catch: a trace that could not be made or read."""

from __future__ import annotations


class TraceError(RuntimeError):
    """A graph could not be traced, or a file is not a trace.

    The message says what went wrong and how to fix it; the original exception, if any,
    is chained as ``__cause__`` so its traceback is kept.
    """


def read_file(path: str, what: str, error: type[Exception] = TraceError) -> bytes:
    """The bytes of ``path``; ``error`` saying "Cannot read <what> <path>: <reason>." if not."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise error(f"Cannot read {what} {path!r}: {exc.strerror}.") from exc
