"""Persistent memory (issue 34): what each device holds from before a traced step to after it
(variables, constants), apart from the step's own allocations, checked against TensorFlow.

Graph mode on two real CPUs, a Keras model's Adam training step, its second layer on CPU:1.
The ground truth is TensorFlow's: each node's ``memory_stats.persistent_memory_size`` in the
RunMetadata the trace keeps (what kernels recorded as persistent: a ``Const``'s value, a ref
variable's buffer), and for resource variables, whose buffers no kernel of the step records,
the ``tf.Variable`` objects themselves (shape and dtype) on the device TensorFlow placed their
``VarHandleOp`` on (the partition graphs). TF2 function mode records no step_stats at all
(``context.export_run_metadata()`` holds only the function graphs): there the truth is the
``tf.Variable`` objects the step captured, in a process of its own (``tf2_persistent.py``).
"""

from __future__ import annotations

import html
import io
from collections import Counter
from pathlib import Path
from typing import Any

import pandas.testing as pdt
import pytest
from helpers import TWO_CPUS, run_script_results

from tfplace_widget import predict_placement
from tfplace_widget._analyses.predict.memory import BFC_ROUNDING
from tfplace_widget._analyses.summary import format_bytes
from tfplace_widget._model.devices import canonical_device

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"


def keras_adam_step(tf: Any, variables: list, resource: bool = True) -> Any:
    """A Keras dense net's Adam step in a graph: layer 1 on CPU:0, layer 2 on CPU:1; appends
    each variable of the graph (model and optimizer) to ``variables`` as (handle op, bytes).
    ``resource=False``: the same net with ref variables (``VariableV2``) and plain matmuls."""
    v1 = tf.compat.v1
    images = tf.random.uniform([64, 100], seed=1, name="images")
    labels = tf.zeros([64], tf.int64, name="labels")
    if resource:
        hidden = tf.keras.layers.Dense(200, activation="relu")(images)
        with tf.device("/cpu:1"):
            logits = tf.keras.layers.Dense(10)(hidden)
    else:
        w1 = v1.get_variable("w1", [100, 200], use_resource=False)
        hidden = tf.nn.relu(tf.matmul(images, w1))
        with tf.device("/cpu:1"):
            w2 = v1.get_variable("w2", [200, 10], use_resource=False)
            logits = tf.matmul(hidden, w2)
    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    )
    train = v1.train.AdamOptimizer().minimize(loss)
    for variable in v1.global_variables():
        variables.append((variable.op.name, variable.shape.num_elements() * variable.dtype.size))
    return train


def tf_persistent(tf: Any, trace: Any) -> tuple[Counter, dict[str, str]]:
    """TensorFlow's own records in the RunMetadata the trace keeps: per device the
    ``persistent_memory_size`` of its nodes (the largest a node recorded), and each node's
    placed device (its partition graph's)."""
    metadata = tf.compat.v1.RunMetadata()
    metadata.ParseFromString(trace.raw["run_metadata_0.pb"])
    largest: dict[tuple[str, str], int] = {}
    for dev in metadata.step_stats.dev_stats:
        for node in dev.node_stats:
            key = (canonical_device(dev.device), node.node_name)
            largest[key] = max(largest.get(key, 0), node.memory_stats.persistent_memory_size)
    recorded: Counter = Counter()
    for (device, _), size in largest.items():
        recorded[device] += size
    placed = {
        node.name: canonical_device(node.device)
        for graph in metadata.partition_graphs
        for node in graph.node
    }
    return recorded, placed


def variable_names(trace: Any) -> set[str]:
    """The variables ``trace.memory``'s persistent rows name (``variable``): none of the step's
    own rows, nor of a constant, names one; in graph mode a variable's row is its own op's."""
    memory = trace.memory
    step = memory[memory["kind"] == "temporary"]
    assert step["variable"].isna().all()
    held = memory[memory["kind"] == "persistent"]
    named = held[held["variable"].notna()]
    types = dict(zip(trace.ops["op"], trace.ops["type"].astype(str), strict=False))
    if trace.mode == "graph":
        assert (named["variable"] == named["op"]).all()
        constants = held[held["op"].map(types) == "Const"]
        assert len(constants) and constants["variable"].isna().all()
    return set(named["variable"])


def persistent_per_device(trace: Any) -> Counter:
    held = trace.memory[trace.memory["kind"] == "persistent"]
    return Counter({d: int(b) for d, b in held.groupby("device")["bytes"].sum().items()})


