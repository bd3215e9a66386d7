"""The memory lane and the memory peaks (issue 34) in the panel, the HTML report and the snapshot.

A dense net's training step in graph mode on two real CPUs (``test_memory``'s, first layer on
CPU:0, the rest on CPU:1), traced with FULL_TRACE: what the timeline's figure, the panel's
memory list, the report's data and the snapshot show is checked against
``trace.memory_peaks()`` (itself checked against TensorFlow's own records in
``tests/sources/test_memory.py``). A trace without allocator records (its ``memory`` empty:
TF2 profiles, Chrome traces, files saved before) draws what it drew before.
"""

from __future__ import annotations

import dataclasses
import html
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from helpers import TWO_CPUS
from test_memory import dense_training_step

from tfplace_widget import show_placement
from tfplace_widget._analyses.memory import memory_peaks, memory_series
from tfplace_widget._analyses.summary import format_bytes, format_us
from tfplace_widget._export.html import report_data
from tfplace_widget._model.devices import short_device
from tfplace_widget._model.memory import keep_name_codes, name_codes, stable_order
from tfplace_widget._rendering.figure import TimelineFigure
from tfplace_widget._rendering.memory_lane import (
    MAX_MEMORY_POINTS,
    NO_OP,
    memory_curves,
    memory_items,
    thin,
)
from tfplace_widget._rendering.snapshot import panel_snapshot_html


@pytest.fixture(scope="module")
def dense(tf, trace_placement):
    return trace_placement(lambda: dense_training_step(tf), device_count=TWO_CPUS)


def own(trace):
    """``trace.memory``'s rows of the step's own allocations: what the lane draws (the
    persistent rows are in no curve)."""
    return trace.memory[trace.memory["kind"] == "temporary"].reset_index(drop=True)


def _figure(trace, memory=None):
    memory = trace.memory if memory is None else memory
    return TimelineFigure(trace.events, trace.devices, trace.transfers, trace.inputs, memory=memory)


def _lane(figure):
    """The lane's traces: ``{device: (curve, peak marker)}``."""
    curves = {t["meta"]["memory"]: t for t in figure.data if "memory" in t.get("meta", {})}
    peaks = {t["meta"]["memory_peak"]: t for t in figure.data if "memory_peak" in t.get("meta", {})}
    assert curves.keys() == peaks.keys()
    return {device: (curves[device], peaks[device]) for device in curves}


def test_the_lane_draws_each_devices_live_bytes_and_its_peak(dense):
    peaks = dense.memory_peaks()
    assert len(peaks) == 2  # both CPUs allocated in the step
    figure = _figure(dense)
    lane = _lane(figure)
    assert set(lane) == set(peaks["device"])
    axes = set()
    for row in peaks.itertuples(index=False):
        curve, marker = lane[row.device]
        records = own(dense)[own(dense)["device"] == row.device]
        # Every record drawn (a small step), after a point at 0 where the step starts.
        assert list(curve["y"]) == [0.0, *records["live_bytes"].astype(float)]
        assert list(curve["x"][1:]) == list(records["time_us"].astype(float))
        assert curve["line"]["shape"] == "hv"
        assert marker["y"] == [row.peak_bytes] and marker["x"] == [row.peak_time_us]
        assert marker["text"] == [
            f"peak {format_bytes(row.peak_bytes)} at {format_us(row.peak_time_us)}"
        ]
        assert curve["yaxis"] == marker["yaxis"]
        axes.add(curve["yaxis"])
        # The hover of the record at the peak names the op whose allocation made it.
        at = int(np.argmax(records["live_bytes"].to_numpy()))
        op, delta = curve["text"][at + 1], curve["customdata"][at + 1]
        assert op == records["op"].iloc[at] and delta == records["bytes"].iloc[at] > 0
        assert "%{text} %{customdata:+.3s}B" in curve["hovertemplate"]
        assert curve["customdata"].dtype == np.float64  # sent as a binary buffer
    # A row per device under the lanes; the bars' traces keep their places.
    assert axes == {"y2", "y3"}
    layout = figure.layout
    assert layout["yaxis"]["domain"][0] > layout["yaxis2"]["domain"][1] > 0
    assert layout["yaxis2"]["domain"][0] > layout["yaxis3"]["domain"][1]
    assert layout["xaxis"]["anchor"] == "y3"
    for i, traces in enumerate(figure.device_traces):
        assert (traces.base_index, traces.match_index) == (2 * i, 2 * i + 1)


