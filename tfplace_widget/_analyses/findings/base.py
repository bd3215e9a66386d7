"""What every findings rule reads: ``Context`` (the trace's frames reduced to lookups, and
where each op would run on a GPU machine), ``Finding`` (one row) and the small helpers the rule
families share (device types, copy names, op durations, name lists)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, islice, repeat
from operator import attrgetter, contains, eq, is_not
from typing import Any

import pandas as pd

from ..._model.columns import FINDING_KINDS as KINDS
from ..._model.columns import SEVERITIES
from ..._model.devices import parse_device, short_device
from ..._model.graphfacts import linked_groups
from ..._model.trace import strategy_of
from .byrow import (
    ListedValues,
    RowValues,
    first_rows,
    last_row_values,
    later_rows,
    values_of,
)
from .predicted import predict_with_module
from .runtime import RUNTIME_TYPES, copy_key, runtime_names, sent_ops

# What a finding can be (``Finding`` checks it); the package exports them with ``COLUMNS``.
# gpu_kernel values (_model/kernels.py): a GPU kernel, one computing in host memory, GPU
# kernels but none for this op's dtype, no GPU kernel at all, unknown (no node def).
NO_GPU = ("no", "dtype")
_REQUEST_CAUSES = (("", ""), ("requested", ""))  # a CPU op's cause by whether it asked for one
ON_GPU = ("yes", "host")

MAX_NAMED = 4  # op names spelled out in one message
# A function's arguments: a resource argument lives where the caller's variable or table is.
_ARGUMENT_TYPES = {"_Arg", "_DeviceArg"}
_EDGE = re.compile(r"^edge_\d+_(.+)$")
# Name scopes of the ops TensorFlow's gradient code makes (graph mode, GradientTape).
GRADIENT_PREFIXES = ("gradients/", "gradient_tape/")
# Generators and host constants that follow their consumers: never findings of their own.
FOLLOWERS = {"Const", "HostConst"}
_KIND_SET, _SEVERITY_SET = frozenset(KINDS), frozenset(SEVERITIES)  # a Finding's checks
# A distribution strategy's replica scope (``replica_1/...``).
REPLICA = re.compile(r"(^|/)replica_(\d+)/")  # a strategy's replica N's scope


@dataclass
class Finding:
    kind: str
    severity: str
    ops: list[str]
    message: str
    evidence: dict[str, float | int]
    cost: tuple[float, float, float] = (0.0, 0.0, 0.0)  # (time us, bytes, ops): the sort key
    # A prediction about a machine with a GPU that the trace did not run on (a CPU-only run's
    # cpu_fallback, ping_pong, host_memory_on_gpu; every finding of predict_placement's trace),
    # not something measured: the views show these under a header of their own.
    predicted: bool = False
    # What cures it (``fixes.py``): ``{"overrides", "edit", "no_fix", "not_simulable"}``,
    # or None when the finding makes no claim about one (given as a function: made when read).
    fix: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.kind not in _KIND_SET or self.severity not in _SEVERITY_SET:
            raise ValueError(f"unknown finding kind/severity: {self.kind}/{self.severity}")
        self.ops = list(dict.fromkeys(self.ops))


def _message(finding: Finding) -> str:
    """The finding's message, written when first read: a rule may give it as a function of
    no arguments, so that the thousands of findings of a large trace that are immaterial, or
    capped (``MAX_PER_KIND``), cost no op lists that no one reads."""
    text = finding._message
    if callable(text):
        text = finding._message = text()
    return text


def _set_message(finding: Finding, text: str | Callable[[], str]) -> None:
    finding._message = text


def _fix(finding: Finding) -> dict[str, Any] | None:
    """The finding's fix, made when first read: like its message, a rule may give it as a
    function of no arguments (the fix of a dropped or capped finding is never read)."""
    fix = finding._fix
    if callable(fix):
        fix = finding._fix = fix()
    return fix


def _set_fix(finding: Finding, fix: dict[str, Any] | Callable[[], dict] | None) -> None:
    finding._fix = fix


Finding.message = property(_message, _set_message)  # type: ignore[assignment]
Finding.fix = property(_fix, _set_fix)  # type: ignore[assignment]


@dataclass
class Context:
    """The trace's frames reduced to plain lookups, built once per ``find_findings``."""

    trace: Any
    ops: pd.DataFrame
    device_of: Mapping[str, str]  # op -> device it ran on (first row of a name)
    type_of: dict[str, str]
    gpu_kernel: Mapping[str, str]  # op -> yes/host/dtype/no; empty when unknown
    requested: Mapping[str, str]  # op -> its requested device (last row of a name)
    inputs: dict[str, list[str]]  # op -> producers (data edges), runtime nodes skipped
    consumers: dict[str, list[str]] = field(default_factory=dict)
    gpus: list[str] = field(default_factory=list)  # GPU devices in the trace
    # op -> "GPU"/"CPU": where it runs on a GPU machine (the trace's own devices when it has a
    # GPU; else predicted from the kernel columns). Empty when that cannot be known. Read-only
    # (``ListedValues``) when it is the placer's prediction.
    view: dict[str, str] = field(default_factory=dict)
    why_cpu: dict[str, tuple[str, str]] = field(default_factory=dict)  # op -> (cause, partner)
    duplicated: set[str] = field(default_factory=set)  # ops on a GPU and a CPU (merged runs)
    predicted_view: bool = False
    copies_by_producer: dict[str, list[str]] | None = None
    duration_of: dict[str, float] | None = None
    runtime: set[str] | None = None
    position: dict[str, int] | None = None
    copy_of: dict[str, str] | None = None
    replicas: bool | None = None  # ``replicated``'s answer, found once
    source_of: dict[str, str] | None = None  # op -> its ``source`` (file:line), read once
    requested_cpu: set[str] | None = None  # ``cpu_requested``'s answer, found once
    requested_cpu_devices: set[str] | None = None  # ``_cpu_devices``'s answer
    host_sides: tuple[set[str], set[str]] | None = None  # ``_host_sides``'s answer
    user: set[str] | None = None  # the ops of the trace other than the runtime's, found once
    copy_keys: dict[str, str] | None = None  # each send's and recv's ``copy_key``
    # Only the material findings are wanted (``find_findings`` without ``immaterial``): a rule
    # with a great many findings may leave out those that surely are not (``material.py``).
    material_only: bool = False
    steps: Any = None  # ``material.steps_of``'s answer, found once
    how_of: dict[str, str] | None = None  # ``how``'s answer, made when first read

    @property
    def how(self) -> dict[str, str]:
        """op -> how it was placed (a name's last row's), made when first read: a CPU-only
        trace's findings read it for few ops or none, and a dict of a million names costs
        about 0.6 s to make (the runtime's names are read off the column, ``runtime_names``)."""
        if self.how_of is None:
            ops = self.ops
            names = ops["op"].tolist()
            self.how_of = dict(zip(names, ops["how"].astype(str).tolist(), strict=True))
        return self.how_of

    @classmethod
    def of(cls, trace: Any) -> Context:
        ops = trace.ops
        names = ops["op"].tolist()
        type_of = dict(zip(names, ops["type"].tolist(), strict=True))
        # device_of (a name's first row's) and requested (its last row's) read their columns
        # through one table of each name's first row: one dict of a million names, not two
        rows = first_rows(type_of, names)
        later = later_rows(rows, len(names))
        device_of = RowValues(rows, ops["device"].tolist())
        requests = ops["requested_device"].astype(str).tolist()
        requested = RowValues(rows, last_row_values(rows, names, requests, later))
        gpu_kernel: Mapping[str, str] = {}
        if "gpu_kernel" in ops:  # the rows whose kernels are known
            kernels = ops["gpu_kernel"].astype(str)
            known = (kernels != "NA").to_numpy(dtype=bool)
            if known.any():
                listed = (ops["op"][known].tolist(), kernels[known].tolist())
                # each name once when every known row is its name's first: no dict by name
                # made unless a rule looks one up (a million-op trace's rules iterate it)
                once = later is None or not (later & known).any()
                gpu_kernel = ListedValues(*listed) if once else dict(zip(*listed, strict=True))
        facts = getattr(trace, "facts", None)
        raw_inputs = trace.inputs or (facts.inputs if facts is not None else {})
        context = cls(
            trace=trace,
            ops=ops,
            device_of=device_of,
            type_of=type_of,
            gpu_kernel=gpu_kernel,
            requested=requested,
            inputs={},
            gpus=[d for d in trace.devices if device_type(d) == "GPU"],
        )
        context.runtime, sends, receives, copies = runtime_names(type_of, ops["how"], names)
        context.inputs = context._through_copies(raw_inputs, sends, receives, copies)
        context.duplicated = context._duplicated_names()
        context._build_view(facts)
        return context

    # -- the graph, with the runtime's copies looked through ------------------------------------
    def _through_copies(
        self,
        raw: Mapping[str, Sequence[str]],
        sends: set[str],
        receives: set[str],
        copies: list[str],
    ) -> dict[str, list[str]]:
        """Data edges between user ops: a ``_Recv`` input becomes the op its ``_Send`` sent
        (``sends`` and ``receives``: the names of the copies' ops; ``copies``: both, in the
        order of ``type_of``). ``consumers`` (each producer's readers, in the edges' order) is
        filled in the same walk, while each list and its names are still in the caches: a
        second walk over a million lists finds them cold (about 0.5 s at a million ops)."""
        type_of = self.type_of
        self.is_runtime("")  # builds the set
        runtime = self.runtime or set()
        user = self.user = set(type_of)  # a copy of the keys' table, then less the runtime's
        user -= runtime
        # each copy's tensor's op, found once (``copy_nodes`` reads them too)
        keys = self.copy_keys = {n: copy_key(n) for n in copies}  # in type_of's order
        sent_by = sent_ops(raw, sends, keys, user)
        edges: dict[str, list[str]] = {}
        consumers = self.consumers
        for op, producers in raw.items():
            if op not in user:
                continue
            if user.issuperset(producers):  # no copy among them: as they are (only read)
                if type(producers) is not list:
                    producers = list(producers)
            else:
                resolved = []
                for producer in producers:
                    if producer in user:  # most of them: one look-up
                        resolved.append(producer)
                        continue
                    if producer in receives:
                        key = keys[producer]
                        producer = sent_by.get(key, key) if sent_by else key
                    elif producer not in type_of:  # a recv the trace did not record: X/_5
                        producer = copy_key(producer)
                    else:  # the runtime's other ops
                        continue
                    if producer in user:
                        resolved.append(producer)
                producers = resolved
            edges[op] = producers
            for producer in producers:
                readers = consumers.get(producer)
                if readers is None:
                    consumers[producer] = [op]
                else:
                    readers.append(op)
        return edges

    def is_runtime(self, name: str) -> bool:
        """Inserted by TensorFlow (copies, feeds, fetches, ``_SOURCE``): never a finding."""
        if self.runtime is None:
            self.runtime = {
                n
                for n, t in self.type_of.items()
                if self.how.get(n) == "runtime"
                or t in RUNTIME_TYPES
                or n in ("_SOURCE", "_SINK")
                or t.upper().startswith("MEMCPY")
            }
        return name in self.runtime

    def names_of(self, types: Iterable[str]) -> list[str]:
        """The ops whose type (``type_of``: a name's last row's) is one of ``types``, in the
        order of ``type_of`` (a name's first row): picked out of the frame's columns, not by a
        pass over every op of a million."""
        types = set(types)
        ops = self.ops
        rows = ops["type"].isin(types).to_numpy(dtype=bool) if types else ()
        if not len(rows) or not rows.any():
            return []
        names = ops["op"].to_numpy()
        first = names[ops["op"].isin(set(names[rows].tolist())).to_numpy(dtype=bool)]
        return [n for n in pd.unique(first).tolist() if self.type_of.get(n) in types]

    def _cpu_devices(self) -> set[str]:
        """The requested devices that are CPUs, found once: whether a ``tf.device`` put an op on
        a CPU is then one look-up of its request (``asked_cpu``), no set of every such op made
        (most of a million-op CPU trace's)."""
        if self.requested_cpu_devices is None:
            self.requested_cpu_devices = {
                d for d in set(self.requested.values()) if device_type(d) == "CPU"
            }
        return self.requested_cpu_devices

    def cpu_requested(self) -> set[str]:
        """The ops a ``tf.device`` put on a CPU (their ``requested_device`` is one), found once."""
        if self.requested_cpu is None:
            asked = map(self._cpu_devices().__contains__, self.requested.values())
            self.requested_cpu = set(compress(self.requested, asked))
        return self.requested_cpu

    def _duplicated_names(self) -> set[str]:
        """Op names listed on a GPU and on a CPU: one op, recorded in several runs whose
        device lanes a merge mixed up (process ids differ per run), not a fallback."""
        if not self.gpus:
            return set()
        types = self.ops["device"].map(device_type)
        on_gpu = set(self.ops.loc[types == "GPU", "op"])
        on_cpu = self.ops.loc[types == "CPU", "op"]
        return {n for n in on_cpu if n in on_gpu and not self.is_runtime(n)}

    # -- where each op runs on a GPU machine ----------------------------------------------------
    def _build_view(self, facts: Any) -> None:
        self.predicted_view = bool(getattr(self.trace, "predicted", False))
        if self.gpus:  # recorded (or predicted) with a GPU: the trace says it
            for name, device in self.device_of.items():
                kind = device_type(device)
                # An op XLA compiled (or would) is no op placed on its own: no fallback, no
                # host-memory argument, no copy of its own (the xla findings cover clusters).
                if (
                    kind in ("GPU", "CPU")
                    and not self.is_runtime(name)
                    and self.how.get(name) != "xla"
                ):
                    self.view[name] = "GPU" if name in self.duplicated else kind
            reasons = dict(zip(self.ops["op"], self.ops["reason"].astype(str), strict=True))
            for name, kind in self.view.items():
                if kind == "CPU":
                    self.why_cpu[name] = self._cpu_cause(name, self.how.get(name), reasons)
            return
        if not self.gpu_kernel:  # no GPU, no kernel facts: nothing to predict from
            return
        if strategy_of(self.trace):  # the strategy places the step by the devices it finds
            return
        self.predicted_view = True
        predicted = predict_with_module(self, facts)
        if predicted is not None:  # one row per node of the graph: each name once
            self._view_of_prediction(*predicted, distinct=True)
            return
        self._predict_here(facts)

    def _view_of_prediction(
        self,
        names: list[str],
        devices: list[str],
        hows: list[str],
        reasons: Callable[[], list[str]],
        *,
        distinct: bool = False,
    ) -> None:
        """The view from the placer's prediction (one row per node of the graph), the ops of
        the trace other than the runtime's, in the prediction's order; each CPU op's cause, its
        own kernel's or request's read here (most of a million), a colocated one's followed to
        its anchor (``_cpu_cause``). ``distinct``: each name is listed once (the placer's nodes
        are its graph's); then the view, and ``why_cpu`` when every cause is a request's or none,
        are lists (``ListedValues``), their dicts by name made only when a rule looks a name up
        (a million-op CPU trace's rules iterate them: 1.8M names not hashed into dicts).
        Otherwise a name of several rows is placed by its last row, in its first row's place."""
        user = self.user if self.user is not None else set(self.type_of) - (self.runtime or set())
        kinds = {d: device_type(d) for d in set(devices)}
        ours = list(map(user.__contains__, names))
        kept = list(compress(names, ours))
        kind_of = list(map(kinds.__getitem__, compress(devices, ours)))
        view: Mapping[str, str] = (
            ListedValues(kept, kind_of) if distinct else dict(zip(kept, kind_of, strict=True))
        )
        if len(view) != len(kept):  # a name of several rows: its last row, in its first's place
            last = dict(zip(names, zip(devices, hows, reasons(), strict=True), strict=True))
            names, devices, hows, listed = (
                list(c) for c in (last, *zip(*last.values(), strict=True))
            )
            return self._view_of_prediction(names, devices, hows, lambda: listed)
        if self.view:
            self.view.update(view.items())
        else:  # the view itself: no copy of a million entries into an empty dict
            self.view = view  # type: ignore[assignment]
        on_cpu = list(map(eq, kind_of, repeat("CPU")))
        cpu = list(compress(kept, on_cpu))
        # by C passes over the CPU ops (most of a million), in the order the loop over them
        # would give: each with its request's cause or none, then the others overwritten in
        # their places (a dict keeps a key's place): a colocated op's, then a kernel's
        cpu_devices = self._cpu_devices()
        asked = map(cpu_devices.__contains__, values_of(self.requested, cpu))
        causes = list(map(_REQUEST_CAUSES.__getitem__, asked))
        hows_cpu = compress(compress(hows, ours), on_cpu)
        colocated = list(compress(cpu, map(eq, hows_cpu, repeat("colocated"))))
        kernel_of = self.gpu_kernel
        no_gpu = set(compress(kernel_of, map(NO_GPU.__contains__, kernel_of.values())))
        kernels = list(compress(cpu, map(no_gpu.__contains__, cpu))) if no_gpu else []
        if not (colocated or kernels or self.why_cpu):  # the two lists, as the view is
            self.why_cpu = ListedValues(cpu, causes)  # type: ignore[assignment]
            return
        why = dict(zip(cpu, causes, strict=True))
        if colocated:  # followed to the op that decides (``_cpu_cause``)
            by_name = dict(zip(names, reasons(), strict=True))
            for name in colocated:
                why[name] = self._cpu_cause(name, "colocated", by_name)
        for name in kernels:
            why[name] = (kernel_of[name], "")
        if self.why_cpu:
            self.why_cpu.update(why)
        else:
            self.why_cpu = why

    def _cpu_cause(self, name: str, how: str | None, reasons: Mapping[str, str]) -> tuple[str, str]:
        """Why ``name`` is on the CPU: its own kernel or request, else (``colocated``) the op
        its resource or colocation group ties it to, followed to the one that decides."""
        cause = self._kernel_cause(name)
        if cause[0] or how != "colocated":
            return cause
        seen = {name}
        while cause[0] == "" and how == "colocated":
            anchor = _partner_from_reason(reasons.get(name, ""), self, seen)
            if not anchor:
                return ("", "")
            cause = self._anchor_cause(anchor)
            seen.add(anchor)
            name, how = anchor, self.how.get(anchor)
        return cause

    def _anchor_cause(self, anchor: str) -> tuple[str, str]:
        """Why the op a CPU op is tied to is on the CPU. ``colocated`` only when the anchor has
        no GPU kernel; ``requested`` when the user put it there (a tf.device) or when it is a
        function's resource argument, which lives where its variable or table was made (a
        ``host`` kernel, such as a VarHandleOp's, is a GPU kernel: no cause of its own)."""
        if self.asked_cpu(anchor):
            return ("requested", anchor)
        if self.gpu_kernel.get(anchor, "") in NO_GPU:
            return ("colocated", anchor)
        if self.type_of.get(anchor) in _ARGUMENT_TYPES:
            return ("requested", anchor)
        return ("", "")

    def _kernel_cause(self, name: str) -> tuple[str, str]:
        kernel = self.gpu_kernel.get(name, "")
        if kernel in NO_GPU:
            return (kernel, "")
        if self.asked_cpu(name):
            return ("requested", "")
        return ("", "")

    def asked_cpu(self, name: str) -> bool:
        """A ``tf.device`` put ``name`` on a CPU: there because the code asked, whatever its
        kernels (no fallback)."""
        return self.requested.get(name) in self._cpu_devices()

    def _predict_here(self, facts: Any) -> None:
        """One GPU, soft placement on: an op with a GPU kernel and no CPU request goes to the
        GPU; then a resource/ref group (a variable, an iterator and their readers) goes where
        its CPU-only member must (placement-rules.md 4-6). The graph's ops in its order, as the
        placer's prediction lists them, so a trace loaded from a file finds what it did."""
        kernels, graph = self.gpu_kernel, facts.types if facts is not None else {}
        in_graph = list(filter(kernels.__contains__, graph))
        for name in [*in_graph, *(n for n in kernels if n not in graph)]:
            kernel = kernels[name]
            if self.is_runtime(name):
                continue
            asked_cpu = self.asked_cpu(name)
            self.view[name] = "GPU" if kernel in ON_GPU and not asked_cpu else "CPU"
            if self.view[name] == "CPU":
                self.why_cpu[name] = self._kernel_cause(name)
        if facts is not None:
            for members in _resource_groups(facts, self.view):
                anchors = sorted(m for m in members if self.gpu_kernel.get(m) in NO_GPU)
                for member in members if anchors else ():
                    if self.view.get(member) == "GPU":
                        self.view[member] = "CPU"
                        self.why_cpu[member] = ("colocated", anchors[0])
        self._generators_follow_consumers()

    def _generators_follow_consumers(self) -> None:
        """A constant goes where all its consumers go (placement-rules.md 10)."""
        for name in list(self.view):
            if self.type_of.get(name) not in FOLLOWERS or self.inputs.get(name):
                continue
            kinds = {self.view.get(c) for c in self.consumers.get(name, [])} - {None}
            if len(kinds) == 1:
                self.view[name] = kinds.pop()

    # -- memory: where a tensor lives on a GPU machine -----------------------------------------
    def crosses_memory(self, producer: str, consumer: str) -> bool:
        """Whether the tensor ``producer`` -> ``consumer`` changes memory (host <-> device) on
        a GPU machine: a copy. Ops on the CPU, and GPU kernels that keep that output or input
        in host memory (int32, strings, shapes, a Sum's axes), are on the host side."""
        made, read = self.view.get(producer), self.view.get(consumer)
        if made is None or read is None:
            return False
        outputs, inputs = self.host_side_ops()
        out_host = made == "CPU" or producer in outputs
        in_host = read == "CPU" or (consumer in inputs and self._host_input(consumer, producer))
        return out_host != in_host

    def host_side_ops(self) -> tuple[set[str], set[str]]:
        """The ops whose first output a GPU kernel keeps in host memory, and those that keep
        some input there (``host`` kernels, and the kernel facts' ``gpu_host_*``), found once."""
        if self.host_sides is None:
            self.host_sides = self._host_sides()
        return self.host_sides

    def _host_sides(self) -> tuple[set[str], set[str]]:
        # by C passes over the op -> kernel dicts (a million ops), none in Python per op
        of = self.gpu_kernel
        host = set(compress(of, map("host".__eq__, of.values())))
        facts = getattr(self.trace, "facts", None)
        kernels = getattr(facts, "kernels", {}) if facts is not None else {}
        ops, known = list(kernels), list(kernels.values())
        present = list(map(is_not, known, repeat(None)))
        if not all(present):
            ops, known = list(compress(ops, present)), list(compress(known, present))
        first_out = map(contains, map(attrgetter("gpu_host_outputs"), known), repeat(0))
        outputs = host | set(compress(ops, first_out))
        return outputs, host | set(compress(ops, map(attrgetter("gpu_host_inputs"), known)))

    def _host_input(self, op: str, producer: str) -> bool:
        if self.gpu_kernel.get(op) == "host":
            return True
        kernel = self._kernel_facts(op)
        facts = getattr(self.trace, "facts", None)
        built = getattr(facts, "inputs", {}).get(op, []) if facts is not None else []
        if kernel is None or producer not in built:
            return False
        return built.index(producer) in kernel.gpu_host_inputs

    def _kernel_facts(self, op: str) -> Any:
        facts = getattr(self.trace, "facts", None)
        return getattr(facts, "kernels", {}).get(op) if facts is not None else None

    @property
    def registry(self) -> Any:
        """The kernel registry the trace's facts were read from in this process
        (``tfadapter.registry.REGISTRY``), None for facts loaded from a file or none at all."""
        return getattr(getattr(self.trace, "facts", None), "registry", None)

    # -- copies of one function (fit's training and evaluation steps) ------------------------
    def original(self, name: str) -> str:
        """The op ``name`` is a copy of, or ``name``. Two functions of one name (the training
        and the evaluation copy of Keras's ``multi_step_on_iterator``) run the same ops: the
        later one's are listed as ``<function>/<op>`` (_sources/functions.py), of the same type
        as ``<op>``."""
        if self.copy_of is None:
            functions = (
                set(self.ops["function"].dropna().astype(str).unique().tolist())
                if "function" in self.ops
                else set()
            )
            # an op's first scope is a function's when its name starts with it and a "/" (a
            # function name with a "/" is no first scope; "" none: no op name starts with "/")
            heads = tuple(f"{f}/" for f in functions if f and "/" not in f)
            self.copy_of = {}
            for op in filter(lambda n: n.startswith(heads), self.type_of) if heads else ():
                op_type = self.type_of[op]
                head, sep, rest = op.partition("/")
                if sep and head in functions and self.type_of.get(rest) == op_type:
                    self.copy_of[op] = rest
        return self.copy_of.get(name, name)

    def originals(self, names: Iterable[str]) -> list[str]:
        """``names`` without the copies whose original is among them, in their order."""
        names = list(dict.fromkeys(names))
        present = set(names)
        return [n for n in names if self.original(n) == n or self.original(n) not in present]

    # -- small helpers ----------------------------------------------------------------------------
    def attrs(self, name: str) -> dict[str, str]:
        """The op's type attrs by name (``{"SrcT": "float32", "DstT": "int32"}``)."""
        kernel = self._kernel_facts(name)
        text = getattr(kernel, "attrs", "") if kernel is not None else ""
        return dict(part.split("=", 1) for part in text.split() if "=" in part)

    @property
    def predicted_trace(self) -> bool:
        """The trace is predict_placement's: nothing in it was measured, so every finding
        of it is a prediction."""
        return bool(getattr(self.trace, "predicted", False))

    def on_a_gpu_machine(self) -> str:
        """The words that make a finding about a GPU machine read as the prediction it is,
        when the view is predicted (a CPU-only trace, or predict_placement's)."""
        return "On a machine with a GPU, " if self.predicted_view else ""

    def dtypes(self, name: str) -> str:
        """The op's type attrs (``"int32"``), from the kernel facts of its node def."""
        facts = getattr(self.trace, "facts", None)
        kernel = getattr(facts, "kernels", {}).get(name) if facts is not None else None
        return getattr(kernel, "dtypes", "") if kernel is not None else ""

    def short(self, name: str) -> str:
        return short_device(self.device_of.get(name, "")) or "?"

    def gpu_name(self) -> str:
        return short_device(self.gpus[0]) if self.gpus else "GPU:0"


