"""Capture what TensorFlow writes while tracing, and lose nothing else.

TensorFlow writes in two ways. Its C++ logging (the placement log, profiler start/stop, CUDA
probing) goes straight to the process's fds 1 and 2; in a notebook both land under the cell.
And some of its C code writes through Python's ``sys.stdout`` (``PySys_WriteStdout``), from
the tracing thread or from threads of its own. So a capture does two things:

- **fds 1 and 2** point straight at a temporary file for the block (no pipe, no copying: a
  line TensorFlow writes costs one ``write`` into the page cache), which the capture reads
  back. A small helper *process* (one per process, started by the first capture) holds the
  same file open and is told when a capture begins and ends. Being a process of its own, it
  outlives a crash: if this process dies mid-trace (a ``LOG(FATAL)``/``abort()`` in
  TensorFlow's C++), it writes the file's last output, the abort message included, to the
  original stderr (in a Jupyter kernel: the kernel's own log, since the cell is gone with the
  kernel).
- **``sys.stdout`` and ``sys.stderr``** get a thread-aware stand-in: text written by the thread
  that entered the capture (or by a thread it adds, :meth:`CapturedText.include_this_thread`)
  or by a thread Python did not start (TensorFlow's own) goes into the capture; text from any
  other thread (one the user started) goes to the stream that was there, and never into the
  pipe. On exit the stream that was there is put back exactly, unless the user put their own
  there meanwhile: then theirs stays, and our stand-in, wherever it is still referenced,
  simply forwards.

Captures may overlap (traces in two threads, or one inside another): the first one in sets the
fds up and the last one out restores them; each gets the native text written while it was
active. No lock is held while the traced code runs, so a trace that hangs never blocks another.
Native output of other threads during a capture cannot be told apart at the fd level: it goes
into the capture too.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import ctypes
import functools
import os
import select
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

# Guards the shared fd redirect, the stream stand-ins and writes to the saved original fds.
# Held only for bookkeeping, never while traced code runs. Re-entrant: a flush or a warning
# while it is held may come back through a stand-in.
_STATE = threading.RLock()
_hub: _FdHub | None = None
_users = 0

# How much of the last output the helper keeps to write out if this process dies mid-trace.
CRASH_TAIL_BYTES = 64 * 1024
_SYNC_TIMEOUT_S = 30.0


class CapturedText:
    """What a ``capture_native_output`` block captured; ``text`` is filled when it exits."""

    def __init__(self) -> None:
        self.text = ""
        self._threads = {threading.get_ident()}
        self._parts: list[str] = []

    @contextlib.contextmanager
    def include_this_thread(self) -> Iterator[None]:
        """Capture what the calling thread writes to ``sys.stdout``/``sys.stderr`` in the block
        (for a worker thread that runs traced code on the capturing thread's behalf)."""
        ident = threading.get_ident()
        self._threads.add(ident)
        try:
            yield
        finally:
            self._threads.discard(ident)

    def _owns_current_thread(self) -> bool:
        ident = threading.get_ident()
        return ident in self._threads or not _started_by_python(ident)

    def _python_text(self) -> str:
        return "".join(self._parts)


@contextlib.contextmanager
def capture_native_output() -> Iterator[CapturedText]:
    """Capture fds 1 and 2 and this thread's (and TensorFlow's threads') Python-level output.

    Everything is restored on exit, on error and on ``KeyboardInterrupt`` alike.
    """
    result = CapturedText()
    start = _join()
    try:
        proxies = _install_proxies(result)
        try:
            yield result
        finally:
            _remove_proxies(proxies)
    finally:
        result.text = _leave(start) + result._python_text()


# -- the fd redirect, shared by overlapping captures -----------------------------------------
def _join() -> int:
    """Enter the shared fd redirect (starting it if needed); the sink offset to read from."""
    global _hub, _users
    with _STATE:
        if _hub is None:
            _hub = _FdHub()
            start = 0
        else:
            start = _hub.sync()
        _users += 1
        return start


def _leave(start: int) -> str:
    """Leave the shared redirect (the last one out restores the fds); the text since ``start``."""
    global _hub, _users
    with _STATE:
        hub = _hub
        assert hub is not None
        _users -= 1
        if _users == 0:
            _hub = None
            end = hub.stop()
        else:
            _flush_streams()
            end = hub.sync()
        try:
            return hub.read(start, end)
        finally:
            if _users == 0:
                hub.close()


class _FdHub:
    """fds 1 and 2 redirected, for as long as captures overlap: straight into a temporary file
    (the helper's, which it reads back after a crash; a file of our own when no helper runs)."""

    def __init__(self) -> None:
        _flush_streams()
        self.saved = {fd: os.dup(fd) for fd in (1, 2)}
        self.file = None
        self.helper = _running_helper()
        if self.helper is not None:
            sink = self.helper.sink.fileno()
            os.ftruncate(sink, 0)  # the file outlives captures: each redirect starts it empty
            os.lseek(sink, 0, os.SEEK_SET)
            if self.helper.command(b"B") is None:
                self.helper = None
        if self.helper is None:
            self.file = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115 (closed in close())
        target = self._sink()
        try:
            for fd in (1, 2):
                os.dup2(target, fd)
        except BaseException:
            self.stop()
            self.close()
            raise

    def sync(self) -> int:
        """Everything written to fds 1 and 2 so far is in the file (C stdio flushed): its size."""
        _flush_c_stdio()
        return os.fstat(self._sink()).st_size

    def stop(self) -> int:
        """Put the original fds 1 and 2 back; the final size of the file."""
        _flush_streams()
        for fd, copy in self.saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        self.saved = {}
        if self.helper is not None:
            self.helper.command(b"E")  # no crash report needed any more
        return os.fstat(self._sink()).st_size

    def _sink(self) -> int:
        return self.file.fileno() if self.file is not None else self.helper.sink.fileno()

    def read(self, start: int, end: int) -> str:
        data = os.pread(self._sink(), end - start, start) if end > start else b""
        return data.decode("utf-8", errors="replace")

    def write_original(self, fd: int, data: bytes) -> None:
        """Write to what fd 1 or 2 was before the redirect (for threads that are not traced)."""
        view = memoryview(data)
        while view:
            view = view[os.write(self.saved[fd], view) :]

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


class _Helper:
    """A small process that holds the redirect's file open, one per process for its lifetime
    (started on the first capture), to report its last output after a crash.

    Commands on its control pipe, each answered with ``ok``: ``B`` (a capture begins), ``E``
    (it ended). If this process goes away while a capture is on (no ``E``: it crashed), the
    helper writes the end of the file to the original stderr.
    """

    def __init__(self) -> None:
        if not sys.executable:
            raise OSError("no Python interpreter to run the helper")
        self.owner = os.getpid()
        self.sink = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115 (closed in close())
        control_r, self.control = os.pipe()
        self.acks, ack_w = os.pipe()
        crash = os.dup(_crash_fd(2))
        passed = (control_r, ack_w, self.sink.fileno(), crash)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _HELPER, *map(str, passed)]
                + [str(CRASH_TAIL_BYTES)],
                pass_fds=passed,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=crash,
                # Its own session: a Ctrl-C in a terminal, or a kernel interrupt sent to the
                # kernel's process group, must not stop it.
                start_new_session=True,
            )
        except BaseException:
            self.close()
            raise
        finally:
            for fd in (control_r, ack_w, crash):
                os.close(fd)

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is None

    def command(self, command: bytes) -> bool | None:
        """Send ``command``; ``True`` once it answers (``None`` if it does not)."""
        try:
            os.write(self.control, command)
            reply = b""
            replies = select.poll()  # not select(): fds above 1023 are fine
            replies.register(self.acks, select.POLLIN)
            while not reply.endswith(b"\n"):
                if not replies.poll(_SYNC_TIMEOUT_S * 1000):
                    return None
                chunk = os.read(self.acks, 64)
                if not chunk:
                    return None
                reply += chunk
            return True if reply == b"ok\n" else None
        except OSError:
            return None

    def close(self) -> None:
        """Close our ends; the helper sees its control pipe close and exits."""
        for name in ("control", "acks"):
            fd = getattr(self, name, -1)
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, name, -1)
        self.sink.close()
        process = getattr(self, "process", None)
        if process is not None and self.owner == os.getpid():
            try:
                process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


