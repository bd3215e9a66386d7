"""A trace's first prediction (nothing kept on its graph facts yet): what it builds, and that
the shortcuts it takes at a million nodes give the answers of the full work (issue 35)."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pandas as pd
from test_predict import CPU, GPU0, _graph, control_and_data, known_answers

from tfplace_widget._analyses.predict import predict_devices
from tfplace_widget._analyses.predict.cache import _drop_facts_cache, _facts_cache
from tfplace_widget._analyses.predict.placer import _Placer
from tfplace_widget._analyses.predict.transfers import _copies, _edge_tensors
from tfplace_widget._model.graphfacts import GraphFacts
from tfplace_widget._tfadapter.graphfacts import facts_from_graph, node_details
from tfplace_widget._tfadapter.registry import REGISTRY

DEVICES = [*CPU[:2], GPU0]


def both_graphs() -> Any:
    return [*known_answers(), *control_and_data()]


def _facts_and_details() -> tuple[GraphFacts, Any]:
    graph = _graph(both_graphs)
    return facts_from_graph(graph), node_details(graph.as_graph_def())


def _reordered(facts: GraphFacts) -> GraphFacts:
    """``facts`` with ``inputs`` listed in reverse order (not the nodes' order)."""
    copy = pickle.loads(pickle.dumps(facts))
    copy.inputs = dict(reversed(list(copy.inputs.items())))
    copy.registry = facts.registry
    return copy


def _predicted(facts: GraphFacts, details: Any, table_first: bool) -> pd.DataFrame:
    _drop_facts_cache(facts)
    if table_first:
        _facts_cache(facts).edge_table(facts)
    return predict_devices(facts, DEVICES, soft_placement=True, details=details)


def test_predict_devices_finds_the_consumers_it_needs_without_the_edge_table() -> None:
    facts, details = _facts_and_details()
    for case in (facts, _reordered(facts)):
        for with_details in (None, details):
            alone = _predicted(case, with_details, table_first=False)
            assert _facts_cache(case).edges is None  # the table of every edge was not made
            with_table = _predicted(case, with_details, table_first=True)
            pd.testing.assert_frame_equal(alone, with_table)
            assert alone.attrs == with_table.attrs
    placed = dict(zip(alone["op"], alone["predicted_device"], strict=True))
    assert placed["after"] == placed["Z"]  # a generator joins its one consumer


def _reference_codes(placer: _Placer) -> tuple[list[int], list[tuple]]:
    """The grouping as a dict of tuples numbers it (the former per-node code)."""
    facts, names = placer.facts, placer.names
    kernels = [facts.kernels.get(n) for n in names]
    has_inputs = [bool(facts.inputs.get(n, ())) for n in names]
    produces = [False] * len(names)
    for producers in facts.resource_inputs.values():
        for producer in producers:
            j = placer.index.get(producer)
            if j is not None and not has_inputs[j]:
                produces[j] = True
    requests = [facts.requested.get(n) or "" for n in names]
    for i in placer.default:
        requests[i] = ""
    details = placer.details
    outputs = [details[n].outputs if n in details else None for n in names]
    code_of: dict[tuple, int] = {}
    keys = zip(
        facts.types.values(), requests, map(id, kernels), has_inputs, outputs, produces, strict=True
    )
    codes = [code_of.setdefault(key, len(code_of)) for key in keys]
    return codes, list(code_of)


def test_nodes_are_grouped_as_tuples_of_their_facts_would_be() -> None:
    facts, details = _facts_and_details()
    for with_details in (None, details):
        _drop_facts_cache(facts)
        placer = _Placer(facts, REGISTRY, DEVICES, True, with_details)
        codes, keys = _reference_codes(placer)
        grouped = placer._group()
        assert grouped.codes == codes and grouped.code_array.tolist() == codes
        assert grouped.keys == keys
        assert [id(k) for k in grouped.kernels] == [key[2] for key in keys]
        assert len(keys) < len(codes)  # some nodes share a group


def test_a_pickled_trace_s_facts_reuse_their_node_table() -> None:
    facts, _ = _facts_and_details()
    copy = pickle.loads(pickle.dumps(facts))
    assert not copy.node_table.fits(copy)  # keyed by the types dict's identity
    cache = _facts_cache(copy)
    assert cache.index is copy.node_table.index and cache.names is copy.node_table.names
    copy.types = {**copy.types, "extra": "NoOp"}  # another node: the table no longer lists them
    assert "extra" in _facts_cache(copy).index


def test_the_copies_name_each_edge_s_tensor_as_the_whole_array_would() -> None:
    facts, _ = _facts_and_details()
    edges = _facts_cache(facts).edge_table(facts)
    tensors = _edge_tensors(edges.producers, edges.consumers, edges.lists, None)
    whole = edges.producers + ":0"
    assert len(tensors) == len(whole)
    rows = np.arange(0, len(whole), 2)
    assert tensors[rows].tolist() == whole[rows].tolist() and tensors[3] == whole[3]
    names = list(facts.types)
    placed = [DEVICES[i % 3] for i in range(len(names))]
    copies = _copies(facts, names, placed, None)
    assert len(copies) and set(copies["tensor"]) <= set(whole)
