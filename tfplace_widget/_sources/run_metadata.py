"""Graph-mode traces: ``RunMetadata`` protos (step_stats + partition graphs) as records."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from .._model.devices import canonical_device
from .._model.errors import TraceError
from .._model.gc_pause import paused_gc
from .._model.graphfacts import GraphFacts
from .._model.records import SEND_TYPES, AllocatorRecords, BuiltAt, Executed, Records, producers
from .._model.trace import PlacementTrace
from .._tfadapter.capture import import_tensorflow
from .._tfadapter.graphfacts import facts_from_graph
from .._tfadapter.origins import graph_built_at
from .._tfadapter.protos import (
    allocator_columns_type,
    allocator_item_columns_type,
    run_metadata_type,
)
from . import frames, limits
from .files import parse_text_proto, read_graph_file, read_trace_bytes, trace_format
from .onednn import add_merged_nodes
from .persistent import VARIABLE_HANDLES, variable_bytes, variable_identity
from .replicated import add_replicated_constants
from .wire import field_counts
from .xla import XlaProfile
from .xla_graph import LAUNCH_TYPES, add_graph_clusters


def trace_from_run_metadata(
    run_metadata: Any, graph: Any = None, *, devices: Sequence[str] = ()
) -> PlacementTrace:
    """:meth:`PlacementTrace.from_run_metadata`: RunMetadata (proto, bytes, path or a list of
    them) and the graph (a ``tf.Graph``, GraphDef, bytes or a ``.pb``/``.pbtxt`` path)."""
    from .raw import Serialized, raw_protos

    _, startup_log = import_tensorflow()  # its start-up lines go to the trace's log
    loaded = [load_run_metadata(m) for m in as_list(run_metadata)]
    metadatas = [message for message, _ in loaded]
    # Each step's bytes: a file's or the given bytes as read; one proto's serialized now, once,
    # for the allocator records and trace.raw (several protos' later, by raw_protos, within
    # its budget: their bytes are not all held at once). Bytes too large for trace.raw (a 1M-op
    # step's 0.5 GB) are not held through the conversion: only their size is kept, and the
    # records are read field by field.
    serialized: list[bytes | None] = [data for _, data in loaded]
    sizes: list[int | None] = [None] * len(loaded)
    if len(loaded) == 1 and serialized[0] is None:
        data = metadatas[0].SerializeToString()
        sizes[0] = len(data)
        serialized[0] = data if len(data) <= limits.MAX_MEMBER_BYTES else None
        del data
    if isinstance(graph, (str, os.PathLike)):
        graph = read_graph_file(os.fspath(graph))  # bytes (binary) or a GraphDef (text)
    # A tf.Graph's GraphDef, made once for the facts and for trace.raw.
    graph_def = graph.as_graph_def() if hasattr(graph, "as_graph_def") else None
    facts = facts_from_graph(graph, graph_def=graph_def) if graph is not None else None
    # a tf.Graph keeps the stack that made each op (a GraphDef does not)
    built = graph_built_at(graph.get_operations()) if hasattr(graph, "get_operations") else None
    trace = build_trace(
        metadatas,
        facts,
        available_devices=devices,
        log=startup_log,
        built_at=built,
        serialized=serialized,
    )
    steps = [
        metadata if data is None and size is None else Serialized(data, size or len(data or b""))
        for metadata, data, size in zip(metadatas, serialized, sizes, strict=True)
    ]
    del serialized, loaded
    trace.raw, dropped = raw_protos(steps, graph_def if graph_def is not None else graph)
    trace.log += dropped
    return trace


def build_trace(
    metadatas: list,
    facts: GraphFacts | None,
    available_devices: Sequence[str] = (),
    log: str = "",
    source: str = "",
    xla_profile: XlaProfile | None = None,
    built_at: dict[str, BuiltAt | None] | None = None,
    serialized: Sequence[bytes | None] = (),
) -> PlacementTrace:
    """The shared path from RunMetadata protos (+ graph facts) to a :class:`PlacementTrace`;
    ``xla_profile``: the HLO instructions of auto-clustered clusters (``add_graph_clusters``);
    ``built_at``: where the user's code made each op of the graph (``tfadapter.origins``);
    ``serialized``: each step's bytes where known (``records_from_step_stats``)."""
    with paused_gc():
        records = Records()
        step_starts: list[int] = []
        capped = False  # each step has its own collector, capped at 2^20 nodes
        for step, metadata in enumerate(metadatas):
            before = len(records.op)
            data = serialized[step] if step < len(serialized) else None
            step_starts.append(records_from_step_stats(metadata.step_stats, records, data))
            capped = (
                capped or len(records.op) - before >= frames.STEP_STATS_CAP
            )  # one cap, read when called
        executed = executed_graph(metadatas[0].partition_graphs) if metadatas else Executed()
        executed.built_at = built_at or {}
        if facts is not None:
            add_merged_nodes(executed, facts)
            add_replicated_constants(executed, facts, log)
        trace = frames.frames_from_records(
            records,
            step_starts,
            executed,
            facts,
            available_devices=available_devices,
            source=source,
        )
        if not LAUNCH_TYPES.isdisjoint(executed.type.values()):  # XLA auto-clustering
            add_graph_clusters(trace, metadatas[0].partition_graphs, facts, xla_profile)
    trace.log = log
    trace.truncated = trace.truncated or capped
    return trace


