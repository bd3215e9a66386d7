"""Graph-mode XLA auto-clustering in a ``RunMetadata``: the clusters and the TF ops inside.

What TensorFlow 2.21 records (seen on XLA:CPU, a ``tf.compat.v1.Session`` with
``graph_options.optimizer_options.global_jit_level = ON_1``; on a CPU the clustering also
needs ``TF_XLA_FLAGS=--tf_xla_cpu_global_jit`` in the environment before TensorFlow starts,
and, by the default ``--tf_xla_min_cluster_size=4``, at least four compute ops: a matmul, an
add and a reduce_sum alone stay unclustered):

- the partition graph holds, per cluster, ``cluster_0_1/xla_compile`` (``_XlaCompile``, its
  ``function`` attr names the compiled function ``cluster_0``), ``.../predicated_compilation_key``
  (``Switch``), ``.../xla_run`` (``_XlaRun``), ``.../data_as_ctrl`` (``Identity``),
  ``.../stateful_partitioned_call`` (the ``StatefulPartitionedCall`` of ``cluster_0`` that runs
  the ops without XLA until the cluster is compiled: lazy compilation; its ``config_proto``
  attr carries the session's ``global_jit_level``) and one ``.../merge_oidx_<i>``
  (``_XlaMerge``) per output; the cluster's consumers read the merges;
- the clustered TF ops (``MM``, ``ADD``, ``SUM``...) are not in it, and neither the partition
  graph's ``library`` nor ``RunMetadata.function_graphs`` holds ``cluster_0``'s FunctionDef
  (both are empty): the function lives only in the session's own library;
- FULL_TRACE's ``step_stats`` time ``_XlaCompile``, ``Switch``, ``_XlaRun`` and ``_XlaMerge``
  (the fallback call does not run) and no HLO instruction: XLA's instructions are events only
  of a TF2 profiler session, which cannot run beside FULL_TRACE ("Another profiling session
  active"). Under ``tf.profiler.experimental.start`` a plain ``session.run`` records them, and
  the module (``cluster_0__XlaCompiledKernel_true__..._.2``) names each instruction's TF op.

So the cluster's TF ops are read from the graph as built: the ops the session needed (an
ancestor of a cluster output) that the partition graphs lack. Walking back from each output
through such ops, stopping at ops that did run (or were fed), finds the cluster's ops; when one
cluster feeds another, an op goes to the smallest cluster that reaches it (the upstream one).
Pure proto reading; it runs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._explain import HOW_VALUES
from .._model.columns import OPS_COLUMNS
from .._model.devices import canonical_device, short_device
from .._model.kernels import GPU_KERNEL_VALUES
from .._model.xla import add_xla, xla_frame
from .._tfadapter.protos import config_proto_type
from .xla import XlaProfile, auto_cluster_of_module

# The partition-graph ops that launch a cluster (XlaLaunch: one op compiling and running it).
LAUNCH_TYPES = {"_XlaCompile", "XlaLaunch", "XlaLaunchV2"}
_RETVAL = re.compile(r"^_retval_(.+)_\d+_\d+$")  # a fetch: _retval_<op>_<port>_<index>
_ARG = re.compile(r"^_arg_(.+)_\d+_\d+$")  # a feed: _arg_<op>_<port>_<index>
_EDGE = re.compile(r"^edge_\d+_(.+?)(?::\d+)?$")  # a _Send's tensor_name
_JIT_LEVELS = {1: "ON_1", 2: "ON_2"}
NAMED_OPS = 4  # op names spelled out in a launch op's reason


@dataclass
class GraphCluster:
    """One auto-clustered XLA cluster of a partition graph."""

    name: str  # the function XLA compiled: "cluster_0"
    prefix: str  # its launch nodes' name scope: "cluster_0_1"
    device: str  # where its launch ops ran (canonical)
    why: str  # "auto-clustering, global_jit_level ON_1"...
    launch: dict[str, str] = field(default_factory=dict)  # launch node -> type
    # who reads its results: a node that ran, or "=<op>" for an op fetched or sent itself
    consumers: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)  # graph-as-built ops it returns
    ops: list[str] = field(default_factory=list)  # graph-as-built ops inside, graph order


def graph_clusters(partition_graphs: Iterable[Any]) -> list[GraphCluster]:
    """The clusters the partition graphs launch, with the nodes that read their results."""
    graphs = list(partition_graphs)
    clusters: dict[str, GraphCluster] = {}
    for graph_def in graphs:
        for node in graph_def.node:
            if node.op in LAUNCH_TYPES and "function" in node.attr:
                prefix = node.name.rsplit("/", 1)[0] if "/" in node.name else node.name
                must = "must_compile" in node.attr and node.attr["must_compile"].b
                clusters[prefix] = GraphCluster(
                    node.attr["function"].func.name,
                    prefix,
                    canonical_device(node.device),
                    "marked for XLA compilation" if must else "auto-clustering",
                )
    if not clusters:
        return []
    for graph_def in graphs:
        for node in graph_def.node:
            cluster = clusters.get(node.name.rsplit("/", 1)[0])
            if cluster is not None:
                cluster.launch[node.name] = node.op
                level = _jit_level(node)
                if level and cluster.why == "auto-clustering":
                    cluster.why = f"auto-clustering, global_jit_level {level}"
    for graph_def in graphs:
        for node in graph_def.node:
            _read_outputs(node, clusters)
    return list(clusters.values())


def _jit_level(node: Any) -> str:
    """``ON_1``/``ON_2`` from a fallback call's ``config_proto`` attr, else ``""``."""
    if "config_proto" not in node.attr:
        return ""
    config = config_proto_type()()
    try:
        config.ParseFromString(node.attr["config_proto"].s)
    except Exception:  # not a ConfigProto: the level stays unsaid
        return ""
    return _JIT_LEVELS.get(config.graph_options.optimizer_options.global_jit_level, "")


