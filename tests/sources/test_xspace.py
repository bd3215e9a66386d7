"""The TF2 profiler's XSpace reader: a real CPU profile, a constructed GPU one, bad input."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

from tfplace_widget._model.devices import canonical_device, lane_kind, lane_owner
from tfplace_widget._model.errors import TraceError
from tfplace_widget._sources.xspace import (
    _xspace_class,
    parse_xspace,
    records_from_xspace,
    split_op_event,
)

START_NS = 1_700_000_000_000_000_000  # the constructed profile's profile_start_time
START_US = START_NS // 1000
DERIVED_XLA_OPS_LINE = 0xDEADBEEF + 5 - (1 << 32)  # kThreadIdHloOp: an int 0xdeadbeef+5


def rows(records: Any) -> list[tuple]:
    """``(op, type, lane, thread, start, duration, label)`` per record."""
    return list(
        zip(
            records.op,
            records.type,
            records.lane,
            records.thread,
            records.start,
            records.duration,
            records.label,
            strict=True,
        )
    )


@pytest.fixture(scope="module")
def real_profile(tf: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One call of a tf.function profiled with ``tf.profiler.experimental``, and its records."""

    @tf.function
    def f(x: Any) -> Any:
        return tf.matmul(x, x, name="MM")

    x = tf.ones((32, 32))
    f(x)  # trace and instantiate outside the profile
    logdir = tmp_path_factory.mktemp("profile")
    before_ns = time.time_ns()
    tf.profiler.experimental.start(str(logdir))
    try:
        f(x)
    finally:
        tf.profiler.experimental.stop()
    after_ns = time.time_ns()
    (path,) = Path(logdir).glob("plugins/profile/*/*.xplane.pb")
    data = path.read_bytes()
    return {"data": data, "records": records_from_xspace(data), "window": (before_ns, after_ns)}


def test_real_profile_times_the_matmul(real_profile: dict) -> None:
    records = real_profile["records"]
    matmuls = [r for r in rows(records) if r[0] == "MM"]
    assert matmuls, rows(records)
    op, op_type, lane, thread, start, duration, label = matmuls[0]
    assert op_type in ("MatMul", "_MklMatMul")
    assert lane == "/host:CPU"
    assert label == f"MM = {op_type}()"
    assert start > 0 and duration >= 0
    before_ns, after_ns = real_profile["window"]
    # Lines are stored relative to profile_start_time; records are µs since the epoch again.
    assert before_ns // 1000 <= start <= after_ns // 1000


def test_real_profile_has_no_runtime_bookkeeping(real_profile: dict) -> None:
    ops = real_profile["records"].op
    assert not [op for op in ops if "::" in op or " " in op or op.startswith("Threadpool")]
    assert not {"ExecutorState", "FunctionRun", "EagerExecute"} & set(ops)


def test_real_profile_parses_as_xspace(real_profile: dict) -> None:
    names = [plane.name for plane in parse_xspace(real_profile["data"]).planes]
    assert b"/host:CPU" in names  # string fields are bytes in the bytes-typed schema


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("MM:_MklMatMul", ("MM", "_MklMatMul")),
        ("while/body/_4/while/add:AddV2", ("while/body/_4/while/add", "AddV2")),
        ("Func/x/_3:_Send", ("Func/x/_3", "_Send")),
        ("_send_adam/Const_10_0:_Send", ("_send_adam/Const_10_0", "_Send")),
        ("ThreadpoolListener::StartRegion", None),
        ("ExecutorState::Process", None),
        ("EagerLocalExecute: __inference_f_8", None),
        ("FunctionRun", None),
        (":MatMul", None),
        ("a::MatMul", None),
        ("a:1", None),
        ("a:", None),
    ],
)
def test_split_op_event(name: str, expected: tuple | None) -> None:
    assert split_op_event(name) == expected


class _PlaneBuilder:
    """Adds metadata, lines and events to an ``xplane_pb2.XPlane`` (ids as XPlaneBuilder does)."""

    def __init__(self, plane: Any) -> None:
        self.plane = plane

    def event_md(self, name: str) -> int:
        for key, meta in self.plane.event_metadata.items():
            if meta.name == name:
                return key
        key = len(self.plane.event_metadata) + 1
        self.plane.event_metadata[key].id = key
        self.plane.event_metadata[key].name = name
        return key

    def stat_md(self, name: str) -> int:
        for key, meta in self.plane.stat_metadata.items():
            if meta.name == name:
                return key
        key = len(self.plane.stat_metadata) + 1
        self.plane.stat_metadata[key].id = key
        self.plane.stat_metadata[key].name = name
        return key

    def line(self, line_id: int, name: str, timestamp_ns: int) -> Any:
        line = self.plane.lines.add(id=line_id, display_id=line_id, name=name)
        line.timestamp_ns = timestamp_ns
        return line

    def event(self, line: Any, name: str, offset_ps: int, duration_ps: int, **stats: Any) -> None:
        """``stats``: ints as int64, strings as str_value, ``("ref", s)`` as a ref_value."""
        event = line.events.add(
            metadata_id=self.event_md(name), offset_ps=offset_ps, duration_ps=duration_ps
        )
        for key, value in stats.items():
            stat = event.stats.add(metadata_id=self.stat_md(key))
            if isinstance(value, tuple):
                stat.ref_value = self.stat_md(value[1])
            elif isinstance(value, str):
                stat.str_value = value
            else:
                stat.int64_value = value


