"""Findings about what XLA ran: ``xla_time``, where the time of each XLA cluster went, by
HLO instruction (from ``trace.xla``), with the TF ops and the user's line behind each,
``xla_recompile``, a cluster XLA compiled again during the traced steps because its input
shapes changed, ``xla_outside``, the ops of an auto-clustered call that XLA left outside its
clusters (a ``tf.py_function`` host callback; for other ops the trace cannot say why), and
``xla_hidden``, XLA launch ops whose cluster's TF ops the trace does not list.

What a recompiling cluster looks like in a TF 2.21 XLA:CPU profile (seen on this project's
machine: a ``jit_compile=True`` function fed batches of 3, 6, 9... rows from a ``tf.data``
iterator inside the traced callable, ``warmup=1, steps=3``): the ``/host:metadata`` plane
keeps one HloProto per compiled program of the one module (``<module>(0)`` .. ``(3)``: the
warm-up's and one per traced step), each executed instruction carries a different
``program_id``, and every traced step has a ``CpuCompiler::CompileCpuExecutable`` event (stat
``name``: the module) of 21-26 ms under ``JitCompiler::Compile``, while the instructions ran
in under 2 ms. The same function fed one shape has one program and no compile event in the
traced steps. The function was traced once (its input has a ``None`` dimension: the
iterator's; the same with an ``input_signature`` of ``[None, 8]``), so an ``input_signature`` with ``None`` dimensions would not stop this: XLA
compiles each concrete shape. ``tracing.xla`` keeps these counts per cluster in
``trace.xla.attrs["compiles"]`` (``programs``, ``ran``, ``compiles``, ``compile_us``): a count, not a
column, so a ``.tfplace`` file does not keep it: a loaded trace has the ``xla_recompile``
saved with its findings, and computing them again finds none.
"""

from __future__ import annotations

from ..._model.devices import short_device
from ..._model.xla import XLA_LAUNCH_TYPES
from .base import FOLLOWERS, Context, Finding, listed_names, summed_duration

TOP_INSTRUCTIONS = 3  # named in the message
_AUTO_TYPES = {"_XlaCompile", "_XlaRun", "_XlaMerge"}  # graph-mode auto-clustering's launch
# Python run on the host: XLA compiles no Python, so no cluster takes it in
_HOST_CALLBACK_TYPES = {"EagerPyFunc", "PyFunc", "PyFuncStateless"}
# Bookkeeping that nothing computes: never named as left outside
_NOT_COMPUTE = {"Identity", "IdentityN", "NoOp", "Rank", "Range", "Shape", "Size", "_EagerConst"}


def find_xla_hidden(context: Context) -> list[Finding]:
    """XLA launch ops (``_XlaCompile``/``_XlaRun``, ``XlaLaunch``) whose cluster's ops are not
    in the trace. A cluster is shown when ``trace.ops`` has ``how="xla"`` rows of it (its
    ``function``): a TF2 trace's clusters, and graph-mode auto-clustering traced with its graph
    (``sources.xla_graph``). Loaded without the graph, an auto-clustered trace says to load it
    with the graph, not to turn XLA off (that would measure another program); a TF2 call whose
    profile named no instruction (TensorFlow 2.16) says that."""
    launch = context.names_of(XLA_LAUNCH_TYPES)
    if not launch:
        return []
    ops = context.ops
    shown = set(ops.loc[ops["how"].astype(str) == "xla", "function"].astype(str))
    function_of = dict(zip(ops["op"].tolist(), ops["function"].astype(str).tolist(), strict=True))
    hidden = [n for n in launch if function_of.get(n, "") not in shown]
    if not hidden:
        return []
    auto = all(context.type_of[n] in _AUTO_TYPES for n in hidden)
    if auto and getattr(context.trace, "mode", "") == "function":
        message = (
            "XLA auto-clustering (tf.config.optimizer.set_jit) compiled ops of this call into "
            "clusters, and this TensorFlow's profile named none of their HLO instructions, so "
            "the trace cannot list the ops inside: the cluster's launch ops stand for them."
        )
    elif auto:
        message = (
            "XLA auto-clustering compiled ops of this step into clusters, and without the "
            "graph as built the trace cannot say which: load it with its graph "
            "(PlacementTrace.from_run_metadata(run_metadata, graph)) to list each cluster's "
            "ops on the cluster's device."
        )
    else:
        message = (
            "XLA compiled this step into clusters, so the ops inside are not placed one by one "
            "and their devices cannot be checked: trace it with jit_compile=False (Keras: "
            "model.compile(..., jit_compile=False)) to see them."
        )
    return [
        Finding(
            "xla_hidden",
            "info",
            hidden,
            message,
            {"clusters": len(hidden)},
            (summed_duration(context, hidden), 0.0, float(len(hidden))),
            predicted=context.predicted_trace,
        )
    ]


