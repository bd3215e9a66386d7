"""Findings about what XLA ran: ``xla_time``, where the time of each XLA cluster went, by
HLO instruction (from ``trace.xla``), with the TF ops and the user's line behind each, and
``xla_hidden``, XLA launch ops whose cluster's TF ops the trace does not list."""

from __future__ import annotations

from ...model.devices import short_device
from .base import Context, Finding, listed_names, summed_duration

TOP_INSTRUCTIONS = 3  # named in the message
_XLA_TYPES = {"XlaLaunch", "XlaLaunchV2", "_XlaCompile", "_XlaRun", "_XlaMerge"}
_AUTO_TYPES = {"_XlaCompile", "_XlaRun", "_XlaMerge"}  # graph-mode auto-clustering's launch


def find_xla_hidden(context: Context) -> list[Finding]:
    """XLA launch ops (``_XlaCompile``/``_XlaRun``, ``XlaLaunch``) whose cluster's ops are not
    in the trace. A cluster is shown when ``trace.ops`` has ``how="xla"`` rows of it (its
    ``function``): a TF2 trace's clusters, and graph-mode auto-clustering traced with its graph
    (``sources.xla_graph``). Loaded without the graph, an auto-clustered trace says to load it
    with the graph, not to turn XLA off (that would measure another program); a TF2 call whose
    profile named no instruction (TensorFlow 2.16) says that."""
    launch = [n for n, t in context.type_of.items() if t in _XLA_TYPES]
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
            .sort_values(ascending=False)
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
