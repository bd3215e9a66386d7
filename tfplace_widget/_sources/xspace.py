"""TF2 profiles: the profiler's ``XSpace`` (``<host>.xplane.pb``) as records.

``tf.profiler.experimental.start(logdir)`` / ``stop()`` write
``logdir/plugins/profile/<run>/<host>.xplane.pb``. Host op events sit on the ``/host:CPU`` plane
and are named ``"<node>:<OpType>"``; GPU work sits on ``/device:GPU:<N>`` planes, one line per
stream, each kernel naming its TF op in a ``tf_op`` stat. GPU lanes are spelt as TensorFlow's own
``xplane_to_step_stats.cc`` spells them, so GPU traces from XSpace and from step_stats look alike.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from .._model.devices import lane_owner
from .._model.errors import TraceError
from .._model.gc_pause import paused_gc
from .._model.records import Executed, Records
from .._model.trace import PlacementTrace
from .._tfadapter.protos import xplane_descriptor
from .files import read_trace_bytes
from .frames import frames_from_records

HOST_PLANE = "/host:CPU"
# Launch events of the CUDA driver API; merged into /host:CPU before a profile is written, but a
# file saved without that post-processing keeps them here. Read only to find launching threads.
_CUPTI_PLANE = "/host:CUPTI"
_TASK_ENV_PLANE = "Task Environment"
# The event a tracer records right after starting the profiler, reading the epoch clock as it
# does (a name with a space: no op). TF 2.16 writes no profile_start_time: its times count from
# the profile's start, and this event is what puts them on the epoch's clock.
CLOCK_MARK = "tfplace clock mark"
_GPU_PLANE = re.compile(r"/device:GPU:\d+")
_OP_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Lines that converters derive from the raw events (xplane_schema.cc's line names, XProf's
# derived-line ids 0xdeadbeef + k as a 32-bit int): they repeat events, they are not streams.
_DERIVED_LINE_NAMES = frozenset(
    {
        "Steps",
        "Framework Name Scope",
        "Framework Ops",
        "TensorFlow Name Scope",
        "TensorFlow Ops",
        "XLA Modules",
        "XLA Ops",
        "Async XLA Ops",
        "Launch Stats",
        "Source code",
        "Host Offload Ops",
        "_counters_",
        "CUPTI overhead",
        "Sparse Core Steps",
        "Sparse Core Modules",
        "Sparse Core Ops",
    }
)
_DERIVED_ID_MIN = 0xDEADBEEF
_DERIVED_ID_SPAN = 1024  # newest schema uses +0 .. +389; leave room for growth

_WHAT = (
    "Pass the bytes of a TF2 profile: the <host>.xplane.pb that "
    "tf.profiler.experimental.start(logdir) / stop() writes under logdir/plugins/profile/<run>/."
)


@lru_cache(maxsize=1)
def _xspace_class() -> type:
    """``XSpace`` built from TF's xplane.proto with every string field read as bytes.

    Real profiles can hold non-UTF-8 bytes in string fields, which upb's proto3 parser rejects
    ("String field had bad UTF-8"); a bytes-typed copy of the schema parses them.
    """
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto()
    xplane_descriptor().CopyToProto(proto)
    old_prefix = f".{proto.package}."
    proto.name = "tfplace_xplane_bytes.proto"
    proto.package = "tfplace_xplane"
    for message in _all_messages(proto.message_type):
        for field in message.field:
            if field.type == descriptor_pb2.FieldDescriptorProto.TYPE_STRING:
                field.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
            if field.type_name.startswith(old_prefix):
                field.type_name = ".tfplace_xplane." + field.type_name[len(old_prefix) :]
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tfplace_xplane.XSpace"))


def _all_messages(messages: Iterable[Any]) -> Iterable[Any]:
    """Every message type, nested ones (map entries included) too."""
    for message in messages:
        yield message
        yield from _all_messages(message.nested_type)


def _text(raw: bytes) -> str:
    """A bytes-typed string field as text; bytes that are not UTF-8 become U+FFFD."""
    return raw.decode("utf-8", errors="replace")


def parse_xspace(data: bytes) -> Any:
    """Parse an ``.xplane.pb``; string fields come back as ``bytes``.

    Raises :class:`TraceError` if ``data`` is empty, is not a protobuf, or holds no profiler plane.
    An XSpace this function parsed is returned as it is (readers of one profile parse it once).
    """
    if isinstance(data, _xspace_class()):
        return data
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"parse_xspace takes the file's bytes, not {type(data).__name__}.")
    if not data:
        raise TraceError(f"The XSpace is empty, so it is not a profile. {_WHAT}")
    space = _xspace_class()()
    try:
        space.ParseFromString(bytes(data))
    except Exception as exc:
        raise TraceError(
            f"These {len(data):,} bytes are not an XSpace proto (truncated, or another file): "
            f"{exc}. {_WHAT}"
        ) from exc
    names = [_text(plane.name) for plane in space.planes]
    known = [n for n in names if n.startswith(("/host:", "/device:")) or n == _TASK_ENV_PLANE]
    if not known:
        raise TraceError(
            f"These {len(data):,} bytes parse as a protobuf but hold no profiler plane "
            f"(no /host:CPU or /device:... plane; planes: {names[:5]!r}), so they are not an "
            f"XSpace. {_WHAT}"
        )
    return space


def trace_from_xspace(path: str | os.PathLike) -> PlacementTrace:
    """:meth:`PlacementTrace.from_xspace`: a trace of the ops in a saved ``.xplane.pb``.

    The file has no graph: the host-plane records of an op are put on a GPU when the profile
    ties the op to that GPU alone (its kernels or copies on the GPU's streams, or chunks of
    the GPU's own BFC allocator, ``GPU_<N>_bfc``, which only its kernels allocate from); the
    other host ops stay on ``/host:CPU`` (the profile does not say their device).
    """
    where = os.fspath(path)
    data = read_trace_bytes(where)  # bounded: limits.MAX_MEMBER_BYTES
    with paused_gc():
        try:
            records = records_from_xspace(data)
        except TraceError as exc:
            raise TraceError(f"{where!r}: {exc}") from exc
        _place_on_their_gpu(records)
        return frames_from_records(
            records, step_starts=[], executed=Executed(), facts=None, source=where
        )


_GPU_ALLOCATOR = re.compile(r"GPU_(\d+)_bfc")


def _place_on_their_gpu(records: Records) -> None:
    """Put the host-plane records of each op that only one GPU's work names (its records on
    the GPU's lanes, its chunks of the GPU's BFC allocator) on that GPU."""
    gpus: dict[str, set[str]] = {}
    for op, lane in zip(records.op, records.lane, strict=True):
        if lane != HOST_PLANE:
            gpus.setdefault(op, set()).add(lane_owner(lane))
    for row, allocator in zip(records.memory.row, records.memory.allocator, strict=True):
        match = _GPU_ALLOCATOR.fullmatch(allocator)
        if match:
            gpus.setdefault(records.op[row], set()).add(f"/device:GPU:{match[1]}")
    placed = {op: found.pop() for op, found in gpus.items() if len(found) == 1}
    for row, (op, lane) in enumerate(zip(records.op, records.lane, strict=True)):
        if lane == HOST_PLANE and op in placed:
            records.lane[row] = placed[op]


def records_from_xspace(data: bytes | Any) -> Records:
    """Op executions in an ``.xplane.pb`` (or the XSpace ``parse_xspace`` made of it) as
    records (µs since the epoch).

    Host ops get lane ``/host:CPU`` (the caller puts in the op's placed device) and thread = the
    line id. GPU kernels get ``/device:GPU:N/stream:<id>``, copies
    ``/device:GPU:N/stream:<id><MemcpyH2D>`` (etc.), other ``tf_op`` work ``/device:GPU:N/stream:``;
    their thread is the host thread that launched them (0 if unknown). Other planes are ignored.
    """
    planes = [(_text(plane.name), plane) for plane in parse_xspace(data).planes]
    origin_ns = max((_profile_start_ns(p) for n, p in planes if n == _TASK_ENV_PLANE), default=0)
    records = Records()
    for name, plane in planes:
        if name == HOST_PLANE:
            _host_records(plane, origin_ns, records)
    launchers = _launch_threads(p for n, p in planes if n in (HOST_PLANE, _CUPTI_PLANE))
    for name, plane in planes:
        if _GPU_PLANE.fullmatch(name):
            _gpu_records(plane, name, origin_ns, launchers, records)
    return records


def _profile_start_ns(task_env: Any) -> int:
    """``profile_start_time`` (ns since the epoch) of the Task Environment plane, or 0."""
    names = {key: _text(meta.name) for key, meta in task_env.stat_metadata.items()}
    for stat in task_env.stats:
        if names.get(stat.metadata_id) == "profile_start_time":
            return stat.uint64_value or stat.int64_value
    return 0


def profile_start_us(data: bytes | Any, marked_ns: int) -> int | None:
    """When the profile's time 0 was, in µs since the epoch, for a profile whose times count
    from its start: the :data:`CLOCK_MARK` event's start on the profile's clock against
    ``marked_ns``, the epoch's ns the tracer read as that event began. ``None`` without the event
    (nothing can put such a profile on the epoch's clock).

    Reading the epoch's clock before starting the profiler instead is off by the time the start
    takes, which differs between processes (0.4 ms and more, seen in two TF 2.16 tasks' runs of
    one all-reduce that did not overlap)."""
    for plane in parse_xspace(data).planes:
        if _text(plane.name) != HOST_PLANE:
            continue
        marks = {
            key for key, meta in plane.event_metadata.items() if _text(meta.name) == CLOCK_MARK
        }
        for line in plane.lines:
            for event in line.events:
                if event.metadata_id in marks:
                    return (marked_ns - line.timestamp_ns - event.offset_ps // 1000) // 1000
    return None


def _line_start_ns(line: Any, origin_ns: int) -> int:
    """The line's timestamp in ns since the epoch.

    Before writing, TF subtracts the profile's start from every line timestamp not already below
    it (xplane_utils.cc NormalizeTimestamps); a small timestamp is such a relative one.
    """
    stamp = line.timestamp_ns
    return stamp + origin_ns if origin_ns and stamp < origin_ns // 2 else stamp


def _span_us(line_ns: int, event: Any) -> tuple[int, int]:
    """``(start, duration)`` of an event in whole µs, computed without floats."""
    return (line_ns * 1000 + event.offset_ps) // 1_000_000, event.duration_ps // 1_000_000


def split_op_event(name: str) -> tuple[str, str] | None:
    """``"a/b:MatMul"`` -> ``("a/b", "MatMul")``; ``None`` for runtime bookkeeping events.

    Bookkeeping names have spaces (``EagerLocalExecute: f``), ``::`` (``ExecutorState::Process``)
    or no ``:`` at all (``FunctionRun``).
    """
    if " " in name or "::" in name:
        return None
    head, sep, tail = name.rpartition(":")
    if not sep or not head or head.endswith(":") or not _OP_TYPE.fullmatch(tail):
        return None
    return head, tail


def _host_records(plane: Any, origin_ns: int, records: Records) -> None:
    """Op events of any line of the host plane (names parsed once per event metadata), and the
    allocator events among them (:func:`_allocations`)."""
    ops, memory = {}, {}
    for key, meta in plane.event_metadata.items():
        name = _text(meta.name)
        parsed = split_op_event(name)
        if parsed:
            ops[key] = parsed
        elif name in _MEMORY_EVENTS:
            memory[key] = _MEMORY_EVENTS[name]
    if not ops:
        return
    spans: dict[int, list[tuple[int, int, int, str]]] = {}  # line -> its ops' (start, end, row)
    changes: list[tuple[int, int, int, Any]] = []  # (time, line, +1 / -1, event)
    for line in plane.lines:
        line_ns = _line_start_ns(line, origin_ns)
        # the ops' spans only where allocator events need an owner (most profiles have none)
        mine = spans.setdefault(line.id, []) if memory else None
        for event in line.events:
            parsed = ops.get(event.metadata_id)
            if parsed is not None:
                node, op_type = parsed
                start, duration = _span_us(line_ns, event)
                if mine is not None:
                    mine.append((start, start + duration, len(records.op), node))
                records.append(
                    node, op_type, HOST_PLANE, line.id, start, duration, f"{node} = {op_type}()"
                )
            elif event.metadata_id in memory:
                time = _span_us(line_ns, event)[0]
                changes.append((time, line.id, memory[event.metadata_id], event))
    if changes:
        stat_names = {key: _text(meta.name) for key, meta in plane.stat_metadata.items()}
        _allocations(records, spans, sorted(changes, key=lambda c: c[0]), stat_names)


# The allocator events of a TF2 profile: BFC allocators report each allocation and free to the
# profiler (``BFCAllocator::AddTraceMe``): on a GPU, GPU_0_bfc and cuda_host_bfc; on a CPU,
# oneDNN's mklcpu allocator (none with oneDNN off: TensorFlow's plain CPU allocator reports none).
_MEMORY_EVENTS = {"MemoryAllocation": 1, "MemoryDeallocation": -1}


def _allocations(
    records: Records,
    spans: dict[int, list[tuple[int, int, int, str]]],
    changes: list[tuple[int, int, int, Any]],
    stat_names: dict[int, str],
) -> None:
    """``records.memory`` from a profile's allocator events (in time order): an allocation
    belongs to the op its ``tf_op`` names that ran on its thread at that time; a free, to the
    allocation of its address. Sizes are the allocator's (``allocation_bytes``: a BFC chunk).
    Allocations outside any traced op (eager calls around it, an XLA program's buffers taken
    under a call op that has no op event) and their frees go to ``records.memory.unowned``."""
    owned: dict[tuple[int, str], list[tuple[int, int]]] = {}  # (row, allocator) -> changes
    owner_of: dict[tuple[str, int], tuple[int, str]] = {}  # (allocator, address) -> its key
    unowned, loose = records.memory.unowned, set()  # loose: (allocator, address) of those
    for time, line, sign, event in changes:
        stats = _event_stats(event, stat_names)
        allocator, address = str(stats.get("allocator_name", "")), stats.get("addr", 0)
        size = int(stats.get("allocation_bytes") or stats.get("requested_bytes") or 0)
        if sign > 0:
            row = _op_at(spans.get(line, []), time, str(stats.get("tf_op", "")))
            if row is None:
                loose.add((allocator, address))
                unowned.append((line, time, allocator, address, size))
                continue
            key = owner_of[(allocator, address)] = (row, allocator)
        else:
            key = owner_of.pop((allocator, address), None)
            if key is None:
                if (allocator, address) in loose:
                    loose.discard((allocator, address))
                    unowned.append((line, time, allocator, address, -size))
                continue
        owned.setdefault(key, []).append((time, sign * size))
    memory = records.memory
    memory.every_allocation = False
    for (row, allocator), changed in sorted(owned.items()):
        sizes = [size for _, size in changed]
        live = peak = 0
        for size in sizes:
            live += size
            peak = max(peak, live)
        memory.row.append(row)
        memory.step.append(0)
        memory.allocator.append(allocator)
        memory.peak.append(peak)
        memory.total.append(sum(size for size in sizes if size > 0))
        memory.count.append(len(changed))
        memory.time += [time for time, _ in changed]
        memory.bytes += sizes


def _op_at(spans: list[tuple[int, int, int, str]], time: int, node: str) -> int | None:
    """The record row of the op ``node`` (any op, if ``node`` is "") running at ``time`` on a
    line whose ops' spans are ``spans`` (in start order); None if none."""
    at = bisect.bisect_right(spans, (time, float("inf")))
    for start, end, row, name in reversed(spans[max(0, at - 64) : at]):
        if start <= time <= end and (not node or name == node):
            return row
    return None


def _launch_threads(host_planes: Iterable[Any]) -> dict[int, int]:
    """``correlation_id`` -> id of the host thread (line) that launched that GPU work."""
    threads: dict[int, int] = {}
    for plane in host_planes:
        key = _stat_key(plane, "correlation_id")
        if key is None:
            continue
        for line in plane.lines:
            for event in line.events:
                for stat in event.stats:
                    if stat.metadata_id == key:
                        threads[stat.uint64_value or stat.int64_value] = line.id
    return threads


def _stat_key(plane: Any, name: str) -> int | None:
    """The plane's stat_metadata id for the stat called ``name``, if it has one."""
    for key, meta in plane.stat_metadata.items():
        if meta.name == name.encode():
            return key
    return None


def _is_derived_line(line: Any) -> bool:
    """A line a converter derived from others (by XProf's id range or by name): not a stream."""
    if 0 <= (line.id & 0xFFFFFFFF) - _DERIVED_ID_MIN < _DERIVED_ID_SPAN:
        return True
    return _text(line.name) in _DERIVED_LINE_NAMES


def _gpu_records(
    plane: Any, device: str, origin_ns: int, launchers: dict[int, int], records: Records
) -> None:
    """Kernels and copies of one GPU plane, classified like ``xplane_to_step_stats.cc``."""
    stat_names = {key: _text(meta.name) for key, meta in plane.stat_metadata.items()}
    event_names = {key: _text(meta.name) for key, meta in plane.event_metadata.items()}
    for line in plane.lines:
        if _is_derived_line(line):
            continue
        line_ns = _line_start_ns(line, origin_ns)
        for event in line.events:
            stats = _event_stats(event, stat_names)
            name = event_names.get(event.metadata_id, "")
            tf_op = stats.get("tf_op") or _annotated_op(stats)
            if "kernel_details" in stats:
                lane = f"{device}/stream:{line.id}"
            elif "memcpy_details" in stats or name.startswith("Memcpy"):
                kind = name if name.startswith("Memcpy") else "Memcpy"
                lane = f"{device}/stream:{line.id}<{kind}>"
                tf_op = tf_op or name
            elif tf_op:
                lane = f"{device}/stream:"  # TF work of no known kind (e.g. a memset)
            else:
                continue
            if not isinstance(tf_op, str) or not tf_op:
                continue
            node, op_type = split_op_event(tf_op) or (tf_op, "")
            thread = launchers.get(stats.get("correlation_id", -1), 0)
            start, duration = _span_us(line_ns, event)
            records.append(node, op_type, lane, thread, start, duration, name)


def _annotated_op(stats: dict[str, Any]) -> str | None:
    """The op a GPU event's outermost annotation names (``"<node>:<OpType>"`` in the
    ``level 0`` stat: profiles of TensorFlow 2.2 to 2.4, before the ``tf_op`` stat), if any."""
    level0 = stats.get("level 0")
    return level0 if isinstance(level0, str) and split_op_event(level0) else None


def _event_stats(event: Any, stat_names: dict[int, str]) -> dict[str, Any]:
    """An event's stats by name: strings (``str_value`` or a ``ref_value``'s name) or ints."""
    stats: dict[str, Any] = {}
    for stat in event.stats:
        kind = stat.WhichOneof("value")
        if kind == "str_value":
            value: Any = _text(stat.str_value)
        elif kind == "ref_value":
            value = stat_names.get(stat.ref_value, "")
        elif kind in ("int64_value", "uint64_value"):
            value = getattr(stat, kind)
        else:
            continue
        stats[stat_names.get(stat.metadata_id, "")] = value
    return stats
