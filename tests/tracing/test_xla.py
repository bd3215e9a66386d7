"""XLA clusters traced for real on XLA:CPU (issue 23): a ``jit_compile=True`` function's TF ops
in ``trace.ops`` (``how="xla"``, the HLO instruction each went into in ``xla_op``), the
instructions XLA ran in ``trace.xla`` and on the device's lane of ``trace.events``, search,
and the ``.tfplace`` round trip. Each test runs in the shared test process, but the one of the
cluster's memory (exact against TensorFlow's allocator: a process of its own)."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pandas.testing as pdt
import pytest

from tfplace_widget import PlacementTrace, predict_placement
from tfplace_widget._analyses.findings.memory import find_memory_peaks
from tfplace_widget._model.columns import OPS_COLUMNS, XLA_COLUMNS
from tfplace_widget._rendering.search import match_names

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


@pytest.fixture(scope="module")
def compiled(tf, trace_placement):
    """A jit_compile=True function with a matmul, an add and a reduction, traced."""

    @tf.function(jit_compile=True)
    def step(x, w):
        product = tf.matmul(x, w, name="product")
        shifted = tf.add(product, 1.0, name="shifted")  # the line of the add
        return tf.reduce_sum(shifted, name="total")

    x = tf.random.normal((64, 64))
    return trace_placement(step, x, x, steps=2)


def row(trace: PlacementTrace, name: str) -> pd.Series:
    found = trace.ops[trace.ops["op"] == name]
    assert len(found) == 1, (name, trace.ops["op"].tolist())
    return found.iloc[0]


def test_each_op_of_the_cluster_is_listed_with_its_instruction(compiled):
    assert list(compiled.ops.columns) == OPS_COLUMNS
    executed = set(compiled.xla["instruction"])
    for name, op_type in (("product", "MatMul"), ("shifted", "AddV2"), ("total", "Sum")):
        op = row(compiled, name)
        assert op["type"] == op_type
        assert op["how"] == "xla" and op["device"] == CPU0
        assert op["function"] == "step"
        assert op["xla_op"] in executed, (name, op["xla_op"], executed)
        assert "cluster step" in op["reason"] and "jit_compile=True" in op["reason"]
        assert "CPU:0" in op["reason"] and op["xla_op"] in op["reason"]
    assert set(compiled.ops["how"]) == {"xla"}
    assert compiled.findings.empty or "xla_hidden" not in set(compiled.findings["kind"])


def test_trace_xla_has_the_instructions_with_their_times(compiled):
    xla = compiled.xla
    assert list(xla.columns) == XLA_COLUMNS and len(xla)
    assert set(xla["cluster"]) == {"step"} and set(xla["device"]) == {CPU0}
    assert (xla["duration_us"] >= 0).all() and (xla["start_us"] >= 0).all()
    assert xla["start_us"].is_monotonic_increasing
    # two traced steps: every instruction ran twice
    assert xla["instruction"].value_counts().min() == 2
    matmul = xla[xla["tf_ops"].map(lambda ops: "product" in ops)]
    assert len(matmul) == 2 and set(matmul["kind"]) == {"dot"}
    assert matmul["source"].iloc[0].startswith(__file__)
    total = xla[xla["tf_ops"].map(lambda ops: "total" in ops)]
    assert len(total) and set(total["instruction"]) >= {row(compiled, "total")["xla_op"]}


def test_instructions_are_events_on_the_device_lane(compiled):
    events = compiled.events
    xla = compiled.xla
    on_lane = events[events["op"].isin(set(xla["instruction"]))]
    assert len(on_lane) == len(xla)
    assert set(on_lane["lane"]) == {CPU0} and set(on_lane["device"]) == {CPU0}
    assert sorted(on_lane["start_us"]) == sorted(xla["start_us"])
    assert on_lane["label"].str.contains("XLA step").all()


def test_search_finds_the_op_and_its_instruction(compiled):
    found = compiled.ops[match_names(compiled.ops["op"], "shifted")]
    assert "shifted" in found["op"].tolist()  # (its constant, shifted/y, matches too)
    instruction = row(compiled, "shifted")["xla_op"]
    events = compiled.events
    assert match_names(events["op"], instruction).any()
    assert events[match_names(events["label"], "shifted")]["op"].eq(instruction).any()


def test_save_and_load_keep_xla(compiled, tmp_path):
    path = compiled.save(tmp_path / "xla.tfplace")
    loaded = PlacementTrace.load(path)
    pdt.assert_frame_equal(loaded.ops, compiled.ops)
    pdt.assert_frame_equal(loaded.xla, compiled.xla)
    pdt.assert_frame_equal(loaded.events, compiled.events)


def test_files_without_xla_still_load(compiled, tmp_path):
    """A file as written before issue 23: no frames/xla.json, no xla_op column."""
    old = PlacementTrace(
        ops=compiled.ops.drop(columns="xla_op"),
        events=compiled.events,
        transfers=compiled.transfers,
        devices=list(compiled.devices),
        mode="function",
    )
    old.xla = old.xla.iloc[:0]
    loaded = PlacementTrace.load(old.save(tmp_path / "old.tfplace"))
    assert loaded.xla.empty and list(loaded.xla.columns) == XLA_COLUMNS
    assert "xla_op" in loaded.ops.columns and loaded.ops["xla_op"].isna().all()


def test_ops_outside_xla_have_no_instruction(tf, trace_placement):
    @tf.function
    def plain(x):
        return tf.reduce_sum(x * 2.0)

    trace = trace_placement(plain, tf.ones((4, 4)))
    assert len(trace.ops) and trace.ops["xla_op"].isna().all()
    assert "xla" not in set(trace.ops["how"]) and trace.xla.empty


def test_keras_train_on_batch_compiled_with_xla(tf, trace_placement):
    import keras

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="dense")])
    model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    trace = trace_placement(model.train_on_batch, tf.ones((8, 4)), tf.ones((8, 3)))
    xla_ops = trace.ops[trace.ops["how"] == "xla"]
    matmuls = xla_ops[xla_ops["type"] == "MatMul"]
    assert len(matmuls) >= 2  # forward and gradient
    assert matmuls["xla_op"].notna().all()
    assert xla_ops["reason"].str.contains("Keras").all()
    assert set(trace.xla["kind"]) >= {"dot"}
    assert trace.xla["tf_ops"].map(len).sum() > 0


def test_xla_time_says_where_the_cluster_time_went(compiled):
    found = compiled.findings[compiled.findings["kind"] == "xla_time"]
    assert len(found) == 1
    finding = found.iloc[0]
    assert finding["severity"] == "info"
    assert "cluster step" in finding["message"] and "CPU:0" in finding["message"]
    longest = compiled.xla.groupby("instruction")["duration_us"].sum().idxmax()
    assert longest in finding["message"]
    assert finding["evidence"]["steps"] == 2
    assert set(finding["ops"]) <= set(compiled.ops["op"])


def test_a_jit_function_called_from_a_plain_one_shows_both(tf, trace_placement):
    @tf.function(jit_compile=True)
    def inner(x):
        return tf.matmul(x, x, name="inner_product")

    @tf.function
    def outer(x):
        return inner(x) + tf.reduce_sum(x)

    trace = trace_placement(outer, tf.ones((8, 8)))
    product = row(trace, "inner_product")
    assert product["how"] == "xla" and product["function"] == "inner"
    assert product["xla_op"] in set(trace.xla["instruction"])
    outside = trace.ops[trace.ops["function"] == "outer"]
    assert len(outside) and "xla" not in set(outside["how"])  # not compiled: usual how
    assert any("trace.xla" in note for note in trace.notes)


def test_an_op_xla_cannot_compile_is_a_clear_error(tf, trace_placement):
    from tfplace_widget import TraceError

    @tf.function(jit_compile=True)
    def stringy(x):
        return tf.strings.length(tf.strings.as_string(x))

    with pytest.raises(TraceError) as raised:
        trace_placement(stringy, tf.ones((4,)))
    message = str(raised.value).splitlines()[0]
    assert "XLA cannot compile stringy: AsString has no XLA kernel" in message
    assert "test_xla.py" in message and "jit_compile=False" in message


def constructed_gpu_xla_xspace() -> bytes:
    """A GPU profile of one XLA cluster, CONSTRUCTED here (this machine has no GPU), as bytes.

    It follows XProf's XPlane schema (xplane_schema.cc): the optimized HLO as an ``HloProto``
    in the ``Hlo Proto`` stat of an event metadata of the ``/host:metadata`` plane; on a
    ``/device:GPU:0`` stream line, one XLA kernel per executed instruction with ``hlo_op`` and
    ``hlo_module`` stats (``hlo_module`` once as a ``ref_value``, as collectors write it).
    """
    from tensorflow.compiler.xla.service import hlo_pb2
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    module_name = "a_inference_gpu_step_7__XlaMustCompile_true_config_proto_1_.3"
    hlo = hlo_pb2.HloProto()
    module = hlo.hlo_module
    module.name = module_name
    fused = module.computations.add(name="fused_computation", id=1)
    inside = fused.instructions.add(name="add.1", opcode="add")
    inside.metadata.op_type, inside.metadata.op_name = "AddV2", "model/add"
    entry = module.computations.add(name=module_name, id=2)
    module.entry_computation_id = 2
    dot = entry.instructions.add(name="dot.3", opcode="dot")
    dot.metadata.op_type, dot.metadata.op_name = "MatMul", "model/MatMul"
    dot.metadata.source_file, dot.metadata.source_line = "/home/me/train.py", 12
    fusion = entry.instructions.add(name="loop_add_fusion", opcode="fusion", fusion_kind="kLoop")
    fusion.called_computation_ids.append(1)

    space = xplane_pb2.XSpace()
    metadata = space.planes.add(id=0, name="/host:metadata")
    metadata.stat_metadata[1].id = 1
    metadata.stat_metadata[1].name = "Hlo Proto"
    metadata.event_metadata[1].id = 1
    metadata.event_metadata[1].name = module_name
    metadata.event_metadata[1].stats.add(metadata_id=1, bytes_value=hlo.SerializeToString())
    gpu = space.planes.add(id=1, name="/device:GPU:0")
    for key, name in enumerate(("hlo_op", "hlo_module", "kernel_details", module_name), 1):
        gpu.stat_metadata[key].id = key
        gpu.stat_metadata[key].name = name
    for key, name in enumerate(("dot.3", "loop_add_fusion"), 1):
        gpu.event_metadata[key].id = key
        gpu.event_metadata[key].name = name
    line = gpu.lines.add(id=7, name="Stream #7(Kernel)", timestamp_ns=1_000_000_000)
    for key, (offset, duration) in enumerate(((0, 5_000_000), (6_000_000, 2_000_000)), 1):
        event = line.events.add(metadata_id=key, offset_ps=offset, duration_ps=duration)
        event.stats.add(metadata_id=1, str_value=gpu.event_metadata[key].name)
        event.stats.add(metadata_id=2, ref_value=4)  # hlo_module, by reference
        event.stats.add(metadata_id=3, str_value="regs:32")
    return space.SerializeToString()


def test_constructed_gpu_xla_kernels_become_instructions(tf):
    from tfplace_widget._sources.xla import function_of_module, xla_from_xspace
    from tfplace_widget._tracing.xla import xla_parts

    profile = xla_from_xspace(constructed_gpu_xla_xspace())
    [module] = profile.modules
    assert function_of_module(module) == "__inference_gpu_step_7"
    assert profile.modules[module]["loop_add_fusion"].tf_ops == ["model/add"]
    assert [run[1:3] for run in profile.runs] == [
        ("dot.3", "/device:GPU:0"),
        ("loop_add_fusion", "/device:GPU:0"),
    ]
    origin = min(run[4] for run in profile.runs)
    _, xla, threads = xla_parts(profile, origin, CPU0, "tf.function(jit_compile=True)")
    gpu0 = "/job:localhost/replica:0/task:0/device:GPU:0"
    assert xla["instruction"].tolist() == ["dot.3", "loop_add_fusion"]
    assert set(xla["device"]) == {gpu0} and set(xla["cluster"]) == {"gpu_step"}
    assert xla["kind"].tolist() == ["dot", "kLoop"]
    assert xla["start_us"].tolist() == [0, 6] and xla["duration_us"].tolist() == [5, 2]
    assert xla["tf_ops"].tolist() == [["model/MatMul"], ["model/add"]]
    assert xla["source"].tolist() == ["/home/me/train.py:12", ""]
    assert threads == [7, 7]


def _compiles_while_traced(trace: PlacementTrace) -> int:
    return sum(counts["compiles"] for counts in trace.xla.attrs["compiles"].values())


def test_a_trace_runs_the_program_xla_compiled_for_the_user(tf, trace_placement):
    """XLA keys its programs by the function's name and the call's ConfigProto: the trace
    calls the user's own jit function, settings unchanged, so XLA compiles nothing again
    (a copy of it, or Grappler switched off, cost a new compile: 0.5 s for 300 ops)."""
    import keras

    @tf.function(jit_compile=True)
    def alone(x):
        return tf.reduce_sum(tf.matmul(x, x) + 1.0)

    @tf.function(jit_compile=True)
    def inner(x):
        return tf.matmul(x, x) * 2.0

    @tf.function
    def outer(x):
        return inner(x) + tf.reduce_sum(x)

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    x, y = tf.ones((8, 4)), tf.ones((8, 3))
    square = tf.ones((16, 16))

    @tf.function(jit_compile=True)
    def fresh(x):
        return tf.reduce_max(x) - 1.0

    # Never called before: its compile falls in the traced call (no untraced warm-up).
    first = trace_placement(fresh, square, warmup=0)
    if _compiles_while_traced(first) == 0:
        pytest.skip("this TensorFlow's profile records no XLA compilation (TF 2.16)")
    calls = [(alone, (square,)), (outer, (square,)), (model.train_on_batch, (x, y))]
    for fn, args in calls:
        fn(*args)  # the user's call: XLA compiles here, or found it compiled
        trace = trace_placement(fn, *args, warmup=0)
        assert len(trace.xla), fn
        assert _compiles_while_traced(trace) == 0, (fn, trace.xla.attrs["compiles"])


def test_an_override_inside_a_cluster_says_xla_places_it_whole(tf, trace_placement):
    @tf.function(jit_compile=True)
    def cluster(x):
        return tf.reduce_sum(tf.matmul(x, x, name="cluster_product"))

    @tf.function
    def caller(x):
        return cluster(x) + tf.reduce_sum(x, name="caller_sum")

    x = tf.ones((4, 4))
    for fn in (cluster, caller):
        with pytest.raises(ValueError, match="inside the XLA cluster cluster") as raised:
            trace_placement(fn, x, overrides={"cluster_product": "/cpu:0"})
        assert "jit_compile=False" in str(raised.value)
    moved = trace_placement(caller, x, overrides={"caller_sum": "/cpu:0"})
    assert row(moved, "caller_sum")["how"] == "explicit"
    assert row(moved, "cluster_product")["how"] == "xla"


def test_only_the_modules_that_ran_are_parsed(tf, trace_placement):
    """The profile holds the HLO of every module this process compiled (a notebook's other
    jit functions too); only those that ran in the traced calls are parsed, all counted."""
    from tfplace_widget._sources.xla import xla_from_xspace

    @tf.function(jit_compile=True)
    def elsewhere(x):
        return tf.reduce_min(x) + 3.0

    @tf.function(jit_compile=True)
    def traced(x):
        return tf.reduce_max(x) * 3.0

    x = tf.ones((5, 5))
    elsewhere(x)
    trace = trace_placement(traced, x)
    profile = xla_from_xspace(trace.raw["xspace.pb"])
    ran = {run[0] for run in profile.runs}
    assert ran and set(profile.modules) == ran
    assert any("elsewhere" in module for module in profile.programs), profile.programs
    assert set(profile.programs) > ran


# -- memory: the cluster's buffers ----------------------------------------------------------
MEMORY_CHILD = """
import json, sys
import tensorflow as tf
from tfplace_widget import trace_placement

