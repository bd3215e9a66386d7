"""The placer simulation: one graph, one device set, TensorFlow's placer's steps in order.

See the package docstring (:mod:`tfplace_widget._analyses.predict`) for the steps;
:class:`_Placer` sets up the nodes (grouped by op type, kernels and request), pins a function's
``_Arg``/``_Retval`` nodes, and places the nodes in graph order with the placer's heuristics;
the colocation groups are :class:`.colocation._ColocationGraph`'s. Moved out of the former
``analyses/predict.py`` unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain, repeat
from typing import Any

import numpy as np
import pandas as pd

from ..._model.devices import canonical_device, task_of
from ..._model.graphfacts import GraphFacts
from ..._model.kernel_registry import KernelRegistry
from .cache import _Classified, _Edges, _facts_cache, _firsts, _in_order
from .colocation import _ColocationGraph, _Member
from .devices import (
    _DEVICE_TYPE_PRIORITY,
    _EMPTY,
    Name,
    _merge,
    _override,
    _parse,
    _PlacementError,
    _type_key,
)
from .nodes import _IDENTITY_TYPES, _METADATA_TYPES, _SINK_ONLY, _Node, _Nodes, _Static


def _objects(values: list) -> np.ndarray:
    """An object array of ``values`` (each element kept as it is, tuples included)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _first_seen(values: np.ndarray) -> np.ndarray:
    """Each value's code (int64), numbered in order of first appearance (equal values, as a
    dict's keys, share one)."""
    return pd.factorize(values, use_na_sentinel=False)[0].astype(np.int64, copy=False)


