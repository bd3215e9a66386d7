"""Memory from TensorFlow's own allocator records (issue 34), checked against those records.

Graph mode on two real CPUs: a small dense net's training step (two layers, softmax
cross-entropy, gradient descent), its first layer on CPU:0 and the rest on CPU:1, traced with
FULL_TRACE. The ground truth is the RunMetadata the trace keeps (``trace.raw``): each node's
``AllocatorMemoryUsed`` (TensorFlow's ``TrackingAllocator`` counted ``total_bytes`` and the op's
high-water mark ``peak_bytes`` itself) and its ``allocation_records``. With oneDNN on the CPU
allocator is ``mklcpu``, off it is ``cpu``: the tests read the name from the records.
"""

from __future__ import annotations

import copy
import io
import json
import zipfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pandas.testing as pdt
import pytest
from helpers import SEED_N, TWO_CPUS

from tfplace_widget import PlacementTrace, TraceError, predict_placement
from tfplace_widget._analyses.memory import memory_peaks
from tfplace_widget._model.columns import MEMORY_COLUMNS
from tfplace_widget._model.devices import canonical_device
from tfplace_widget.examples import gpu_trace

FLOAT32 = 4


def dense_training_step(tf: Any) -> Any:
    """A two-layer dense net's SGD step: layer 1 on CPU:0, layer 2 and the loss on CPU:1."""
    v1 = tf.compat.v1

    def dense(inputs: Any, units: int, name: str) -> Any:
        kernel = v1.get_variable(f"{name}/kernel", [inputs.shape[1], units])
        bias = v1.get_variable(f"{name}/bias", [units], initializer=v1.zeros_initializer())
        return tf.nn.bias_add(tf.matmul(inputs, kernel), bias)

    images = tf.random.uniform([256, 784], seed=1, name="images")
    labels = tf.zeros([256], tf.int64, name="labels")
    with tf.device("/cpu:0"):
        hidden = tf.nn.relu(dense(images, 512, "dense_1"))
    with tf.device("/cpu:1"):
        logits = dense(hidden, 10, "dense_2")
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        )
    return v1.train.GradientDescentOptimizer(0.1).minimize(loss)


@pytest.fixture(scope="module")
def dense_net(tf, trace_placement):
    return trace_placement(lambda: dense_training_step(tf), device_count=TWO_CPUS)


@pytest.fixture(scope="module")
def dense_net_steps2(tf, trace_placement):
    return trace_placement(lambda: dense_training_step(tf), device_count=TWO_CPUS, steps=2)


def tf_records(tf: Any, trace: Any) -> list[tuple[int, str, str, Any]]:
    """TensorFlow's own records, from the RunMetadata the trace keeps: ``(step, device, op,
    AllocatorMemoryUsed)`` for each allocator each node used."""
    found = []
    steps = sorted(name for name in trace.raw if name.startswith("run_metadata"))
    assert steps, "the trace keeps its RunMetadata"
    for step, name in enumerate(steps):
        metadata = tf.compat.v1.RunMetadata()
        metadata.ParseFromString(trace.raw[name])
        for dev in metadata.step_stats.dev_stats:
            for node in dev.node_stats:
                for used in node.memory:
                    found.append((step, canonical_device(dev.device), node.node_name, used))
    return found


def step_memory(trace: Any) -> pd.DataFrame:
    """``trace.memory``'s rows of the step's own allocations (not the persistent ones)."""
    return trace.memory[trace.memory["kind"] == "temporary"]


