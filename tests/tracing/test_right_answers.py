"""Issue 11: graph builders that TensorFlow's Session runs fine are traced, with the right ops.

Every trace here is a real ``tf.compat.v1.Session`` run (``device_count={"CPU": 2}``).
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import CPU1, TWO_CPUS, op_row


def test_a_variable_initialised_from_a_fed_placeholder_is_traced(tf, trace_placement):
    """The variable initializers run with the feeds: ``v``'s initial value is the fed ``x``."""
    v1 = tf.compat.v1

    def build():
        x = v1.placeholder(tf.float32, [2], name="x")
        with tf.device("/cpu:1"):
            v = tf.Variable(x, name="v")
            return tf.add(v, 1.0, name="out")

    trace = trace_placement(build, feed_dict={"x": [1.0, 2.0]}, device_count=TWO_CPUS)
    assert trace.device_of("out") == CPU1
    assert op_row(trace, "out")["how"] == "explicit"
    assert "v" in set(trace.ops["op"])  # the variable ran in the traced step


def test_a_variable_initialised_from_an_unfed_placeholder_says_the_initializer_needs_it(
    tf, trace_placement
):
    from tfplace_widget import TraceError

    def build():
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        return tf.add(tf.Variable(x, name="v"), 1.0, name="out")

    with pytest.raises(TraceError) as info:
        trace_placement(build)
    message = str(info.value)
    assert "Placeholder 'x' needs a value" in message and "feed_dict={'x': value}" in message
    assert "initial value" in message


@pytest.mark.parametrize("kind", ["sparse", "ragged", "nested"])
def test_a_returned_composite_tensor_is_fetched(tf, trace_placement, kind):
    """A Session fetches a SparseTensor (and any composite tensor): so does trace_placement."""

    def build():
        values = tf.constant([1.0, 2.0, 3.0], name="values")
        with tf.device("/cpu:1"):
            scaled = tf.multiply(values, 2.0, name="scaled")
        if kind == "ragged":
            return tf.RaggedTensor.from_row_lengths(scaled, [1, 2])
        sparse = tf.sparse.SparseTensor(
            indices=[[0, 0], [1, 1], [2, 2]], values=scaled, dense_shape=[3, 3]
        )
        return {"sparse": sparse, "dense": values} if kind == "nested" else sparse

    trace = trace_placement(build, device_count=TWO_CPUS)
    assert trace.device_of("scaled") == CPU1
    fetched = [op for op in trace.ops["op"] if op.startswith("_retval_")]
    assert any(op.startswith("_retval_scaled_") for op in fetched), fetched  # its values
    assert len(fetched) == {"sparse": 3, "ragged": 2, "nested": 4}[kind], fetched


def test_a_one_element_dataset_is_traced_with_warmup_zero(tf, trace_placement):
    """The fix the warm-up error names: with ``warmup=0`` the traced step gets the element."""

    def build():
        dataset = tf.data.Dataset.from_tensors(tf.constant([1.0, 2.0], name="element"))
        batch = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
        return tf.add(batch, 1.0, name="out")

    trace = trace_placement(build, warmup=0)
    assert {"IteratorGetNext", "out"} <= set(trace.ops["op"])


def test_feeding_one_of_two_fetches_says_its_ops_did_not_run(tf, trace_placement):
    def build():
        a = tf.add(tf.constant(1.0, name="one"), 1.0, name="a")
        b = tf.multiply(tf.constant(2.0, name="two"), 3.0, name="b")
        return [a, b]

    trace = trace_placement(build, feed_dict={"a": 5.0})
    ops = set(trace.ops["op"])
    assert "b" in ops and "a" not in ops  # the Session handed the fed 'a' straight back
    assert len(trace.notes) == 1
    note = trace.notes[0]
    assert "'a:0'" in note and "fed" in note and "not in this trace" in note
    assert note in trace.log


@pytest.mark.parametrize("outside", ["eager tensor", "keras variable"])
def test_auto_mode_falls_back_to_function_mode_for_an_eager_tensor_returned_with_graph_ops(
    tf, trace_placement, outside
):
    if outside == "keras variable":  # Keras 3: not a tf.Variable, always made eagerly
        keras = pytest.importorskip("keras")
        layer = keras.layers.Dense(2)
        layer.build((None, 3))
        made_before = layer.kernel
    else:
        made_before = tf.constant(3.0)

    def build():
        return [tf.constant(1.0, name="made_here"), made_before]

    trace = trace_placement(build)
    assert trace.mode == "function"
    assert "traced it as TF2 code (mode='function') instead" in trace.log


def _builds_graphs_of_its_own(tf: Any) -> Any:
    def build():
        scratch = tf.Graph()  # a graph made inside the builder may be written freely
        with scratch.as_default():
            tf.constant(1.0, name="scratch_op")
        doubled = tf.data.Dataset.range(4).map(lambda x: x * 2)  # a FuncGraph TF makes
        first = tf.compat.v1.data.make_one_shot_iterator(doubled).get_next()
        counted = tf.while_loop(lambda i: i < 3, lambda i: i + 1, [tf.constant(0)])[0]
        return tf.add(tf.cast(first, tf.int32), counted, name="total")

    return build


def test_graphs_the_builder_makes_itself_are_not_outer_graphs(tf, trace_placement):
    trace = trace_placement(_builds_graphs_of_its_own(tf), warmup=0)
    assert "total" in set(trace.ops["op"])
    assert "scratch_op" not in set(trace.ops["op"])
