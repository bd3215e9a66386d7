"""``how`` and ``reason`` against what TensorFlow's placer really did on two CPU devices."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import CPU0, CPU1, GPU0, TWO_CPUS, op_row

from tfplace_widget._explain.run import (
    HOW_VALUES,
    Explainer,
    lacks_kernel,
)
from tfplace_widget._model.graphfacts import GraphFacts
from tfplace_widget._tfadapter.graphfacts import facts_from_graph
from tfplace_widget._tfadapter.registry import REGISTRY, registered_device_types


@pytest.fixture(scope="module")
def scopes_trace(tf: Any, trace_placement: Any) -> Any:
    """Nested tf.device scopes: inner specs merge over outer ones, None clears, "" does not."""

    def build():
        with tf.device("/cpu:1"):
            outer = tf.constant(1.0, name="outer")
            with tf.device("/cpu:0"):
                inner = tf.constant(2.0, name="inner")
            with tf.device(None):
                cleared = tf.constant(3.0, name="cleared")
            with tf.device(""):
                empty = tf.constant(4.0, name="empty_string")
            with tf.device("/device:CPU:*"):
                merged = tf.constant(5.0, name="merged_partial")
        with tf.device("/device:CPU:*"):
            partial = tf.constant(6.0, name="partial")
        with tf.device("/job:localhost"):
            job_only = tf.constant(7.0, name="job_only")
        with tf.device("/job:localhost/replica:0/task:0/cpu:1"):
            old_full = tf.constant(8.0, name="old_full")
        return [outer, inner, cleared, empty, merged, partial, job_only, old_full]

    return trace_placement(build, device_count=TWO_CPUS)


@pytest.fixture(scope="module")
def colocation_trace(tf: Any, trace_placement: Any) -> Any:
    def build():
        with tf.device("/cpu:1"):
            anchor = tf.constant([1.0, 2.0], name="anchor")
        with tf.device("/cpu:0"), tf.compat.v1.colocate_with(anchor.op):
            follower = tf.identity(anchor, name="follower")
            summed = tf.add(anchor, anchor, name="summed")
        return follower, summed

    return trace_placement(build, device_count=TWO_CPUS)


def _variable_builder(tf: Any) -> Any:
    def build():
        with tf.device("/cpu:1"):
            v = tf.Variable([1.0, 2.0], name="v")
        with tf.device("/cpu:0"):
            asked_elsewhere = v.read_value()  # Read/ReadVariableOp asks for CPU:0
        plain = tf.identity(v.value(), name="plain")  # a ReadVariableOp with no request
        return tf.identity(asked_elsewhere, name="out"), plain

    return build


@pytest.fixture(scope="module", params=[True, False], ids=["soft", "strict"])
def variable_trace(request: Any, tf: Any, trace_placement: Any) -> Any:
    return trace_placement(
        _variable_builder(tf), device_count=TWO_CPUS, soft_placement=request.param
    )


# -- explicit ---------------------------------------------------------------------------------
def test_explicit_full_and_old_style_requests(scopes_trace):
    outer = op_row(scopes_trace, "outer")
    assert (outer.device, outer.requested_device, outer.how) == (CPU1, "/device:CPU:1", "explicit")
    assert "placed exactly there" in outer.reason
    # TF normalises the old spelling in the NodeDef; the request is honoured as is.
    old = op_row(scopes_trace, "old_full")
    assert (old.device, old.how) == (CPU1, "explicit")
    assert old.requested_device == "/job:localhost/replica:0/task:0/device:CPU:1"


@pytest.mark.parametrize(
    ("name", "requested"), [("partial", "/device:CPU:*"), ("job_only", "/job:localhost")]
)
def test_partial_requests_take_the_first_matching_device(scopes_trace, name, requested):
    row = op_row(scopes_trace, name)
    assert (row.device, row.requested_device, row.how) == (CPU0, requested, "explicit")
    assert "partial device spec" in row.reason and "CPU:0" in row.reason


def test_nested_scopes_merge_field_by_field(scopes_trace):
    inner = op_row(scopes_trace, "inner")
    assert (inner.device, inner.requested_device, inner.how) == (CPU0, "/device:CPU:0", "explicit")
    # "/device:CPU:*" inside "/cpu:1" keeps the outer index: CPU:1.
    merged = op_row(scopes_trace, "merged_partial")
    assert (merged.device, merged.requested_device) == (CPU1, "/device:CPU:1")
    # tf.device("") changes nothing; tf.device(None) clears the whole stack.
    empty = op_row(scopes_trace, "empty_string")
    assert (empty.device, empty.requested_device, empty.how) == (CPU1, "/device:CPU:1", "explicit")
    cleared = op_row(scopes_trace, "cleared")
    assert (cleared.device, cleared.requested_device, cleared.how) == (CPU0, "", "implicit")


# -- implicit ---------------------------------------------------------------------------------
def test_implicit_goes_to_the_highest_priority_first_device(scopes_trace):
    cleared = op_row(scopes_trace, "cleared")
    assert "highest-priority" in cleared.reason and "CPU:0" in cleared.reason


def test_implicit_generator_follows_its_consumers(tf, trace_placement):
    """Placer heuristic: an op with no inputs moves to its consumers' shared device."""

    def build():
        source = tf.constant([1.0, 2.0], name="source")
        with tf.device("/cpu:1"):
            return tf.add(source, 1.0, name="consumer")

    trace = trace_placement(build, device_count=TWO_CPUS)
    source = op_row(trace, "source")
    assert (source.device, source.requested_device, source.how) == (CPU1, "", "implicit")
    assert "no inputs" in source.reason and "consumer" in source.reason
    assert trace.transfers["tensor"].tolist() == ["consumer:0"]  # no copy of source