def test_ops_bytes_are_tensorflows_own_counts(tf, dense_net_steps2):
    """Per op: ``allocated_bytes`` is TF's ``total_bytes`` summed over the traced steps,
    ``peak_bytes`` the largest ``peak_bytes``, ``allocator`` TF's allocator name; and the
    per-op bytes sum to what the allocation records say."""
    trace = dense_net_steps2
    records = tf_records(tf, trace)
    total, peak, allocators = defaultdict(int), defaultdict(int), defaultdict(set)
    for _, device, op, used in records:
        total[op, device] += used.total_bytes
        peak[op, device] = max(peak[op, device], used.peak_bytes)
        allocators[op, device].add(used.allocator_name)
    # the step's big tensors, each allocated once per step by its op: 256x512 and 784x512 floats
    assert total[("MatMul", trace.device_of("MatMul"))] == 2 * 256 * 512 * FLOAT32
    assert len(total) >= 10 and {a for names in allocators.values() for a in names} <= {
        "cpu",
        "mklcpu",
    }
    ops = trace.ops.set_index(["op", "device"])
    for key, expected in total.items():
        row = ops.loc[key]
        assert row["allocated_bytes"] == expected, key
        assert row["peak_bytes"] == peak[key], key
        assert row["allocator"] == ", ".join(sorted(allocators[key])), key
    allocated = sum(
        r.alloc_bytes for *_, used in records for r in used.allocation_records if r.alloc_bytes > 0
    )
    assert trace.ops["allocated_bytes"].sum() == allocated == sum(total.values())
    memory = step_memory(trace)
    assert memory.loc[memory["bytes"] > 0, "bytes"].sum() == allocated
    # ops that ran without allocating (variable reads, forwarded inputs) allocated 0 bytes;
    # those with no record of their own (_Send, _Recv) are not known
    ran = trace.ops["runs"].notna()
    assert (trace.ops.loc[ran, "allocated_bytes"] >= 0).all()
    assert trace.ops.loc[~ran, "allocated_bytes"].isna().all()
    quiet = ran & (trace.ops["allocated_bytes"] == 0)
    assert quiet.any() and trace.ops.loc[quiet, "allocator"].isna().all()


def test_memory_rows_are_the_allocation_records(tf, dense_net):
    """``trace.memory`` holds every allocation record, on the op's device, on the ops' clock;
    each op's own records there rise to exactly TF's ``peak_bytes`` for it."""
    trace = dense_net
    assert list(trace.memory.columns) == MEMORY_COLUMNS
    memory = step_memory(trace)
    assert len(memory)
    records = tf_records(tf, trace)
    expected = sorted(
        (device, used.allocator_name, op, r.alloc_bytes)
        for _, device, op, used in records
        for r in used.allocation_records
    )
    columns = ["device", "allocator", "op", "bytes"]
    got = sorted(memory[columns].itertuples(index=False, name=None))
    assert got == expected
    assert memory["time_us"].is_monotonic_increasing
    starts = trace.ops.set_index(["op", "device"])["start_us"]
    for _, device, op, used in records:
        mine = memory[(memory["op"] == op) & (memory["device"] == device)]
        assert mine["bytes"].cumsum().max() == used.peak_bytes, op
        # an op's first allocation is made while it runs: at or after its start
        assert mine["time_us"].min() >= starts.loc[(op, device)], op
    for _, group in memory.groupby(["device", "allocator"]):
        assert (group["live_bytes"] == group["bytes"].cumsum()).all()


def test_device_peak_from_the_records(tf, dense_net):
    """Per device and allocator: the peak of the live bytes the records give, at least the
    largest op's own ``peak_bytes``, and held by the ops ``memory_peaks`` names."""
    trace = dense_net
    records = tf_records(tf, trace)
    changes = defaultdict(list)
    for _, device, _, used in records:
        for r in used.allocation_records:
            changes[device, used.allocator_name].append((r.alloc_micros, r.alloc_bytes))
    peaks = trace.memory_peaks().set_index(["device", "allocator"])
    assert set(peaks.index) == set(changes) and len(peaks) == 2  # CPU:0 and CPU:1
    for key, found in changes.items():
        ordered = [b for _, b in sorted(found, key=lambda change: change[0])]
        curve = np.cumsum(ordered)
        row = peaks.loc[key]
        assert row["peak_bytes"] == curve.max(), key
        largest_op = max(u.peak_bytes for _, d, _, u in records if (d, u.allocator_name) == key)
        assert row["peak_bytes"] >= largest_op
        assert sum(row["ops_bytes"]) == row["peak_bytes"] and row["ops"]
        assert row["ops_bytes"] == sorted(row["ops_bytes"], reverse=True)
    cpu0 = peaks.loc[trace.device_of("MatMul")].iloc[0]
    # the first layer's weight gradient (784x512 floats) is the largest tensor live at CPU:0's
    # peak, which is after the backward pass began
    assert cpu0["ops"][0] == "gradients/MatMul_grad/MatMul_1"
    assert cpu0["ops_bytes"][0] == 784 * 512 * FLOAT32
    assert cpu0["peak_time_us"] > trace.ops.set_index("op").loc["MatMul", "start_us"]