def _read_outputs(node: Any, clusters: Mapping[str, GraphCluster]) -> None:
    """Record on each cluster whether ``node`` reads its results (and which op it fetches)."""
    if node.name.rsplit("/", 1)[0] in clusters:
        return
    for tensor in node.input:
        if tensor[:1] == "^":
            continue
        cluster = clusters.get(tensor.split(":", 1)[0].rsplit("/", 1)[0])
        if cluster is None:
            continue
        consumer = ""
        match = _RETVAL.match(node.name)
        if match:
            consumer = "=" + match.group(1)  # the fetched op itself is the output
        elif node.op in ("_Send", "_HostSend") and "tensor_name" in node.attr:
            edge = _EDGE.match(node.attr["tensor_name"].s.decode())
            consumer = "=" + edge.group(1) if edge else ""
        else:
            consumer = node.name
        if consumer and consumer not in cluster.consumers:
            cluster.consumers.append(consumer)


def cluster_members(
    clusters: list[GraphCluster], partition_graphs: Iterable[Any], facts: Any
) -> None:
    """Fill each cluster's ``ops`` (and its ``outputs`` as ops) from the graph as built."""
    inputs, types = facts.inputs, facts.types
    present: set[str] = set()
    for graph_def in partition_graphs:
        for node in graph_def.node:
            present.add(node.name)
            match = _ARG.match(node.name)
            if match:
                present.add(match.group(1))  # a fed op: its value came from the client
    reached: list[tuple[GraphCluster, set[str]]] = []
    for cluster in clusters:
        starts: list[str] = []
        for consumer in cluster.consumers:
            if consumer[:1] == "=":
                starts.append(consumer[1:])
            else:  # the consumer ran: its inputs as built that did not run are the outputs
                starts += [p for p in inputs.get(consumer, []) if p not in present]
        starts = [s for s in dict.fromkeys(starts) if s in types]
        cluster.outputs = starts
        seen = set(starts)
        stack = list(starts)
        while stack:
            for producer in inputs.get(stack.pop(), []):
                if producer not in seen and producer not in present and producer in types:
                    seen.add(producer)
                    stack.append(producer)
        reached.append((cluster, seen))
    claimed: set[str] = set()
    for cluster, seen in sorted(reached, key=lambda pair: len(pair[1])):
        mine = seen - claimed
        claimed |= mine
        cluster.ops = [name for name in types if name in mine]