@tf.function(jit_compile=True)
def wide(x, w):
    hidden = tf.nn.relu(tf.matmul(x, w, name="hidden"))
    return tf.reduce_sum(tf.matmul(hidden, w, name="out"), name="total")

@tf.function
def outer(x, w):  # calls the jit function: its call op has no op event in the profile
    return tf.reduce_sum(wide(tf.matmul(x, w, name="plain") * 2.0, w))

x = tf.random.normal((512, 512))
stats = {}
for fn in (wide, outer):
    fn(x, x)  # compiled before the trace, as the user's next call finds it
    try:
        tf.config.experimental.reset_memory_stats("CPU:0")
        before = tf.config.experimental.get_memory_info("CPU:0")
    except ValueError:  # "Allocator stats not available for device 'CPU:0'"
        before = None
    trace = trace_placement(fn, x, x, steps=2)
    after = tf.config.experimental.get_memory_info("CPU:0") if before is not None else None
    trace.save(sys.argv[1] + f"/{fn.__name__}.tfplace")
    stats[fn.__name__] = {"before": before, "after": after}
json.dump(stats, open(sys.argv[1] + "/stats.json", "w"))
"""


@pytest.fixture(scope="module")
def xla_memory(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[PlacementTrace, dict]]:
    """A jit_compile function with a 1 MiB activation, and a tf.function calling it, each
    traced in a fresh process between TensorFlow's own readings of its CPU allocator (peak
    reset before)."""
    out = tmp_path_factory.mktemp("xla_memory")
    done = subprocess.run(
        [sys.executable, "-c", MEMORY_CHILD, str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    stats = json.loads((out / "stats.json").read_text())
    return {name: (PlacementTrace.load(out / f"{name}.tfplace"), stats[name]) for name in stats}


def _compared(trace: PlacementTrace, stats: dict) -> pd.DataFrame:
    """The step's memory rows, once checked that there is something to compare: skips (with
    the reason) where TensorFlow's allocator keeps no stats or the profile has no XLA."""
    step = trace.memory[trace.memory["kind"] == "temporary"]
    if stats["before"] is None:
        assert step.empty and trace.ops["allocated_bytes"].isna().all()
        pytest.skip(
            "TensorFlow's CPU allocator keeps no stats and reports no allocation to the "
            "profiler (oneDNN off): no memory rows, checked"
        )
    if trace.xla.empty:
        pytest.skip(
            "this TensorFlow's profile has no XLA instruction events (as on TF 2.16): the "
            "trace knows no cluster to hold the buffers"
        )
    peaks = trace.memory_peaks()
    assert list(peaks["device"]) == [CPU0], peaks
    before, after = stats["before"], stats["after"]
    assert before["current"] + int(peaks["peak_bytes"].iloc[0]) == after["peak"], stats
    return step