def test_implicit_identity_follows_its_input(variable_trace):
    """Where this TensorFlow's placer puts a lone Identity with its input (not 2.16's), it
    runs with its read on CPU:1; else on the first device, CPU:0; the reason says which."""
    from tfplace_widget._tfadapter.probe import identity_follows_its_input

    follows = identity_follows_its_input()
    plain = op_row(variable_trace, "plain")
    assert (plain.device, plain.requested_device, plain.how) == (
        CPU1 if follows else CPU0,
        "",
        "implicit",
    )
    assert ("with its input" in plain.reason) == follows, plain.reason


# -- colocated --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["follower", "summed"])
def test_colocate_with_beats_the_enclosing_device_scope(colocation_trace, name):
    row = op_row(colocation_trace, name)
    # colocate_with sets the op's own device to the anchor's, whatever tf.device said.
    assert (row.device, row.requested_device, row.how) == (CPU1, "/device:CPU:1", "colocated")
    assert "anchor" in row.reason and "CPU:1" in row.reason


def test_resource_read_under_another_device_stays_with_its_variable(variable_trace):
    """A resource input pins the reader to the variable, even with soft placement off."""
    read = op_row(variable_trace, "Read/ReadVariableOp")
    assert (read.device, read.requested_device, read.how) == (CPU1, "/device:CPU:0", "colocated")
    assert "resource" in read.reason and "with v;" in read.reason
    unrequested = op_row(variable_trace, "ReadVariableOp")
    assert (unrequested.device, unrequested.requested_device, unrequested.how) == (
        CPU1,
        "",
        "colocated",
    )
    assert "with v," in unrequested.reason
    handle = op_row(variable_trace, "v")
    assert (handle.device, handle.how) == (CPU1, "explicit")
    # The Identity that read_value() adds under /cpu:0 is honoured: the value is copied over.
    transfers = variable_trace.transfers
    assert ["Read/ReadVariableOp:0", CPU1, CPU0] in transfers[
        ["tensor", "src_device", "dst_device"]
    ].values.tolist()


def test_resource_read_on_the_default_device_is_still_colocated(tf, trace_placement):
    """The variable asked for CPU:0 (also the default): its reader is there because of it."""

    def build():
        with tf.device("/cpu:0"):
            v = tf.Variable([1.0], name="v")
        return tf.identity(v.value(), name="r")

    trace = trace_placement(build, device_count=TWO_CPUS)
    read = op_row(trace, "ReadVariableOp")
    assert (read.device, read.how) == (CPU0, "colocated")
    assert "with v," in read.reason


