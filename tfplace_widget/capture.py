"""Capture what native code writes to the process's stdout and stderr (fds 1 and 2).

TensorFlow's C++ logging (profiler start/stop, CUDA probing) bypasses ``sys.stderr`` and its
placement log is printed straight to fd 1; in a notebook both land under the cell. We redirect
both fds to one temporary file while tracing and hand the text back, so the panel can show it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import io
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

# Re-entrant: a capture inside a capture (TensorFlow imported during a traced block) nests.
_LOCK = threading.RLock()


class CapturedText:
    """Filled with the captured text when the ``capture_stderr`` block exits."""

    text: str = ""


@contextlib.contextmanager
def capture_native_output() -> Iterator[CapturedText]:
    """Redirect fds 1 and 2 into a temporary file for the block; restore them even on error."""
    result = CapturedText()
    with _LOCK, tempfile.TemporaryFile(mode="w+b") as sink:
        _flush_python_streams()
        saved = {fd: os.dup(fd) for fd in (1, 2)}
        # TF also writes through Python's sys.stdout (PySys_WriteStdout): in a kernel that is
        # not fd 1, so swap the Python streams too.
        python_text = io.StringIO()
        try:
            for fd in saved:
                os.dup2(sink.fileno(), fd)
            with contextlib.redirect_stdout(python_text), contextlib.redirect_stderr(python_text):
                yield result
        finally:
            _flush_python_streams()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            sink.seek(0)
            native = sink.read().decode("utf-8", errors="replace")
            result.text = native + python_text.getvalue()


def _flush_python_streams() -> None:
    """Flush Python's streams and C's stdio buffers (TF ``printf``s the placement log)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(Exception):
        _libc().fflush(None)


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None)


def import_tensorflow() -> tuple[Any, str]:
    """``(tensorflow, start-up text)``: TensorFlow imported with its start-up logging captured.

    TensorFlow's first import writes CPU-feature, oneDNN and CUDA-probing lines from C++ to the
    process's stderr, which in a notebook lands under whichever cell imported it. Every module
    here that needs TensorFlow gets it through this function, so the text goes into the trace's
    ``log`` instead. The text is ``""`` when TensorFlow was already imported.
    """
    if "tensorflow" in sys.modules:
        import tensorflow

        return tensorflow, ""
    with capture_native_output() as startup:
        import tensorflow
    return tensorflow, startup.text
