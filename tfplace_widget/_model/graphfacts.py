"""What the graph *as built* says about each op: its type, requested device and constraints.

The placer's decisions depend on facts that the executed graph no longer shows (the device a
``tf.device`` scope asked for, ``colocate_with`` groups, resource and ref edges), so we read them
from the user's graph once, into plain dictionaries that the reason code can use without TF.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from .kernel_registry import KernelRegistry
from .kernels import KernelFacts

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
    # Not a field either: the kernel registry these facts were read from in this process
    # (tfadapter.registry.REGISTRY, set by those who read them), None on facts loaded from a
    # file. Findings replay the placer and offer casts only with it, so what they say follows
    # from the trace and its facts, not from what the process happens to have imported; the
    # predictor and the reasons take it as their registry unless one is handed in.
    registry: ClassVar[KernelRegistry | None] = None

    def __contains__(self, name: str) -> bool:
        return name in self.types

    def __len__(self) -> int:
        return len(self.types)


@dataclass(frozen=True)
class NodeDetail:
    """What a node def adds to :class:`GraphFacts` for the placer and for the reasons (control
    edges, output counts, dtypes), read by
    :func:`tfplace_widget._tfadapter.graphfacts.node_details`."""

    controls: tuple[str, ...] = ()
    outputs: int | None = None  # number of outputs, when known
    input_tensors: tuple[str, ...] = ()  # data inputs as "op:slot"
    dtypes: str = ""  # the node's type attrs, e.g. "int32"


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