def test_a_read_of_a_variable_nobody_placed_is_colocated_with_it(tf, trace_placement):
    """The variable goes where its kernels put it; the placer puts its read with it."""

    def build():
        v = tf.Variable([1.0], name="v")
        return tf.identity(v.value(), name="r")

    trace = trace_placement(build, device_count=TWO_CPUS)
    handle = op_row(trace, "v")
    assert (handle.device, handle.requested_device, handle.how) == (CPU0, "", "implicit")
    read = op_row(trace, "ReadVariableOp")
    assert (read.device, read.requested_device, read.how) == (CPU0, "", "colocated")
    assert "shares a resource/ref edge with v," in read.reason


def test_a_keras_layer_in_a_tf_function_reads_its_weights_where_they_are(tf, trace_placement):
    """Function mode: a Dense layer's ReadVariableOps use the weights' handles, which come in
    as the function's arguments; the trace and the prediction both say colocated."""
    import keras

    from tfplace_widget import predict_placement

    layer = keras.layers.Dense(2)
    layer.build((None, 3))

    @tf.function
    def forward(x):
        return layer(x)

    trace = trace_placement(forward, tf.ones((4, 3)))
    assert trace.mode == "function"
    prediction = predict_placement(trace, gpus=1).ops.set_index("op")
    reads = trace.ops[trace.ops["type"] == "ReadVariableOp"].drop_duplicates("op")
    assert len(reads) == 2
    for read in reads.itertuples():
        (handle,) = trace.facts.resource_inputs[read.op]
        assert trace.facts.types[handle] == "_Arg"
        predicted = prediction.loc[read.op]
        assert read.how == predicted["how"] == "colocated", read.reason
        for reason in (read.reason, predicted["reason"]):
            assert f"shares a resource/ref edge with {handle} (the resource's handle" in reason
        assert read.device == CPU0 and predicted["device"] == GPU0  # made with no device


# -- soft -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("request_", "canonical"), [("/gpu:0", "/device:GPU:0"), ("/cpu:7", "/device:CPU:7")]
)
def test_soft_placement_moves_requests_for_missing_devices(
    tf, trace_placement, request_, canonical
):
    def build():
        with tf.device(request_):
            return tf.constant(1.0, name="wanted")

    trace = trace_placement(build, device_count=TWO_CPUS, soft_placement=True)
    row = op_row(trace, "wanted")
    assert (row.device, row.requested_device, row.how) == (CPU0, canonical, "soft")
    assert "does not exist" in row.reason and "CPU:0, CPU:1" in row.reason


# -- runtime ----------------------------------------------------------------------------------
def test_runtime_ops(seed_cpu, tf, trace_placement):
    ops = seed_cpu.ops
    for kind in ("_Send", "_Recv", "_Retval"):
        rows = ops[ops["type"] == kind]
        assert len(rows) >= 1 and set(rows["how"]) == {"runtime"}
        assert set(rows["requested_device"]) == {""}
    assert set(ops.loc[ops["op"] == "_SOURCE", "how"]) == {"runtime"}

    def build():
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        return tf.identity(x, name="y")

    fed = trace_placement(build, feed_dict={"x": [1.0, 2.0]})
    arg = op_row(fed, "_arg_x_0_0")
    assert (arg.type, arg.how) == ("_Arg", "runtime") and "placeholder" in arg.reason


def test_every_how_is_a_known_value(seed_cpu, seed_none, scopes_trace, variable_trace):
    for trace in (seed_cpu, seed_none, scopes_trace, variable_trace):
        assert set(trace.ops["how"]) <= set(HOW_VALUES)
        assert trace.ops["reason"].str.len().gt(20).all()
        assert (trace.ops["reason"].str.count("\n") == 0).all()  # one plain sentence or two


# -- the kernel registry (GPU reasons, checked without a GPU) ---------------------------------
def test_lacks_kernel_reads_default_kernels_as_serving_every_device():
    # NoOp is registered only for DEFAULT, yet runs on CPU and GPU.
    assert "CPU" not in registered_device_types("NoOp")
    assert not lacks_kernel(registered_device_types("NoOp"), "GPU")
    assert not lacks_kernel(registered_device_types("NoOp"), "CPU")
    assert lacks_kernel(registered_device_types("StringJoin"), "GPU")
    assert not lacks_kernel(registered_device_types("MatMul"), "GPU")
    assert not lacks_kernel(registered_device_types("NoSuchOpType"), "GPU")  # unknown: no claim
    # DEFAULT serves XLA_* and TPU devices too; only the *_JIT compilation types are left out.
    for device_type in ("XLA_CPU", "XLA_GPU", "TPU"):
        assert not lacks_kernel(registered_device_types("NoOp"), device_type)
    # (NoOp's own list changes once XLA compiles something: XLA registers XLA_*_JIT kernels.)
    assert lacks_kernel(frozenset({"DEFAULT"}), "XLA_CPU_JIT")
    assert not lacks_kernel(frozenset({"DEFAULT"}), "TPU")


