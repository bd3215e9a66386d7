"""Predicted placement: where TensorFlow's placer would put every op on a machine with GPUs.

The placer's decision is a pure function of the graph as built (requests, ``_class`` colocation,
resource/ref edges, the kernels registered for each node def's attrs) and of the device set, so
it can be replayed here for a device set this machine does not have. This module follows
core/common_runtime/placer.cc and colocation_graph.cc (TF 2.21) step by step:

1. every node is a member with its supported device types (kernels for its attrs, with their
   priorities) and its (partial) requested device; a no-input op whose single output is a
   resource or ref (``VarHandleOp``, ``VariableV2``) holds its request as a *resource device*;
2. resource and ref edges, and variant edges between dataset ops, join producer and consumer
   (the consumer's request gives way to the producer's; incompatible resource devices fail);
3. ``_class: loc:@X`` groups are joined; an impossible join is dropped under soft placement and
   fails without it;
4. nodes are placed in graph order: the group's candidates are the devices matching its merged
   request with a supported type (soft placement drops the unmet type and index), sorted by
   kernel priority, then device type priority (GPU before CPU), then the session's own task
   before the other tasks of a cluster, then name; the first is taken,
   except that metadata ops (Shape, Size, Rank, ShapeN) and a lone Identity take their input's
   device when it is a candidate (the Identity only where this TensorFlow's placer does so: not
   in 2.16, see :func:`identity_follows_its_input`); placing a node pins its whole group there;
5. generators (no inputs, one non-ref output) come last and join their consumers when these
   all share one candidate device;
6. in a function graph, an ``_Arg`` is already where the caller's value is (a resource's: where
   the resource would be made with the GPUs, see :mod:`.resources`), a ``_Retval`` takes the
   device its value asked for (``PinArgsAndRets``), and a ``tf.device`` around the call is the
   function's default device (tried first), not a request.

Nodes outside any group and outside the heuristics depend only on their op type, kernels and
request, so they are decided once per distinct combination; the others go through the steps
above one by one (see :class:`_Placer`).

:func:`predict_devices` is the pure core (no session, no trace); :func:`predict_placement`
wraps it into a :class:`~tfplace_widget.model.trace.PlacementTrace` marked ``predicted``. With
``gpus=0`` on this machine the prediction must equal what TensorFlow did (tests/test_predict.py).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..model.capture import capture_native_output, import_tensorflow
from ..model.devices import (
    DeviceSpec,
    canonical_device,
    crosses_tasks,
    device_sort_key,
    parse_device,
    short_device,
    task_of,
)
from ..model.graphfacts import RESOURCE_COLOCATION_EXEMPT, GraphFacts
from ..model.kernels import device_type_priorities
from ..model.reasons import colocated_reason, link_words
from .resources import Pinned, pinned_arguments

if TYPE_CHECKING:  # pragma: no cover
    from ..model.trace import PlacementTrace

# DeviceFactory priorities (GPU 210, CPU 70): GPU before CPU; other types after them.
_DEVICE_TYPE_PRIORITY = {"GPU": 210, "CPU": 70, "TPU": 60}
_METADATA_TYPES = frozenset({"Shape", "ShapeN", "Size", "Rank"})
_IDENTITY_TYPES = frozenset({"Identity", "RefIdentity"})
_HOST_RUNTIME_TYPES = frozenset({"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval"})
PREDICTED_COLUMNS = ["op", "predicted_device", "how", "reason"]
_SINK_ONLY = np.array([-1], dtype=np.int64)  # a node nothing consumes feeds the _SINK node
HOST = "/job:localhost/replica:0/task:0/device:CPU:0"

# A device name as TensorFlow's DeviceNameUtils::ParsedName: (job, replica, task, type, id),
# None where unset.
Name = tuple


class _PlacementError(Exception):
    """A constraint TensorFlow refuses (the message is TensorFlow's, shortened)."""


# ---------------------------------------------------------------------------------------------
# DeviceNameUtils, on 5-tuples
# ---------------------------------------------------------------------------------------------
_EMPTY: Name = (None, None, None, None, None)
_FIELDS = ("job", "replica", "task", "type", "id")


@lru_cache(maxsize=4096)
def _parse(request: str) -> Name:
    spec = parse_device(request)
    return (spec.job, spec.replica, spec.task, spec.type, spec.index)


def _name_str(name: Name) -> str:
    return DeviceSpec(*name).to_string()


def _merge(target: Name, other: Name, soft: bool) -> Name:
    """``DeviceNameUtils::MergeDevNames``: raise on a conflict soft placement cannot drop."""
    out = list(target)
    for i in range(3):  # job, replica, task: conflicts are errors even under soft placement
        if other[i] is not None:
            if out[i] is not None and out[i] != other[i]:
                raise _PlacementError(
                    f"Cannot merge devices with incompatible {_FIELDS[i]}s: "
                    f"'{_name_str(target)}' and '{_name_str(other)}'"
                )
            out[i] = other[i]
    if other[3] is not None:
        if out[3] is not None and out[3] != other[3]:
            if not soft:
                raise _PlacementError(
                    f"Cannot merge devices with incompatible types: "
                    f"'{_name_str(target)}' and '{_name_str(other)}'"
                )
            out[3] = out[4] = None
            return tuple(out)
        out[3] = other[3]
    if other[4] is not None:
        if out[4] is not None and out[4] != other[4]:
            if not soft:
                raise _PlacementError(
                    f"Cannot merge devices with incompatible ids: "
                    f"'{_name_str(target)}' and '{_name_str(other)}'"
                )
            out[4] = None
            return tuple(out)
        out[4] = other[4]
    return tuple(out)


def _ensure(target: Name, other: Name) -> Name:
    """``EnsureSpecification``: fill the fields ``target`` leaves open from ``other``."""
    if other == _EMPTY:
        return target
    return tuple(o if t is None else t for t, o in zip(target, other, strict=True))


def _compatible(a: Name, b: Name) -> bool:
    return all(x is None or y is None or x == y for x, y in zip(a, b, strict=True))


def _override(target: Name, other: Name) -> Name:
    return tuple(t if o is None else o for t, o in zip(target, other, strict=True))


def _matches(spec: Name, device: Name) -> bool:
    return all(s is None or s == d for s, d in zip(spec, device, strict=True))


def _type_key(entry: tuple[str, int]) -> tuple:
    dtype, priority = entry
    return (-priority, -_DEVICE_TYPE_PRIORITY.get(dtype, 0), dtype)


def _merge_supported(target: list, other: list) -> list:
    """``Member::MergeSupportedDevices``: the intersection, with whose priorities."""
    other_of = dict(other)
    mine = sorted([(t, p) for t, p in target if t in other_of], key=_type_key)
    theirs = sorted([(t, other_of[t]) for t, _ in target if t in other_of], key=_type_key)
    mine_prioritized = any(p for _, p in mine)
    theirs_prioritized = any(p for _, p in theirs)
    if mine_prioritized and theirs_prioritized:
        if [t for t, _ in mine] == [t for t, _ in theirs]:
            return mine
        return sorted([(t, 0) for t, _ in mine], key=_type_key)
    return theirs if theirs_prioritized else mine


# ---------------------------------------------------------------------------------------------
# Registry facts by op type (cached)
# ---------------------------------------------------------------------------------------------
@lru_cache(maxsize=4096)
def _op_outputs(op_type: str) -> tuple[int | None, bool, bool]:
    """``(fixed output count or None, single output is ref/resource, is a dataset op)``."""
    try:
        from tensorflow.python.framework import op_def_registry

        op_def = op_def_registry.get(op_type)
    except Exception:
        op_def = None
    if op_def is None:
        return None, False, False
    args = list(op_def.output_arg)
    count: int | None = len(args)
    if any(a.number_attr or a.type_list_attr for a in args):
        count = None
    resource = len(args) == 1 and (args[0].is_ref or args[0].type == 20)  # DT_RESOURCE
    dataset = len(args) == 1 and args[0].type == 21 and _is_dataset_name(op_type)  # DT_VARIANT
    return count, resource, dataset


def _is_dataset_name(op_type: str) -> bool:
    """``DatasetOpKernel::IsDatasetOp``'s name test."""
    name = op_type
    if name.startswith("__wrapped__"):
        name = name[len("__wrapped__") :].split("_")[0] or name
    if name == "DatasetFromGraph" or name.endswith("Dataset"):
        return True
    stripped = name.rstrip("0123456789")
    return stripped != name and stripped.endswith("DatasetV")


# ---------------------------------------------------------------------------------------------
# What every prediction of one GraphFacts shares (cached on the facts)
# ---------------------------------------------------------------------------------------------
class _FactsCache:
    """Per-node work that depends only on the graph facts, not on the devices, soft placement
    or the trace: node names and index, the edge table, the grouping of nodes by op type,
    kernels and request, and the ops frame's columns read from the facts. The panel predicts
    one trace again for every number of GPUs, so this is done once per facts object (kept on
    it, see :func:`_facts_cache`). Everything here is read, never written, by a prediction."""

    def __init__(self, facts: GraphFacts, key: tuple) -> None:
        self.key = key
        table = getattr(facts, "node_table", None)  # recorded by facts_from_graph
        if table is not None and table.fits(facts):
            self.names: list[str] = table.names
            self.index: dict[str, int] = table.index
        else:
            self.names = list(facts.types)
            self.index = dict(zip(self.names, range(len(self.names)), strict=True))
        self.edges: _Edges | None = None
        self.classified: _Classified | None = None  # without node details or default devices
        self.edge_tensors: np.ndarray | None = None  # without node details
        self.tensor_codes: np.ndarray | None = None  # factorized edge_tensors
        self.columns: dict[str, Any] = {}  # the ops frame's columns that depend on facts only
        self.args: list[str] | None = None  # the _Arg nodes
        self.trace: _TraceColumns | None = None  # read from the last trace predicted

    def edge_table(self, facts: GraphFacts) -> _Edges:
        if self.edges is None:
            self.edges = _edges(facts, self.names, self.index)
        return self.edges


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


# ---------------------------------------------------------------------------------------------
# The simulation
# ---------------------------------------------------------------------------------------------
@dataclass
class _Member:
    """One colocation group root's state (``Member`` in colocation_graph.cc)."""

    supported: list  # [(device type, priority)], sorted
    requested: Name = _EMPTY
    resource: Name = _EMPTY
    assigned: Name = _EMPTY
    rank: int = 0
    possible: list | None = None
    assigned_by: int = -1  # the node whose placement pinned the group


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

    def __init__(self, placer: _Placer, i: int) -> None:
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

    def __init__(self, placer: _Placer) -> None:
        self.placer = placer
        self.made: dict[int, _Node] = {}

    def __getitem__(self, i: int) -> _Node:
        node = self.made.get(i)
        if node is None:
            node = self.made[i] = _Node(self.placer, i)
        return node

    def __len__(self) -> int:
        return len(self.placer.names)


class _Placer:
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
        devices: Sequence[str],
        soft: bool,
        details: Mapping[str, Any] | None,
        pinned: Mapping[str, str] | None = None,
        local_task: str = "",
        pinned_reasons: Mapping[str, str] | None = None,
    ) -> None:
        self.facts = facts
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
        # Why each pinned argument is where it is (a function's _Arg: analyses/resources.py).
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
        has_inputs = list(map(bool, _in_order(facts.inputs, names, ())))
        produces_resource = [False] * len(names)
        for producers in facts.resource_inputs.values():
            for producer in producers:
                j = self.index.get(producer)
                if j is not None and not has_inputs[j]:
                    produces_resource[j] = True
        if details:
            found = list(map(details.get, names))
            outputs = [d.outputs if d is not None else None for d in found]
        else:
            outputs = [None] * len(names)
        keys = zip(
            types, requests, map(id, kernels), has_inputs, outputs, produces_resource, strict=True
        )
        # A new key gets the next code (numbered in order of first appearance).
        code_of: dict[tuple, int] = {}
        codes = [code_of.setdefault(key, len(code_of)) for key in keys]
        code_array = np.asarray(codes, dtype=np.int64)
        firsts = np.unique(code_array, return_index=True)[1].tolist() if codes else []
        code_kernels = [kernels[i] for i in firsts]
        return _Classified(codes, code_array, list(code_of), code_kernels)

    def _static(self, key: tuple, kernels: Any) -> _Static:
        op_type, request, _, has_inputs, outputs, produces_resource = key
        count, ref_or_resource, dataset = _op_outputs(op_type)
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
            generator=not has_inputs and count == 1 and not _is_ref_output(op_type),
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
        priorities = device_type_priorities(op_type)
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
                edges = self.edges()
                hit = np.flatnonzero(flag[edges.producer_node])
                producer = [edges.producer_node[hit]]
                consumer = [edges.consumer_node[hit]]
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

    def member(self, i: int) -> _Member:
        """Node ``i``'s own member (``InitializeMember``), made on first use."""
        member = self.members.get(i)
        if member is not None:
            return member
        static = self.statics[self.codes[i]]
        member = self.members[i] = _Member(supported=list(static.supported))
        if i in self.pinned:  # already assigned (a function's _Arg): requested = assigned
            member.assigned = member.requested = self.device_names[self.pinned[i]]
            return member
        if not static.supported:
            self._fail(i, self._no_kernel_message(i), (0, i))
        if static.request:
            if static.requested is None:
                self._fail(i, f"Malformed device specification '{static.request}'", (0, i))
            elif static.resource_generator:
                member.resource = member.requested = static.requested
            else:
                member.requested = static.requested
        return member

    def _no_kernel_message(self, i: int) -> str:
        static = self.statics[self.codes[i]]
        return (
            f"No OpKernel was registered to support Op '{static.op_type}' used by "
            f"{self.names[i]} on these devices ({self._types_text()})"
        )

    def _types_text(self) -> str:
        return ", ".join(self.types_present)

    def _fail(self, i: int, message: str, order: tuple) -> None:
        self.failed.setdefault(i, message)
        self.errors.append((order, message))

    # -- union-find ---------------------------------------------------------------------------
    def find(self, i: int) -> int:
        parent = self.parent
        root = i
        while True:
            up = parent.get(root, root)
            if up == root:
                break
            root = up
        while i != root:
            up = parent.get(i, i)
            parent[i] = root
            i = up
        return root

    def colocate(self, x: int, y: int) -> None:
        """``ColocationGraph::ColocateNodes``; raises ``_PlacementError`` (nothing joined)."""
        xr, yr = self.find(x), self.find(y)
        if xr == yr:
            return
        mx, my = self.member(xr), self.member(yr)
        new, old = (yr, xr) if mx.rank < my.rank else (xr, yr)
        a, b = self.member(new), self.member(old)
        assigned = _merge(a.assigned, b.assigned, False)
        resource = _merge(a.resource, b.resource, False)
        requested = _merge(a.requested, b.requested, self.soft)
        requested = _ensure(_ensure(requested, assigned), resource)
        a.assigned, a.resource, a.requested = assigned, resource, requested
        supported = _merge_supported(a.supported, b.supported)
        if not supported:
            raise _PlacementError(
                f"Cannot colocate nodes {self.names[x]} and {self.names[y]} because no device "
                "type supports both of those nodes and the other nodes colocated with them"
            )
        a.supported = supported
        self.parent[old] = new
        self.parent.setdefault(new, new)
        if a.rank == b.rank:
            a.rank += 1

    def colocate_resource_edge(self, src: int, dst: int) -> None:
        sr, dr = self.find(src), self.find(dst)
        s, d = self.member(sr), self.member(dr)
        if not _compatible(s.assigned, d.assigned) or not _compatible(s.resource, d.resource):
            raise _PlacementError(
                "Cannot place the graph because a reference or resource edge connects "
                f"colocation groups with incompatible resource devices: "
                f"{_name_str(s.resource)} vs {_name_str(d.resource)}. The edge src node is "
                f"{self.names[src]} , and the dst node is {self.names[dst]}"
            )
        if not _compatible(s.requested, d.requested):
            d.requested = _ensure(_ensure(s.requested, d.assigned), d.resource)
        self.colocate(src, dst)

    # -- Initialize ---------------------------------------------------------------------------
    def initialize(self) -> None:
        """Resource/ref and dataset edges, then ``_class`` groups (colocation_graph.cc)."""
        facts, index, nodes = self.facts, self.index, self.nodes
        for i in self.pinned:
            self.member(i)
        statics, codes = self.statics, self.codes
        datasets = {c for c, s in enumerate(statics) if s.dataset}
        consumers = {index[n] for n in facts.resource_inputs if n in index}
        if datasets:
            consumers.update(i for i, c in enumerate(codes) if c in datasets)
        for i in sorted(consumers):
            node = nodes[i]
            pinned = facts.resource_inputs.get(node.name)
            if pinned and node.op_type not in RESOURCE_COLOCATION_EXEMPT:
                for producer in pinned:
                    j = index.get(producer, -1)
                    if j >= 0:
                        self._resource_edge(j, i)
            if node.dataset:
                for j in node.inputs:
                    if j >= 0 and nodes[j].dataset:
                        self._resource_edge(j, i)
        colocated = facts.colocated_with
        named = {index[n] for n in colocated if n in index}
        named.update(index[t] for targets in colocated.values() for t in targets if t in index)
        roots: dict[str, int] = {}
        for i in sorted(named):  # _class loc:@X groups, then the node's own name
            name = self.names[i]
            for group in (*colocated.get(name, ()), name):
                root = roots.setdefault(group, i)
                if root == i:
                    continue
                try:
                    self.colocate(i, root)
                except _PlacementError as exc:
                    if not self.soft:
                        self._fail(i, f"Cannot colocate {name} with {group}: {exc}", (1, i))
                    else:
                        self.colocation_dropped.setdefault(i, group)

    def _resource_edge(self, src: int, dst: int) -> None:
        try:
            self.colocate_resource_edge(src, dst)
        except _PlacementError as exc:
            self._fail(
                dst,
                "Nodes were connected by a reference connection (requiring them to be on the "
                f"same device), but the two nodes were assigned two different devices: {exc}",
                (0, dst),
            )

    # -- placement ----------------------------------------------------------------------------
    def candidates(self, i: int) -> list[int]:
        """``GetDevicesForNode``: device indices for ``i``'s group, best first."""
        root = self.find(i)
        member = self.member(root)
        if member.possible:
            return member.possible
        default = self.default.get(i, -1)
        key = (
            member.requested,
            member.resource,
            member.assigned,
            tuple(member.supported),
            default,
        )
        found = self._candidates.get(key)
        if found is None:
            found = self._compute_candidates(i, member)
            if default in found:
                found = [default, *(k for k in found if k != default)]
            self._candidates[key] = found
        member.possible = found
        return found

    def _compute_candidates(self, i: int, member: _Member) -> list[int]:
        if member.requested != _EMPTY:
            found = self._filter(self._matching(member.requested), member.supported)
            if not found and self.soft:
                preferred = _soft_name(member.requested, (member.assigned, member.resource))
                found = self._filter(self._matching(preferred), member.supported)
                if not found:
                    softer = _soft_name(member.requested, (member.assigned,))
                    found = self._filter(self._matching(softer), member.supported)
            if not found:
                raise _PlacementError(self._no_device_message(i, member))
            return found
        found = self._filter(range(len(self.devices)), member.supported)
        if not found:
            raise _PlacementError(
                f"Node had no OpKernel registered to support this operation: Operation was "
                f"{self.statics[self.codes[i]].op_type} (kernels for "
                f"{self._kernel_types(i) or 'no device'}; devices: {self._types_text()})"
            )
        return found

    def _kernel_types(self, i: int) -> str:
        kernels = getattr(self.facts, "kernels", {}).get(self.names[i])
        return kernels.kernels if kernels is not None else ""

    def _no_device_message(self, i: int, member: _Member) -> str:
        static = self.statics[self.codes[i]]
        name, request = self.names[i], static.request
        available = ", ".join(self.devices)
        own = static.requested if request else _EMPTY
        if own == member.requested:
            if not self._matching(own):
                return (
                    f"{name} was explicitly assigned to {request} but available devices are "
                    f"[ {available} ]. Make sure the device specification refers to a valid "
                    "device."
                )
            if own[3] is not None:
                return (
                    f"Could not satisfy explicit device specification '{request}' because no "
                    f"supported kernel for {own[3]} devices is available (Op: "
                    f"{static.op_type}; kernels: {self._kernel_types(i) or 'none'})."
                )
            return f"Could not satisfy explicit device specification '{request}'"
        return (
            f"Could not satisfy explicit device specification '{request}' because the node "
            f"{name} was colocated with a group of nodes that required incompatible device "
            f"'{_name_str(member.requested)}'. All available devices [{available}]."
        )

    def _matching(self, spec: Name) -> list[int]:
        return [k for k, name in enumerate(self.device_names) if _matches(spec, name)]

    def _filter(self, device_indices: Iterable[int], supported: list) -> list[int]:
        """``FilterSupportedDevices``: by kernel priority, type priority, locality, then name.

        TensorFlow (core/common_runtime/colocation_graph.cc, ``FilterSupportedDevices``) sorts
        with ``DeviceSet::SortPrioritizedDeviceVector`` (device_set.cc): explicit kernel
        priority, then ``DeviceFactory::DevicePriority`` of the type (GPU before CPU), then
        ``Device::IsLocal()`` (local first), then the name. A session's graph is placed with no
        default device (``GraphExecutionState::InitBaseGraph`` passes
        ``default_local_device = nullptr`` to the Placer), so in a cluster locality is what keeps
        an op that asked for nothing on the session's own task: ``Master::CreateSession``
        (distributed_runtime/master.cc) puts the remote tasks' devices (``RemoteDevice``, whose
        ``IsLocal()`` is false, remote_device.cc) and the master's own ``local_devices`` (its
        first one is the client device, where fetches go) into the session's DeviceSet. Without
        locality the name would win and ``/job:ps/...`` sorts before ``/job:worker/...``.
        Locality comes after the type: a GPU on another task beats this task's CPU.
        """
        priority = dict(supported)
        remote = self.remote
        ranked = []
        for k in device_indices:
            dtype = self.device_names[k][3]
            if dtype in priority:
                key = (
                    -priority[dtype],
                    -_DEVICE_TYPE_PRIORITY.get(dtype, 0),
                    remote[k],
                    self.devices[k],
                )
                ranked.append((key, k))
        ranked.sort()
        return [k for _, k in ranked]

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
        present, first_node = np.unique(code_array[lone], return_index=True)
        lone_nodes = np.flatnonzero(lone)
        self.representative = dict(
            zip(present.tolist(), lone_nodes[first_node].tolist(), strict=True)
        )
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
        if not identity_follows_its_input():
            return False
        if len(node.inputs) + len(node.controls) != 1 or len(node.consumers) != 1:
            return False
        source, sink = node.inputs[0], int(node.consumers[0])
        nodes = self.nodes
        source_request = nodes[source].request if source >= 0 else ""
        sink_request = nodes[sink].request if sink >= 0 else ""  # _SINK asks for nothing
        return source_request == sink_request