def add_graph_clusters(
    trace: Any, partition_graphs: Iterable[Any], facts: Any, profile: XlaProfile | None = None
) -> None:
    """Show the auto-clustered XLA clusters of a graph-mode trace, in place: the TF ops of each
    (from the graph as built; ``how="xla"``, on the cluster's device) and, on its launch ops
    (``_XlaCompile``, ``_XlaRun``...), a reason that names the cluster. ``profile``: the TF2
    profile of one more run of the step (FULL_TRACE records no HLO instruction), whose
    instructions name each op's ``xla_op`` and fill ``trace.xla``, placed at the traced step's
    ``xla_run``."""
    graphs = list(partition_graphs)
    clusters = graph_clusters(graphs)
    if not clusters:
        return
    if facts is not None:
        cluster_members(clusters, graphs, facts)
    taken = set(trace.ops["op"].tolist())
    runs = _cluster_runs(profile, trace, clusters) if profile is not None else {}
    rows, xla_rows = [], []
    for cluster in clusters:
        where = short_device(cluster.device)
        display: dict[str, str] = {}
        for op in cluster.ops:
            display[op] = op if op not in taken else f"{cluster.name}/{op}"
            taken.add(display[op])
        ran = runs.get(cluster.name, [])
        first = {}  # TF op -> the first executed instruction naming it
        for row in ran:
            for op in row["tf_ops"]:
                first.setdefault(op, row["instruction"])
            row.update(device=cluster.device, tf_ops=[display.get(o, o) for o in row["tf_ops"]])
        xla_rows += ran
        for op in cluster.ops:
            rows.append(
                {
                    "op": display[op],
                    "type": facts.types.get(op, ""),
                    "device": cluster.device,
                    "requested_device": facts.requested.get(op, ""),
                    "how": "xla",
                    "reason": (
                        f"Compiled by XLA into the cluster {cluster.name} ({cluster.why}), "
                        f"which ran on {where}: XLA places the whole cluster on one device, "
                        f"not op by op. {_went(cluster, first.get(op), bool(ran))}"
                    ),
                    "function": cluster.name,
                    "xla_op": first.get(op),
                }
            )
    explain_launch(trace, clusters)
    xla_rows.sort(key=lambda row: row["start_us"])
    threads = [row.pop("thread") for row in xla_rows]
    add_xla(trace, xla_ops_frame(rows), xla_frame(xla_rows, 0), threads)


def _went(cluster: GraphCluster, instruction: str | None, profiled: bool) -> str:
    """What became of one op of ``cluster`` in XLA, as far as the trace knows."""
    if instruction:
        return (
            f"It ran inside the HLO instruction {instruction} (timed in one more run of the "
            "step under the TF2 profiler: graph mode's FULL_TRACE records no HLO instruction)."
        )
    if profiled:
        return (
            "No executed HLO instruction names it: XLA folded it into others or had nothing "
            "to compute for it (a constant, an identity)."
        )
    return (
        f"The trace times the cluster as a whole ({cluster.prefix}/xla_run), not its HLO "
        "instructions: graph mode's FULL_TRACE records none."
    )


def _cluster_runs(
    profile: XlaProfile, trace: Any, clusters: list[GraphCluster]
) -> dict[str, list[dict[str, Any]]]:
    """``cluster -> trace.xla rows`` (with ``thread``) of its profiled run: the instructions'
    times moved so that the cluster's first starts where the traced step's ``xla_run`` did."""
    starts = dict(zip(trace.ops["op"].tolist(), trace.ops["start_us"].tolist(), strict=True))
    anchors: dict[str, int] = {}
    for cluster in clusters:
        start = starts.get(f"{cluster.prefix}/xla_run")
        if cluster.name not in anchors and start is not None and pd.notna(start):
            anchors[cluster.name] = int(start)
    by_cluster: dict[str, list[tuple]] = {}
    for module, instruction, _plane, line, start, duration in profile.runs:
        cluster = auto_cluster_of_module(module)
        if cluster:
            by_cluster.setdefault(cluster, []).append((module, instruction, line, start, duration))
    out: dict[str, list[dict[str, Any]]] = {}
    for cluster, runs in by_cluster.items():
        anchor = anchors.get(cluster, 0)
        first = min(run[3] for run in runs)
        out[cluster] = []
        for module, instruction, line, start, duration in runs:
            info = profile.modules.get(module, {}).get(instruction)
            out[cluster].append(
                {
                    "cluster": cluster,
                    "instruction": instruction,
                    "kind": info.kind if info else "",
                    "device": "",
                    "start_us": anchor + start - first,
                    "duration_us": duration,
                    "tf_ops": list(info.tf_ops) if info else [],
                    "source": info.source if info else "",
                    "thread": line,
                }
            )
    return out