def test_the_kernel_registry_is_handed_in_not_looked_up():
    """Facts not read in this process (a loaded trace's, here without kernel facts) bring no
    registry: the explainer claims no missing kernel; the readers hand in this process's, and
    facts read here carry it (issue 32)."""
    placed = {"joined": CPU0}
    facts = GraphFacts(types={"joined": "StringJoin"})
    bare = Explainer(facts, placed, [GPU0, CPU0], executed_inputs={})
    _, how, reason = bare.explain("joined", "StringJoin", CPU0)
    assert how == "implicit" and "no GPU kernel" not in reason
    handed = Explainer(
        facts, placed, [GPU0, CPU0], {}, kernel_types=REGISTRY.registered_device_types
    )
    _, how, reason = handed.explain("joined", "StringJoin", CPU0)
    assert how == "implicit" and "StringJoin has no GPU kernel" in reason
    facts.registry = REGISTRY
    _, how, reason = Explainer(facts, placed, [GPU0, CPU0], {}).explain(
        "joined", "StringJoin", CPU0
    )
    assert how == "implicit" and "StringJoin has no GPU kernel" in reason


def _gpu_explainer(tf: Any, build: Any, placed: dict[str, str]) -> Explainer:
    graph = tf.Graph()
    with graph.as_default():
        build()
    return Explainer(facts_from_graph(graph), placed, [GPU0, CPU0], executed_inputs={})


def test_gpu_machine_reasons_for_ops_without_a_gpu_kernel(tf):
    def build():
        words = tf.constant(["a", "b"], name="words")
        tf.strings.join([words, words], name="joined")
        with tf.device("/gpu:0"):
            tf.strings.join([words, words], name="asked_gpu")
        tf.no_op(name="nothing")

    placed = {"words": CPU0, "joined": CPU0, "asked_gpu": CPU0, "nothing": CPU0}
    explainer = _gpu_explainer(tf, build, placed)
    assert explainer.default == GPU0
    _, how, reason = explainer.explain("joined", "StringJoin", CPU0)
    assert how == "implicit" and "has no GPU kernel" in reason
    requested, how, reason = explainer.explain("asked_gpu", "StringJoin", CPU0)
    assert (requested, how) == ("/device:GPU:0", "soft")
    assert "has no GPU kernel" in reason and "soft placement" in reason
    _, how, reason = explainer.explain("nothing", "NoOp", CPU0)
    assert how == "implicit" and "no GPU kernel" not in reason


def test_a_keras_lstm_reads_its_weights_in_the_loop_body_colocated(tf, trace_placement):
    """Function mode, a Keras LSTM (a while loop): the body's ReadVariableOps use the weights
    through the body's arguments, which the runtime lowers into Enter/Switch nodes that carry
    the resource: colocated. The loop's TensorList (variant) output is no resource: its
    reader is placed on its own."""
    import keras

    layer = keras.layers.LSTM(4, return_sequences=True)
    layer.build((None, 5, 3))

    @tf.function
    def forward(x):
        return layer(x)

    trace = trace_placement(forward, tf.ones((2, 5, 3)))
    facts = trace.facts
    ops = trace.ops.drop_duplicates("op").set_index("op")
    in_body = [op for op in ops.index if "/body/" in op and facts.types.get(op) == "ReadVariableOp"]
    assert in_body
    for op in in_body:
        assert ops.loc[op, "how"] == "colocated", ops.loc[op, "reason"]
        assert "the argument that carries the resource into the body of" in ops.loc[op, "reason"]
        assert "(While)" in ops.loc[op, "reason"]
    stacks = [op for op in ops.index if facts.types.get(op) == "TensorListStack"]
    assert stacks
    for op in stacks:
        assert not facts.resource_inputs.get(op), facts.resource_inputs.get(op)
        assert ops.loc[op, "how"] == "implicit", ops.loc[op, "reason"]
