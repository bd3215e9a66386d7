"""predict_placement: TensorFlow's placer replayed for a machine with GPUs (issue 12).

Checked two ways. Where the real placer can run (this machine, three CPUs, ``gpus=0``) the
prediction must equal what TensorFlow did, op for op, on hand-written graphs and on the random
graphs of tests/model/test_properties.py, and must refuse what TensorFlow refuses. With ``gpus=1`` the
answers follow from the placer's rules and the kernel registry (GPU kernels are registered in
the CPU wheel): a float MatMul goes to GPU:0, an int32 MatMul stays on the CPU, and so on.
"""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from helpers import GPU_TRACES, conflicting_colocation
from hypothesis import HealthCheck, given, settings
from test_properties import builder_for, graph_specs, two_variables_one_colocation

from tfplace_widget import PlacementTrace, TraceError, predict_placement, trace_placement
from tfplace_widget._analyses.predict import (
    predict_devices,
    predict_transfers,
)
from tfplace_widget._model.graphfacts import RESOURCE_COLOCATION_EXEMPT
from tfplace_widget._model.kernel_registry import MissingRegistryError
from tfplace_widget._tfadapter.graphfacts import facts_from_graph, node_details
from tfplace_widget._tfadapter.registry import REGISTRY

CPUS = {"CPU": 3}
CPU = [f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(3)]
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"


# ---------------------------------------------------------------------------------------------
# Graphs
# ---------------------------------------------------------------------------------------------
def known_answers() -> Any:
    """Every case whose GPU placement the placer's rules decide, in one graph."""
    x = tf.compat.v1.placeholder_with_default(np.ones((2, 4), np.float32), [None, 4], name="x")
    mm = tf.matmul(x, tf.ones((4, 4)), name="MM")  # float MatMul: GPU kernel
    shape = tf.shape(mm, name="S")  # a real Shape (unknown first dim): follows MM
    ints = tf.constant([[1, 2], [3, 4]], name="ints")
    mm_int = tf.matmul(ints, ints, name="MMint")  # int32 MatMul: no GPU kernel for int32
    ident = tf.identity(mm_int, name="Ident")  # a lone Identity: follows MMint
    joined = tf.strings.join(["1", "2"], name="J")  # StringJoin: no GPU kernel at all
    number = tf.strings.to_number(joined, name="ToNum")  # CPU only, float32 out
    mixed = tf.add(number, mm, name="Y")  # a GPU op fed by a CPU-only op: a copy
    with tf.device("/cpu:0"):
        weights = tf.Variable(tf.ones((4,)), name="weights")
    read = weights.read_value()  # ReadVariableOp next to its variable, on the CPU
    text = tf.strings.as_string(mm_int, name="Str")
    with tf.device("/gpu:0"):  # no GPU kernel for StringJoin: soft placement moves it
        forced = tf.strings.join([text[0, 0], "x"], name="GJ")
    return [shape, ident, mixed, read, forced]


def no_gpu_kernel_on_gpu() -> Any:
    with tf.device("/gpu:0"):
        return tf.strings.join(["a", "b"], name="J")


def control_and_data() -> Any:
    """Control edges, partial specs, metadata ops, tf.data variant edges, a variable."""
    x = tf.compat.v1.placeholder_with_default(np.ones((2, 4), np.float32), [None, 4], name="x")
    with tf.device("/cpu:2"):
        y = tf.square(x, name="sq")
    size = tf.shape(y, name="S")
    with tf.control_dependencies([size]):
        after = tf.constant(3.0, name="after")  # a generator with a control input
    with tf.device("/device:CPU:*"):
        z = tf.add(y, after, name="Z")
    ident = tf.identity(z, name="I")
    with tf.device("/cpu:1"):
        k = tf.constant(1.0, name="K")
    u = tf.multiply(ident, k, name="U")
    dataset = tf.data.Dataset.range(10).map(lambda v: v * 2).batch(2)
    element = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
    with tf.device("/cpu:1"):
        w = tf.Variable(tf.zeros((4,)), name="w")
    update = w.assign_add(tf.reduce_sum(u, axis=0), name="upd")
    return [u, element, update, ident]


