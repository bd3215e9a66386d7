"""The ops of the XLA clusters a TF2 call ran, and the HLO instructions they became.

A ``tf.function(jit_compile=True)`` (a Keras step compiled with ``jit_compile=True``) runs as
one XLA cluster: TensorFlow records no placed graph for it, only the profiler's events of the
HLO instructions XLA executed (``sources.xla``). This module lists the cluster's TF ops from
its FunctionDef (what the eager context holds under the module's function name), puts them on
the cluster's device with ``how="xla"``, names in ``xla_op`` the executed instruction each
went into (by the HLO metadata's ``op_name``), and finds the user's line of each op in the
function's debug info (the stack that built the node). Nothing is compiled again.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from .._model.devices import canonical_device, short_device
from .._model.memory import add_step_rows
from .._model.records import Records
from .._model.xla import XLA_LAUNCH_TYPES, add_xla, xla_frame
from .._sources.functions import function_display_name
from .._sources.xla import _LIBRARY_FILE, XlaProfile, auto_cluster_of_module, function_of_module
from .._sources.xla_graph import GraphCluster, explain_launch, xla_ops_frame
from .._sources.xspace import HOST_PLANE
from .function_copies import original_name

_CALL_TYPES = {"PartitionedCall", "StatefulPartitionedCall"}
_UNKNOWN_NODE = SimpleNamespace(op="", device="")  # an op its HLO names and no function has


def auto_why() -> str:
    """Why an auto-clustered cluster of a TF2 call is XLA: what turned auto-clustering on."""
    import tensorflow as tf

    if tf.config.optimizer.get_jit():
        return "auto-clustering, tf.config.optimizer.set_jit"
    return "auto-clustering, TF_XLA_FLAGS --tf_xla_auto_jit"


def xla_parts(
    profile: XlaProfile,
    origin_us: int,
    device: str,
    why: str,
    taken: Sequence[str] = (),
) -> tuple[pd.DataFrame, pd.DataFrame, list[int]]:
    """``(ops rows, trace.xla, profiler line of each xla row)`` of the clusters that ran.

    ``device`` is where a cluster on the host ran (the call's device); ``why`` says why it is
    XLA (``"tf.function(jit_compile=True)"``...); ``taken`` are op names the trace has already
    (a cluster's op of the same name is prefixed with the cluster's name).
    """
    from tensorflow.python.eager import context

    ctx = context.context()
    clusters: dict[str, _Cluster] = {}
    used = set(taken)
    rows, threads = [], []
    for module, instruction, plane, line, start, duration in profile.runs:
        cluster = clusters.get(module)
        if cluster is None:
            lane = device if plane == "/host:CPU" else canonical_device(plane)
            cluster = clusters[module] = _Cluster(ctx, module, profile, lane, used)
        info = cluster.instructions.get(instruction)
        tf_ops = [cluster.display(op) for op in info.tf_ops] if info else []
        cluster.ran(instruction, tf_ops)
        source = (info.source if info else "") or next(
            (cluster.source[op] for op in tf_ops if cluster.source.get(op)), ""
        )
        rows.append(
            {
                "cluster": cluster.name,
                "instruction": instruction,
                "kind": info.kind if info else "",
                "device": cluster.device,
                "start_us": start,
                "duration_us": duration,
                "tf_ops": tf_ops,
                "source": source,
            }
        )
        threads.append(line)
    ops = [cluster.ops_rows(why) for cluster in clusters.values()]
    ops_frame = pd.concat(ops, ignore_index=True) if ops else xla_ops_frame([])
    xla = xla_frame(rows, origin_us)
    order = np.argsort(np.asarray([r["start_us"] for r in rows], np.int64), kind="stable")
    return ops_frame, xla, [threads[i] for i in order.tolist()]


def cluster_name(module: str) -> str:
    """The cluster's name in the trace (``trace.xla.cluster``, the ops' ``function``): the
    jit_compile function's, ``cluster_0`` for an auto-clustered module, else the module's."""
    function = function_of_module(module)
    if function:
        return function_display_name(function)
    return auto_cluster_of_module(module) or module


def compile_counts(profile: XlaProfile) -> dict[str, dict[str, int]]:
    """``cluster -> {"programs", "ran", "compiles", "compile_us"}`` of the clusters that ran:
    how many programs XLA compiled of the cluster's module in this process (one per input
    shape, the untraced warm-up's and earlier traces' included), how many different ones ran
    in the traced steps (by ``program_id``), and how many compilations, taking how long, fell
    in the traced steps. What ``trace.xla.attrs["compiles"]`` holds (``xla_recompile``)."""
    counts: dict[str, dict[str, int]] = {}
    ran: dict[str, set[int]] = {}
    for run, program in zip(profile.runs, profile.run_programs, strict=False):
        ran.setdefault(run[0], set()).add(program)
    for module in dict.fromkeys(run[0] for run in profile.runs):
        compiles = [c for c in profile.compiles if c[0] == module]
        counts[cluster_name(module)] = {
            "programs": int(profile.programs.get(module, 0)),
            "ran": len(ran.get(module, set()) - {-1}),
            "compiles": len(compiles),
            "compile_us": int(sum(c[2] for c in compiles)),
        }
    return counts


class _Cluster:
    """One XLA module that ran: its function's nodes and where each op went."""

    def __init__(self, ctx: Any, module: str, profile: XlaProfile, device: str, used: set) -> None:
        self.module = module
        self.function = function_of_module(module)
        # an auto-clustering cluster (tf.config.optimizer.set_jit)
        self.auto = not self.function and bool(auto_cluster_of_module(module))
        self.name = cluster_name(module)
        self.device = device
        self.instructions = profile.modules.get(module, {})
        self.nodes: dict[str, Any] = {}  # op_name (as XLA names it) -> node def
        self.source: dict[str, str] = {}
        self._names: dict[str, str] = {}  # op_name -> display name in trace.ops
        self._used = used
        self.xla_op: dict[str, str] = {}  # display name -> first executed instruction
        self._first_naming: dict[str, str] | None = None
        if self.function:
            self._read_function(ctx, self.function, "")
            self._read_sources(ctx)
        elif self.auto:
            self._read_auto(ctx)

    def _read_auto(self, ctx: Any) -> None:
        """An auto-clustered module's ops: the TF ops its HLO names (``op_name``), as node defs
        of the function of this context that holds most of them (the cluster's own FunctionDef,
        ``cluster_0``, is not in the eager context: TF 2.21 says NotFound)."""
        names = list(dict.fromkeys(op for i in self.instructions.values() for op in i.tf_ops))
        best: tuple[int, str, dict] = (0, "", {})
        for fname in ctx.list_function_names():
            if fname.startswith("__wrapped__"):  # the eager context's one-op wrappers
                continue
            try:
                fdef = ctx.get_function_def(fname)
            except Exception:
                continue
            nodes = {n.name: n for n in fdef.node_def if n.name in set(names)}
            if len(nodes) > best[0]:
                best = (len(nodes), fname, nodes)
        _, fname, nodes = best
        for name in names:
            self.nodes[name] = nodes.get(name, _UNKNOWN_NODE)
        if fname:
            for node, line in user_lines(ctx, fname).items():
                if node in self.nodes:
                    self.source[self.display(node)] = line

    def _read_function(self, ctx: Any, fname: str, prefix: str, depth: int = 0) -> None:
        try:
            fdef = ctx.get_function_def(fname)
        except Exception:  # not a function of this context: its ops stay unnamed
            return
        for node in fdef.node_def:
            self.nodes[prefix + node.name] = node
            if node.op in _CALL_TYPES and depth < 20 and "f" in node.attr:
                self._read_function(
                    ctx, node.attr["f"].func.name, f"{prefix}{node.name}/", depth + 1
                )

    def _read_sources(self, ctx: Any) -> None:
        """The user's line (the innermost frame outside libraries) of each top-level node."""
        for node, line in user_lines(ctx, self.function).items():
            self.source[self.display(node)] = line

    def display(self, op_name: str) -> str:
        """The op's name in ``trace.ops``: its own, or ``<cluster>/<name>`` when taken."""
        name = self._names.get(op_name)
        if name is None:
            name = op_name
            if name in self._used:
                name = f"{self.name}/{op_name}"
                serial = 0
                while name in self._used:
                    serial += 1
                    name = f"{self.name}/{op_name}_{serial}"
            self._used.add(name)
            self._names[op_name] = name
        return name

    def ran(self, instruction: str, tf_ops: list[str]) -> None:
        for op in tf_ops:
            self.xla_op.setdefault(op, instruction)

    def _named_by(self) -> dict[str, str]:
        """``op_name -> the first instruction naming it`` (built once per cluster)."""
        if self._first_naming is None:
            self._first_naming = {}
            for instruction in self.instructions.values():
                for op in instruction.tf_ops:
                    self._first_naming.setdefault(op, instruction.name)
        return self._first_naming

    def ops_rows(self, why: str) -> pd.DataFrame:
        where = short_device(self.device)
        why = auto_why() if self.auto else why
        rows = []
        for op_name, node in self.nodes.items():
            display = self.display(op_name)
            instruction = self.xla_op.get(display)
            if instruction is None:
                into = self._named_by().get(op_name, "")
                went = (
                    f"XLA made it part of {into}, which the profiler saw no run of."
                    if into
                    else "No executed HLO instruction names it: XLA folded it into others "
                    "or had nothing to compute for it (a constant, an identity)."
                )
            else:
                went = f"It ran inside the HLO instruction {instruction}."
            rows.append(
                {
                    "op": display,
                    "type": node.op,
                    "device": self.device,
                    "requested_device": node.device,
                    "how": "xla",
                    "reason": (
                        f"Compiled by XLA into the cluster {self.name} ({why}), which ran on "
                        f"{where}: XLA places the whole cluster on one device, not op by op. "
                        f"{went}"
                    ),
                    "function": self.name,
                    "xla_op": instruction,
                }
            )
        return xla_ops_frame(rows)


