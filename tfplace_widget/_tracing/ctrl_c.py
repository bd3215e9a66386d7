"""Ctrl-C for TF2 calls: a tf.function call blocks in C++, where Python never sees SIGINT; this
lets TensorFlow's own cancellation stop it (used by function mode's calls)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def cancelled_by_ctrl_c() -> Iterator[Any]:
    """Let Ctrl-C cancel the tf.function calls of the block; yields an Event set on Ctrl-C.

    A tf.function call blocks in C++ with the GIL released, where Python never runs its
    SIGINT handler, so Ctrl-C alone would not stop a blocking dequeue or a long while_loop.
    Every function call of the block runs under one ``CancellationManager`` (TensorFlow's own
    mechanism, ``cancellation.CancellationManagerContext``); a watcher thread reads the signal
    wake-up fd and cancels it on SIGINT, so the call returns and the pending
    ``KeyboardInterrupt`` is raised. Only in the main thread with Python's default SIGINT
    handler (as in a kernel running a cell); elsewhere yields ``None`` and changes nothing.
    Limits: eager ops run one by one outside any tf.function are not cancellable (each is
    short), and a user's own ``set_wakeup_fd`` receives the signal bytes as before (forwarded).
    """
    import signal
    import threading

    from tensorflow.python.eager import cancellation

    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        or cancellation.context() is not None
    ):
        yield None
        return
    manager = cancellation.CancellationManager()
    interrupted = threading.Event()  # not manager.is_cancelled: a failing call cancels it too
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except ValueError:  # not the main interpreter's main thread
        os.close(read)
        os.close(write)
        yield None
        return

    def watch() -> None:
        while True:
            data = os.read(read, 64)
            if not data:
                return
            if signal.SIGINT in data:
                interrupted.set()
                manager.start_cancel()
            if previous >= 0:
                with contextlib.suppress(OSError):
                    os.write(previous, data)

    watcher = threading.Thread(target=watch, name="tfplace-ctrl-c", daemon=True)
    watcher.start()
    try:
        with cancellation.CancellationManagerContext(manager):
            yield interrupted
    finally:
        signal.set_wakeup_fd(previous)
        os.close(write)  # the watcher reads EOF and ends
        watcher.join()
        os.close(read)
