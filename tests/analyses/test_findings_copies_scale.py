"""The copy rules at a million ops (issue 35): ``ping_pong``'s edges and ``costly_transfer``'s
directions and copy times read what they need and no more. Counted and compared, not timed
(``benchmarks/findings_side.py`` times them next to a baseline)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tfplace_widget._analyses.findings import base, costly
from tfplace_widget._analyses.findings.graph import edge_positions
from tfplace_widget._analyses.findings.material import steps_of


def test_edge_positions_read_each_readers_position_off_the_index():
    """Each edge's reader is its place in the index (only the producers are looked up): the
    edges in the index's order, none whose reader is not in it, and the same edges, as pairs
    of names, as reading every reader of ``inputs`` would give."""
    inputs = {
        "c": ["a", "b"],
        "gone": ["a"],  # a reader the index does not hold: no edge
        "a": ["x", "b"],  # a producer the index does not hold: -1
        "b": [],
        "d": ["c", "c"],
    }
    index = pd.Index(["a", "b", "c", "d"], dtype=object)
    producers, consumers = edge_positions(inputs, index)
    assert consumers.tolist() == [0, 0, 2, 2, 3, 3]
    assert producers.tolist() == [-1, 1, 0, 1, 2, 2]
    names = index.to_numpy()
    got = sorted(
        (names[c], names[p] if p >= 0 else "")
        for p, c in zip(producers.tolist(), consumers.tolist(), strict=True)
    )
    want = sorted(
        (c, p if p in index else "") for c, ps in inputs.items() if c in index for p in ps
    )
    assert got == want


def _equal_pairs(tf: Any, trace_placement: Any) -> Any:
    """Two CPUs sending each other the same number of equal tensors: two directions of one
    rank."""

    def build() -> Any:
        out: dict[int, list] = {0: [], 1: []}
        for src, dst in ((0, 1), (1, 0)):
            for i in range(12):
                with tf.device(f"/cpu:{src}"):
                    x = tf.fill([256], float(i), name=f"x{src}{dst}_{i}")
                with tf.device(f"/cpu:{dst}"):
                    out[dst].append(tf.reduce_sum(x, name=f"r{src}{dst}_{i}"))
        sums = []
        for d in (0, 1):  # each device's sums: nothing else crosses
            with tf.device(f"/cpu:{d}"):
                sums.append(tf.add_n(out[d], name=f"total{d}"))
        return sums

    return trace_placement(build, device_count={"CPU": 2})


def test_costly_transfer_lists_the_ops_of_the_directions_it_keeps_only(
    tf, trace_placement, monkeypatch
):
    """Of two directions of one rank, the one after the kept one in the copies' order cannot
    be kept (equal ranks keep that order): its finding is not made, and no op list is spelled
    out but the kept one's (hundreds of thousands of names at a million ops), which lists the
    ops every direction's finding lists."""
    trace = _equal_pairs(tf, trace_placement)
    listed: list[tuple] = []
    real = costly._direction_ops
    monkeypatch.setattr(costly, "_direction_ops", lambda *a: listed.append(a) or real(*a))
    every = costly.find_costly_transfers(base.Context.of(trace))
    assert len(listed) == len(every) >= 2
    assert every[0].cost == every[1].cost  # a tie
    listed.clear()
    monkeypatch.setattr(costly, "TOP_TRANSFERS", 1)
    made: list[str] = []
    real_made = costly._direction_finding
    monkeypatch.setattr(costly, "_direction_finding", lambda *a: made.append(a[1]) or real_made(*a))
    (top,) = costly.find_costly_transfers(base.Context.of(trace))
    assert len(made) == 1 and len(listed) == 1
    assert (top.ops, top.message, top.evidence, top.severity) == (
        every[0].ops,
        every[0].message,
        every[0].evidence,
        every[0].severity,
    )
    assert top.ops and len(top.ops) == len(set(top.ops))


def test_a_direction_is_made_while_it_may_still_be_kept(monkeypatch):
    """``_may_reach``: a direction whose best rank is worse than the last kept finding's is not
    made; one whose best is better is; one that ties it is made only when it comes before one
    of the equal findings in the copies' order (equal ranks keep that order), so a finding
    that turned out ``info`` (ranked after its best) still lets a tied direction be made."""
    monkeypatch.setattr(costly, "TOP_TRANSFERS", 2)
    a, b, c, d = (("x", "y", str(i)) for i in range(4))

    def made(*findings: tuple) -> dict:
        return {
            key: base.Finding("costly_transfer", severity, [], "", {}, cost)
            for key, severity, cost in findings
        }

    two = made((a, "medium", (5.0, 0.0, 1.0)), (c, "medium", (3.0, 0.0, 1.0)))
    order = [a, b, c, d]
    assert costly._may_reach(d, (False, -3.0, -0.0, -1.0), two, order) is False  # tied, later
    assert costly._may_reach(b, (False, -3.0, -0.0, -1.0), two, order) is True  # tied, before c
    assert costly._may_reach(d, (False, -4.0, -0.0, -1.0), two, order) is True  # better
    assert costly._may_reach(b, (False, -2.0, -0.0, -1.0), two, order) is False  # worse
    # c turned out info: a later direction with c's cost and no io can still rank before it
    info = made((a, "medium", (5.0, 0.0, 1.0)), (c, "info", (3.0, 0.0, 1.0)))
    assert costly._may_reach(d, (False, -3.0, -0.0, -1.0), info, order) is True


def test_copy_times_read_no_event_when_no_copy_ran(tf, trace_placement, monkeypatch):
    """The copied tensors are looked up in ``Steps``' index of every event's name first: a CPU
    trace's copies ran no memcpy record, so the million events are not read for them; with a
    record named after a copied tensor (as a GPU trace's memcpy), its time is found as before."""
    trace = _equal_pairs(tf, trace_placement)
    read: list[int] = []
    real = costly.rows_among
    monkeypatch.setattr(costly, "rows_among", lambda v, n: read.append(len(v)) or real(v, n))
    context = base.Context.of(trace)
    assert steps_of(context).every_event
    assert costly._copy_time(context, trace.transfers) == {} and not read
    tensor = trace.transfers["tensor"].iloc[0]
    copied = base.Context.of(trace)
    copied.trace = clone = type(trace).__new__(type(trace))
    clone.__dict__.update(trace.__dict__)
    events = trace.events
    record = events.iloc[:1].assign(op=tensor, duration_us=7)
    clone.events = pd.concat([events, record, record], ignore_index=True)
    assert steps_of(copied).every_event
    assert costly._copy_time(copied, trace.transfers) == {tensor: 14}
    assert read == [len(clone.events)]
    # events left out of the steps' time (an aggregate lane's): then every event is read
    lanes = clone.events.assign(
        lane=np.where(np.arange(len(clone.events)) == 0, "x/stream:all", "x")
    )
    clone.events = lanes
    copied.steps = None
    assert not steps_of(copied).every_event
    assert costly._copy_time(copied, trace.transfers) == {tensor: 14}