@lru_cache(maxsize=1)
def identity_follows_its_input() -> bool:
    """Whether this TensorFlow's placer puts a lone Identity with no request on its input's
    device (``MatchIdentityOperation``; TensorFlow 2.16's placer has no such step). Asked of
    TensorFlow itself, once: a variable's read on CPU:1 and an Identity of it, placed by a real
    Session on two CPUs (its partition graphs say where the Identity went)."""
    tf, _ = import_tensorflow()
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/cpu:1"):
            handle = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[], shared_name="probe")
        init = tf.raw_ops.AssignVariableOp(resource=handle, value=tf.constant(1.0))
        read = tf.raw_ops.ReadVariableOp(resource=handle, dtype=tf.float32)
        probe = tf.identity(read, name="probe_identity")
        out = tf.math.negative(probe)
    config = tf.compat.v1.ConfigProto(device_count={"CPU": 2}, allow_soft_placement=True)
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    options = tf.compat.v1.RunOptions(output_partition_graphs=True)
    metadata = tf.compat.v1.RunMetadata()
    # What TensorFlow logs as it runs (MLIR pass notes) is the probe's, for no cell or terminal.
    with capture_native_output(), tf.compat.v1.Session(graph=graph, config=config) as session:
        session.run(init)
        session.run(out, options=options, run_metadata=metadata)
    for partition in metadata.partition_graphs:
        for node in partition.node:
            if node.name == "probe_identity":
                return node.device.endswith("CPU:1")
    raise RuntimeError("the placer probe's Identity is in no partition graph")