def seed_on_cpu1() -> Any:
    with tf.device("/cpu:0"):
        a = tf.ones((100,), name="A")
    b = tf.ones((100,), name="B")
    with tf.device("/cpu:1"):
        return tf.add(a, b, name="C")


# ---------------------------------------------------------------------------------------------
# Fixtures: each graph traced once
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gpu_prediction() -> PlacementTrace:
    return predict_placement(known_answers, gpus=1, device_count=CPUS)


@pytest.fixture(scope="module")
def rows(gpu_prediction: PlacementTrace) -> Any:
    return gpu_prediction.ops.set_index("op")


def disagreements(prediction: PlacementTrace) -> Any:
    """Ops that ran here whose predicted device is not where they ran."""
    ops = prediction.ops
    ran = ops[ops["traced_device"] != ""]
    assert len(ran), "nothing to compare: no op of the graph ran"
    return ran[ran["traced_device"] != ran["predicted_device"]]


# ---------------------------------------------------------------------------------------------
# gpus=0: the prediction is what TensorFlow did
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "builder",
    [
        seed_on_cpu1,
        known_answers,
        control_and_data,
        conflicting_colocation,
        two_variables_one_colocation,
    ],
    ids=lambda b: b.__name__,
)
def test_without_gpus_the_prediction_is_the_real_placement(builder: Any) -> None:
    prediction = predict_placement(builder, gpus=0, device_count=CPUS)
    bad = disagreements(prediction)
    assert bad.empty, bad[["op", "type", "traced_device", "predicted_device", "reason"]]
    assert set(prediction.devices) == set(CPU)
    assert prediction.predicted


def test_predicted_transfers_without_gpus_are_the_real_cross_device_edges() -> None:
    prediction = predict_placement(seed_on_cpu1, gpus=0, device_count=CPUS)
    real = trace_placement(seed_on_cpu1, device_count=CPUS)
    predicted = set(edges(prediction.transfers))
    actual = set(edges(real.transfers))
    # The real run also copies the fetched C back to the client's CPU:0 (_Retval): not a node.
    assert predicted == {t for t in actual if t[0] != "C:0"} and predicted
    assert (prediction.transfers["copy"] == "HtoH").all()
    assert prediction.transfers["predicted"].all()


def edges(transfers: Any) -> Any:
    return transfers[["tensor", "src_device", "dst_device"]].itertuples(index=False, name=None)