class _Placer(_ColocationGraph):
    """The placer's state for one graph and one device set.

    Nodes that share a colocation group, are pinned, or need a heuristic (metadata ops,
    Identity, generators, an outer call's default device) go through the placer's steps one by
    one, in graph order. Every other node's device depends only on its op type, kernels and
    request: those are decided once per distinct combination (``codes``), which is what makes
    10k-node graphs cheap; the result is the same, since such a node reads no other's state.
    """

    def __init__(
        self,
        facts: GraphFacts,
        registry: KernelRegistry,
        devices: Sequence[str],
        soft: bool,
        details: Mapping[str, Any] | None,
        pinned: Mapping[str, str] | None = None,
        local_task: str = "",
        pinned_reasons: Mapping[str, str] | None = None,
    ) -> None:
        self.facts = facts
        self.registry = registry  # what TensorFlow registered, handed in (kernel_registry.py)
        self.soft = soft
        self.devices = [canonical_device(d) for d in devices]
        self.device_names = [_parse(d) for d in self.devices]
        # In a cluster the session's master owns some devices (its own task's) and sees the
        # others as remote: local ones sort first among equals (see _filter).
        self.local_task = local_task
        self.remote = [bool(local_task) and task_of(d) != local_task for d in self.devices]
        present = {n[3] for n in self.device_names}
        self.types_present = sorted(present, key=lambda t: (-_DEVICE_TYPE_PRIORITY.get(t, 0), t))
        self.details = details or {}
        self.errors: list[tuple[tuple, str]] = []  # (TF's order, message)
        self.failed: dict[int, str] = {}
        self._candidates: dict[tuple, list[int]] = {}
        self.cache = _facts_cache(facts)
        self.names = self.cache.names
        self.index = index = self.cache.index
        device_index = {d: k for k, d in enumerate(self.devices)}
        self.pinned = {
            index[name]: device_index[canonical_device(device)]
            for name, device in (pinned or {}).items()
            if name in index and canonical_device(device) in device_index
        }
        # Why each pinned argument is where it is (a function's _Arg: _analyses/resources.py).
        self.pinned_reasons = {
            index[name]: reason for name, reason in (pinned_reasons or {}).items() if name in index
        }
        self.result_sources: dict[int, int] = {}  # a pinned _Retval -> the node it follows
        # TF2: a tf.device around the eager call is the function's default device, not a
        # request: it goes first among a node's candidates (FilterSupportedDevices).
        self.default: dict[int, int] = {}
        for name, scope in getattr(facts, "scope", {}).items():
            device = getattr(scope, "device", "")
            if name in index and device and not getattr(scope, "call", ""):
                try:
                    matching = self._filter(self._matching(_parse(device)), self._all_types())
                except ValueError:
                    continue
                if matching:
                    self.default[index[name]] = matching[0]
        self._classify()
        self.nodes = _Nodes(self)
        self.parent: dict[int, int] = {}
        self.members: dict[int, _Member] = {}
        self.assigned: list[int] = []
        self.assigned_array = np.empty(0, dtype=np.int64)  # the same, once placed (_predict)
        self.how_codes: np.ndarray | None = None  # codes of _how_categories() (_predict)
        self.reasons: tuple[list[str], np.ndarray] | None = None  # texts, per node (_predict)
        self.how_chosen: dict[int, str] = {}
        self.colocation_dropped: dict[int, str] = {}
        self.demanded: dict[int, Name] = {}  # the group's merged request when a node was placed
        self._consumers: dict[int, np.ndarray] | None = None
        self._placed_array: np.ndarray | None = None
        self._edges: _Edges | None = None
        self._pin_results()

    # -- set-up -----------------------------------------------------------------------------
    def _classify(self) -> None:
        """``codes[i]``: index into ``statics`` of node ``i``'s op type, kernels and request."""
        if not self.details and not self.default:  # the same for every device set: cached
            classified = self.cache.classified
            if classified is None:
                classified = self.cache.classified = self._group()
        else:
            classified = self._group()
        self.classified = classified
        self.codes = classified.codes
        self.code_array = classified.code_array
        self.code_kernels: list[Any] = classified.kernels  # the KernelFacts of each code
        self.statics = [
            self._static(key, kernels)
            for key, kernels in zip(classified.keys, classified.kernels, strict=True)
        ]

    def _group(self) -> _Classified:
        facts, names, details = self.facts, self.names, self.details
        types = list(facts.types.values())  # names are facts.types' keys, in order
        requests = _in_order(facts.requested, names, "")
        if None in requests:
            requests = [r or "" for r in requests]
        for i in self.default:
            requests[i] = ""
        kernels = _in_order(getattr(facts, "kernels", {}), names, None)
        n = len(names)
        has_inputs = np.fromiter(map(len, _in_order(facts.inputs, names, ())), np.int64, n) > 0
        produces_resource = np.zeros(n, dtype=bool)
        for producers in facts.resource_inputs.values():
            for producer in producers:
                j = self.index.get(producer)
                if j is not None and not has_inputs[j]:
                    produces_resource[j] = True
        if details:
            found = list(map(details.get, names))
            outputs = [d.outputs if d is not None else None for d in found]
        else:
            outputs = None  # the same for every node
        # A key (type, request, kernels, has inputs, outputs, produces a resource) gets the
        # next code, numbered in order of first appearance: the key's parts factorized one by
        # one into a combined integer (a large graph has few distinct keys; a tuple and a dict
        # look-up per node cost about 0.4 s at a million nodes).
        ids = np.fromiter(map(id, kernels), np.uint64, n)
        parts = [_first_seen(_objects(types)), _first_seen(_objects(requests)), _first_seen(ids)]
        parts += [has_inputs.astype(np.int64), produces_resource.astype(np.int64)]
        if outputs is not None:
            parts.append(_first_seen(_objects(outputs)))
        code_array, bound = parts[0], int(parts[0].max(initial=0)) + 1
        for part in parts[1:]:  # one number per key, factorized again only near int64's end
            size = int(part.max(initial=0)) + 1
            if bound * size >= 2**62:
                code_array = _first_seen(code_array)
                bound = int(code_array.max(initial=0)) + 1
            code_array, bound = code_array * size + part, bound * size
        code_array = _first_seen(code_array)
        firsts = _firsts(code_array)
        keys = [
            (
                types[i],
                requests[i],
                id(kernels[i]),
                bool(has_inputs[i]),
                outputs[i] if outputs is not None else None,
                bool(produces_resource[i]),
            )
            for i in firsts.tolist()
        ]
        code_kernels = [kernels[i] for i in firsts.tolist()]
        return _Classified(code_array.tolist(), code_array, keys, code_kernels)

    def _static(self, key: tuple, kernels: Any) -> _Static:
        op_type, request, _, has_inputs, outputs, produces_resource = key
        count, ref_or_resource, dataset = self.registry.op_outputs(op_type)
        if outputs is not None:
            count = outputs
        try:
            requested = _parse(request) if request else _EMPTY
        except ValueError:
            requested = None
        return _Static(
            op_type=op_type,
            request=request,
            supported=tuple(self._supported(op_type, kernels)),
            requested=requested,
            generator=not has_inputs and count == 1 and not self.registry.is_ref_output(op_type),
            resource_generator=not has_inputs
            and count == 1
            and (ref_or_resource or produces_resource),
            dataset=dataset,
        )

    def _all_types(self) -> list:
        return [(t, 0) for t in self.types_present]

    def _supported(self, op_type: str, kernels: Any) -> list:
        if kernels is None or kernels.gpu_kernel == "NA":  # unknown op: every type, priority 0
            return self._all_types()
        priorities = self.registry.device_type_priorities(op_type)
        served = kernels.kernels.split()
        out = [
            (dtype, priorities.get(dtype, priorities.get("DEFAULT", 0)))
            for dtype in self.types_present
            if dtype in served
        ]
        return sorted(out, key=_type_key)  # stable: the present types' order breaks ties

    def _pin_results(self) -> None:
        """``PinArgsAndRets``: a function's ``_Retval`` takes the device its value asked for
        (following Identity ops with no device of their own) when that names one device."""
        retvals = [i for i, s in enumerate(self.statics) if s.op_type == "_Retval"]
        if not retvals:
            return
        nodes = self.nodes
        colocated = self.facts.colocated_with
        for i in np.flatnonzero(np.isin(self.code_array, retvals)).tolist():
            node = nodes[i]
            if i in self.pinned or not node.inputs:
                continue
            source = self.result_source(i)
            if source < 0 or colocated.get(nodes[source].name):
                continue  # with a colocation TF colocates it with that group: the placer's
            if source in self.pinned:
                self.pinned[i] = self.pinned[source]
                self.result_sources[i] = source
            elif nodes[source].request:
                try:
                    matching = self._matching(_parse(nodes[source].request))
                except ValueError:
                    continue
                if len(matching) == 1:
                    self.pinned[i] = matching[0]
                    self.result_sources[i] = source

    def result_source(self, i: int) -> int:
        """The node whose device a ``_Retval`` takes: its input, through Identity ops with no
        device, pin or colocation of their own (-1: not a node)."""
        nodes, colocated = self.nodes, self.facts.colocated_with
        source = nodes[i].inputs[0] if nodes[i].inputs else -1
        while (
            source >= 0
            and nodes[source].op_type in _IDENTITY_TYPES
            and not nodes[source].request
            and source not in self.pinned
            and not colocated.get(nodes[source].name)
            and nodes[source].inputs
        ):
            source = nodes[source].inputs[0]
        return source

    def consumers_of(self, i: int) -> np.ndarray:
        """Out-edges of ``i`` (data and control); ``[-1]`` (the ``_SINK``) when none."""
        if self._consumers is None:  # for the nodes whose consumers matter, in one pass
            statics = self.statics
            wanted_code = np.zeros(len(statics), dtype=bool)
            for c, st in enumerate(statics):
                wanted_code[c] = st.generator or st.op_type in _IDENTITY_TYPES
            wanted = np.flatnonzero(wanted_code[self.code_array])
            consumers: dict[int, np.ndarray] = {}
            if len(wanted):
                flag = np.zeros(len(self.names) + 1, dtype=bool)
                flag[wanted] = True
                producer, consumer = self._data_edges_from(wanted, flag)
                for name, detail in self.details.items():  # control edges
                    for source in detail.controls:
                        j = self.index.get(source, -1)
                        if j >= 0 and flag[j]:
                            producer.append(np.array([j]))
                            consumer.append(np.array([self.index.get(name, -1)]))
                producer_all = np.concatenate(producer)
                consumer_all = np.concatenate(consumer)
                if len(producer_all):
                    order = np.argsort(producer_all, kind="stable")
                    producer_all, consumer_all = producer_all[order], consumer_all[order]
                    heads = np.flatnonzero(np.r_[True, producer_all[1:] != producer_all[:-1]])
                    for head, part in zip(
                        producer_all[heads].tolist(),
                        np.split(consumer_all, heads[1:]),
                        strict=True,
                    ):
                        consumers[head] = part
            self._consumers = consumers
        found = self._consumers.get(i)
        return found if found is not None else _SINK_ONLY

    def _data_edges_from(
        self, wanted: np.ndarray, flag: np.ndarray
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The data edges out of the ``wanted`` nodes (``flag``: the same as a mask), in edge
        order: ``[producers]``, ``[consumers]`` (node indices). From the edge table when it is
        made (the predicted trace's copies need it); otherwise each edge's producer is looked
        up among the wanted nodes' names only, a small dict when they are few (at a million
        nodes about 0.2 s, against about 0.9 s for the table's look-ups in every name)."""
        if self._edges is None and self.cache.edges is None:
            names = self.names
            wanted_index = {names[i]: i for i in wanted.tolist()}  # names are distinct
            inputs = self.facts.inputs
            lists = list(inputs.values())
            flat = list(chain.from_iterable(lists))
            producer_node = np.fromiter(
                map(wanted_index.get, flat, repeat(-1)), np.int64, len(flat)
            )
            hit = np.flatnonzero(producer_node >= 0)
            ends = np.cumsum(np.fromiter(map(len, lists), np.int64, len(lists)))
            position = np.searchsorted(ends, hit, side="right")  # the consumer's, in inputs
            consumers = list(inputs)
            if consumers == names:  # the usual case: facts.inputs lists every node, in order
                consumer_node = position
            else:
                picked = [consumers[k] for k in position.tolist()]
                consumer_node = np.fromiter(
                    map(self.index.get, picked, repeat(-1)), np.int64, len(picked)
                )
            return [producer_node[hit]], [consumer_node]
        edges = self.edges()
        hit = np.flatnonzero(flag[edges.producer_node])
        return [edges.producer_node[hit]], [edges.consumer_node[hit]]

    def host_args(self) -> tuple[np.ndarray, np.ndarray]:
        """Per node (and a last False): does its GPU kernel keep an output / an input in host
        memory (from the kernel registry, per code)."""
        outs = [bool(k is not None and k.gpu_host_outputs) for k in self.code_kernels]
        ins = [bool(k is not None and k.gpu_host_inputs) for k in self.code_kernels]
        codes = np.append(self.code_array, len(outs))
        return np.array([*outs, False])[codes], np.array([*ins, False])[codes]

    def edges(self) -> _Edges:
        """The graph's data edges as arrays (made once; the predicted copies reuse them)."""
        if self._edges is None:
            self._edges = self.cache.edge_table(self.facts)
        return self._edges

    def assign(self, i: int, device: int) -> None:
        """``AssignAndLog``: place ``i`` and pin its group to that device."""
        self.assigned[i] = device
        root = self.find(i)
        if root == i and i not in self.members:
            return  # a group of one: nobody else reads its state
        member = self.member(root)
        full = self.device_names[device]
        if member.assigned == full:
            return
        member.assigned = _merge(member.assigned, full, False)
        member.resource = _override(member.resource, full)
        member.requested = _override(member.requested, full)
        member.possible = None
        if member.assigned_by < 0:
            member.assigned_by = i

    def _shared_first_choice(self, code: int) -> int | str:
        """A lone node's device (``GetDevicesForNode``'s first), or TF's error, per code."""
        cached = self._shared.get(code)
        if cached is None:
            i = self.representative[code]
            static = self.statics[code]
            if not static.supported:
                cached = self._no_kernel_message(i)
            elif static.request and static.requested is None:
                cached = f"Malformed device specification '{static.request}'"
            else:
                member = _Member(supported=list(static.supported))
                if static.request:
                    member.requested = static.requested
                    if static.resource_generator:
                        member.resource = static.requested
                try:
                    cached = self._compute_candidates(i, member)[0]
                except _PlacementError as exc:
                    cached = str(exc)
            self._shared[code] = cached
        return cached

    def run(self) -> None:
        self.initialize()
        n = len(self.names)
        statics, codes = self.statics, self.codes
        # Nodes that read or write state besides their own: the placer's loop, one by one.
        heuristic = {
            c
            for c, s in enumerate(statics)
            if s.generator or s.op_type in _METADATA_TYPES or s.op_type in _IDENTITY_TYPES
        }
        special = set(self.parent) | set(self.members) | set(self.pinned) | set(self.default)
        code_array = self.code_array
        if heuristic:
            wanted = np.zeros(len(statics), dtype=bool)
            wanted[list(heuristic)] = True
            special.update(np.flatnonzero(wanted[code_array]).tolist())
        self.special = special
        lone = np.ones(n, dtype=bool)
        lone[list(special)] = False
        # One node per code stands for all lone nodes of that code (first in graph order).
        lone_nodes = np.flatnonzero(lone)
        first_node = np.full(len(statics), n, dtype=np.int64)
        np.minimum.at(first_node, code_array[lone_nodes], lone_nodes)  # few codes: no sort
        present = np.flatnonzero(first_node < n)
        self.representative = dict(zip(present.tolist(), first_node[present].tolist(), strict=True))
        self._shared: dict[int, int | str] = {}
        choice_of = np.full(len(statics) + 1, -1, dtype=np.int64)
        refused = []
        for code in self.representative:
            choice = self._shared_first_choice(code)
            if isinstance(choice, str):
                refused.append(code)
            else:
                choice_of[code] = choice
        placed = choice_of[code_array]
        placed[~lone] = -1
        self.assigned = placed.tolist()
        if refused:  # every lone node of a refused code: TF names the first it meets
            bad = np.zeros(len(statics) + 1, dtype=bool)
            bad[refused] = True
            for i in np.flatnonzero(bad[code_array] & lone).tolist():
                choice = self._shared[codes[i]]
                prefix = (
                    ""
                    if choice.startswith("No OpKernel")
                    else f"Cannot assign a device for operation {self.names[i]}: "
                )
                self._fail(i, prefix + choice, (2, i))
        nodes = self.nodes
        second = []
        for i in self._in_graph_order(special):
            if i in self.pinned:
                self.assign(i, self.pinned[i])
                self.how_chosen[i] = "pinned"
                continue
            node = nodes[i]
            if node.generator:
                second.append(i)
                continue
            self._place(i, node, first_pass=True)
        for i in second:
            self._place(i, nodes[i], first_pass=False)
        self.errors.sort(key=lambda entry: entry[0])

    def _in_graph_order(self, special: set[int]) -> list[int]:
        """``special`` in the order TensorFlow's graph constructor numbers nodes: topological,
        the earliest node of the GraphDef first among the ready ones. Only edges between these
        nodes matter (every other node is placed on its own). A graph built in Python is in
        that order already; function graphs read back from their partitions may not be."""
        ordered = sorted(special)
        nodes = self.nodes
        if all(j < i for i in ordered for j in nodes[i].inputs if j in special):
            return ordered
        import heapq

        pending = {i: {j for j in nodes[i].inputs if j in special and j != i} for i in ordered}
        waiting: dict[int, list[int]] = {}
        for i, sources in pending.items():
            for j in sources:
                waiting.setdefault(j, []).append(i)
        ready = [i for i in ordered if not pending[i]]
        heapq.heapify(ready)
        out = []
        while ready:
            i = heapq.heappop(ready)
            out.append(i)
            for k in waiting.get(i, ()):
                pending[k].discard(i)
                if not pending[k]:
                    heapq.heappush(ready, k)
        if len(out) < len(ordered):  # a cycle (loop back edges): the rest in GraphDef order
            done = set(out)
            out.extend(i for i in ordered if i not in done)
        return out

    def _place(self, i: int, node: _Node, *, first_pass: bool) -> None:
        if i in self.failed and not node.kernel_types:
            return
        try:
            devices = self.candidates(i)
        except _PlacementError as exc:
            order = (2, i) if first_pass else (3, i)
            self._fail(i, f"Cannot assign a device for operation {node.name}: {exc}", order)
            return
        chosen = -1
        assigned = self.assigned
        if first_pass:
            if (node.op_type in _METADATA_TYPES and node.inputs) or self._lone_identity(node):
                source = node.inputs[0]
                if source >= 0 and assigned[source] in devices:
                    chosen = assigned[source]
                    self.how_chosen[i] = "input"
        elif len(node.consumers):
            if self._placed_array is None:  # the first pass is done: its devices, once
                self._placed_array = np.append(np.asarray(assigned, dtype=np.int64), -1)
            on = self._placed_array[node.consumers]  # the _SINK (-1) reads the -1 appended
            head = int(on[0])
            if (on == head).all() and head >= 0 and head in devices:
                chosen = head
                self.how_chosen[i] = "consumers"
        if chosen < 0:
            chosen = devices[0]
        self.demanded[i] = self.member(self.find(i)).requested
        self.assign(i, chosen)
        if self._placed_array is not None:
            self._placed_array[i] = chosen

    def _lone_identity(self, node: _Node) -> bool:
        """``MatchIdentityOperation``: an Identity with no request, one in-edge and one out-edge,
        whose input and output ask for the same device (the same string)."""
        if node.op_type not in _IDENTITY_TYPES or node.request:
            return False
        if not self.registry.identity_follows_its_input():
            return False
        if len(node.inputs) + len(node.controls) != 1 or len(node.consumers) != 1:
            return False
        source, sink = node.inputs[0], int(node.consumers[0])
        nodes = self.nodes
        source_request = nodes[source].request if source >= 0 else ""
        sink_request = nodes[sink].request if sink >= 0 else ""  # _SINK asks for nothing
        return source_request == sink_request