def as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def load_run_metadata(value: Any) -> tuple[Any, bytes | None]:
    """The ``RunMetadata`` of ``value`` (a proto, its bytes or a file) and its serialized
    bytes where ``value`` was bytes (None for a proto or a text file)."""
    if isinstance(value, run_metadata_type()):  # e.g. empty: the run was not traced
        return _check_has_steps(value, "the given RunMetadata"), None
    if isinstance(value, (bytes, bytearray)):
        data = bytes(value)
        return _parse_binary(data, "the given bytes"), data
    if isinstance(value, (str, os.PathLike)):
        return _load_run_metadata_file(os.fspath(value))
    raise ValueError(
        f"run_metadata must be a RunMetadata proto, its serialized bytes or a file path, "
        f"not {type(value).__name__}."
    )


def _load_run_metadata_file(path: str) -> tuple[Any, bytes | None]:
    data = read_trace_bytes(path)
    if not data:
        raise TraceError(
            f"{path!r} is empty, not a trace. Write one with "
            "open(path, 'wb').write(run_metadata.SerializeToString())."
        )
    if trace_format(path) == "text":
        fix = "Save one with text_format.MessageToString(run_metadata)."
        message = parse_text_proto(data, run_metadata_type()(), path, fix)
        return _check_has_steps(message, path), None
    return _parse_binary(data, repr(path)), data


def _parse_binary(data: bytes, what: str) -> Any:
    message = run_metadata_type()()
    try:
        message.ParseFromString(data)
    except Exception as exc:
        raise TraceError(
            f"{what} is not a RunMetadata proto (it may be truncated or another file): {exc}. "
            "Pass the bytes of run_metadata.SerializeToString() from a FULL_TRACE run."
        ) from exc
    return _check_has_steps(message, what)


def _check_has_steps(message: Any, what: str) -> Any:
    if not message.step_stats.dev_stats and not message.partition_graphs:
        raise TraceError(
            f"{what} holds no step_stats and no partition graphs, so it is not a trace. "
            "Run with RunOptions(trace_level=FULL_TRACE, output_partition_graphs=True)."
        )
    return message


def records_from_step_stats(
    step_stats: Any, records: Records, serialized: bytes | None = None
) -> int:
    """Append one step's node_stats to ``records``; return the step's start (µs since epoch).

    ``serialized``: the bytes of the ``RunMetadata`` holding ``step_stats`` (kept for
    ``trace.raw`` anyway), where known: the allocator records are then read from them as
    columns (``allocator_columns``), each node's only counted here; else field by field."""
    first = len(records.start)
    op, typ, lane, thread = records.op, records.type, records.lane, records.thread
    start, duration, label, out = (
        records.start,
        records.duration,
        records.label,
        records.output_bytes,
    )
    memory = records.memory
    items_before = len(memory.row)
    columns = allocator_columns(serialized) if serialized is not None else None
    # what the columns say is absent need not be looked for node by node (an item, even
    # all zeros, is on the wire: its bytes are there, maybe empty)
    any_items = columns is None or len(columns.items) > 0
    any_held = columns is None or len(columns.persistent_memory_size) > 0
    # from the columns, each node's items are only placed (their records counted from
    # their bytes, after the loop); else read field by field
    item = _item_reader(memory) if columns is None else None
    rows, rows_extend = memory.row.append, memory.row.extend
    persistent = records.persistent
    # from the columns, each node's outputs are only counted here, their sizes taken after
    # the loop (``_take_output_sizes``); else read field by field
    n_outputs: list[int] | None = [] if columns is not None else None
    count_outputs = n_outputs.append if n_outputs is not None else None
    for dev in step_stats.dev_stats:
        nodes = dev.node_stats
        lane.extend([dev.device] * len(nodes))
        for node in nodes:
            if any_held and (held := node.memory_stats.persistent_memory_size):
                # a Const's value, a ref variable's buffer: allocated before the step
                _keep_persistent(persistent, node, dev.device, held, len(op))
            if any_items and (used := node.memory):
                # what the op's tracking allocators saw (FULL_TRACE)
                if item is None:
                    if len(used) == 1:
                        rows(len(op))
                    else:
                        rows_extend([len(op)] * len(used))
                else:  # by index: upb's repeated fields index faster than they iterate
                    for at in range(len(used)):
                        item(len(op), used[at])
            op.append(node.node_name)
            thread.append(node.thread_id)
            start.append(node.all_start_micros)
            duration.append(node.all_end_rel_micros)
            label.append(node.timeline_label)
            if count_outputs is not None:
                count_outputs(len(node.output))
            else:
                out.append(_output_sizes(node.output))
    if columns is not None and len(memory.row) > items_before:
        _take_columns(memory, columns, items_before, step_stats)
    if n_outputs is not None:
        _take_output_sizes(out, n_outputs, columns.requested_bytes, step_stats)
    typ.extend([""] * (len(start) - len(typ)))
    memory.step.extend([first] * (len(memory.row) - items_before))  # this step's items
    return min(start[first:]) if len(start) > first else 0


