"""Writing files: atomically, and with errors that name the file and the fix."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from typing import IO

from ..errors import TraceError


class TraceWriteError(TraceError, OSError):
    """A trace could not be written: a :class:`~tfplace_widget.errors.TraceError` and, as
    Python's ``open`` would raise, an ``OSError`` (with ``errno``, ``strerror`` and
    ``filename`` set)."""

    def __str__(self) -> str:  # the message, not OSError's "[Errno 13] ...: 'path'"
        return str(self.args[0]) if self.args else ""


def write_error(what: str, path: str, exc: OSError) -> TraceWriteError:
    """``TraceWriteError`` for ``exc`` raised while writing ``what`` to ``path``."""
    reason = exc.strerror or str(exc)
    folder = os.path.dirname(os.path.abspath(path))
    if isinstance(exc, IsADirectoryError) or os.path.isdir(path):
        fix = "It is a folder: pass a file name inside it."
    elif not os.path.isdir(folder):
        fix = f"The folder {folder!r} does not exist: create it first, or pick another path."
    else:
        fix = "Pick a path you can write to (e.g. in your home folder or the notebook's folder)."
    error = TraceWriteError(f"Cannot write {what} to {path!r}: {reason}. {fix}")
    error.errno, error.strerror, error.filename = exc.errno, exc.strerror, path
    return error


def write_atomically(path: str, what: str, write: Callable[[IO[bytes]], None]) -> None:
    """Call ``write`` on a temporary file beside ``path``, then rename it to ``path``.

    A failed or interrupted write leaves no half-written file, and an existing file at
    ``path`` stays as it was until the new one is complete. Errors while opening, writing or
    renaming are a :class:`TraceWriteError` naming ``path``.
    """
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise write_error(what, path, IsADirectoryError(21, "Is a directory"))
    try:
        handle, temporary = tempfile.mkstemp(prefix=".tfplace-", suffix=".part", dir=folder)
    except OSError as exc:
        raise write_error(what, path, exc) from exc
    try:
        with os.fdopen(handle, "wb") as stream:
            write(stream)
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise write_error(what, path, exc) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def make_folder(folder: str, what: str) -> None:
    """Create ``folder`` (and its parents) for ``what``; a :class:`TraceWriteError` if not."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        error = TraceWriteError(
            f"Cannot write {what} to {folder!r}: it is a file, not a folder. Pass a folder path "
            "(it is created if missing)."
        )
        error.errno, error.strerror, error.filename = 17, "File exists", folder
        raise error
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise write_error(what, folder, exc) from exc