def find_xla_recompile(context: Context) -> list[Finding]:
    """A cluster XLA compiled again while traced, for new input shapes (XLA compiles one program
    per shape): different programs of it ran in the traced steps, or a compilation fell in them
    while a program of it compiled before (the warm-up's, an earlier call's) existed."""
    xla = getattr(context.trace, "xla", None)
    if xla is None or xla.empty:
        return []
    counts = xla.attrs.get("compiles") or {}
    ops = context.ops
    findings = []
    for cluster, rows in xla.groupby("cluster", sort=False):
        count = counts.get(str(cluster)) or {}
        programs, compiles = int(count.get("programs", 0)), int(count.get("compiles", 0))
        ran = int(count.get("ran", 0))
        if ran < 2 and not (compiles >= 1 and programs > compiles):
            continue
        compile_us = float(count.get("compile_us", 0))
        run_us = float(rows["duration_us"].sum())
        steps = max(1, int(rows["instruction"].value_counts().max()))
        members = ops.loc[
            (ops["how"].astype(str) == "xla") & (ops["function"].astype(str) == str(cluster)),
            "op",
        ].tolist()
        times = "time" if compiles == 1 else "times"
        findings.append(
            Finding(
                "xla_recompile",
                "high" if compile_us > run_us else "medium",
                members,
                (
                    f"XLA compiled cluster {cluster} {compiles} {times} in the {steps} traced "
                    f"runs of it, which ran {ran} different compiled programs ({programs} in "
                    f"all: XLA compiles one per input shape), {compile_us:,.0f} µs of "
                    "compiling against "
                    f"{run_us:,.0f} µs of running: its input shapes change from call to call. "
                    "Feed it a few fixed shapes: pad batches to one size or bucket them "
                    "(tf.data's padded_batch, bucket_by_sequence_length, drop_remainder=True); "
                    "an input_signature with None dimensions does not help, since XLA "
                    "still compiles each concrete shape."
                ),
                {
                    "programs": programs,
                    "ran": ran,
                    "compiles": compiles,
                    "steps": steps,
                    "compile_us": compile_us,
                    "duration_us": run_us,
                },
                (compile_us, 0.0, float(len(members))),
                predicted=context.predicted_trace,
            )
        )
    return findings


