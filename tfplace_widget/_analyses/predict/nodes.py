"""The placer's view of one node: what its placement depends on besides its edges.

:class:`_Static` is shared by equal nodes (same op type, kernels and request); :class:`_Node`
is made on demand (most nodes of a large graph never need one). Moved out of the former
``analyses/predict.py`` unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..._model.graphfacts import GraphFacts
from .devices import Name

_METADATA_TYPES = frozenset({"Shape", "ShapeN", "Size", "Rank"})
_IDENTITY_TYPES = frozenset({"Identity", "RefIdentity"})
_SINK_ONLY = np.array([-1], dtype=np.int64)  # a node nothing consumes feeds the _SINK node


@dataclass(frozen=True)
class _Static:
    """What a node's placement depends on besides its edges, shared by equal nodes."""

    op_type: str
    request: str
    supported: tuple  # ((device type, priority), ...), best first
    requested: Name | None  # parsed request; None when malformed
    generator: bool
    resource_generator: bool
    dataset: bool


class _PlacerView(Protocol):
    """What a node reads from the placer (:class:`.placer._Placer`, which imports this module)."""

    facts: GraphFacts
    details: Mapping[str, Any]
    names: list[str]
    index: Mapping[str, int]
    codes: Sequence[int]
    statics: Sequence[_Static]

    def consumers_of(self, i: int) -> np.ndarray: ...


class _Node:
    """One node, made on demand (most nodes of a large graph never need one)."""

    __slots__ = (
        "name",
        "op_type",
        "request",
        "inputs",
        "controls",
        "consumers",
        "kernel_types",
        "generator",
        "resource_generator",
        "dataset",
    )

    def __init__(self, placer: _PlacerView, i: int) -> None:
        static = placer.statics[placer.codes[i]]
        name = placer.names[i]
        index = placer.index
        self.name = name
        self.op_type = static.op_type
        self.request = static.request
        self.inputs = [index.get(p, -1) for p in placer.facts.inputs.get(name, ())]
        detail = placer.details.get(name)
        self.controls = [index.get(c, -1) for c in detail.controls] if detail else []
        # Only the generator and Identity heuristics look at a node's consumers.
        wanted = static.generator or static.op_type in _IDENTITY_TYPES
        self.consumers = placer.consumers_of(i) if wanted else _SINK_ONLY[:0]
        self.kernel_types = list(static.supported)
        self.generator = static.generator
        self.resource_generator = static.resource_generator
        self.dataset = static.dataset


class _Nodes:
    """``placer.nodes[i]``: the node, made on first use."""

    def __init__(self, placer: _PlacerView) -> None:
        self.placer = placer
        self.made: dict[int, _Node] = {}

    def __getitem__(self, i: int) -> _Node:
        node = self.made.get(i)
        if node is None:
            node = self.made[i] = _Node(self.placer, i)
        return node

    def __len__(self) -> int:
        return len(self.placer.names)
