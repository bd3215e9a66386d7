"""The real GPU Chrome traces in the shared fixtures, and TF 2.x GPU lanes in a RunMetadata.

Every expected number is recomputed here from the raw JSON, independently of the package:
a kernel is listed on ``stream:all`` and on its ``stream:N``, a copy on ``memcpy`` and on
its stream; each must count once.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import CPU0, GPU0, GPU_TRACES, raw_chrome_events

from tfplace_widget import PlacementTrace

ALL_TRACES = sorted(GPU_TRACES.glob("*/*.json"))
assert len(ALL_TRACES) == 6, f"expected the 6 real GPU traces in {GPU_TRACES}, found {ALL_TRACES}"
GPU_FILES = [p for p in ALL_TRACES if "CPU_timeline" not in p.name]
OLD_NAMING = [p for p in GPU_FILES if p.parent.name == "ikhlestov-tensorflow-profiling"]
NEW_NAMING = [p for p in GPU_FILES if p.parent.name in ("kittibox", "riptide")]


def _kind(lane: str) -> str:
    if lane.endswith("/stream:all"):
        return "all"
    if lane.endswith("/memcpy"):
        return "memcpy"
    if "/stream:" in lane:
        return "stream"
    return "device"


def _key(event: dict) -> tuple:
    return (event["args"]["name"], event["ts"], event["dur"])


class Raw:
    """What a test can know from the JSON alone."""

    def __init__(self, path: Path) -> None:
        self.events = raw_chrome_events(path)
        self.origin = min(e["ts"] for e in self.events)
        self.by_kind: dict[str, list[dict]] = {"device": [], "all": [], "memcpy": [], "stream": []}
        for event in self.events:
            self.by_kind[_kind(event["lane"])].append(event)
        self.all_keys = Counter(_key(e) for e in self.by_kind["all"])
        self.memcpy_keys = Counter(_key(e) for e in self.by_kind["memcpy"])
        self.stream_keys = Counter(_key(e) for e in self.by_kind["stream"])


@pytest.fixture(scope="module", params=ALL_TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def loaded(request: Any) -> tuple[Raw, PlacementTrace]:
    path = request.param
    return Raw(path), PlacementTrace.from_chrome_trace(path)


def test_every_fixture_is_covered():
    assert len(ALL_TRACES) == 6 and len(OLD_NAMING) == 3 and len(NEW_NAMING) == 2


def test_premise_each_gpu_record_is_on_a_stream_and_on_all_or_memcpy(loaded):
    """timeline.py wrote each kernel on stream:all + stream:N and each copy on memcpy + stream."""
    raw, _ = loaded
    assert raw.stream_keys == raw.all_keys + raw.memcpy_keys
    assert not set(raw.all_keys) & set(raw.memcpy_keys)


def test_event_count_counts_each_execution_once(loaded):
    raw, trace = loaded
    assert len(trace.events) == len(raw.by_kind["device"]) + len(raw.by_kind["stream"])


def test_no_record_is_listed_twice(loaded):
    raw, trace = loaded
    gpu = trace.events[~trace.events["lane"].map(_kind).eq("device")]
    keys = list(zip(gpu["op"], gpu["start_us"] + raw.origin, gpu["duration_us"], strict=True))
    assert len(keys) == len(set(keys))
    assert Counter(keys) == raw.all_keys + raw.memcpy_keys  # every kernel and copy, once


def test_lanes_and_per_lane_counts(loaded):
    raw, trace = loaded
    counts = trace.events["lane"].value_counts().to_dict()
    # Nothing stays on stream:all (each kernel sits on its own stream) ...
    assert not any(lane.endswith("/stream:all") for lane in counts)
    # ... copies stay on memcpy, and each stream keeps its kernels but not its copies.
    for event_lane in {e["lane"] for e in raw.events}:
        mine = [e for e in raw.events if e["lane"] == event_lane]
        kind = _kind(event_lane)
        if kind == "device" or kind == "memcpy":
            expected = len(mine)
        elif kind == "stream":
            expected = sum(1 for e in mine if _key(e) in raw.all_keys)
        else:
            expected = 0
        assert counts.get(event_lane, 0) == expected, event_lane


def test_devices_are_canonical(loaded):
    raw, trace = loaded
    gpu = any("gpu" in e["lane"].lower() for e in raw.events)
    assert trace.devices == ([GPU0, CPU0] if gpu else [CPU0])
    assert set(trace.events["device"]) == set(trace.devices)
    assert set(trace.ops["device"]) == set(trace.devices)


def test_runs_come_from_op_level_records(loaded):
    raw, trace = loaded
    expected = Counter(e["args"]["name"] for e in raw.by_kind["device"] if "gpu" in e["lane"])
    gpu_ops = trace.ops[trace.ops["device"] == GPU0].set_index("op")
    for name, runs in expected.items():
        assert gpu_ops.loc[name, "runs"] == runs, name
    first: dict[str, int] = {}
    for e in raw.by_kind["device"]:
        if "gpu" in e["lane"]:
            first[e["args"]["name"]] = min(first.get(e["args"]["name"], e["ts"]), e["ts"])
    for name in list(expected)[:50]:
        assert gpu_ops.loc[name, "start_us"] == first[name] - raw.origin


def test_ops_only_seen_as_copies_are_runtime(loaded):
    raw, trace = loaded
    copies = {
        e["args"]["name"] for e in raw.by_kind["memcpy"] if e["args"]["op"].startswith("MEMCPY")
    }
    for name in copies:
        row = trace.ops[trace.ops["op"] == name].iloc[0]
        assert row.how == "runtime" and row.type.startswith("MEMCPY")
    # Without a graph nothing else can be explained beyond "unknown" (and _SOURCE: runtime).
    assert set(trace.ops["how"]) <= {"unknown", "runtime"}
    assert set(trace.ops.loc[trace.ops["op"] == "_SOURCE", "how"]) <= {"runtime"}


def test_transfers_from_memcpy_records(loaded):
    raw, trace = loaded
    expected = set()
    for e in raw.by_kind["memcpy"]:
        op = e["args"]["op"]
        if op == "MEMCPYHtoD":
            expected.add((e["args"]["name"], CPU0, GPU0))
        elif op == "MEMCPYDtoH":
            expected.add((e["args"]["name"], GPU0, CPU0))
    rows = list(map(tuple, trace.transfers[["tensor", "src_device", "dst_device"]].values))
    assert len(rows) == len(set(rows))  # one row per copied edge, even in merged runs
    assert set(rows) == expected
    assert trace.transfers["bytes"].isna().all()  # Chrome traces carry no sizes


@pytest.mark.parametrize("path", OLD_NAMING, ids=lambda p: p.name)
def test_old_naming_is_normalised(path):
    raw = Raw(path)
    lanes = {e["lane"] for e in raw.events}
    assert "/job:localhost/replica:0/task:0/gpu:0" in lanes
    assert any(lane.startswith("/gpu:0/stream:") for lane in lanes)
    trace = PlacementTrace.from_chrome_trace(path)
    # The lane column keeps what TF wrote; the device column is canonical.
    assert "/job:localhost/replica:0/task:0/gpu:0" in set(trace.events["lane"])
    on_stream = trace.events[trace.events["lane"].str.startswith("/gpu:0/stream:")]
    assert len(on_stream) > 0 and set(on_stream["device"]) == {GPU0}


@pytest.mark.parametrize("path", NEW_NAMING, ids=lambda p: p.parent.name)
def test_new_naming(path):
    lanes = {e["lane"] for e in Raw(path).events}
    assert "/job:localhost/replica:0/task:0/device:GPU:0" in lanes
    assert "/device:GPU:0/stream:all" in lanes
    trace = PlacementTrace.from_chrome_trace(path)
    # each device partition has its own _SOURCE: device_of has no single answer, and says so
    assert set(trace.ops.loc[trace.ops["op"] == "_SOURCE", "device"]) == {GPU0, CPU0}
    with pytest.raises(ValueError, match="2 devices"):
        trace.device_of("_SOURCE")


def test_merged_runs_repeat_names():
    path = GPU_TRACES / "ikhlestov-tensorflow-profiling" / "GPU_timeline_03_merged_5_runs.json"
    trace = PlacementTrace.from_chrome_trace(path)
    # Four of the five merged runs used the GPU, one the CPU: one row per (op, device).
    rows = trace.ops[trace.ops["op"] == "layer_1/fully_connected/MatMul"]
    assert dict(zip(rows["device"], rows["runs"], strict=True)) == {GPU0: 4, CPU0: 1}
    assert len(trace.transfers) == 6  # 30 copy records: the same 6 edges again and again


def test_riptide_summary():
    path = GPU_TRACES / "riptide" / "timeline.ctf.json"
    trace = PlacementTrace.from_chrome_trace(path)
    assert len(trace.events) == 96 - 22 - 2  # 96 records; 22 kernels and 2 copies were doubled
    assert trace.device_of("MatMul") == GPU0
    xent = trace.events[trace.events["op"] == "sparse_softmax_cross_entropy_loss/xentropy/xentropy"]
    # One op, one launch on GPU:0, six kernels on stream:20 (each once).
    assert Counter(xent["lane"]) == {
        "/job:localhost/replica:0/task:0/device:GPU:0": 1,
        "/device:GPU:0/stream:20": 6,
    }


# -- TF 2.x lanes, in a RunMetadata built with TF's own protos ---------------------------------
def _node(step_stats_pb2: Any, name: str, start: int, duration: int, label: str, **kw: Any) -> Any:
    node = step_stats_pb2.NodeExecStats(
        node_name=name,
        all_start_micros=start,
        op_start_rel_micros=0,
        op_end_rel_micros=duration,
        all_end_rel_micros=duration,
        timeline_label=label,
        **kw,
    )
    return node


EIGEN_KERNEL = (
    "void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<Eigen::TensorAssignOp<"
    "Eigen::TensorMap<Eigen::Tensor<float, 1, 1, long>, 16>>, Eigen::GpuDevice>, long>"
    "(Eigen::TensorEvaluator<...>, long)"
)


def _gpu_run_metadata(tf: Any, with_partitions: bool) -> Any:
    """What xplane_to_step_stats.cc writes for x (CPU:0) -> copy -> MatMul (GPU:0)."""
    from tensorflow.core.framework import step_stats_pb2
    from tensorflow.core.protobuf import config_pb2

    metadata = config_pb2.RunMetadata()
    t0 = 1_700_000_000_000_000

    def lane(device: str, *nodes: Any) -> None:
        metadata.step_stats.dev_stats.add(device=device).node_stats.extend(nodes)

    def n(name: str, start: int, duration: int, label: str, **kw: Any) -> Any:
        return _node(step_stats_pb2, name, t0 + start, duration, label, **kw)

    out = step_stats_pb2.NodeOutput(slot=0)
    out.tensor_description.allocation_description.requested_bytes = 64
    lane(
        CPU0,
        n("_SOURCE", 0, 1, "_SOURCE = NoOp()"),
        n("x", 2, 3, "[cpu 0.0MB 0.0MB] x = Const()", output=[out]),
    )
    lane(GPU0, n("_SOURCE", 1, 1, "_SOURCE = NoOp()"), n("mm", 10, 5, "mm = MatMul(x/_1, x/_1)"))
    kernels = [
        n(
            "mm:MatMul",
            20,
            8,
            "volta_sgemm_32x32_sliced1x4_nn grid:1,1,1 block:256,1,1",
            thread_id=9,
        ),
        n("mm:MatMul", 30, 2, "splitKreduce_kernel grid:1,1,1", thread_id=9),
        n(EIGEN_KERNEL, 40, 1, "EigenMetaKernel grid:1,1,1", thread_id=9),
    ]
    lane("/device:GPU:0/stream:7", *kernels)
    lane("/device:GPU:0/stream:all", *kernels)
    copy = n("x/_1:_Recv", 6, 2, "MemcpyH2D bytes:64", thread_id=9)
    lane("/device:GPU:0/stream:7<MemcpyH2D>", copy)
    lane("/device:GPU:0/memcpy", copy)
    lane("/device:GPU:0/sync", n("cuStreamSynchronize", 50, 3, "ThreadId 9", thread_id=9))
    if with_partitions:
        cpu_part = metadata.partition_graphs.add()
        cpu_part.node.add(name="x", op="Const", device=CPU0)
        send = cpu_part.node.add(name="x/_0", op="_Send", device=CPU0, input=["x"])
        send.attr["send_device"].s = CPU0.encode()
        send.attr["recv_device"].s = GPU0.encode()
        send.attr["tensor_name"].s = b"edge_3_x"
        gpu_part = metadata.partition_graphs.add()
        gpu_part.node.add(name="x/_1", op="_Recv", device=GPU0)
        gpu_part.node.add(name="mm", op="MatMul", device=GPU0, input=["x/_1", "x/_1"])
    return metadata


@pytest.fixture(scope="module", params=[True, False], ids=["partitions", "step_stats_only"])
def tf2_gpu(request: Any, tf: Any) -> tuple[bool, PlacementTrace]:
    with_partitions = request.param
    return with_partitions, PlacementTrace.from_run_metadata(_gpu_run_metadata(tf, with_partitions))


def test_tf2_lanes_count_each_kernel_and_copy_once(tf2_gpu):
    _, trace = tf2_gpu
    lanes = Counter(trace.events["lane"])
    assert lanes == {
        CPU0: 2,
        GPU0: 2,
        "/device:GPU:0/stream:7": 3,  # three kernels, not six
        "/device:GPU:0/memcpy": 1,  # one copy, not two
        "/device:GPU:0/sync": 1,
    }
    assert set(trace.events["device"]) == {CPU0, GPU0}
    assert trace.devices == [GPU0, CPU0]


def test_tf2_kernel_names_map_to_their_op(tf2_gpu):
    _, trace = tf2_gpu
    on_stream = trace.events[trace.events["lane"] == "/device:GPU:0/stream:7"]
    # "mm:MatMul" is op mm; a kernel without a TF op keeps its whole C++ name.
    assert sorted(on_stream["op"]) == sorted(["mm", "mm", EIGEN_KERNEL])
    assert set(on_stream["thread"]) == {9}
    mm = trace.ops[trace.ops["op"] == "mm"]
    assert len(mm) == 1 and mm["runs"].iloc[0] == 1  # one launch, two kernels
    assert mm["device"].iloc[0] == GPU0
    copy = trace.events[trace.events["lane"] == "/device:GPU:0/memcpy"]
    assert copy["op"].tolist() == ["x/_1"]
    assert "cuStreamSynchronize" not in set(trace.ops["op"])  # a host wait, not an op
    assert trace.ops.loc[trace.ops["op"] == "x", "output_bytes"].iloc[0] == 64
    label = trace.events.loc[trace.events["op"] == "x", "label"].iloc[0]
    assert label == "x = Const()"  # "[cpu ...]" allocation prefix removed


def test_tf2_transfers(tf2_gpu):
    with_partitions, trace = tf2_gpu
    rows = trace.transfers[["tensor", "src_device", "dst_device"]].values.tolist()
    if with_partitions:
        assert rows == [["x:0", CPU0, GPU0]]
        assert trace.transfers["bytes"].tolist() == [64]
        recv = trace.ops[trace.ops["op"] == "x/_1"].iloc[0]
        assert (recv.type, recv.device, recv.how) == ("_Recv", GPU0, "runtime")
    else:  # only the MemcpyH2D record tells
        assert rows == [["x/_1", CPU0, GPU0]]


def test_tf2_with_the_graph_explains_requests(tf):
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/cpu:0"):
            x = tf.constant([[1.0, 2.0], [3.0, 4.0]], name="x")
        with tf.device("/gpu:0"):
            tf.linalg.matmul(x, x, name="mm")
    trace = PlacementTrace.from_run_metadata(_gpu_run_metadata(tf, True), graph=graph)
    mm = trace.ops[trace.ops["op"] == "mm"].iloc[0]
    assert (mm.requested_device, mm.how) == ("/device:GPU:0", "explicit")
    x = trace.ops[trace.ops["op"] == "x"].iloc[0]
    assert (x.device, x.requested_device, x.how) == (CPU0, "/device:CPU:0", "explicit")


def test_old_lane_names_in_run_metadata(tf):
    """TF 1.x step_stats: /gpu:0/stream:all, /gpu:0/stream:12, /gpu:0/memcpy."""
    from tensorflow.core.framework import step_stats_pb2
    from tensorflow.core.protobuf import config_pb2

    metadata = config_pb2.RunMetadata()
    kernel = _node(step_stats_pb2, "MatMul", 100, 7, "MatMul = MatMul()")
    copy = _node(step_stats_pb2, "edge_22_MatMul", 110, 3, "edge_22_MatMul = MEMCPYDtoH()")
    for device, nodes in [
        ("/job:localhost/replica:0/task:0/gpu:0", [_node(step_stats_pb2, "MatMul", 90, 5, "")]),
        ("/gpu:0/stream:all", [kernel]),
        ("/gpu:0/stream:12", [kernel]),
        ("/gpu:0/stream:14", [copy]),
        ("/gpu:0/memcpy", [copy]),
    ]:
        metadata.step_stats.dev_stats.add(device=device).node_stats.extend(nodes)
    trace = PlacementTrace.from_run_metadata(metadata)
    assert trace.devices == [GPU0]
    assert Counter(trace.events["lane"]) == {
        "/job:localhost/replica:0/task:0/gpu:0": 1,
        "/gpu:0/stream:12": 1,
        "/gpu:0/memcpy": 1,
    }
    assert trace.transfers[["tensor", "src_device", "dst_device"]].values.tolist() == [
        ["edge_22_MatMul", GPU0, CPU0]
    ]