def xla_origin(
    records: Any, profile: XlaProfile | None, launches: Sequence[LaunchAllocation] = ()
) -> list[int]:
    """The trace's zero (µs since the epoch) as ``frames_from_records``' step starts: the first
    record, instruction or cluster allocation (``launches``: XLA takes a program's buffers
    before its first instruction), when instructions ran (``[]``, the records' own first, if
    not)."""
    if profile is None or not profile.runs:
        return []
    first = min([run[4] for run in profile.runs] + [a.time for a in launches])
    return [min(first, min(records.start))] if records.start else [first]


class LaunchAllocation(NamedTuple):
    """One allocator event of a jit_compile cluster's buffers (µs since the epoch)."""

    cluster: str  # the cluster's name in the trace (trace.xla.cluster): "step"
    allocator: str
    time: int
    bytes: int  # > 0 an allocation, < 0 its free


def launch_allocations(records: Records, profile: XlaProfile | None) -> list[LaunchAllocation]:
    """The allocator events of the XLA clusters' buffers: XLA:CPU takes a program's buffers,
    one for all its instructions, when the program starts (``CpuExecutable::Execute...``), on
    the thread of the op that launched it. A jit_compile function called eagerly: that op is
    the one TensorFlow names after the function (``__inference_step_22``, the allocations'
    ``tf_op``); called from a tf.function: its call op, which has no op event there (the
    allocations name no op, ``records.memory.unowned``). No placed graph holds the first, and
    neither can own the bytes of the cluster's ops: they are the cluster's. Read these before
    the host records are placed (which drops the first)."""
    if profile is None or not profile.runs:
        return []
    modules = list(dict.fromkeys(run[0] for run in profile.runs))
    clusters = {function_of_module(module): cluster_name(module) for module in modules}
    clusters.pop("", None)
    memory, found, at, launches = records.memory, [], 0, set()
    for item, row in enumerate(memory.row):
        count = memory.count[item]
        cluster = clusters.get(records.op[row]) if records.lane[row] == HOST_PLANE else None
        if cluster:
            changes = zip(memory.time[at : at + count], memory.bytes[at : at + count], strict=True)
            found += [LaunchAllocation(cluster, memory.allocator[item], t, b) for t, b in changes]
            launches.add(row)
        at += count
    if launches:  # the cluster's now, not its launch record's
        memory.keep({row: row for row in range(len(records.op)) if row not in launches})
    return found + _program_allocations(memory.unowned, profile)