def test_one_op_peak_is_tensorflows_peak_bytes(tf, trace_placement):
    """Where one op holds a device's memory (a concat on CPU:1 of two tensors made on CPU:0),
    the device's peak is that op's own ``AllocatorMemoryUsed.peak_bytes``: 2n float32s."""

    def concat_on_cpu1() -> Any:
        with tf.device("/cpu:0"):
            a, b = tf.ones((SEED_N,), name="A"), tf.ones((SEED_N,), name="B")
        with tf.device("/cpu:1"):
            return tf.concat([a, b], 0, name="C")

    trace = trace_placement(concat_on_cpu1, device_count=TWO_CPUS)
    device = trace.device_of("C")
    theirs = [u.peak_bytes for _, d, _, u in tf_records(tf, trace) if d == device]
    peaks = memory_peaks(trace)
    mine = peaks[peaks["device"] == device].iloc[0]
    assert mine["peak_bytes"] == max(theirs) == 2 * SEED_N * FLOAT32
    assert mine["ops"] == ["C"]


def test_an_op_that_forwards_its_input_allocates_nothing(tf, seed_cpu):
    """The seed's add on CPU:1 writes into the buffer of an input made on CPU:0 (two CPUs of
    one process share memory, so the Send/Recv copies nothing): TensorFlow records no
    allocation for it, so its output_bytes are n float32s and its allocated_bytes 0."""
    c = seed_cpu.ops[seed_cpu.ops["op"] == "C"].iloc[0]
    assert c["output_bytes"] == SEED_N * FLOAT32
    assert not [u for _, _, op, u in tf_records(tf, seed_cpu) if op == "C"]
    assert c["allocated_bytes"] == 0 and pd.isna(c["allocator"])
    assert seed_cpu.device_of("C") not in set(memory_peaks(seed_cpu)["device"])


def test_several_steps_each_start_empty(tf, dense_net_steps2):
    """Two traced steps: the records of each hold only its own allocations, so the live bytes
    restart at 0 and the device's peak is the larger of the two steps' own peaks (each step's
    records from TensorFlow; how many there are differs between runs, as TF forwards a buffer
    when its tensor has no other reader left)."""
    trace = dense_net_steps2
    records = tf_records(tf, trace)
    changes = defaultdict(list)
    for step, device, _, used in records:
        for r in used.allocation_records:
            changes[device, used.allocator_name, step].append((r.alloc_micros, r.alloc_bytes))
    assert {step for *_, step in changes} == {0, 1}
    assert len(step_memory(trace)) == sum(len(found) for found in changes.values())
    expected: dict[tuple[str, str], int] = defaultdict(int)
    for (device, allocator, _), found in changes.items():
        curve = np.cumsum([b for _, b in sorted(found, key=lambda change: change[0])])
        expected[device, allocator] = max(expected[device, allocator], int(curve.max()))
    peaks = trace.memory_peaks().set_index(["device", "allocator"])["peak_bytes"]
    assert peaks.to_dict() == dict(expected)
    # the second step's first record on each device starts from nothing
    for (device, allocator, step), found in changes.items():
        if step == 1:
            memory = step_memory(trace)
            rows = memory[(memory["device"] == device) & (memory["allocator"] == allocator)]
            first = rows.iloc[len(rows) - len(found)]
            assert first["live_bytes"] == first["bytes"], (device, allocator)