def _output_sizes(outputs: Any) -> tuple[int, ...]:
    """The ``requested_bytes`` of each of a node's ``outputs`` (``NodeOutput``s)."""
    if not outputs:
        return ()
    if len(outputs) == 1:  # the common case, without a generator per record
        return (outputs[0].tensor_description.allocation_description.requested_bytes,)
    return tuple(o.tensor_description.allocation_description.requested_bytes for o in outputs)


def _take_output_sizes(out: list, n_outputs: list[int], requested: Any, step_stats: Any) -> None:
    """Append each node's output sizes to ``out``: ``n_outputs[i]`` of the flat column
    ``requested`` (every output's ``requested_bytes``, in order) for node ``i``; or, where
    the column is not one value per output (a size of zero is absent from the bytes), each
    node's read field by field again."""
    if sum(n_outputs) != len(requested):
        for dev in step_stats.dev_stats:
            out.extend(_output_sizes(node.output) for node in dev.node_stats)
        return
    sizes = list(requested)
    if n_outputs.count(1) == len(n_outputs):  # one output each: 1-tuples at C speed
        out.extend(zip(sizes))
        return
    at = 0
    for k in n_outputs:
        out.append(tuple(sizes[at : at + k]))
        at += k


class AllocatorColumns(NamedTuple):
    """A step's allocator records as columns (``allocator_columns``): ``items`` every
    node's ``AllocatorMemoryUsed`` items' bytes, in the order of the nodes; ``memory`` those
    items parsed as one (``protos.allocator_item_columns_type``: ``allocator_name``,
    ``total_bytes``, ``peak_bytes``, and ``allocation_records``' ``alloc_micros`` and
    ``alloc_bytes``, every item's and every record's, flat); ``counts`` the allocation
    records of each item, counted from its bytes (None where they could not be); every
    node's ``memory_stats.persistent_memory_size``, flat; and every node's outputs'
    ``requested_bytes``, flat."""

    items: Any
    memory: Any
    counts: np.ndarray | None
    persistent_memory_size: Any
    requested_bytes: Any


def allocator_columns(serialized: bytes) -> AllocatorColumns:
    """The allocator records of the ``RunMetadata`` serialized in ``serialized``, as
    :class:`AllocatorColumns`."""
    run = allocator_columns_type()()
    run.ParseFromString(serialized)
    nodes = run.step_stats.dev_stats.node_stats
    items = list(nodes.memory)  # each item's bytes made once, for the join and the lengths
    joined = b"".join(items)
    lengths = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
    memory = allocator_item_columns_type()()
    memory.ParseFromString(joined)
    counts = field_counts(joined, lengths, ALLOCATION_RECORDS)
    return AllocatorColumns(
        items,
        memory,
        counts,
        nodes.memory_stats.persistent_memory_size,
        nodes.output.tensor_description.allocation_description.requested_bytes,
    )


ALLOCATION_RECORDS = 6  # AllocatorMemoryUsed.allocation_records' field number


def _item_reader(memory: Any) -> Any:
    """``item(record, allocator)`` keeping one ``AllocatorMemoryUsed`` of the execution
    record ``record``, all its fields."""
    rows, counts = memory.row.append, memory.count.append
    names, peaks, totals = memory.allocator.append, memory.peak.append, memory.total.append
    times, sizes = memory.time.append, memory.bytes.append

    def read(record: int, allocator: Any) -> None:
        changes = allocator.allocation_records
        n_changes = len(changes)
        rows(record)
        names(allocator.allocator_name)
        peaks(allocator.peak_bytes)
        totals(allocator.total_bytes)
        counts(n_changes)
        for k in range(n_changes):
            change = changes[k]
            times(change.alloc_micros)
            sizes(change.alloc_bytes)

    return read