def constructed_gpu_xspace() -> bytes:
    """A GPU profile CONSTRUCTED here (not recorded: this machine has no GPU), as bytes.

    It follows XProf's XPlane schema (xplane_schema.cc, cupti_collector.cc,
    xplane_to_step_stats.cc): a ``/device:GPU:<N>`` plane with one line per stream (line id =
    stream id, named ``Stream #<id>(...)``); kernels carry ``kernel_details`` and a ``tf_op`` stat
    "<node>:<OpType>" (a ``str_value`` once, a ``ref_value`` to a stat_metadata name once, as the
    CUPTI collector writes it); a copy named ``MemcpyH2D`` carries ``memcpy_details``; a
    ``Memset`` with a ``tf_op`` is TF work of neither kind; ``correlation_id`` ties a kernel to its
    launch event on a ``/host:CPU`` thread; a derived ``XLA Ops`` line (id 0xdeadbeef+5 as a
    32-bit int) repeats a kernel; line timestamps are relative to the Task Environment plane's
    ``profile_start_time``, as TF writes them.
    """
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace(hostnames=["gpuhost"])
    host = _PlaneBuilder(space.planes.add(id=0, name="/host:CPU"))
    compute = host.line(42, "tf_Compute/42", timestamp_ns=1_000)
    host.event(compute, "ExecutorState::Process", 0, 9_000_000)
    host.event(compute, "dense/MatMul:MatMul", 2_000_000, 3_500_000)
    python = host.line(99, "python3", timestamp_ns=0)
    host.event(python, "cuLaunchKernel", 4_000_000, 1_000_000, correlation_id=7)
    host.event(python, "_send_x/Const_0:_Send", 8_000_000, 999_999)

    gpu = _PlaneBuilder(space.planes.add(id=1, name="/device:GPU:1"))
    stream7 = gpu.line(7, "Stream #7(Kernel)", timestamp_ns=5_000)
    gpu.event(
        stream7,
        "volta_sgemm_128x64_nn",
        1_500_000,
        12_345_678,
        tf_op="dense/MatMul:MatMul",
        kernel_details=("ref", "regs:128 grid:4,1,1 block:256,1,1"),
        correlation_id=7,
    )
    gpu.event(stream7, "redzone_checker", 30_000_000, 2_000_000, kernel_details="regs:16")
    gpu.event(
        stream7, "Memset", 40_000_000, 1_000_000, Memset_details="num_bytes:64", tf_op="z:Fill"
    )
    stream13 = gpu.line(13, "Stream #13(Kernel,MemcpyH2D)", timestamp_ns=5_000)
    gpu.event(
        stream13,
        "void Eigen::internal::EigenMetaKernel<float>(int)",
        10_000_000,
        4_000_000,
        tf_op=("ref", "dense/Relu:Relu"),
        kernel_details=("ref", "regs:32"),
    )
    gpu.event(
        stream13, "MemcpyH2D", 0, 2_500_000, memcpy_details=("ref", "kind_src:pinned size:4096")
    )
    xla_ops = gpu.line(DERIVED_XLA_OPS_LINE, "XLA Ops", timestamp_ns=5_000)
    gpu.event(xla_ops, "dense/MatMul:MatMul", 1_500_000, 12_345_678, tf_op="dense/MatMul:MatMul")

    _PlaneBuilder(space.planes.add(name="/host:metadata")).line(1, "metadata", 0)
    env = _PlaneBuilder(space.planes.add(name="Task Environment"))
    env.plane.stats.add(metadata_id=env.stat_md("profile_start_time"), uint64_value=START_NS)
    return space.SerializeToString()


def test_constructed_gpu_records_exactly() -> None:
    gpu1 = "/device:GPU:1"
    assert rows(records_from_xspace(constructed_gpu_xspace())) == [
        ("dense/MatMul", "MatMul", "/host:CPU", 42, START_US + 3, 3, "dense/MatMul = MatMul()"),
        ("_send_x/Const_0", "_Send", "/host:CPU", 99, START_US + 8, 0, "_send_x/Const_0 = _Send()"),
        # launched from thread 99 (correlation_id 7); 5 µs + 1.5 µs -> 6 µs, 12.3 µs -> 12
        (
            "dense/MatMul",
            "MatMul",
            f"{gpu1}/stream:7",
            99,
            START_US + 6,
            12,
            "volta_sgemm_128x64_nn",
        ),
        # redzone_checker has no tf_op: skipped; TF work neither kernel nor copy: lane "stream:"
        ("z", "Fill", f"{gpu1}/stream:", 0, START_US + 45, 1, "Memset"),
        # the XLA Ops line is derived: skipped
        (
            "dense/Relu",
            "Relu",
            f"{gpu1}/stream:13",
            0,
            START_US + 15,
            4,
            "void Eigen::internal::EigenMetaKernel<float>(int)",
        ),
        ("MemcpyH2D", "", f"{gpu1}/stream:13<MemcpyH2D>", 0, START_US + 5, 2, "MemcpyH2D"),
    ]


