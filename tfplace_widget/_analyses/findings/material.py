"""Which findings are material: what they are about takes a share of the step a user would
notice (its time, or the bytes the step makes), and keeps that share across the traced steps.

A finding's share of the step is the time of the ops it names (and its own measured time:
copies, waits, an XLA cluster's instructions) over the time of every op of the traced calls
(the input pipeline's own threads left out), or the bytes it copies over the bytes the step's
ops output, when the trace recorded sizes. With several traced steps the share must reach
``MATERIAL_SHARE`` in more than half of them (``steady_steps`` of ``traced_steps``); a finding
that rests on one traced step says so. A prediction (``predict_placement``'s trace) ran nothing:
its findings are measured against the steps of the trace it was predicted from
(``PlacementTrace.measured``). Without any op time (a trace loaded without its timings) a
finding is kept: nothing says it is small.

Each finding's ``evidence`` gets ``step_share``, ``traced_steps``, ``steady_steps`` and
``material`` (1 or 0); ``find_findings`` lists the material ones, and all of them with
``immaterial=True``.
"""

from __future__ import annotations

from collections.abc import Collection
from itertools import chain
from typing import Any

import numpy as np
import pandas as pd

from .base import Context, Finding
from .graph import positions_in

# A finding is material when what it is about takes at least this share of the step.
MATERIAL_SHARE = 0.01
# Findings about the trace itself (what it can show), not about a cost: always material.
_ABOUT_THE_TRACE = frozenset({"merged_runs", "xla_hidden"})
# Findings with a rule of their own (memory.py's bytes held, ps.py's bytes a ps task serves a
# step, and a user's request the strategy overrode: always): material by it, kept as they are.
_OWN_MATERIALITY = frozenset(
    {
        "gpu_memory",
        "memory_peak",
        "pinned_host_memory",
        "input_memory",
        "replicated_variables",
        "unbalanced_ps",
        "overridden_request",
    }
)
# Findings whose claim rests on measured time (an idle share, a wait, a cluster's time, a
# copy's time): with one traced step the message says it rests on that one step.
_TIMED_KINDS = frozenset({"idle_device", "input_wait", "xla_time", "xla_recompile"})
ONE_STEP = " This rests on one traced step: trace_placement(..., steps=3) shows whether it holds."


def timed_events(trace: Any) -> pd.DataFrame:
    """The op-level runs of the traced calls (``trace.events`` without the aggregate
    ``stream:all`` lanes), or for a prediction those of the trace it was predicted from.
    XLA's compiles (``_XlaCompile``) are left out: a compile is paid once per shape, not each
    step (``xla_recompile`` is the finding about compiles that recur), and a first traced
    step's compile would make everything else in it look small."""
    return _timed_and_read(trace)[0]


def _timed_and_read(trace: Any) -> tuple[pd.DataFrame, pd.DataFrame | None, np.ndarray | None]:
    """``timed_events``' answer, with the events it read and their ``aggregate_lanes`` mask
    (None, None when it read none), which ``Steps`` keeps for ``find_idle_devices``."""
    events = trace.events
    if (events is None or events.empty) and getattr(trace, "measured", None) is not None:
        events = trace.measured
    if events is None or events.empty:
        return pd.DataFrame(columns=["op", "device", "start_us", "duration_us"]), None, None
    ops = trace.ops
    compiles = set(ops.loc[ops["type"].astype(str) == "_XlaCompile", "op"]) if "type" in ops else ()
    aggregate = aggregate_lanes(events)
    timed = events[~aggregate & ~events["op"].isin(compiles).to_numpy(dtype=bool)]
    return timed, events, aggregate


def aggregate_lanes(events: pd.DataFrame) -> np.ndarray:
    """Per event: on an aggregate ``.../stream:all`` lane (its time is its streams' again),
    tested once per distinct lane, not per event."""
    if "lane" not in events:
        return np.zeros(len(events), dtype=bool)
    codes, lanes = pd.factorize(events["lane"].astype(str))
    aggregate = [str(lane).endswith("/stream:all") for lane in lanes]
    return np.array([*aggregate, False], dtype=bool)[codes]


def step_of(events: pd.DataFrame, steps: int | None = None) -> tuple[np.ndarray, int]:
    """The traced step each run of ``events`` belongs to, and how many steps there were.

    ``steps``: the trace's step count (``runs`` of most ops), else how many runs most ops
    have in ``events``. Step ``i`` begins where the first ``i``-th run of an op that ran once
    a step begins (the calls follow each other)."""
    if events.empty:
        return np.zeros(0, dtype=int), 1
    if steps is not None and steps <= 1:  # one step: no op's runs to count (a million events)
        return np.zeros(len(events), dtype=int), 1
    runs = events.groupby("op")["start_us"].transform("size").to_numpy()
    if steps is None:
        steps = int(pd.Series(runs).mode().iloc[0])
    if steps <= 1 or not (runs == steps).any():
        return np.zeros(len(events), dtype=int), 1
    every = events[runs == steps].sort_values("start_us", kind="stable")
    nth = every.groupby("op").cumcount().to_numpy()
    starts = every["start_us"].to_numpy()
    bounds = np.array([starts[nth == i].min() for i in range(1, steps)])
    return np.searchsorted(bounds, events["start_us"].to_numpy(), side="right"), steps