def _in_order(table: Mapping[str, Any], names: list[str], missing: Any) -> list:
    """``[table.get(name, missing) for name in names]``, at C speed when ``table`` has exactly
    these keys in this order (GraphFacts' dicts are filled node by node, in graph order)."""
    if len(table) == len(names) and list(table) == names:
        return list(table.values())
    return list(map(table.get, names, repeat(missing)))


def _is_ref_output(op_type: str) -> bool:
    try:
        from tensorflow.python.framework import op_def_registry

        op_def = op_def_registry.get(op_type)
    except Exception:
        return False
    return bool(op_def and len(op_def.output_arg) == 1 and op_def.output_arg[0].is_ref)


def _soft_name(requested: Name, keep_from: tuple) -> Name:
    """``GetPreferredSoftDeviceName``/``GetSoftDeviceName``: the request without its type and
    index unless one of ``keep_from`` (assigned, resource device) sets them."""
    job, replica, task, dtype, index = requested
    if all(name[3] is None for name in keep_from):
        dtype = None
    if all(name[4] is None for name in keep_from):
        index = None
    return (job, replica, task, dtype, index)


# ---------------------------------------------------------------------------------------------
# Node details beyond GraphFacts (control edges, output counts, attrs), from a GraphDef
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeDetail:
    """What a node def adds to :class:`GraphFacts` for the placer and for the reasons."""

    controls: tuple[str, ...] = ()
    outputs: int | None = None  # number of outputs, when known
    input_tensors: tuple[str, ...] = ()  # data inputs as "op:slot"
    dtypes: str = ""  # the node's type attrs, e.g. "int32"