def test_an_xla_clusters_buffers_are_the_memory_tensorflows_allocator_saw(xla_memory):
    """XLA:CPU takes a program's buffers (one for all its instructions) when the program
    starts, on the thread of the eager op TensorFlow names after the compiled function (their
    ``tf_op``), which no placed graph holds: they were left out (trace.memory empty). They are
    the cluster's, under its name: the bytes in use before the call plus the step's peak are
    TensorFlow's own peak for it (get_memory_info), and no op of the cluster claims bytes of
    its own. Where the CPU allocator keeps no stats (oneDNN off) it reports nothing either."""
    trace, stats = xla_memory["wide"]
    step = _compared(trace, stats)
    assert len(step) and set(step["op"]) == {"wide"}
    assert set(step["device"]) == {CPU0} and set(step["allocator"]) == {"mklcpu"}
    assert step["bytes"].max() >= 512 * 512 * 4  # the hidden activation, at least
    assert step["bytes"].sum() == 0  # each step frees what it took
    assert list(trace.memory_peaks()["ops"].iloc[0]) == ["wide"]
    cluster = trace.ops[trace.ops["function"] == "wide"]
    assert len(cluster) and cluster["allocated_bytes"].isna().all()
    assert cluster["reason"].str.contains("trace.memory has them under wide").all()
    # what holds the peak is the cluster, no op: no memory_peak finding names it as one
    assert find_memory_peaks(trace, min_bytes=1) == []
    # a prediction with a GPU has no row of the cluster's ops (it replays the compiled call):
    # their buffers are put on no device rather than left on the traced CPU
    predicted = predict_placement(trace, gpus=1)
    assert "wide" not in set(predicted.ops["function"]) | set(predicted.memory["op"])


def test_a_cluster_called_from_a_tf_function_holds_its_buffers_too(xla_memory):
    """Called from a tf.function, the jit function runs under a call op that has no op event
    (its kernel is asynchronous): XLA's allocations name no op. Taken while the cluster's
    program ran on that thread (``CpuExecutable::ExecuteAsyncOnStream``), they are the
    cluster's, beside the plain ops' own: TensorFlow's peak again."""
    trace, stats = xla_memory["outer"]
    step = _compared(trace, stats)
    assert {"wide", "plain"} <= set(step["op"]), step
    assert step.loc[step["op"] == "wide", "bytes"].max() >= 512 * 512 * 4
    assert step["bytes"].sum() == 0
    assert trace.ops.loc[trace.ops["op"] == "plain", "allocated_bytes"].iloc[0] >= 512 * 512 * 4