@settings(
    max_examples=int(os.environ.get("PREDICT_EXAMPLES", "10")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
@given(graph_specs(min_ops=40, max_ops=160))
def test_random_graphs_are_predicted_as_tensorflow_placed_them(spec: Any) -> None:
    """tests/model/test_properties.py's graphs: requests for CPUs that exist and do not, partial
    specs, GPUs that do not exist, colocate_with groups, variables, soft placement on and off.
    Every op TensorFlow placed is predicted on its device; a graph TensorFlow refuses is
    predicted refused, for the op (or the two ops) TensorFlow names."""
    captured: dict = {}
    build = builder_for(spec, captured)
    options = {"device_count": CPUS, "device_scope": spec.device_scope}
    try:
        real = trace_placement(build, soft_placement=spec.soft, **options)
    except TraceError as exc:
        assert not spec.soft, exc
        graph_def = captured["graph"].as_graph_def()
        # The tf.Graph, not its GraphDef: facts_from_graph imports a GraphDef with
        # import_graph_def, which gives a colocated op its anchor's device instead of its own.
        facts = facts_from_graph(captured["graph"])
        frame = predict_devices(facts, CPU, soft_placement=False, details=node_details(graph_def))
        errors = frame.attrs["errors"]
        assert errors, f"TensorFlow refused, the prediction did not: {exc}"
        named = re.findall(r"'([^']+)'", str(exc).split("\n")[0])
        assert any(name in errors[0] for name in named), (str(exc), errors[0])
        return
    prediction = predict_placement(build, gpus=0, soft_placement=spec.soft, **options)
    assert not prediction.ops["how"].eq("error").any(), prediction.notes
    executed = {op for op in real.ops["op"] if op in prediction.ops["op"].values}
    assert executed, "no op of the graph as built ran"
    bad = disagreements(prediction)
    assert bad.empty, bad[["op", "type", "requested_device", "traced_device", "predicted_device"]]


# ---------------------------------------------------------------------------------------------
# gpus=1: the placer's rules
# ---------------------------------------------------------------------------------------------
def test_a_prediction_is_marked_as_such(gpu_prediction: PlacementTrace) -> None:
    trace = gpu_prediction
    assert trace.predicted is True and trace.facts is not None
    assert trace.notes[0].startswith("Predicted, not run")
    assert trace.events.empty and trace.ops["runs"].isna().all()
    assert GPU0 in trace.devices and set(CPU) <= set(trace.devices)
    assert (trace.ops["device"] == trace.ops["predicted_device"]).all()
    assert "traced_device" in trace.ops and trace.ops["start_us"].isna().all()
    assert trace.device_of("MM") == GPU0


def test_a_float_matmul_goes_to_the_gpu(rows: Any) -> None:
    mm = rows.loc["MM"]
    assert mm["device"] == GPU0 and mm["how"] == "implicit"
    assert "GPU before CPU" in mm["reason"] and mm["traced_device"] == CPU[0]


def test_an_int32_matmul_stays_on_the_cpu(rows: Any) -> None:
    mm = rows.loc["MMint"]
    assert mm["device"] == CPU[0] and mm["how"] == "implicit"
    assert "no GPU kernel for int32" in mm["reason"], mm["reason"]
    assert mm["gpu_kernel"] == "dtype"


def test_string_join_stays_on_the_cpu(rows: Any) -> None:
    join = rows.loc["J"]
    assert join["device"] == CPU[0]
    assert "StringJoin has no GPU kernel" in join["reason"]


def test_a_read_goes_with_its_variable_on_the_cpu(rows: Any) -> None:
    read = rows.loc["Read/ReadVariableOp"]
    assert read["device"] == CPU[0] and read["how"] == "colocated"
    assert "shares a resource/ref edge with weights" in read["reason"]
    assert rows.loc["weights", "device"] == CPU[0]


def test_a_gpu_request_without_a_gpu_kernel_is_moved_by_soft_placement(rows: Any) -> None:
    forced = rows.loc["GJ"]
    assert forced["device"] == CPU[0] and forced["how"] == "soft"
    assert forced["requested_device"] == "/device:GPU:0"
    assert "no GPU kernel" in forced["reason"] and "soft placement moved it" in forced["reason"]


def test_without_soft_placement_the_prediction_says_tensorflow_refuses() -> None:
    prediction = predict_placement(no_gpu_kernel_on_gpu, gpus=1, soft_placement=False)
    join = prediction.ops.set_index("op").loc["J"]
    assert join["how"] == "error" and join["device"] == ""
    assert "no supported kernel for GPU devices" in join["reason"]
    assert "would refuse" in prediction.notes[1] and "'/device:GPU:0'" in prediction.notes[1]
    # The same request with soft placement on is moved, not refused.
    soft = predict_placement(no_gpu_kernel_on_gpu, gpus=1)
    assert len(soft.notes) == 1 and soft.device_of("J") == CPU[0]


def test_shape_and_identity_follow_their_input(rows: Any) -> None:
    shape = rows.loc["S"]
    assert shape["type"] == "Shape" and shape["device"] == GPU0
    assert "puts a Shape with its input (MM)" in shape["reason"]
    ident = rows.loc["Ident"]
    from tfplace_widget._tfadapter.probe import identity_follows_its_input

    if identity_follows_its_input():  # on the CPU although Identity has a GPU kernel
        assert ident["device"] == CPU[0]
        assert "puts a Identity with its input (MMint)" in ident["reason"]
    else:  # TensorFlow 2.16's placer: the first device with a kernel, the GPU
        assert ident["device"] == GPU0 and "with its input" not in ident["reason"]


def test_a_generator_joins_its_consumer(rows: Any) -> None:
    ints = rows.loc["ints"]  # an int32 Const has a (host-memory) GPU kernel, but MMint is on CPU
    assert ints["device"] == CPU[0] and ints["gpu_kernel"] == "host"
    assert "placed with its consumers (MMint)" in ints["reason"]


def test_copies_are_predicted_for_a_gpu_op_fed_by_a_cpu_only_op(
    gpu_prediction: PlacementTrace,
) -> None:
    transfers = gpu_prediction.transfers.set_index("tensor")
    copy = transfers.loc["ToNum:0"]
    assert (copy["src_device"], copy["dst_device"], copy["copy"]) == (CPU[0], GPU0, "HtoD")
    assert bool(copy["predicted"])
    assert rows_device(gpu_prediction, "Y") == GPU0
    # MM stays on the GPU and feeds Y on the GPU: no copy.
    assert "MM:0" not in transfers.index


def rows_device(trace: PlacementTrace, name: str) -> str:
    return trace.ops.set_index("op").loc[name, "device"]


def test_host_memory_arguments_make_copies_on_one_gpu() -> None:
    """A GPU kernel's host-memory input next to a device-memory producer on the same GPU: the
    runtime copies the tensor to host memory (e.g. Reshape's ``shape``)."""
    facts = facts_from_graph(_graph(_reshape_by_computed_shape))
    device_of = {name: GPU0 for name in facts.types}
    transfers = predict_transfers(facts, device_of, None)
    row = transfers.set_index("tensor").loc["shape:0"]
    assert (row["src_device"], row["dst_device"], row["copy"]) == (GPU0, GPU0, "DtoH")


def _reshape_by_computed_shape() -> None:
    x = tf.ones((2, 4), name="x")
    shape = tf.cast(tf.ones((2,)) * [4.0, 2.0], tf.int32, name="shape")  # int32 from floats
    tf.reshape(x, shape, name="R")


def _graph(builder: Any) -> Any:
    graph = tf.Graph()
    with graph.as_default():
        builder()
    return graph


# ---------------------------------------------------------------------------------------------
# The pure core and the arguments
# ---------------------------------------------------------------------------------------------
def test_the_core_needs_no_session() -> None:
    graph_def = _graph(known_answers).as_graph_def()
    facts = facts_from_graph(graph_def)
    frame = predict_devices(facts, [*CPU[:1], GPU0], soft_placement=True)
    assert list(frame.columns) == ["op", "predicted_device", "how", "reason"]
    assert len(frame) == len(facts) and frame.attrs["errors"] == []
    placed = dict(zip(frame["op"], frame["predicted_device"], strict=True))
    assert placed["MM"] == GPU0 and placed["MMint"] == CPU[0] and placed["GJ"] == CPU[0]
    with pytest.raises(ValueError, match="at least one device"):
        predict_devices(facts, [], soft_placement=True)


def test_a_trace_with_its_graph_can_be_predicted(seed_cpu: PlacementTrace) -> None:
    prediction = predict_placement(seed_cpu, gpus=2)
    devices = dict(zip(prediction.ops["op"], prediction.ops["device"], strict=True))
    assert (devices["A"], devices["B"], devices["C"]) == (CPU[0], CPU[0], CPU[1])
    # every op of the seed asked for a CPU (the variable initialisers' NoOps asked for nothing)
    assert all("device:CPU:" in d for op, d in devices.items() if not op.startswith("init"))
    assert sum("device:GPU:" in d for d in prediction.devices) == 2


def test_a_trace_without_its_graph_names_the_fix() -> None:
    loaded = PlacementTrace.from_chrome_trace(next(iter(sorted(GPU_TRACES.rglob("*.json")))))
    with pytest.raises(ValueError, match=r"from_run_metadata\(run_metadata, graph=graph\)"):
        predict_placement(loaded)


@pytest.mark.parametrize(
    ("gpus", "error"),
    [(-1, ValueError), (65, ValueError), ("1", TypeError), (True, TypeError), (1.0, TypeError)],
)
def test_gpus_is_checked(seed_cpu: PlacementTrace, gpus: Any, error: type) -> None:
    with pytest.raises(error, match="gpus must be"):
        predict_placement(seed_cpu, gpus=gpus)


def test_facts_from_a_file_are_predicted_with_the_registry_handed_in(
    seed_cpu: PlacementTrace, tmp_path: Path
) -> None:
    """The placer replay asks TensorFlow nothing itself (issue 32): facts read in this process
    carry its registry; facts loaded from a file carry none, so predict_devices names the fix
    instead of asking whatever TensorFlow is imported, gives the same answer with the registry
    handed in, and predict_placement (which runs TensorFlow's side) hands in this process's."""
    seed_cpu.save(tmp_path / "seed.tfplace")
    loaded = PlacementTrace.load(tmp_path / "seed.tfplace")
    assert seed_cpu.facts.registry is REGISTRY and loaded.facts.registry is None
    devices = [*CPU[:2], GPU0]
    with pytest.raises(MissingRegistryError, match=r"registry=tfplace_widget\._tfadapter"):
        predict_devices(loaded.facts, devices, soft_placement=True)
    here = predict_devices(seed_cpu.facts, devices, soft_placement=True)
    handed = predict_devices(loaded.facts, devices, soft_placement=True, registry=REGISTRY)
    assert handed.equals(here) and handed.attrs == here.attrs
    from_file, traced = predict_placement(loaded, gpus=1), predict_placement(seed_cpu, gpus=1)
    assert from_file.ops[["op", "device", "how"]].equals(traced.ops[["op", "device", "how"]])


def test_options_are_checked(seed_cpu: PlacementTrace) -> None:
    with pytest.raises(TypeError, match="Did you mean 'device_count'"):
        predict_placement(seed_on_cpu1, device_cont=CPUS)
    with pytest.raises(TypeError, match="only soft_placement"):
        predict_placement(seed_cpu, device_count=CPUS)
    with pytest.raises(ValueError, match="already a prediction"):
        predict_placement(predict_placement(seed_cpu, gpus=0))
    with pytest.raises(TypeError, match="soft_placement must be True or False"):
        predict_placement(seed_cpu, soft_placement="no")


# ---------------------------------------------------------------------------------------------
# TF2 code (two logical CPUs, so in a process of its own)
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tf2_results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("predict") / "results.pickle"
    script = Path(__file__).with_name("predict_scenarios.py")
    done = subprocess.run(
        [sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return pickle.loads(out.read_bytes())


@pytest.mark.parametrize("name", ["device_inside", "variables", "while_loop", "call_under_cpu1"])
def test_tf2_functions_without_gpus_are_predicted_as_placed(tf2_results: dict, name: str) -> None:
    result = tf2_results[name]
    assert "error" not in result, result.get("traceback")
    assert result["compared"] > 3
    assert result["disagreements"] == [], result["disagreements"]


def test_tf2_variables_go_to_the_gpu_with_their_reads(tf2_results: dict) -> None:
    devices = tf2_results["variables"]["gpu"]
    assert devices["Read/ReadVariableOp"] == GPU0 and devices["AssignAddVariableOp"] == GPU0
    assert devices["x"] == CPU[0]  # the argument stays where the caller made it: the host
    assert devices["J"] == CPU[0]  # StringJoin


def test_every_op_placed_with_an_assumed_variable_says_so(tf2_results: dict) -> None:
    """Issue 30 item 7: the trace keeps where a variable is (CPU:0), not whether it was made
    under tf.device('/CPU:0') or with no device (then a GPU machine makes it on GPU:0). The
    prediction assumes no device; the read placed with it says so, not only the _Arg."""
    result = tf2_results["variable_made_on_cpu0"]
    assert "error" not in result, result.get("traceback")
    real, predicted = result["real"], result["predicted"]
    [read] = [op for op, row in real.items() if row[1] == "ReadVariableOp"]
    # What TensorFlow did with CPU:1 as the default device (a GPU's role): the read stays on
    # the variable's CPU:0, the ops after it go to CPU:1.
    assert real[read][0] == CPU[0] and real["doubled"][0] == CPU[1] == real["S"][0]
    assumption = "This rests on an assumption the trace cannot check"
    device, _, how, reason = predicted[read]
    assert (device, how) == (GPU0, "colocated")
    assert assumption in reason
    assert "made under tf.device('/CPU:0'), it would be on CPU:0, and so would this op" in reason
    [arg] = [op for op, row in predicted.items() if row[1] == "_Arg" and "handle" in row[3]]
    assert arg in reason and "Assumed made that way" in predicted[arg][3]
    # An op whose device does not depend on the variable's says nothing of it.
    assert predicted["doubled"][0] == GPU0 and assumption not in predicted["doubled"][3]


def test_a_keras_step_with_its_variables_on_another_device_fails_with_xla(tf2_results: dict):
    """Issue 30 item 4: on a GPU Keras compiles the step with XLA on GPU:0, which cannot use a
    variable made on another device. TensorFlow's own verdict, with CPU:0 in the GPU's role:
    the same step compiled with jit_compile=True fails."""
    result = tf2_results["keras_variables_on_cpu1"]
    assert "error" not in result, result.get("traceback")
    assert "Trying to access resource" in result["refused"]
    assert f"located in device {CPU[1]} from device {CPU[0]}" in result["refused"]
    [note] = [n for n in result["notes"] if "Keras 3 would compile" in n]
    assert "the step fails: XLA runs it on GPU:0" in note
    assert f"located in device {CPU[1]} from device {GPU0}" in note
    assert "xla" not in result["how"]  # the per-op placement: what runs with jit_compile=False
    failing = [r for r in result["args"].values() if "XLA cannot use a variable" in r]
    assert failing and all("(CPU:1)" in r for r in failing)


# ---------------------------------------------------------------------------------------------
# Real Keras and tf.data code: where resources live with a GPU (issue 20)
# ---------------------------------------------------------------------------------------------
REAL_CODE = [
    "text_fit",
    "text_end_to_end",
    "train_step_on_iterator",
    "variables_on_cpus",
    "mirrored_on_cpus",
]


@pytest.fixture(scope="module")
def real_code(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("predict_real") / "results.pickle"
    script = Path(__file__).with_name("predict_tf2_scenarios.py")
    done = subprocess.run(
        [sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return pickle.loads(out.read_bytes())


def real(real_code: dict, name: str) -> dict:
    result = real_code[name]
    assert "error" not in result, result.get("traceback")
    return result


def resource_uses(trace: PlacementTrace) -> list[tuple[str, str]]:
    """(op, argument) for every op that uses a function's resource argument, where the placer
    colocates them (function calls forward resources and are left out)."""
    facts = trace.facts
    return [
        (user, arg)
        for user, producers in facts.resource_inputs.items()
        if facts.types.get(user) not in RESOURCE_COLOCATION_EXEMPT
        for arg in producers
        if facts.types.get(arg) == "_Arg"
    ]


def variable_argument(trace: PlacementTrace, op: str) -> tuple[str, str]:
    """(the read, the variable's _Arg) behind the value ``op`` takes (through Identity ops)."""
    facts = trace.facts
    pending = list(facts.inputs[op])
    while pending:
        source = pending.pop(0)
        for producer in facts.resource_inputs.get(source, ()):
            if facts.types.get(producer) == "_Arg":
                return source, producer
        if facts.types.get(source) == "Identity":
            pending.extend(facts.inputs[source])
    raise AssertionError(f"no variable read feeds {op}")


@pytest.mark.parametrize("name", REAL_CODE)
def test_real_code_without_gpus_is_predicted_as_placed(real_code: dict, name: str) -> None:
    result = real(real_code, name)
    assert result["compared"] > 10
    assert result["disagreements"] == [], result["disagreements"]


@pytest.mark.parametrize("name", REAL_CODE)
def test_real_code_that_runs_on_gpus_is_not_refused(real_code: dict, name: str) -> None:
    prediction = real(real_code, name)["gpu"]
    refused = prediction.ops[prediction.ops["how"] == "error"]
    assert refused.empty, refused[["op", "type", "reason"]].to_string()
    # no "TensorFlow would refuse"; model.fit's step: what Keras's XLA would do (issue 30)
    others = [n for n in prediction.notes[1:] if "Keras 3 would compile" not in n]
    assert not others, prediction.notes


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("text_fit", {"IteratorGetNext"}),
        ("text_end_to_end", {"LookupTableFindV2"}),
        ("train_step_on_iterator", {"IteratorGetNext", "LookupTableFindV2"}),
    ],
)
def test_lookup_tables_and_iterators_stay_on_the_cpu(real_code: dict, name: str, kinds) -> None:
    prediction = real(real_code, name)["gpu"]
    rows = prediction.ops.set_index("op")
    seen = set()
    for user, arg in resource_uses(prediction):
        kind = rows.loc[user, "type"]
        if kind not in kinds:
            continue
        seen.add(kind)
        assert rows.loc[user, "device"] == CPU[0] and rows.loc[arg, "device"] == CPU[0]
        what = "a lookup table" if kind == "LookupTableFindV2" else "a tf.data iterator"
        assert what in rows.loc[arg, "reason"] and "with a GPU too" in rows.loc[arg, "reason"]
        if not rows.loc[user, "requested_device"]:  # Keras asks for the CPU for its lookups
            assert rows.loc[user, "how"] == "colocated"
            assert f"with {arg} (" in rows.loc[user, "reason"], rows.loc[user, "reason"]
    assert seen == kinds


def test_variables_stay_where_their_code_put_them(real_code: dict) -> None:
    prediction = real(real_code, "variables_on_cpus")["gpu"]
    rows = prediction.ops.set_index("op")
    # made under tf.device("/cpu:1"): only a request puts a variable there
    read, arg = variable_argument(prediction, "b")
    assert rows.loc[arg, "device"] == rows.loc[read, "device"] == CPU[1]
    assert "a tf.device or a distribution strategy made it there" in rows.loc[arg, "reason"]
    # made under tf.device("/cpu:0") and used under it: assumed made there, says so
    read, arg = variable_argument(prediction, "a")
    assert rows.loc[arg, "device"] == rows.loc[read, "device"] == CPU[0]
    assert "assumed made under the same device" in rows.loc[arg, "reason"]
    assert "a: /device:CPU:0" in rows.loc[arg, "reason"]
    # made with no device: on GPU:0 with a GPU, an assumption the reason states
    read, arg = variable_argument(prediction, "c")
    assert rows.loc[arg, "device"] == rows.loc[read, "device"] == GPU0
    assert "Assumed made that way" in rows.loc[arg, "reason"]
    assert "tf.device('/cpu:0')" in rows.loc[arg, "reason"]


def test_a_mirrored_strategy_on_cpus_keeps_each_replica_on_its_cpu(real_code: dict) -> None:
    result = real(real_code, "mirrored_on_cpus")
    prediction, traced = result["gpu"], result["trace"]
    rows = prediction.ops.set_index("op")
    ran = traced.ops.drop_duplicates("op").set_index("op")
    uses = resource_uses(prediction)
    assert {ran.loc[arg, "device"] for _, arg in uses} == {CPU[0], CPU[1]}
    for user, arg in uses:
        assert rows.loc[arg, "device"] == rows.loc[user, "device"] == ran.loc[arg, "device"]
    compute = prediction.ops[prediction.ops["type"].isin(["MatMul", "BiasAdd"])]
    assert len(compute) == 4 and not compute["device"].str.contains("GPU").any()


@pytest.mark.parametrize("name", REAL_CODE)
def test_trace_and_prediction_explain_resource_users_alike(real_code: dict, name: str) -> None:
    """An op using a resource is colocated with it, in the trace and in the prediction."""
    result = real(real_code, name)
    traced = result["trace"].ops.drop_duplicates("op").set_index("op")
    predicted = result["gpu"].ops.set_index("op")
    uses = resource_uses(result["trace"])
    assert uses
    for user, arg in uses:
        if user not in traced.index:
            continue  # built, not run (e.g. Grappler removed it)
        trace_row, predicted_row = traced.loc[user], predicted.loc[user]
        assert trace_row["how"] == predicted_row["how"], (user, trace_row["reason"])
        if not trace_row["requested_device"]:
            assert trace_row["how"] == "colocated", (user, trace_row["reason"])
            for reason in (trace_row["reason"], predicted_row["reason"]):
                assert f"shares a resource/ref edge with {arg} (" in reason, reason


@pytest.mark.parametrize("name", REAL_CODE)
def test_predicted_results_are_explained_as_results(real_code: dict, name: str) -> None:
    ops = real(real_code, name)["gpu"].ops
    results = ops[ops["type"] == "_Retval"]
    assert len(results)
    for reason in results["reason"]:
        assert reason.startswith("A function's result"), reason
        assert "function argument:" not in reason


def test_a_result_is_pinned_where_its_op_asked(real_code: dict) -> None:
    prediction = real(real_code, "variables_on_cpus")["gpu"]
    rows = prediction.ops.set_index("op")
    facts = prediction.facts
    pinned = [r for r in rows.index if rows.loc[r, "type"] == "_Retval"]
    by_request = [r for r in pinned if "asked for /device:CPU:1" in rows.loc[r, "reason"]]
    assert len(by_request) == 1 and rows.loc[by_request[0], "device"] == CPU[1]
    assert "pinned, which makes its value" in rows.loc[by_request[0], "reason"]
    assert facts.types["pinned"] == "Mul"


def table_iterator_and_variables() -> Any:
    """TF1: a lookup table fed by a one-shot iterator, embeddings from a variable."""
    keys = tf.constant(["a", "b", "c"], name="keys")
    values = tf.constant([1, 2, 3], tf.int64, name="values")
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, values), -1)
    words = tf.compat.v1.data.make_one_shot_iterator(
        tf.data.Dataset.from_tensor_slices(["a", "c", "d", "b"]).batch(2)
    ).get_next()
    ids = table.lookup(words)
    v = tf.Variable(tf.ones((4, 2)), name="v")
    embedded = tf.nn.embedding_lookup(v, ids % 4)
    w = tf.Variable(tf.ones((2, 3)), name="w")
    return tf.matmul(embedded, w, name="MM")


def test_graph_tables_iterators_and_variables_with_a_gpu() -> None:
    prediction = predict_placement(table_iterator_and_variables, gpus=1, device_count=CPUS)
    rows = prediction.ops.set_index("op")
    assert len(prediction.notes) == 1 and not (rows["how"] == "error").any()
    for name in ("hash_table", "hash_table_Lookup/LookupTableFindV2", "IteratorGetNext"):
        assert rows.loc[name, "device"] == CPU[0], name
    table = rows.loc["hash_table"]
    assert table["how"] == "implicit" and "placed with its consumers" in table["reason"]
    lookup = rows.loc["hash_table_Lookup/LookupTableFindV2"]
    assert lookup["how"] == "colocated"
    assert "shares a resource/ref edge with hash_table," in lookup["reason"]
    assert "no GPU kernel" in lookup["reason"]  # why the group stays on the CPU
    # a variable nobody placed: where its kernels put it alone, its reads with it
    variable = rows.loc["w"]
    assert variable["device"] == GPU0 and variable["how"] == "implicit", variable["reason"]
    read = rows.loc["MM/ReadVariableOp"]
    assert read["device"] == GPU0 and read["how"] == "colocated"
    assert "shares a resource/ref edge with w," in read["reason"]


def test_graph_resource_users_are_colocated_in_the_trace_and_the_prediction() -> None:
    traced = trace_placement(table_iterator_and_variables, device_count=CPUS)
    same = predict_placement(traced, gpus=0)
    ran = traced.ops.drop_duplicates("op").set_index("op")
    rows = same.ops.set_index("op")
    for user in ("hash_table_Lookup/LookupTableFindV2", "MM/ReadVariableOp"):
        assert ran.loc[user, "how"] == rows.loc[user, "how"] == "colocated", ran.loc[user, "reason"]
        assert ran.loc[user, "reason"] == rows.loc[user, "reason"]
    for producer in ("hash_table", "w"):
        assert ran.loc[producer, "how"] == rows.loc[producer, "how"] == "implicit"