def test_save_and_load_and_tables_keep_memory(dense_net, tmp_path):
    loaded = PlacementTrace.load(dense_net.save(tmp_path / "dense.tfplace"))
    pdt.assert_frame_equal(loaded.memory, dense_net.memory)
    pdt.assert_frame_equal(loaded.ops, dense_net.ops)
    frames = dense_net.to_frames()
    assert list(frames) == ["ops", "events", "transfers", "memory"]
    pdt.assert_frame_equal(frames["memory"], dense_net.memory)
    written = dense_net.to_csv(tmp_path / "tables")
    table = pd.read_csv(written["memory"])
    memory = dense_net.memory
    pdt.assert_frame_equal(table.drop(columns=["variable"]), memory.drop(columns=["variable"]))
    # a CSV has no dtypes: the variables' names, missing where none is named
    names = memory["variable"].tolist()
    assert [None if pd.isna(name) else name for name in table["variable"]] == names
    assert any(isinstance(name, str) for name in names)  # the graph's variables


def test_files_without_memory_still_load(dense_net, tmp_path):
    """A file as written before issue 34: no frames/memory.json, no memory columns."""
    old = PlacementTrace(
        ops=dense_net.ops.drop(columns=["allocated_bytes", "peak_bytes", "allocator"]),
        events=dense_net.events,
        transfers=dense_net.transfers,
        devices=list(dense_net.devices),
        mode="graph",
    )
    path = old.save(tmp_path / "old.tfplace")
    assert "frames/memory.json" not in zipfile.ZipFile(path).namelist()
    loaded = PlacementTrace.load(path)
    assert loaded.memory.empty and list(loaded.memory.columns) == MEMORY_COLUMNS
    assert list(loaded.ops.columns) == list(dense_net.ops.columns)
    assert loaded.ops["allocated_bytes"].isna().all() and loaded.ops["allocator"].isna().all()
    assert str(loaded.ops["peak_bytes"].dtype) == "Int64"
    assert memory_peaks(loaded).empty


def test_files_saved_before_variable_load_with_no_names(dense_net, tmp_path):
    """A memory frame saved before ``variable`` (the variable a persistent row holds) loads
    with the column, naming no variable; its rows as saved, its peaks as before."""
    old = copy.copy(dense_net)
    old.memory = dense_net.memory.drop(columns=["variable"])
    loaded = PlacementTrace.load(old.save(tmp_path / "old.tfplace"))
    assert list(loaded.memory.columns) == MEMORY_COLUMNS
    assert loaded.memory["variable"].isna().all() and loaded.memory["variable"].dtype == object
    pdt.assert_frame_equal(loaded.memory.drop(columns=["variable"]), old.memory)
    peaks = memory_peaks(loaded)
    assert peaks["persistent_ops"].tolist() == memory_peaks(dense_net)["persistent_ops"].tolist()
    assert all(name is None for names in peaks["persistent_variables"] for name in names)


def test_a_damaged_memory_frame_is_refused(dense_net, tmp_path):
    """A memory frame the analyses cannot read (text where bytes belong) is refused on load,
    naming the member and the column, as the other frames are."""
    damaged = copy.copy(dense_net)
    damaged.memory = dense_net.memory.astype({"live_bytes": str})
    path = damaged.save(tmp_path / "damaged.tfplace")
    with pytest.raises(TraceError, match=r"frames/memory.json.*'live_bytes'.*whole numbers"):
        PlacementTrace.load(path)


