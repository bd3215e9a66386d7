"""Issue 11, nothing hung: Ctrl-C stops a trace within about a second, and a trace never waits
for another one that hangs.

Ctrl-C needs a process of its own (it interrupts the main thread): ``SCRIPT`` runs every
interrupt scenario once, in one fresh process (TensorFlow is imported once), and writes what
happened to a JSON file. A watchdog ends that process if a scenario hangs, so the tests here
fail in seconds rather than wait for a run that never returns. "Promptly" is ``PROMPT_S``
after the interrupt (it takes about 0.1 s here).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np
import pytest
from helpers import CTRL_C_AS_AT_A_TERMINAL, ignore_sigint

from tfplace_widget import TraceError

# Processes, sockets, signals and files, not where TensorFlow puts an op: CI runs them once,
# with oneDNN's default (.ci/run's oneDNN-off run leaves out the lifecycle marker).
pytestmark = pytest.mark.lifecycle

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
STARTED_TO_INTERRUPT_S = 0.5  # the run has been blocked this long when Ctrl-C comes
PROMPT_S = 3.0  # "within about a second" (0.1 s measured), with room for a loaded CI machine
HANG_S = 20  # a scenario that takes longer than this hangs

SCRIPT = r"""
import json, os, signal, sys, threading, time

import numpy as np
import tensorflow as tf

from tfplace_widget import trace_placement

HANG_S = float(sys.argv[1])
RESULTS = sys.argv[2]
ONLY = set(sys.argv[3:])  # to run some scenarios alone (when debugging)
results = {}


def report():
    # A file, not stdout: a hung trace may still hold fd 1.
    with open(RESULTS + ".part", "w") as handle:
        json.dump(results, handle)
    os.replace(RESULTS + ".part", RESULTS)


def watchdog(name):
    def fire():
        results[name] = "hung"
        report()
        os._exit(3)

    timer = threading.Timer(HANG_S, fire)
    timer.daemon = True
    timer.start()
    return timer


def interrupt_when(started, how):
    # Ctrl-C 0.5 s after the blocking run signalled that it started.
    def fire():
        if not started.wait(HANG_S):
            return
        time.sleep(STARTED_TO_INTERRUPT_S)
        fired.append(time.monotonic())
        if how == "signal":
            signal.raise_signal(signal.SIGINT)
        else:
            import _thread
            _thread.interrupt_main()

    fired = []
    threading.Thread(target=fire, daemon=True).start()
    return fired


def scenario(name, trace, how="signal"):
    if ONLY and name not in ONLY:
        return
    started = threading.Event()
    timer = watchdog(name)
    fired = interrupt_when(started, how)
    try:
        trace(started)
        results[name] = "finished"
    except KeyboardInterrupt:
        results[name] = {"after_s": time.monotonic() - fired[0] if fired else None}
    except BaseException as exc:
        results[name] = f"{type(exc).__name__}: {exc}"[:2000]
    timer.cancel()
    report()


def started_op(started):
    # A graph op that tells the test its run has begun.
    return tf.compat.v1.py_func(lambda: (started.set(), np.float32(0))[1], [], tf.float32)


def graph_dequeue(started):
    def build():
        with tf.control_dependencies([started_op(started)]):
            return tf.compat.v1.FIFOQueue(3, tf.float32, name="queue").dequeue(name="blocked")

    trace_placement(build)


def graph_while_loop(started):
    def build():
        with tf.control_dependencies([started_op(started)]):
            start = tf.constant(0, name="i0")
        return tf.while_loop(lambda i: i < 2**31 - 2, lambda i: i + 1, [start], name="long")

    trace_placement(build, warmup=0)


def good_graph():
    with tf.device("/cpu:0"):
        return tf.add(tf.ones((4,), name="A"), 1.0, name="after")


queue = tf.queue.FIFOQueue(3, tf.float32, name="eager_queue")


def function_dequeue(started):
    @tf.function
    def wait_for_an_item():
        begun = tf.py_function(lambda: (started.set(), 0.0)[1], [], tf.float32)
        with tf.control_dependencies([begun]):
            return queue.dequeue()

    trace_placement(wait_for_an_item, mode="function")


def function_while_loop(started):
    @tf.function
    def count():
        begun = tf.py_function(lambda: (started.set(), 0)[1], [], tf.int32)
        return tf.while_loop(lambda i: i < 2**31 - 2, lambda i: i + 1, [begun])

    trace_placement(count, mode="function")


@tf.function
def good_function(x):
    return tf.multiply(x, 2.0, name="doubled")