def _program_allocations(unowned: list, profile: XlaProfile) -> list[LaunchAllocation]:
    """Of the allocations no op owns (``records.memory.unowned``), those taken on a line
    while a compiled program ran there, and their frees (by address): that cluster's."""
    runs: dict[int, list[tuple[int, int, str]]] = {}
    for module, line, start, end in profile.executions:
        runs.setdefault(line, []).append((start, end, cluster_name(module)))
    for spans in runs.values():
        spans.sort()
    found, held = [], {}
    for line, time, allocator, address, size in unowned:
        if size < 0:
            cluster = held.pop((allocator, address), None)
        else:
            spans = runs.get(line, [])
            at = bisect.bisect_right(spans, (time, float("inf"))) - 1
            cluster = spans[at][2] if at >= 0 and spans[at][1] >= time else None
            if cluster:
                held[(allocator, address)] = cluster
        if cluster:
            found.append(LaunchAllocation(cluster, allocator, time, size))
    return found


def add_xla_clusters(
    trace: Any,
    profile: XlaProfile,
    origin: list[int],
    device_scope: str | None,
    why: str,
    launches: Sequence[LaunchAllocation] = (),
) -> None:
    """Add the clusters that ran (their ops, ``trace.xla``, the instruction events) to
    ``trace``, and the allocations of their buffers (``launches``) to ``trace.memory``."""
    if not profile.runs:
        return
    import tensorflow as tf

    if device_scope:
        device = canonical_device(device_scope)
    else:
        cpus = tf.config.list_logical_devices("CPU")
        device = canonical_device(cpus[0].name) if cpus else ""
    ops, xla, threads = xla_parts(profile, origin[0], device, why, trace.ops["op"].tolist())
    if launches:
        ops = _add_cluster_memory(trace, ops, xla, launches, origin[0])
    add_xla(trace, ops, xla, threads)
    # Not a column: a count per cluster, kept with the frame in this process (not saved).
    trace.xla.attrs["compiles"] = compile_counts(profile)
    _explain_auto_launch(trace, ops)