def test_a_trace_without_allocator_records_draws_what_it_drew(dense):
    plain = dataclasses.replace(dense, memory=dense.memory.iloc[:0])
    with_lane, without = _figure(dense), _figure(plain)
    assert not _lane(without)
    assert "yaxis2" not in without.layout and "anchor" not in without.layout["xaxis"]
    assert without.layout["height"] < with_lane.layout["height"]
    assert len(without.data) == len(with_lane.data) - 4  # two curves and two peaks fewer
    assert not memory_items(plain)
    assert "Memory peak" not in panel_snapshot_html(plain, without)
    assert report_data(plain, without)["memory"] == []


def test_the_curve_is_bounded_and_keeps_the_step_shape(dense):
    """The step's records many times over (each copy later in time, as steps of a longer run):
    past MAX_MEMORY_POINTS a device's curve is cut down, keeping its first and last point,
    its highest and lowest, and the peak, and the header says so."""
    memory = own(dense)
    span = int(memory["time_us"].max()) + 1
    copies = MAX_MEMORY_POINTS // 5
    big = pd.concat(
        [memory.assign(time_us=memory["time_us"] + k * span) for k in range(copies)],
        ignore_index=True,
    )
    big.loc[len(memory) * (copies // 2) + 3, "live_bytes"] += 1  # one copy's peak is higher
    figure = _figure(dense, big)
    for device, (curve, marker) in _lane(figure).items():
        records = big[big["device"] == device]
        live = records["live_bytes"].to_numpy()
        assert len(records) > MAX_MEMORY_POINTS or device.endswith("CPU:1")
        assert len(curve["x"]) <= MAX_MEMORY_POINTS + 1
        drawn = curve["y"][1:]
        assert drawn.max() == live.max() == marker["y"][0]
        assert drawn.min() == live.min()
        assert curve["x"][1] == records["time_us"].iloc[0]
        assert curve["x"][-1] == records["time_us"].iloc[-1]
        at = int(np.argmax(live))
        assert marker["x"] == [float(records["time_us"].iloc[at])]
    notes = " ".join(figure.notes(0))
    assert f"at most {MAX_MEMORY_POINTS:,} points per device" in notes
    assert "allocator records" not in " ".join(_figure(dense).notes(0))
    # thin keeps each run's first, lowest, highest and last: at most max_points, in order.
    kept = thin(big["live_bytes"].to_numpy(), 400)
    assert len(kept) <= 400 and np.all(np.diff(kept) > 0)
    assert len(memory_curves(big, dense.devices, 400)[0].time_us) <= 400


def test_the_panel_lists_each_peak_and_a_click_picks_an_op_holding_it(dense):
    panel = show_placement(dense)
    try:
        items = panel.memory_view.items
        peaks = dense.memory_peaks()
        assert [i["device"] for i in items] == list(peaks["device"])
        ops = dense.ops.set_index(["op", "device"])
        for item, row in zip(items, peaks.itertuples(index=False), strict=True):
            assert item["label"] == short_device(row.device)
            assert item["peak_bytes"] == row.peak_bytes
            assert [o["op"] for o in item["ops"]] == list(row.ops)
            for held in item["ops"]:
                assert held["reason"] == ops.loc[(held["op"], row.device), "reason"]
                assert held["how"] == ops.loc[(held["op"], row.device), "how"]
        # CPU:1's largest holder: layer 2's MatMul, pinned there by tf.device.
        held = items[1]["ops"][0]
        assert held["how"] == "explicit"
        panel.memory_view.picked_device = held["device"]
        panel.memory_view.picked_op = held["op"]
        assert panel.table.selected_op == held["op"]
        assert panel.table.selected_device == held["device"]
        assert held["reason"].split(";")[0] in panel.details.value
        assert panel.memory_view.picked_op == ""  # the same op again is a new click
        # The report shows the same list; the snapshot too, with the lane's rows in its SVG.
        assert report_data(dense)["memory"] == items
        snapshot = panel._repr_mimebundle_()["text/html"]
        assert "Memory peak per device" in snapshot
        for item in items:
            assert f"{item['label']} memory" in snapshot and item["peak"] in snapshot
    finally:
        panel.close()


def test_interleaved_records_and_odd_names_give_the_same_curves_and_peaks(dense):
    """The records of both devices shuffled together, one record naming no device, and op names
    with HTML and a newline in them: each curve holds its own device's records in order, its
    peak is that device's, and the hover names each record's op escaped."""
    memory = own(dense).sample(frac=1.0, random_state=0).sort_values("time_us", kind="stable")
    memory = memory.reset_index(drop=True)
    memory["op"] = memory["op"].astype(object)
    memory.loc[0, "op"], memory.loc[1, "op"] = "a<b>&'c\"", "two\nlines"
    memory.loc[2, "device"] = None
    curves = memory_curves(memory, dense.devices)
    assert {c.device for c in curves} == set(dense.memory["device"])
    for curve in curves:
        records = memory[memory["device"] == curve.device]
        assert list(curve.time_us) == list(records["time_us"].astype(float))
        assert curve.peak_bytes == records["live_bytes"].max()
    lane = _lane(_figure(dense, memory))
    for device, (curve, _) in lane.items():
        ops = list(memory.loc[memory["device"] == device, "op"])
        assert list(curve["text"][1:]) == [html.escape(op) for op in ops]
    named = {op for curve, _ in lane.values() for op in curve["text"]}
    assert {"a&lt;b&gt;&amp;&#x27;c&quot;", "two\nlines"} <= named
    assert sum(c.records for c in curves) == len(memory) - 1  # the record naming no device
    # The same with the missing device as pandas' NA (which compares as neither equal nor not).
    with_na = memory.astype({"device": object})
    with_na.loc[2, "device"] = pd.NA
    series, expected = memory_series(with_na), memory_series(memory)
    assert series.devices == expected.devices
    assert [list(rows) for rows in series.rows] == [list(rows) for rows in expected.rows]


def assert_pandas_groups(series, memory):
    """``series`` (``memory_series``) holds exactly pandas' groups of ``memory``'s step rows by
    (device, allocator), in row order."""
    step = memory[memory["kind"] == "temporary"]
    groups = step.groupby(["device", "allocator"], sort=True).indices
    assert list(zip(series.devices, series.allocators, strict=True)) == list(groups)
    for rows, expected in zip(series.rows, groups.values(), strict=True):
        assert list(rows) == list(step.index[expected])


def test_the_series_are_each_device_and_allocators_records_in_order_however_the_runs_fall(dense):
    """``memory_series`` finds runs of each column on their own (a device's and an
    allocator's runs fall apart) and sorts the runs by radix: on the real step's records with
    allocators changing inside a device's runs and some rows persistent, each series is
    exactly pandas' group of those rows, in row order, and the peaks' persistent bytes are the
    persistent rows' sums."""
    rng = np.random.default_rng(0)
    memory = dense.memory.copy()
    memory["allocator"] = rng.choice(["cpu", "mklcpu", "cuda_host_bfc"], len(memory)).astype(object)
    memory["kind"] = np.where(rng.random(len(memory)) < 0.1, "persistent", "temporary")
    series = memory_series(memory)
    assert_pandas_groups(series, memory)
    persistent = memory[memory["kind"] == "persistent"]
    held = persistent.groupby(["device", "allocator", "op"])["bytes"].sum()
    held = held[held > 0].groupby(level=[0, 1]).sum()  # each holder's positive bytes
    peaks = memory_peaks(SimpleNamespace(memory=memory)).set_index(["device", "allocator"])
    assert len(held) and held.to_dict() == peaks.loc[held.index, "persistent_bytes"].to_dict()
    codes = rng.integers(0, 70_000, 5_000)
    for values in (codes % 9, codes, codes - 35_000):  # radix-sorted, or not
        assert list(stable_order(values)) == list(np.argsort(values, kind="stable"))


def test_the_series_of_a_converted_trace_are_read_from_the_conversions_codes(dense):
    """The conversion keeps the step rows' device and allocator codes for ``trace.memory``
    (the lane then compares integers, hashing no name): its series are pandas' groups of the
    step rows, the same as a copy's (no codes: found from the names); a frame whose names no
    longer read as kept (changed in place) is found from its names."""
    memory = dense.memory
    codes = name_codes(memory)
    assert codes is not None and len(codes.step) == len(memory)
    series = memory_series(memory)
    assert_pandas_groups(series, memory)
    copied = memory.copy()
    assert name_codes(copied) is None
    from_names = memory_series(copied)
    assert (from_names.devices, from_names.allocators) == (series.devices, series.allocators)
    assert [list(r) for r in from_names.rows] == [list(r) for r in series.rows]
    assert list(from_names.step) == list(series.step)
    changed = memory.copy()
    keep_name_codes(changed, codes)
    first = int(np.flatnonzero(codes.step)[0])
    changed.loc[first, "allocator"] = "renamed"
    assert name_codes(changed) is None


def test_records_that_name_no_op_say_so_in_the_hover(dense):
    """A file's memory rows may name no op (its ``op`` missing): the curve is drawn all the
    same, each such record's hover says no op was recorded (not another record's op), and one
    device's records all without an op draw too."""
    memory = own(dense).astype({"op": object}).reset_index(drop=True)
    first_device = memory["device"].iloc[0]
    memory.loc[memory.index[:2], "op"] = None
    memory.loc[memory["device"] != first_device, "op"] = pd.NA
    lane = _lane(_figure(dense, memory))
    assert set(lane) == set(memory["device"])
    for device, (curve, _) in lane.items():
        ops = memory.loc[memory["device"] == device, "op"]
        expected = [NO_OP if pd.isna(op) else html.escape(op) for op in ops]
        assert list(curve["text"][1:]) == expected


def test_the_memory_list_reads_the_ops_at_the_rows_the_conversion_kept(dense, monkeypatch):
    """The conversion keeps each ``trace.memory`` row's op row (``NameCodes.op_row``: the op
    of its record, and a persistent row's holder, on that row's device): the memory list reads
    the ops at the peaks and the holders there, with no scan of every op's name, and says the
    same as from the names (a copied frame: nothing kept). A trace whose ``ops`` no longer
    hold those ops at those rows (reordered) is read from the names, the same again."""
    import tfplace_widget._rendering.memory_lane as lane

    codes = name_codes(dense.memory)
    assert codes is not None and codes.op_row is not None
    known = np.flatnonzero(codes.op_row >= 0)
    persistent = np.flatnonzero(~codes.step)
    # the holders' rows too, but for the resource variables (no record: named by the graph)
    unnamed = persistent[dense.memory["variable"].isna().to_numpy()[persistent]]
    assert len(unnamed) and set(unnamed) <= set(known)
    memory, ops = dense.memory, dense.ops
    assert list(ops["op"].array[codes.op_row[known]]) == list(memory["op"].array[known])
    assert list(ops["device"].array[codes.op_row[known]]) == list(memory["device"].array[known])
    from_names = memory_items(dataclasses.replace(dense, memory=dense.memory.copy()))
    assert any(item["persistent"] for item in from_names)

    def scan(*_):
        raise AssertionError("every op's name scanned")

    with monkeypatch.context() as patched:
        patched.setattr(lane, "_op_rows", scan)
        kept = memory_items(dense)
    assert kept == from_names
    reordered = dataclasses.replace(dense, ops=dense.ops.iloc[::-1].reset_index(drop=True))
    assert memory_items(reordered) == from_names


def test_peaks_kept_by_a_version_without_the_holders_rows_are_found_again(dense):
    """A trace pickled with the peaks kept as (memory, peaks), before their holders' rows were
    kept beside them, gives the same memory list."""
    expected = memory_items(dense)
    old = dataclasses.replace(dense)
    old.__dict__["_memory_peaks_cache"] = (old.memory, memory_peaks(dense))
    assert memory_items(old) == expected