def explain_launch(trace: Any, clusters: list[GraphCluster]) -> None:
    """The launch ops' reasons name their cluster, what it holds and why it is XLA; their
    ``function`` becomes the cluster's (so ``xla_hidden`` sees the cluster's ops are listed)."""
    ops = trace.ops
    if ops.empty:
        return
    reasons = ops["reason"].tolist()
    functions = ops["function"].tolist()
    index = {name: i for i, name in enumerate(ops["op"].tolist())}
    for cluster in clusters:
        n = len(cluster.ops)
        listed = ", ".join(cluster.ops[:NAMED_OPS]) + (
            f" and {n - NAMED_OPS} more" if n > NAMED_OPS else ""
        )
        holds = (
            f"Its {n} TF op{'s' if n != 1 else ''} ({listed}) {'are' if n != 1 else 'is'} "
            "listed with how 'xla'."
            if n
            else "Its TF ops are not known without the graph as built."
        )
        head = f"Launches the XLA cluster {cluster.name} ({cluster.why}) on "
        head += f"{short_device(cluster.device)}: "
        for node, op_type in cluster.launch.items():
            i = index.get(node)
            if i is None:
                continue
            reasons[i] = f"{head}{_launch_role(op_type, cluster)} {holds}"
            functions[i] = cluster.name
    trace.ops = ops.assign(reason=reasons, function=functions)


def _launch_role(op_type: str, cluster: GraphCluster) -> str:
    if op_type == "_XlaCompile":
        return (
            f"compiles {cluster.name} (at its first run; later runs find it in XLA's cache), "
            "so its time is the compilation or the lookup."
        )
    if op_type == "_XlaRun":
        return "runs the compiled cluster; its time is the whole cluster's."
    if op_type in ("XlaLaunch", "XlaLaunchV2"):
        return "compiles (once) and runs the cluster; its time is the whole cluster's."
    if op_type == "_XlaMerge":
        return "forwards one of the cluster's results (from xla_run, or the fallback call)."
    if op_type in ("PartitionedCall", "StatefulPartitionedCall"):
        return (
            f"the fallback call of {cluster.name}: runs its ops without XLA while the "
            "cluster is not compiled yet (lazy compilation)."
        )
    return "picks between the compiled run and the fallback call."


def xla_ops_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows of ``trace.ops`` for XLA ops: no time of their own (it is the cluster's or its
    instructions')."""
    n = len(rows)

    def column(name: str, default: Any = "") -> list:
        return [row.get(name, default) for row in rows]

    frame = {
        "op": pd.Series(column("op"), dtype=object),
        "type": column("type"),
        "device": pd.Series(column("device"), dtype=object),
        "requested_device": column("requested_device"),
        "how": pd.Categorical(column("how", "xla"), categories=list(HOW_VALUES)),
        "reason": column("reason"),
        "start_us": np.full(n, np.nan),
        "duration_us": np.full(n, np.nan),
        "runs": pd.array([pd.NA] * n, dtype="Int64"),
        "output_bytes": pd.array([pd.NA] * n, dtype="Int64"),
        "function": column("function"),
        "kernels": [""] * n,
        "gpu_kernel": pd.Categorical(["NA"] * n, categories=list(GPU_KERNEL_VALUES)),
        "xla_op": pd.array(column("xla_op", None), dtype="string"),
        "input_stage": pd.array([None] * n, dtype="string"),
        **{c: pd.array([None] * n, dtype="string") for c in ("source", "source_path")},
        # no allocator record of their own: the cluster's launch op allocates for them
        "allocated_bytes": pd.array([pd.NA] * n, dtype="Int64"),
        "peak_bytes": pd.array([pd.NA] * n, dtype="Int64"),
        "allocator": pd.array([None] * n, dtype="string"),
    }
    return pd.DataFrame(frame)[OPS_COLUMNS]