def node_details(graph_def: Any) -> dict[str, NodeDetail]:
    """Per node of a ``GraphDef``: control inputs, output count, input tensors, dtypes."""
    import_tensorflow()
    from tensorflow.python.framework import dtypes as tf_dtypes

    details = {}
    for node in graph_def.node:
        controls, tensors = [], []
        for raw in node.input:
            if raw[:1] == "^":
                controls.append(raw[1:])
            else:
                tensors.append(raw if ":" in raw else f"{raw}:0")
        type_names = []
        for value in node.attr.values():
            which = value.WhichOneof("value")
            if which == "type":
                type_names.append(tf_dtypes.as_dtype(value.type).name)
            elif which == "list" and len(value.list.type):
                type_names.extend(tf_dtypes.as_dtype(t).name for t in value.list.type)
        details[node.name] = NodeDetail(
            tuple(controls),
            _output_count(node),
            tuple(tensors),
            ", ".join(dict.fromkeys(sorted(type_names))),
        )
    return details


def _output_count(node: Any) -> int | None:
    count, _, _ = _op_outputs(node.op)
    if count is not None:
        return count
    try:
        from tensorflow.python.framework import op_def_registry

        op_def = op_def_registry.get(node.op)
    except Exception:
        return None
    if op_def is None:
        return None
    total = 0
    for arg in op_def.output_arg:
        if arg.number_attr:
            if arg.number_attr not in node.attr:
                return None
            total += node.attr[arg.number_attr].i
        elif arg.type_list_attr:
            if arg.type_list_attr not in node.attr:
                return None
            total += len(node.attr[arg.type_list_attr].list.type)
        else:
            total += 1
    return total


