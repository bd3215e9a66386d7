"""The panel across a cluster (issue 15): chips and lanes grouped per task, each group
collapsible, and the header's count of transfers between tasks; on a real local cluster trace."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from test_cluster import setter_model

from tfplace_widget._model.devices import short_device, task_of
from tfplace_widget._rendering.figure import FOLDED_LANE
from tfplace_widget._widgets.panel import PlacementPanel

TASKS = ["/job:ps/task:0", "/job:ps/task:1", "/job:worker/task:0", "/job:worker/task:1"]


@pytest.fixture(scope="module")
def cluster_trace(trace_placement: Any) -> Any:
    """``setter_model`` on two ps and two worker tasks of two CPUs each."""
    return trace_placement(
        setter_model, mode="graph", cluster="local:worker=2,ps=2", device_count={"CPU": 2}
    )


@pytest.fixture
def panel(cluster_trace: Any) -> Any:
    made = PlacementPanel(cluster_trace)
    yield made
    made.close()


def test_chips_are_grouped_per_task_with_its_counts(panel, cluster_trace):
    assert panel.chips.grouped
    assert list(panel.chips.task_chip_of) == TASKS
    ops = cluster_trace.ops
    for task, chip in panel.chips.task_chip_of.items():
        mine = [d for d in cluster_trace.devices if task_of(d) == task]
        assert len(mine) == 2
        count = int(ops["device"].isin(mine).sum())
        assert chip.description.startswith(f"{task} · 2 devices · {count} ops · ")
    # Inside its group a device chip needs no task; its tooltip has the full name.
    chip = panel.chips.chip_of[cluster_trace.devices[0]]
    assert chip.description.startswith("CPU:0 · ")
    assert chip.tooltip.startswith("/job:ps/replica:0/task:0/device:CPU:0")
    # The table's device column does name the task.
    assert "/job:ps/task:0/CPU:0" in {row[2] for row in panel.table.rows}


def test_a_task_chip_shows_only_the_ops_of_its_devices(panel, cluster_trace):
    panel.chips.task_chip_of["/job:worker/task:1"].value = True
    visible = panel.visible_ops
    assert len(visible) and {task_of(d) for d in visible["device"]} == {"/job:worker/task:1"}
    expected = cluster_trace.ops["device"].map(task_of) == "/job:worker/task:1"
    assert len(visible) == int(expected.sum())
    # Its device chips show pressed; unpressing one of them unpresses the task chip.
    devices = [d for d in cluster_trace.devices if task_of(d) == "/job:worker/task:1"]
    assert all(panel.chips.chip_of[d].value for d in devices)
    panel.chips.chip_of[devices[1]].value = False
    assert not panel.chips.task_chip_of["/job:worker/task:1"].value
    assert set(panel.visible_ops["device"]) <= {devices[0]}


def test_folding_a_task_draws_its_lanes_as_one_and_keeps_search_and_pick(panel, cluster_trace):
    lanes_before = list(panel._timeline.lanes)
    ps0 = [pair for pair in lanes_before if task_of(pair[0]) == "/job:ps/task:0"]
    assert ps0
    panel.search.value = "ReadVariableOp"
    panel.table.selected_op = "w"
    page_rows = list(panel.table.rows)
    outlined = panel._timeline.highlighted_ops()
    assert outlined and all("ReadVariableOp" in op for op in outlined)

    panel.chips.fold_of["/job:ps/task:0"].value = True
    timeline = panel._timeline
    assert len(timeline.lanes) == len(lanes_before) - len(ps0) + 1
    folded_y = timeline.lanes.index(("/job:ps/task:0", FOLDED_LANE))
    on_ps0 = (timeline.events["device"].map(task_of) == "/job:ps/task:0").to_numpy()
    assert on_ps0.any() and np.all(timeline.lane_y[on_ps0] == folded_y)
    assert np.all(timeline.lane_y[~on_ps0] != folded_y)
    ticks = timeline.layout["yaxis"]["ticktext"]
    assert ticks[folded_y] == "/job:ps/task:0 · 2 devices"
    # The group's chips are hidden; search, outlines, pick and table page stay as they were.
    group = panel.chips.fold_of["/job:ps/task:0"]
    assert group.icon == "caret-right"
    assert timeline.highlighted_ops() == outlined
    assert len(timeline._selected_rows) and set(timeline._ops[timeline._selected_rows]) == {"w"}
    assert panel.table.rows == page_rows and not panel.error

    # A re-run keeps the task folded; opening it brings its lanes back.
    panel.show_trace(cluster_trace)
    assert ("/job:ps/task:0", FOLDED_LANE) in panel._timeline.lanes
    panel.chips.fold_of["/job:ps/task:0"].value = False
    assert panel._timeline.lanes == lanes_before


def test_timeline_bands_group_each_tasks_lanes(panel):
    lanes = panel._timeline.lanes
    bands = panel._timeline.layout["shapes"]
    tasks = list(dict.fromkeys(task_of(d) for d, _ in lanes))
    assert len(bands) == (len(tasks) + 1) // 2  # every other task is shaded
    first = [i for i, (d, _) in enumerate(lanes) if task_of(d) == tasks[0]]
    assert (bands[0]["y0"], bands[0]["y1"]) == (first[0] - 0.5, first[-1] + 0.5)


def test_header_counts_transfers_between_tasks_and_their_bytes(panel, cluster_trace):
    crossing = cluster_trace.transfers[cluster_trace.transfers["cross_task"]]
    assert len(crossing) >= 4
    moved = int(crossing["bytes"].sum())
    header = panel.header.value
    assert f"<b class='tfplace-cross-task'>{len(crossing)}</b> between tasks" in header
    assert f"of {len(TASKS)} tasks" in header
    assert f"({_format(moved)} over the network)" in header


def test_a_picked_ops_transfers_say_when_they_cross_tasks(panel, cluster_trace):
    crossing = cluster_trace.transfers[cluster_trace.transfers["cross_task"]]
    tensor = crossing["tensor"].iloc[0]
    panel.table.selected_op = tensor.rsplit(":", 1)[0]
    assert "between tasks, over the network" in panel.details.value


def test_one_machine_keeps_one_row_of_chips(seed_cpu):
    panel = PlacementPanel(seed_cpu)
    try:
        assert not panel.chips.grouped and not panel._timeline.layout["shapes"]
        assert [c.description.split(" ·")[0] for c in panel.chips.children] == [
            short_device(d) for d in seed_cpu.devices
        ]
        assert "between tasks" not in panel.header.value
    finally:
        panel.close()


def _format(size: int) -> str:
    from tfplace_widget._analyses.summary import format_bytes

    return format_bytes(size)


def test_rerun_stays_on_the_cluster_with_cpus_per_task(cluster_trace):
    panel = PlacementPanel(
        cluster_trace,
        builder=setter_model,
        options={"mode": "graph", "cluster": "local:worker=2,ps=2", "device_count": {"CPU": 2}},
    )
    try:
        assert (panel.cpus.description, panel.cpus.value) == ("CPUs per task", 2)
        panel.chips.fold_of["/job:worker/task:1"].value = True
        panel.cpus.value = 1
        panel.run()
        assert not panel.error, panel.error
        assert len(panel.trace.devices) == 4  # one CPU on each of the four tasks
        assert list(panel.chips.task_chip_of) == TASKS
        assert panel.chips.folded == {"/job:worker/task:1"}
        assert ("/job:worker/task:1", FOLDED_LANE) in panel._timeline.lanes
    finally:
        panel.close()


def test_as_on_machines_with_a_gpu_each_task_gets_one(panel, cluster_trace):
    panel.gpus.value = 1
    panel.as_gpus.value = True
    assert not panel.error and panel.trace.predicted
    gpus = [d for d in panel.trace.devices if "device:GPU:" in d]
    assert sorted(map(task_of, gpus)) == TASKS  # one GPU on each task's machine
    assert list(panel.chips.task_chip_of) == TASKS
    assert "between tasks" in panel.header.value  # the predicted copies cross tasks too
