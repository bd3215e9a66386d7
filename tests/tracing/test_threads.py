"""TF2 traces from several threads at once (issue 31, High 1): each trace holds exactly its own
function's ops (the traces are serialised), and a trace started inside a running one is refused,
saying so. Real TensorFlow, in a fresh process bounded in time."""

from __future__ import annotations

import json

from helpers import run_python

TWO_THREADS = r"""
import json, threading
import tensorflow as tf
from tfplace_widget import trace_placement
from tfplace_widget import TraceError

def make(kind):  # the same function name in both threads: `step`
    if kind == "a":
        @tf.function
        def step(x):
            return tf.sin(x, name="only_a") * 2.0
    else:
        @tf.function
        def step(x):
            return tf.cos(x, name="only_b") + 1.0
    return step

def ops(kind):
    return sorted(trace_placement(make(kind), tf.constant([1.0, 2.0])).ops["op"])

alone = {kind: ops(kind) for kind in "ab"}
together = []
def work(kind, barrier, out):
    barrier.wait()
    try:
        out[kind] = ops(kind)
    except Exception as exc:
        out[kind] = f"{type(exc).__name__}: {exc}"
for _ in range(4):
    barrier, out = threading.Barrier(2), {}
    threads = [threading.Thread(target=work, args=(kind, barrier, out)) for kind in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    together.append(out)

def outer(x):
    trace_placement(make("b"), x)
    return tf.sin(x)
try:
    trace_placement(outer, tf.constant([1.0]), mode="function")
    nested = "traced"
except TraceError as exc:
    nested = str(exc)
print("RESULT" + json.dumps({"alone": alone, "together": together, "nested": nested}))
"""


def test_two_threads_each_get_their_own_ops_and_a_nested_trace_is_refused() -> None:
    done = run_python(TWO_THREADS, timeout=240)  # TimeoutExpired: the traces block each other
    result = json.loads(done.stdout.split("RESULT", 1)[1])
    alone = result["alone"]
    assert "only_a" in alone["a"] and "only_b" in alone["b"], alone
    for out in result["together"]:
        assert out == alone, (out, alone)  # not the other thread's ops, nor a false error
    assert "Another trace is running in this thread" in result["nested"], result["nested"]