def test_traces_without_allocator_records_say_nothing(dense_net):
    """No numbers where TensorFlow recorded none: the recorded GPU traces (Chrome traces that
    timeline.py wrote without show_memory: no counter, no tensor snapshot) and predictions."""
    for name in (
        "riptide/timeline.ctf.json",
        "ikhlestov-tensorflow-profiling/GPU_timeline_01.json",
    ):
        trace = PlacementTrace.from_chrome_trace(gpu_trace(name))
        assert trace.memory.empty and list(trace.memory.columns) == MEMORY_COLUMNS
        assert trace.ops[["allocated_bytes", "peak_bytes", "allocator"]].isna().all().all()
        assert memory_peaks(trace).empty
    predicted = predict_placement(dense_net, gpus=1)  # its memory is predicted, not recorded
    assert not {"allocated_bytes", "peak_bytes", "allocator"} & set(predicted.ops.columns)
    assert isinstance(dense_net.ops["allocated_bytes"].dtype, pd.Int64Dtype)


def test_chrome_export_has_memory_counters(dense_net, tmp_path):
    """Perfetto's counter tracks, as timeline.py's show_memory writes them: a ``C`` event per
    change of live bytes, on the device's process; the file still reads back as before."""
    path = dense_net.to_chrome_trace(tmp_path / "dense.json")
    events = json.loads(Path(path).read_text())["traceEvents"]
    counters = [e for e in events if e["ph"] == "C"]
    memory = dense_net.memory
    assert len(counters) == len(memory)
    names = {e["args"]["name"]: e["pid"] for e in events if e.get("name") == "process_name"}
    for event, row in zip(counters, memory.itertuples(index=False), strict=True):
        kind = "Memory" if row.kind == "temporary" else "Persistent memory"
        assert event["name"] == f"{kind} {row.allocator}" and event["cat"] == "memory"
        assert (event["ts"], event["args"]) == (row.time_us, {"live_bytes": row.live_bytes})
        assert event["pid"] == names[f"{row.device} Compute"]
    assert len(PlacementTrace.from_chrome_trace(path).events) == len(dense_net.events)


def test_text_report_prints_each_devices_peak(dense_net):
    from tfplace_widget._analyses.summary import format_bytes
    from tfplace_widget._rendering.text_report import TextOutput, print_summary

    out = io.StringIO()
    print_summary(dense_net, TextOutput(out), list_ops=False)
    text = out.getvalue()
    lines = text.split("Memory peak per device", 1)[1].splitlines()
    for row in memory_peaks(dense_net).itertuples(index=False):
        short = row.device.rsplit("device:", 1)[-1]
        line = next(x for x in lines if x.strip().startswith(f"{short} "))
        assert row.allocator in line and format_bytes(row.peak_bytes) in line
        assert f"{row.ops[0]} {format_bytes(row.ops_bytes[0])}" in line


# -- a real GPU profile: TensorFlow's own BFC allocator records -----------------------------
BERT_PROFILE = "tensorflow-profiler-bert/34.83.195.179_6003.xplane.pb"


def host_plane(path: Path) -> Any:
    """The ``/host:CPU`` plane of a profile, read with TensorFlow's own ``xplane_pb2`` (not
    the tool's reader)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(path.read_bytes())
    (host,) = [plane for plane in space.planes if plane.name == "/host:CPU"]
    return host


def allocator_events(host: Any) -> dict[str, list[tuple[int, int, dict[str, Any]]]]:
    """The host plane's allocator events: per allocator, ``(time_ps, +1 | -1, stats by
    name)`` in time order."""
    stat_names = {key: meta.name for key, meta in host.stat_metadata.items()}
    kinds = {"MemoryAllocation": 1, "MemoryDeallocation": -1}
    found = defaultdict(list)
    for line in host.lines:
        for event in line.events:
            sign = kinds.get(host.event_metadata[event.metadata_id].name)
            if sign is None:
                continue
            stats = {}
            for stat in event.stats:
                value = getattr(stat, stat.WhichOneof("value"))
                if stat.WhichOneof("value") == "ref_value":
                    value = stat_names[value]
                stats[stat_names[stat.metadata_id]] = value
            time_ps = line.timestamp_ns * 1000 + event.offset_ps
            found[stats["allocator_name"]].append((time_ps, sign, stats))
    return {name: sorted(events, key=lambda e: e[0]) for name, events in found.items()}


def host_ops_that_ran(host: Any) -> set[str]:
    """The node names of the host plane's op events (``"<node>:<OpType>"``)."""
    names = {}
    for key, meta in host.event_metadata.items():
        node, sep, op_type = meta.name.rpartition(":")
        if sep and node and op_type.isidentifier() and " " not in meta.name:
            names[key] = node
    events = (event for line in host.lines for event in line.events)
    return {names[e.metadata_id] for e in events if e.metadata_id in names}