def trace_steps(trace: Any) -> int | None:
    """How many steps ``trace`` ran: the ``runs`` of most of its ops (None when unrecorded,
    as in a prediction's ops)."""
    runs = trace.ops["runs"].dropna() if "runs" in trace.ops else pd.Series(dtype=float)
    return int(runs.mode().iloc[0]) if len(runs) else None


# From this many rows on, numpy sums a column pairwise (eight partial sums), not in order.
_PAIRWISE = 8


class Steps:
    """The traced steps' op time, per step, for the shares of findings."""

    def __init__(self, trace: Any) -> None:
        # the events read and their aggregate lanes' mask, for ``lanes_of``
        events, self.read, self.aggregate = _timed_and_read(trace)
        # the rows are every event of the trace's own (none left out, none a prediction's
        # source's): an op name not among ``names`` then names no event
        self.every_event = trace.events is not None and len(events) == len(trace.events)
        step, self.count = step_of(events, trace_steps(trace))
        codes, names = pd.factorize(events["op"].astype(str))
        duration = events["duration_us"].astype(float).fillna(0.0).to_numpy()
        # each op's time in each step: a finding's share is the sum of its ops' rows
        self.per_op = np.zeros((len(names), self.count))
        np.add.at(self.per_op, (codes, step), duration)
        # the ops of the rows, each once: an index, whose table pandas builds at its first
        # look-up (a dict of a million names cost more to make and to read)
        self.names = pd.Index(names, dtype=object)
        self.total = self.per_op.sum(axis=0)
        # whole microseconds (as the runtime records them) under 2**53: sums in any order agree
        self.exact = bool(
            np.array_equal(self.per_op, np.round(self.per_op))
            and np.abs(self.per_op).sum() < 2.0**53
        )
        ops = trace.ops
        sizes = ops["output_bytes"] if "output_bytes" in ops else pd.Series(dtype=float)
        sizes = pd.to_numeric(sizes, errors="coerce")
        self.output_bytes = float(sizes.sum()) if sizes.notna().any() else 0.0

    def shares(self, findings: list[Finding]) -> np.ndarray:
        """Each finding's share of each traced step's op time (a row per finding): the sum of
        its ops' rows, or, when its own measured time over all steps is more, that time spread
        evenly over the steps (which step it fell in is not recorded). One or the other for the
        whole row, never the larger of the two step by step: that would count a cost twice (a
        first step's ops and, again, their even share of the total). The shares of all findings
        at once, in numpy: a large trace has hundreds of thousands of them."""
        rows = self._rows(findings)
        per_op = self.per_op
        summed = np.zeros((len(findings), self.count))
        # numpy's own sum per finding, for its rounding: below 8 rows (most findings) it adds
        # them one after another, as np.add.at does for all those findings in one call
        few = [i for i, r in enumerate(rows) if len(r) < _PAIRWISE]
        sizes = [len(rows[i]) for i in few]
        flat = np.concatenate([rows[i] for i in few]) if few else np.zeros(0, np.intp)
        np.add.at(summed, np.repeat(np.asarray(few, dtype=np.intp), sizes), per_op[flat])
        for i, r in enumerate(rows):
            if len(r) >= _PAIRWISE:
                summed[i] = per_op[r].sum(axis=0)
        cost = np.array([f.cost[0] for f in findings], dtype=float).reshape(-1, 1)
        own = cost > summed.sum(axis=1, keepdims=True)
        chosen = np.where(own, cost / self.count, summed)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(self.total > 0, chosen / self.total, 0.0)
        return np.minimum(share, 1.0)

    def _rows(self, findings: list[Finding]) -> list[np.ndarray]:
        """Each finding's rows: those of its ops that ran, each once (a finding's ops are
        unique, ``Finding`` makes them so). All findings' ops looked up in one call (a large
        trace's immaterial findings are tens of thousands; a large finding names hundreds of
        thousands of ops). When the times are whole numbers (``exact``) they sum alike in any
        order, and the ops are looked up as listed; otherwise in the order of the set of each
        finding's ops, the order its sum always took."""
        if not findings:
            return []
        if self.exact:
            listed: list[Collection[str]] = [f.ops for f in findings]
        else:
            listed = [list(set(f.ops)) for f in findings]
        lengths = np.fromiter(map(len, listed), np.intp, len(listed))
        flat = np.fromiter(chain.from_iterable(listed), object, int(lengths.sum()))
        found = positions_in(self.names, flat) if len(flat) else np.zeros(0, np.intp)
        return [r[r >= 0] for r in np.split(found, np.cumsum(lengths)[:-1])]

    def bytes_share(self, finding: Finding) -> float:
        """The bytes the finding copies over the bytes the step's ops output, when both are
        recorded (0 otherwise)."""
        moved = finding.evidence.get("bytes", -1)
        if not self.output_bytes or not isinstance(moved, int | float) or moved <= 0:
            return 0.0
        return float(moved) / self.output_bytes


