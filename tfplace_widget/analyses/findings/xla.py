"""Findings about what XLA ran: ``xla_time``, where the time of each XLA cluster went, by
HLO instruction (from ``trace.xla``), with the TF ops and the user's line behind each."""

from __future__ import annotations

from ...model.devices import short_device
from .base import Context, Finding, listed_names

TOP_INSTRUCTIONS = 3  # named in the message


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