def _partner_from_reason(reason: str, context: Context, skip: set[str] | None = None) -> str:
    """The op a colocation reason names (its first word that is an op of the trace, other than
    those in ``skip``)."""
    for word in reason.replace(",", " ").replace(";", " ").split():
        word = word.strip(".()")
        if word in context.type_of and not (skip and word in skip):
            return word
    return ""


def _resource_groups(facts: Any, view: Mapping[str, str]) -> list[set[str]]:
    """Ops tied to one device by resource/ref edges or ``colocate_with``, among ``view``'s."""
    return linked_groups(facts, keep=view.__contains__)


def device_type(name: str) -> str:
    if not name:
        return ""
    try:
        return parse_device(name).type or ""
    except ValueError:
        return ""


def copied_op(context: Context, tensor: str) -> str:
    """The op whose output a transfer copies: ``A:0`` -> ``A``; ``edge_22_MatMul`` (a TF 1.x
    memcpy record) -> ``MatMul``."""
    name = tensor.rpartition(":")[0] if ":" in tensor else tensor
    match = _EDGE.match(name) if name.startswith("edge_") else None
    if match and match.group(1) in context.type_of:
        return match.group(1)
    return name


def all_on_one_gpu(context: Context, names: Sequence[str]) -> bool:
    devices = {context.device_of.get(n, "") for n in names}
    return len(devices) == 1 and device_type(devices.pop()) == "GPU"