def _add_cluster_memory(
    trace: Any,
    ops: pd.DataFrame,
    xla: pd.DataFrame,
    launches: Sequence[LaunchAllocation],
    origin: int,
) -> pd.DataFrame:
    """Put the clusters' allocations in ``trace.memory`` under each cluster's name, on its
    device; say so in its ops' reasons (returned): XLA allocates for the whole cluster, so no
    op of it has bytes of its own (their memory columns stay <NA>)."""
    devices = dict(zip(xla["cluster"], xla["device"], strict=True))
    mine = [a for a in launches if a.cluster in devices]
    if not mine:
        return ops
    trace.memory = add_step_rows(
        trace.memory,
        [devices[a.cluster] for a in mine],
        [a.allocator for a in mine],
        [a.time - origin for a in mine],
        [a.bytes for a in mine],
        [a.cluster for a in mine],
    )
    held = {a.cluster for a in mine}
    ops = ops.copy()
    ops["reason"] = [
        f"{reason} XLA allocates the cluster's buffers for the whole cluster, one for all "
        f"its instructions: trace.memory has them under {cluster}, none under this op."
        if cluster in held
        else reason
        for reason, cluster in zip(ops["reason"], ops["function"], strict=True)
    ]
    return ops


def _explain_auto_launch(trace: Any, ops: pd.DataFrame) -> None:
    """The launch ops (``cluster_0_1/xla_compile``...) of auto-clustered clusters name their
    cluster, as in graph mode (``sources.xla_graph``)."""
    launch_types = dict(zip(trace.ops["op"].tolist(), trace.ops["type"].tolist(), strict=True))
    compiles = [n for n, t in launch_types.items() if t == "_XlaCompile" and "/" in n]
    clusters = []
    for name, rows in ops.groupby("function", sort=False):
        prefixes = [
            n.rsplit("/", 1)[0] for n in compiles if n.rsplit("/", 1)[0].rsplit("_", 1)[0] == name
        ]
        if not prefixes or not rows["reason"].str.contains("auto-clustering").any():
            continue
        why = auto_why()
        for prefix in prefixes:
            cluster = GraphCluster(str(name), prefix, str(rows["device"].iloc[0]), why)
            cluster.launch = {n: t for n, t in launch_types.items() if n.startswith(prefix + "/")}
            cluster.ops = rows["op"].tolist()
            clusters.append(cluster)
    if clusters:
        explain_launch(trace, clusters)


