"""``Explainer.explain_all`` (the fast path the frames use) agrees with ``explain`` op by op."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import CPU0, GPU0, TWO_CPUS

from tfplace_widget._explain.run import Explainer
from tfplace_widget._sources.frames import PlacementTrace
from tfplace_widget._tfadapter.graphfacts import facts_from_graph


def _mixed_builder(tf: Any) -> Any:
    """Every rule at once: explicit, partial, implicit, colocation, resource groups, soft."""
    v1 = tf.compat.v1

    def build():
        # Pairs of ops that share (type, device, request) but whose reasons name different
        # partners: a shortcut that ignored colocation or resource groups would mix them up.
        with tf.device("/cpu:1"):
            v = tf.Variable([1.0, 2.0], name="v")
            v_other = tf.Variable([5.0, 6.0], name="v_other")
            anchor = tf.constant([1.0, 2.0], name="anchor")
            anchor_other = tf.constant([3.0, 4.0], name="anchor_other")
        w = tf.Variable([3.0, 4.0], name="w")  # a resource group nobody asked for
        with tf.device("/cpu:0"):
            read = v.read_value()
            read_other = v_other.read_value()
        with tf.device("/cpu:0"), v1.colocate_with(anchor.op):
            follower = tf.identity(anchor, name="follower")
        with tf.device("/cpu:0"), v1.colocate_with(anchor_other.op):
            follower_other = tf.identity(anchor_other, name="follower_other")
        with tf.device("/gpu:0"):  # does not exist here: soft placement moves these
            soft_a = tf.add(read, 1.0, name="soft_a")
            soft_b = tf.add(read, 2.0, name="soft_b")
        with tf.device("/device:CPU:*"):
            partial = tf.add(follower, 1.0, name="partial")
        chain = tf.constant([0.0, 0.0], name="start")
        for i in range(12):  # many ops sharing one (type, device, request): the memo path
            with tf.device(f"/cpu:{i % 2}"):
                chain = tf.add(chain, anchor, name=f"chain_{i}")
            chain = tf.multiply(chain, 1.0, name=f"free_{i}")  # no request
        shape = tf.shape(chain, name="shape")
        lonely = tf.constant(3.0, name="lonely")  # no request: follows its consumer
        lonely_other = tf.constant(4.0, name="lonely_other")
        with tf.device("/cpu:1"):
            scaled = tf.multiply(lonely, 2.0, name="scaled")
            scaled_other = tf.multiply(lonely_other, 2.0, name="scaled_other")
        loop = tf.while_loop(lambda i: i < 3, lambda i: i + 1, [tf.constant(0)])
        others = [read_other, follower_other, scaled_other]
        return [soft_a, soft_b, partial, chain, shape, scaled, loop, w.read_value(), *others]

    return build


@pytest.fixture(scope="module", params=[False, True], ids=["as-built", "optimized"])
def mixed(request: Any, tf: Any, trace_placement: Any) -> tuple[PlacementTrace, Any]:
    """The traced run, and the facts of the same builder's graph (names are deterministic)."""
    build = _mixed_builder(tf)
    trace = trace_placement(build, device_count=TWO_CPUS, optimize=request.param)
    graph = tf.Graph()
    with graph.as_default():
        build()
    return trace, facts_from_graph(graph)


def _per_op(explainer: Explainer, names: list, types: list, devices: list) -> tuple:
    rows = [explainer.explain(n, t, d) for n, t, d in zip(names, types, devices, strict=True)]
    return tuple(list(column) for column in zip(*rows, strict=True)) if rows else ([], [], [])


def test_trace_columns_equal_explain_op_by_op(mixed):
    trace, facts = mixed
    ops = trace.ops
    assert {"explicit", "implicit", "colocated", "soft", "runtime"} <= set(ops["how"])
    names, types, devices = ops["op"].tolist(), ops["type"].tolist(), ops["device"].tolist()
    placed = dict(zip(names, devices, strict=True))
    explainer = Explainer(facts, placed, trace.devices, trace.inputs)
    fast = explainer.explain_all(names, types, devices)
    assert fast == _per_op(explainer, names, types, devices)
    # What the frames add after the explainer: the constant ReplicateConstantsPass replaced
    # after placement (anchor, read on both CPUs, as built) says so after its placer's reason,
    # and its copies' reasons are the pass's (tests/tracing/test_replicated_constants.py).
    shown = ops["reason"].tolist()
    expected = list(fast[2])
    for i, name in enumerate(names):
        if "/replicate/_" in name and "ReplicateConstantsPass made" in shown[i]:
            expected[i] = shown[i]
        elif "ReplicateConstantsPass replaced this constant" in shown[i]:
            assert shown[i].startswith(expected[i] + " After placement,"), name
            expected[i] = shown[i]
    assert (fast[0], fast[1], expected) == (
        ops["requested_device"].tolist(),
        [str(h) for h in ops["how"]],
        shown,
    )


def test_without_facts_and_on_a_gpu_machine(tf):
    graph = tf.Graph()
    with graph.as_default():
        words = tf.constant(["a", "b"], name="words")
        tf.strings.join([words, words], name="joined")
        with tf.device("/gpu:0"):
            tf.strings.join([words, words], name="asked_gpu")
            tf.constant(1.0, name="on_gpu")
        tf.constant(2.0, name="free")
    names = ["words", "joined", "asked_gpu", "on_gpu", "free", "_SOURCE", "send", "copy"]
    types = ["Const", "StringJoin", "StringJoin", "Const", "Const", "NoOp", "_Send", "MEMCPYHtoD"]
    devices = [CPU0, CPU0, CPU0, GPU0, GPU0, CPU0, GPU0, GPU0]
    placed = dict(zip(names, devices, strict=True))
    for facts in (facts_from_graph(graph), None):
        explainer = Explainer(facts, placed, [GPU0, CPU0], executed_inputs={})
        assert explainer.explain_all(names, types, devices) == _per_op(
            explainer, names, types, devices
        )
    assert Explainer(None, {}, [], {}).explain_all([], [], []) == ([], [], [])
