"""The panel's table state (_widgets/panel_state.py) on a made-up trace: no TensorFlow, no widgets."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tfplace_widget import SearchError
from tfplace_widget._rendering.html_parts import PAGE_SIZE
from tfplace_widget._widgets.panel_state import TableState

CPU0, CPU1 = (
    "/job:localhost/replica:0/task:0/device:CPU:0",
    "/job:localhost/replica:0/task:0/device:CPU:1",
)


def made_up_trace(n: int = 3, devices: tuple[str, ...] = (CPU0, CPU1)) -> SimpleNamespace:
    names = ["a/MatMul", "b/Add", "c/MatMul"] if n == 3 else [f"op_{i}" for i in range(n)]
    ops = pd.DataFrame(
        {
            "op": names,
            "type": ["MatMul", "Add", "MatMul"] if n == 3 else ["Add"] * n,
            "device": [devices[i % len(devices)] for i in range(n)],
            "requested_device": [""] * n,
            "how": ["default"] * n,
            "reason": [""] * n,
            "start_us": [float(10 * (n - i)) for i in range(n)],
            "duration_us": [1.0] * n,
            "runs": [1.0] * (n - 1) + [np.nan],
        }
    )
    events = pd.DataFrame(  # the first op ran twice; one event has no ops row
        {
            "op": [names[0], names[0], *names[1:], "_SOURCE"],
            "device": [ops["device"][0], ops["device"][0], *ops["device"][1:], devices[0]],
        }
    )
    return SimpleNamespace(ops=ops, events=events, devices=list(devices))


def apply(state: TableState, text: str = "", **given) -> list[str]:
    options = {"regex": False, "case": False, "op_type": "", "sort_by": "op", "ascending": True}
    state.apply(text, **{**options, **given})
    return list(state.visible["op"])


def test_search_filters_and_sort():
    state = TableState()
    state.show(made_up_trace())
    assert apply(state) == ["a/MatMul", "b/Add", "c/MatMul"]
    assert not state.filtering and state.event_mask is None
    assert apply(state, "matmul") == ["a/MatMul", "c/MatMul"]
    assert state.filtering
    assert state.event_mask.tolist() == [True, True, False, True, False]  # _SOURCE: no row
    assert apply(state, "matmul", case=True) == []
    assert apply(state, op_type="Add") == ["b/Add"]
    assert apply(state, sort_by="start_us") == ["c/MatMul", "b/Add", "a/MatMul"]
    assert apply(state, sort_by="op", ascending=False) == ["c/MatMul", "b/Add", "a/MatMul"]
    assert set(state.sort_orders) == {("op", True), ("start_us", True), ("op", False)}

    state.filter_devices((CPU1,), True)
    assert apply(state) == ["b/Add"] and state.filtering
    state.filter_devices((CPU1,), False)
    state.finding_ops = {"c/MatMul"}
    assert apply(state) == ["c/MatMul"] and state.filtering


def test_a_bad_regex_keeps_the_rows_on_screen():
    state = TableState()
    state.show(made_up_trace())
    apply(state, "b/")
    with pytest.raises(SearchError):
        apply(state, "(", regex=True)
    assert list(state.visible["op"]) == ["b/Add"]


def test_pages_and_their_rows():
    state = TableState()
    state.show(made_up_trace(PAGE_SIZE + 5))
    apply(state, sort_by="start_us")
    rows, colors = state.page_rows(0)
    assert len(rows) == len(colors) == PAGE_SIZE
    last, last_colors = state.page_rows(1)
    assert len(last) == len(last_colors) == 5
    assert last[-1][0] == "op_0" and last[-1][-1] == "1"
    assert rows[0][0] == f"op_{PAGE_SIZE + 4}" and rows[0][-1] == ""  # runs unknown: blank
    assert rows[0][2] != CPU0 and rows[0][2] != CPU1  # devices shown short


def test_a_new_trace_keeps_the_filters_on_the_devices_it_has():
    state = TableState()
    state.show(made_up_trace())
    state.filter_devices((CPU0, CPU1), True)
    state.show(made_up_trace(devices=(CPU0,)))
    assert state.device_filter == {CPU0}
    assert state.sort_orders == {}
    state.clear()
    assert state.ops is None and state.visible.empty


def test_the_timeline_s_drawn_events_alone_are_located():
    """The panel locates the events the timeline draws (at most MAX_BARS of a million): the
    others are never outlined, and are not looked up."""
    state = TableState()
    state.show(made_up_trace())
    state.locate_events(np.array([1, 3, 4]))  # the second run of a/MatMul, c/MatMul, _SOURCE
    assert state.event_row.tolist() == [-1, 0, -1, 2, -1]
    apply(state, "matmul")
    assert state.event_mask.tolist() == [False, True, False, True, False]


def test_event_rows_match_a_merge_on_op_and_device():
    """Each event's first ops row of its op on its device, -1 without one: as the merge on the
    two columns that found them before; also for a few events among many ops (the isin path)."""
    from tfplace_widget._rendering.figure import event_rows

    ops = pd.DataFrame(
        {
            "op": ["x", "y", "x", "y", "x", None],
            "device": [CPU0, CPU0, CPU1, CPU0, CPU1, CPU0],  # y on CPU0 twice, x on CPU1 twice
        }
    )
    events = pd.DataFrame(
        {
            "op": pd.array(["y", "x", "z", "x", "x", None], dtype="str"),
            "device": pd.array([CPU0, CPU1, CPU0, CPU0, "/device:CPU:9", CPU0], dtype="str"),
        }
    )
    keys = ops.assign(_row=np.arange(len(ops))).drop_duplicates(["op", "device"])
    merged = events.merge(keys, how="left", on=["op", "device"])["_row"]
    expected = merged.fillna(-1).astype(np.int64).tolist()
    assert expected == [1, 2, -1, 0, -1, 5]
    assert event_rows(ops, events).tolist() == expected
    many = pd.concat([ops] + [ops.assign(op="w")] * 5, ignore_index=True)  # 36 ops, 1 event
    assert event_rows(many, events.iloc[[1]]).tolist() == [2]
    assert event_rows(many, events.iloc[[2]]).tolist() == [-1]
    assert event_rows(ops.head(0), events).tolist() == [-1] * 6


def test_a_broad_search_s_pages_are_those_of_a_full_sort():
    """A keystroke that keeps most rows draws one page: the page, the count, the page of a
    picked row and ``visible`` (made when asked for) are those of the kept rows fully sorted."""
    n = 6 * PAGE_SIZE + 7
    trace = made_up_trace(n)
    trace.ops["start_us"] = [float(i % 4) for i in range(n)]  # ties: the sort is stable
    state = TableState()
    state.show(trace)
    kept = state.apply(
        "1", regex=False, case=False, op_type="", sort_by="start_us", ascending=False
    )
    ops = trace.ops
    expected = ops[ops["op"].str.contains("1")].sort_values(
        "start_us", ascending=False, kind="stable"
    )
    assert state._visible is None  # not made by the keystroke
    assert (
        len(kept) == len(expected)
        and kept.tolist() == ops.index.get_indexer(expected.index).tolist()
    )
    for page in range(len(expected) // PAGE_SIZE + 1):
        rows, _ = state.page_rows(page)
        assert [row[0] for row in rows] == list(
            expected["op"][page * PAGE_SIZE : (page + 1) * PAGE_SIZE]
        )
    last = expected.iloc[-1]
    assert state.page_of(last["op"], last["device"]) == (len(expected) - 1) // PAGE_SIZE
    assert len(expected) // PAGE_SIZE > 1 and len(expected) < n  # pages of a subset
    assert state.page_of("op_8", CPU0) is None  # not kept
    pd.testing.assert_frame_equal(state.visible, expected)
