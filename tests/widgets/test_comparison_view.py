"""show_comparison(a, b): two real traces drawn one above the other (issue 13's views)."""

from __future__ import annotations

import weakref
from typing import Any

import pytest
from helpers import CPU0, CPU1, GPU_TRACES, TWO_CPUS

from tfplace_widget import (
    SearchError,
    show_comparison,  # the package _export as export
)
from tfplace_widget._analyses.compare import compare
from tfplace_widget._widgets.comparison import ComparisonView


@pytest.fixture(scope="module")
def before(trace_placement: Any, seed_builders: dict) -> Any:
    """The seed's inputs_none: C asked for CPU:1, its inputs on CPU:0 (three copies)."""
    return trace_placement(seed_builders["inputs_none"], device_count=TWO_CPUS)


@pytest.fixture(scope="module")
def after(trace_placement: Any, seed_builders: dict) -> Any:
    """The same graph with C moved next to its inputs by overrides= (no copies)."""
    return trace_placement(
        seed_builders["inputs_none"], device_count=TWO_CPUS, overrides={"C": "/cpu:0"}
    )


@pytest.fixture
def view(before: Any, after: Any) -> ComparisonView:
    return show_comparison(before, after, labels=("C on CPU:1", "C moved"))


def _lane_of(view: ComparisonView, side: int, op: str) -> set[str]:
    timeline = view._timelines[side]
    rows = (timeline.events["op"] == op).to_numpy()
    return {timeline.lanes[int(y)][0] for y in timeline.lane_y[rows]}


def test_both_timelines_share_lanes_and_time_axis_and_outline_the_moved_op(view, before, after):
    a, b = (w.layout_dict for w in view.timelines)
    assert a["yaxis"]["ticktext"] == b["yaxis"]["ticktext"] == ["CPU:0", "CPU:1"]
    assert a["xaxis"]["range"] == b["xaxis"]["range"]
    assert a["yaxis"]["range"] == b["yaxis"]["range"] == [1.5, -0.5]  # b's empty CPU:1 too
    ends = [float((t.events["start_us"] + t.events["duration_us"]).max()) for t in (before, after)]
    assert a["xaxis"]["range"][1] == pytest.approx(max(ends) * 1.02)
    # C's bar changes lanes between the two, and is outlined in both.
    assert _lane_of(view, 0, "C") == {CPU1} and _lane_of(view, 1, "C") == {CPU0}
    assert view.highlighted_ops() == [{"C"}, {"C"}]
    assert "the moved ops" in view.status.value
    # The diff table: moved first, then the copies that are gone.
    assert view.table.rows[0][:5] == ["C", "AddV2", "moved", "CPU:1", "CPU:0"]
    statuses = {row[2] for row in view.table.rows}
    assert {"moved", "only in a"} <= statuses
    assert "1 op moved: C (CPU:1 -&gt; CPU:0)." in view.summary.value
    assert "3 transfers removed" in view.summary.value
    assert "<b>a: C on CPU:1</b>" in view.titles[0].value
    assert "3 transfers" in view.titles[0].value and "0 transfers" in view.titles[1].value


def test_search_and_status_filter_narrow_the_table_and_the_outlines(view):
    view.search.value = "b"
    kept = set(view.visible_ops["op"])
    assert kept and all("b" in op.lower() for op in kept)
    assert "B" in kept
    outlined = view.highlighted_ops()
    assert "B" in outlined[0] and outlined[0] <= kept and "C" not in outlined[1]
    view.search.value = ""
    view.status_filter.value = "only_a"
    rows = view.visible_ops
    assert len(rows) and set(rows["status"]) == {"only_a"}
    assert {"_Send", "_Recv"} <= set(rows["type"])  # the copies to and from CPU:1 are gone
    assert view.highlighted_ops()[1] == set()  # only in a: nothing of them in b
    label = dict((v, k) for k, v in view.status_filter.options)["only_a"]
    assert label == f"only in a ({len(rows)})"
    view.status_filter.value = ""
    view.regex.value = True
    view.search.value = "(("  # half-typed regex: a message, the rows stay
    assert "Invalid regular expression" in view.status.value
    assert len(view.visible_ops) == len(view.diff.ops)
    with pytest.raises(SearchError):
        view.filter("((", regex=True)


def test_picking_an_op_selects_it_in_both_timelines(view):
    timeline = view._timelines[0]
    traces = next(t for t in timeline._device_traces if t.device == CPU1)
    point = [i for i, row in enumerate(traces.rows) if timeline._ops[row] == "C"][0]
    view.timelines[0]._handle_message(
        view.timelines[0], {"event": "click", "curve": traces.base_index, "point": point}, []
    )
    assert view.table.selected_op == "C"
    assert "C on CPU:1: <b" in view.details.value and "CPU:1</b> (explicit)" in view.details.value
    for side in view._timelines:
        assert len(side.widget.drawn()[side._selected_index]["y"]) == 1


def test_sort_by_a_column(view):
    view.table.sort_by = "op"
    view.table.sort_ascending = False
    names = [row[0] for row in view.table.rows]
    assert names == sorted(names, reverse=True)


def test_functions_and_files_are_traced_or_loaded(before, seed_builders):
    # A function is traced with the default options: one CPU, so C's /cpu:1 is soft-moved.
    view = show_comparison(before, seed_builders["inputs_none"])
    assert list(view.diff.moved["op"]) == ["C"]
    assert view.diff.b.ops.loc[view.diff.b.ops["op"] == "C", "how"].item() == "soft"
    gpu = show_comparison(before, str(GPU_TRACES / "riptide" / "timeline.ctf.json"))
    ticks = gpu.timelines[0].layout_dict["yaxis"]["ticktext"]
    assert ticks == gpu.timelines[1].layout_dict["yaxis"]["ticktext"]
    assert "GPU:0" in ticks and "CPU:1" in ticks  # the lanes of both
    with pytest.raises(TypeError, match="not int"):
        show_comparison(before, 42)
    with pytest.raises(TypeError, match="labels must be a tuple of two strings"):
        show_comparison(before, before, labels=("one",))


def test_a_predicted_trace_compares_too(before):
    from tfplace_widget import predict_placement

    view = ComparisonView(compare(before, predict_placement(before, gpus=1)))
    assert "predicted, not run" in view.titles[1].value
    # A prediction ran nothing: b's lanes are there (GPU:0 too), with no bars on them.
    ticks = view.timelines[1].layout_dict["yaxis"]["ticktext"]
    assert ticks == view.timelines[0].layout_dict["yaxis"]["ticktext"] and "GPU:0" in ticks
    assert "no bars: nothing ran" in view.titles[1].value
    assert {"A", "B"} <= set(view.diff.moved["op"])  # to GPU:0; C keeps its explicit CPU:1
    assert {"A", "B"} <= view.highlighted_ops()[0] and view.highlighted_ops()[1] == set()


def test_close_closes_every_widget_and_lets_go_of_the_traces(trace_placement, seed_builders):
    a = trace_placement(seed_builders["inputs_cpu"], device_count=TWO_CPUS)
    b = trace_placement(seed_builders["inputs_none"], device_count=TWO_CPUS)
    view = show_comparison(a, b)
    from tfplace_widget._widgets.tree import widget_tree

    tree = widget_tree(view)
    refs = weakref.ref(a), weakref.ref(b)
    del a, b
    view.close()
    assert all(w.comm is None for w in tree)
    import gc

    gc.collect()
    assert refs[0]() is None and refs[1]() is None
    view.close()  # twice is harmless
