"""The colocation graph: groups of nodes that must share a device, and their candidates.

Follows core/common_runtime/colocation_graph.cc: a ``Member`` per group root with its merged
request, resource device and supported device types; ``ColocateNodes`` (union-find), the
resource/ref, dataset and ``_class`` edges (``Initialize``), and ``GetDevicesForNode`` /
``FilterSupportedDevices``. :class:`_ColocationGraph` is the part of :class:`.placer._Placer`
that does this (a base class of it; the methods moved out of the former
``analyses/predict.py`` unchanged).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..._model.graphfacts import RESOURCE_COLOCATION_EXEMPT
from .devices import (
    _DEVICE_TYPE_PRIORITY,
    _EMPTY,
    Name,
    _compatible,
    _ensure,
    _matches,
    _merge,
    _merge_supported,
    _name_str,
    _PlacementError,
    _soft_name,
)


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


class _ColocationGraph:
    """The colocation graph's steps of :class:`.placer._Placer` (its state is the placer's)."""

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
