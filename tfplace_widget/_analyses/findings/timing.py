"""Findings about time: ``idle_device``, a device idle for most of the step while another is
busy (a GPU waiting for its input, work that could spread over the devices)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..._model.devices import parse_device, short_device
from ..summary import busy_per_device
from .base import Context, Finding, device_type, listed_ops
from .graph import rows_among
from .material import lanes_of, step_of, trace_steps
from .transfers import step_count

# A device is idle when busy for less than this share of the step while another device is
# busy for at least BUSY_SHARE of it.
IDLE_SHARE = 0.25
BUSY_SHARE = 0.5
# Material only for a step this long (per step): in a step of tens or hundreds of
# microseconds, which device ran an op's few microseconds changes from one run to the next
# (a 30-500 us toy step's idle_device came and went between runs), and nothing worth moving.
IDLE_MIN_STEP_US = 1_000.0


def find_idle_devices(context: Context) -> list[Finding]:
    events = context.trace.events
    if events is None or events.empty:
        return []
    op_level = events[~lanes_of(context, events)]
    op_level = op_level[op_level["device"].isin(context.trace.devices)]
    # the runtime's own nodes (_SOURCE, sends and receives) are no work a user could move
    context.is_runtime("")  # builds context.runtime
    # nor is a collective's time (an all-reduce waits there for the other tasks of its group)
    collective = set(
        context.names_of(t for t in set(context.type_of.values()) if t.startswith("Collective"))
    )
    excluded = rows_among(op_level["op"], context.runtime or set())
    if collective:
        excluded |= rows_among(op_level["op"], collective)
    op_level = op_level[~excluded]
    if op_level.empty:
        return []
    starts = op_level["start_us"].to_numpy()
    ends = starts + op_level["duration_us"].to_numpy()
    span = float(ends.max() - starts.min())
    if span <= 0 or span / max(1, step_count(context)) < IDLE_MIN_STEP_US:
        return []
    busy = busy_per_device(op_level)
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
        kind, other = device_type(device), device_type(busiest)
        if not time and kind != "GPU":  # an unused CPU (a stand-in for the GPU)
            continue
        if kind != "GPU" and kind == "CPU" and other == "GPU":  # the host waiting: as it should
            continue
        mine = context.ops[context.ops["device"] == busiest]
        mine = mine[~mine["op"].map(context.is_runtime)]
        top = (
            mine.dropna(subset=["duration_us"])
            .sort_values("duration_us", ascending=False)["op"]
            .head(5)
            .tolist()
        )
        idle = 1 - time / span
        steady, steps = _idle_steps(context.trace, op_level, device, busiest)
        if steady * 2 <= steps:  # idle in one step, not in the others: noise, not a finding
            continue
        gpu_idle = device_type(device) == "GPU"
        fix = (
            "feed it: prefetch the input (dataset.prefetch) and move the CPU work it waits on "
            "to the GPU"
            if gpu_idle
            else f"move some of {short_device(busiest)}'s work there or run it in parallel"
        )
        findings.append(
            Finding(
                "idle_device",
                "medium" if gpu_idle else "info",
                top,
                (
                    f"{short_device(device)} is idle for {idle:.0%} of the step while "
                    f"{short_device(busiest)} is busy {busy[busiest] / span:.0%} of it (longest: "
                    f"{listed_ops(top, 3)}): {fix}."
                ),
                {
                    "idle_share": round(idle, 3),
                    "busy_us": time,
                    "other_busy_us": busy[busiest],
                    "span_us": span,
                    "idle_steps": steady,
                },
                (span - time, 0.0, 0.0),
                predicted=context.predicted_trace,
            )
        )
    return findings


def _idle_steps(trace: Any, events: pd.DataFrame, device: str, busiest: str) -> tuple[int, int]:
    """In how many of the traced steps ``device`` was idle while ``busiest`` was busy (the
    shares of ``IDLE_SHARE`` and ``BUSY_SHARE`` within each step), and how many there were."""
    step, steps = step_of(events, trace_steps(trace))
    if steps <= 1:
        return 1, 1
    steady = 0
    for index in range(steps):
        rows = events[step == index]
        if rows.empty:
            continue
        starts = rows["start_us"].to_numpy()
        span = float((starts + rows["duration_us"].to_numpy()).max() - starts.min())
        busy = busy_per_device(rows)
        if span > 0 and busy.get(busiest, 0.0) >= BUSY_SHARE * span:
            steady += busy.get(device, 0.0) < IDLE_SHARE * span
    return steady, steps


def _job(name: str) -> str:
    try:
        return parse_device(name).job or ""
    except ValueError:
        return ""
