"""Issue 11, nothing lost: what a failed trace printed stays on its TraceError (and in the
panel); the capture takes only what the trace writes, never another thread's output, and puts
``sys.stdout``/``sys.stderr`` back exactly; a crash mid-trace still shows its message.

Scenarios that need a process of their own (a real fd 1, an abort) run a small script without
TensorFlow, in well under a second.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tfplace_widget import TraceError
from tfplace_widget._tfadapter.capture import capture_native_output

PRINTED = "value before the assert:"


# -- a failed run keeps what it printed --------------------------------------------------------
def printing_then_failing_builder(tf: Any, fail: dict | None = None) -> Any:
    """A graph builder whose run prints with tf.print, then fails an assert (or, with
    ``fail["now"]`` false, passes it)."""

    def build():
        value = -1.0 if fail is None or fail["now"] else 1.0
        x = tf.compat.v1.placeholder_with_default(value, [], name="x")
        said = tf.print(PRINTED, x, output_stream=sys.stderr, name="say")
        with tf.control_dependencies([said]):
            check = tf.debugging.assert_positive(x, message="x must be positive", name="check")
        with tf.control_dependencies([check]):
            return tf.identity(x, name="out")

    return build


def test_a_failed_graph_run_keeps_what_it_printed_on_the_error(tf, trace_placement):
    with pytest.raises(TraceError) as info:
        trace_placement(printing_then_failing_builder(tf))
    error = info.value
    assert f"{PRINTED} -1" in error.log  # all of it ...
    assert "out: (Identity): /job:localhost" in error.log  # ... placement lines included
    message = str(error)
    assert "x must be positive" in message  # what failed, as before
    assert message.rstrip().endswith(f"{PRINTED} -1")  # and its last lines
    assert "out: (Identity)" not in message  # not the routine placement lines


def test_a_failed_function_call_keeps_what_it_printed_on_the_error(tf, trace_placement):
    @tf.function
    def checked(x):
        tf.print("printed inside the function:", x)
        tf.debugging.assert_positive(x, message="checked wants a positive x")
        return x + 1.0

    with pytest.raises(TraceError) as info:
        trace_placement(checked, tf.constant(-2.0))
    error = info.value
    assert "checked wants a positive x" in str(error.__cause__)
    assert "printed inside the function: -2" in error.log
    assert "printed inside the function: -2" in str(error)


def test_the_panel_shows_what_a_failed_rerun_printed(tf):
    from tfplace_widget import show_placement

    fail = {"now": False}
    panel = show_placement(printing_then_failing_builder(tf, fail))
    shown = panel.trace
    fail["now"] = True
    assert panel.run() is None
    assert f"{PRINTED} -1" in panel.message.value
    assert "The last good result stays on screen." in panel.message.value
    assert panel.trace is shown


# -- sys.stdout and sys.stderr -----------------------------------------------------------------
@contextlib.contextmanager
def users_stdout() -> Iterator[io.StringIO]:
    """A fresh ``sys.stdout`` for the block, standing in for the notebook or terminal (set in
    the test itself: pytest puts its own capture in ``sys`` after fixtures are set up)."""
    before = sys.stdout
    stream = sys.stdout = io.StringIO()
    try:
        yield stream
    finally:
        sys.stdout = before


def print_in_a_user_thread(text: str) -> None:
    thread = threading.Thread(target=lambda: print(text))
    thread.start()
    thread.join()


def test_another_threads_print_during_a_capture_reaches_its_stream():
    with users_stdout() as terminal:
        with capture_native_output() as captured:
            print("from the tracing thread")
            print_in_a_user_thread("from the user's own thread")
        assert sys.stdout is terminal
    assert "from the user's own thread" in terminal.getvalue()
    assert "from the user's own thread" not in captured.text
    assert "from the tracing thread" in captured.text
    assert "from the tracing thread" not in terminal.getvalue()


def test_a_trace_in_a_thread_leaves_the_main_threads_prints_alone(tf, trace_placement):
    """While a trace runs in another thread, the main thread (not tracing) prints as usual."""
    started, release = threading.Event(), threading.Event()

    def build():
        def wait() -> Any:
            started.set()
            release.wait(30)
            return 0.0

        return tf.compat.v1.py_func(wait, [], tf.float64, name="waits")

    result: dict[str, Any] = {}
    with users_stdout() as terminal:
        thread = threading.Thread(target=lambda: result.update(trace=trace_placement(build)))
        thread.start()
        try:
            assert started.wait(30)
            print("the main thread prints while another thread traces")
        finally:
            release.set()
            thread.join(30)
    assert "the main thread prints while another thread traces" in terminal.getvalue()
    assert "the main thread prints" not in result["trace"].log


def test_tensorflows_own_threads_python_output_is_captured(tf, trace_placement):
    """A py_func runs in one of TensorFlow's threads, not one the user started: what it prints
    belongs to the trace (as TensorFlow's PySys_WriteStdout from its threads does)."""

    def build():
        def speak() -> Any:
            print("printed from TensorFlow's thread")
            return 0.0

        return tf.compat.v1.py_func(speak, [], tf.float64, name="speaks")

    with users_stdout() as terminal:
        trace = trace_placement(build, warmup=0)
    assert "printed from TensorFlow's thread" in trace.log
    assert "printed from TensorFlow's thread" not in terminal.getvalue()


def test_a_users_redirect_that_outlives_the_capture_is_never_left_on_a_dead_buffer():
    """The user's ``redirect_stdout`` starts during the capture and ends after it (in a
    notebook: another cell's context, or a thread)."""
    mine = io.StringIO()
    with users_stdout() as terminal:
        with capture_native_output():
            users = contextlib.redirect_stdout(mine)
            users.__enter__()
        assert sys.stdout is mine  # the capture ended but left the user's stream in place
        print("while the user's redirect is on")
        users.__exit__(None, None, None)
        print("after both")
        assert sys.stdout is terminal  # the stream is exactly what it was
    assert "while the user's redirect is on" in mine.getvalue()
    assert "after both" in terminal.getvalue()  # not lost in the capture's buffer


def test_a_stream_the_user_put_in_place_during_the_capture_stays():
    mine = io.StringIO()
    with users_stdout():
        with capture_native_output():
            sys.stdout = mine
        assert sys.stdout is mine
        print("to the user's stream")
    assert "to the user's stream" in mine.getvalue()


def test_streams_are_restored_exactly_even_on_error():
    err = sys.stderr
    with users_stdout() as terminal:
        with pytest.raises(ZeroDivisionError), capture_native_output():
            print("doomed")
            1 / 0  # noqa: B018
        assert sys.stdout is terminal and sys.stderr is err
    assert terminal.getvalue() == ""


def test_overlapping_captures_each_restore_their_part():
    """Captures in two threads that end in the opposite order they started."""
    err = sys.stderr
    second_started, first_done = threading.Event(), threading.Event()
    texts: dict[str, str] = {}

    def second() -> None:
        with capture_native_output() as captured:
            second_started.set()
            first_done.wait(10)
            print("second capture")
        texts["second"] = captured.text

    with users_stdout() as terminal:
        with capture_native_output() as first:
            thread = threading.Thread(target=second)
            thread.start()
            second_started.wait(10)
            print("first capture")
        first_done.set()
        thread.join(10)
        print("after both captures")
        assert sys.stdout is terminal and sys.stderr is err
    assert "first capture" in first.text and "second capture" in texts["second"]
    assert terminal.getvalue() == "after both captures\n"


def run_script(code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter (stdout and stderr pipes, like a terminal's log)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_a_user_threads_print_to_the_real_stdout_is_not_captured():
    """Outside a kernel sys.stdout writes to fd 1, which the capture redirects: another
    thread's print must still reach the original fd 1."""
    done = run_script(
        """
        import threading
        from tfplace_widget._tfadapter.capture import capture_native_output

        with capture_native_output() as captured:
            thread = threading.Thread(target=lambda: print("from the user's thread", flush=True))
            thread.start()
            thread.join()
        print("CAPTURED:", repr(captured.text))
        """
    )
    assert done.returncode == 0, done.stderr
    assert "from the user's thread\n" in done.stdout
    assert "CAPTURED: ''" in done.stdout


def test_an_abort_inside_a_capture_leaves_its_message_on_the_real_stderr():
    """A fatal C++ error (LOG(FATAL): a message on fd 2, then abort()) while fd 2 is captured:
    the message still reaches the process's original stderr (a kernel's log)."""
    done = run_script(
        """
        import ctypes, os
        from tfplace_widget._tfadapter.capture import capture_native_output

        with capture_native_output():
            message = b"F0000 check_op.cc:42] Check failed: the C++ side gave up\\n"
            ctypes.CDLL(None).write(2, message, len(message))
            os.abort()
        """
    )
    assert done.returncode != 0
    assert "Check failed: the C++ side gave up" in done.stderr
    assert "ended while TensorFlow was tracing" in done.stderr


def test_a_crash_message_goes_to_a_kernels_own_log(monkeypatch):
    """In a kernel that forwards fd 2 into the cell, the cell dies with the kernel: the
    message goes to the kernel's copy of its original stderr (its log) instead."""
    from tfplace_widget._tfadapter import capture

    class KernelStream(io.StringIO):
        _original_stdstream_copy = 17

    monkeypatch.setattr(sys, "stderr", KernelStream())
    assert capture._crash_fd(2) == 17
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.setattr(sys, "__stderr__", io.StringIO())
    assert capture._crash_fd(2) == 2
