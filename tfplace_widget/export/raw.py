"""``trace.raw``: the protos a trace was made from, serialized, by file name.

Kept so that a saved trace (``.tfplace``) carries its sources and a later version can re-derive
columns from them. Serializing is a copy of what TensorFlow returned: see the README ("Save,
share, export") for what it costs in memory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any


def raw_protos(metadatas: Sequence[Any], graph: Any = None) -> dict[str, bytes]:
    """Graph mode: ``run_metadata_<step>.pb`` for each step and ``graph_def.pb`` (when the
    graph is known: a ``tf.Graph``, a ``GraphDef``, its bytes or a ``.pb``/``.pbtxt`` path)."""
    raw = {f"run_metadata_{i}.pb": m.SerializeToString() for i, m in enumerate(metadatas)}
    graph_bytes = _graph_bytes(graph)
    if graph_bytes is not None:
        raw["graph_def.pb"] = graph_bytes
    return raw


def _graph_bytes(graph: Any) -> bytes | None:
    if graph is None:
        return None
    if isinstance(graph, (bytes, bytearray)):
        return bytes(graph)
    if isinstance(graph, (str, os.PathLike)):
        from ..graphfacts import _read_graph_file

        graph = _read_graph_file(os.fspath(graph))  # bytes (binary) or a GraphDef (text)
        return graph if isinstance(graph, bytes) else graph.SerializeToString()
    if hasattr(graph, "as_graph_def"):
        graph = graph.as_graph_def()
    return graph.SerializeToString() if hasattr(graph, "SerializeToString") else None


def function_protos(
    space: bytes, graphs: Sequence[Any], names: Sequence[str], device_scope: str | None
) -> dict[str, bytes]:
    """TF2 code: the profiler's XSpace as written, the function graphs the trace was read from
    (one ``RunMetadata`` holding them as ``function_graphs``), and their display names and the
    outer device scope, which ``read_function_graphs`` needs besides them."""
    from tensorflow.core.protobuf import config_pb2

    holder = config_pb2.RunMetadata()
    holder.function_graphs.extend(graphs)
    return {
        "xspace.pb": bytes(space),
        "function_graphs.pb": holder.SerializeToString(),
        "functions.json": json.dumps(
            {"names": list(names), "device_scope": device_scope or ""}
        ).encode(),
    }