def lanes_of(context: Context, events: pd.DataFrame) -> np.ndarray:
    """``aggregate_lanes(events)``, taken from ``Steps`` when it was found for these same
    events (a million rows' lanes factorized once, not again by ``find_idle_devices``)."""
    steps = context.steps
    if isinstance(steps, Steps) and steps.read is events and steps.aggregate is not None:
        return steps.aggregate
    return aggregate_lanes(events)


def steps_of(context: Context) -> Steps:
    """The traced steps' op time of ``context``'s trace, found once."""
    if context.steps is None:
        context.steps = Steps(context.trace)
    return context.steps


def maybe_material(
    context: Context,
    index: pd.Index,
    labels: np.ndarray,
    positions: np.ndarray,
    own: np.ndarray,
) -> np.ndarray:
    """For each group of ops (``labels[i]``: the group of the op at ``positions[i]`` of
    ``index``, unique names; repeats allowed), whether a finding about them with its own time
    ``own[group]`` (over the traced steps) and no bytes could be material by ``judge``: False
    only when every traced step's share stays under ``MATERIAL_SHARE`` even with each op's time
    counted as often as it is listed. So a rule with a great many findings (a million-op
    graph's CPU stretches, nearly all of them small) makes only the others. All True when
    ``judge`` keeps every finding (no op time recorded), or when findings of a function's
    copies merge (``_one_per_copy``: the merged finding names more ops)."""
    every = np.ones(len(own), dtype=bool)
    context.original("")  # builds context.copy_of
    steps = steps_of(context)
    if context.copy_of or not steps.total.sum() > 0:
        return every
    rows = np.full(len(index), -1, dtype=np.intp)  # each op's row of the steps' op time
    per_op = np.abs(steps.per_op)
    # only the ops that took time are looked up (row -1, none, for the others: the same 0)
    timed = np.flatnonzero(per_op.any(axis=1))
    found = positions_in(index, np.asarray(steps.names, dtype=object)[timed])
    rows[found[found >= 0]] = timed[found >= 0]
    per_op = np.vstack([per_op, np.zeros((1, steps.count))])  # row -1: none
    times = per_op[rows[positions]]
    summed = np.stack(
        [np.bincount(labels, weights=times[:, s], minlength=len(own)) for s in range(steps.count)],
        axis=1,
    )
    mine = np.where(own > 0, own / steps.count, 0.0).reshape(-1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(steps.total > 0, np.maximum(summed, mine) / steps.total, 0.0)
    # a margin for the rounding of the sums judge makes in another order
    return (share >= MATERIAL_SHARE * (1 - 1e-6)).any(axis=1)


def judge(context: Context, found: list[Finding]) -> list[Finding]:
    """``found`` with each finding's materiality in its evidence (see the module doc)."""
    steps = steps_of(context)
    timed = bool(steps.total.sum() > 0)
    judged = [
        f
        for f in found
        if timed and f.kind not in _ABOUT_THE_TRACE and f.kind not in _OWN_MATERIALITY
    ]
    shares = steps.shares(judged)
    total = steps.total.sum()
    steady = (shares >= MATERIAL_SHARE).sum(axis=1)
    for finding in found:
        finding.evidence["traced_steps"] = steps.count
        if finding.kind in _OWN_MATERIALITY:
            continue
        if not timed or finding.kind in _ABOUT_THE_TRACE:
            finding.evidence["material"] = 1
    if steps.count == 1:  # one product per finding, as np.dot of two one-element rows makes
        wholes = ((shares[:, 0] * steps.total[0]) / total).tolist()
    else:
        wholes = [float(np.dot(row, steps.total) / total) for row in shares]
    for finding, whole, runs in zip(judged, wholes, steady.tolist(), strict=True):
        evidence = finding.evidence
        evidence["step_share"] = round(whole, 4)
        evidence["steady_steps"] = runs
        by_time = whole >= MATERIAL_SHARE and runs * 2 > steps.count
        by_bytes = steps.bytes_share(finding) >= MATERIAL_SHARE
        evidence["material"] = int(by_time or by_bytes)
        if steps.count == 1 and finding.kind in _TIMED_KINDS | _timed_copy(finding):
            finding.message += ONE_STEP
    return found


def _timed_copy(finding: Finding) -> frozenset[str]:
    """``costly_transfer`` when its copies were timed (its severity read their time)."""
    timed = finding.kind == "costly_transfer" and finding.evidence.get("time_us", 0) > 0
    return frozenset({"costly_transfer"}) if timed else frozenset()


def material(finding: Finding) -> bool:
    """Whether ``judge`` found ``finding`` material (a finding it did not judge is)."""
    return bool(finding.evidence.get("material", 1))
