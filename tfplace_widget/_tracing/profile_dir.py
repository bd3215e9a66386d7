"""The folder TensorFlow's profiler writes a TF2 trace into (the profiler started on it, and the
XSpace it wrote there), and the folders of traces killed.

A trace removes its folder when it ends, however it ends, unless its process is killed
(SIGKILL, the OOM killer): then the folder stays. Each folder's name carries its process's id,
so the next trace removes those of processes that are gone: only folders of this user, named
as this module names them, of a process id no process has now (a reused id keeps its folder
until that process is gone too).
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator

from .._model.gc_pause import paused_gc
from .._sources.xspace import CLOCK_MARK

PREFIX = "tfplace-profile-"
_NAME = re.compile(rf"{re.escape(PREFIX)}(\d+)-[A-Za-z0-9_]+\Z")


@contextlib.contextmanager
def profile_dir() -> Iterator[str]:
    """A new private folder for one trace's profile, removed when the block ends; the folders
    of killed traces are removed first."""
    remove_stale()
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}{os.getpid()}-") as folder:
        yield folder


def remove_stale(where: str | None = None) -> list[str]:
    """Remove the profile folders in ``where`` (the temporary folder) that this user's traces
    left when their process was killed; the paths removed."""
    where = where or tempfile.gettempdir()
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(where):
            found = _NAME.match(entry.name)
            if not found or _alive(int(found.group(1))):
                continue
            path = entry.path
            with contextlib.suppress(OSError):
                info = os.lstat(path)  # a symbolic link is no folder of ours
                if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
                    shutil.rmtree(path)
                    removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # another user's process (or no pid at all): not ours to judge
    return True


def start_profiler(logdir: str) -> int:
    """Start TensorFlow's profiler writing into ``logdir``; the epoch's ns as its first event,
    :data:`CLOCK_MARK`, began (within a few µs: between two reads of the clock around it), which
    ``xspace.profile_start_us`` turns into the profile's start. Raises what
    ``tf.profiler.experimental.start`` raises (``AlreadyExistsError`` when one is running)."""
    import tensorflow as tf

    tf.profiler.experimental.start(logdir)
    mark = tf.profiler.experimental.Trace(CLOCK_MARK)  # its event begins as the block is entered
    with paused_gc():  # no collection between the reads
        before = time.time_ns()
        with mark:
            after = time.time_ns()
    return (before + after) // 2


def written_xspace(logdir: str) -> bytes | None:
    """The XSpace the TF2 profiler wrote under ``logdir`` (``None`` if it wrote none)."""
    files = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    if not files:
        return None
    with open(files[0], "rb") as handle:
        return handle.read()