@pytest.fixture(scope="module")
def bert_records(tf) -> tuple[dict[str, list], set[str]]:
    """The BERT profile's allocator events and the ops that ran, by TensorFlow's proto."""
    host = host_plane(gpu_trace(BERT_PROFILE))
    return allocator_events(host), host_ops_that_ran(host)


@pytest.fixture(scope="module")
def bert_profile() -> PlacementTrace:
    return PlacementTrace.from_xspace(gpu_trace(BERT_PROFILE))


def test_gpu_peak_is_the_gpu_allocators_own(bert_records, bert_profile):
    """A real GPU profile (BERT training on GPU:4 and GPU:6): each GPU's peak is the peak of
    its BFC allocator's own records. The records are complete: each event's
    ``bytes_allocated`` (the allocator's bytes in use after it) moves by exactly its chunk,
    so the step's curve is theirs less what they held before it; the ops' share of it (every
    chunk an op that ran allocated, freed by address) peaks at ``memory_peaks``' number, on
    the op's device. What the allocator held beyond it at its own peak is only chunks of ops
    that never ran in the profile (constants made as the function's kernels were built)."""
    events, ran = bert_records
    peaks = bert_profile.memory_peaks().set_index(["device", "allocator"])
    for index in (4, 6):
        allocator = f"GPU_{index}_bfc"
        found = events[allocator]
        in_use = [stats["bytes_allocated"] for _, _, stats in found]
        moves = [sign * stats["allocation_bytes"] for _, sign, stats in found]
        assert np.diff(in_use).tolist() == moves[1:]  # TF's own counter, event by event
        before = in_use[0] - moves[0]
        live, held, curve = {}, 0, []
        for _, sign, stats in found:
            if sign > 0 and stats.get("tf_op") in ran:
                live[stats["addr"]] = stats["allocation_bytes"]
                held += stats["allocation_bytes"]
            elif sign < 0 and stats["addr"] in live:
                held -= live.pop(stats["addr"])
            curve.append(held)
        row = peaks.loc[(f"/job:localhost/replica:0/task:0/device:GPU:{index}", allocator)]
        assert row["peak_bytes"] == max(curve) > 2 * 1024**3  # 2.2 GB of activations
        assert sum(row["ops_bytes"]) == row["peak_bytes"]
        assert all(op.startswith(f"replica_{index}/") for op in row["ops"][:10])
        at_peak = int(np.argmax(in_use))
        gap = in_use[at_peak] - before - curve[at_peak]
        unran = {}
        for _, sign, stats in found[: at_peak + 1]:
            if sign > 0 and stats.get("tf_op") not in ran:
                unran[stats["addr"]] = stats["allocation_bytes"]
            elif sign < 0:
                unran.pop(stats["addr"], None)
        assert 0 <= gap == sum(unran.values()) < 64 * 1024
    host = peaks.loc[("/host:CPU", "gpu_host_bfc")]  # the GPUs' pinned host memory
    assert host["peak_bytes"] == 256


def test_a_profile_file_opens_like_any_trace_file(bert_profile):
    """``show_placement(path)`` and ``compare`` take a ``.xplane.pb`` as ``from_xspace`` does."""
    from tfplace_widget._tracing.dispatch import as_trace

    opened = as_trace(str(gpu_trace(BERT_PROFILE)))
    pdt.assert_frame_equal(opened.memory, bert_profile.memory)
    pdt.assert_frame_equal(opened.ops, bert_profile.ops)