@pytest.fixture(scope="module")
def keras_step(tf, trace_placement):
    variables: list = []
    trace = trace_placement(lambda: keras_adam_step(tf, variables), device_count=TWO_CPUS)
    return trace, variables


def test_graph_mode_persistent_is_tensorflows_own_records(tf, trace_placement):
    """Ref variables and constants: per device, the persistent bytes the trace reports are
    exactly the ``persistent_memory_size`` TensorFlow's kernels recorded there; the variables'
    buffers among them are the variables' own sizes."""
    variables: list = []
    trace = trace_placement(
        lambda: keras_adam_step(tf, variables, resource=False), device_count=TWO_CPUS
    )
    recorded, placed = tf_persistent(tf, trace)
    mine = persistent_per_device(trace)
    assert len(mine) == 2 and mine == recorded
    held = trace.memory[trace.memory["kind"] == "persistent"].set_index("op")["bytes"]
    for op, size in variables:  # w1, w2 and Adam's slots: VariableV2 buffers
        assert held[op] == size, op
    assert held["w1"] == 100 * 200 * 4 and placed["w2"] == trace.device_of("w2")
    assert variable_names(trace) == {op for op, _ in variables}  # a VariableV2 is its variable
    allocators = set(trace.memory["allocator"])
    assert allocators <= {"cpu", "mklcpu"} and len(allocators) == 1  # the step's own allocator


def test_graph_mode_resource_variables_from_the_graph(tf, keras_step):
    """Keras's resource variables (and Adam's slots, which no ReadVariableOp reads): TensorFlow
    records 0 persistent bytes for a ``VarHandleOp``; the trace holds each variable's own size
    (the tf.Variable's shape and dtype) on the device TF placed it on, besides what the kernels
    recorded (constants). The step's peak is the step's own records' as before."""
    trace, variables = keras_step
    recorded, placed = tf_persistent(tf, trace)
    expected = Counter(recorded)
    for op, size in variables:
        expected[placed[op]] += size
    mine = persistent_per_device(trace)
    assert mine == expected and len(mine) == 2
    assert variable_names(trace) == {op for op, _ in variables}  # v.op.name: the VarHandleOp
    on_cpu1 = {op for op, _ in variables if placed[op].endswith("CPU:1")}
    assert any(op.endswith("/Adam") for op in on_cpu1)  # a slot of layer 2's kernel
    peaks = trace.memory_peaks().set_index(["device", "allocator"])
    assert peaks["persistent_bytes"].groupby(level=0).sum().to_dict() == dict(mine)
    step = trace.memory[trace.memory["kind"] == "temporary"]
    for (device, allocator), row in peaks.iterrows():  # the peak is the step's tensors'
        rows = step[(step["device"] == device) & (step["allocator"] == allocator)]
        assert row["peak_bytes"] == rows["live_bytes"].max() == sum(row["ops_bytes"])


def test_graph_mode_one_variable_two_handles_is_held_once(tf, trace_placement):
    """A meta graph imported twice (``import_meta_graph``, scopes ``a`` and ``b``) has two
    ``VarHandleOp``s of one resource (the same ``shared_name``): TensorFlow holds one buffer,
    as a value assigned through one handle and read through the other shows. The trace holds
    it once, on the device TF placed its handles on, besides what the kernels recorded
    (constants)."""
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        v1.Variable(tf.ones([100, 200]), name="w")
        meta = v1.train.export_meta_graph()

    def step() -> Any:
        v1.train.import_meta_graph(meta, import_scope="a")
        v1.train.import_meta_graph(meta, import_scope="b")
        return tf.reduce_sum(tf.stack([v.read_value() for v in v1.global_variables()]))

    with tf.Graph().as_default(), v1.Session() as session:
        a, b = step(), v1.global_variables()
        session.run(b[0].initializer)
        session.run(b[0].assign(tf.fill([100, 200], 3.0)))
        assert session.run(b[1].read_value())[0, 0] == 3.0  # one buffer behind both handles
        assert session.run(a) == 2 * 3.0 * 100 * 200
    trace = trace_placement(step)
    handles = trace.ops[trace.ops["type"] == "VarHandleOp"]
    assert set(handles["op"]) == {"a/w", "b/w"}
    (device,) = set(handles["device"])
    expected, _ = tf_persistent(tf, trace)
    expected[device] += 100 * 200 * 4
    assert persistent_per_device(trace) == expected


