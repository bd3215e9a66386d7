"""Findings about the input pipeline: ``input_wait``, the traced calls blocked in
``IteratorGetNext`` until ``tf.data`` made the next element, for a material share of their time.

Read off the trace as function mode makes it: the ``IteratorGetNext`` row's runs are the waits
(the profile's ``IteratorGetNextOp::DoCompute``), and the rows with an ``input_stage`` are the
ops of the pipeline's functions, whose times name what made the wait.
"""

from __future__ import annotations

from typing import Any

from ..summary import format_us
from .base import Finding, listed_ops

# Material: the calls waited at least this share of their time, over the waits after the
# first (which also pays for the pipeline's start), and at least MIN_WAIT_US in all.
INPUT_SHARE = 0.2
MIN_WAIT_US = 1000.0
_WAIT_TYPES = ("IteratorGetNext", "IteratorGetNextSync", "IteratorGetNextAsOptional")


def find_input_waits(trace: Any) -> list[Finding]:
    """One ``input_wait`` finding when the traced calls waited for input for a material,
    steady share of their time; none otherwise (or without an ``input_stage`` column)."""
    ops, events = trace.ops, trace.events
    if "input_stage" not in ops or events is None or events.empty:
        return []
    in_calls = ops["input_stage"].isna()
    waits = ops[in_calls & ops["type"].isin(_WAIT_TYPES)]["op"].tolist()
    if not waits:  # no call waited: nothing to read off a million events
        return []
    calls = events[events["op"].isin(set(ops["op"][in_calls]))]
    waited = calls[calls["op"].isin(waits)].sort_values("start_us")
    if waited.empty:
        return []
    ends = calls["start_us"] + calls["duration_us"]
    span = float(ends.max() - calls["start_us"].min())
    total = float(waited["duration_us"].sum())
    steady = waited.iloc[1:] if len(waited) > 1 else waited
    steady_span = float(ends.max() - steady["start_us"].min()) if len(steady) else 0.0
    if span <= 0 or steady_span <= 0 or total < MIN_WAIT_US:
        return []
    share, steady_share = total / span, float(steady["duration_us"].sum()) / steady_span
    if min(share, steady_share) < INPUT_SHARE:
        return []
    pipeline = ops[~in_calls].dropna(subset=["duration_us"])
    longest = pipeline.sort_values("duration_us", ascending=False).head(3)
    parts = [
        f"{op} ({op_type}, {format_us(duration)} in {runs} runs)"
        for op, op_type, duration, runs in zip(
            longest["op"], longest["type"], longest["duration_us"], longest["runs"], strict=True
        )
    ]
    stages = sorted(set(pipeline["input_stage"].dropna()))
    made = (
        f" Its functions' longest ops, in stage {', '.join(stages)}: {'; '.join(parts)}."
        if parts
        else ""
    )
    python = (
        " EagerPyFunc is a tf.py_function: your Python code."
        if (longest["type"] == "EagerPyFunc").any()
        else ""
    )
    message = (
        f"The traced calls waited {format_us(total)} for input ({100 * share:.0f}% of their "
        f"{format_us(span)}; {len(waited)} waits in {listed_ops(_originals(ops, waits))}): the "
        f"step blocked until tf.data made the next element.{made}{python}"
    )
    # The cause is in the user's code when the time went to their dataset's functions; waits
    # with no function behind them are the loop's own (Keras's adapter of arrays): info.
    yours = bool(parts)
    return [
        Finding(
            kind="input_wait",
            severity="medium" if steady_share >= 0.5 and yours else "info",
            ops=[*waits, *longest["op"].tolist()],
            message=message,
            evidence={
                "waited_us": total,
                "share": round(share, 3),
                "steady_share": round(steady_share, 3),
                "waits": len(waited),
                "user_fix": int(yours),
            },
            cost=(total, 0.0, float(len(waited))),
        )
    ]


def _originals(ops: Any, names: list[str]) -> list[str]:
    """``names`` without the copies of a function's ops whose original is among them (the
    evaluation copy of ``fit``'s step lists its ops as ``<function>/<op>``)."""
    functions = set(ops["function"].dropna().astype(str)) if "function" in ops else set()
    present = set(names)
    return [
        n
        for n in names
        if not (n.partition("/")[0] in functions and n.partition("/")[2] in present)
    ]
