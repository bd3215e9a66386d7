"""Writing files: atomically, and with errors that name the file and the fix."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable
from typing import IO

from .._model.errors import TraceWriteError


class _FileExists(TraceWriteError, FileExistsError):
    """The path was there already and the writer was asked not to replace it."""


_FULL = {
    errno.ENOSPC: "The disk is full: free some space, or pick a path on another disk.",
    errno.EDQUOT: "Your disk quota is used up: free some space, or pick a path on another disk.",
}


def write_error(what: str, path: str, exc: OSError) -> TraceWriteError:
    """``TraceWriteError`` for ``exc`` raised while writing ``what`` to ``path``."""
    reason = exc.strerror or str(exc)
    folder = os.path.dirname(os.path.abspath(path))
    if exc.errno in _FULL:
        fix = _FULL[exc.errno] + " No half-written file was left."
    elif isinstance(exc, IsADirectoryError) or os.path.isdir(path):
        fix = "It is a folder: pass a file name inside it."
    elif not os.path.isdir(folder):
        fix = f"The folder {folder!r} does not exist: create it first, or pick another path."
    else:
        fix = "Pick a path you can write to (e.g. in your home folder or the notebook's folder)."
    error = TraceWriteError(f"Cannot write {what} to {path!r}: {reason}. {fix}")
    error.errno, error.strerror, error.filename = exc.errno, exc.strerror, path
    return error


def exists_error(what: str, path: str) -> TraceWriteError:
    """The error of a writer told not to replace ``path``: a ``TraceWriteError`` that is also a
    ``FileExistsError``, as ``open(path, "x")`` raises."""
    error = _FileExists(
        f"Cannot write {what} to {path!r}: it already exists (overwrite=False). Pick another "
        "name, or pass overwrite=True to replace it."
    )
    error.errno, error.strerror, error.filename = errno.EEXIST, "File exists", path
    return error


def write_atomically(
    path: str, what: str, write: Callable[[IO[bytes]], None], *, overwrite: bool = True
) -> None:
    """Call ``write`` on a temporary file beside ``path``, then rename it to ``path``.

    A failed or interrupted write leaves no half-written file, and an existing file at
    ``path`` stays as it was until the new one is complete. With ``overwrite=False`` the
    complete file is linked to ``path`` only if nothing is there (a file made meanwhile, by
    another process, is kept): a ``FileExistsError`` otherwise. Errors while opening, writing
    or renaming are a :class:`TraceWriteError` naming ``path``.
    """
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise write_error(what, path, IsADirectoryError(21, "Is a directory"))
    if not overwrite and os.path.lexists(path):
        raise exists_error(what, path)
    try:
        handle, temporary = tempfile.mkstemp(prefix=".tfplace-", suffix=".part", dir=folder)
    except OSError as exc:
        raise write_error(what, path, exc) from exc
    try:
        with os.fdopen(handle, "wb") as stream:
            write(stream)
        os.chmod(temporary, 0o666 & ~_umask())
        if overwrite:
            os.replace(temporary, path)
        else:
            _publish_new(temporary, path)
    except FileExistsError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise exists_error(what, path) from exc
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise write_error(what, path, exc) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _publish_new(temporary: str, path: str) -> None:
    """Give the complete ``temporary`` the name ``path`` only if ``path`` does not exist
    (``FileExistsError`` if it does): a hard link, which never replaces; where the file system
    has none, ``path`` is first reserved with ``O_EXCL`` and then replaced."""
    try:
        os.link(temporary, path)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK):
            raise
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        try:
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise
    else:
        os.unlink(temporary)


def write_new_file(base: str, suffix: str, write: Callable[[str], object]) -> str:
    """Call ``write(path)`` for the first free name of ``base + suffix``, ``base-2 + suffix``,
    ...; ``write`` must refuse an existing path (``FileExistsError``: ``overwrite=False``),
    and the next name is tried when another writer took one first. Returns the path."""
    for number in range(1, 10_000):
        path = base + (f"-{number}" if number > 1 else "") + suffix
        if os.path.lexists(path):
            continue
        try:
            write(path)
        except FileExistsError:
            continue
        return path
    raise exists_error("the file", base + suffix)


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