def find_xla_outside(context: Context) -> list[Finding]:
    """Ops of an auto-clustered trace (``tf.config.optimizer.set_jit``, ``--tf_xla_auto_jit``)
    that XLA left outside its clusters: they run one by one, beside the clusters.

    Seen on TF 2.21 with ``TF_XLA_FLAGS=--tf_xla_cpu_global_jit`` and ``set_jit(True)``: a
    function with a matmul, an add and a relu, then a ``tf.py_function``, an ``AsString`` and
    a tanh, a multiply and a sum got one cluster (tanh, multiply, sum); the py_function, the
    string op and the ops before the py_function stayed outside. A host callback is named as
    one (XLA compiles no Python); for the others the trace cannot say why (TF's kernel
    registry lists no ``XLA_CPU_JIT`` kernels in the CPU wheel: no XLA kernel for the op or its
    dtype, or too few ops for a cluster: ``--tf_xla_min_cluster_size``, 4 by default). A
    ``jit_compile=True`` function compiles whole: ops outside it are the caller's, no finding.
    """
    ops = context.ops
    how = ops["how"].astype(str)
    clustered = ops[(how == "xla").to_numpy(dtype=bool)]  # the reasons of these rows alone
    clustered = clustered[clustered["reason"].astype(str).str.contains("auto-clustering")]
    if clustered.empty:
        return []
    outside = ops[
        how.isin(("explicit", "implicit", "soft"))
        & ~ops["type"].astype(str).isin(_NOT_COMPUTE | FOLLOWERS)
    ]
    if outside.empty:
        return []
    names = outside["op"].tolist()
    types = dict(zip(names, outside["type"].astype(str).tolist(), strict=True))
    callbacks = [n for n in names if types[n] in _HOST_CALLBACK_TYPES]
    others = [n for n in names if n not in set(callbacks)]
    clusters = list(dict.fromkeys(clustered["function"].astype(str)))
    parts = []
    if callbacks:
        parts.append(
            f"{listed_names(callbacks)} (tf.py_function) runs Python on the host, which XLA "
            "cannot compile, so no cluster can take it in: write it with TensorFlow ops"
        )
    if others:
        typed = [f"{n} ({types[n]})" for n in others]
        parts.append(
            f"{listed_names(typed)} stayed outside too, for a reason the trace does not record "
            "(no XLA kernel for the op or its dtype, or too few ops around it for a cluster)"
        )
    return [
        Finding(
            "xla_outside",
            "medium" if callbacks else "info",
            callbacks + others,
            (
                f"XLA auto-clustering compiled {len(clustered)} ops into "
                f"{listed_names(clusters)} and left {len(names)} ops of the call outside, run "
                f"one by one: {'; '.join(parts)}."
            ),
            {
                "clustered": int(len(clustered)),
                "outside": len(names),
                "host_callbacks": len(callbacks),
            },
            (summed_duration(context, names), 0.0, float(len(names))),
            predicted=context.predicted_trace,
        )
    ]


def find_xla_time(context: Context) -> list[Finding]:
    xla = getattr(context.trace, "xla", None)
    if xla is None or xla.empty:
        return []
    findings = []
    for cluster, rows in xla.groupby("cluster", sort=False):
        total = float(rows["duration_us"].sum())
        steps = max(1, int(rows["instruction"].value_counts().max()))
        by_instruction = (
            rows.groupby("instruction", sort=False)["duration_us"]
            .sum()
            .sort_values(ascending=False, kind="stable")  # ties: the first to run first
        )
        top = by_instruction.head(TOP_INSTRUCTIONS)
        parts, ops = [], []
        for instruction, time in top.items():
            first = rows[rows["instruction"] == instruction].iloc[0]
            share = time / total if total else 0.0
            behind = [listed_names(list(first["tf_ops"]), 3)] if len(first["tf_ops"]) else []
            behind += [first["source"]] if first["source"] else []
            what = f" ({', '.join(behind)})" if behind else ""
            parts.append(f"{instruction} {share:.0%}{what}")
            ops += [op for op in first["tf_ops"] if op not in ops]
        device = short_device(rows["device"].iloc[0])
        findings.append(
            Finding(
                "xla_time",
                "info",
                ops,
                (
                    f"XLA ran cluster {cluster} on {device} as {len(by_instruction)} HLO "
                    f"instructions, {total / steps:,.0f} µs a step; most time in "
                    f"{'; '.join(parts)}. Speed up the ops behind the longest instructions "
                    "first (trace.xla has every run)."
                ),
                {
                    "instructions": int(len(by_instruction)),
                    "duration_us": total,
                    "steps": steps,
                    "top_share": round(float(top.iloc[0]) / total, 3) if total else 0.0,
                },
                (total, 0.0, float(len(ops))),
                predicted=context.predicted_trace,
            )
        )
    return findings
