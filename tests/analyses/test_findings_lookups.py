"""The rules' look-ups of names at a million ops (issue 35): positions read off an index's own
table with the names as they are (no ``Index.get_indexer``, which pandas 3 makes infer a ``str``
index of every target first), a finding's devices by the row table's C passes, and the events'
aggregate lanes found once for ``Steps`` and ``idle_device``. Counted and compared, not timed
(``benchmarks/findings_side.py`` times them next to a baseline)."""

from __future__ import annotations

from importlib import import_module
from typing import Any

import numpy as np
import pandas as pd

from tfplace_widget._analyses.findings import base, graph, timing, transfers
from tfplace_widget._analyses.findings.byrow import RowValues

# the module (the package exports a function of its name)
material = import_module("tfplace_widget._analyses.findings.material")


def _no_get_indexer(monkeypatch: Any) -> list[int]:
    """``pd.Index.get_indexer`` made to record the size of each target it is handed."""
    asked: list[int] = []
    real = pd.Index.get_indexer

    def counting(self: pd.Index, target: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(len(target))
        return real(self, target, *args, **kwargs)

    monkeypatch.setattr(pd.Index, "get_indexer", counting)
    return asked


def test_positions_answer_get_indexer_off_the_index_table(monkeypatch):
    """``edge_positions``, ``exact_sums`` and ``among`` find the same positions as
    ``get_indexer`` (-1 for a name not in the index) without calling it on an object index;
    another index still gets its answer."""
    index = pd.Index(["a", "b", "c", "d"], dtype=object)
    names = np.array(["c", "x", "a", "d", "c"], dtype=object)
    want = index.get_indexer(names).tolist()
    asked = _no_get_indexer(monkeypatch)
    assert graph.positions_in(index, names).tolist() == want == [2, -1, 0, 3, 2]
    inputs = {"c": ["a", "x"], "d": ["c", "b"], "gone": ["a"]}
    producers, consumers = graph.edge_positions(inputs, index)
    assert (producers.tolist(), consumers.tolist()) == ([0, -1, 2, 1], [2, 2, 3, 3])
    sums = graph.exact_sums(index, list(names), np.array([1.0, 5.0, 2.0, np.nan, 4.0]))
    assert sums is not None and sums.tolist() == [2.0, 0.0, 5.0, 0.0]
    assert graph.among(index, {"b", "x"}).tolist() == [False, True, False, False]
    assert asked == []
    numbers = pd.Index([10, 20, 30])
    assert graph.positions_in(numbers, np.array([30, 5])).tolist() == [2, -1]
    assert asked == [2]


def test_a_findings_devices_are_read_by_rows_not_one_get_each(monkeypatch):
    """``devices_of`` answers ``device_of.get`` for each name (None for a name without a row)
    and, when every name has a row, asks ``RowValues.get`` of none."""
    rows = {"a": 0, "b": 1, "c": 2}
    device_of = RowValues(rows, ["/cpu:0", "/gpu:0", "/cpu:1"])
    context = base.Context(
        trace=None,
        ops=pd.DataFrame(),
        device_of=device_of,
        type_of={},
        gpu_kernel={},
        requested={},
        inputs={},
    )
    got: list[str] = []
    real = RowValues.get
    monkeypatch.setattr(RowValues, "get", lambda self, *a: got.append(a[0]) or real(self, *a))
    assert transfers.devices_of(context, ["c", "a", "c"]) == ["/cpu:1", "/cpu:0", "/cpu:1"]
    assert got == []
    assert transfers.devices_of(context, ["b", "zz"]) == ["/gpu:0", None]
    assert got == ["b", "zz"]


def test_idle_device_reuses_the_aggregate_lanes_steps_found(tf, trace_placement, monkeypatch):
    """With ``Steps`` found for the trace's events, ``find_idle_devices`` factorizes no lane
    again, and finds what it finds without them."""

    def build() -> Any:
        x = tf.constant(np.ones((64, 64), np.float32))
        for i in range(6):
            with tf.device(f"/cpu:{i % 2}"):
                x = tf.matmul(x, x, name=f"m{i}") / 64.0
        return x

    trace = trace_placement(build, device_count={"CPU": 2})
    assert trace.events is not None and len(trace.events)
    fresh = timing.find_idle_devices(base.Context.of(trace))
    context = base.Context.of(trace)
    material.steps_of(context)
    calls: list[int] = []
    real = material.aggregate_lanes

    def counting(events: pd.DataFrame) -> Any:
        calls.append(len(events))
        return real(events)

    monkeypatch.setattr(material, "aggregate_lanes", counting)
    monkeypatch.setattr(timing, "aggregate_lanes", counting, raising=False)
    again = timing.find_idle_devices(context)
    assert calls == []
    assert [(f.kind, f.ops, f.message, f.evidence) for f in again] == [
        (f.kind, f.ops, f.message, f.evidence) for f in fresh
    ]
