"""What the graph *as built* says about each op: its type, requested device and constraints.

The placer's decisions depend on facts that the executed graph no longer shows (the device a
``tf.device`` scope asked for, ``colocate_with`` groups, resource and ref edges), so we read them
from the user's graph once, into plain dictionaries that the reason code can use without TF.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class GraphFacts:
    """Per-op facts of the graph as built, keyed by node name."""

    types: dict[str, str] = field(default_factory=dict)
    requested: dict[str, str] = field(default_factory=dict)
    # Ops named by this op's ``_class: loc:@X`` attribute, other than itself.
    colocated_with: dict[str, list[str]] = field(default_factory=dict)
    # Producers of this op's resource or ref inputs (the placer pins both to one device).
    resource_inputs: dict[str, list[str]] = field(default_factory=dict)
    # Producers of this op's data inputs (all of them, resource ones included).
    inputs: dict[str, list[str]] = field(default_factory=dict)

    def __contains__(self, name: str) -> bool:
        return name in self.types

    def __len__(self) -> int:
        return len(self.types)


_REF_OR_RESOURCE = ("resource",)


def facts_from_graph(graph: Any) -> GraphFacts:
    """Read the facts from a ``tf.Graph``, a ``GraphDef`` or its serialized bytes."""
    import tensorflow as tf

    if isinstance(graph, (bytes, bytearray)):
        graph_def = tf.compat.v1.GraphDef()
        try:
            graph_def.ParseFromString(bytes(graph))
        except Exception as exc:  # google.protobuf.message.DecodeError
            raise ValueError(
                "graph bytes are not a serialized GraphDef. Pass graph.as_graph_def() or "
                "its SerializeToString(), or the tf.Graph itself."
            ) from exc
        graph = graph_def
    if isinstance(graph, tf.compat.v1.GraphDef):
        imported = tf.Graph()
        with imported.as_default():
            tf.graph_util.import_graph_def(graph, name="")
        graph = imported
    if not isinstance(graph, tf.Graph):
        raise ValueError(
            f"graph must be a tf.Graph or a GraphDef, not {type(graph).__name__}. "
            "Pass the graph you built the ops in (e.g. sess.graph), or leave it out."
        )
    return _facts_from_tf_graph(graph)


def _facts_from_tf_graph(graph: Any) -> GraphFacts:
    facts = GraphFacts()
    graph_def = graph.as_graph_def()
    for node in graph_def.node:
        name = node.name
        facts.types[name] = node.op
        facts.requested[name] = node.device
        producers = [_producer(i) for i in node.input if not i.startswith("^")]
        facts.inputs[name] = producers
        if "_class" in node.attr:
            targets = [
                g.decode()[5:]
                for g in node.attr["_class"].list.s
                if g.startswith(b"loc:@") and g[5:].decode() != name
            ]
            if targets:
                facts.colocated_with[name] = targets
    # Resource/ref dtypes are not in NodeDefs: ask the Graph, but only about ops whose
    # producers make a resource or ref output, which keeps this cheap on large graphs.
    special = set()
    for op in graph.get_operations():
        if any(t.dtype.name in _REF_OR_RESOURCE or t.dtype._is_ref_dtype for t in op.outputs):
            special.add(op.name)
    if special:
        for op in graph.get_operations():
            if not any(p in special for p in facts.inputs.get(op.name, ())):
                continue
            pinned = [
                t.op.name
                for t in op.inputs
                if t.dtype.name in _REF_OR_RESOURCE or t.dtype._is_ref_dtype
            ]
            if pinned:
                facts.resource_inputs[op.name] = pinned
    return facts


def _producer(tensor_name: str) -> str:
    """``"a/b:1"`` -> ``"a/b"``."""
    head, sep, tail = tensor_name.rpartition(":")
    return head if sep and tail.isdigit() else tensor_name