def summed_duration(context: Context, names: Iterable[str]) -> float:
    """Summed ``duration_us`` of ``names`` (untimed ops count 0)."""
    if context.duration_of is None:
        timed = context.ops[["op", "duration_us"]].dropna()
        if len(context.type_of) == len(context.ops):  # each name one row: its own time
            durations = timed["duration_us"].astype(float).tolist()
            context.duration_of = dict(zip(timed["op"].tolist(), durations, strict=True))
        else:
            sums = timed.groupby("op", sort=False)["duration_us"].sum().astype(float)
            context.duration_of = dict(zip(sums.index.tolist(), sums.tolist(), strict=True))
    of = context.duration_of
    return float(sum(of.get(name, 0.0) for name in set(names)))


def in_order(context: Context, names: Iterable[str]) -> list[str]:
    """``names`` in the trace's row order (first start first)."""
    wanted = set(names)
    if not wanted:  # nothing to order: no position of every op (a million) needed
        return []
    if context.position is None:
        context.position = dict(zip(context.device_of, range(len(context.device_of)), strict=True))
    position = context.position
    return sorted(wanted, key=lambda n: position.get(n, len(position)))


def replicated(context: Context) -> bool:
    """A distribution strategy ran the step: MirroredStrategy names replica N's ops
    ``replica_N/...`` and places each replica with a device scope of its own."""
    if context.replicas is None:
        # the substring test first: most names of a large trace are no replica's
        context.replicas = any(
            "replica_" in name and REPLICA.search(name) for name in context.type_of
        )
    return context.replicas


