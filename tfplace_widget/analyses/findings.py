"""What to fix: the ``findings`` of a trace, one row per problem, worst first.

Each finding names its ``kind``, a ``severity`` (``high``, ``medium``, ``info``), the ``ops``
it is about (so the panel can filter to them), a one-sentence ``message`` that says what to
change, and the numbers behind it (``evidence``). Pure pandas over what the trace already holds
(``ops``, ``events``, ``transfers``, ``inputs``, the graph facts and the kernel columns): no
TensorFlow session, no widget.

What can be known depends on the trace:

- a trace with the kernel columns (``gpu_kernel`` not ``"NA"``: traced here, with its graph)
  predicts where each op would run on a machine with one GPU, so a CPU-only trace already says
  which ops would fall back to the CPU there (``cpu_fallback``, ``ping_pong``,
  ``host_memory_on_gpu``);
- a trace recorded on a GPU machine shows it: ops that ran on the CPU beside a GPU. Loaded
  without its graph, why is unknown, and the message says so instead of guessing;
- a merge of several runs (``GPU_timeline_03_merged_5_runs``) can list the same op on the GPU
  and on the CPU: such duplicated runs are detected (``merged_runs``), not reported as fallbacks;
- copies, soft placement, idle devices and XLA clusters need no graph;
- a cluster trace (``cluster=``) sends tensors between tasks over the network: those copies
  are ``cross_task_transfer`` findings (per pair of tasks), not ``costly_transfer`` ones, and
  the parameter servers' idleness is expected, not an ``idle_device``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..devices import crosses_tasks, parse_device, short_device, task_of
from ..graphfacts import linked_groups
from ..summary import busy_time_us, format_bytes, format_us

COLUMNS = ["kind", "severity", "ops", "message", "evidence"]
SEVERITIES = ("high", "medium", "info")
KINDS = (
    "cpu_fallback",
    "soft_move",
    "costly_transfer",
    "cross_task_transfer",
    "ping_pong",
    "host_memory_on_gpu",
    "idle_device",
    "xla_hidden",
    "merged_runs",
)
# gpu_kernel values (analyses/kernels.py): a GPU kernel, one computing in host memory, GPU
# kernels but none for this op's dtype, no GPU kernel at all, unknown (no node def).
_NO_GPU = ("no", "dtype")
_ON_GPU = ("yes", "host")

# A costly copy: this many bytes, or this much time, per traced run.
COSTLY_BYTES = 1_000_000
COSTLY_US = 1_000.0
TOP_TRANSFERS = 3  # directions reported under costly_transfer
# A cross-task transfer goes over the network (gRPC RecvTensor), not through memory. Severity
# by bytes per step: a 10 Gb/s link moves about 1 GB/s at best, so 10 MB a step is 10 ms or
# more on the wire (100 ms on 1 Gb/s), as long as a whole step of a mid-sized model: high;
# 1 MB a step is about a millisecond there (10 ms on 1 Gb/s), worth cutting: medium. Below,
# each transfer costs a round trip (about 0.2 ms per RecvTensor even on loopback) more than
# bandwidth, which the message's count shows: info.
NETWORK_HIGH_BYTES = 10_000_000
NETWORK_MEDIUM_BYTES = 1_000_000
_RECV_TENSOR_EDGE = re.compile(r" from (\S+) to (\S+)$")  # RecvTensor labels
# Ops that write a variable (a parameter server's updates), by type prefix.
_UPDATE_PREFIXES = (
    "Assign",
    "ResourceApply",
    "ApplyGradient",
    "Apply",
    "ResourceScatter",
    "ScatterAdd",
    "ScatterSub",
    "ScatterUpdate",
    "ResourceSparseApply",
    "SparseApply",
)
# A device is idle when busy for less than this share of the step while another device is
# busy for at least BUSY_SHARE of it.
IDLE_SHARE = 0.25
BUSY_SHARE = 0.5
MAX_NAMED = 4  # op names spelled out in one message
MAX_PER_KIND = 8  # findings of one kind; the rest become one line
_RUNTIME_TYPES = {
    "_Send",
    "_Recv",
    "_HostSend",
    "_HostRecv",
    "_Arg",
    "_Retval",
    "_DeviceArg",
    "_DeviceRetval",
}
_EDGE = re.compile(r"^edge_\d+_(.+)$")
_CLUSTER_COPY = re.compile(r"^(.+)_[SG]\d+$")  # a cluster's send/recv names (_copy_key)
_GRADIENT_PREFIXES = ("gradients/", "gradient_tape/")
_XLA_TYPES = {"XlaLaunch", "XlaLaunchV2", "_XlaCompile", "_XlaRun", "_XlaMerge"}
# tf.py_function: a DEFAULT kernel places it on the GPU, but its Python body runs on the host.
_PY_FUNCTION_TYPES = {"EagerPyFunc"}
# Generators and host constants that follow their consumers: never findings of their own.
_FOLLOWERS = {"Const", "HostConst"}


def find_findings(trace: Any) -> pd.DataFrame:
    """Every finding of ``trace`` (a :class:`~tfplace_widget.trace.PlacementTrace`), sorted by
    severity, then cost (time, then bytes, then op count), as a DataFrame with ``COLUMNS``.

    Empty (with those columns) when nothing is worth changing. Raises ``TypeError`` for an
    object without the trace's ``ops`` / ``events`` / ``transfers`` frames.
    """
    for name in ("ops", "events", "transfers", "devices"):
        if not hasattr(trace, name):
            raise TypeError(
                f"find_findings takes a PlacementTrace, not {type(trace).__name__} (it has no "
                f"{name!r}). Make one with trace_placement(...) or PlacementTrace.from_*()."
            )
    context = _Context.of(trace)
    found: list[_Finding] = []
    found += _merged_runs(context)
    found += _cpu_fallbacks(context)
    found += _soft_moves(context)
    found += _costly_transfers(context)
    found += _cross_task_transfers(context)
    found += _ping_pongs(context)
    found += _host_memory_on_gpu(context)
    found += _idle_devices(context)
    found += _xla_hidden(context)
    return _frame(_capped(found))


# ---------------------------------------------------------------------------------------------
# What every rule reads
# ---------------------------------------------------------------------------------------------
@dataclass
class _Finding:
    kind: str
    severity: str
    ops: list[str]
    message: str
    evidence: dict[str, float | int]
    cost: tuple[float, float, float] = (0.0, 0.0, 0.0)  # (time us, bytes, ops): the sort key

    def __post_init__(self) -> None:
        if self.kind not in KINDS or self.severity not in SEVERITIES:
            raise ValueError(f"unknown finding kind/severity: {self.kind}/{self.severity}")
        self.ops = list(dict.fromkeys(self.ops))


@dataclass
class _Context:
    """The trace's frames reduced to plain lookups, built once per ``find_findings``."""

    trace: Any
    ops: pd.DataFrame
    device_of: dict[str, str]  # op -> device it ran on (first row of a name)
    type_of: dict[str, str]
    gpu_kernel: dict[str, str]  # op -> yes/host/dtype/no; empty when unknown
    requested: dict[str, str]
    how: dict[str, str]
    inputs: dict[str, list[str]]  # op -> producers (data edges), runtime nodes skipped
    consumers: dict[str, list[str]] = field(default_factory=dict)
    gpus: list[str] = field(default_factory=list)  # GPU devices in the trace
    # op -> "GPU"/"CPU": where it runs on a GPU machine (the trace's own devices when it has a
    # GPU; else predicted from the kernel columns). Empty when that cannot be known.
    view: dict[str, str] = field(default_factory=dict)
    why_cpu: dict[str, tuple[str, str]] = field(default_factory=dict)  # op -> (cause, partner)
    duplicated: set[str] = field(default_factory=set)  # ops on a GPU and a CPU (merged runs)
    predicted_view: bool = False
    copies_by_producer: dict[str, list[str]] | None = None
    duration_of: dict[str, float] | None = None
    runtime: set[str] | None = None
    position: dict[str, int] | None = None

    @classmethod
    def of(cls, trace: Any) -> _Context:
        ops = trace.ops
        names = ops["op"].tolist()
        devices = ops["device"].tolist()
        device_of: dict[str, str] = {}
        for name, device in zip(names, devices, strict=True):
            device_of.setdefault(name, device)
        type_of = dict(zip(names, ops["type"].tolist(), strict=True))
        kernel_known = "gpu_kernel" in ops and bool((ops["gpu_kernel"].astype(str) != "NA").any())
        gpu_kernel = (
            {
                n: k
                for n, k in zip(names, ops["gpu_kernel"].astype(str).tolist(), strict=True)
                if k != "NA"
            }
            if kernel_known
            else {}
        )
        requested = dict(zip(names, ops["requested_device"].astype(str).tolist(), strict=True))
        how = dict(zip(names, ops["how"].astype(str).tolist(), strict=True))
        facts = getattr(trace, "facts", None)
        raw_inputs = trace.inputs or (facts.inputs if facts is not None else {})
        context = cls(
            trace=trace,
            ops=ops,
            device_of=device_of,
            type_of=type_of,
            gpu_kernel=gpu_kernel,
            requested=requested,
            how=how,
            inputs={},
            gpus=[d for d in trace.devices if _device_type(d) == "GPU"],
        )
        context.inputs = context._through_copies(raw_inputs)
        for op, producers in context.inputs.items():
            for producer in producers:
                context.consumers.setdefault(producer, []).append(op)
        context.duplicated = context._duplicated_names()
        context._build_view(facts)
        return context

    # -- the graph, with the runtime's copies looked through ------------------------------------
    def _through_copies(self, raw: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
        """Data edges between user ops: a ``_Recv`` input becomes the op its ``_Send`` sent."""
        type_of = self.type_of
        sent_by: dict[str, str] = {}  # "<producer>/_N" recv/send prefix -> producer
        for name, producers in raw.items():
            if producers and type_of.get(name) in ("_Send", "_HostSend"):
                sent_by[_copy_key(name)] = producers[0]
        self.is_runtime("")  # builds the set
        runtime = self.runtime or set()
        user = {n for n in type_of if n not in runtime}
        receives = ("_Recv", "_HostRecv")
        edges: dict[str, list[str]] = {}
        for name, producers in raw.items():
            if name not in user:
                continue
            if user.issuperset(producers):  # most ops: no copy, nothing to resolve
                edges[name] = list(producers)
                continue
            resolved = []
            for producer in producers:
                if type_of.get(producer) in receives:
                    producer = sent_by.get(_copy_key(producer), _copy_key(producer))
                elif producer not in type_of:  # a recv the trace did not record: X/_5
                    producer = _copy_key(producer)
                if producer in user:
                    resolved.append(producer)
            edges[name] = resolved
        return edges

    def is_runtime(self, name: str) -> bool:
        """Inserted by TensorFlow (copies, feeds, fetches, ``_SOURCE``): never a finding."""
        if self.runtime is None:
            self.runtime = {
                n
                for n, t in self.type_of.items()
                if self.how.get(n) == "runtime"
                or t in _RUNTIME_TYPES
                or n in ("_SOURCE", "_SINK")
                or t.upper().startswith("MEMCPY")
            }
        return name in self.runtime

    def _duplicated_names(self) -> set[str]:
        """Op names listed on a GPU and on a CPU: one op, recorded in several runs whose
        device lanes a merge mixed up (process ids differ per run), not a fallback."""
        if not self.gpus:
            return set()
        types = self.ops["device"].map(_device_type)
        on_gpu = set(self.ops.loc[types == "GPU", "op"])
        on_cpu = self.ops.loc[types == "CPU", "op"]
        return {n for n in on_cpu if n in on_gpu and not self.is_runtime(n)}

    # -- where each op runs on a GPU machine ----------------------------------------------------
    def _build_view(self, facts: Any) -> None:
        self.predicted_view = bool(getattr(self.trace, "predicted", False))
        if self.gpus:  # recorded (or predicted) with a GPU: the trace says it
            for name, device in self.device_of.items():
                kind = _device_type(device)
                if kind in ("GPU", "CPU") and not self.is_runtime(name):
                    self.view[name] = "GPU" if name in self.duplicated else kind
            reasons = dict(zip(self.ops["op"], self.ops["reason"].astype(str), strict=True))
            for name, kind in self.view.items():
                if kind == "CPU":
                    cause = self._kernel_cause(name)
                    if cause[0] == "" and self.how.get(name) == "colocated":
                        cause = ("colocated", _partner_from_reason(reasons.get(name, ""), self))
                    self.why_cpu[name] = cause
            return
        if not self.gpu_kernel:  # no GPU, no kernel facts: nothing to predict from
            return
        self.predicted_view = True
        predicted = _predict_with_module(self, facts)
        if predicted is not None:
            for name, (device, how, reason) in predicted.items():
                if name not in self.type_of or self.is_runtime(name):
                    continue
                self.view[name] = _device_type(device)
                if self.view[name] == "CPU":
                    cause = self._kernel_cause(name)
                    if cause[0] == "" and how == "colocated":
                        cause = ("colocated", _partner_from_reason(reason, self))
                    self.why_cpu[name] = cause
            return
        self._predict_here(facts)

    def _kernel_cause(self, name: str) -> tuple[str, str]:
        kernel = self.gpu_kernel.get(name, "")
        if kernel in _NO_GPU:
            return (kernel, "")
        if _device_type(self.requested.get(name, "")) == "CPU":
            return ("requested", "")
        return ("", "")

    def _predict_here(self, facts: Any) -> None:
        """One GPU, soft placement on: an op with a GPU kernel and no CPU request goes to the
        GPU; then a resource/ref group (a variable, an iterator and their readers) goes where
        its CPU-only member must (placement-rules.md 4-6)."""
        for name, kernel in self.gpu_kernel.items():
            if self.is_runtime(name):
                continue
            asked_cpu = _device_type(self.requested.get(name, "")) == "CPU"
            self.view[name] = "GPU" if kernel in _ON_GPU and not asked_cpu else "CPU"
            if self.view[name] == "CPU":
                self.why_cpu[name] = self._kernel_cause(name)
        if facts is not None:
            for members in _resource_groups(facts, self.view):
                anchors = sorted(m for m in members if self.gpu_kernel.get(m) in _NO_GPU)
                for member in members if anchors else ():
                    if self.view.get(member) == "GPU":
                        self.view[member] = "CPU"
                        self.why_cpu[member] = ("colocated", anchors[0])
        self._generators_follow_consumers()

    def _generators_follow_consumers(self) -> None:
        """A constant goes where all its consumers go (placement-rules.md 10)."""
        for name in list(self.view):
            if self.type_of.get(name) not in _FOLLOWERS or self.inputs.get(name):
                continue
            kinds = {self.view.get(c) for c in self.consumers.get(name, [])} - {None}
            if len(kinds) == 1:
                self.view[name] = kinds.pop()

    # -- small helpers ----------------------------------------------------------------------------
    def dtypes(self, name: str) -> str:
        """The op's type attrs (``"int32"``), from the kernel facts of its node def."""
        facts = getattr(self.trace, "facts", None)
        kernel = getattr(facts, "kernels", {}).get(name) if facts is not None else None
        return getattr(kernel, "dtypes", "") if kernel is not None else ""

    def short(self, name: str) -> str:
        return short_device(self.device_of.get(name, "")) or "?"

    def gpu_name(self) -> str:
        return short_device(self.gpus[0]) if self.gpus else "GPU:0"


def _predict_with_module(context: _Context, facts: Any) -> dict[str, tuple[str, str, str]] | None:
    """``predict_devices`` (one GPU, soft placement): every placer rule replayed, about 0.1 s
    per 100k nodes. None without facts, or when the prediction fails (then the kernel columns
    and resource groups alone decide: ``_predict_here``)."""
    if facts is None:
        return None
    from .predict import master_task, predict_devices, predicted_devices

    # predict_placement's device set: a GPU on every task (each task of a cluster is a machine
    # of its own), and the session's own task first among equals.
    devices = predicted_devices(context.trace.devices, 1)
    try:
        frame = predict_devices(
            facts, devices, soft_placement=True, local_task=master_task(context.trace)
        )
    except Exception:  # a prediction that fails must not cost the other findings
        return None
    return {
        op: (str(device), str(how), str(reason))
        for op, device, how, reason in zip(
            frame["op"], frame["predicted_device"], frame["how"], frame["reason"], strict=True
        )
    }


def _partner_from_reason(reason: str, context: _Context) -> str:
    """The op a colocation reason names (its first word that is an op of the trace)."""
    for word in reason.replace(",", " ").replace(";", " ").split():
        word = word.strip(".()")
        if word in context.type_of:
            return word
    return ""


def _resource_groups(facts: Any, view: Mapping[str, str]) -> list[set[str]]:
    """Ops tied to one device by resource/ref edges or ``colocate_with``, among ``view``'s."""
    return linked_groups(facts, keep=view.__contains__)


# ---------------------------------------------------------------------------------------------
# The rules, one per kind
# ---------------------------------------------------------------------------------------------
def _merged_runs(context: _Context) -> list[_Finding]:
    duplicated = sorted(context.duplicated)
    if not duplicated:
        return []
    runs = _runs_of(context.ops, duplicated)
    return [
        _Finding(
            "merged_runs",
            "info",
            duplicated,
            (
                f"{len(duplicated)} ops are listed on the CPU and on {context.gpu_name()} "
                f"({_names(duplicated)}): this trace merges several runs whose device lanes "
                "were mixed up, so they are not CPU fallbacks; trace one run to see one "
                "placement."
            ),
            {"ops": len(duplicated), "records": runs},
            (0.0, 0.0, float(len(duplicated))),
        )
    ]


def _cpu_fallbacks(context: _Context) -> list[_Finding]:
    """Ops on the CPU of a GPU machine (seen, or predicted from the kernel registry): one
    finding per connected stretch of them with one cause, the input pipeline as one."""

    def falls_back(name: str) -> bool:
        cause = context.why_cpu.get(name, ("", ""))[0]
        if cause == "requested":  # asked for the CPU: not a fallback
            return False
        # With kernel facts, an op with a GPU kernel on the CPU for no reason of its own
        # follows its input or consumer there (Shape, Identity): that op's finding covers it.
        return bool(cause) or context.gpu_kernel.get(name, "NA") not in _ON_GPU

    fallbacks = [
        name
        for name, kind in context.view.items()
        if kind == "CPU"
        and name not in context.duplicated
        and context.type_of.get(name) not in _FOLLOWERS
        and falls_back(name)
    ]
    # A dataset or iterator op in the step runs on the host with its iterator, wherever a
    # prediction puts it (iterators have no GPU kernel: the resource lives on the CPU).
    pipeline = [
        n
        for n, t in context.type_of.items()
        if _is_pipeline(t) and n in context.view and n not in context.duplicated
    ]
    findings: list[_Finding] = []
    if pipeline:
        findings.append(_pipeline_finding(context, pipeline))
    rest = [n for n in fallbacks if n not in set(pipeline)]
    if not pipeline and not rest:
        return []
    cause_of = {n: context.why_cpu.get(n, ("", ""))[0] for n in rest}
    grouped: set[str] = set()
    for name in rest:
        if name in grouped:
            continue
        group = [name]
        grouped.add(name)
        todo = [name]
        while todo:  # neighbours that fall back for the same cause join this finding
            current = todo.pop()
            for other in context.inputs.get(current, []) + context.consumers.get(current, []):
                if other in cause_of and other not in grouped and cause_of[other] == cause_of[name]:
                    grouped.add(other)
                    group.append(other)
                    todo.append(other)
        findings.append(_fallback_finding(context, _in_order(context, group), cause_of[name]))
    return findings


def _fallback_finding(context: _Context, names: list[str], cause: str) -> _Finding:
    gpu = context.gpu_name()
    one = len(names) == 1
    where = "would run" if context.predicted_view else ("runs" if one else "run")
    typed = _names([f"{n} ({context.type_of.get(n, '') or '?'})" for n in names])
    subject = f"{typed} {where}"
    if cause == "no":
        types = {context.type_of.get(n, "") for n in names}
        if all("String" in t or t.startswith(("AsString", "Substr", "Regex")) for t in types):
            message = (
                f"{subject} on the CPU: string ops have no GPU kernel. Turn strings into "
                "numbers in the input pipeline (tf.data), before the step."
            )
        elif types <= {"PyFunc", "PyFuncStateless"}:
            message = (
                f"{subject} on the CPU: tf.numpy_function has no GPU kernel. Write its body "
                "with TensorFlow ops, or run it in the input pipeline (tf.data)."
            )
        else:
            message = (
                f"{subject} on the CPU: {_names(sorted(types))} "
                f"{'has' if len(types) == 1 else 'have'} no GPU kernel. Do it outside the "
                "step (in the input pipeline, or once before), or use ops that have one."
            )
    elif cause == "dtype":
        first = names[0]
        dtype = context.dtypes(first)
        op_type = context.type_of.get(first, "")
        what = f"{dtype} {op_type}" if dtype else f"{op_type} with this dtype"
        cast = "float32" if dtype != "float32" else "float16"
        message = (
            f"Cast to {cast} before the {op_type} ({_names(names)}): {what} has no GPU "
            f"kernel, so {'it' if one else 'they'} {where} on the CPU."
        )
    elif cause == "colocated":
        anchors = sorted({context.why_cpu[n][1] for n in names if context.why_cpu[n][1]})
        anchor = _names(anchors) or "a CPU-only op"
        message = (
            f"{subject} on the CPU although {'it has' if one else 'they have'} a GPU kernel: "
            f"{'it shares' if one else 'they share'} a resource with {anchor}, which has "
            "none. Move that resource (and its readers) out of the step, or use a resource "
            "type with a GPU kernel."
        )
    else:  # seen on the CPU of a GPU trace, why unknown (no graph)
        message = (
            f"{subject.replace(' runs', ' ran').replace(' would run', ' ran')} on "
            f"{context.short(names[0])} while {gpu} was there: the graph was not given, so "
            "whether a GPU kernel exists is unknown. Load the trace with its graph "
            "(PlacementTrace.from_run_metadata(..., graph=)) to see why."
        )
    members = set(names)
    neighbours = {
        n
        for name in names
        for n in context.inputs.get(name, []) + context.consumers.get(name, [])
        if n not in members and not _follower(context, n)
    }
    copies = sum(context.view.get(n) == "GPU" for n in neighbours)
    known = cause in ("no", "dtype", "colocated")
    severity = "high" if known and copies else ("medium" if known or copies else "info")
    ops = list(names)
    for name in names:  # the constants that feed it go with it
        ops += [n for n in context.inputs.get(name, []) if _follower(context, n)]
        if cause == "colocated" and context.why_cpu[name][1]:
            ops.append(context.why_cpu[name][1])
    duration = _duration(context, names)
    return _Finding(
        "cpu_fallback",
        severity,
        ops,
        message,
        {"ops": len(names), "gpu_neighbours": copies, "duration_us": duration},
        (duration, 0.0, float(copies)),
    )


def _pipeline_finding(context: _Context, pipeline: list[str]) -> _Finding:
    readers = [
        n
        for n in pipeline
        if context.why_cpu.get(n, ("", ""))[0] == "colocated"
        or context.type_of.get(n, "").startswith("IteratorGetNext")
    ]
    names = _names(pipeline)
    where = "would run" if context.predicted_view else "run"
    message = (
        f"The tf.data input pipeline is inside the step ({names}) and {where} on the CPU: "
        "iterators and datasets have no GPU kernel and their readers stay with them. Iterate "
        "the dataset outside the step and pass batches in, with "
        "dataset.prefetch(tf.data.AUTOTUNE) so the copy to the GPU overlaps the step."
    )
    duration = _duration(context, pipeline)
    consumers = {c for n in pipeline for c in context.consumers.get(n, [])} - set(pipeline)
    copies = sum(context.view.get(c) == "GPU" for c in consumers)
    return _Finding(
        "cpu_fallback",
        "high" if copies else "medium",
        pipeline,
        message,
        {"ops": len(pipeline), "readers": len(readers), "duration_us": duration},
        (duration, 0.0, float(len(pipeline))),
    )


def _soft_moves(context: _Context) -> list[_Finding]:
    ops = context.ops
    soft = ops[ops["how"].astype(str) == "soft"]
    if soft.empty:
        return []
    findings = []
    for (requested, device), group in soft.groupby(["requested_device", "device"], sort=True):
        names = group["op"].tolist()
        asked = _device_type(requested)
        got = _device_type(device)
        exists = any(_matches(requested, d) for d in context.trace.devices)
        if not exists:
            fix = (
                f"{requested} does not exist here: drop the tf.device or name a device "
                f"that exists ({', '.join(short_device(d) for d in context.trace.devices)})."
            )
            severity = "medium" if asked != "GPU" else ("info" if not context.gpus else "high")
        elif asked == "GPU" and any(context.gpu_kernel.get(n) in _NO_GPU for n in names):
            fix = (
                "it has no GPU kernel for its dtype: cast to one that has (float32), or pin "
                "it to the CPU on purpose so the move is explicit."
            )
            severity = "high" if got == "CPU" else "medium"
        else:
            fix = (
                "the placer could not honour the request (its reason column says why); "
                "move the request, or the op it is tied to, so that both agree."
            )
            severity = "high" if asked == "GPU" and got == "CPU" else "medium"
        count = f"{len(names)} ops ask" if len(names) > 1 else f"{names[0]} asks"
        message = (
            f"{count} for {requested} and ran on {short_device(device) or device} "
            f"({_names(names)}): {fix}"
        )
        duration = _duration(context, names)
        findings.append(
            _Finding(
                "soft_move",
                severity,
                names,
                message,
                {"ops": len(names), "duration_us": duration},
                (duration, 0.0, float(len(names))),
            )
        )
    return findings


def _costly_transfers(context: _Context) -> list[_Finding]:
    """The top copy directions by time, bytes and count; feeds and fetches apart (they are
    the step's own inputs and results, so only ``info``)."""
    transfers = context.trace.transfers
    if transfers is None or transfers.empty:
        return []
    events = context.trace.events
    # memcpy records (GPU traces) are named after the copied edge: their time is the copy's
    copy_time = events.groupby("op")["duration_us"].sum().to_dict() if len(events) else {}
    steps = max(1, _steps(context))
    directions: dict[tuple[str, str, str], list[tuple]] = {}
    columns = transfers[["tensor", "src_device", "dst_device", "bytes"]]
    crossing = _crosses_tasks(transfers)
    for (tensor, src, dst, size), network in zip(
        columns.itertuples(index=False), crossing, strict=True
    ):
        if src == dst:  # a predicted host <-> device memory crossing: host_memory_on_gpu's
            continue
        if network:  # between tasks of a cluster: cross_task_transfer's
            continue
        producer = _copied_op(context, tensor)
        consumers = [c for c in context.consumers.get(producer, []) if c in context.type_of]
        io = "feed" if _is_feed(context, tensor, producer) else "" if consumers else "fetch"
        row = (tensor, producer, None if pd.isna(size) else int(size), copy_time.get(tensor, 0.0))
        directions.setdefault((src, dst, io), []).append(row)
    findings = []
    for (src, dst, io), group in directions.items():
        count = len(group)
        sizes = [r[2] for r in group if r[2] is not None]
        moved = sum(sizes)
        seconds = float(sum(r[3] for r in group))
        producers = sorted({r[1] for r in group if r[1] in context.type_of})
        consumers = sorted(
            {c for p in producers for c in context.consumers.get(p, []) if c in context.type_of}
        )
        ops = [o for p in producers for o in (p, *_copy_nodes(context, p))] + consumers
        ops += [r[0] for r in group if r[0] in context.type_of]  # memcpy records
        biggest = max(group, key=lambda r: (r[2] or 0, r[3]))
        heavy = moved / steps >= COSTLY_BYTES or seconds / steps >= COSTLY_US
        some = moved / steps >= COSTLY_BYTES / 100 or count >= 10
        severity = "info" if io else ("high" if heavy else "medium" if some else "info")
        unknown = "sizes unknown" if context.predicted_view else "sizes not recorded"
        size_text = format_bytes(moved) if sizes else unknown
        if len(sizes) < count and sizes:
            size_text += f", {len(sizes)} of {count} sizes known"
        time_text = f", {format_us(seconds)} copying" if seconds else ""
        s_src, s_dst = short_device(src) or src, short_device(dst) or dst
        if io == "feed":
            fix = (
                "the step's inputs, copied in every step: feed them from a tf.data pipeline "
                "that prefetches, so the copy overlaps the previous step"
            )
        elif io == "fetch":
            fix = "the step's results, going back to the caller: fetch only what you need"
        elif producers and consumers and _all_on_one_gpu(context, producers + consumers):
            fix = (
                f"{_names(producers)} and {_names(consumers)} all run on "
                f"{context.short(producers[0])}, yet the tensors cross to host memory: GPU "
                "kernels that compute in host memory (int32 shape arithmetic) sit among them; "
                "cast to float32, or keep that arithmetic away from the GPU's tensors"
            )
        elif producers and consumers:
            fix = (
                f"put {_names(producers)} on {s_dst} with {_names(consumers)}, or those on "
                f"{s_src}, so the tensors stay on one device"
            )
        else:
            fix = "keep the producers and consumers of these tensors on one device"
        plural = "copies" if count > 1 else "copy"
        message = (
            f"{count} {plural} from {s_src} to {s_dst} ({size_text}{time_text}; largest "
            f"{biggest[0]}): {fix}."
        )
        evidence = {"copies": count, "bytes": moved if sizes else -1, "time_us": seconds}
        evidence["steps"] = steps
        findings.append(
            _Finding(
                "costly_transfer",
                severity,
                ops or [r[0] for r in group],
                message,
                evidence,
                (seconds, float(moved), float(count)),
            )
        )
    findings.sort(key=lambda f: (f.severity != "info", *f.cost), reverse=True)
    return findings[:TOP_TRANSFERS]


def _copied_op(context: _Context, tensor: str) -> str:
    """The op whose output a transfer copies: ``A:0`` -> ``A``; ``edge_22_MatMul`` (a TF 1.x
    memcpy record) -> ``MatMul``."""
    name = tensor.rpartition(":")[0] if ":" in tensor else tensor
    match = _EDGE.match(name)
    if match and match.group(1) in context.type_of:
        return match.group(1)
    return name


def _is_feed(context: _Context, tensor: str, producer: str) -> bool:
    op_type = context.type_of.get(producer, "")
    return (
        op_type in ("_Arg", "Placeholder", "_Recv", "_HostRecv")
        or "_recv_" in tensor
        or "_arg_" in tensor
    )


def _crosses_tasks(transfers: pd.DataFrame) -> list[bool]:
    """Per transfer row: between two tasks of a cluster (the ``cross_task`` column; computed
    for frames without it, such as those of files saved before it)."""
    if "cross_task" in transfers:
        return [bool(v) for v in transfers["cross_task"].fillna(False).tolist()]
    return crosses_tasks(
        transfers["src_device"].tolist(), transfers["dst_device"].tolist()
    ).tolist()


def _cross_task_transfers(context: _Context) -> list[_Finding]:
    """Tensors sent between tasks of a cluster, over the network: one finding per (source
    task, destination task), with its transfers a step, bytes and largest tensors, and the
    fix that fits what crosses (variable reads, variable updates, or computed tensors)."""
    transfers = context.trace.transfers
    if transfers is None or transfers.empty:
        return []
    crossing = _crosses_tasks(transfers)
    if not any(crossing):
        return []
    steps = max(1, _steps(context))
    pairs: dict[tuple[str, str], list[tuple]] = {}
    columns = transfers[["tensor", "src_device", "dst_device", "bytes"]]
    for (tensor, src, dst, size), network in zip(
        columns.itertuples(index=False), crossing, strict=True
    ):
        if network:
            row = (tensor, src, dst, None if pd.isna(size) else int(size))
            pairs.setdefault((task_of(src) or src, task_of(dst) or dst), []).append(row)
    received = _receive_time(context)
    findings = []
    for (src_task, dst_task), group in pairs.items():
        findings.append(
            _cross_task_finding(
                context, src_task, dst_task, group, received.get((src_task, dst_task), 0.0), steps
            )
        )
    return findings


def _relayed_updates(
    context: _Context, starts: Sequence[str], task: str, hops: int = 4
) -> list[str]:
    """The variable updates on other tasks than ``task`` that ``starts`` (on ``task``) feed,
    through at most ``hops`` ops on ``task``; none when they feed anything else off ``task``.
    Gradients summed on the chief and sent on to the ps tasks make the chief a relay."""
    seen, frontier, found = set(starts), list(starts), []
    for _ in range(hops):
        following = []
        for op in frontier:
            for consumer in context.consumers.get(op, []):
                if consumer in seen or context.is_runtime(consumer):
                    continue
                seen.add(consumer)
                where = task_of(context.device_of.get(consumer, ""))
                if where == task:
                    following.append(consumer)
                elif where:
                    if not context.type_of.get(consumer, "").startswith(_UPDATE_PREFIXES):
                        return []
                    found.append(consumer)
        frontier = following
    return found


def _receive_time(context: _Context) -> dict[tuple[str, str], float]:
    """Time the workers spent in ``RecvTensor`` per (source task, destination task), over all
    traced steps, from the records' labels (``... from <device> to <device>``)."""
    events = context.trace.events
    if events is None or events.empty or "label" not in events:
        return {}
    recv = events[events["op"] == "RecvTensor"]
    out: dict[tuple[str, str], float] = {}
    for label, duration in zip(recv["label"].astype(str), recv["duration_us"], strict=True):
        match = _RECV_TENSOR_EDGE.search(label)
        if match and not pd.isna(duration):
            key = (task_of(match.group(1)), task_of(match.group(2)))
            out[key] = out.get(key, 0.0) + float(duration)
    return out


def _cross_task_finding(
    context: _Context,
    src_task: str,
    dst_task: str,
    group: list[tuple],
    seconds: float,
    steps: int,
) -> _Finding:
    count = len(group)
    sizes = [r[3] for r in group if r[3] is not None]
    moved = sum(sizes)
    # Control edges (an update's "done" signal) cross as 0-byte tensors: counted, not named.
    named = sorted((r for r in group if r[3] != 0), key=lambda r: -(r[3] or 0))
    shown = ", ".join(
        f"{r[0]} ({format_bytes(r[3])})" if r[3] is not None else r[0] for r in named[:3]
    )
    if len(named) > 3:
        shown += f" and {len(named) - 3} more"
    if len(named) < count:
        signals = count - len(named)
        shown += f"{', ' if shown else ''}{signals} control signal{'s' * (signals != 1)} (0 B)"
    producers = list(dict.fromkeys(_copied_op(context, r[0]) for r in group))
    user_producers = [p for p in producers if p in context.type_of and not context.is_runtime(p)]
    dst_devices = {r[2] for r in group}
    consumers = list(
        dict.fromkeys(
            c
            for p in producers
            for c in context.consumers.get(p, [])
            if context.device_of.get(c) in dst_devices and not context.is_runtime(c)
        )
    )
    facts = getattr(context.trace, "facts", None)
    resource_inputs = getattr(facts, "resource_inputs", {}) if facts is not None else {}
    reads = [p for p in user_producers if resource_inputs.get(p)]
    variables = sorted({v for p in reads for v in resource_inputs.get(p, ())})
    updates = [c for c in consumers if context.type_of.get(c, "").startswith(_UPDATE_PREFIXES)]
    feeds = [p for p in producers if _is_feed(context, f"{p}:0", p)]
    computed = [p for p in user_producers if p not in reads]
    if reads:
        fix = (
            f"reads of the variables on {src_task} ({_names(variables)}), sent every step. "
            "Partition large variables over the ps tasks (partitioner= in "
            "tf.compat.v1.variable_scope / get_variable) so no one task ships them all; read "
            "each variable once a step on the worker and reuse that read; or colocate the "
            "compute that shrinks it with the variable (tf.compat.v1.colocate_with(var)) so "
            "only the smaller result crosses"
        )
        if computed:
            fix += (
                f". Also crossing: {_names(computed)}, computed on {src_task} and read on "
                f"{dst_task}: put {'it' if len(computed) == 1 else 'them'} on one task with "
                "its readers"
            )
    elif updates:
        updated = {v for u in updates for v in resource_inputs.get(u, ())}
        once = bool(updated) and len(updated) == len(updates)
        fix = f"updates of the variables on {dst_task} ({_names(updates)}), sent every step. " + (
            "Each variable already gets one update a step, so what crosses is its size: "
            "partition large variables so the updates spread over the ps tasks"
            if once
            else "Aggregate the gradients on the worker so each variable gets one update a "
            "step, and partition large variables so the updates spread over the ps tasks"
        )
    elif feeds and len(feeds) == len(producers):
        fix = (
            f"fed values arriving on the session's task and sent on to {dst_task}: feed "
            f"them where they are used (read the input on {dst_task} with tf.data there)"
        )
    elif (
        user_producers and consumers and (updated := _relayed_updates(context, consumers, dst_task))
    ):
        targets = sorted({task_of(context.device_of.get(op, "")) for op in updated})
        fix = (
            f"{dst_task} passes them on: {_names(consumers)} there combine "
            f"{'them' if len(user_producers) > 1 else 'it'} and send the result on to "
            f"{', '.join(targets)}, to update variables ({_names(updated)}). Compute each "
            "gradient's mean (or sum) on its variable's ps task (tf.device(var.device) around "
            "it): every worker then sends straight there"
        )
    elif user_producers and consumers:
        fix = (
            f"{_names(consumers)} on {dst_task} read{'s' if len(consumers) == 1 else ''} "
            f"{_names(user_producers)} computed on {src_task}: put them on one task "
            f"(tf.device('{src_task}') around {_names(consumers)}, or the other way round), "
            "so only what must cross does"
        )
    else:
        fix = "keep the producers and consumers of these tensors on one task"
    predicted = bool(getattr(context.trace, "predicted", False))  # predict_placement's copies
    verb = "would cross" if predicted else "cross"
    plural = "transfers" if count > 1 else "transfer"
    unknown = "sizes unknown" if predicted else "sizes not recorded"
    size_text = f"{format_bytes(moved)} a step" if sizes else unknown
    if sizes and len(sizes) < count:
        size_text += f", {len(sizes)} of {count} sizes known"
    time_text = f", {format_us(seconds / steps)} a step in RecvTensor" if seconds else ""
    message = (
        f"{count} {plural} a step {verb} the network from {src_task} to {dst_task} "
        f"({size_text}{time_text}; largest: {shown}): {fix}."
    )
    if not sizes:
        severity = "info"
    elif moved >= NETWORK_HIGH_BYTES:
        severity = "high"
    elif moved >= NETWORK_MEDIUM_BYTES:
        severity = "medium"
    else:
        severity = "info"
    ops = [o for p in user_producers for o in (p, *_copy_nodes(context, p))] + consumers
    evidence = {
        "copies": count,
        "bytes": moved if sizes else -1,
        "steps": steps,
        "time_us": seconds,
    }
    return _Finding(
        "cross_task_transfer",
        severity,
        ops or [r[0] for r in group],
        message,
        evidence,
        (seconds, float(moved), float(count)),
    )


def _ping_pongs(context: _Context) -> list[_Finding]:
    """Chains GPU -> CPU -> GPU: each CPU stretch between GPU ops costs two copies a step."""
    view = context.view
    if not view or not any(kind == "GPU" for kind in view.values()):
        return []
    findings: list[_Finding] = []
    seen: set[str] = set()
    for start, kind in view.items():
        if kind != "CPU" or start in seen or start in context.duplicated:
            continue
        stretch = _cpu_stretch(context, start)
        seen |= stretch
        inside = [n for n in stretch if context.type_of.get(n) not in _FOLLOWERS]
        if not inside:
            continue
        before = sorted(
            {p for n in stretch for p in context.inputs.get(n, []) if view.get(p) == "GPU"}
        )
        after = sorted(
            {c for n in stretch for c in context.consumers.get(n, []) if view.get(c) == "GPU"}
        )
        if before and after:
            findings.append(_ping_pong_finding(context, sorted(inside), before, after))
    for name, kind in view.items():  # tf.py_function: on the GPU, its Python on the host
        if kind == "GPU" and context.type_of.get(name) in _PY_FUNCTION_TYPES:
            before = context.inputs.get(name, [])
            after = context.consumers.get(name, [])
            verb = "would copy" if context.predicted_view else "copies"
            message = (
                f"{name} (tf.py_function) sits on {context.gpu_name()} but its Python body runs "
                f"on the host: it {verb} its inputs GPU -> host and its result back every "
                "step. Write the body with TensorFlow ops, or move it into the input "
                "pipeline (tf.data)."
            )
            duration = _duration(context, [name])
            findings.append(
                _Finding(
                    "ping_pong",
                    "high",
                    [*before, name, *after],
                    message,
                    {"copies": len(before) + max(1, len(after)), "duration_us": duration},
                    (duration, 0.0, float(len(before) + len(after))),
                )
            )
    return findings


def _ping_pong_finding(
    context: _Context, inside: list[str], before: list[str], after: list[str]
) -> _Finding:
    chain = f"{_names(before, 2)} -> {_names(inside, 2)} -> {_names(after, 2)}"
    gpu = context.gpu_name()
    causes = {context.why_cpu.get(n, ("", ""))[0] for n in inside}
    fix = (
        "make the CPU part run on the GPU (its fallback finding says how)"
        if causes & {"no", "dtype", "colocated"}
        else "move the CPU part onto the GPU, or the whole chain onto one device"
    )
    verb = "would go" if context.predicted_view else "goes"
    copies = len(before) + len(after)
    duration = _duration(context, inside)
    return _Finding(
        "ping_pong",
        "high" if copies >= 2 and causes & {"no", "dtype", "colocated"} else "medium",
        [*before, *inside, *after],
        f"{chain} {verb} {gpu} -> CPU -> {gpu}, {copies} copies a step: {fix}.",
        {"copies": copies, "cpu_ops": len(inside), "duration_us": duration},
        (duration, 0.0, float(copies)),
    )


def _cpu_stretch(context: _Context, start: str) -> set[str]:
    """``start`` and the CPU ops joined to it by data edges that stay on the CPU."""
    stretch = {start}
    todo = [start]
    while todo:
        name = todo.pop()
        for other in context.inputs.get(name, []) + context.consumers.get(name, []):
            if other not in stretch and context.view.get(other) == "CPU":
                stretch.add(other)
                todo.append(other)
    return stretch


def _host_memory_on_gpu(context: _Context) -> list[_Finding]:
    if not context.gpu_kernel:
        return _host_memory_seen(context)
    host = [
        name
        for name, kernel in context.gpu_kernel.items()
        if kernel == "host"
        and context.view.get(name) == "GPU"
        and context.type_of.get(name) not in _FOLLOWERS
        and not context.is_runtime(name)
    ]
    by_type: dict[str, list[str]] = {}
    for name in host:
        by_type.setdefault(context.type_of.get(name, ""), []).append(name)
    findings = []
    for op_type, names in sorted(by_type.items()):
        copies = _memory_crossings(context, names)
        if not copies:  # host ops among host ops (shape arithmetic) copy nothing: harmless
            continue
        generated = all(n.startswith(_GRADIENT_PREFIXES) for n in names)
        verb = "would compute" if context.predicted_view else "compute"
        dtype = context.dtypes(names[0])
        dtype = f"{dtype} " if dtype else ""
        fix = (
            "TensorFlow's gradient code made it; Grappler's constant folding usually removes "
            "such shape arithmetic (optimize=True shows what runs then)."
            if generated
            else "Cast to float32 for real GPU work, or keep this shape/index arithmetic "
            "away from the GPU's tensors."
        )
        message = (
            f"{len(names)} {op_type} op{'s' if len(names) > 1 else ''} ({_names(names)}) {verb} "
            f"in host memory on {context.gpu_name()}: the GPU kernel of {dtype}{op_type} keeps "
            f"its inputs and outputs on the host, so {copies} tensor"
            f"{'s cross' if copies > 1 else ' crosses'} between device and host memory. {fix}"
        )
        duration = _duration(context, names)
        findings.append(
            _Finding(
                "host_memory_on_gpu",
                "info" if generated else "medium",
                names,
                message,
                {"ops": len(names), "copies": copies, "duration_us": duration},
                (duration, 0.0, float(len(names))),
            )
        )
    return findings


def _memory_crossings(context: _Context, names: Sequence[str]) -> int:
    """Edges between ``names`` and GPU ops where the tensor changes memory (host <-> device):
    each is a copy. An input the consumer's GPU kernel takes in host memory anyway (a Sum's
    axes) is no crossing."""
    facts = getattr(context.trace, "facts", None)
    kernels = getattr(facts, "kernels", {}) if facts is not None else {}
    built_inputs = getattr(facts, "inputs", {}) if facts is not None else {}

    def host_out(op: str) -> bool:
        kernel = kernels.get(op)
        return context.gpu_kernel.get(op) == "host" or bool(
            kernel is not None and 0 in kernel.gpu_host_outputs
        )

    def host_in(op: str, producer: str) -> bool:
        if context.gpu_kernel.get(op) == "host":
            return True
        kernel = kernels.get(op)
        positions = [i for i, p in enumerate(built_inputs.get(op, [])) if p == producer]
        return bool(kernel is not None and positions and positions[0] in kernel.gpu_host_inputs)

    crossings: set[tuple[str, str]] = set()  # (producer, consumer): one copy per pair
    members = set(names)
    edges = [(p, n) for n in names for p in context.inputs.get(n, []) if p not in members]
    edges += [(n, c) for n in names for c in context.consumers.get(n, []) if c not in members]
    for producer, consumer in edges:
        other = consumer if producer in members else producer
        if context.view.get(other) == "GPU" and host_out(producer) != host_in(consumer, producer):
            crossings.add((producer, consumer))
    return len(crossings)


def _host_memory_seen(context: _Context) -> list[_Finding]:
    """Without kernel facts, a GPU trace still shows it: a copy to the host between two ops
    that both sit on the GPU means the reader computes in host memory (or the writer, for a
    copy to the device)."""
    transfers = context.trace.transfers
    if not context.gpus or transfers is None or transfers.empty:
        return []
    host: dict[str, int] = {}
    for tensor, dst in transfers[["tensor", "dst_device"]].itertuples(index=False):
        producer = _copied_op(context, tensor)
        consumers = [c for c in context.consumers.get(producer, []) if c in context.type_of]
        if not consumers or not _all_on_one_gpu(context, [producer, *consumers]):
            continue
        to_host = _device_type(dst) == "CPU"
        for name in consumers if to_host else [producer]:
            host[name] = host.get(name, 0) + 1
    names = _in_order(context, host)
    if not names:
        return []
    copies = sum(host.values())
    typed = _names([f"{n} ({context.type_of.get(n, '?')})" for n in names])
    return [
        _Finding(
            "host_memory_on_gpu",
            "medium" if copies >= 4 else "info",
            names,
            (
                f"{typed} sit on "
                f"{context.short(names[0])} but compute in host memory: {copies} copies "
                "between device and host memory feed them, though both ends are on the GPU. "
                "Usually int32 shape arithmetic: cast to float32, or compute it once outside "
                "the step."
            ),
            {"ops": len(names), "copies": copies},
            (0.0, 0.0, float(copies)),
        )
    ]


def _all_on_one_gpu(context: _Context, names: Sequence[str]) -> bool:
    devices = {context.device_of.get(n, "") for n in names}
    return len(devices) == 1 and _device_type(devices.pop()) == "GPU"


def _idle_devices(context: _Context) -> list[_Finding]:
    events = context.trace.events
    if events is None or events.empty:
        return []
    lanes = events["lane"].astype(str)
    op_level = events[~lanes.str.endswith("/stream:all")]
    op_level = op_level[op_level["device"].isin(context.trace.devices)]
    if op_level.empty:
        return []
    starts = op_level["start_us"].to_numpy()
    ends = starts + op_level["duration_us"].to_numpy()
    span = float(ends.max() - starts.min())
    if span <= 0:
        return []
    busy = {
        device: busy_time_us(group["start_us"].to_numpy(), group["duration_us"].to_numpy())
        for device, group in op_level.groupby("device", sort=False)
    }
    for device in context.trace.devices:
        busy.setdefault(device, 0.0)
    busiest = max(busy, key=lambda d: busy[d])
    if busy[busiest] < BUSY_SHARE * span:
        return []
    findings = []
    for device, time in busy.items():
        if device == busiest or time >= IDLE_SHARE * span:
            continue
        if _job(device) == "ps" and _job(busiest) != "ps":
            # A parameter server holds variables and serves their reads and updates: idle
            # for most of the step is its normal state, and what it costs shows as
            # cross_task_transfer findings.
            continue
        kind, other = _device_type(device), _device_type(busiest)
        if not time and kind != "GPU":  # an unused CPU (a stand-in for the GPU)
            continue
        if kind != "GPU" and kind == "CPU" and other == "GPU":  # the host waiting: as it should
            continue
        mine = context.ops[context.ops["device"] == busiest]
        top = (
            mine.dropna(subset=["duration_us"])
            .sort_values("duration_us", ascending=False)["op"]
            .head(5)
            .tolist()
        )
        idle = 1 - time / span
        gpu_idle = _device_type(device) == "GPU"
        fix = (
            "feed it: prefetch the input (dataset.prefetch) and move the CPU work it waits on "
            "to the GPU"
            if gpu_idle
            else f"move some of {short_device(busiest)}'s work there or run it in parallel"
        )
        findings.append(
            _Finding(
                "idle_device",
                "medium" if gpu_idle else "info",
                top,
                (
                    f"{short_device(device)} is idle for {idle:.0%} of the step while "
                    f"{short_device(busiest)} is busy {busy[busiest] / span:.0%} of it (longest: "
                    f"{_names(top, 3)}): {fix}."
                ),
                {
                    "idle_share": round(idle, 3),
                    "busy_us": time,
                    "other_busy_us": busy[busiest],
                    "span_us": span,
                },
                (span - time, 0.0, 0.0),
            )
        )
    return findings


def _xla_hidden(context: _Context) -> list[_Finding]:
    trace = context.trace
    clusters = [n for n, t in context.type_of.items() if t in _XLA_TYPES]
    notes = [n for n in getattr(trace, "notes", []) if "XLA" in n]
    if not clusters and not notes:
        return []
    message = (
        "XLA compiled this step into clusters, so the ops inside are not placed one by one "
        "and their devices cannot be checked: trace it with jit_compile=False (Keras: "
        "model.compile(..., jit_compile=False)) to see them."
    )
    return [
        _Finding(
            "xla_hidden",
            "info",
            clusters,
            message,
            {"clusters": len(clusters)},
            (_duration(context, clusters), 0.0, float(len(clusters))),
        )
    ]


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------
def _capped(found: list[_Finding]) -> list[_Finding]:
    """At most ``MAX_PER_KIND`` findings of one kind: the worst ones, then one line for the
    rest (a graph with thousands of pinned chains would bury everything else)."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    by_kind: dict[str, list[_Finding]] = {}
    for finding in found:
        by_kind.setdefault(finding.kind, []).append(finding)
    kept: list[_Finding] = []
    for kind, group in by_kind.items():
        if len(group) <= MAX_PER_KIND:
            kept += group
            continue
        group.sort(key=lambda f: (rank[f.severity], *(-c for c in f.cost)))
        head, rest = group[: MAX_PER_KIND - 1], group[MAX_PER_KIND - 1 :]
        ops = [op for f in rest for op in f.ops]
        cost = tuple(sum(f.cost[i] for f in rest) for i in range(3))  # for the evidence
        kept += head
        kept.append(
            _Finding(
                kind,
                min((f.severity for f in rest), key=rank.__getitem__),
                ops,
                (
                    f"{len(rest)} more {kind} findings over {len(set(ops)):,} ops "
                    f"({_names(list(dict.fromkeys(ops)))}): their causes and fixes are those "
                    "of the findings above; click to see their ops."
                ),
                {"findings": len(rest), "ops": len(set(ops)), "duration_us": cost[0]},
                (-1.0, -1.0, -1.0),  # last of its severity: after the ones it summarises
            )
        )
    return kept


def _frame(found: list[_Finding]) -> pd.DataFrame:
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    found = sorted(found, key=lambda f: (rank[f.severity], *(-c for c in f.cost), f.kind))
    frame = pd.DataFrame(
        {
            "kind": [f.kind for f in found],
            "severity": pd.Categorical(
                [f.severity for f in found], categories=list(SEVERITIES), ordered=True
            ),
            "ops": [f.ops for f in found],
            "message": [f.message for f in found],
            "evidence": [f.evidence for f in found],
        },
        columns=COLUMNS,
    )
    frame["kind"] = frame["kind"].astype(object)
    frame["message"] = frame["message"].astype(object)
    return frame


def _device_type(name: str) -> str:
    if not name:
        return ""
    try:
        return parse_device(name).type or ""
    except ValueError:
        return ""


def _job(name: str) -> str:
    try:
        return parse_device(name).job or ""
    except ValueError:
        return ""


def _matches(requested: str, device: str) -> bool:
    try:
        return parse_device(requested).matches(parse_device(device))
    except ValueError:
        return False


def _copy_key(name: str) -> str:
    """``A/_1`` -> ``A``: the runtime names a copy's send and recv after the tensor's op. In a
    cluster the master session names the copies between tasks ``A_S12``/``A_S13`` and each
    worker the copies between its own devices ``A_G1``/``A_G2`` (``PartitionOptions::new_name``
    in ``MasterSession::BuildAndRegisterPartitions``, master_session.cc: ``prefix + "_S" + n``;
    ``GraphMgr::InitItem``, graph_mgr.cc: ``prefix + "_G" + n``)."""
    head, sep, tail = name.rpartition("/_")
    if sep and tail.isdigit():
        return head
    match = _CLUSTER_COPY.match(name)
    return match.group(1) if match else name


def _copy_nodes(context: _Context, producer: str) -> list[str]:
    """The ``_Send``/``_Recv`` nodes that carry ``producer``'s output to another device."""
    if context.copies_by_producer is None:
        context.copies_by_producer = {}
        for name, op_type in context.type_of.items():
            if op_type in ("_Send", "_Recv", "_HostSend", "_HostRecv"):
                context.copies_by_producer.setdefault(_copy_key(name), []).append(name)
    return context.copies_by_producer.get(producer, [])


def _in_order(context: _Context, names: Iterable[str]) -> list[str]:
    """``names`` in the trace's row order (first start first)."""
    if context.position is None:
        context.position = {name: i for i, name in enumerate(context.device_of)}
    position = context.position
    return sorted(set(names), key=lambda n: position.get(n, len(position)))


def _follower(context: _Context, name: str) -> bool:
    return context.type_of.get(name) in _FOLLOWERS


def _is_pipeline(op_type: str) -> bool:
    return (
        op_type.endswith(("Dataset", "DatasetV2", "DatasetV3"))
        or op_type.startswith(("Iterator", "OneShotIterator", "AnonymousIterator"))
        or op_type in ("MakeIterator", "DeleteIterator", "OptionalGetValue")
    )


def _duration(context: _Context, names: Iterable[str]) -> float:
    """Summed ``duration_us`` of ``names`` (untimed ops count 0)."""
    if context.duration_of is None:
        timed = context.ops[["op", "duration_us"]].dropna()
        context.duration_of = timed.groupby("op")["duration_us"].sum().astype(float).to_dict()
    of = context.duration_of
    return float(sum(of.get(name, 0.0) for name in set(names)))


def _runs_of(ops: pd.DataFrame, names: Sequence[str]) -> int:
    runs = ops.loc[ops["op"].isin(set(names)), "runs"]
    return int(runs.sum(skipna=True)) if len(runs) else 0


def _steps(context: _Context) -> int:
    """How many times the step ran, read off the op runs (the most common count)."""
    runs = context.ops["runs"].dropna()
    return int(runs.mode().iloc[0]) if len(runs) else 1


def _names(names: Sequence[str], limit: int = MAX_NAMED) -> str:
    names = list(names)
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
