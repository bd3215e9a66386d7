"""Why each op of a run sits where it does: the ``how`` and ``reason`` columns.

Which placer rule placed each op, read from the graph and the devices its ops ran on; the
sentences are :mod:`.rules`' (a prediction's reasons say them the same way). Pure Python: the
kernel registry is handed in (``kernel_types``, by default the registry the facts were read
with), so tests and loaded traces need no TensorFlow session; without one, an op type's kernels
are unknown and no reason claims a kernel is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any

from .._model.devices import DeviceSpec, device_sort_key, parse_device, short_device, task_of
from .._model.graphfacts import RESOURCE_COLOCATION_EXEMPT, GraphFacts, linked_groups
from .._model.kernels import SYMBOLIC_DEVICE_TYPES
from . import rules
from .rules import (
    HOW_VALUES,
    colocated_reason,
    functional_owner,
    link_words,
    round_robin_rule,
)

_HOW_CODES = {how: code for code, how in enumerate(HOW_VALUES)}
_UNDECIDED: Any = object()

# Ops the runtime adds to every executed graph, by type.
_RUNTIME_TYPES = {
    "_Send": "Inserted by the runtime to send a tensor to another device.",
    "_Recv": "Inserted by the runtime to receive a tensor from another device.",
    "_HostSend": "Inserted by the runtime to send a host-memory tensor to another device.",
    "_HostRecv": "Inserted by the runtime to receive a host-memory tensor from another device.",
    "_Arg": "Inserted by the runtime to feed a placeholder's value or a function's argument into the graph.",
    "_Retval": "Inserted by the runtime to return a fetched tensor or a function's result.",
    "_DeviceArg": "Inserted by the runtime to feed an argument into the graph.",
    "_DeviceRetval": "Inserted by the runtime to return a fetched tensor to the client.",
}
_RUNTIME_NAMES = {
    "_SOURCE": "The executor's start node: one per device partition, added by the runtime.",
    "_SINK": "The executor's end node: one per device partition, added by the runtime.",
    "RecvTensor": (
        "A worker's gRPC receive of tensors from another task of the cluster (one record per "
        "cross-task transfer: its label gives the edge, the bytes and the rate; "
        "trace.transfers lists them with cross_task True)."
    ),
}


# Op types tf.compat.v1.train.replica_device_setter sends to the ps tasks (STANDARD_PS_OPS
# in python/training/device_setter.py).
_PS_OP_TYPES = {
    "Variable",
    "VariableV2",
    "AutoReloadVariable",
    "MutableHashTable",
    "MutableHashTableV2",
    "MutableHashTableOfTensors",
    "MutableHashTableOfTensorsV2",
    "MutableDenseHashTable",
    "MutableDenseHashTableV2",
    "VarHandleOp",
    "BoostedTreesEnsembleResourceHandleOp",
    "BoostedTreesQuantileStreamResourceHandleOp",
    "ResourceConditionalAccumulator",
    "DecisionTree",
    "DecisionTreeResource",
    "TreeEnsembleVariable",
    "TreeEnsembleResourceHandleOp",
}
_FOLLOWS_INPUT_TYPES = {"Shape", "ShapeN", "Size", "Rank", "Identity"}
# A session run without the function convention (a cluster's master session, a partial run,
# TF 1.x sessions) fetches through ``_send_<op>_<slot>`` and feeds through
# ``_recv_<op>_<slot>``, placed on the client device with client_terminated set
# (graph/subgraph.cc SendFetchRewrite / RecvFeedRewrite; the device is
# DeviceSet::client_device(), GraphExecutionState::PruneGraph). User op names cannot start
# with "_", so the prefix is the runtime's.
_CLIENT_PREFIXES = ("_send_", "_recv_")
_CLIENT_SEND_TYPES = {"_Send", "_HostSend"}
_CLIENT_RECV_TYPES = {"_Recv", "_HostRecv"}

KernelLookup = Callable[[str], frozenset]


def lacks_kernel(kernel_types: frozenset, device_type: str) -> bool:
    """True only when the registry is known to have no kernel of ``op`` for ``device_type``.

    A ``DEFAULT`` kernel serves every device type (CPU, GPU, XLA_CPU, TPU...) except XLA's JIT
    compilation types: NoOp and ReadVariableOp are registered only that way and still
    run on CPU and GPU. An empty set means the op type is unknown here (a custom op in a loaded
    trace): no claim is made. This is per op type; :meth:`Explainer.lacks_kernel_for` asks per
    node def when the graph is known (an int32 MatMul has no GPU kernel, a float one has).
    """
    if not kernel_types or device_type in kernel_types:
        return False
    return device_type in SYMBOLIC_DEVICE_TYPES or "DEFAULT" not in kernel_types


def _unknown(op_type: str) -> frozenset:
    """No registry handed in: every op type's kernels unknown (no claim)."""
    return frozenset()