def is_gradient(name: str) -> bool:
    """Made by TensorFlow's gradient code: a ``gradients/`` or ``gradient_tape/`` scope at any
    depth (``StatefulPartitionedCall/gradient_tape/...`` inside Keras's ``fit``)."""
    return any(f"/{prefix}" in f"/{name}" for prefix in GRADIENT_PREFIXES)


def follower(context: Context, name: str) -> bool:
    return context.type_of.get(name) in FOLLOWERS


def listed_names(names: Sequence[str], limit: int = MAX_NAMED) -> str:
    names = list(names)
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


# -- who made an op: the Keras layer, optimizer, loss or strategy a user knows it by ----------
# Scopes of a call TensorFlow made (Keras's fit calls its step through them).
_CALL_SCOPES = re.compile(r"^(StatefulPartitionedCall|PartitionedCall)(_\d+)?$")
# A Keras model's scope (Sequential, functional Model), with Keras's uniquifying suffixes.
_MODEL_SCOPE = re.compile(r"^(sequential|functional|model)(_\d+)*$")
# An optimizer's scope: Keras's optimizer classes by their snake-case name (Keras 2 and
# tf.compat.v1.train's by their class name: SGD, Adam, GradientDescent, Momentum).
_OPTIMIZER_SCOPE = re.compile(
    r"^(sgd|adam|adamw|rmsprop|adagrad|adadelta|adamax|nadam|ftrl|lion|lamb|"
    r"loss_scale_optimizer|gradientdescent|momentum)(_\d+)*$",
    re.IGNORECASE,
)
_LOSS_SCOPE = "compile_loss"
_REPLICA_SCOPE = re.compile(r"^replica_(\d+)$")


