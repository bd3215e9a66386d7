"""A run and its prediction say each placer rule in the same words (issue 32: one explainer).

Without GPUs the prediction is the placement TensorFlow made (tests/analyses/test_predict.py);
where both pick the same rule for an op, its reason must read the same in the trace and in
the prediction: the sentences are written once, in tfplace_widget/_explain/rules.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from tfplace_widget import predict_placement, trace_placement

CPUS = {"CPU": 3}


def rules_graph() -> Any:
    """One op per rule both explainers can see on this machine."""
    import tensorflow as tf

    with tf.device("/cpu:1"):
        exact = tf.constant([1.0, 2.0], name="exact")  # an honoured full request
    with tf.device("/cpu:*"):
        partial = tf.multiply(exact, 2.0, name="partial")  # a partial spec, honoured
    with tf.device("/gpu:0"):
        moved = tf.add(partial, 1.0, name="moved")  # no such device: soft placement
    with tf.device("/cpu:2"):
        weights = tf.Variable(1.0, name="weights")
    read = tf.identity(weights.read_value(), name="read")  # the read goes with its variable
    overridden = tf.add(moved, 3.0, name="overridden")  # its request comes from overrides=
    return [read, tf.identity(overridden, name="out")]


@pytest.fixture(scope="module")
def both() -> tuple[Any, Any]:
    trace = trace_placement(rules_graph, device_count=CPUS, overrides={"overridden": "/cpu:2"})
    return trace, predict_placement(trace, gpus=0)


@pytest.mark.parametrize(
    ("op", "how", "words"),
    [
        ("exact", "explicit", "placed exactly there (CPU:1)"),
        ("partial", "explicit", "(a partial device spec) with tf.device; the placer chose"),
        ("moved", "soft", "soft placement moved it to"),
        ("Read/ReadVariableOp", "colocated", "shares a resource/ref edge with weights"),
        ("overridden", "explicit", "through overrides ('overridden'); placed exactly there"),
    ],
)
def test_a_rule_reads_the_same_in_the_trace_and_its_prediction(
    both: tuple[Any, Any], op: str, how: str, words: str
) -> None:
    trace, prediction = both
    ran = trace.ops.set_index("op").loc[op]
    predicted = prediction.ops.set_index("op").loc[op]
    assert (ran.how, predicted.how) == (how, how)
    assert predicted.device == ran.device  # the placement TensorFlow made
    assert words in ran.reason
    assert predicted.reason.replace("does not exist there", "does not exist here") == ran.reason