def xprof_memory_profile(path: Path) -> dict[str, Any]:
    """XProf's memory profile of a profile (TensorBoard's Memory Profile tool), made by the
    converter TensorFlow's wheel ships; skipped where this TensorFlow has none."""
    try:
        from tensorflow.python.profiler.internal import _pywrap_profiler_plugin as plugin
    except ImportError:
        pytest.skip("this TensorFlow has no _pywrap_profiler_plugin (XProf's converters)")
    data, ok = plugin.xspace_to_tools_data([str(path)], "memory_profile", {})
    assert ok
    return json.loads(data)["memoryProfilePerAllocator"]


def test_gpu_peak_is_xprofs_memory_profile(bert_records, bert_profile):
    """TensorFlow's own converter to XProf's memory profile agrees: per GPU allocator its
    peak in use is the allocator's records' (``bytes_allocated``), the part held from before
    the profile its "unused preallocated device memory"; the rest, less the chunks of ops that
    never ran, is ``memory_peaks``' peak, and the ops holding 1 MiB or more at it are XProf's
    active allocations' with the same bytes."""
    events, ran = bert_records
    profiles = xprof_memory_profile(gpu_trace(BERT_PROFILE))
    peaks = bert_profile.memory_peaks().set_index("allocator")
    for allocator in ("GPU_4_bfc", "GPU_6_bfc"):
        profile = profiles[allocator]
        in_use = max(stats["bytes_allocated"] for _, _, stats in events[allocator])
        assert int(profile["profileSummary"]["peakStats"]["peakBytesInUse"]) == in_use
        (before,) = profile["specialAllocations"]
        assert before["tfOpName"] == "unused preallocated device memory"
        snapshots = profile["memoryProfileSnapshots"]
        held: dict[str, int] = defaultdict(int)
        for active in profile["activeAllocations"]:
            if int(active["snapshotIndex"]) >= 0:
                what = snapshots[int(active["snapshotIndex"])]["activityMetadata"]
                count = int(active["numOccurrences"])
                held[what["tfOpName"]] += int(what["allocationBytes"]) * count
        assert int(before["allocationBytes"]) + sum(held.values()) == in_use
        row = peaks.loc[allocator]
        theirs = {op: size for op, size in held.items() if op in ran}
        assert row["peak_bytes"] == sum(theirs.values())
        mine = dict(zip(row["ops"], row["ops_bytes"], strict=True))
        big = 1 << 20
        assert {o: b for o, b in mine.items() if b >= big} == {
            o: b for o, b in theirs.items() if b >= big
        }


def test_gpu_ops_bytes_are_the_allocators_chunks(bert_records, bert_profile):
    """Per op on each GPU: ``allocated_bytes`` is the chunks TF's allocator events give the
    op while it ran, and the GPU's ops together took what the allocator handed them; an op
    that allocated from ``GPU_<N>_bfc`` is on ``/device:GPU:<N>``."""
    events, _ = bert_records
    memory = step_memory(bert_profile)
    ops = bert_profile.ops
    for index in (4, 6):
        device = f"/job:localhost/replica:0/task:0/device:GPU:{index}"
        mine = memory[memory["allocator"] == f"GPU_{index}_bfc"]
        assert set(mine["device"]) == {device}
        taken = mine[mine["bytes"] > 0]
        chunks = defaultdict(list)
        for _, sign, stats in events[f"GPU_{index}_bfc"]:
            if sign > 0:
                chunks[stats["tf_op"]].append(stats["allocation_bytes"])
        for op, group in taken.groupby("op"):
            assert sorted(group["bytes"]) == sorted(chunks[op]), op
        on_gpu = ops[ops["device"] == device]
        assert on_gpu["allocated_bytes"].sum() == taken["bytes"].sum()
        assert set(on_gpu.loc[on_gpu["allocated_bytes"] > 0, "op"]) == set(taken["op"])