def owner_of(name: str) -> tuple[str, str]:
    """``(owner, rest)``: the Keras layer, optimizer, loss or strategy replica that made op
    ``name``, as a user calls it, and the op's name under it; ``("", name)`` for an op of no
    such owner (the user's own, named as written).

    ``gradient_tape/replica_1/sequential_1/dense_1/MatMul/MatMul_1`` ->
    ``("the gradient of sequential_1/dense_1 on replica 1", "MatMul/MatMul_1")``;
    ``sgd_1/update_0/Mul`` -> ``("the optimizer sgd_1", "update_0/Mul")``."""
    if _plain_scope(name.partition("/")[0]):  # most names of a large trace: one look-up
        return "", name
    parts = name.split("/")
    while len(parts) > 1 and _CALL_SCOPES.match(parts[0]):
        parts = parts[1:]
    gradient = replica = ""
    while len(parts) > 1:
        if parts[0] in ("gradient_tape", "gradients"):
            gradient, parts = "the gradient of ", parts[1:]
        elif match := _REPLICA_SCOPE.match(parts[0]):
            replica, parts = f" on replica {match.group(1)}", parts[1:]
        else:
            break
    head = parts[0] if len(parts) > 1 else ""
    if _MODEL_SCOPE.match(head):
        depth = 2 if len(parts) > 2 else 1
        what = "/".join(parts[:depth])
    elif _OPTIMIZER_SCOPE.match(head):
        depth, what = 1, f"the optimizer {head}"
        gradient = ""  # an optimizer has no gradient of its own
    elif head == _LOSS_SCOPE:
        depth = 2 if len(parts) > 2 else 1
        what = "Keras's loss " + "/".join(parts[1:depth]) if depth == 2 else "Keras's loss"
    elif gradient and len(parts) > 1:  # TF1's gradients/<op>_grad/...: the gradient of <op>
        depth, what = 1, head.removesuffix("_grad")
    elif gradient:
        depth, what, gradient = 0, "TensorFlow's gradient code", ""
    elif replica:
        depth, what, replica = 0, f"replica {replica.rsplit(' ', 1)[1]} of the strategy", ""
    else:
        return "", name
    rest = "/".join(parts[depth:]) or parts[-1]
    return f"{gradient}{what}{replica}", rest