_helper: _Helper | None = None


def _running_helper() -> _Helper | None:
    """This process's helper, started (again) if needed; ``None`` if none can run."""
    global _helper
    if _helper is not None and not _helper.alive():
        if _helper.owner == os.getpid():
            _helper.close()
        _helper = None
    if _helper is None:
        try:
            _helper = _Helper()
        except OSError:  # no interpreter to spawn, no fds left: captures use a plain file
            return None
    return _helper


def _stop_helper() -> None:
    global _helper
    if _helper is not None and _helper.owner == os.getpid():
        _helper.close()
    _helper = None


def _forget_after_fork() -> None:
    """In a forked child: the parent's helper and lock are not ours."""
    global _helper, _STATE
    _helper = None
    _STATE = threading.RLock()


atexit.register(_stop_helper)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def _crash_fd(saved_stderr: int) -> int:
    """Where the helper writes if this process dies mid-trace: the original stderr.

    In a Jupyter kernel that forwards fd 2 into the cell, fd 2 is a pipe read by a thread of
    the kernel, which dies with it: use the kernel's own copy of its original stderr (its log)
    instead.
    """
    for stream in (sys.stderr, sys.__stderr__):
        while isinstance(stream, _StreamProxy):
            stream = stream._inner
        copy = getattr(stream, "_original_stdstream_copy", None)
        if isinstance(copy, int) and copy >= 0:
            return copy
    return saved_stderr


