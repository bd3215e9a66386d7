"""``xla_recompile`` on real XLA:CPU runs (issue 23): a ``jit_compile=True`` function fed a
batch of another shape each call (a ``tf.data`` iterator read inside the traced callable; the
function is traced once, its ``input_signature`` has a ``None`` dimension) is compiled again in
every traced step, and the finding says so; the same function fed one shape is compiled once,
in the warm-up, and gets none. A saved trace keeps the finding as computed, but not the counts behind it.
``xla_outside``: a ``set_jit`` auto-clustered function (in a process of its own, for
``TF_XLA_FLAGS``) whose ``tf.py_function`` and string op XLA left outside its cluster.
Everything asserted is read from the trace."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tfplace_widget._model.columns import FINDING_KINDS

STEPS = 3


def _traced(tf, trace_placement, varying: bool):
    # one trace for every shape: what the message says does not stop XLA compiling each
    @tf.function(jit_compile=True, input_signature=[tf.TensorSpec([None, 8], tf.float32)])
    def step(x):
        return tf.reduce_sum(tf.matmul(x, x, transpose_b=True) + 1.0, name="total")

    rows = (lambda n: n * 3) if varying else (lambda n: n * 0 + 3)
    dataset = tf.data.Dataset.range(1, 100).map(lambda n: tf.ones([rows(n), 8]))
    batches = iter(dataset)

    def loop():
        return step(next(batches))

    trace = trace_placement(loop, steps=STEPS, mode="function")
    if trace.xla.empty:
        pytest.skip("this TensorFlow's profile records no XLA instruction (TF 2.16)")
    assert step.experimental_get_tracing_count() == 1
    return trace


@pytest.fixture(scope="module")
def varying(tf, trace_placement):
    return _traced(tf, trace_placement, varying=True)


@pytest.fixture(scope="module")
def fixed(tf, trace_placement):
    return _traced(tf, trace_placement, varying=False)


def _recompiles(trace):
    findings = trace.findings
    return findings[findings["kind"] == "xla_recompile"]


def test_a_cluster_fed_new_shapes_is_reported_as_recompiled(varying):
    assert "xla_recompile" in FINDING_KINDS
    found = _recompiles(varying)
    assert len(found) == 1, varying.findings[["kind", "message"]]
    finding = found.iloc[0]
    cluster = varying.xla["cluster"].iloc[0]
    counts = varying.xla.attrs["compiles"][cluster]
    evidence = finding["evidence"]
    # every traced step got a new shape: a compilation and a program of its own
    assert evidence["compiles"] == counts["compiles"] == STEPS
    assert evidence["ran"] == counts["ran"] == STEPS
    assert evidence["programs"] == counts["programs"] >= STEPS + 1  # and the warm-up's
    assert evidence["compile_us"] == counts["compile_us"] > 0
    assert evidence["duration_us"] == varying.xla["duration_us"].sum()
    message = finding["message"]
    assert f"cluster {cluster} {STEPS} times" in message
    assert f"{evidence['compile_us']:,.0f} µs of compiling" in message
    assert "pad" in message and "input_signature" in message
    # the finding is about the cluster's ops, as trace.ops lists them
    members = varying.ops[(varying.ops["how"] == "xla") & (varying.ops["function"] == cluster)]
    assert finding["ops"] == members["op"].tolist() and "total" in finding["ops"]
    expected = "high" if evidence["compile_us"] > evidence["duration_us"] else "medium"
    assert finding["severity"] == expected


def test_a_cluster_fed_one_shape_is_not(fixed):
    assert _recompiles(fixed).empty, fixed.findings[["kind", "message"]]
    counts = fixed.xla.attrs["compiles"][fixed.xla["cluster"].iloc[0]]
    assert counts["compiles"] == 0 and counts["ran"] == 1  # compiled in the warm-up only
    # found, listed or not: beside the step's other ops the cluster's few µs can fall under
    # the material share on a loaded machine (CI once listed only the cpu_fallback)
    assert "xla_time" in set(fixed.all_findings["kind"])


def test_a_loaded_trace_keeps_the_saved_finding_and_recomputes_none(varying, tmp_path):
    from tfplace_widget import PlacementTrace
    from tfplace_widget._analyses.findings import find_findings

    saved = _recompiles(varying)["message"].tolist()
    loaded = PlacementTrace.load(varying.save(tmp_path / "recompiled.tfplace"))
    assert _recompiles(loaded)["message"].tolist() == saved  # the findings the file holds
    # the counts are not in the file: computed again, nothing is claimed
    assert "compiles" not in loaded.xla.attrs
    recomputed = find_findings(loaded)
    assert "xla_recompile" not in set(recomputed["kind"])
    assert "xla_time" in set(recomputed["kind"])


# Auto-clustering clusters CPU ops only with this flag in the environment before TensorFlow
# starts: the run is a process of its own. It traces a function whose py_function and string
# op XLA cannot compile, and saves the trace with its findings.
OUTSIDE_CHILD = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    from tfplace_widget import trace_placement

    tf.config.optimizer.set_jit(True)

    @tf.function
    def f(x):
        y = tf.nn.relu(tf.matmul(x, x, name="mm") + 1.0, name="act")
        z = tf.py_function(lambda a: a * 2.0, [y], tf.float32, name="host_cb")
        s = tf.strings.as_string(tf.reduce_sum(z), name="as_str")
        return tf.reduce_sum(tf.tanh(z, name="th") * 3.0, name="tot"), s

    trace = trace_placement(f, tf.random.normal((64, 64)), steps=2)
    trace.findings
    trace.save(sys.argv[1] + "/outside.tfplace")
    """
)


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    folder = tmp_path_factory.mktemp("outside")
    done = subprocess.run(
        [sys.executable, "-c", OUTSIDE_CHILD, str(folder)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TF_XLA_FLAGS": "--tf_xla_cpu_global_jit"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    from tfplace_widget import PlacementTrace

    trace = PlacementTrace.load(folder / "outside.tfplace")
    if trace.xla.empty:
        pytest.skip("this TensorFlow's profile records no XLA instruction (TF 2.16)")
    return trace


def test_ops_auto_clustering_left_outside_are_named(outside):
    from tfplace_widget._analyses.findings import find_findings

    assert "xla_outside" in FINDING_KINDS
    ops = outside.ops
    clustered = ops[ops["how"] == "xla"]
    assert len(clustered) and clustered["reason"].str.contains("auto-clustering").all()
    left = ops[ops["how"].isin(["explicit", "implicit"])]
    callback = left[left["type"] == "EagerPyFunc"]["op"].tolist()
    assert callback == ["host_cb"]  # TensorFlow left the py_function out
    for findings in (outside.findings, find_findings(outside)):  # saved, and found again
        found = findings[findings["kind"] == "xla_outside"]
        assert len(found) == 1, findings[["kind", "message"]]
        finding = found.iloc[0]
        assert finding["ops"][0] == "host_cb" and finding["severity"] == "medium"
        assert not set(finding["ops"]) & set(clustered["op"])  # none of them XLA's
        assert set(finding["ops"]) <= set(left["op"])
        assert "as_str" in finding["ops"]  # the string op stayed outside too
        assert finding["evidence"]["clustered"] == len(clustered)
        assert finding["evidence"]["outside"] == len(finding["ops"])
        message = finding["message"]
        assert "host_cb (tf.py_function)" in message and "cannot compile" in message
        for cluster in set(clustered["function"]):
            assert cluster in message


def test_a_jit_compile_function_has_nothing_outside(varying, fixed):
    for trace in (varying, fixed):  # the caller's iterator op is no op XLA left out
        assert "xla_outside" not in set(trace.findings["kind"])