def default_device(devices: Iterable[str]) -> str:
    """The device an unconstrained op lands on: highest-priority type (GPU first), lowest index."""
    ordered = sorted(devices, key=device_sort_key)
    return ordered[0] if ordered else ""


class Explainer:
    """Computes ``how`` and ``reason`` for the ops of one executed graph."""

    def __init__(
        self,
        facts: GraphFacts | None,
        placed: dict[str, str],
        devices: list[str],
        executed_inputs: dict[str, list[str]],
        kernel_types: KernelLookup | None = None,
        client: str = "",
    ) -> None:
        """``kernel_types``: the device types with a kernel for an op type (the readers hand in
        ``REGISTRY.registered_device_types``); by default the facts' registry's, and without
        one (no facts, or facts loaded from a file) none known: no kernel claim is made."""
        self.facts = facts
        self.placed = placed  # op name -> canonical device
        self.devices = devices
        self.device_specs = [s for s in map(_safe_parse, devices) if s is not None]
        self.default = default_device(devices)
        self.has_gpu = any(s.type == "GPU" for s in self.device_specs)
        if kernel_types is None:
            registry = getattr(facts, "registry", None)
            kernel_types = registry.registered_device_types if registry is not None else _unknown
        self.kernel_types = kernel_types
        self.executed_inputs = executed_inputs
        # A cluster (devices on several tasks): names say the task. The session's master
        # sorts its own task's devices before the other tasks' among devices of one type
        # (``client``: the client device, on that task, if known; see _implicit).
        self.tasks = sorted({(s.job, s.replica, s.task) for s in self.device_specs}, key=str)
        self.chief: tuple | None = None
        if len(self.tasks) > 1:
            self.chief = _chief_task(client, self.tasks)
            types = {s.type for s in self.device_specs if s.type}
            best = min(types, key=lambda t: device_sort_key(f"/device:{t}:0"), default=None)
            of_best = [d for d in devices if getattr(_safe_parse(d), "type", None) == best]
            local = [d for d in of_best if _task(d) == self.chief]
            # The master's own device of the best type, else the remote ones by name.
            self.default = default_device(local) if local else min(of_best, default=self.default)
        self._consumers: dict[str, list[str]] | None = None
        self._readers: dict[str, list[str]] | None = None
        self._groups = _colocation_groups(facts) if facts is not None else {}
        # Function mode: ops whose request came from a tf.device around their call.
        self._scopes = getattr(facts, "scope", {}) if facts is not None else {}

    # -- public -------------------------------------------------------------------------------
    def explain(self, name: str, op_type: str, device: str) -> tuple[str, str, str]:
        """Return ``(requested_device, how, reason)`` for one placed op."""
        short = self._short(device) or device or "an unknown device"
        if name in _RUNTIME_NAMES:
            return "", "runtime", _RUNTIME_NAMES[name]
        client = _client_copy(name, op_type)
        if client:
            return "", "runtime", client.format(short=short)
        if op_type == "_Arg" and self._resource_readers().get(name):
            readers = self._resource_readers()[name]
            kinds = [self.facts.types.get(reader, "") for reader in readers]  # type: ignore[union-attr]
            return "", "runtime", rules.resource_argument(readers, kinds, short)
        if op_type in _RUNTIME_TYPES:
            return "", "runtime", f"{_RUNTIME_TYPES[op_type]} Placed on {short}."
        if op_type.upper().startswith("MEMCPY"):  # GPU tracer copy records (MEMCPYHtoD, ...)
            copy = (
                f"A {op_type} memory copy made by the runtime to move a tensor between host "
                f"and device memory, recorded by the GPU tracer on {short}."
            )
            return "", "runtime", copy
        if self.facts is None:
            return (
                "",
                "unknown",
                (
                    f"Ran on {short}. The graph was not given, so the requested device is unknown: "
                    "pass graph= to PlacementTrace.from_run_metadata to explain it."
                ),
            )
        if name not in self.facts:
            return "", "runtime", self._not_in_graph(name, short)
        requested = self.facts.requested.get(name, "")
        built = self.facts.types.get(name, "")
        # The placer placed the op as built; a rewrite after placement (Grappler, oneDNN's
        # _Mkl kernels) changed its type later.
        how, reason = self._placed_op(name, built or op_type, device, requested, short)
        scope = self._scopes.get(name)
        if scope is not None:
            reason = f"{_scope_words(scope)} {reason}"
        if built and op_type and built != op_type:  # e.g. Grappler folded AddV2 into a Const
            by = (
                "oneDNN's graph rewrite"
                if op_type.startswith("_Mkl")
                else "TensorFlow's graph optimizer"
            )
            reason += f" Built as {built}; {by} turned it into {op_type}."
        return requested, how, reason

    def explain_all(
        self, names: Sequence[str], types: Sequence[str], devices: Sequence[str]
    ) -> tuple[list[str], list[str], list[str]]:
        """``explain`` for every op at once: the lists ``(requested, how, reason)``.

        Equal to calling ``explain`` per op, but fast on 100k ops: an op whose answer cannot
        depend on its own name (a runtime type; or, in the graph with no colocation or
        resource group, an honoured or refused request, or no request and the default device)
        is explained once per (type, device, requested device, built type). Every other op
        goes through ``explain``. A new rule in ``explain`` that reads the op's name must keep
        such ops out of the shared path below (tests/model/test_explain_all.py checks both agree).
        """
        requested, how, reason = self.explain_columns(names, types, devices)
        return requested, [HOW_VALUES[code] for code in how], reason

    def explain_columns(
        self, names: Sequence[str], types: Sequence[str], devices: Sequence[str]
    ) -> tuple[list[str], list[int], list[str]]:
        """:meth:`explain_all` with ``how`` as codes into ``HOW_VALUES`` (for
        ``pd.Categorical.from_codes``, without hashing one string per op again)."""
        facts = self.facts
        named = set(_RUNTIME_NAMES)
        if facts is not None:
            named |= set(facts.colocated_with) | set(self._groups) | set(self._scopes)
            named |= set(facts.resource_inputs)  # the resource they use is named
            requested_of, built_of = facts.requested, facts.types
        else:
            requested_of = built_of = {}
        default = self.default
        explain = self._explain_coded
        # (type, device, built type, requested device) -> the answer every op with that key
        # shares, or None when such ops are explained one by one.
        decided: dict[tuple, tuple[str, int, str] | None] = {}
        requested_out: list[str] = []
        how_out: list[int] = []
        reason_out: list[str] = []
        for name, op_type, device in zip(names, types, devices, strict=True):
            # A fetch's or feed's _Send/_Recv names its tensor: explained one by one.
            if name in named or name.startswith(_CLIENT_PREFIXES):
                result = explain(name, op_type, device)
            else:
                built = built_of.get(name)
                requested = None if built is None else requested_of.get(name, "")
                key = (op_type, device, built, requested)
                result = decided.get(key, _UNDECIDED)
                if result is _UNDECIDED:
                    runtime = op_type in _RUNTIME_TYPES or op_type.upper().startswith("MEMCPY")
                    if runtime or facts is None:
                        shared = True
                    elif requested is not None:
                        shared = _has_request(requested) or device == default
                    else:
                        shared = False
                    result = decided[key] = explain(name, op_type, device) if shared else None
                if result is None:
                    result = explain(name, op_type, device)
            requested_out.append(result[0])
            how_out.append(result[1])
            reason_out.append(result[2])
        return requested_out, how_out, reason_out

    def _explain_coded(self, name: str, op_type: str, device: str) -> tuple[str, int, str]:
        requested, how, reason = self.explain(name, op_type, device)
        return requested, _HOW_CODES[how], reason

    # -- rules --------------------------------------------------------------------------------
    def _placed_op(
        self, name: str, op_type: str, device: str, requested: str, short: str
    ) -> tuple[str, str]:
        facts = self.facts
        assert facts is not None
        targets = facts.colocated_with.get(name)
        target = targets[0] if targets else ""
        target_device = self.placed.get(target, "")
        # tf.data and Keras colocate an op with the resource it uses (IteratorGetNext with its
        # iterator): the resource edge, which soft placement cannot drop, is the reason then,
        # unless the colocation named another device and soft placement dropped it.
        dropped = bool(target_device) and target_device != device
        if targets and (dropped or not self._resource_source(name)):
            where = self._short(target_device) or short
            if not target_device:  # pruned from the run: its device is not in the trace
                return "colocated", (
                    f"Colocated with {target} (tf.compat.v1.colocate_with / _class "
                    f"loc:@{target}), which did not run in the traced step; it runs on {short}."
                )
            if target_device == device:
                return "colocated", (
                    f"Colocated with {target} (tf.compat.v1.colocate_with / _class "
                    f"loc:@{target}), so it runs on {target}'s device, {where}."
                )
            # Soft placement drops a colocation that conflicts with a stronger constraint
            # (e.g. a resource edge to a variable on another device): say so, then why.
            how, reason = self._placed_by_request(name, op_type, device, requested, short)
            return how, reason + rules.dropped_colocation(target, where)
        return self._placed_by_request(name, op_type, device, requested, short)

    def _placed_by_request(
        self, name: str, op_type: str, device: str, requested: str, short: str
    ) -> tuple[str, str]:
        """``how`` and ``reason`` from the op's own request and its colocation group."""
        spec = _safe_parse(device)
        request = _safe_parse(requested)
        if request is not None and not request.is_empty():
            if spec is not None and request.matches(spec):
                return "explicit", self._explicit(name, requested, request, short)
            partner = self._constraining_partner(name)
            exists = any(request.matches(s) for s in self.device_specs)
            # A group overrides a request it could have met; a request for a device that does
            # not exist is soft placement's to move (a resource pins its reader regardless).
            reads_partner = partner in self.facts.resource_inputs.get(name, ())
            if partner and (exists or reads_partner):
                return "colocated", colocated_reason(requested, self._link(name, partner), short)
            return "soft", self._soft(name, op_type, requested, request, short)
        # An op that uses a resource runs where the resource is (the placer colocates a
        # resource's producer and its consumers), whoever decided that device.
        source = self._resource_source(name)
        partner = source or self._constraining_partner(name)
        pinned_by_request = bool(partner) and bool(self.facts.requested.get(partner))
        if partner and (source or device != self.default or pinned_by_request):
            # A group member that asked for this device pins the whole group there, even when
            # that is the default device; the producer of a resource nobody asked for was
            # placed implicitly (its consumers were placed with it).
            return "colocated", colocated_reason("", self._link(name, partner), short)
        return "implicit", self._implicit(name, op_type, device, short)

    def _explicit(self, name: str, requested: str, request: DeviceSpec, short: str) -> str:
        how = rules.asked_how(self.facts, name)
        if (
            self.chief is not None  # a cluster: which task it got matters
            and request.type is None
            and (request.job is not None or request.task is not None)
        ):
            return self._task_request(name, requested, request, how, short)
        partial = request.type is None or request.index is None
        return rules.explicit(requested, how, short, partial=partial)

    def _task_request(
        self, name: str, requested: str, request: DeviceSpec, how: str, short: str
    ) -> str:
        """A request for a job (and maybe a task) with no device type: which task and device
        the placer took, and whether the request has replica_device_setter's shape."""
        kind = "a job/task request" if request.task is not None else "a job request"
        op_type = self.facts.types.get(name, "") if self.facts is not None else ""
        setter = ""
        if request.task is not None and op_type in _PS_OP_TYPES:
            rule = round_robin_rule(request.job or "ps", "the setter deals variables out")
            setter = (
                " It is the request tf.compat.v1.train.replica_device_setter writes on a "
                f"{op_type}: {rule}; the node def keeps only the result."
            )
        choice = "the task's first device by type priority (GPU before CPU) with a kernel"
        if request.task is None:
            tasks = sorted({t for j, _, t in self.tasks if j == request.job}, key=str)
            count = f"{len(tasks)} task{'s' * (len(tasks) != 1)}"
            choice = (
                f"the first matching device by type priority, then task (/job:{request.job} "
                f"has {count} here)"
            )
        return (
            f"Requested {requested} (a partial device spec: {kind} on the node def, no "
            f"device type) {how}; the "
            f"placer chose {short}, {choice}.{setter}"
        )

    def _short(self, device: str) -> str:
        """``CPU:1``; in a cluster ``/job:ps/task:0/CPU:1`` (the task matters there)."""
        if self.chief is None or not device:
            return short_device(device)
        spec = _safe_parse(device)
        if spec is None or spec.type is None:
            return short_device(device)
        return f"{task_of(spec)}/{spec.short()}"

    def _soft(
        self, name: str, op_type: str, requested: str, request: DeviceSpec, short: str
    ) -> str:
        return rules.soft(
            rules.asked(requested, self.facts, name),
            short,
            exists=any(request.matches(s) for s in self.device_specs),
            available=", ".join(self._short(d) for d in self.devices) or "none",
            missing=request.type and self.lacks_kernel_for(name, op_type, request.type) or "",
        )

    def _implicit(self, name: str, op_type: str, device: str, short: str) -> str:
        if device == self.default and self.chief is not None:
            # No "stay on the chief" rule: a session's graph is placed with no default device
            # (GraphExecutionState::InitBaseGraph passes default_local_device = nullptr), and
            # ColocationGraph::FilterSupportedDevices (colocation_graph.cc) sorts candidates
            # with DeviceSet::SortPrioritizedDeviceVector (device_set.cc): kernel priority,
            # type priority (GPU before CPU), then Device::IsLocal() (local first), then name.
            # Master::CreateSession (distributed_runtime/master.cc) gives the session's
            # DeviceSet the other tasks' devices as RemoteDevice (IsLocal() false) and the
            # master's own local_devices, the first of which is the client device that
            # fetches go to. So the op lands on the task the session connected to (tfplace
            # connects to the chief), unless another task has a better device type.
            job, _, task = self.chief
            where = f"/job:{job}/task:{task}"
            jobs = {t[0] for t in self.tasks}
            if not task and (job == "chief" or (job == "worker" and "chief" not in jobs)):
                where = f"the chief ({where})"
            return rules.implicit_local_task(op_type, where, short)
        if device == self.default:
            gpu_hint = (
                ""
                if self.has_gpu
                else " On a machine with a GPU and a GPU kernel for it, that is GPU:0."
            )
            return rules.implicit_default(op_type, short, gpu_hint)
        spec = _safe_parse(device)
        on_cpu_beside_gpu = self.has_gpu and spec is not None and spec.type == "CPU"
        missing = on_cpu_beside_gpu and self.lacks_kernel_for(name, op_type, "GPU")
        if missing:
            return rules.implicit_no_kernel(missing, short)
        inputs = self.executed_inputs.get(name) or (
            self.facts.inputs.get(name, []) if self.facts else []
        )
        if op_type in _FOLLOWS_INPUT_TYPES and inputs:
            source = inputs[0]
            if self.placed.get(source) == device:
                return rules.follows_input(op_type, source, short)
        consumers = self._consumers_of(name)
        if not inputs and consumers and all(self.placed.get(c) == device for c in consumers):
            return rules.with_consumers(consumers, short)
        return f"No device requested: TF's placer chose {short} (colocation heuristics)."

    def lacks_kernel_for(self, name: str, op_type: str, device_type: str) -> str:
        """Why no kernel of ``device_type`` serves op ``name`` ("" when one does, or when that
        is not known): per node def when the graph is known (its dtypes matter), else per type.
        """
        node = self.facts.kernels.get(name) if self.facts is not None else None
        if node is not None and node.gpu_kernel != "NA" and device_type in ("CPU", "GPU"):
            if node.has(device_type):
                return ""
            if device_type == "GPU" and node.gpu_kernel == "dtype" and node.dtypes:
                return rules.no_kernel(op_type, "GPU", node.dtypes)
            return rules.no_kernel(op_type, device_type)
        if lacks_kernel(self.kernel_types(op_type), device_type):
            return rules.no_kernel(op_type, device_type)
        return ""

    def _not_in_graph(self, name: str, short: str) -> str:
        owner = functional_owner(name, self.facts)
        if owner:
            return (
                f"Not in the graph as built: TF created it when lowering {owner} "
                f"({self.facts.types[owner]}) into primitive ops; it runs on {short}."
            )
        if name.startswith("_arg_"):
            return f"Inserted by the runtime to feed a placeholder's value; placed on {short}."
        if name.startswith("_retval_"):
            return f"Inserted by the runtime to return a fetched tensor; placed on {short}."
        return (
            f"Not in the graph as built: created by TensorFlow's graph optimizer (Grappler) or "
            f"runtime; it runs on {short}."
        )

    # -- helpers ------------------------------------------------------------------------------
    def _link(self, name: str, partner: str) -> str:
        """How ``name`` is tied to ``partner``, in words (after "it")."""
        assert self.facts is not None
        return link_words(self.facts, name, partner)

    def _resource_source(self, name: str) -> str:
        """The producer of a resource or ref this op uses, when the placer colocates them."""
        facts = self.facts
        assert facts is not None
        group = self._groups.get(name, ())
        return rules.resource_source(
            name, facts, group.__contains__, lambda producer: producer not in facts
        )

    def _constraining_partner(self, name: str) -> str:
        """The member of this op's colocation group that decides its device.

        Preference: a member whose own request put it on this op's device, then a member
        with a request placed here, then any member with a request, then any member; direct
        resource/ref producers of this op (the variable it reads) come first at each step.
        """
        group = self._groups.get(name)
        if not group:
            return ""
        assert self.facts is not None
        here = self.placed.get(name)
        others = sorted(m for m in group if m != name)
        direct = [p for p in self.facts.resource_inputs.get(name, ()) if p in group and p != name]
        here_spec = _safe_parse(here or "")
        for member in direct + others:  # a member that asked for this device and got it
            request = _safe_parse(self.facts.requested.get(member, ""))
            if (
                request is not None
                and not request.is_empty()
                and here_spec is not None
                and self.placed.get(member) == here
                and request.matches(here_spec)
            ):
                return member
        for member in direct + others:
            if self.facts.requested.get(member) and self.placed.get(member) == here:
                return member
        for member in direct + others:
            if self.facts.requested.get(member):
                return member
        return (direct + others)[0] if direct or others else ""

    def _resource_readers(self) -> dict[str, list[str]]:
        """Resource producer -> the ops that use its resource (the graph's resource edges)."""
        if self._readers is None:
            readers: dict[str, list[str]] = {}
            for op, producers in (self.facts.resource_inputs if self.facts else {}).items():
                for producer in producers:
                    readers.setdefault(producer, []).append(op)
            self._readers = readers
        return self._readers

    def _consumers_of(self, name: str) -> list[str]:
        if self._consumers is None:
            consumers: dict[str, list[str]] = {}
            source = self.executed_inputs or (self.facts.inputs if self.facts else {})
            for op, inputs in source.items():
                for i in inputs:
                    consumers.setdefault(i, []).append(op)
            self._consumers = consumers
        return self._consumers.get(name, [])


