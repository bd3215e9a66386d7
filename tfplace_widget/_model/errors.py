"""Every exception a user can catch, in one place on the floor so that any layer can raise it
(all exported by ``tfplace_widget``): :class:`TraceError`, a trace that could not be made or
read, and its kinds; the bad-input ``ValueError``s of the search box and of a ``.tfplace``
file's frames."""

from __future__ import annotations

import os
import re
from typing import Any

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


class TraceFileNotFound(TraceError, FileNotFoundError):
    """A trace file that does not exist: a :class:`TraceError` and, as Python's ``open`` would
    raise, a ``FileNotFoundError`` (with ``errno``, ``strerror`` and ``filename`` set)."""

    def __str__(self) -> str:  # the message, not OSError's "[Errno 2] ...: 'path'"
        return str(self.args[0]) if self.args else ""


class TraceWriteError(TraceError, OSError):
    """A trace could not be written: a :class:`TraceError` and, as Python's ``open`` would
    raise, an ``OSError`` (with ``errno``, ``strerror`` and ``filename`` set)."""

    def __str__(self) -> str:  # the message, not OSError's "[Errno 13] ...: 'path'"
        return str(self.args[0]) if self.args else ""


class ClusterError(TraceError, ValueError):
    """A ``cluster=``/``target=`` that cannot work (bad spec, unknown target, missing job): a
    ``TraceError`` like any failed trace, and a ``ValueError`` like any bad option value."""


class UsesEagerObjects(TraceError):
    """The graph builder touched eager tensors, variables or models made outside it."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


class CallsTfFunction(TraceError):
    """The graph builder calls a ``tf.function`` (``function``: its name): TF2 code."""

    def __init__(self, function: str) -> None:
        super().__init__(f"The graph builder calls the tf.function {function}: it is TF2 code.")
        self.function = function


class FrameFormatError(ValueError):
    """A frame document of a ``.tfplace`` file that does not follow the frame format (the
    archive names the file)."""


class SearchError(ValueError):
    """The search text cannot be used (an invalid regular expression)."""


class PlacementAssertionError(AssertionError):
    """A placement check failed: ops not on their expected device, more copies than
    ``max_copies``, or a CPU fallback with ``allow_cpu_fallback=False``.

    An ``AssertionError``, so that pytest (and ``unittest``) report it as a failed assertion,
    not as an error. The message is a table of the offending ops (op, type, device, expected,
    the user's source line when the trace has it, reason), the copies and the fallbacks;
    ``check`` (an ``analyses.checks.PlacementCheck``) holds what was found: ``check.checked`` (the placement checked),
    ``check.predicted`` and ``check.basis`` (what it was checked against: the trace, or
    ``predict_placement(trace, gpus=N)`` on a machine without a GPU), ``check.offending()``,
    ``check.copies`` and ``check.fallbacks``.
    """

    __module__ = "tfplace_widget"  # its public name, in tracebacks and pytest's summary

    def __init__(self, message: str, check: Any) -> None:
        super().__init__(message)
        self.check = check

    @property
    def table(self) -> str:
        """The message: the same text the ``tfplace`` pytest plugin prints in the report."""
        return str(self.args[0])


def read_file(
    path: str, what: str, error: type[Exception] = TraceError, limit: int | None = None
) -> bytes:
    """The bytes of ``path`` (with ``limit``, at most ``limit + 1`` of them: the caller refuses
    a longer file); ``error`` saying "Cannot read <what> <path>: <reason>." if not.

    A missing file with the default ``error`` raises :class:`TraceFileNotFound`, which is also
    a ``FileNotFoundError``.
    """
    try:
        with open(path, "rb") as handle:
            if limit is None:
                return handle.read()
            # Allocated as large as the file says it is (0 for a pipe or a device: the limit).
            size = os.fstat(handle.fileno()).st_size
            return handle.read(min(size, limit) + 1 if size else limit + 1)
    except OSError as exc:
        message = f"Cannot read {what} {path!r}: {exc.strerror}."
        if isinstance(exc, FileNotFoundError) and issubclass(TraceFileNotFound, error):
            missing = TraceFileNotFound(message + _where_relative_paths_start(path))
            missing.errno, missing.strerror, missing.filename = exc.errno, exc.strerror, path
            raise missing from exc
        raise error(message) from exc


def _where_relative_paths_start(path: object) -> str:
    if os.path.isabs(os.fspath(path)):  # type: ignore[arg-type]
        return " Check the path."
    return f" Check the path: a relative path starts in the working directory, {os.getcwd()!r}."


def ran_out_message(
    what: str, phase: str, index: int, warmup: int, steps: int, unit: str = "step", where: str = ""
) -> str:
    """Why a one-shot input (``what``: "dataset", "queue", "iterator") ran out, and the fix,
    for the run it ran out in: ``phase`` "warmup" or "step" (``index`` from 0), or "init".
    ``where`` follows "ran out", e.g. " (OutOfRangeError at 'IteratorGetNext')".

    ``unit`` is what one run is called ("step" for a Session run, "call" for TF2 code). Each
    run before is assumed to have taken elements: the untraced warm-up runs take them from the
    traced ones, which is what the message names (issue 11).
    """
    runs = f"{unit}s"
    if phase == "step" and warmup:
        during = f"the traced {unit}" if steps == 1 else f"traced {unit} {index + 1} of {steps}"
        took = "its only element" if warmup + index == 1 else "what it had"
        before = f"the untraced warm-up {unit if warmup == 1 else runs} (warmup={warmup})"
        if index:
            before += f" and the {index} traced {unit}(s) before it"
        gets = f"the traced {runs} get" if steps > 1 else f"the traced {unit} gets"
        story = (
            f"{during}: {before} consumed {took}; pass warmup=0 so that {gets} what the {what} "
            f"has, or give the {what} more elements"
        )
    elif phase == "step" and index:
        story = (
            f"traced {unit} {index + 1} of {steps}: the {index} {unit}(s) before it consumed "
            f"what it had; pass steps={index}, or give the {what} more elements"
        )
    elif phase == "step":
        story = (
            f"the traced {unit}, before any {unit} had run: the {what} has no elements (or was "
            "used up before the trace). Give it elements"
        )
    elif phase == "warmup" and index:
        story = (
            f"untraced warm-up {unit} {index + 1} of warmup={warmup}: the {index} warm-up "
            f"{unit}(s) before it consumed what it had, and nothing was left to trace; pass "
            f"warmup=0 (and steps={index} at most), or give the {what} more elements"
        )
    elif phase == "warmup":
        story = (
            f"the first untraced warm-up {unit} (warmup={warmup}), before any {unit} had run: "
            f"the {what} has no elements (or was used up before the trace). Give it elements"
        )
    else:
        story = (
            f"the variable initialisation, before any {unit}: an initializer reads it. Give it "
            "elements, or initialise the variable from something else"
        )
    return f"The {what} ran out{where} during {story}."
