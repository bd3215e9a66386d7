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
   kernel priority, then device type priority (GPU before CPU), then name; the first is taken,
   except that metadata ops (Shape, Size, Rank, ShapeN) and a lone Identity take their input's
   device when it is a candidate; placing a node pins its whole group to that device;
5. generators (no inputs, one non-ref output) come last and join their consumers when these
   all share one candidate device.

:func:`predict_devices` is the pure core (no session, no trace); :func:`predict_placement`
wraps it into a :class:`~tfplace_widget.trace.PlacementTrace` marked ``predicted``. With
``gpus=0`` on this machine the prediction must equal what TensorFlow did (tests/test_predict.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import pandas as pd

from ..devices import canonical_device, device_sort_key, parse_device, short_device
from ..graphfacts import GraphFacts

# DeviceFactory priorities (GPU 210, CPU 70): GPU before CPU; other types after them.
_DEVICE_TYPE_PRIORITY = {"GPU": 210, "CPU": 70, "TPU": 60}
_METADATA_TYPES = frozenset({"Shape", "ShapeN", "Size", "Rank"})
_IDENTITY_TYPES = frozenset({"Identity", "RefIdentity"})
_HOST_RUNTIME_TYPES = frozenset({"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval"})
# Consumers that forward a resource input instead of reading it (InputColocationExemption).
_EXEMPT_FROM_RESOURCE_COLOCATION = frozenset(
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
PREDICTED_COLUMNS = ["op", "predicted_device", "how", "reason"]
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
    job, replica, task, dtype, index = name
    parts = []
    if job is not None:
        parts.append(f"/job:{job}")
    if replica is not None:
        parts.append(f"/replica:{replica}")
    if task is not None:
        parts.append(f"/task:{task}")
    if dtype is not None:
        parts.append(f"/device:{dtype}:{'*' if index is None else index}")
    return "".join(parts)


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
def _type_priorities(op_type: str) -> dict[str, int]:
    """Highest kernel priority per device type (DEFAULT kernels included) for ``op_type``."""
    try:
        from tensorflow.python.framework import kernels

        registered = kernels.get_registered_kernels_for_op(op_type).kernel
    except Exception:
        return {}
    best: dict[str, int] = {}
    for kernel in registered:
        best[kernel.device_type] = max(best.get(kernel.device_type, 0), kernel.priority)
    return best


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
# The simulation
# ---------------------------------------------------------------------------------------------
@dataclass
class _Member:
    """One colocation group root's state (``Member`` in colocation_graph.cc)."""

    parent: int
    supported: list  # [(device type, priority)], sorted
    requested: Name = _EMPTY
    resource: Name = _EMPTY
    assigned: Name = _EMPTY
    rank: int = 0
    possible: list | None = None
    assigned_by: int = -1  # the node whose placement pinned the group


@dataclass
class _Node:
    name: str
    op_type: str
    request: str
    inputs: list  # data producer indices (-1: not in the graph)
    controls: list = field(default_factory=list)  # control producer indices
    consumers: list = field(default_factory=list)  # out-edge destinations, data and control
    kernel_types: list = field(default_factory=list)
    generator: bool = False
    resource_generator: bool = False
    dataset: bool = False


class _Placer:
    def __init__(
        self,
        facts: GraphFacts,
        devices: Sequence[str],
        soft: bool,
        details: Mapping[str, Any] | None,
        pinned: Mapping[str, str] | None = None,
    ) -> None:
        self.facts = facts
        self.soft = soft
        self.devices = [canonical_device(d) for d in devices]
        self.device_names = [_parse(d) for d in self.devices]
        present = {n[3] for n in self.device_names}
        self.types_present = sorted(present, key=lambda t: (-_DEVICE_TYPE_PRIORITY.get(t, 0), t))
        self.details = details or {}
        self.errors: list[str] = []
        self.failed: dict[int, str] = {}
        self._candidates: dict[tuple, list[int]] = {}
        names = _graph_order(facts)
        self.index = {name: i for i, name in enumerate(names)}
        device_index = {d: k for k, d in enumerate(self.devices)}
        self.pinned = {
            self.index[name]: device_index[canonical_device(device)]
            for name, device in (pinned or {}).items()
            if name in self.index and canonical_device(device) in device_index
        }
        # TF2: a tf.device around the eager call is the function's default device, not a
        # request: it goes first among a node's candidates (FilterSupportedDevices).
        self.default: dict[int, int] = {}
        for name, scope in getattr(facts, "scope", {}).items():
            device = getattr(scope, "device", "")
            if name in self.index and device and not getattr(scope, "call", ""):
                try:
                    matching = self._filter(self._matching(_parse(device)), self._all_types())
                except ValueError:
                    continue
                if matching:
                    self.default[self.index[name]] = matching[0]
        self.nodes = [self._node(name) for name in names]
        self._pin_results()
        self.members = [self._member(i, node) for i, node in enumerate(self.nodes)]
        self.assigned = [-1] * len(self.nodes)  # device index per node
        self.how_chosen = [""] * len(self.nodes)
        self.colocation_dropped: dict[int, str] = {}
        self.demanded: dict[int, Name] = {}  # the group's merged request when a node was placed

    # -- set-up -----------------------------------------------------------------------------
    def _node(self, name: str) -> _Node:
        facts, index = self.facts, self.index
        op_type = facts.types[name]
        inputs = [index.get(p, -1) for p in facts.inputs.get(name, ())]
        detail = self.details.get(name)
        controls = [index.get(c, -1) for c in detail.controls] if detail else []
        request = "" if index[name] in self.default else facts.requested.get(name, "") or ""
        node = _Node(name, op_type, request, inputs, controls)
        count, ref_or_resource, dataset = _op_outputs(op_type)
        if detail is not None and detail.outputs is not None:
            count = detail.outputs
        node.dataset = dataset
        if not inputs:
            node.generator = count == 1 and not _is_ref_output(op_type)
            node.resource_generator = count == 1 and (
                ref_or_resource or name in self._resource_producers()
            )
        node.kernel_types = self._supported(name, op_type)
        return node

    def _all_types(self) -> list:
        return [(t, 0) for t in self.types_present]

    def _pin_results(self) -> None:
        """``PinArgsAndRets``: a function's ``_Retval`` takes the device its value asked for
        (following Identity ops with no device of their own) when that names one device."""
        nodes = self.nodes
        for i, node in enumerate(nodes):
            if node.op_type != "_Retval" or i in self.pinned or not node.inputs:
                continue
            source = node.inputs[0]
            while (
                source >= 0
                and nodes[source].op_type in _IDENTITY_TYPES
                and not nodes[source].request
                and source not in self.pinned
                and not self.facts.colocated_with.get(nodes[source].name)
                and nodes[source].inputs
            ):
                source = nodes[source].inputs[0]
            if source < 0:
                continue
            if self.facts.colocated_with.get(nodes[source].name):
                continue  # TF colocates it with that group; left to the placer here
            if source in self.pinned:
                self.pinned[i] = self.pinned[source]
            elif nodes[source].request:
                try:
                    matching = self._matching(_parse(nodes[source].request))
                except ValueError:
                    continue
                if len(matching) == 1:
                    self.pinned[i] = matching[0]

    def _resource_producers(self) -> set:
        cached = self.__dict__.get("_producers")
        if cached is None:
            cached = {p for ps in self.facts.resource_inputs.values() for p in ps}
            self.__dict__["_producers"] = cached
        return cached

    def _supported(self, name: str, op_type: str) -> list:
        kernels = getattr(self.facts, "kernels", {}).get(name)
        if kernels is None or kernels.gpu_kernel == "NA":  # unknown op: every type, priority 0
            return [(t, 0) for t in self.types_present]
        priorities = _type_priorities(op_type)
        served = kernels.kernels.split()
        out = []
        for dtype in self.types_present:
            if dtype in served:
                out.append((dtype, priorities.get(dtype, priorities.get("DEFAULT", 0))))
        return sorted(out, key=_type_key)  # stable: the present types' order breaks ties

    def _member(self, i: int, node: _Node) -> _Member:
        member = _Member(parent=i, supported=node.kernel_types)
        if i in self.pinned:  # already assigned (a function's _Arg): requested = assigned
            member.assigned = member.requested = self.device_names[self.pinned[i]]
            return member
        if not node.kernel_types:
            self._fail(
                i,
                f"No OpKernel was registered to support Op '{node.op_type}' used by "
                f"{node.name} on these devices ({self._types_text()})",
            )
        if node.request:
            try:
                parsed = _parse(node.request)
            except ValueError:
                self._fail(i, f"Malformed device specification '{node.request}'")
                return member
            if node.resource_generator:
                member.resource = member.requested = parsed
            else:
                member.requested = parsed
        return member

    def _types_text(self) -> str:
        return ", ".join(self.types_present)

    def _fail(self, i: int, message: str) -> None:
        self.failed.setdefault(i, message)
        self.errors.append(message)

    # -- union-find ---------------------------------------------------------------------------
    def find(self, i: int) -> int:
        members = self.members
        root = i
        while members[root].parent != root:
            root = members[root].parent
        while members[i].parent != root:
            members[i].parent, i = root, members[i].parent
        return root

    def colocate(self, x: int, y: int) -> None:
        """``ColocationGraph::ColocateNodes``; raises ``_PlacementError`` (nothing joined)."""
        xr, yr = self.find(x), self.find(y)
        if xr == yr:
            return
        members = self.members
        if members[xr].rank < members[yr].rank:
            new, old = yr, xr
        else:
            new, old = xr, yr
        a, b = members[new], members[old]
        assigned = _merge(a.assigned, b.assigned, False)
        resource = _merge(a.resource, b.resource, False)
        requested = _merge(a.requested, b.requested, self.soft)
        requested = _ensure(_ensure(requested, assigned), resource)
        a.assigned, a.resource, a.requested = assigned, resource, requested
        supported = _merge_supported(a.supported, b.supported)
        if not supported:
            raise _PlacementError(
                f"Cannot colocate nodes {self.nodes[x].name} and {self.nodes[y].name} because "
                "no device type supports both of those nodes and the other nodes colocated "
                "with them"
            )
        a.supported = supported
        b.parent = new
        if members[new].rank == members[old].rank:
            a.rank += 1

    def colocate_resource_edge(self, src: int, dst: int) -> None:
        sr, dr = self.find(src), self.find(dst)
        s, d = self.members[sr], self.members[dr]
        if not _compatible(s.assigned, d.assigned) or not _compatible(s.resource, d.resource):
            raise _PlacementError(
                "Cannot place the graph because a reference or resource edge connects "
                f"colocation groups with incompatible resource devices: "
                f"{_name_str(s.resource)} vs {_name_str(d.resource)}. The edge src node is "
                f"{self.nodes[src].name} , and the dst node is {self.nodes[dst].name}"
            )
        if not _compatible(s.requested, d.requested):
            d.requested = _ensure(_ensure(s.requested, d.assigned), d.resource)
        self.colocate(src, dst)

    # -- Initialize ---------------------------------------------------------------------------
    def initialize(self) -> None:
        nodes = self.nodes
        facts = self.facts
        for i, node in enumerate(nodes):  # resource and ref edges, dataset variant edges
            pinned = facts.resource_inputs.get(node.name)
            exempt = node.op_type in _EXEMPT_FROM_RESOURCE_COLOCATION
            if pinned and not exempt:
                for producer in pinned:
                    j = self.index.get(producer, -1)
                    if j >= 0:
                        self._resource_edge(j, i)
            if node.dataset:
                for j in node.inputs:
                    if j >= 0 and nodes[j].dataset:
                        self._resource_edge(j, i)
        roots: dict[str, int] = {}
        colocated = facts.colocated_with
        for i, node in enumerate(nodes):  # _class loc:@X groups, then the node's own name
            for group in (*colocated.get(node.name, ()), node.name):
                root = roots.setdefault(group, i)
                if root == i:
                    continue
                try:
                    self.colocate(i, root)
                except _PlacementError as exc:
                    if not self.soft:
                        self._fail(i, f"Cannot colocate {node.name} with {group}: {exc}")
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
            )

    # -- placement ----------------------------------------------------------------------------
    def candidates(self, i: int) -> list[int]:
        """``GetDevicesForNode``: device indices for ``i``'s group, best first."""
        root = self.find(i)
        member = self.members[root]
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
                f"{self.nodes[i].op_type} (kernels for {self._kernel_types(i) or 'no device'}; "
                f"devices: {self._types_text()})"
            )
        return found

    def _kernel_types(self, i: int) -> str:
        kernels = getattr(self.facts, "kernels", {}).get(self.nodes[i].name)
        return kernels.kernels if kernels is not None else ""

    def _no_device_message(self, i: int, member: _Member) -> str:
        node = self.nodes[i]
        available = ", ".join(self.devices)
        own = _parse(node.request) if node.request else _EMPTY
        if own == member.requested:
            if not self._matching(own):
                return (
                    f"{node.name} was explicitly assigned to {node.request} but available "
                    f"devices are [ {available} ]. Make sure the device specification refers "
                    "to a valid device."
                )
            if own[3] is not None:
                return (
                    f"Could not satisfy explicit device specification '{node.request}' because "
                    f"no supported kernel for {own[3]} devices is available (Op: "
                    f"{node.op_type}; kernels: {self._kernel_types(i) or 'none'})."
                )
            return f"Could not satisfy explicit device specification '{node.request}'"
        return (
            f"Could not satisfy explicit device specification '{node.request}' because the "
            f"node {node.name} was colocated with a group of nodes that required incompatible "
            f"device '{_name_str(member.requested)}'. All available devices [{available}]."
        )

    def _matching(self, spec: Name) -> list[int]:
        return [k for k, name in enumerate(self.device_names) if _matches(spec, name)]

    def _filter(self, device_indices: Iterable[int], supported: list) -> list[int]:
        """``FilterSupportedDevices``: by kernel priority, type priority, then name."""
        priority = dict(supported)
        ranked = []
        for k in device_indices:
            dtype = self.device_names[k][3]
            if dtype in priority:
                key = (-priority[dtype], -_DEVICE_TYPE_PRIORITY.get(dtype, 0), self.devices[k])
                ranked.append((key, k))
        ranked.sort()
        return [k for _, k in ranked]

    def assign(self, i: int, device: int) -> None:
        """``AssignAndLog``: place ``i`` and pin its group to that device."""
        self.assigned[i] = device
        root = self.find(i)
        member = self.members[root]
        full = self.device_names[device]
        if member.assigned == full:
            return
        member.assigned = _merge(member.assigned, full, False)
        member.resource = _override(member.resource, full)
        member.requested = _override(member.requested, full)
        member.possible = None
        if member.assigned_by < 0:
            member.assigned_by = i

    def run(self) -> None:
        self.initialize()
        nodes = self.nodes
        second = []
        for i, node in enumerate(nodes):
            if i in self.pinned:
                self.assign(i, self.pinned[i])
                self.how_chosen[i] = "pinned"
                continue
            if node.generator:
                second.append(i)
                continue
            if i in self.failed and not node.kernel_types:
                continue
            try:
                devices = self.candidates(i)
            except _PlacementError as exc:
                self._fail(i, f"Cannot assign a device for operation {node.name}: {exc}")
                continue
            chosen = -1
            if (node.op_type in _METADATA_TYPES and node.inputs) or self._lone_identity(i):
                source = node.inputs[0]
                if source >= 0 and self.assigned[source] in devices:
                    chosen = self.assigned[source]
                    self.how_chosen[i] = "input"
            if chosen < 0:
                chosen = devices[0]
            self.demanded[i] = self.members[self.find(i)].requested
            self.assign(i, chosen)
        for i in second:
            node = nodes[i]
            if i in self.failed and not node.kernel_types:
                continue
            try:
                devices = self.candidates(i)
            except _PlacementError as exc:
                self._fail(i, f"Cannot assign a device for operation {node.name}: {exc}")
                continue
            chosen = -1
            consumers = node.consumers
            if consumers:
                first = self.assigned[consumers[0]] if consumers[0] >= 0 else -1
                same = all((self.assigned[c] if c >= 0 else -1) == first for c in consumers)
                if same and first >= 0 and first in devices:
                    chosen = first
                    self.how_chosen[i] = "consumers"
            if chosen < 0:
                chosen = devices[0]
            self.demanded[i] = self.members[self.find(i)].requested
            self.assign(i, chosen)

    def _lone_identity(self, i: int) -> bool:
        """``MatchIdentityOperation``: an Identity with no request, one in-edge and one out-edge,
        whose input and output ask for the same device (the same string)."""
        node = self.nodes[i]
        if node.op_type not in _IDENTITY_TYPES or node.request:
            return False
        if len(node.inputs) + len(node.controls) != 1 or len(node.consumers) != 1:
            return False
        source, sink = node.inputs[0], node.consumers[0]
        source_request = self.nodes[source].request if source >= 0 else ""
        sink_request = self.nodes[sink].request if sink >= 0 else ""  # _SINK asks for nothing
        return source_request == sink_request

    def link_consumers(self) -> None:
        """Out-edges per node (data and control); a node nothing consumes feeds ``_SINK``."""
        for i, node in enumerate(self.nodes):
            for j in (*node.inputs, *node.controls):
                if j >= 0:
                    self.nodes[j].consumers.append(i)
        for node in self.nodes:
            if not node.consumers:
                node.consumers.append(-1)  # the _SINK node: never assigned