def test_constructed_gpu_lanes_are_classified_like_step_stats_lanes() -> None:
    records = records_from_xspace(constructed_gpu_xspace())
    kinds = {lane: (lane_kind(lane), lane_owner(lane)) for lane in records.lane}
    assert kinds == {
        "/host:CPU": ("device", "/host:CPU"),
        "/device:GPU:1/stream:7": ("stream", "/device:GPU:1"),
        "/device:GPU:1/stream:13": ("stream", "/device:GPU:1"),
        "/device:GPU:1/stream:13<MemcpyH2D>": ("memcpy", "/device:GPU:1"),
        "/device:GPU:1/stream:": ("stream", "/device:GPU:1"),
    }
    assert canonical_device("/device:GPU:1/stream:13<MemcpyH2D>") == (
        "/job:localhost/replica:0/task:0/device:GPU:1"
    )


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"", "empty"),
        (random.Random(0).randbytes(2000), "not an XSpace"),
        (b"\x22\x03abc", "not an XSpace"),  # a valid XSpace (hostnames only), no plane
    ],
    ids=["empty", "random", "other-proto"],
)
def test_bad_input_raises_trace_error(data: bytes, words: str) -> None:
    with pytest.raises(TraceError, match=words) as info:
        records_from_xspace(data)
    assert "xplane.pb" in str(info.value) and "tf.profiler.experimental" in str(info.value)


def test_run_metadata_bytes_are_not_an_xspace(tf: Any) -> None:
    from tensorflow.core.protobuf import config_pb2

    run_metadata = config_pb2.RunMetadata()
    run_metadata.step_stats.dev_stats.add(device="/job:localhost/replica:0/task:0/device:CPU:0")
    with pytest.raises(TraceError, match="xplane.pb"):
        parse_xspace(run_metadata.SerializeToString())


def test_non_utf8_strings_are_read() -> None:
    """Real profiles can hold bytes that are not UTF-8, which TF's own xplane_pb2 rejects."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = _xspace_class()()  # the bytes-typed schema can write what the str one cannot
    plane = space.planes.add(name=b"/host:CPU")
    plane.event_metadata[1].name = b"dense/\xff\xfeMatMul:MatMul"
    line = plane.lines.add(id=5, name=b"tf_Compute/\xc3(", timestamp_ns=10**18)
    line.events.add(metadata_id=1, offset_ps=0, duration_ps=7_000_000)
    data = space.SerializeToString()
    # protobuf 5+ names the UTF-8 check; 4.25 (TensorFlow 2.16's) only says it cannot parse
    with pytest.raises(Exception, match="UTF-8|Error parsing message"):
        xplane_pb2.XSpace().ParseFromString(data)
    assert rows(records_from_xspace(data)) == [
        (
            "dense/\ufffd\ufffdMatMul",
            "MatMul",
            "/host:CPU",
            5,
            10**15,
            7,
            ("dense/\ufffd\ufffdMatMul = MatMul()"),
        )
    ]


def test_a_tf24_gpu_profile_names_each_kernels_op(tf: Any, tmp_path: Path) -> None:
    """A real GPU profile of TensorFlow 2.4 (the vendored BERT one) names a kernel's op in its
    ``level 0`` annotation, not in ``tf_op``: every kernel of GPU:4 is read, on its stream, as
    its op's (as TensorFlow's own xplane_pb2 reads them), the op's host records are on GPU:4
    with it, and the trace saves and loads with the host ops the profile does not place."""
    from collections import Counter

    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from tfplace_widget import PlacementTrace
    from tfplace_widget.examples import gpu_trace

    path = gpu_trace("tensorflow-profiler-bert/34.83.195.179_6003.xplane.pb")
    space = xplane_pb2.XSpace()
    space.ParseFromString(path.read_bytes())
    (gpu,) = [plane for plane in space.planes if plane.name == "/device:GPU:4"]
    names = {key: meta.name for key, meta in gpu.stat_metadata.items()}
    kernels: Counter = Counter()
    for line in gpu.lines:
        for event in line.events:
            stats = {names[s.metadata_id]: s for s in event.stats}
            if "kernel_details" in stats and "level 0" in stats:
                kernels[names[stats["level 0"].ref_value].rpartition(":")[0]] += 1
    assert sum(kernels.values()) == 665
    trace = PlacementTrace.from_xspace(path)
    events = trace.events
    on_streams = events[events["lane"].str.match(r"/device:GPU:4/stream:\d+$")]
    assert Counter(on_streams["op"]) == kernels
    gpu4 = canonical_device("/device:GPU:4")
    assert (trace.ops.set_index("op").loc[list(kernels), "device"] == gpu4).all()
    assert "/host:CPU" in trace.devices  # the bookkeeping (_Arg, _Send...) is unplaced
    back = PlacementTrace.load(trace.save(tmp_path / "bert.tfplace"))
    assert back.devices == trace.devices and back.memory.equals(trace.memory)