def _client_copy(name: str, op_type: str) -> str:
    """The reason of a fetch's ``_send_<op>_<slot>`` or a feed's ``_recv_<op>_<slot>`` (with
    ``{short}`` for its device), ``""`` for any other op."""
    fetch = op_type in _CLIENT_SEND_TYPES and name.startswith("_send_")
    feed = op_type in _CLIENT_RECV_TYPES and name.startswith("_recv_")
    if not (fetch or feed):
        return ""
    op, _, slot = name[len("_send_") :].rpartition("_")
    tensor = f"{op}:{slot}" if op and slot.isdigit() else name[len("_send_") :]
    tensor = tensor.replace("{", "{{").replace("}", "}}")
    if fetch:
        return (
            f"Inserted by the runtime to return the fetched value {tensor} to the client: it "
            "runs on the session's client device, {short}, and hands the tensor to the session, "
            "which sends it back to the caller of Session.run (not a copy between devices)."
        )
    return (
        f"Inserted by the runtime to receive the fed value of {tensor} (feed_dict) from the "
        "client: the caller's value arrives on the session's client device, {short}, and "
        "flows from there into the graph."
    )


def _scope_words(scope: Any) -> str:
    """Why an op with no request of its own carries one: the tf.device around its call."""
    if scope.function == "eager" and not scope.device:
        return "Ran eagerly, outside any tf.function (the eager runtime runs each op alone)."
    if not scope.call:
        return (
            f"It has no tf.device of its own: the device_scope {scope.device} around the whole "
            "call applies to every op without one."
        )
    return (
        f"It has no tf.device of its own: the tf.device({scope.device}) around the call "
        f"{scope.call} (of {scope.function}) applies to every op inside without one."
    )