scenario("graph_dequeue", graph_dequeue)
scenario("graph_dequeue_interrupt_main", graph_dequeue, how="interrupt_main")
scenario("graph_while_loop", graph_while_loop)
timer = watchdog("graph_after")
results["graph_after"] = trace_placement(good_graph).device_of("after")
timer.cancel()
scenario("function_dequeue", function_dequeue)
scenario("function_while_loop", function_while_loop)
timer = watchdog("function_after")
trace = trace_placement(good_function, tf.ones((3,)))
results["function_after"] = trace.device_of("doubled")
timer.cancel()
results["streams"] = [sys.stdout is sys.__stdout__, sys.stderr is sys.__stderr__]
report()
""".replace("STARTED_TO_INTERRUPT_S", repr(STARTED_TO_INTERRUPT_S))
SCRIPT = CTRL_C_AS_AT_A_TERMINAL + SCRIPT


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What each interrupt scenario of ``SCRIPT`` did (its last reported state)."""
    folder = tmp_path_factory.mktemp("interrupt")
    script, results = folder / "interrupt.py", folder / "results.json"
    script.write_text(SCRIPT)
    run = subprocess.run(
        [sys.executable, str(script), str(HANG_S), str(results)],
        capture_output=True,
        text=True,
        timeout=6 * HANG_S + 60,
        preexec_fn=ignore_sigint,  # as a background `./dev test &` starts it: SCRIPT sets its own
    )
    assert results.exists(), f"no results (exit {run.returncode}): {run.stderr[-3000:]}"
    return json.loads(results.read_text())


def assert_interrupted_promptly(results: dict[str, Any], name: str) -> None:
    outcome = results.get(name, "not run: an earlier scenario hung")
    assert isinstance(outcome, dict), f"{name}: {outcome}"
    assert outcome["after_s"] is not None, f"{name}: interrupted before its run started"
    assert outcome["after_s"] < PROMPT_S, f"{name}: KeyboardInterrupt after {outcome}"


def test_ctrl_c_cancels_a_blocked_dequeue_promptly(interrupted):
    assert_interrupted_promptly(interrupted, "graph_dequeue")


def test_interrupt_main_cancels_a_blocked_dequeue_promptly_too(interrupted):
    """``_thread.interrupt_main()`` (what some frontends do) sends no signal at all."""
    assert_interrupted_promptly(interrupted, "graph_dequeue_interrupt_main")


def test_ctrl_c_stops_a_long_while_loop_promptly(interrupted):
    assert_interrupted_promptly(interrupted, "graph_while_loop")


def test_the_next_graph_trace_works_after_interrupts(interrupted):
    assert interrupted.get("graph_after") == CPU0, interrupted.get("graph_after")


def test_ctrl_c_cancels_a_function_mode_dequeue_promptly(interrupted):
    assert_interrupted_promptly(interrupted, "function_dequeue")


def test_ctrl_c_stops_a_function_mode_while_loop_promptly(interrupted):
    assert_interrupted_promptly(interrupted, "function_while_loop")


def test_the_next_function_trace_works_after_interrupts(interrupted):
    assert interrupted.get("function_after") == CPU0, interrupted.get("function_after")
    assert interrupted.get("streams") == [True, True]  # sys.stdout/stderr put back


def hang_in_another_thread(tf: Any, trace_placement: Any, warmup: int) -> Any:
    """Start a trace in another thread whose run blocks (in a py_func) until released; return
    ``(thread, release, outcome)`` once that run has started."""
    started, release = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def blocking() -> np.float32:
        started.set()
        release.wait(HANG_S)
        return np.float32(0)

    def hung_build():
        return tf.compat.v1.py_func(blocking, [], tf.float32, name="hang")

    def run() -> None:
        outcome["trace"] = trace_placement(hung_build, warmup=warmup)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(HANG_S), "the hung trace never started its run"
    return thread, release, outcome


def trace_in_a_thread(trace_placement: Any, build: Any) -> dict[str, Any]:
    """``trace_placement(build)`` in a thread, given ``PROMPT_S`` to end: its outcome."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["trace"] = trace_placement(build)
        except TraceError as exc:
            outcome["error"] = exc

    began = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(PROMPT_S)
    outcome["waited_s"] = time.monotonic() - began
    return outcome


def good_builder(tf):
    """A graph builder whose op ``good`` lands on CPU:0."""

    def good_build():
        return tf.add(tf.ones((4,), name="A"), 1.0, name="good")

    return good_build


def test_a_trace_does_not_wait_for_a_hung_trace_in_another_thread(tf, trace_placement):
    """One trace hangs in another thread (in its warm-up run); a second trace runs to its end
    meanwhile instead of waiting on a lock the first holds."""

    good_build = good_builder(tf)

    hung, release, hung_outcome = hang_in_another_thread(tf, trace_placement, warmup=1)
    try:
        good = trace_in_a_thread(trace_placement, good_build)
        assert "trace" in good, f"the trace waited for the hung one: {good}"
        assert good["trace"].device_of("good") == CPU0
        assert hung.is_alive()  # it really ran while the other one hung
    finally:
        release.set()
        hung.join(HANG_S)
    assert "hang" in set(hung_outcome["trace"].ops["op"])


def test_a_trace_during_another_traced_run_fails_at_once_and_says_why(tf, trace_placement):
    """TensorFlow's profiler records one traced run at a time: while another trace's traced run
    hangs, a trace is a prompt TraceError that says so, not a wait."""

    good_build = good_builder(tf)

    hung, release, _ = hang_in_another_thread(tf, trace_placement, warmup=0)
    try:
        second = trace_in_a_thread(trace_placement, good_build)
        assert "error" in second, f"no prompt error: {second}"
        assert "Another trace is in its traced run" in str(second["error"])
        assert hung.is_alive()
    finally:
        release.set()
        hung.join(HANG_S)
    assert trace_placement(good_build).device_of("good") == CPU0