def _graph_order(facts: GraphFacts) -> list[str]:
    """The nodes in the order TensorFlow's graph constructor gives them ids: topological, the
    earliest node in the GraphDef first among those ready. A graph built in Python (or a
    GraphDef written in order) is already so; others (function graphs read back from their
    partitions) are sorted."""
    names = list(facts.types)
    position = {name: k for k, name in enumerate(names)}
    inputs = facts.inputs
    ordered = True
    for k, name in enumerate(names):
        for producer in inputs.get(name, ()):
            if position.get(producer, -1) >= k:
                ordered = False
                break
        if not ordered:
            break
    if ordered:
        return names
    import heapq

    pending = {}
    consumers: dict[int, list[int]] = {}
    for k, name in enumerate(names):
        sources = {position[p] for p in inputs.get(name, ()) if p in position and p != name}
        pending[k] = len(sources)
        for source in sources:
            consumers.setdefault(source, []).append(k)
    ready = [k for k, count in pending.items() if count == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        k = heapq.heappop(ready)
        out.append(k)
        for c in consumers.get(k, ()):
            pending[c] -= 1
            if pending[c] == 0:
                heapq.heappush(ready, c)
    if len(out) < len(names):  # a cycle (loop back edges): the rest in GraphDef order
        seen = set(out)
        out.extend(k for k in range(len(names)) if k not in seen)
    return [names[k] for k in out]


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
    which lives where the caller's tensor or variable is) to their device.
    """
    if not devices:
        raise ValueError("devices is empty: the placer needs at least one device (a CPU).")
    placer = _Placer(facts, devices, soft_placement, details, pinned)
    placer.link_consumers()
    placer.run()
    explain = _Reasons(placer)
    names, predicted, how, reason = [], [], [], []
    device_of = placer.devices
    for i, node in enumerate(placer.nodes):
        names.append(node.name)
        d = placer.assigned[i]
        predicted.append(device_of[d] if d >= 0 else "")
        h, r = explain(i)
        how.append(h)
        reason.append(r)
    frame = pd.DataFrame(
        {"op": names, "predicted_device": predicted, "how": how, "reason": reason},
        columns=PREDICTED_COLUMNS,
    )
    frame.attrs["errors"] = list(placer.errors)
    return frame


class _Reasons:
    """``how`` and ``reason`` from what the simulation did (not guessed afterwards)."""

    def __init__(self, placer: _Placer) -> None:
        self.p = placer
        self.has_gpu = "GPU" in placer.types_present
        self.available = ", ".join(short_device(d) for d in placer.devices)
        self._group_sizes: dict[int, int] = {}
        for i in range(len(placer.nodes)):
            root = placer.find(i)
            self._group_sizes[root] = self._group_sizes.get(root, 0) + 1

    def __call__(self, i: int) -> tuple[str, str]:
        p = self.p
        node = p.nodes[i]
        if i in p.failed:
            return "error", f"TensorFlow would refuse to place it: {p.failed[i]}."
        device = p.devices[p.assigned[i]]
        short = short_device(device)
        if p.how_chosen[i] == "pinned":
            return "runtime", (
                f"A function argument: it lives where the caller's tensor or variable is, "
                f"{short}, before the placer runs."
            )
        if node.op_type in _HOST_RUNTIME_TYPES:
            return "runtime", (
                f"Inserted by the runtime to return a function's result; it goes with the value "
                f"it returns, on {short}."
            )
        root = p.find(i)
        member = p.members[root]
        pinner = member.assigned_by
        request = _parse(node.request) if node.request else _EMPTY
        dropped = p.colocation_dropped.get(i)
        dropped_text = (
            f" It was also colocated with {dropped} (tf.compat.v1.colocate_with), which soft "
            "placement dropped because the two could not share a device."
            if dropped
            else ""
        )
        demanded = p.demanded.get(i, _EMPTY)
        grouped = self._group_sizes.get(root, 1) > 1
        if grouped and (
            (pinner >= 0 and pinner != i) or (demanded != _EMPTY and demanded != request)
        ):
            if node.request and _matches(request, p.device_names[p.assigned[i]]):
                return "explicit", self._explicit(node, short) + dropped_text
            partner = self._partner(i, root, pinner)
            asked = f"Asked for {node.request}, but it" if node.request else "It"
            return "colocated", (
                f"{asked} {self._link(i, partner)}; the placer keeps them on one device, so it "
                f"runs where the group goes: {short}.{dropped_text}"
            )
        if node.request:
            if _matches(request, p.device_names[p.assigned[i]]):
                return "explicit", self._explicit(node, short) + dropped_text
            return "soft", self._soft(i, node, request, short) + dropped_text
        if p.default.get(i, -1) == p.assigned[i] and not p.how_chosen[i]:
            scope = p.facts.scope[node.name].device
            return "explicit", (
                f"It has no tf.device of its own: the tf.device({scope}) around the call makes "
                f"{short} the function's default device, which the placer tries first."
            ) + dropped_text
        return "implicit", self._implicit(i, node, short) + dropped_text

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
            for j in range(len(self.p.nodes)):
                cached.setdefault(self.p.find(j), []).append(j)
            self.__dict__["_by_root"] = cached
        return cached.get(root, [])

    def _link(self, i: int, partner: int) -> str:
        p = self.p
        name, other = p.nodes[i].name, p.nodes[partner].name
        resource = p.facts.resource_inputs
        if other in resource.get(name, ()) or name in resource.get(other, ()):
            return f"shares a resource/ref edge with {other}"
        colocated = p.facts.colocated_with
        if other in colocated.get(name, ()) or name in colocated.get(other, ()):
            return f"is colocated with {other} (tf.compat.v1.colocate_with)"
        return (
            f"is in one colocation group with {other} (joined by resource/ref edges and "
            "tf.compat.v1.colocate_with)"
        )

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
        chosen = p.how_chosen[i]
        if chosen == "input":
            source = p.nodes[node.inputs[0]].name
            return (
                f"No device requested: the placer puts a {node.op_type} with its input "
                f"({source}) to avoid a copy, so it runs on {short}."
            )
        if chosen == "consumers":
            consumers = [p.nodes[c].name for c in node.consumers if c >= 0]
            shown = ", ".join(dict.fromkeys(consumers[:3]))
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
        return (
            f"No device requested: the placer takes the highest-priority device type with a "
            f"kernel for {node.op_type} (GPU before CPU), lowest index first: {short}.{host}"
        )


# ---------------------------------------------------------------------------------------------
# Transfers
# ---------------------------------------------------------------------------------------------
TRANSFER_PREDICTED_COLUMNS = ["tensor", "src_device", "dst_device", "bytes", "predicted", "copy"]


def predict_transfers(
    facts: GraphFacts, device_of: Mapping[str, str], details: Mapping[str, NodeDetail] | None
) -> pd.DataFrame:
    """Predicted copies: one row per (tensor, destination device) crossing devices, and per
    same-GPU edge whose producer and consumer keep the tensor in different memories (a GPU
    kernel's host-memory argument next to a device-memory one). ``copy`` says which:
    ``HtoD``, ``DtoH``, ``DtoD`` or ``HtoH`` (between two CPUs)."""
    kernels = getattr(facts, "kernels", {})
    details = details or {}
    seen: set = set()
    rows = []
    for consumer, producers in facts.inputs.items():
        dst = device_of.get(consumer, "")
        if not dst:
            continue
        detail = details.get(consumer)
        tensors = detail.input_tensors if detail is not None else ()
        consumer_facts = kernels.get(consumer)
        for slot, source in enumerate(producers):
            src = device_of.get(source, "")
            if not src:
                continue
            tensor = tensors[slot] if slot < len(tensors) else f"{source}:0"
            out_slot = int(tensor.rpartition(":")[2] or 0)
            src_host = _in_host_memory(src, kernels.get(source), out_slot, output=True)
            dst_host = _in_host_memory(dst, consumer_facts, slot, output=False)
            if src == dst and src_host == dst_host:
                continue
            key = (tensor, src, dst, dst_host)
            if key in seen:
                continue
            seen.add(key)
            copy = ("H" if src_host else "D") + "to" + ("H" if dst_host else "D")
            rows.append((tensor, src, dst, pd.NA, True, copy))
    frame = pd.DataFrame(rows, columns=TRANSFER_PREDICTED_COLUMNS)
    frame["bytes"] = frame["bytes"].astype("Int64")
    frame["predicted"] = frame["predicted"].astype(bool)
    return frame


def _in_host_memory(device: str, kernel: Any, index: int, *, output: bool) -> bool:
    if "device:CPU:" in device:
        return True
    if kernel is None:
        return False
    host = kernel.gpu_host_outputs if output else kernel.gpu_host_inputs
    return index in host


# ---------------------------------------------------------------------------------------------
# predict_placement
# ---------------------------------------------------------------------------------------------
def gpu_devices(gpus: int) -> list[str]:
    """The canonical names of ``gpus`` local GPUs."""
    return [f"/job:localhost/replica:0/task:0/device:GPU:{k}" for k in range(gpus)]


def _check_gpus(gpus: Any) -> int:
    if isinstance(gpus, bool) or not isinstance(gpus, int):
        raise TypeError(
            f"gpus must be a whole number of GPUs (0, 1, 2...), not {type(gpus).__name__}: "
            "e.g. predict_placement(fn, gpus=1)."
        )
    if not 0 <= gpus <= 64:
        raise ValueError(f"gpus must be from 0 to 64, not {gpus}.")
    return gpus


def predict_placement(fn_or_trace: Any, gpus: int = 1, **trace_options: Any) -> Any:
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
    """
    from ..trace import PlacementTrace

    gpus = _check_gpus(gpus)
    details = None
    if isinstance(fn_or_trace, PlacementTrace):
        soft = trace_options.pop("soft_placement", True)
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
    host_devices = [d for d in trace.devices if "device:GPU:" not in d]
    devices = sorted(set(host_devices) | set(gpu_devices(gpus)), key=device_sort_key)
    if not devices:
        devices = [HOST, *gpu_devices(gpus)]
    pinned = _pinned_arguments(trace, facts, gpus)
    frame = predict_devices(facts, devices, soft_placement=soft, details=details, pinned=pinned)
    return _predicted_trace(trace, facts, frame, devices, gpus, soft, details)


def _pinned_arguments(trace: Any, facts: GraphFacts, gpus: int) -> dict[str, str]:
    """Where a function's ``_Arg`` nodes live before the placer runs: the caller's tensor on
    the host, where it was here; a variable's handle on its variable's device. A variable that
    was on the first CPU here (made with no tf.device, most likely) is on GPU:0 on a machine
    with a GPU, where its reads then follow it."""
    args = [name for name, op_type in facts.types.items() if op_type == "_Arg"]
    if not args:
        return {}
    ran = trace.ops.drop_duplicates("op")
    traced = dict(zip(ran["op"], ran["device"], strict=True))
    resources = {p for ps in facts.resource_inputs.values() for p in ps}
    cpus = sorted((d for d in trace.devices if "device:CPU:" in d), key=device_sort_key)
    first_cpu = cpus[0] if cpus else HOST
    pinned = {}
    for name in args:
        device = traced.get(name) or first_cpu
        if name in resources and gpus and device == first_cpu:
            device = gpu_devices(1)[0]
        pinned[name] = device
    return pinned


def _trace_for_facts(fn: Any, options: dict[str, Any]) -> tuple[Any, Any, bool]:
    """Trace ``fn`` for real (this machine, the user's options) and read its graph's details."""
    from .. import tracer

    options = dict(options)
    args = tuple(options.pop("args", ()) or ())
    tracer.check_option_names(options, "predict_placement")
    soft = options.get("soft_placement", True)
    if not isinstance(soft, bool):
        raise TypeError(f"soft_placement must be True or False, not {soft!r}.")
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


def _tf2(fn: Any) -> bool:
    from ..function_tracer import is_tf2_callable

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
    frame: pd.DataFrame,
    devices: list[str],
    gpus: int,
    soft: bool,
    details: Mapping[str, NodeDetail] | None,
) -> Any:
    from ..analyses.kernels import GPU_KERNEL_VALUES, UNKNOWN
    from ..frames import EVENTS_COLUMNS, OPS_COLUMNS
    from ..reasons import HOW_VALUES
    from ..trace import PlacementTrace

    names = frame["op"].tolist()
    predicted = frame["predicted_device"].tolist()
    ran = trace.ops.drop_duplicates("op")
    traced = dict(zip(ran["op"], ran["device"], strict=True))
    function_of = dict(zip(ran["op"], ran["function"], strict=True)) if "function" in ran else {}
    kernels = getattr(facts, "kernels", {})
    known = [kernels.get(name, UNKNOWN) for name in names]
    n = len(names)
    ops = pd.DataFrame(
        {
            "op": names,
            "type": [facts.types[name] for name in names],
            "device": predicted,
            "requested_device": [facts.requested.get(name, "") for name in names],
            "how": pd.Categorical(frame["how"], categories=[*HOW_VALUES, "error"]),
            "reason": frame["reason"].tolist(),
            "start_us": pd.Series([float("nan")] * n, dtype="float64"),
            "duration_us": pd.Series([float("nan")] * n, dtype="float64"),
            "runs": pd.array([pd.NA] * n, dtype="Int64"),
            "output_bytes": pd.array([pd.NA] * n, dtype="Int64"),
            "function": [function_of.get(name, "") for name in names],
            "kernels": [k.kernels for k in known],
            "gpu_kernel": pd.Categorical(
                [k.gpu_kernel for k in known], categories=list(GPU_KERNEL_VALUES)
            ),
        }
    )
    ops = ops[[c for c in OPS_COLUMNS if c in ops]]
    ops["predicted_device"] = predicted
    ops["traced_device"] = [traced.get(name, "") for name in names]
    device_of = {name: d for name, d in zip(names, predicted, strict=True) if d}
    transfers = predict_transfers(facts, device_of, details)
    errors = frame.attrs.get("errors", [])
    gpu_words = f"{gpus} GPU" + ("" if gpus == 1 else "s")
    notes = [
        f"Predicted, not run: where TensorFlow's placer would put each op with {gpu_words} "
        f"added to this machine's devices (soft placement {'on' if soft else 'off'})."
    ]
    if errors:
        notes.append(
            f"TensorFlow would refuse to place this graph ({len(errors)} problem"
            f"{'' if len(errors) == 1 else 's'}); the first: {errors[0]}"
        )
    result = PlacementTrace(
        ops=ops.reset_index(drop=True),
        events=pd.DataFrame({c: [] for c in EVENTS_COLUMNS}),
        transfers=transfers,
        devices=sorted({d for d in predicted if d} | set(devices), key=device_sort_key),
        inputs=dict(facts.inputs),
        source=f"{trace.source or 'graph'} (predicted, {gpu_words})",
        mode=trace.mode,
        notes=notes,
    )
    result.facts = facts
    result.predicted = True
    return result
