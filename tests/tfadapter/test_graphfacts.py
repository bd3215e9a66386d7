"""A ``GraphDef``'s facts: the resource and ref edges read from the registered OpDefs, without
importing the graph (importing 100k nodes took about 10 s), the same as a ``tf.Graph``'s."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfplace_widget._tfadapter import graphfacts


def _v1_graph() -> tf.Graph:
    """Ref and resource variables, a lookup table, v1 control flow, a queue, IdentityN."""
    graph = tf.Graph()
    with graph.as_default():
        ref = tf.compat.v1.Variable(1.0, use_resource=False, name="ref_var")
        res = tf.compat.v1.Variable(2.0, use_resource=True, name="res_var")
        total = ref.assign_add(1.0) + res.read_value()
        res.assign(total)
        table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer([1, 2], [3, 4]), -1)
        table.lookup(tf.constant([1]))
        flag = tf.compat.v1.placeholder(tf.bool, name="flag")
        tf.compat.v1.cond(flag, lambda: res.read_value() * 2, lambda: tf.identity(ref) + 1.0)
        tf.queue.FIFOQueue(3, tf.float32).enqueue([total])
        tf.identity_n([ref, res.handle, total])
    return graph


def _keras_step_graph() -> tf.Graph:
    model = tf.keras.Sequential([tf.keras.layers.Dense(4), tf.keras.layers.Dense(2)])
    model.build((None, 3))

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x))
        for var, grad in zip(
            model.trainable_variables,
            tape.gradient(loss, model.trainable_variables),
            strict=True,
        ):
            var.assign_sub(0.1 * grad)
        return loss

    return step.get_concrete_function(tf.TensorSpec([2, 3])).graph


@pytest.mark.parametrize("make", [_v1_graph, _keras_step_graph], ids=["v1", "keras_step"])
def test_a_graph_defs_resource_edges_are_the_graphs_without_importing_it(make, monkeypatch):
    graph = make()
    want = graphfacts.facts_from_graph(graph)
    assert want.resource_inputs  # the graphs read variables: there is something to compare

    def no_import(*args, **kwargs):
        raise AssertionError("the GraphDef was imported")

    monkeypatch.setattr(tf.graph_util, "import_graph_def", no_import)
    got = graphfacts.facts_from_graph(graph.as_graph_def())
    assert got.resource_inputs == want.resource_inputs
    assert got.types == want.types and got.inputs == want.inputs


def test_a_node_with_no_registered_op_def_sends_the_graph_def_to_the_import():
    """A node whose type TensorFlow does not register (a function of the graph's library, a
    custom op) may output anything: the OpDefs cannot say, so the graph is imported and asked."""
    graph_def = _v1_graph().as_graph_def()
    assert graphfacts._output_dtypes_by_op_defs(graph_def) is not None
    graph_def.node.add(name="call", op="a_library_function_1234", input=["res_var"])
    assert graphfacts._output_dtypes_by_op_defs(graph_def) is None
