"""``trace.raw``: the protos a trace was made from, serialized, by file name.

Kept so that a saved trace (``.tfplace``) carries its sources and a later version can re-derive
columns from them. Serializing is a copy of what TensorFlow returned: see the user guide's
"Save, share, export" (docs/guide/save-export.md) for what it costs in memory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, NamedTuple

from .._tfadapter.protos import run_metadata_type
from . import limits

# What trace.raw may hold of RunMetadata steps: one step of a 100k-op graph serializes to
# about 56 MB (its GraphDef to 6 MB), so a long multi-step trace would otherwise double its
# memory. Steps past the budget are left out, and the trace's log says so.
RAW_BUDGET_BYTES = 256 << 20
_DT_RESOURCE = 20


class Serialized(NamedTuple):
    """A step's ``RunMetadata`` already serialized (read from a file, given as bytes, or
    serialized once for the conversion), as ``raw_protos`` takes it: bytes, so that a later
    change to the user's proto changes nothing in the trace; ``data`` None where the bytes,
    ``size`` of them, were too large to keep (more than ``limits.MAX_MEMBER_BYTES``)."""

    data: bytes | None
    size: int

    def SerializeToString(self) -> bytes | None:  # noqa: N802 (protobuf's name)
        return self.data


def raw_protos(
    metadatas: Sequence[Any], graph: Any = None, budget: int = RAW_BUDGET_BYTES
) -> tuple[dict[str, bytes], str]:
    """Graph mode: ``graph_def.pb`` (when the graph is known: a ``tf.Graph``, a ``GraphDef``,
    its bytes or a ``.pb``/``.pbtxt`` path) and ``run_metadata_<step>.pb`` for each step, in
    order, while they fit in ``budget`` bytes (the first step always, unless it alone is more
    than a ``.tfplace`` member may hold: ``limits.MAX_MEMBER_BYTES``). Returns the dict and a
    line for the log when steps were left out ("" otherwise)."""
    raw: dict[str, bytes] = {}
    graph_bytes = _graph_bytes(graph)
    if graph_bytes is not None:
        raw["graph_def.pb"] = graph_bytes
    total = 0
    for step, metadata in enumerate(metadatas):
        data = metadata.SerializeToString()  # its length is the size: no ByteSize() pass first
        size = len(data) if data is not None else metadata.size  # None: a Serialized too large
        if size > limits.MAX_MEMBER_BYTES:  # a file member opened again could not hold it
            return raw, (
                f"tfplace: trace.raw keeps the RunMetadata of the first {step} of "
                f"{len(metadatas)} steps: step {step}'s takes {size / 1e6:.0f} MB, more "
                f"than a .tfplace member may (limits.MAX_MEMBER_BYTES). The frames have every "
                "step.\n"
            )
        if step and total + size > budget:
            return raw, (
                f"tfplace: trace.raw keeps the RunMetadata of the first {step} of "
                f"{len(metadatas)} steps ({total / 1e6:.0f} MB); the others would take "
                f"{size / 1e6:.0f} MB each. The frames have every step.\n"
            )
        raw[f"run_metadata_{step}.pb"] = data
        total += size
    return raw, ""


def _graph_bytes(graph: Any) -> bytes | None:
    if graph is None:
        return None
    if isinstance(graph, (bytes, bytearray)):
        return bytes(graph)
    if isinstance(graph, (str, os.PathLike)):
        from .files import read_graph_file

        graph = read_graph_file(os.fspath(graph))  # bytes (binary) or a GraphDef (text)
        return graph if isinstance(graph, bytes) else graph.SerializeToString()
    if hasattr(graph, "as_graph_def"):
        graph = graph.as_graph_def()
    return graph.SerializeToString() if hasattr(graph, "SerializeToString") else None


def function_protos(
    space: bytes,
    graphs: Sequence[Any],
    names: Sequence[str],
    device_scope: str | None,
    zero_us: int | None = None,
) -> dict[str, bytes]:
    """TF2 code: the profiler's XSpace as written, the function graphs the trace was read from
    (one ``RunMetadata`` holding them as ``function_graphs``), and their display names and the
    outer device scope, which ``read_function_graphs`` needs besides them; ``zero_us``: the
    instant the trace's times count from (µs since the epoch), to line traces up."""
    holder = run_metadata_type()()
    holder.function_graphs.extend(graphs)
    described: dict[str, Any] = {
        "names": list(names),
        "device_scope": device_scope or "",
        "resource_args": resource_args(holder, names),
    }
    if zero_us is not None:
        described["zero_us"] = int(zero_us)
    return {
        "xspace.pb": bytes(space),
        "function_graphs.pb": holder.SerializeToString(),
        "functions.json": json.dumps(described).encode(),
    }


def resource_args(holder: Any, names: Sequence[str]) -> list[list[Any]]:
    """``[function, _Arg name, has handle dtypes]`` of each resource ``_Arg`` in the partition
    graphs of ``holder`` (a ``RunMetadata``'s ``function_graphs``; ``names[i]`` is the i-th
    one's function): does the runtime's placed ``_Arg`` carry its handle's dtypes
    (``_handle_dtypes``; variables have them)? Kept in ``functions.json`` so that predictions
    read it as JSON, never parsing the ``raw/`` protos of a file."""
    found = []
    for index, graph in enumerate(holder.function_graphs):
        function = names[index] if index < len(names) else ""
        for partition in graph.partition_graphs:
            for node in partition.node:
                if node.op == "_Arg" and node.attr["T"].type == _DT_RESOURCE:
                    has = "_handle_dtypes" in node.attr and len(
                        node.attr["_handle_dtypes"].list.type
                    )
                    found.append([function, node.name, bool(has)])
    return found
