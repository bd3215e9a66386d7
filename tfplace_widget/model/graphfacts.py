"""What the graph *as built* says about each op: its type, requested device and constraints.

The placer's decisions depend on facts that the executed graph no longer shows (the device a
``tf.device`` scope asked for, ``colocate_with`` groups, resource and ref edges), so we read them
from the user's graph once, into plain dictionaries that the reason code can use without TF.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import compress
from typing import Any, ClassVar

from .capture import import_tensorflow
from .gc_pause import paused_gc
from .kernels import KernelFacts, kernel_facts_of
from .records import producers
from .registry import may_output_resource_or_ref

# The node attribute trace_placement(overrides=...) marks an overridden request with: the pattern.
OVERRIDE_ATTR = "_tfplace_override"


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
    # What the kernel registry says about this node def (device types with a kernel for its
    # attrs, whether its GPU kernel computes in host memory).
    kernels: dict[str, KernelFacts] = field(default_factory=dict)
    # Ops whose request came from trace_placement(overrides=...): name -> the pattern.
    overridden: dict[str, str] = field(default_factory=dict)
    # Not a field (not compared, not saved by tfplace_format.facts_json): what facts_from_graph
    # records for the predictor as it reads the node defs; None on facts made otherwise
    # (loaded, function mode), which the predictor then works out itself.
    node_table: ClassVar[NodeTable | None] = None

    def __contains__(self, name: str) -> bool:
        return name in self.types

    def __len__(self) -> int:
        return len(self.types)


class NodeTable:
    """Each node's index (graph order, ``types``' keys), recorded by :func:`facts_from_graph`
    at C speed (about 0.5 ms at 10k nodes) for the predictor, which would otherwise make it on
    the first prediction of a trace. Valid while the facts' ``types`` dict is the one it was
    made from, with the same size (:meth:`fits`)."""

    __slots__ = ("key", "names", "index")

    def __init__(self, facts: GraphFacts) -> None:
        self.key = (id(facts.types), len(facts.types))
        self.names: list[str] = list(facts.types)
        self.index: dict[str, int] = dict(zip(self.names, range(len(self.names)), strict=True))

    def fits(self, facts: GraphFacts) -> bool:
        return self.key == (id(facts.types), len(facts.types))


_REF_OR_RESOURCE = ("resource",)
# Op types the placer does not colocate with the producers of their resource inputs: they
# forward a resource instead of using it (colocation_graph.cc, IsExemptFromResourceInputColocation
# and the ops registered with REGISTER_INPUT_COLOCATION_EXEMPTION).
RESOURCE_COLOCATION_EXEMPT = frozenset(
    {
        "IdentityN",
        "PartitionedCall",
        "StatefulPartitionedCall",
        "If",
        "StatelessIf",
        "While",
        "StatelessWhile",
        "Case",
        "StatelessCase",
        "FlatMapDataset",
        "InterleaveDataset",
        "MapAndBatchDataset",
        "ExperimentalMapAndBatchDataset",
        "GroupByWindowDataset",
        "ExperimentalGroupByWindowDataset",
        "ScanDataset",
        "ExperimentalScanDataset",
    }
)


def linked_groups(
    facts: GraphFacts, keep: Callable[[str], bool], exempt: frozenset = frozenset()
) -> list[set[str]]:
    """Ops the placer keeps on one device, joined by resource/ref edges and ``_class:
    loc:@X`` colocation (union-find over the edges whose two ends ``keep`` accepts); groups
    of two or more ops. A consumer whose type is in ``exempt`` (e.g.
    :data:`RESOURCE_COLOCATION_EXEMPT`) joins no group through its resource inputs."""
    parent: dict[str, str] = {}
    types = facts.types

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            parent[x] = parent.get(parent[x], parent[x])
            x = parent[x]
        return x

    for edges in (facts.resource_inputs, facts.colocated_with):
        for consumer, sources in edges.items():
            if exempt and edges is facts.resource_inputs and types.get(consumer) in exempt:
                continue
            for producer in sources:
                if keep(consumer) and keep(producer):
                    a, b = find(consumer), find(producer)
                    if a != b:
                        parent[a] = b
    groups: dict[str, set[str]] = {}
    for node in list(parent):
        groups.setdefault(find(node), {node}).add(node)
    for root, members in groups.items():
        members.add(root)
    return list(groups.values())


def facts_from_graph(graph: Any, graph_def: Any = None) -> GraphFacts:
    """Read the facts from a ``tf.Graph``, a ``GraphDef`` or its serialized bytes (a file:
    ``sources.files.read_graph_file``). ``graph_def``: the ``tf.Graph``'s own
    ``as_graph_def()`` when the caller has made it already (it is not made twice)."""
    tf, _ = import_tensorflow()

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
    written = graph_def
    if isinstance(graph, tf.compat.v1.GraphDef):
        # Importing applies colocation: a colocated op's device becomes its anchor's, and the
        # request it was written with is lost. The node defs are read as written; the imported
        # graph only answers dtype questions (resource and ref edges).
        written = graph
        imported = tf.Graph()
        with imported.as_default():
            tf.graph_util.import_graph_def(graph, name="")
        graph = imported
    if not isinstance(graph, tf.Graph):
        raise ValueError(
            f"graph must be a tf.Graph or a GraphDef, not {type(graph).__name__}. "
            "Pass the graph you built the ops in (e.g. sess.graph), or leave it out."
        )
    with paused_gc():
        return _facts_from_tf_graph(graph, written)


def _facts_from_tf_graph(graph: Any, graph_def: Any = None) -> GraphFacts:
    facts = GraphFacts()
    types, requested, inputs = facts.types, facts.requested, facts.inputs
    if graph_def is None:
        graph_def = graph.as_graph_def()
    overridden, colocated_with = facts.overridden, facts.colocated_with
    nodes = list(graph_def.node)  # one wrapper per node, kept for the kernel facts below
    attrs = []
    for node in nodes:
        name = node.name
        types[name] = node.op
        requested[name] = node.device
        node_inputs = node.input[:]
        # producers(), inlined: most nodes need no per-input work
        if node_inputs and (":" in (joined := "".join(node_inputs)) or "^" in joined):
            node_inputs = producers(node_inputs)
        inputs[name] = node_inputs
        attr = node.attr
        attrs.append(attr)
        if OVERRIDE_ATTR in attr:
            overridden[name] = attr[OVERRIDE_ATTR].s.decode()
        if "_class" in attr:
            targets = [
                g.decode()[5:]
                for g in attr["_class"].list.s
                if g.startswith(b"loc:@") and g[5:].decode() != name
            ]
            if targets:
                colocated_with[name] = targets
    if len(types) == len(nodes):  # node names are unique, as in any valid GraphDef
        names, ops = list(types), list(types.values())
    else:  # as the loop above: the last node of a name wins, at the first one's place
        names, ops = [node.name for node in nodes], [node.op for node in nodes]
    facts.kernels = dict(zip(names, kernel_facts_of(nodes, ops, attrs), strict=True))
    # Resource/ref dtypes are not in NodeDefs: ask the Graph, but only about ops whose type can
    # make a resource or ref output at all (by its OpDef), then only about their consumers.
    # (Per distinct type, then the nodes picked at C speed: no Python call per node.)
    may = {t for t in set(types.values()) if may_output_resource_or_ref(t)}
    special = set()
    for name in compress(types, map(may.__contains__, types.values())):
        op = graph.get_operation_by_name(name)
        if any(_is_resource_or_ref(t.dtype) for t in op.outputs):
            special.add(name)
    if special:
        for name, sources in inputs.items():
            if special.isdisjoint(sources):
                continue
            op = graph.get_operation_by_name(name)
            pinned = [t.op.name for t in op.inputs if _is_resource_or_ref(t.dtype)]
            if pinned:
                facts.resource_inputs[name] = pinned
    facts.node_table = NodeTable(facts)
    return facts


def _is_resource_or_ref(dtype: Any) -> bool:
    return dtype.name in _REF_OR_RESOURCE or dtype._is_ref_dtype
