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
