"""The least any RunMetadata -> PlacementTrace conversion must spend, measured, not guessed.

A conversion that starts from a ``RunMetadata`` proto object (what ``session.run`` fills in, and
what timeline.py is given) can get at its contents in only two ways with the upb protobuf
runtime: read the fields from Python (one Python object per field read), or serialize the
message back to bytes and parse those outside Python (a compiled reader). Both floors are
timed here on the same protos as the conversion, doing no work with what they read.
"""

from __future__ import annotations

from typing import Any


def read_fields_only(metadata: Any, graph: Any) -> int:
    """Read, from Python, exactly the fields a PlacementTrace needs, and nothing else.

    step_stats: node name, thread, start, duration, label, output sizes, and since issue 34
    the allocator records (``memory_stats.persistent_memory_size``; per ``memory`` entry its
    allocator name, peak and total bytes and each allocation record's time and bytes; a
    persistent holder's output allocator); partition graphs: name, device, op, inputs, and
    the devices of every ``_Send``; the built graph (``as_graph_def()``): name, op, device,
    inputs, ``_class``. Returns a count, so nothing is optimised away. The collector is
    paused, as in the conversion itself.
    """
    from tfplace_widget._model.gc_pause import paused_gc

    with paused_gc():
        return _read_fields(metadata, graph)


def _read_fields(metadata: Any, graph: Any) -> int:
    seen = 0
    for dev in metadata.step_stats.dev_stats:
        _ = dev.device
        for node in dev.node_stats:
            _ = (node.node_name, node.thread_id, node.all_start_micros)
            _ = (node.all_end_rel_micros, node.timeline_label)
            for output in node.output:
                _ = output.tensor_description.allocation_description.requested_bytes
            _read_memory(node)
            seen += 1
    for partition in metadata.partition_graphs:
        seen += _read_nodes(partition.node, sends=True)
    if graph is not None:
        seen += _read_nodes(graph.as_graph_def().node, sends=False)
    return seen


def _read_memory(node: Any) -> None:
    """A node's allocator records, read and dropped (in the floor and in what keeps it)."""
    if node.memory_stats.persistent_memory_size and node.output:
        _ = node.output[0].tensor_description.allocation_description.allocator_name
    for used in node.memory:
        _ = (used.allocator_name, used.peak_bytes, used.total_bytes)
        for change in used.allocation_records:
            _ = (change.alloc_micros, change.alloc_bytes)


def _read_nodes(nodes: Any, sends: bool) -> int:
    count = 0
    for node in nodes:
        _ = (node.name, node.device, node.input[:])
        op = node.op
        attr = node.attr
        if sends and op == "_Send":
            _ = (attr["send_device"].s, attr["recv_device"].s)
        elif not sends and "_class" in attr:
            _ = attr["_class"].list.s[:]
        count += 1
    return count


def read_and_keep(metadata: Any, graph: Any) -> tuple[list, list]:
    """The floor's reads, each value kept in a list (one list per field and source): the
    least a conversion that builds anything from what it reads must add to the floor.

    Returns the step_stats' lists and each node source's (partition graphs, then the built
    graph) name, device, op and input lists; the allocator records are read as the floor
    reads them and not kept (they are few next to the node fields)."""
    from tfplace_widget._model.gc_pause import paused_gc

    with paused_gc():
        return _read_and_keep(metadata, graph)


def read_keep_and_key(metadata: Any, graph: Any) -> tuple[dict, list[dict]]:
    """:func:`read_and_keep`, then one dict by name per source (the step_stats' names to
    their rows, each node source's names to their device, op and inputs): what joining the
    sources by op name needs before anything is joined."""
    from tfplace_widget._model.gc_pause import paused_gc

    with paused_gc():
        stats, sources = _read_and_keep(metadata, graph)
        rows = dict(zip(stats[0], range(len(stats[0])), strict=True))
        return rows, [
            dict(zip(n, zip(d, o, i, strict=True), strict=True)) for n, d, o, i in sources
        ]


def _read_and_keep(metadata: Any, graph: Any) -> tuple[list, list]:
    stats: tuple[list, ...] = ([], [], [], [], [], [])
    name, thread, start, end, label, outputs = (column.append for column in stats)
    for dev in metadata.step_stats.dev_stats:
        _ = dev.device
        for node in dev.node_stats:
            name(node.node_name)
            thread(node.thread_id)
            start(node.all_start_micros)
            end(node.all_end_rel_micros)
            label(node.timeline_label)
            outputs(
                [o.tensor_description.allocation_description.requested_bytes for o in node.output]
            )
            _read_memory(node)
    sources = [_keep_nodes(p.node, sends=True) for p in metadata.partition_graphs]
    if graph is not None:
        sources.append(_keep_nodes(graph.as_graph_def().node, sends=False))
    return list(stats), sources


def _keep_nodes(nodes: Any, sends: bool) -> tuple[list, list, list, list]:
    kept: tuple[list, list, list, list] = ([], [], [], [])
    name, device, op_type, inputs = (column.append for column in kept)
    for node in nodes:
        name(node.name)
        device(node.device)
        inputs(node.input[:])
        op = node.op
        op_type(op)
        attr = node.attr
        if sends and op == "_Send":
            _ = (attr["send_device"].s, attr["recv_device"].s)
        elif not sends and "_class" in attr:
            _ = attr["_class"].list.s[:]
    return kept


def serialize_only(metadata: Any, graph: Any) -> int:
    """Turn the RunMetadata and the built graph into bytes: what a compiled reader starts with.

    The graph goes through TensorFlow's C API (``TF_GraphToGraphDef``), the cheapest way to get
    its bytes; ``graph.as_graph_def()`` would also parse them into Python protos.
    """
    return sum(map(len, serialized(metadata, graph)))


def parse_only(raw: tuple[bytes, bytes]) -> int:
    """Parse the serialized RunMetadata and GraphDef with upb, protobuf's compiled parser.

    Not a strict floor (a reader written for these few fields could skip more), but the speed
    of a real compiled parser on the bytes a compiled reader would have to get through.
    """
    from tensorflow.core.framework import graph_pb2
    from tensorflow.core.protobuf import config_pb2

    run_metadata, graph = raw
    config_pb2.RunMetadata().ParseFromString(run_metadata)
    graph_pb2.GraphDef().ParseFromString(graph)
    return len(run_metadata) + len(graph)


def serialized(metadata: Any, graph: Any) -> tuple[bytes, bytes]:
    """The RunMetadata's and the graph's bytes (``b""`` for no graph)."""
    return metadata.SerializeToString(), graph_bytes(graph) if graph is not None else b""


def graph_bytes(graph: Any) -> bytes:
    """A ``tf.Graph``'s serialized GraphDef, straight from TensorFlow's C API."""
    from tensorflow.python.client import pywrap_tf_session
    from tensorflow.python.framework import c_api_util

    with c_api_util.tf_buffer() as buffer, graph._c_graph.get() as c_graph:
        pywrap_tf_session.TF_GraphToGraphDef(c_graph, buffer)
        return pywrap_tf_session.TF_GetBuffer(buffer)