@functools.lru_cache(maxsize=65536)
def _plain_scope(head: str) -> bool:
    """Whether a name whose first scope is ``head`` has no owner (``owner_of``): not a call's,
    gradient's, replica's, model's, optimizer's or loss's scope."""
    return not (
        _CALL_SCOPES.match(head)
        or head in ("gradient_tape", "gradients", _LOSS_SCOPE)
        or _REPLICA_SCOPE.match(head)
        or _MODEL_SCOPE.match(head)
        or _OPTIMIZER_SCOPE.match(head)
    )


def listed_ops(
    names: Sequence[str], limit: int = MAX_NAMED, types: Mapping[str, str] | None = None
) -> str:
    """``names`` (op names) as a message lists them: the ops of one Keras layer, optimizer,
    loss or strategy replica under that owner (``owner_of``), with how many there are; the
    user's own ops by name (with their type from ``types``, when given). The finding's
    ``ops`` keep every name."""
    return listed_groups(op_groups(names), limit, types)


def op_groups(names: Sequence[str]) -> dict[str, list[str] | None]:
    """``listed_ops``' groups of ``names``, in their order: an owner's rests, or None for a
    name alone. Made once for a list that a finding's message and fix both name."""
    # a name whose first scope is nobody's (most of a large trace's) is a group of its own
    # (None: the name alone): every owner's name has a space or starts with an owner's scope
    groups: dict[str, list[str] | None] = dict.fromkeys(names)
    owned = {name for name in groups if not _plain_scope(name.partition("/")[0])}
    if owned:  # the others as owner_of groups them, in their order among the plain ones
        ordered: dict[str, list[str] | None] = {}
        for name in groups:
            if name not in owned:
                ordered[name] = None
                continue
            who, rest = owner_of(name)
            ordered.setdefault(who or name, []).append(rest if who else "")  # type: ignore[union-attr]
        groups = ordered
    return groups


def listed_groups(
    groups: dict[str, list[str] | None], limit: int = MAX_NAMED, types: Mapping | None = None
) -> str:
    """``op_groups``' ``groups`` as ``listed_ops`` words them."""
    shown = []
    # only the groups the message names are spelled out; the others are counted
    for who, rests in islice(groups.items(), limit if limit >= 0 else None):
        if rests is None or not any(rests):
            shown.append(f"{who} ({types.get(who) or '?'})" if types is not None else who)
        elif len(rests) == 1:
            shown.append(f"{who} ({rests[0]})")
        else:
            shown.append(f"{who} ({len(rests)} ops)")
    return listed_names(shown + [""] * (len(groups) - len(shown)), limit)
