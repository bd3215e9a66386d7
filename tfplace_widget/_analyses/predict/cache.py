"""What every prediction of one :class:`~tfplace_widget._model.graphfacts.GraphFacts` shares.

The panel predicts one trace again for every number of GPUs: node names and index, the edge
table (:class:`_Edges`), the grouping of nodes by op type, kernels and request, and the ops
frame's columns read from the facts are made once per facts object and kept on it
(:func:`_facts_cache`). Moved out of the former ``analyses/predict.py`` unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._model.graphfacts import GraphFacts

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


@dataclass
class _TraceColumns:
    """What a prediction reads from the traced run, per node of the facts (kept on the cache
    with the ops frame it was read from, see :func:`.result._from_trace`)."""

    ops: Any  # the trace's ops frame it was read from
    mode: str
    traced: pd.Series  # where the node ran (its first row's device), "" when it did not
    function: pd.Series | None  # its first row's function (TF2 code), None otherwise
    in_step: np.ndarray | None  # did the traced step run it (None: nothing ran)


class _FactsCache:
    """Per-node work that depends only on the graph facts, not on the devices, soft placement
    or the trace: node names and index, the edge table, the grouping of nodes by op type,
    kernels and request, and the ops frame's columns read from the facts. The panel predicts
    one trace again for every number of GPUs, so this is done once per facts object (kept on
    it, see :func:`_facts_cache`). Everything here is read, never written, by a prediction."""

    def __init__(self, facts: GraphFacts, key: tuple) -> None:
        self.key = key
        table = getattr(facts, "node_table", None)  # recorded by facts_from_graph
        if table is not None and _table_fits(table, facts):
            self.names: list[str] = table.names
            self.index: dict[str, int] = table.index
        else:
            self.names = list(facts.types)
            self.index = dict(zip(self.names, range(len(self.names)), strict=True))
        self.edges: _Edges | None = None
        self.classified: _Classified | None = None  # without node details or default devices
        self.edge_tensors: Any = None  # without node details (transfers._edge_tensors)
        self.tensor_codes: np.ndarray | None = None  # factorized edge_tensors
        self.columns: dict[str, Any] = {}  # the ops frame's columns that depend on facts only
        self.args: list[str] | None = None  # the _Arg nodes
        self.trace: _TraceColumns | None = None  # read from the last trace predicted

    def edge_table(self, facts: GraphFacts) -> _Edges:
        if self.edges is None:
            self.edges = _edges(facts, self.names, self.index)
        return self.edges


def _table_fits(table: Any, facts: GraphFacts) -> bool:
    """Whether ``table`` (a :class:`~tfplace_widget._model.graphfacts.NodeTable`) lists the
    nodes of ``facts.types``, in order. It is keyed by the ``types`` dict's identity, which a
    copy of the facts (pickled and loaded, as the benchmarks' traces are) does not keep: then
    the names are compared, about 20 ms at a million nodes against about 0.3 s to index them
    again."""
    if table.fits(facts):
        return True
    names = getattr(table, "names", None)
    return (
        isinstance(names, list)
        and isinstance(getattr(table, "index", None), dict)
        and len(names) == len(facts.types) == len(table.index)
        and names == list(facts.types)
    )


def _facts_key(facts: GraphFacts) -> tuple:
    """Which dicts the facts hold and their sizes: a cache made for other dicts (or before
    nodes were added) is not used. The facts are read from the graph once and not changed
    afterwards; a value replaced in place under an existing name is not seen."""
    key = []
    for field_name in (
        "types",
        "requested",
        "inputs",
        "kernels",
        "resource_inputs",
        "colocated_with",
        "scope",
    ):
        table = getattr(facts, field_name, None)
        key.append(id(table))
        key.append(len(table) if table is not None else -1)
    return tuple(key)


def _drop_facts_cache(facts: GraphFacts) -> None:
    """Forget what predictions of ``facts`` share: the next one starts afresh (benchmarks time
    the first prediction of a trace with it)."""
    with contextlib.suppress(AttributeError):
        del facts._predict_cache  # type: ignore[attr-defined]


def _facts_cache(facts: GraphFacts) -> _FactsCache:
    """The :class:`_FactsCache` of ``facts``, made (and kept on it) on first use."""
    key = _facts_key(facts)
    cache = getattr(facts, "_predict_cache", None)
    if not isinstance(cache, _FactsCache) or cache.key != key:
        cache = _FactsCache(facts, key)
        with contextlib.suppress(AttributeError):  # an object that takes no attributes
            facts._predict_cache = cache  # type: ignore[attr-defined]
    return cache


@dataclass(frozen=True)
class _Classified:
    """Nodes grouped by what their placement depends on besides their edges."""

    codes: list[int]  # per node: its group
    code_array: np.ndarray  # the same, int64
    keys: list[tuple]  # per group: (op type, request, id(kernels), has inputs, outputs, ...)
    kernels: list[Any]  # per group: its KernelFacts (None when unknown)


def _firsts(codes: np.ndarray) -> np.ndarray:
    """Where each code first occurs, for codes numbered in order of first appearance (as
    ``pd.factorize`` numbers them): a code above every one before it. No sort, unlike
    ``np.unique(..., return_index=True)``."""
    if not len(codes):
        return np.empty(0, dtype=np.int64)
    before = np.maximum.accumulate(codes)[:-1]
    return np.flatnonzero(np.r_[True, codes[1:] > before])


def _in_order(table: Mapping[str, Any], names: list[str], missing: Any) -> list:
    """``[table.get(name, missing) for name in names]``, at C speed when ``table`` has exactly
    these keys in this order (GraphFacts' dicts are filled node by node, in graph order)."""
    if len(table) == len(names) and list(table) == names:
        return list(table.values())
    return list(map(table.get, names, repeat(missing)))


@dataclass
class _Edges:
    """The data edges of ``facts.inputs``, flat: one entry per (consumer, input slot)."""

    consumers: list[str]  # facts.inputs' keys, in order
    lists: list[list[str]]  # their producer lists
    producers: np.ndarray  # producer name per edge (object)
    edge_consumer: np.ndarray  # position in ``consumers`` per edge
    slots: np.ndarray  # input slot per edge
    producer_node: np.ndarray  # node index of the producer (-1: not a node)
    consumer_node: np.ndarray  # node index of the consumer per edge (-1: not a node)


def _edges(facts: GraphFacts, names: list[str], index: Mapping[str, int] | None = None) -> _Edges:
    inputs = facts.inputs
    consumers = list(inputs)
    lists = list(inputs.values())
    lengths = np.fromiter(map(len, lists), np.int64, len(lists))
    flat = list(chain.from_iterable(lists))
    producers = np.array(flat, dtype=object)
    edge_consumer = np.repeat(np.arange(len(consumers)), lengths)
    slots = np.arange(len(producers)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    if index is None:
        index = {name: i for i, name in enumerate(names)}
    producer_node = np.fromiter(map(index.get, flat, repeat(-1)), np.int64, len(flat))
    if consumers == names:  # the usual case: facts.inputs lists every node, in graph order
        consumer_node = edge_consumer
    else:
        position = np.fromiter(map(index.get, consumers, repeat(-1)), np.int64, len(consumers))
        consumer_node = position[edge_consumer]
    return _Edges(consumers, lists, producers, edge_consumer, slots, producer_node, consumer_node)