def test_the_memory_list_says_what_is_held_through_the_step(keras_step):
    """``tfplace show`` and the panel's list (``memory_items``): per device the peak as
    before, and on a line of its own the persistent bytes, how many variables and constants
    hold them and the largest."""
    from tfplace_widget._rendering.memory_lane import memory_items
    from tfplace_widget._rendering.snapshot import memory_html
    from tfplace_widget._rendering.text_report import TextOutput, print_summary

    trace, _ = keras_step
    out = io.StringIO()
    print_summary(trace, TextOutput(out), list_ops=False)
    text = out.getvalue().split("Memory peak per device", 1)[1]
    for item in memory_items(trace):
        row = trace.memory_peaks().set_index("device").loc[item["device"]]
        assert item["persistent_bytes"] == row["persistent_bytes"] > 0
        line = f"held through the step: {format_bytes(row['persistent_bytes'])} in "
        assert item["persistent"].startswith(line) and item["persistent"] in text
    cpu1 = next(i for i in memory_items(trace) if i["device"].endswith("CPU:1"))
    assert "6 variables" in cpu1["persistent"]  # kernel, bias and their two Adam slots each
    snapshot = memory_html(memory_items(trace))  # the snapshot's list; the panel's and the
    assert html.escape(cpu1["persistent"]) in snapshot  # report's draw the same item


@pytest.fixture(scope="module")
def tf2_keras(tmp_path_factory):
    """``tf2_persistent.py``'s traces (a Keras model's ``train_on_batch`` and its ``model.fit``
    with a validation split, on two logical CPUs) and TensorFlow's own record of the variables
    the model holds."""
    script = Path(__file__).with_name("tf2_persistent.py")
    return run_script_results(script, tmp_path_factory.mktemp("tf2") / "tf2.pickle")


def variables_per_device(variables: list[tuple[str, int]]) -> Counter:
    expected: Counter = Counter()
    for device, size in variables:
        expected[canonical_device(device)] += size
    return expected


def test_tf2_function_mode_holds_the_captured_variables(tf2_keras):
    """A Keras model's ``train_on_batch`` in function mode on two logical CPUs: per device, the
    persistent bytes are the tf.Variables the step captured (model, Adam, the loss metric),
    by their own device, shape and dtype, apart from the step's own allocations (the profile's
    allocator events, with oneDNN's mklcpu; none with oneDNN off: then the peak list says no
    allocation of the step is recorded)."""
    trace = tf2_keras["trace"]
    expected = variables_per_device(tf2_keras["variables"])
    assert len(expected) == 2 and persistent_per_device(trace) == expected
    step = trace.memory[trace.memory["kind"] == "temporary"]
    allocated = trace.ops["allocated_bytes"]
    assert allocated.sum() == step.loc[step["bytes"] > 0, "bytes"].sum()  # none persistent
    held = trace.memory[trace.memory["kind"] == "persistent"]
    usual = set(step["allocator"]) or {"cpu"}  # the records' allocator (mklcpu), else cpu
    assert set(held["allocator"]) == usual
    peaks = trace.memory_peaks()
    for row in peaks.itertuples(index=False):
        rows = step[(step["device"] == row.device) & (step["allocator"] == row.allocator)]
        assert row.peak_bytes == (rows["live_bytes"].max() if len(rows) else 0)


def test_tf2_fit_with_validation_holds_each_variable_once(tf2_keras, tmp_path):
    """``model.fit`` with a validation split runs two functions, its training and its
    evaluation step, and both capture the model's variables (the same handles): per device,
    the persistent bytes, ``memory_peaks``' and the memory list's, are each tf.Variable of the
    model, its optimizer and its metrics once, as TensorFlow holds them; one row per variable
    and device, kept by ``save`` and ``load``."""
    from tfplace_widget import PlacementTrace
    from tfplace_widget._rendering.memory_lane import memory_items

    fit = tf2_keras["fit"]
    expected = variables_per_device(tf2_keras["fit_variables"])
    assert len(expected) == 2 and persistent_per_device(fit) == expected
    peaks = fit.memory_peaks().groupby("device")["persistent_bytes"].sum()
    assert peaks.to_dict() == dict(expected)
    held = fit.memory[fit.memory["kind"] == "persistent"]
    assert len(held) == len(tf2_keras["fit_variables"])
    for item in memory_items(fit):
        assert item["persistent"].startswith(
            f"held through the step: {format_bytes(expected[item['device']])} in "
        )
    loaded = PlacementTrace.load(fit.save(tmp_path / "fit.tfplace"))
    assert persistent_per_device(loaded) == expected