# The helper (see _Helper), run as `python -I -S -c`: standard library only.
_HELPER = r"""
import os, select, signal, sys

signal.signal(signal.SIGINT, signal.SIG_IGN)
control, ack, sink, crash, limit = (int(a) for a in sys.argv[1:6])
parent = os.getppid()
active = False


def write_all(fd, chunk):
    view = memoryview(chunk)
    while view:
        view = view[os.write(fd, view):]


def crashed():
    try:
        size = os.fstat(sink).st_size
        last = os.pread(sink, limit, max(0, size - limit))
    except OSError:
        last = b""
    note = (
        b"\n[tfplace_widget] This process ended while TensorFlow was tracing. "
        b"The last output it wrote (captured for the trace log):\n"
    )
    try:
        write_all(crash, note + last + (b"" if last.endswith(b"\n") else b"\n"))
    except OSError:
        pass


watched = select.poll()
watched.register(control, select.POLLIN)
while True:
    ready = watched.poll(500)
    command = os.read(control, 1) if ready else None
    if command:
        active = command != b"E"
        os.write(ack, b"ok\n")
    elif command == b"" or os.getppid() != parent:
        if active:
            crashed()
        break
"""


# -- sys.stdout / sys.stderr -------------------------------------------------------------------
class _StreamProxy:
    """Stands in for ``sys.stdout``/``sys.stderr`` while a capture is active.

    Writes of the capture's threads go into it; all others go on to the stream it replaced.
    Once the capture has ended it only forwards, and puts that stream back in ``sys`` the
    first time it is used there (when a ``redirect_stdout`` of the user's restored it late).
    """

    def __init__(self, name: str, inner: Any, capture: CapturedText) -> None:
        self._name = name
        self._inner = inner
        self._capture: CapturedText | None = capture

    def write(self, text: str) -> int:
        capture = self._capture
        if capture is not None and capture._owns_current_thread():
            capture._parts.append(text)
            return len(text)
        if capture is None and getattr(sys, self._name, None) is self:
            with _STATE:
                if getattr(sys, self._name, None) is self:
                    _retire(self)
                    setattr(sys, self._name, self._inner)
        return _forward(self._inner, text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        capture = self._capture
        if capture is None or not capture._owns_current_thread():
            self._inner.flush()

    def __getattr__(self, name: str) -> Any:
        if name in ("_name", "_inner", "_capture"):  # not set yet: never recurse
            raise AttributeError(name)
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"<tfplace_widget capture of {self._inner!r}>"


def _forward(stream: Any, text: str) -> int:
    """Write ``text`` where ``stream`` would, past the fd redirect when it writes to fd 1/2."""
    if isinstance(stream, _StreamProxy):
        return stream.write(text)
    fd = _fd_of(stream)
    if fd in (1, 2):
        with _STATE:
            if _hub is not None:
                encoding = getattr(stream, "encoding", None) or "utf-8"
                try:
                    data = text.encode(encoding, getattr(stream, "errors", None) or "strict")
                except (UnicodeError, LookupError):
                    data = text.encode("utf-8", "replace")
                _hub.write_original(fd, data)
                return len(text)
    return stream.write(text)


def _fd_of(stream: Any) -> int | None:
    try:
        return stream.fileno()
    except Exception:
        return None


def _install_proxies(capture: CapturedText) -> list[_StreamProxy]:
    with _STATE:
        proxies = []
        for name in ("stdout", "stderr"):
            current = getattr(sys, name, None)
            if current is None:
                continue
            proxy = _StreamProxy(name, current, capture)
            setattr(sys, name, proxy)
            proxies.append(proxy)
        return proxies


# Proxies taken out of ``sys`` stay referenced a while: print() (before Python 3.12) holds a
# borrowed reference to sys.stdout across its writes, so one freed mid-print would crash.
_RETIRED: collections.deque[_StreamProxy] = collections.deque(maxlen=64)


def _retire(proxy: _StreamProxy) -> None:
    _RETIRED.append(proxy)


def _remove_proxies(proxies: list[_StreamProxy]) -> None:
    """Put back what each proxy replaced; leave a stream the user put there meanwhile."""
    with _STATE:
        for proxy in proxies:
            proxy._capture = None
            _retire(proxy)
            current = getattr(sys, proxy._name, None)
            if current is proxy:
                setattr(sys, proxy._name, proxy._inner)
                continue
            node = current  # another capture's proxy on top of ours: take ours out of the chain
            while isinstance(node, _StreamProxy):
                if node._inner is proxy:
                    node._inner = proxy._inner
                    break
                node = node._inner


_ACTIVE_THREADS = getattr(threading, "_active", None)
_DUMMY_THREAD = getattr(threading, "_DummyThread", ())


def _started_by_python(ident: int) -> bool:
    """Whether thread ``ident`` was started with ``threading`` (not one of TensorFlow's)."""
    # threading._active, not current_thread(): that would register a dummy for a C thread.
    active = _ACTIVE_THREADS
    thread = threading.current_thread() if active is None else active.get(ident)
    return thread is not None and not isinstance(thread, _DUMMY_THREAD)


# -- flushing ---------------------------------------------------------------------------------
def _flush_streams() -> None:
    """Flush Python's streams and C's stdio buffers (TF ``printf``s the placement log)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    _flush_c_stdio()


def _flush_c_stdio() -> None:
    with contextlib.suppress(Exception):
        _libc().fflush(None)


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None)


# What TensorFlow's import wrote while :class:`_TensorFlowImport` captured it, until a trace
# takes it for its log (import_tensorflow).
_held_startup = ""


def import_tensorflow() -> tuple[Any, str]:
    """``(tensorflow, start-up text)``: TensorFlow imported with its start-up logging captured.

    TensorFlow's first import writes CPU-feature, oneDNN and CUDA-probing lines from C++ to the
    process's stderr, which in a notebook lands under whichever cell imported it. Every module
    here that needs TensorFlow gets it through this function, so the text goes into the trace's
    ``log`` instead. When TensorFlow was already imported, the text is what
    :func:`capture_tensorflow_import` kept of that import (once), else ``""``.
    """
    global _held_startup
    if "tensorflow" in sys.modules:
        import tensorflow

        with _STATE:
            text, _held_startup = _held_startup, ""
        return tensorflow, text
    with capture_native_output() as startup:
        import tensorflow
    return tensorflow, startup.text


class _TensorFlowImport:
    """A ``sys.meta_path`` finder that, once, runs the import of the top-level ``tensorflow``
    module with its output captured; every other import goes on to the next finder."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "tensorflow":
            return None
        stop_capturing_tensorflow_import()  # once: this import, whatever happens to it
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _CapturingLoader(spec.loader)
        return spec


class _CapturingLoader:
    """``loader``, but running the module's code inside :func:`capture_native_output`."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        global _held_startup
        startup = None
        try:
            with capture_native_output() as startup:
                self._loader.exec_module(module)
        except BaseException:
            # A failed import shows everything it wrote, where it would have without us.
            if startup is not None and startup.text:
                sys.stderr.write(startup.text)
            raise
        with _STATE:
            _held_startup += startup.text

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, ... for tracebacks
        return getattr(self._loader, name)


_finder: _TensorFlowImport | None = None


def capture_tensorflow_import() -> bool:
    """Keep TensorFlow's start-up lines (CPU features, oneDNN, CUDA probing, written from C++
    while ``import tensorflow`` runs) out of the notebook cell that imports it next: that
    import, and only that one, runs with its output captured, and the text goes into the
    ``log`` of the next trace. Nothing changes when TensorFlow is imported already, or when the
    user set ``TF_CPP_MIN_LOG_LEVEL`` (their setting decides what TensorFlow shows). A failed
    import still shows what it wrote. True when the next import will be captured."""
    global _finder
    with _STATE:
        if _finder is not None:
            return True
        if "tensorflow" in sys.modules or "TF_CPP_MIN_LOG_LEVEL" in os.environ:
            return False
        _finder = _TensorFlowImport()
        sys.meta_path.insert(0, _finder)
        return True


def stop_capturing_tensorflow_import() -> None:
    """Undo :func:`capture_tensorflow_import` if TensorFlow was not imported since."""
    global _finder
    with _STATE:
        if _finder is not None:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(_finder)
            _finder = None