def _take_columns(
    memory: Any, columns: AllocatorColumns, items_before: int, step_stats: Any
) -> None:
    """Fill the items placed since ``items_before`` from ``columns``, or, where a column
    is shorter than the items (a field that was zero is absent from the bytes) or the
    records could not be counted from the bytes, read them field by field again."""
    n_items = len(memory.row) - items_before
    counts = columns.counts
    item = columns.memory
    records = item.allocation_records
    if (
        counts is not None
        and len(counts) == n_items
        and len(item.allocator_name) == n_items
        and len(item.total_bytes) == n_items
        and len(item.peak_bytes) == n_items
        and len(records.alloc_micros) == (n_changes := int(counts.sum()))
        and len(records.alloc_bytes) == n_changes
    ):
        memory.count.extend(counts.tolist())
        memory.allocator.extend(item.allocator_name)
        memory.total.extend(item.total_bytes)
        memory.peak.extend(item.peak_bytes)
        memory.time.extend(records.alloc_micros)
        memory.bytes.extend(records.alloc_bytes)
        return
    reread = AllocatorRecords()
    read = _item_reader(reread)
    for dev in step_stats.dev_stats:
        for node in dev.node_stats:
            used = node.memory
            for at in range(len(used)):
                read(0, used[at])
    for name in ("count", "allocator", "total", "peak", "time", "bytes"):
        getattr(memory, name).extend(getattr(reread, name))


def _keep_persistent(persistent: dict, node: Any, lane: str, held: int, record: int) -> None:
    """Keep what ``node`` recorded as persistent on ``lane``: the largest of its runs, in the
    allocator of its output (where TensorFlow described one), with that run's ``record``
    (its position in ``Records``: the frames know its op row)."""
    key = (node.node_name, lane)
    if key in persistent and persistent[key][0] >= held:
        return
    outputs = node.output
    allocator = (
        outputs[0].tensor_description.allocation_description.allocator_name if outputs else ""
    )
    persistent[key] = (int(held), allocator, record)


def executed_graph(partition_graphs: Iterable[Any]) -> Executed:
    """The executed graph of ``partition_graphs`` (``GraphDef``s): each node's device, type and
    producers, the transfers between devices, the variables' handles.

    Each node's name, device, type and producers are appended to four lists in node order and
    the three dicts built from them at the end (``dict.update`` of a ``zip``: the same keys,
    values and order as a store per node, the stores made in one C loop)."""
    executed = Executed()
    names: list[str] = []
    devices: list[str] = []
    types: list[str] = []
    inputs: list[list[str]] = []
    add_name, add_device, add_type, add_inputs = (
        names.append,
        devices.append,
        types.append,
        inputs.append,
    )
    transfers = executed.transfers.append
    pairs: dict[tuple[bytes, bytes], tuple[str, ...]] = {}  # a send's devices, canonical
    raw_device = device = ""
    for graph_def in partition_graphs:
        for node in graph_def.node:
            name = node.name
            raw = node.device
            if raw != raw_device:  # a partition's nodes mostly share one device string
                raw_device, device = raw, canonical_device(raw)
            add_name(name)
            add_device(device)
            op_type = node.op
            add_type(op_type)
            raw_inputs = node.input[:]
            # producers(), inlined: most nodes need no per-input work
            if raw_inputs and (":" in (joined := "".join(raw_inputs)) or "^" in joined):
                add_inputs(producers(raw_inputs))
            else:
                add_inputs(raw_inputs)
            if op_type in VARIABLE_HANDLES:
                executed.variables[name] = variable_bytes(node)
                if identity := variable_identity(node):
                    executed.variable_of[name] = identity
            if op_type in SEND_TYPES:
                attr = node.attr
                if "client_terminated" in attr and attr["client_terminated"].b:
                    # A fetch sent to the client (a cluster's session): no device-to-device
                    # transfer, but it says which task is the client's, the chief.
                    executed.client = executed.client or device
                else:  # send_transfer(node), with the attrs and inputs read above
                    tensor = raw_inputs[0] if raw_inputs else attr["_src"].s.decode()
                    ends = (attr["send_device"].s, attr["recv_device"].s)
                    pair = pairs.get(ends)
                    if pair is None:  # a few distinct pairs: decoded and made canonical once
                        pair = pairs[ends] = tuple(canonical_device(d.decode()) for d in ends)
                    transfers(((tensor if ":" in tensor else f"{tensor}:0"), *pair))
    executed.device.update(zip(names, devices, strict=True))
    executed.type.update(zip(names, types, strict=True))
    executed.inputs.update(zip(names, inputs, strict=True))
    return executed