@pytest.mark.parametrize("traced", ["trace", "fit"])
def test_tf2_persistent_rows_name_the_variables(tf2_keras, traced, tmp_path):
    """TF2 holds a variable through a traced function's resource ``_Arg``, named by Keras or
    TensorFlow (``unknown_7``): each persistent row names the variable itself (``variable``),
    by TensorFlow's name for it (``tf.Variable.name`` less ``:0``, which is Keras 3's
    ``Variable.path``), each with its own device and bytes, for the model's, the optimizer's
    and the loss metric's variables (``train_on_batch``; ``model.fit`` with a validation
    split, whose two functions capture the model's). ``memory_peaks``' ``persistent_variables``,
    the memory list (panel, report, snapshot) and ``tfplace show`` say those names, not the
    ``_Arg``s'; ``save`` and ``load`` keep them."""
    from tfplace_widget import PlacementTrace
    from tfplace_widget._rendering.memory_lane import memory_items
    from tfplace_widget._rendering.text_report import TextOutput, print_summary

    trace = tf2_keras[traced]
    truth = tf2_keras["names" if traced == "trace" else "fit_names"]
    assert all(name == f"{path}:0" for name, path, _, _ in truth)  # TF's name is Keras's path
    assert any(path.startswith("adam/") for _, path, _, _ in truth)  # the optimizer's slots
    held = trace.memory[trace.memory["kind"] == "persistent"]
    mine = sorted(
        zip(held["variable"], held["device"], held["bytes"].astype(int).tolist(), strict=True)
    )
    expected = sorted((path, canonical_device(d), size) for _, path, d, size in truth)
    assert mine == expected
    peaks = trace.memory_peaks()
    for row in peaks.itertuples(index=False):
        named = dict(zip(row.persistent_variables, row.persistent_ops_bytes, strict=True))
        assert named == {path: size for path, device, size in expected if device == row.device}
    out = io.StringIO()
    print_summary(trace, TextOutput(out), list_ops=False)
    for item in memory_items(trace):
        row = peaks.set_index("device").loc[item["device"]]
        largest = list(zip(row["persistent_variables"], row["persistent_ops_bytes"], strict=True))
        for name, size in largest[:3]:
            assert f"{name} {format_bytes(size)}" in item["persistent"]
        assert "unknown" not in item["persistent"] and item["persistent"] in out.getvalue()
    loaded = PlacementTrace.load(trace.save(tmp_path / "named.tfplace"))
    pdt.assert_frame_equal(loaded.memory, trace.memory)


def test_predicted_gpu_peak_counts_the_variables(keras_step):
    """The prediction moves each persistent tensor to its holder's predicted device (on the
    GPU BFC-rounded), optimizer slots included; ``fits_on`` adds them to the step's peak and
    says how much of its need they are."""
    trace, variables = keras_step
    predicted = predict_placement(trace, gpus=1)
    traced = trace.memory[trace.memory["kind"] == "persistent"]
    placed = dict(zip(predicted.ops["op"], predicted.ops["device"], strict=True))
    expected: Counter = Counter()
    for op, device, size in zip(traced["op"], traced["device"], traced["bytes"], strict=True):
        to = placed.get(op) or device  # a replicated constant's copy: where it ran
        expected[to] += -(-int(size) // BFC_ROUNDING) * BFC_ROUNDING if to == GPU0 else int(size)
    assert persistent_per_device(predicted) == expected
    peaks = predicted.memory_peaks().set_index("device")
    gpu = peaks.loc[GPU0]
    slots = [op for op, _ in variables if op.endswith(("/Adam", "/Adam_1"))]
    on_gpu = [op for op in slots if placed.get(op) == GPU0]
    assert on_gpu and set(on_gpu) <= set(gpu["persistent_ops"])
    fit = predicted.fits_on(gib=16)
    assert fit.device == GPU0 and fit.persistent_bytes == gpu["persistent_bytes"] > 0
    assert fit.need_bytes == gpu["peak_bytes"] + gpu["persistent_bytes"]
    assert f"{format_bytes(fit.persistent_bytes)} of it variables and constants" in str(fit)