def user_lines(ctx: Any, function: str) -> dict[str, str]:
    """``node -> "file:line"``: where the user's code made each node of ``function`` (the
    innermost frame outside libraries), from the function's debug info in the eager context."""
    try:
        info = ctx.get_graph_debug_info(function)
    except Exception:
        return {}
    files = list(info.files)
    lines: dict[str, str] = {}
    for node, trace_id in info.name_to_trace_id.items():
        trace = info.traces_by_id.get(trace_id)
        if trace is None:
            continue
        for frame_id in reversed(trace.frame_id):
            frame = info.frames_by_id.get(frame_id)
            if frame is None or frame.file_index >= len(files):
                continue
            path = files[frame.file_index]
            if not _LIBRARY_FILE.search(path):
                lines[node.split("@", 1)[0]] = f"{path}:{frame.line}"
                break
    return lines


_UNSUPPORTED = re.compile(
    r"Detected unsupported operations when trying to compile graph (?P<graph>[^\[\s]+)"
    r"(?:\[[^\]]*\])? on (?P<device>\w+): (?P<ops>.*?)(?: \(No registered|$)",
    re.M,
)
_NODE = re.compile(r"\{\{node ([^}\s]+)\}\}")
_CREATED_AT = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)', re.M)


def xla_compile_error(exc: BaseException) -> str:
    """What to do when XLA cannot compile an op of a jit_compile function (``""`` if ``exc``
    says something else): the op types, the function, the user's line that made them."""
    text = str(exc)
    match = _UNSUPPORTED.search(text)
    if match is None:
        return ""
    graph = original_name(match.group("graph"))
    function = function_display_name(graph)
    ops = match.group("ops").strip().rstrip(",")
    frames = [m for m in _CREATED_AT.finditer(text) if not _LIBRARY_FILE.search(m["file"])]
    where = f" (made at {frames[-1]['file']}:{frames[-1]['line']})" if frames else ""
    if not where:  # no frame in the message: the user's function's debug info has it
        from tensorflow.python.eager import context

        made = user_lines(context.context(), graph)
        lines = [made[n] for n in _NODE.findall(text) if n in made]
        where = f" (made at {lines[0]})" if lines else ""
    return (
        f"XLA cannot compile {function}: {ops} has no XLA kernel for {match.group('device')}"
        f"{where}, and jit_compile=True makes XLA compile the whole function. Move that op "
        f"out of {function} (into a tf.function without jit_compile around the compiled "
        "part), or trace it with jit_compile=False."
    )


JIT_SHOWN = (
    "XLA places the whole cluster on one device. trace.ops lists its ops (how 'xla', "
    "the HLO instruction each went into in xla_op); trace.xla the instructions that ran, "
    "with their times."
)
# What the note says instead when this TensorFlow's profile recorded no XLA instruction.
JIT_NOT_RECORDED = (
    "XLA places the whole cluster on one device. This TensorFlow's profile recorded no XLA "
    "instruction, so the cluster's ops are not listed."
)


def jit_note(name: str, keras: bool = True) -> str:
    """The note for a call whose step XLA compiles whole (a Keras step or a jit tf.function)."""
    shown = JIT_SHOWN
    if not keras:
        return (
            f"{name} is compiled with XLA (tf.function(jit_compile=True)): it runs as one XLA "
            f"cluster. {shown}"
        )
    return (
        f"{name} is compiled with XLA (jit_compile=True; Keras 3 picks it whenever a GPU is "
        f"visible): the whole step runs as one XLA cluster. {shown}"
    )


def xla_notes(graphs: list, types: Mapping[str, str], shown: bool = False) -> list[str]:
    """The note for a call of which XLA compiled part (a jit function it calls, or a cluster op)."""
    if not any(t in XLA_LAUNCH_TYPES for t in types.values()):
        for graph in graphs:
            for node in graph.pre_optimization_graph.node:
                attr = node.attr
                if "_XlaMustCompile" in attr and attr["_XlaMustCompile"].b:
                    break
            else:
                continue
            break
        else:
            return []
    if shown:  # the profile named the instructions: tracing.xla listed the clusters' ops
        return [
            "XLA compiled part of this call (a tf.function with jit_compile=True): XLA places "
            "each cluster on one device. trace.ops lists its ops (how 'xla', the HLO "
            "instruction each went into in xla_op); trace.xla the instructions that ran."
        ]
    return [
        "XLA compiled part of this call (an XLA cluster op ran): ops inside a cluster are "
        "not placed one by one, so the trace shows the cluster, not them. For a Keras model "
        "compile with model.compile(..., jit_compile=False); for a tf.function, "
        "jit_compile=False."
    ]