# ---------------------------------------------------------------------------------------------
# The public core
# ---------------------------------------------------------------------------------------------
def predict_devices(
    facts: GraphFacts,
    devices: Sequence[str],
    *,
    soft_placement: bool,
    details: Mapping[str, NodeDetail] | None = None,
    pinned: Mapping[str, str] | None = None,
    local_task: str = "",
    pinned_reasons: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Where TensorFlow's placer would put each node of ``facts`` given ``devices``.

    One row per node of the graph as built (graph order): ``op``, ``predicted_device``
    (canonical; ``""`` when the placer would refuse the node), ``how`` (``explicit``,
    ``implicit``, ``colocated``, ``soft``, ``runtime``, or ``error``) and ``reason`` (one
    sentence). ``frame.attrs["errors"]`` lists what TensorFlow would refuse (its first entry is
    the error a real run raises; empty when the graph places). ``details`` (from
    :func:`node_details`) adds control edges, output counts and dtypes; without it control
    edges are unknown, which only matters for the Identity and generator heuristics.
    ``pinned`` maps nodes the runtime placed before the placer runs (a function's ``_Arg``,
    which lives where the caller's tensor or variable is) to their device. ``local_task``
    (e.g. ``/job:worker/task:0``) is, in a cluster, the task the session runs on (its master):
    its devices go before the other tasks' among equally good ones (:func:`master_task`);
    ``""`` when every device is local (one process). ``pinned_reasons``: the reason of each
    pinned node (by default, that it is a function argument where the caller's value is).
    """
    columns, placer = _predict(
        facts, devices, soft_placement, details, pinned, local_task, pinned_reasons
    )
    frame = pd.DataFrame(columns, columns=PREDICTED_COLUMNS)
    frame.attrs["errors"] = [message for _, message in placer.errors]
    return frame


def _predict(
    facts: GraphFacts,
    devices: Sequence[str],
    soft_placement: bool,
    details: Mapping[str, NodeDetail] | None,
    pinned: Mapping[str, str] | None,
    local_task: str = "",
    pinned_reasons: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], _Placer]:
    """:func:`predict_devices`'s columns (arrays), and the placer (its errors, codes and edge
    table, which the predicted trace reuses)."""
    if not devices:
        raise ValueError("devices is empty: the placer needs at least one device (a CPU).")
    import_tensorflow()  # the registries below: TF's start-up lines go to no cell
    placer = _Placer(facts, devices, soft_placement, details, pinned, local_task, pinned_reasons)
    placer.run()
    explain = _Reasons(placer)
    codes = placer.code_array
    device_names = np.array([*placer.devices, ""], dtype=object)
    placer.assigned_array = np.asarray(placer.assigned, dtype=np.int64)
    predicted = device_names[placer.assigned_array]
    own = sorted(placer.special | set(placer.failed))  # explained one by one
    representative = placer.representative
    if details:  # the reason may name the node's dtypes: per (code, dtypes)
        how, reason = [], []
        shared: dict[tuple, tuple[str, str]] = {}
        own_set = set(own)
        details_get = details.get
        for i, (name, code) in enumerate(zip(placer.names, placer.codes, strict=True)):
            if i in own_set:
                h, r = explain(i)
            else:
                detail = details_get(name)
                key = (code, detail.dtypes if detail is not None else "")
                found = shared.get(key)
                if found is None:
                    found = shared[key] = explain(i)
                h, r = found
            how.append(h)
            reason.append(r)
    else:
        by_code = [
            explain(representative[c]) if c in representative else ("", "")
            for c in range(len(placer.statics))
        ]
        how = np.array([h for h, _ in by_code] + [""], dtype=object)[codes]
        reason = np.array([r for _, r in by_code] + [""], dtype=object)[codes]
        explained = [explain(i) for i in own]
        for i, (h, r) in zip(own, explained, strict=True):
            how[i], reason[i] = h, r
        # For the predicted trace's columns, without reading each node's strings again: each
        # node's entry in (the codes' explanations + those of the nodes explained one by one).
        table = by_code + explained
        pick = codes.copy()
        pick[np.asarray(own, dtype=np.int64)] = np.arange(len(by_code), len(table))
        category = {value: k for k, value in enumerate(_how_categories())}
        placer.how_codes = np.array([category.get(h, -1) for h, _ in table], dtype=np.int8)[pick]
        placer.reasons = ([r for _, r in table], pick)
    columns = {"op": placer.names, "predicted_device": predicted, "how": how, "reason": reason}
    return columns, placer


class _Reasons:
    """``how`` and ``reason`` from what the simulation did (not guessed afterwards)."""

    def __init__(self, placer: _Placer) -> None:
        self.p = placer
        self.has_gpu = "GPU" in placer.types_present
        self.available = ", ".join(short_device(d) for d in placer.devices)
        self._group_sizes: dict[int, int] = {}
        for i in list(placer.parent):
            root = placer.find(i)
            self._group_sizes[root] = self._group_sizes.get(root, 0) + 1

    def __call__(self, i: int) -> tuple[str, str]:
        p = self.p
        node = p.nodes[i]
        if i in p.failed:
            return "error", f"TensorFlow would refuse to place it: {p.failed[i]}."
        short = short_device(p.devices[p.assigned[i]])
        if p.how_chosen.get(i) == "pinned":
            return "runtime", self._pinned(i, node, short)
        if node.op_type in _HOST_RUNTIME_TYPES:
            return "runtime", self._unpinned(i, node) + self._placed(i, node, short)[1]
        return self._placed(i, node, short)

    def _pinned(self, i: int, node: _Node, short: str) -> str:
        """A node the runtime placed before the placer ran (``PinArgsAndRets``)."""
        p = self.p
        if node.op_type not in ("_Retval", "_DeviceRetval"):
            return p.pinned_reasons.get(i) or (
                f"A function argument: it lives where the caller's value is, {short}, before "
                "the placer runs."
            )
        source = p.result_sources.get(i, -1)
        result = "A function's result (a _Retval the runtime adds)"
        if source < 0:
            return f"{result}, placed by the runtime before the placer runs: {short}."
        name = p.names[source]
        if source in p.pinned:
            return (
                f"{result}: it returns the function argument {name}, so the runtime pins it "
                f"where {name} is before the placer runs: {short}."
            )
        return (
            f"{result}: {name}, which makes its value, asked for {p.nodes[source].request}, so "
            f"the runtime pins the result on that device before the placer runs: {short}."
        )

    def _unpinned(self, i: int, node: _Node) -> str:
        """Why the runtime left a function's argument or result to the placer."""
        p = self.p
        if node.op_type not in ("_Retval", "_DeviceRetval") or not node.inputs:
            return (
                f"Inserted by the runtime ({node.op_type}) and not pinned before the placer runs. "
            )
        source = p.result_source(i)
        if source < 0:
            return "A function's result (a _Retval the runtime adds), left to the placer. "
        name, request = p.names[source], p.nodes[source].request
        if p.facts.colocated_with.get(name):
            why = "is in a colocation group"
        elif request:
            why = f"asks for {request}, which names more than one device"
        else:
            why = "asks for no device"
        return (
            f"A function's result (a _Retval the runtime adds): {name}, which makes its value, "
            f"{why}, so the runtime leaves the result to the placer. "
        )

    def _placed(self, i: int, node: _Node, short: str) -> tuple[str, str]:
        """``how`` and ``reason`` of a node the placer placed."""
        p = self.p
        root = p.find(i)
        member = p.members.get(root)
        pinner = member.assigned_by if member is not None else -1
        request = _parse(node.request) if node.request else _EMPTY
        dropped = p.colocation_dropped.get(i)
        dropped_text = (
            f" It was also colocated with {dropped} (tf.compat.v1.colocate_with), which soft "
            "placement dropped because the two could not share a device."
            if dropped
            else ""
        )
        demanded = p.demanded.get(i, _EMPTY)
        if self._group_sizes.get(root, 1) > 1:
            # An op that uses a resource runs where the resource is; another member of a group
            # is placed by the group unless it lands where it would alone.
            source = self._resource_source(i, root)
            restricted = (pinner >= 0 and pinner != i) or (
                demanded != _EMPTY and demanded != request
            )
            if source >= 0 or (restricted and not self._as_if_alone(i, node, pinner)):
                if node.request and _matches(request, p.device_names[p.assigned[i]]):
                    return "explicit", self._explicit(node, short) + dropped_text
                partner = source if source >= 0 else self._partner(i, root, pinner)
                reason = colocated_reason(node.request, self._link(i, partner), short)
                return "colocated", reason + self._no_gpu(root, short) + dropped_text
        if node.request:
            if _matches(request, p.device_names[p.assigned[i]]):
                return "explicit", self._explicit(node, short) + dropped_text
            return "soft", self._soft(i, node, request, short) + dropped_text
        if p.default.get(i, -1) == p.assigned[i] and not p.how_chosen.get(i):
            scope = p.facts.scope[node.name].device
            return "explicit", (
                f"It has no tf.device of its own: the tf.device({scope}) around the call makes "
                f"{short} the function's default device, which the placer tries first."
            ) + dropped_text
        return "implicit", self._implicit(i, node, short) + dropped_text

    def _resource_source(self, i: int, root: int) -> int:
        """The producer of a resource or ref node ``i`` uses, in its group (-1: none)."""
        p = self.p
        for producer in p.facts.resource_inputs.get(p.names[i], ()):
            j = p.index.get(producer, -1)
            if j >= 0 and j != i and p.find(j) == root:
                return j
        return -1

    def _as_if_alone(self, i: int, node: _Node, pinner: int) -> bool:
        """Whether the group, which nobody asked for a device for and no argument pinned, put
        ``i`` (asking for none either) where it would go alone: then its own kernels decided."""
        p = self.p
        if node.request or pinner < 0 or i in p.default or p.demanded.get(pinner, _EMPTY) != _EMPTY:
            return False
        if node.dataset or p.facts.colocated_with.get(node.name):
            return False  # joined by tf.data or tf.compat.v1.colocate_with, not by its users
        alone = p._filter(range(len(p.devices)), list(node.kernel_types))
        return bool(alone) and alone[0] == p.assigned[i]

    def _no_gpu(self, root: int, short: str) -> str:
        """Why a group is on a CPU beside a GPU, when some member has no GPU kernel."""
        p = self.p
        member = p.members.get(root)
        if not self.has_gpu or member is None or "GPU" in dict(member.supported):
            return ""
        if not short.startswith("CPU"):
            return ""
        without = [
            p.names[j] for j in self._members(root) if "GPU" not in dict(p.nodes[j].kernel_types)
        ]
        if not without:
            return ""
        shown = ", ".join(without[:2]) + (
            f" and {len(without) - 2} more" if len(without) > 2 else ""
        )
        return (
            f" The group stays on the CPU: {shown} {'has' if len(without) == 1 else 'have'} no "
            "GPU kernel, and the placer puts a group where every member has one."
        )

    def _partner(self, i: int, root: int, pinner: int) -> int:
        """The group member to name: the variable it reads, a reader of it, the op it is
        colocated with, a member with a request, then whichever member was placed first."""
        p = self.p
        name = p.nodes[i].name
        index = p.index
        same = [
            j
            for j in (index.get(x, -1) for x in p.facts.resource_inputs.get(name, ()))
            if j >= 0 and j != i and p.find(j) == root
        ]
        same += [
            j
            for j in (index.get(x, -1) for x in p.facts.colocated_with.get(name, ()))
            if j >= 0 and j != i and p.find(j) == root
        ]
        if p.nodes[i].dataset:
            same += [j for j in p.nodes[i].inputs if j >= 0 and p.nodes[j].dataset]
        if same:
            return same[0]
        members = [j for j in self._members(root) if j != i]
        for j in members:
            if name in p.facts.resource_inputs.get(p.nodes[j].name, ()):
                return j
        for j in members:
            if p.nodes[j].request:
                return j
        return pinner if pinner >= 0 and pinner != i else (members[0] if members else i)

    def _members(self, root: int) -> list[int]:
        cached = self.__dict__.get("_by_root")
        if cached is None:
            cached = {}
            for j in list(self.p.parent):
                cached.setdefault(self.p.find(j), []).append(j)
            self.__dict__["_by_root"] = cached
        return cached.get(root, [])

    def _link(self, i: int, partner: int) -> str:
        p = self.p
        name, other = p.nodes[i].name, p.nodes[partner].name
        words = link_words(p.facts, name, other)
        if words.startswith("is in one colocation group") and p.nodes[i].dataset:
            if p.nodes[partner].dataset and other in p.facts.inputs.get(name, ()):
                return f"is a tf.data dataset made from {other} (datasets stay with their input)"
            if p.nodes[partner].dataset and name in p.facts.inputs.get(other, ()):
                return f"feeds the tf.data dataset {other} (datasets stay with their input)"
        return words

    def _explicit(self, node: _Node, short: str) -> str:
        request = _parse(node.request)
        if request[3] is not None and request[4] is not None:
            return f"Requested {node.request} with tf.device; placed exactly there ({short})."
        return (
            f"Requested {node.request} (a partial device spec); the placer would choose "
            f"{short}, the first matching device with a kernel."
        )

    def _soft(self, i: int, node: _Node, request: Name, short: str) -> str:
        p = self.p
        if not p._matching(request):
            return (
                f"Requested {node.request}, which does not exist there (devices: "
                f"{self.available}); soft placement moved it to {short}."
            )
        wanted = request[3]
        if wanted is not None and wanted not in dict(node.kernel_types):
            return (
                f"Requested {node.request}, but {node.op_type} has no {wanted} kernel"
                f"{self._for_dtypes(i, wanted)}; soft placement moved it to {short}."
            )
        return (
            f"Requested {node.request}; its colocation group could not go there, so soft "
            f"placement moved it to {short}."
        )

    def _for_dtypes(self, i: int, device_type: str) -> str:
        p = self.p
        kernels = getattr(p.facts, "kernels", {}).get(p.nodes[i].name)
        detail = p.details.get(p.nodes[i].name)
        if device_type == "GPU" and kernels is not None and kernels.gpu_kernel == "dtype":
            dtypes = detail.dtypes if detail is not None and detail.dtypes else "these attrs"
            return f" for {dtypes}"
        return ""

    def _implicit(self, i: int, node: _Node, short: str) -> str:
        p = self.p
        chosen = p.how_chosen.get(i, "")
        if chosen == "input":
            source = p.nodes[node.inputs[0]].name
            return (
                f"No device requested: the placer puts a {node.op_type} with its input "
                f"({source}) to avoid a copy, so it runs on {short}."
            )
        if chosen == "consumers":
            distinct = list(dict.fromkeys(c for c in node.consumers.tolist() if c >= 0))
            shown = ", ".join(p.names[c] for c in distinct[:3])
            if len(distinct) > 3:
                shown += f" and {len(distinct) - 3:,} more"
            return (
                f"No device requested: an op with no inputs is placed with its consumers "
                f"({shown}), so it runs on {short}."
            )
        supported = dict(node.kernel_types)
        if self.has_gpu and "GPU" not in supported:
            return (
                f"No device requested and {node.op_type} has no GPU kernel"
                f"{self._for_dtypes(i, 'GPU')}, so the placer chose the CPU: {short}."
            )
        kernels = getattr(p.facts, "kernels", {}).get(node.name)
        host = ""
        if kernels is not None and kernels.gpu_kernel == "host" and short.startswith("GPU"):
            host = (
                " Its GPU kernel keeps every input and output in host memory, so it computes "
                "on the host."
            )
        local = p.local_task
        if local and task_of(p.devices[p.assigned[i]]) == local:
            return (
                f"No device requested: the placer takes the highest-priority device type with "
                f"a kernel for {node.op_type} (GPU before CPU) and, among those, a device of "
                f"the task the session runs on ({local}, its master) before other tasks': "
                f"{short}.{host}"
            )
        if local:
            return (
                f"No device requested: the placer takes the highest-priority device type with "
                f"a kernel for {node.op_type} (GPU before CPU) first, the session's own task "
                f"({local}) only among equals, and that task has none of that type: "
                f"{short}.{host}"
            )
        return (
            f"No device requested: the placer takes the highest-priority device type with a "
            f"kernel for {node.op_type} (GPU before CPU), lowest index first: {short}.{host}"
        )


# ---------------------------------------------------------------------------------------------
# Transfers
# ---------------------------------------------------------------------------------------------
TRANSFER_PREDICTED_COLUMNS = [
    "tensor",
    "src_device",
    "dst_device",
    "bytes",
    "predicted",
    "copy",
    "cross_task",  # between two tasks of a cluster, as in a trace's transfers
]


def predict_transfers(
    facts: GraphFacts, device_of: Mapping[str, str], details: Mapping[str, NodeDetail] | None
) -> pd.DataFrame:
    """Predicted copies: one row per (tensor, destination device) crossing devices, and per
    same-GPU edge whose producer and consumer keep the tensor in different memories (a GPU
    kernel's host-memory argument next to a device-memory one). ``copy`` says which memories:
    ``HtoD``, ``DtoH``, ``DtoD`` or ``HtoH`` (host memory on both sides: two CPUs, or a GPU
    op's host-memory tensor)."""
    import_tensorflow()
    names = list(device_of)
    return _copies(facts, names, [device_of[n] for n in names], details)


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


def _copies(
    facts: GraphFacts,
    names: list[str],
    placed_on: list[str],
    details: Mapping[str, NodeDetail] | None,
    edges: _Edges | None = None,
    host_args: tuple[np.ndarray, np.ndarray] | None = None,
    ran: set[str] | None = None,
) -> pd.DataFrame:
    """:func:`predict_transfers` with the devices as a list beside ``names`` ("" unplaced).
    ``host_args``: per node, whether its GPU kernel keeps some output / input in host memory.
    ``ran``: the ops the traced step ran; an edge between two ops that both did not (the
    variables' initializers, what Grappler folded away) copies nothing in a step."""
    if edges is None:
        edges = _edges(facts, names)
    if host_args is None:
        known_kernels = _in_order(getattr(facts, "kernels", {}), names, None)
        host_args = (
            np.array([bool(k is not None and k.gpu_host_outputs) for k in known_kernels] + [0]),
            np.array([bool(k is not None and k.gpu_host_inputs) for k in known_kernels] + [0]),
        )
    devices = sorted(set(placed_on) - {""})
    if not len(edges.producers) or not devices:
        return _transfers_frame([], [], [], [])
    known = pd.Index(devices, dtype=object)
    node_device = known.get_indexer(np.array(placed_on, dtype=object))
    in_step = np.fromiter((n in ran for n in names), bool, len(names)) if ran else None
    return _copies_between(facts, edges, devices, node_device, details, host_args, in_step)


def _copies_between(
    facts: GraphFacts,
    edges: _Edges,
    devices: list[str],
    node_device: np.ndarray,
    details: Mapping[str, NodeDetail] | None,
    host_args: tuple[np.ndarray, np.ndarray],
    in_step: np.ndarray | None,
    tensors: np.ndarray | None = None,
    tensor_codes: np.ndarray | None = None,
) -> pd.DataFrame:
    """:func:`_copies` with each node's device as an index into ``devices`` (sorted, distinct;
    -1 unplaced). ``in_step``: per node, did the traced step run it (None: no filter).
    ``tensors``/``tensor_codes``: each edge's tensor and a code per distinct tensor, when the
    caller has them already (:func:`_edge_tensors`)."""
    host_out, host_in = host_args
    consumers, producers = edges.consumers, edges.producers
    edge_consumer, slots = edges.edge_consumer, edges.slots
    if not len(producers) or not devices:
        return _transfers_frame([], [], [], [])
    node_device = np.append(node_device, -1)
    dst = node_device[edges.consumer_node]  # "" and -1 (not a node) -> -1
    src = node_device[edges.producer_node]
    host = np.array(["device:CPU:" in d for d in devices] + [True])
    src_host, dst_host = host[src], host[dst]
    placed = (src >= 0) & (dst >= 0)
    if in_step is not None:
        in_step = np.append(in_step, False)
        placed &= in_step[edges.producer_node] | in_step[edges.consumer_node]
    if tensors is None:
        tensors = _edge_tensors(producers, consumers, edges.lists, details)
    # A GPU kernel's host-memory argument: its tensor is in host memory on the GPU device.
    kernels = getattr(facts, "kernels", {})
    gpu_out = np.flatnonzero(placed & ~src_host & host_out[edges.producer_node])
    for e, produced in zip(gpu_out, map(kernels.get, producers[gpu_out]), strict=True):
        out_slot = int(tensors[e].rpartition(":")[2] or 0)
        src_host[e] = out_slot in produced.gpu_host_outputs
    gpu_in = np.flatnonzero(placed & ~dst_host & host_in[edges.consumer_node])
    consumer_names = [consumers[c] for c in edge_consumer[gpu_in].tolist()]
    for e, consumed in zip(gpu_in, map(kernels.get, consumer_names), strict=True):
        dst_host[e] = int(slots[e]) in consumed.gpu_host_inputs
    moved = np.flatnonzero(placed & ((src != dst) | (src_host != dst_host)))
    if not len(moved):
        return _transfers_frame([], [], [], [])
    # One row per (tensor, destination, memory there): the runtime sends a tensor once.
    if tensor_codes is None:
        codes = pd.factorize(tensors[moved])[0].astype(np.int64)
    else:
        codes = tensor_codes[moved]
    key = (codes * (len(devices) + 1) + dst[moved]) * 2 + dst_host[moved]
    _, first = np.unique(key, return_index=True)
    rows = moved[np.sort(first)]
    names = np.array(devices, dtype=object)
    src_rows, dst_rows = src[rows], dst[rows]
    copy = _COPY_KINDS[src_host[rows] * 2 + dst_host[rows]]
    # Per pair of devices (few), then per row: do they cross tasks?
    pairs = [(a, b) for a in devices for b in devices]
    crossing = crosses_tasks([a for a, _ in pairs], [b for _, b in pairs])
    cross_task = crossing.reshape(len(devices), len(devices))[src_rows, dst_rows]
    return _transfers_frame(
        tensors[rows], names[src_rows], names[dst_rows], copy, cross_task=cross_task
    )


_COPY_KINDS = np.array(["DtoD", "DtoH", "HtoD", "HtoH"], dtype=object)  # by 2 * src_host + dst


def _edge_tensors(
    producers: np.ndarray,
    consumers: list[str],
    lists: list[list[str]],
    details: Mapping[str, NodeDetail] | None,
) -> np.ndarray:
    """Each data edge's tensor, ``"producer:slot"`` (slot 0 without the node defs)."""
    if not details:
        return producers + ":0"
    named: list[str] = []
    for consumer, sources in zip(consumers, lists, strict=True):
        detail = details.get(consumer)
        if detail is not None and len(detail.input_tensors) == len(sources):
            named.extend(detail.input_tensors)
        else:
            named.extend(f"{p}:0" for p in sources)
    return np.array(named, dtype=object)


def _transfers_frame(
    tensors: Any, sources: Any, targets: Any, copies: Any, cross_task: np.ndarray | None = None
) -> pd.DataFrame:
    n = len(tensors)
    if cross_task is None:
        cross_task = crosses_tasks(list(sources), list(targets))
    return pd.DataFrame(
        {
            "tensor": pd.Series(tensors, dtype=object),
            "src_device": pd.Series(sources, dtype=object),
            "dst_device": pd.Series(targets, dtype=object),
            "bytes": pd.arrays.IntegerArray(np.zeros(n, np.int64), np.ones(n, bool)),
            "predicted": np.ones(n, dtype=bool),
            "copy": pd.Series(copies, dtype=object),
            "cross_task": cross_task,
        },
        columns=TRANSFER_PREDICTED_COLUMNS,
    )


# ---------------------------------------------------------------------------------------------
# predict_placement
# ---------------------------------------------------------------------------------------------
def gpu_devices(gpus: int, task: str = "/job:localhost/replica:0/task:0") -> list[str]:
    """The canonical names of ``gpus`` GPUs of ``task`` (this process's by default)."""
    return [f"{task}/device:GPU:{k}" for k in range(gpus)]


def predicted_devices(devices: Iterable[str], gpus: int) -> list[str]:
    """The device set of a prediction: ``devices`` other than GPUs, plus ``gpus`` GPUs on each
    of their tasks (each task of a cluster is a machine of its own, so each gets the GPUs;
    one process has one task, ``/job:localhost``). Display order; a CPU of this process
    when ``devices`` names none."""
    hosts = [d for d in devices if "device:GPU:" not in d]
    tasks = {}
    for device in devices:
        try:
            spec = parse_device(canonical_device(device))
        except ValueError:
            continue
        if spec.job is not None:
            tasks[(spec.job, spec.replica or 0, spec.task or 0)] = None
    if not tasks:
        tasks[("localhost", 0, 0)] = None
    added = [
        gpu
        for job, replica, task in tasks
        for gpu in gpu_devices(gpus, f"/job:{job}/replica:{replica}/task:{task}")
    ]
    found = sorted(set(hosts) | set(added), key=device_sort_key)
    return found or [HOST, *gpu_devices(gpus)]


_CLIENT_COPY_TYPES = frozenset({"_Send", "_Recv", "_HostSend", "_HostRecv"})


def master_task(trace: Any) -> str:
    """The task a cluster trace's session ran on (its master, ``/job:worker/task:0``), whose
    devices the placer prefers among equally good ones; ``""`` for a trace on one task.

    The fetches say it: the runtime sends each fetched tensor to the client device with a
    ``_send_<op>_<slot>`` node (feeds arrive by ``_recv_<op>_<slot>``), placed on that device
    (graph/subgraph.cc ``SendFetchRewrite``/``RecvFeedRewrite``; the device is
    ``DeviceSet::client_device()``, set by ``Master::CreateSession`` to the master's first
    local device). TensorFlow does not allow user op names starting with ``_``. With no
    fetch or feed recorded: the ``chief`` job's task 0, else worker 0 (where tfplace and
    TensorFlow's conventions run the session), else the first task.
    """
    tasks = sorted({task_of(d) for d in getattr(trace, "devices", ())} - {""})
    if len(tasks) <= 1:
        return ""
    ops = trace.ops
    if len(ops):
        names = ops["op"].astype(str)
        client = ops["type"].isin(_CLIENT_COPY_TYPES) & names.str.match(r"_(?:send|recv)_")
        for device in ops.loc[client, "device"]:
            task = task_of(str(device))
            if task in tasks:
                return task
    for job in ("chief", "worker"):
        if f"/job:{job}/task:0" in tasks:
            return f"/job:{job}/task:0"
    return tasks[0]


def _check_gpus(gpus: Any) -> int:
    if isinstance(gpus, bool) or not isinstance(gpus, int):
        raise TypeError(
            f"gpus must be a whole number of GPUs (0, 1, 2...), not {type(gpus).__name__}: "
            "e.g. predict_placement(fn, gpus=1)."
        )
    if not 0 <= gpus <= 64:
        raise ValueError(f"gpus must be from 0 to 64, not {gpus}.")
    return gpus


def predict_placement(fn_or_trace: Any, gpus: int = 1, **trace_options: Any) -> PlacementTrace:
    """Predict where TensorFlow would place every op on this machine plus ``gpus`` GPUs.

    ``fn_or_trace`` is what :func:`~tfplace_widget.trace_placement` takes (a graph builder or
    TF2 code, with its positional arguments in ``args=`` and the options of trace_placement,
    e.g. ``device_count``, ``soft_placement``), which is traced here first for real to read
    the graph, or a :class:`PlacementTrace` made with its graph. The result is a
    ``PlacementTrace`` with ``predicted == True``: ``ops.device`` (and ``predicted_device``)
    is where the placer would put each node of the graph as built, ``how``/``reason`` say why,
    ``traced_device`` is where it ran here; ``events`` is empty (nothing ran) and
    ``transfers`` holds the predicted copies (``predicted`` True, ``copy`` HtoD/DtoH/...).
    What TensorFlow would refuse is in ``trace.notes`` and in the ops' ``how == "error"``.
    The device set is the trace's devices other than GPUs, plus ``GPU:0`` to ``GPU:gpus-1``
    (so ``gpus=0`` asks what happens without a GPU). On a cluster trace (``cluster=``) every
    task gets ``gpus`` GPUs of its own (``/job:ps/replica:0/task:1/device:GPU:0``...), since
    each task is a machine (or process) of its own, and the placer prefers the devices of the
    task the session ran on (:func:`master_task`, usually the chief) among equally good ones,
    as TensorFlow's master does: so ``gpus=0`` gives the placement the cluster made. ``gpus``
    must be a whole number from 0 to 64 (``TypeError``/``ValueError`` otherwise); the function
    is traced with soft placement on (a GPU request cannot be met here), and
    ``soft_placement`` only sets the prediction's.
    """
    from ..model.trace import PlacementTrace

    gpus = _check_gpus(gpus)
    details = None
    if isinstance(fn_or_trace, PlacementTrace):
        soft = _check_soft(trace_options.pop("soft_placement", True))
        if trace_options:
            raise TypeError(
                "predict_placement(trace, gpus) takes only soft_placement= (the trace already "
                f"ran), not {', '.join(sorted(trace_options))}; pass the function instead to "
                "trace it with those options."
            )
        trace = fn_or_trace
    else:
        trace, details, soft = _trace_for_facts(fn_or_trace, trace_options)
    facts = getattr(trace, "facts", None)
    if facts is None:
        raise ValueError(
            "This trace has no graph facts (it was loaded from a Chrome trace, or from a "
            "RunMetadata without graph=), so the placer cannot be replayed. Pass the function "
            "itself to predict_placement, or load the trace with "
            "PlacementTrace.from_run_metadata(run_metadata, graph=graph)."
        )
    if getattr(trace, "predicted", False):
        raise ValueError(
            "This trace is already a prediction; pass the traced trace or the function."
        )
    devices = predicted_devices(trace.devices, gpus)
    arguments = _pinned_arguments(trace, facts, gpus)
    pinned = {name: argument.device for name, argument in arguments.items()}
    reasons = {name: argument.reason for name, argument in arguments.items()}
    columns, placer = _predict(facts, devices, soft, details, pinned, master_task(trace), reasons)
    return _predicted_trace(trace, facts, columns, devices, gpus, soft, details, placer)


def _pinned_arguments(trace: Any, facts: GraphFacts, gpus: int) -> dict[str, Pinned]:
    """Where a function's ``_Arg`` nodes live before the placer runs, and why: the caller's
    value where it was here; a resource where it would be made with ``gpus`` GPUs
    (:func:`~tfplace_widget.analyses.resources.pinned_arguments`)."""
    cache = _facts_cache(facts)
    if cache.args is None:
        cache.args = [name for name, op_type in facts.types.items() if op_type == "_Arg"]
    return pinned_arguments(trace, facts, cache.args, gpus, gpu_devices(1)[0])


def _trace_for_facts(fn: Any, options: dict[str, Any]) -> tuple[Any, Any, bool]:
    """Trace ``fn`` for real (this machine, the user's options) and read its graph's details."""
    from ..tracing import tracer

    options = dict(options)
    args = tuple(options.pop("args", ()) or ())
    tracer.check_option_names(options, "predict_placement")
    soft = _check_soft(options.get("soft_placement", True))
    # The graph is read from a run with soft placement on: a request for a GPU cannot be met
    # on this machine, and the placer's verdict with the user's setting is what is predicted.
    options["soft_placement"] = True
    mode = options.get("mode", "auto")
    graph_builder = not callable(fn) or (
        mode == "graph"
        or (mode == "auto" and not args and not options.get("fn_kwargs") and not _tf2(fn))
    )
    captured: dict[str, Any] = {}
    target: Callable[..., Any] = fn
    if graph_builder and callable(fn):
        target = _capturing(fn, captured)
        options.setdefault("mode", "graph" if mode == "graph" else "auto")
    trace = tracer.trace_placement(target, *args, **options)
    details = None
    graph = captured.get("graph")
    if graph is not None and trace.mode == "graph":
        details = node_details(graph.as_graph_def())
    return trace, details, soft


def _check_soft(soft: Any) -> bool:
    if not isinstance(soft, bool):
        raise TypeError(f"soft_placement must be True or False, not {soft!r}.")
    return soft


def _tf2(fn: Any) -> bool:
    from ..tracing.function import is_tf2_callable

    return is_tf2_callable(fn)


def _capturing(fn: Callable[..., Any], captured: dict[str, Any]) -> Callable[..., Any]:
    """``fn`` that also records the graph it builds in (trace_placement's fresh graph)."""
    import tensorflow as tf

    @functools.wraps(fn)
    def build(*args: Any, **kwargs: Any) -> Any:
        captured["graph"] = tf.compat.v1.get_default_graph()
        return fn(*args, **kwargs)

    return build


def _predicted_trace(
    trace: Any,
    facts: GraphFacts,
    frame: Mapping[str, Any],
    devices: list[str],
    gpus: int,
    soft: bool,
    details: Mapping[str, NodeDetail] | None,
    placer: _Placer,
) -> Any:
    """The predicted :class:`PlacementTrace` from :func:`_predict`'s columns."""
    from ..model.frames import OPS_COLUMNS
    from ..model.trace import PlacementTrace

    from_trace = _from_trace(trace, placer.cache)
    shared = _facts_columns(placer, facts)
    assigned = placer.assigned_array  # per node: index into placer.devices, -1 refused
    # The devices the nodes are on, sorted and distinct, and each node's index into them.
    used = [placer.devices[k] for k in np.unique(assigned[assigned >= 0]).tolist()]
    placed_on = sorted(set(used))
    position = {device: k for k, device in enumerate(placed_on)}
    node_device = np.array([*(position.get(d, -1) for d in placer.devices), -1])[assigned]
    # Text columns taken from their few distinct strings (pandas need not check each one).
    device_texts = pd.array(_text([*placer.devices, ""]), dtype="str")
    device = pd.Series(device_texts.take(assigned), copy=False)  # -1 (refused): ""
    if placer.reasons is None:
        reason = pd.Series(_text(frame["reason"]), copy=False)
    else:
        texts, pick = placer.reasons
        reason = pd.Series(pd.array(_text(texts), dtype="str").take(pick), copy=False)
    columns = {
        **shared,
        "device": device,
        "how": (
            pd.Categorical(frame["how"], categories=_how_categories())
            if placer.how_codes is None
            else pd.Categorical.from_codes(placer.how_codes, categories=_how_categories())
        ),
        "reason": reason,
    }
    if from_trace.function is not None:
        columns["function"] = from_trace.function
    order = [c for c in OPS_COLUMNS if c in columns]
    ops = pd.DataFrame(
        {
            **{c: columns[c] for c in order},
            "predicted_device": device,
            "traced_device": from_trace.traced,
        },
        copy=False,
    )
    cache = placer.cache
    tensors = tensor_codes = None
    if not details:  # each edge's tensor is its producer's output 0: the same every time
        if cache.edge_tensors is None:
            edges = placer.edges()
            cache.edge_tensors = _edge_tensors(edges.producers, edges.consumers, edges.lists, None)
            # One tensor per producer: its node, or past the nodes, a code per other name.
            codes = edges.producer_node.copy()
            unknown = np.flatnonzero(codes < 0)
            if len(unknown):
                codes[unknown] = (
                    len(placer.names)
                    + pd.factorize(edges.producers[unknown], use_na_sentinel=False)[0]
                )
            cache.tensor_codes = codes
        tensors, tensor_codes = cache.edge_tensors, cache.tensor_codes
    transfers = _copies_between(
        facts,
        placer.edges(),
        placed_on,
        node_device,
        details,
        placer.host_args(),
        from_trace.in_step,
        tensors,
        tensor_codes,
    )
    errors = [message for _, message in placer.errors]
    gpu_words = f"{gpus} GPU" + ("" if gpus == 1 else "s")
    tasks = len({task_of(d) for d in devices} - {""})
    where = f"each of the cluster's {tasks} tasks" if tasks > 1 else "this machine's devices"
    notes = [
        f"Predicted, not run: where TensorFlow's placer would put each op with {gpu_words} "
        f"added to {where} (soft placement {'on' if soft else 'off'})."
    ]
    if errors:
        notes.append(
            f"TensorFlow would refuse to place this graph ({len(errors)} problem"
            f"{'' if len(errors) == 1 else 's'}); the first: {errors[0]}"
        )
    result = PlacementTrace(
        ops=ops,
        events=_no_events(),
        transfers=transfers,
        devices=sorted(set(placed_on) | set(devices), key=device_sort_key),
        inputs=dict(facts.inputs),
        source=f"{trace.source or 'graph'} (predicted, {gpu_words})",
        mode=trace.mode,
        notes=notes,
    )
    result.facts = facts
    result.predicted = True
    return result


def _text(values: Any) -> np.ndarray:
    """An object array of ``values`` (pandas makes a text column of it)."""
    if isinstance(values, np.ndarray) and values.dtype == object:
        return values
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


@dataclass
class _TraceColumns:
    """What a prediction reads from the traced run, per node of the facts."""

    ops: Any  # the trace's ops frame it was read from
    mode: str
    traced: pd.Series  # where the node ran (its first row's device), "" when it did not
    function: pd.Series | None  # its first row's function (TF2 code), None otherwise
    in_step: np.ndarray | None  # did the traced step run it (None: nothing ran)


def _from_trace(trace: Any, cache: _FactsCache) -> _TraceColumns:
    """:class:`_TraceColumns` of ``trace`` (kept on ``cache`` for its ops frame)."""
    ops = trace.ops
    found = cache.trace
    if found is not None and found.ops is ops and found.mode == trace.mode:
        return found
    n = len(cache.names)
    # Each node's first row in the trace (-1: none), from the trace's rows' nodes.
    node_of_row = np.fromiter(map(cache.index.get, ops["op"].tolist(), repeat(-1)), np.int64)
    rows = np.flatnonzero(node_of_row >= 0)
    nodes, first = np.unique(node_of_row[rows], return_index=True)
    position = np.full(n, -1, dtype=np.int64)
    position[nodes] = rows[first]
    hit = position >= 0

    def aligned(column: str) -> pd.Series:
        values = ops[column].to_numpy(dtype=object)
        out = np.full(n, "", dtype=object)
        out[hit] = values[position[hit]]
        return pd.Series(out, copy=False)

    function = None
    if "function" in ops and trace.mode == "function" and len(ops):
        function = aligned("function")
    found = cache.trace = _TraceColumns(
        ops, trace.mode, aligned("device"), function, hit if len(ops) else None
    )
    return found


def _facts_columns(placer: _Placer, facts: GraphFacts) -> dict[str, Any]:
    """The predicted ops frame's columns that do not depend on the devices (the same Series
    for every prediction of these facts; pandas copies one on write)."""
    from ..model.kernels import GPU_KERNEL_VALUES, UNKNOWN

    cache = placer.cache
    shared = placer.classified is cache.classified
    if shared and cache.columns:
        return cache.columns
    names = placer.names
    n = len(names)
    codes = placer.code_array  # per code: type, kernels (placer.statics)
    by_code = [k if k is not None else UNKNOWN for k in placer.code_kernels]
    gpu_values = list(GPU_KERNEL_VALUES)
    gpu_codes = np.array([gpu_values.index(k.gpu_kernel) for k in by_code], dtype=np.int8)
    types = np.array([st.op_type for st in placer.statics], dtype=object)
    missing = np.ones(n, bool)
    columns = {
        "op": pd.Series(_text(names), copy=False),
        "type": pd.Series(types[codes], copy=False),
        "requested_device": pd.Series(_text(_in_order(facts.requested, names, "")), copy=False),
        "start_us": pd.Series(np.full(n, np.nan), copy=False),
        "duration_us": pd.Series(np.full(n, np.nan), copy=False),
        "runs": pd.Series(pd.arrays.IntegerArray(np.zeros(n, np.int64), missing), copy=False),
        "output_bytes": pd.Series(
            pd.arrays.IntegerArray(np.zeros(n, np.int64), missing.copy()), copy=False
        ),
        "function": pd.Series(np.full(n, "", dtype=object), copy=False),
        "kernels": pd.Series(
            np.array([k.kernels for k in by_code], dtype=object)[codes], copy=False
        ),
        "gpu_kernel": pd.Series(
            pd.Categorical.from_codes(gpu_codes[codes], categories=gpu_values), copy=False
        ),
    }
    if shared:
        cache.columns = columns
    return columns


@lru_cache(maxsize=1)
def _how_categories() -> list[str]:
    """The predicted ops frame's ``how`` categories."""
    from ..model.reasons import HOW_VALUES

    return [*HOW_VALUES, "error"]


_EMPTY_EVENTS: list[pd.DataFrame] = []


def _no_events() -> pd.DataFrame:
    """A new empty events frame (a copy of one made once)."""
    if not _EMPTY_EVENTS:
        from ..model.frames import EVENTS_COLUMNS

        _EMPTY_EVENTS.append(pd.DataFrame({c: [] for c in EVENTS_COLUMNS}))
    return _EMPTY_EVENTS[0].copy()