def _colocation_groups(facts: GraphFacts) -> dict[str, frozenset]:
    """Each grouped op's group: ops the placer keeps on one device (resource/ref edges and
    ``_class`` colocation; an op that others are colocated with moves with its group, e.g. to
    the device of a variable one of them reads). Ops alone are left out; a ``loc:@`` name that
    is not in the graph joins nothing."""
    groups: dict[str, frozenset] = {}
    for group in linked_groups(
        facts, keep=lambda name: name in facts, exempt=RESOURCE_COLOCATION_EXEMPT
    ):
        frozen = frozenset(group)
        for node in frozen:
            groups[node] = frozen
    return groups


def _task(device: str) -> tuple | None:
    spec = _safe_parse(device)
    return None if spec is None else (spec.job, spec.replica, spec.task)


def _chief_task(client: str, tasks: list[tuple]) -> tuple:
    """The client's task: where the fetches went when the trace recorded it, else the
    ``chief`` job's task 0, else worker 0 (TensorFlow's conventions), else the first task."""
    known = _task(client) if client else None
    if known in tasks:
        return known
    for job in ("chief", "worker"):
        for task in tasks:
            if task[0] == job and not task[2]:
                return task
    return tasks[0]


@lru_cache(maxsize=4096)
def _has_request(requested: str) -> bool:
    """Whether a node def's device field asks for anything (a parseable, non-empty spec)."""
    spec = _safe_parse(requested)
    return spec is not None and not spec.is_empty()


def _safe_parse(name: str) -> DeviceSpec | None:
    try:
        return parse_device(name)
    except ValueError:
        return None
