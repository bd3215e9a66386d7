"""The ``how`` and ``reason`` of each predicted node, from what the simulation did.

:class:`_Reasons` reads the placer's state after :meth:`~.placer._Placer.run` (who pinned a
group, which heuristic chose, what soft placement dropped), not guessed afterwards, to pick the
rule; the sentences are :mod:`tfplace_widget._explain.rules`', which a run's reasons say too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..._explain import rules
from ..._explain.rules import colocated_reason, link_words
from ..._model.devices import short_device, task_of
from .devices import _EMPTY, Name, _matches, _parse
from .nodes import _Node

if TYPE_CHECKING:  # pragma: no cover
    from .placer import _Placer

_HOST_RUNTIME_TYPES = frozenset({"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval"})


class _Reasons:
    """``how`` and ``reason`` from what the simulation did (not guessed afterwards)."""

    def __init__(self, placer: _Placer, assumed: Mapping[str, str] | None = None) -> None:
        """``assumed``: per pinned node (a function's resource ``_Arg``) whose device is an
        assumption, the sentence every node placed with it adds (:meth:`_assumptions`)."""
        self.p = placer
        self.has_gpu = "GPU" in placer.types_present
        self.available = ", ".join(short_device(d) for d in placer.devices)
        self._group_sizes: dict[int, int] = {}
        for i in list(placer.parent):
            root = placer.find(i)
            self._group_sizes[root] = self._group_sizes.get(root, 0) + 1
        self.assumed_of = self._assumptions(assumed or {})
        self.assumed_nodes = set(self.assumed_of)

    def __call__(self, i: int) -> tuple[str, str]:
        how, reason = self._explain(i)
        assumed = self.assumed_of.get(i)
        return (how, f"{reason} {assumed}") if assumed else (how, reason)

    def _explain(self, i: int) -> tuple[str, str]:
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

    def _assumptions(self, assumed: Mapping[str, str]) -> dict[int, str]:
        """The nodes whose device follows a pinned node's assumed device, each with that
        node's sentence: its resource or colocation group, the results that return it, and the
        ops the placer puts with their input (Identity, Shape...) or their consumers (a
        constant) when those follow it. The pinned node's own reason states it already."""
        p = self.p
        sources = {p.index[name]: text for name, text in assumed.items() if name in p.index}
        if not sources:
            return {}
        found: dict[int, str] = {}
        for j, text in sources.items():
            if j in p.parent:
                for member in self._members(p.find(j)):
                    found.setdefault(member, text)
        for i, source in p.result_sources.items():
            if source in sources or source in found:
                found.setdefault(i, sources.get(source) or found[source])
        chosen = [i for i, how in p.how_chosen.items() if how in ("input", "consumers")]
        changed = True
        while changed:  # followers of followers, in any order
            changed = False
            for i in chosen:
                if i in found:
                    continue
                node = p.nodes[i]
                if p.how_chosen[i] == "input":
                    led = [node.inputs[0]] if node.inputs else []
                else:
                    led = list(dict.fromkeys(c for c in node.consumers.tolist() if c >= 0))
                if led and all(j in found or j in sources for j in led):
                    found[i] = found.get(led[0]) or sources[led[0]]
                    changed = True
        for j in sources:
            found.pop(j, None)
        return found

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
        dropped_text = self._dropped(i, dropped) if dropped else ""
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
        index = p.index

        def in_group(producer: str) -> bool:
            return producer in index and p.find(index[producer]) == root

        return index.get(rules.resource_source(p.names[i], p.facts, in_group), -1)

    def _dropped(self, i: int, target: str) -> str:
        """The sentence of node ``i``'s colocation with ``target`` that soft placement dropped
        (``target``'s device named when it is another node's)."""
        p = self.p
        j = p.index.get(target, i)
        return rules.dropped_colocation(
            target, short_device(p.devices[p.assigned[j]]) if j != i else ""
        )

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
        how = rules.asked_how(self.p.facts, node.name)
        partial = request[3] is None or request[4] is None
        return rules.explicit(node.request, how, short, partial=partial)

    def _soft(self, i: int, node: _Node, request: Name, short: str) -> str:
        p = self.p
        wanted, exists = request[3], bool(p._matching(request))
        missing = ""  # kernel_types holds the predicted machine's device types only
        if exists and wanted is not None and wanted not in dict(node.kernel_types):
            missing = rules.no_kernel(node.op_type, wanted, self._dtypes(i, wanted))
        return rules.soft(
            rules.asked(node.request, p.facts, node.name),
            short,
            exists=exists,
            available=self.available,
            where="there",
            missing=missing,
            group_blocked=True,
        )

    def _dtypes(self, i: int, device_type: str) -> str:
        """The dtypes no ``device_type`` kernel serves, when only some of its kernels' do."""
        p = self.p
        kernels = getattr(p.facts, "kernels", {}).get(p.nodes[i].name)
        detail = p.details.get(p.nodes[i].name)
        if device_type == "GPU" and kernels is not None and kernels.gpu_kernel == "dtype":
            return detail.dtypes if detail is not None and detail.dtypes else "these attrs"
        return ""

    def _implicit(self, i: int, node: _Node, short: str) -> str:
        p = self.p
        chosen = p.how_chosen.get(i, "")
        if chosen == "input":
            return rules.follows_input(node.op_type, p.nodes[node.inputs[0]].name, short)
        if chosen == "consumers":
            consumers = [p.names[c] for c in node.consumers.tolist() if c >= 0]
            return rules.with_consumers(consumers, short)
        supported = dict(node.kernel_types)
        if self.has_gpu and "GPU" not in supported:
            missing = rules.no_kernel(node.op_type, "GPU", self._dtypes(i, "GPU"))
            return rules.implicit_no_kernel(missing, short)
        kernels = getattr(p.facts, "kernels", {}).get(node.name)
        host = ""
        if kernels is not None and kernels.gpu_kernel == "host" and short.startswith("GPU"):
            host = (
                " Its GPU kernel keeps every input and output in host memory, so it computes "
                "on the host."
            )
        local = p.local_task
        if local and task_of(p.devices[p.assigned[i]]) == local:
            return rules.implicit_local_task(node.op_type, local, short, host)
        if local:
            return rules.implicit_remote_task(node.op_type, local, short, host)
        return rules.implicit_default(node.op_type, short, host)
