"""The panel, driven as a user would: set widget values, assert on what the panel shows."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf
from helpers import GPU_TRACES, run_python

from tfplace_widget import TraceError, show_placement
from tfplace_widget._model.columns import SEVERITIES
from tfplace_widget._rendering.colors import color_class, device_color
from tfplace_widget._widgets.panel import PAGE_SIZE, PlacementPanel

SEED_N = 1000
GPU_TRACE = str(GPU_TRACES / "riptide" / "timeline.ctf.json")


def inputs_none():
    a = tf.ones((SEED_N,), name="A")
    b = tf.ones((SEED_N,), name="B")
    with tf.device("/cpu:1"):
        c = tf.add(a, b, name="C")
    return c


def many_ops(count: int = 180):
    """A chain of small ops spread over two CPUs: several pages of table rows."""
    x = tf.constant(1.0, name="seed")
    for i in range(count):
        with tf.device(f"/cpu:{i % 2}"):
            x = tf.add(x, 1.0, name=f"step_{i:03d}")
    return x


@pytest.fixture(scope="module")
def seed_trace():
    return show_placement(inputs_none, device_count={"CPU": 2}).trace


@pytest.fixture
def panel(seed_trace):
    """A fresh panel over the shared seed trace, re-runnable with the seed builder."""
    return PlacementPanel(seed_trace, builder=inputs_none, options={"device_count": {"CPU": 2}})


def test_panel_shows_every_op_and_the_header_counts(panel, seed_trace):
    assert len(panel.visible_ops) == len(seed_trace.ops)
    assert f"of {len(seed_trace.ops)} ops" in panel.status.value
    header = panel.header.value
    assert "<b>1</b> explicit" in header  # C on CPU:1
    assert "cross-device" in header and "<b>3</b> cross-device" in header  # A, B in; C out
    chips = [c.description for c in panel.chips.children]
    assert chips[0].startswith("CPU:0") and chips[1].startswith("CPU:1")
    assert color_class(device_color("/cpu:1")) in panel.chips.children[1]._dom_classes


def test_typing_an_op_name_narrows_table_and_highlights_timeline(panel):
    panel.search.value = "c"  # case-insensitive substring
    names = set(panel.visible_ops["op"])
    assert "C" in names and "A/Const" in names and "B" not in names
    assert f"showing <b>{len(panel.visible_ops)}</b>" in panel.status.value
    assert {row[0] for row in panel.table.rows} == names
    highlighted = panel._timeline.highlighted_ops()
    assert "C" in highlighted and highlighted <= names
    drawn = panel.timeline.drawn()
    dimmed = [drawn[t.base_index]["opacity"] for t in panel._timeline._device_traces]
    assert dimmed == [pytest.approx(0.25)] * len(dimmed)
    panel.search.value = ""
    assert len(panel.visible_ops) == len(panel.trace.ops)
    assert not panel._timeline.highlighted_ops()


def test_glob_regex_and_case(panel):
    panel.search.value = "*/Const"
    assert set(panel.visible_ops["op"]) == {"A/Const", "B/Const"}
    panel.case_sensitive.value = True
    panel.search.value = "c"
    assert "C" not in set(panel.visible_ops["op"])
    panel.case_sensitive.value = False
    panel.regex.value = True
    panel.search.value = "^[AB]$"
    assert sorted(panel.visible_ops["op"]) == ["A", "B"]


def test_bad_regex_is_a_message_and_keeps_the_last_rows(panel):
    panel.regex.value = True
    panel.search.value = "^C$"
    before = list(panel.visible_ops["op"])
    panel.search.value = "(("  # half-typed
    assert "Invalid regular expression" in panel.message.value
    assert list(panel.visible_ops["op"]) == before
    panel.search.value = "^A$"
    assert panel.message.value == ""
    assert list(panel.visible_ops["op"]) == ["A"]


def test_device_chip_and_type_filters(panel):
    cpu1 = panel.chips.children[1]
    cpu1.value = True
    assert set(panel.visible_ops["device"]) == {"/job:localhost/replica:0/task:0/device:CPU:1"}
    cpu1.value = False
    panel.type_filter.value = "Fill"
    assert sorted(panel.visible_ops["op"]) == ["A", "B"]


def test_sort_by_header_and_pick_a_row(panel):
    panel.table.sort_by = "duration_us"
    panel.table.sort_ascending = False
    durations = panel.visible_ops["duration_us"].dropna().to_numpy()
    assert np.all(durations[:-1] >= durations[1:])
    panel.table.selected_op = "C"
    details = panel.details.value
    assert "<code>C</code>" in details and "explicit" in details
    assert "C:0" in details  # its output goes back to the client on CPU:0
    selected = panel.timeline.drawn()[panel._timeline._selected_index]
    assert len(selected["y"]) == 1  # C ran once: one bar outlined


def test_clicking_a_timeline_bar_selects_its_row(panel):
    timeline = panel._timeline
    traces = timeline._device_traces[1]  # CPU:1
    point = [i for i, row in enumerate(traces.rows) if timeline._ops[row] == "C"][0]
    # What the browser sends when that bar is clicked (plotly.js's curveNumber, pointNumber).
    panel.timeline._handle_message(
        panel.timeline, {"event": "click", "curve": traces.base_index, "point": point}, []
    )
    assert panel.table.selected_op == "C"


def test_paging_sends_only_the_rows_on_screen():
    panel = show_placement(many_ops, device_count={"CPU": 2})
    total = len(panel.trace.ops)
    assert total > 2 * PAGE_SIZE
    assert len(panel.table.rows) == PAGE_SIZE and panel.table.total == total
    panel.table.page = 2
    assert panel.table.rows[0][0] == panel.visible_ops["op"].iloc[2 * PAGE_SIZE]
    panel.search.value = "STEP_1"
    expected = sum("step_1" in name for name in panel.trace.ops["op"])  # incl. _Send/_Recv
    assert expected > 100  # the 100 adds step_100..199 and the copies between devices
    assert panel.table.page == 0 and panel.table.total == expected


def test_rerun_with_other_settings_and_a_failed_rerun_keeps_the_last_result(panel):
    panel.cpus.value = 3
    trace = panel.run()
    assert trace is not None and len(panel.trace.devices) == 3
    good = panel.trace
    panel.device_scope.value = "/gpu:0"
    panel.soft_placement.value = False
    assert panel.run() is None
    assert "Cannot place op" in panel.message.value and "CPU:0, CPU:1, CPU:2" in panel.message.value
    assert panel.trace is good and len(panel.visible_ops) == len(good.ops)
    panel.soft_placement.value = True
    assert panel.run() is not None
    assert panel.message.value == ""
    assert set(panel.trace.ops.loc[panel.trace.ops["op"] == "C", "how"]) == {"explicit"}
    soft = panel.trace.ops[panel.trace.ops["op"] == "A"]
    assert list(soft["how"]) == ["soft"]  # the outer /gpu:0 scope could not be met


def test_log_section_is_collapsed_and_searchable(panel):
    assert panel.log_section.selected_index is None
    assert "placer.cc" in panel.trace.log
    panel.log_section.selected_index = 0
    panel.search.value = "AddV2"
    assert "C: (AddV2)" in panel.log_view.value
    assert "A: (Fill)" not in panel.log_view.value


def test_show_placement_dispatch_and_bad_options(tmp_path, seed_trace):
    assert show_placement(seed_trace).trace is seed_trace
    assert show_placement(GPU_TRACE).trace.devices[0].endswith("GPU:0")
    with pytest.raises(TypeError, match="Did you mean 'device_count'"):
        show_placement(inputs_none, device_cont={"CPU": 2})
    with pytest.raises(ValueError, match="only apply when tracing a function"):
        show_placement(seed_trace, steps=2)
    with pytest.raises(TypeError, match="not int"):
        show_placement(42)
    with pytest.raises(TraceError):
        show_placement(str(tmp_path / "missing.json"))


def test_loaded_trace_cannot_rerun_and_says_so(seed_trace):
    panel = show_placement(seed_trace)
    assert panel.rerun.disabled
    assert panel.run() is None
    assert "no graph builder" in panel.message.value


def test_hostile_names_and_errors_are_escaped_everywhere():
    state = {"fail": False}

    def hostile():
        if state["fail"]:
            raise RuntimeError("<img src=x onerror=alert(1)>")
        with tf.name_scope("x>y"):  # '>' is the one HTML character TF allows in names
            return tf.constant(1.0, name="c")

    panel = show_placement(hostile)
    name = next(o for o in panel.trace.ops["op"] if ">" in o)
    panel.table.selected_op = name
    assert "x&gt;y" in panel.details.value and "x>y" not in panel.details.value
    bars = [t for t in panel.timeline.drawn() if t["type"] == "bar"]
    hover = json.dumps([list(t["hovertext"]) for t in bars])
    assert "x&gt;y" in hover and "x>y" not in hover
    state["fail"] = True
    assert panel.run() is None
    assert "&lt;img src=x onerror=alert(1)&gt;" in panel.message.value
    assert "<img" not in panel.message.value


def test_gpu_trace_lanes_in_the_timeline():
    panel = show_placement(GPU_TRACE)
    ticks = list(panel.timeline.layout_dict["yaxis"]["ticktext"])
    # plotly.js 3 ignores a title given as a plain string
    assert panel.timeline.layout_dict["xaxis"]["title"] == {
        "text": "time since the trace's first op started (µs)"
    }
    assert ticks[0] == "GPU:0" and "GPU:0 stream:20" in ticks and "GPU:0 memcpy" in ticks
    assert "CPU:0" in ticks
    panel.search.value = "MatMul"
    assert "MatMul" in panel._timeline.highlighted_ops()


# -- re-run options (issue 11) ---------------------------------------------------------------
CPU = "/job:localhost/replica:0/task:0/device:CPU:{}"


def pinned_to_cpu2():
    """D asks for CPU:2: explicit with three CPUs or more, moved by soft placement with fewer."""
    x = tf.ones((8,), name="X")
    with tf.device("/cpu:2"):
        return tf.add(x, x, name="D")


def test_untouched_rerun_uses_the_panel_device_count_in_any_key_case(seed_trace):
    # Device types are not case-sensitive: {"cpu": 3} asks for three CPUs, whatever the trace
    # on screen (here the two-CPU seed) has.
    panel = PlacementPanel(seed_trace, builder=pinned_to_cpu2, options={"device_count": {"cpu": 3}})
    assert panel.cpus.value == 3
    trace = panel.run()
    assert trace is not None, panel.message.value
    assert len(trace.devices) == 3
    assert trace.device_of("D") == CPU.format(2)  # not moved to CPU:0 by a count of 2
    assert op_how(trace, "D") == "explicit"


def test_a_device_count_above_16_is_shown_and_rerun_as_given():
    panel = show_placement(pinned_to_cpu2, device_count={"CPU": 24})
    assert len(panel.trace.devices) == 24
    assert panel.cpus.value == 24  # not clamped to 16
    trace = panel.run()
    assert trace is not None, panel.message.value
    assert len(trace.devices) == 24


def test_conflicting_device_count_keys_are_an_error():
    with pytest.raises(ValueError, match="CPU twice with different counts"):
        show_placement(pinned_to_cpu2, device_count={"cpu": 3, "CPU": 1})
    with pytest.raises(ValueError, match="CPU twice"):
        PlacementPanel(  # the panel's own options too
            show_placement(inputs_none, device_count={"CPU": 2}).trace,
            builder=inputs_none,
            options={"device_count": {"CPU": 2, "Cpu": 4}},
        )
    panel = show_placement(pinned_to_cpu2, device_count={"cpu": 3, "CPU": 3})  # one count
    assert len(panel.trace.devices) == 3 and panel.cpus.value == 3


def test_normalize_device_count():
    from tfplace_widget._tracing.options import normalize_device_count

    assert normalize_device_count({"cpu": 3, "gpu": 0}) == {"CPU": 3, "GPU": 0}
    assert normalize_device_count({"CPU": 2, "cpu": 2}) == {"CPU": 2}
    assert normalize_device_count({}) == {}
    with pytest.raises(ValueError, match="'cpu': 3 and 'CPU': 1"):
        normalize_device_count({"cpu": 3, "CPU": 1})
    with pytest.raises(TypeError, match="must be a dict"):
        normalize_device_count([("CPU", 2)])
    with pytest.raises(ValueError, match="device types like 'CPU'"):
        normalize_device_count({1: 2})


def test_cpu_count_is_passed_back_only_when_the_control_changes(seed_trace):
    # What a TF2 trace needs (its runtime's CPU count cannot change): without a device_count
    # in the options, the control shows the trace's count and an untouched re-run passes none.
    panel = PlacementPanel(seed_trace, builder=inputs_none, options={})
    assert panel.cpus.value == 2
    assert "device_count" not in panel._options_from_controls()
    panel.cpus.value = 3
    assert panel._options_from_controls()["device_count"] == {"CPU": 3}
    panel.cpus.value = 2
    assert "device_count" not in panel._options_from_controls()
    # With one in the options, an untouched control passes those options on as they are.
    panel = PlacementPanel(seed_trace, builder=inputs_none, options={"device_count": {"CPU": 2}})
    assert panel._options_from_controls()["device_count"] == {"CPU": 2}
    panel.cpus.value = 3
    assert panel._options_from_controls()["device_count"] == {"CPU": 3}


def op_how(trace, name: str) -> str:
    return str(trace.ops.loc[trace.ops["op"] == name, "how"].item())


# -- colours (issue 11) ----------------------------------------------------------------------
def test_every_chip_has_a_colour_of_its_own_and_a_style_rule_for_it(seed_trace):
    many = dataclasses.replace(seed_trace, devices=[CPU.format(i) for i in range(40)])
    panel = PlacementPanel(many)
    classes = [
        next(c for c in chip._dom_classes if c.startswith("tfplace-color-"))
        for chip in panel.chips.children
    ]
    assert len(classes) == 40 and len(set(classes)) == 40  # no two devices share a colour
    assert all(f".{c}.jupyter-button" in panel.table._css for c in classes)  # each is painted


# -- device_of (issue 11) --------------------------------------------------------------------
def test_device_of_a_name_on_several_devices_raises_naming_them():
    trace = show_placement(GPU_TRACE).trace
    sources = set(trace.ops.loc[trace.ops["op"] == "_SOURCE", "device"])
    assert len(sources) == 2  # one per device partition
    with pytest.raises(ValueError, match="is on 2 devices") as info:
        trace.device_of("_SOURCE")
    assert all(device in str(info.value) for device in sources)
    assert trace.device_of("MatMul").endswith("GPU:0")  # a name on one device still answers


# -- one definition of each helper (issue 11) ------------------------------------------------
def test_shared_helpers_and_how_values_are_defined_once(panel):
    from tfplace_widget._analyses import findings
    from tfplace_widget._explain import run as reasons
    from tfplace_widget._model import gc_pause, records
    from tfplace_widget._sources import chrome, frames, run_metadata
    from tfplace_widget._tfadapter import graphfacts
    from tfplace_widget._tracing import function as function_tracer
    from tfplace_widget._widgets import panel as panel_module

    assert not hasattr(reasons, "canonical_or_empty")  # unused
    assert frames.HOW_VALUES is reasons.HOW_VALUES is panel_module.HOW_VALUES
    assert list(panel.trace.ops["how"].cat.categories) == list(reasons.HOW_VALUES)
    assert not hasattr(frames, "_HOW_CATEGORIES")
    assert not hasattr(graphfacts, "_producer")  # sources.records.producer(s) is the one
    assert graphfacts.producers is records.producers
    assert gc_pause.paused_gc.__module__ == "tfplace_widget._model.gc_pause"
    for module in (run_metadata, chrome, function_tracer, graphfacts, findings):
        assert module.paused_gc is gc_pause.paused_gc, module.__name__


# -- findings (issue 12) -----------------------------------------------------------------------
def classic_builder():
    from test_findings import classic_step

    # an int32 MatMul of milliseconds, most of the step: its findings stay material when the
    # machine's load stretches another op of the step by tens of milliseconds (at 2 x 512 it
    # took 3% of a step stretched to 19 ms here)
    return classic_step(tf, width=512, batch=64)


@pytest.fixture(scope="module")
def classic_panel():
    return show_placement(classic_builder, device_count={"CPU": 2})


def test_findings_sit_above_the_table_worst_first(classic_panel):
    panel = classic_panel
    children = list(panel.children)
    assert children.index(panel.findings_view) < children.index(panel.table)
    items = panel.findings_view.items
    findings = panel.trace.findings
    assert [i["kind"] for i in items] == list(findings["kind"])
    assert [i["count"] for i in items] == [len(ops) for ops in findings["ops"]]
    # worst first within the measured and the predicted group: which findings are material
    # rests on the step's measured times (a loaded machine once left only an info one), their
    # order does not
    assert items and panel.findings_view.expanded
    flags = [i["predicted"] for i in items]
    assert flags == sorted(flags), items  # the measured ones, then the predicted ones
    for predicted in (False, True):
        ranks = [SEVERITIES.index(i["severity"]) for i in items if i["predicted"] == predicted]
        assert ranks == sorted(ranks), items
    worst = min((i["severity"] for i in items), key=SEVERITIES.index)
    assert panel.findings_view.counts.startswith(f"{(findings['severity'] == worst).sum()} {worst}")


def test_clicking_a_finding_filters_table_and_timeline_to_its_ops(classic_panel):
    panel = classic_panel
    findings = panel.trace.findings
    index = next(i for i, row in enumerate(findings.itertuples()) if "int_matmul" in row.ops)
    expected = set(findings["ops"].iloc[index])
    panel.findings_view.selected = index  # what the browser sends on a click
    assert set(panel.visible_ops["op"]) == expected & set(panel.trace.ops["op"])
    assert {row[0] for row in panel.table.rows} == set(panel.visible_ops["op"])
    highlighted = panel._timeline.highlighted_ops()
    assert "int_matmul" in highlighted and highlighted <= expected
    assert findings["kind"].iloc[index] in panel.status.value
    panel.search.value = "int"  # the search narrows within the finding's ops
    assert set(panel.visible_ops["op"]) == {op for op in expected if "int" in op}
    panel.search.value = ""
    panel.findings_view.selected = -1  # clicked again: every op
    assert len(panel.visible_ops) == len(panel.trace.ops)
    assert not panel._timeline.highlighted_ops()


def test_no_findings_collapse_to_their_count():
    def one_op():
        return tf.constant(1.0, name="one")

    panel = show_placement(one_op)
    assert panel.trace.findings.empty
    assert panel.findings_view.items == [] and not panel.findings_view.expanded
    assert len(panel.visible_ops) == len(panel.trace.ops)


def test_a_rerun_shows_the_new_findings_and_drops_the_filter(classic_panel):
    panel = PlacementPanel(
        classic_panel.trace, builder=inputs_none, options={"device_count": {"CPU": 2}}
    )
    panel.findings_view.selected = 0
    assert len(panel.visible_ops) < len(panel.trace.ops)
    assert panel.run() is not None
    assert panel.findings_view.selected == -1
    assert len(panel.visible_ops) == len(panel.trace.ops)
    assert [i["kind"] for i in panel.findings_view.items] == list(panel.trace.findings["kind"])


def test_findings_that_fail_are_a_message_not_a_broken_panel(seed_trace, monkeypatch):
    import tfplace_widget._analyses.findings as findings_module

    def broken(trace):
        raise RuntimeError("boom")

    monkeypatch.setattr(findings_module, "find_findings", broken)
    trace = dataclasses.replace(seed_trace)  # a fresh trace: no cached findings
    panel = PlacementPanel(trace)
    assert "Findings could not be computed: RuntimeError: boom" in panel.message.value
    assert panel.findings_view.items == []
    assert len(panel.visible_ops) == len(trace.ops)


def test_a_predicted_trace_says_so_in_the_header(classic_panel):
    from tfplace_widget import predict_placement

    panel = PlacementPanel(predict_placement(classic_panel.trace, gpus=1))
    assert "predicted, not run" in panel.header.value
    assert "predicted, not run" not in classic_panel.header.value
    # no times to draw: the header says why the timeline is empty (issue 24)
    assert panel.trace.events.empty
    assert "a prediction places the ops without running them" in panel.header.value
    assert "a prediction places the ops" not in classic_panel.header.value
    kinds = {i["kind"] for i in panel.findings_view.items}
    assert {"cpu_fallback", "ping_pong"} <= kinds


def test_as_on_a_machine_with_n_gpus_shows_the_prediction(classic_panel):
    panel = PlacementPanel(classic_panel.trace)
    traced = panel.trace
    assert not panel.as_gpus.disabled and panel.gpus.value == 1
    panel.as_gpus.value = True
    assert panel.trace.predicted and panel.traced is traced
    assert panel.trace.devices[0].endswith("GPU:0")
    assert "predicted, not run" in panel.header.value
    assert panel.trace.device_of("int_matmul").endswith("CPU:0")
    assert panel.trace.device_of("dense").endswith("GPU:0")
    assert len(panel.visible_ops) == len(panel.trace.ops)
    assert [i["kind"] for i in panel.findings_view.items] == list(panel.trace.findings["kind"])
    panel.gpus.value = 2
    assert any(d.endswith("GPU:1") for d in panel.trace.devices)
    panel.as_gpus.value = False
    assert panel.trace is traced and "predicted, not run" not in panel.header.value


def test_a_failed_prediction_keeps_the_previous_result(classic_panel, monkeypatch):
    import tfplace_widget._tracing.predict as predict_module

    panel = PlacementPanel(classic_panel.trace)
    before = panel.trace

    def broken(trace, gpus=1, **options):
        raise ValueError("cannot predict <this>")

    monkeypatch.setattr(predict_module, "predict_placement", broken)
    panel.as_gpus.value = True
    assert panel.trace is before and not panel.as_gpus.value
    assert "ValueError: cannot predict &lt;this&gt;" in panel.message.value
    assert "stays on screen" in panel.message.value


def test_the_gpu_control_needs_a_trace_with_its_graph(classic_panel):
    assert show_placement(GPU_TRACE).as_gpus.disabled  # a Chrome trace: no graph
    from tfplace_widget import predict_placement

    assert PlacementPanel(predict_placement(classic_panel.trace)).as_gpus.disabled


def test_a_rerun_with_the_gpu_control_on_shows_the_new_prediction(seed_trace):
    panel = PlacementPanel(seed_trace, builder=inputs_none, options={"device_count": {"CPU": 2}})
    panel.as_gpus.value = True
    assert panel.trace.predicted
    panel.cpus.value = 3
    assert panel.run() is not None
    assert panel.trace.predicted and len(panel.traced.devices) == 3
    assert panel.trace.devices[0].endswith("GPU:0")


def test_a_large_trace_finds_its_findings_after_the_cell(classic_panel, monkeypatch):
    """In a kernel (an event loop runs the cell) a large trace's panel shows first and finds
    its findings beside the loop, which keeps running meanwhile; outside one, at once."""
    import asyncio
    import concurrent.futures
    import time

    import tfplace_widget._services as services_module
    import tfplace_widget._widgets.panel as panel_module

    monkeypatch.setattr(panel_module, "FINDINGS_LATER_OPS", 0)
    trace = dataclasses.replace(classic_panel.trace)  # nothing cached
    find = services_module.find_findings

    def slow_find(*args, **kwargs):  # as a large trace's: 0.3 s
        time.sleep(0.3)
        return find(*args, **kwargs)

    monkeypatch.setattr(services_module, "find_findings", slow_find)

    async def cell():
        panel = PlacementPanel(trace)
        waiting = (panel.findings_view.note, list(panel.findings_view.items))
        answered = 0  # the loop runs while the findings are found beside it
        while panel.findings_view.note and answered < 6000:
            await asyncio.sleep(0.005)
            answered += 1
        return panel, waiting, answered

    # In a thread of its own: Playwright's sync API (the browser tests, earlier in the same
    # session) leaves an event loop running in this one, where asyncio.run refuses to start.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        panel, (note, items), answered = pool.submit(asyncio.run, cell()).result()
    assert note.startswith("finding them in") and items == []
    assert answered >= 10  # 5 ms turns of the loop while the findings took 300 ms
    assert panel.findings_view.note == ""
    assert [i["kind"] for i in panel.findings_view.items] == list(trace.findings["kind"])
    panel.findings_view.selected = 0
    assert set(panel.visible_ops["op"]) <= set(trace.findings["ops"].iloc[0])


def test_findings_asked_from_two_threads_at_once_are_found_once(classic_panel, monkeypatch):
    """A second panel of a large trace (its own thread) or the user's next cell asking for
    the findings while the first panel's thread finds them waits for that answer: one
    computation, one frame, not two side by side (at a million ops, twice the time and the
    memory)."""
    import concurrent.futures
    import threading
    import time

    import tfplace_widget._services as services_module

    trace = dataclasses.replace(classic_panel.trace)  # nothing cached
    find, calls, started = services_module.find_findings, [], threading.Event()

    def slow_find(*args, **kwargs):  # as a large trace's
        calls.append(threading.current_thread().name)
        started.set()
        time.sleep(0.3)
        return find(*args, **kwargs)

    monkeypatch.setattr(services_module, "find_findings", slow_find)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        first = pool.submit(lambda: trace.findings)
        assert started.wait(10)
        second = pool.submit(lambda: trace.findings)  # while the first is being found
        frames = first.result(), second.result()
    assert len(calls) == 1
    assert frames[0] is frames[1] is trace.findings
    assert list(frames[0]["kind"]) == list(find(trace)["kind"])


def test_a_large_trace_indexes_its_names_and_locates_its_bars_after_the_cell(
    classic_panel, monkeypatch
):
    """The search's index of a large trace's names (seconds at a million ops) and each drawn
    bar's row in the table (what a search outlines: a look-up over every op name) are found
    right after the cell, before its findings: the panel is on screen without them, and a
    search then finds the same rows and outlines the same bars as a panel that made them at
    once."""
    import asyncio
    import concurrent.futures

    import tfplace_widget._widgets.panel as panel_module

    monkeypatch.setattr(panel_module, "FINDINGS_LATER_OPS", 0)
    trace = dataclasses.replace(classic_panel.trace)  # nothing cached

    async def cell():
        panel = PlacementPanel(trace)
        during = (panel.view_state._index, panel.view_state.event_row)
        await asyncio.sleep(0.01)  # the cell is over: the loop runs what it scheduled
        return panel, during

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        panel, during = pool.submit(asyncio.run, cell()).result()
    assert during == (None, None)
    assert panel.view_state._index is not None
    assert (panel.view_state.event_row[panel._timeline.shown] >= 0).all()
    assert len(panel.visible_ops) == len(trace.ops)  # the first filter needed no index
    panel.search.value = "c"
    at_once = PlacementPanel(trace)  # no event loop: both made by the first search
    assert at_once.view_state.event_row is None
    at_once.search.value = "c"
    assert list(panel.visible_ops["op"]) == list(at_once.visible_ops["op"])
    assert 0 < len(panel.visible_ops) < len(trace.ops)
    assert panel._timeline.highlighted_ops() == at_once._timeline.highlighted_ops()
    assert panel._timeline.highlighted_ops()


# -- move the picked op, re-run and compare (issue 13) -----------------------------------------
def test_move_a_picked_op_and_rerun_shows_the_comparison(panel):
    assert panel.move_box.layout.display == "none"  # nothing picked yet
    assert panel.compare_toggle.disabled  # no previous run yet
    before = panel.trace
    panel.table.selected_op = "C"
    assert panel.move_box.layout.display is None
    assert [label for label, _ in panel.move_to.options] == ["CPU:0"]  # not C's own CPU:1
    panel.move_to.value = CPU.format(0)
    panel.move_rerun.click()
    assert panel.message.value == ""
    assert panel.options["overrides"] == {"C": CPU.format(0)}
    assert panel.trace.device_of("C") == CPU.format(0) and panel.trace is not before
    view = panel.comparison
    assert view is not None and panel.compare_toggle.value
    assert view.diff.a is before and view.diff.b is panel.trace
    assert view.highlighted_ops() == [{"C"}, {"C"}]  # moved: outlined in both timelines
    assert "1 op moved: C (CPU:1 -&gt; CPU:0)." in view.summary.value
    assert "a: previous run" in view.summary.value
    assert panel.table.layout.display == "none" and panel._comparison_box.layout.display == "flex"
    panel.search.value = "B"  # the panel's box searches the diff table
    assert set(view.visible_ops["op"]) and all("b" in op.lower() for op in view.visible_ops["op"])
    panel.search.value = ""
    panel.compare_toggle.value = False  # back to the single view, of the new run
    assert panel.comparison is None and panel.table.layout.display is None
    assert panel._comparison_box.layout.display == "none"
    assert panel.compare_toggle.description == "compare with the previous run"
    assert panel.run() is not None  # the override stays in the options for the re-runs after
    assert panel.trace.device_of("C") == CPU.format(0)


def test_runtime_ops_and_loaded_traces_offer_no_move(panel, seed_trace):
    send = panel.trace.ops.loc[panel.trace.ops["type"] == "_Send", "op"].iloc[0]
    panel.table.selected_op = send
    assert panel.move_box.layout.display == "none"  # not in the built graph: no override
    loaded = show_placement(seed_trace)
    loaded.table.selected_op = "C"
    assert loaded.move_box.layout.display == "none" and loaded.compare_toggle.disabled


def test_every_rerun_offers_the_comparison_and_a_failed_one_keeps_it(panel):
    first = panel.trace
    panel.cpus.value = 3
    assert panel.run() is not None
    assert not panel.compare_toggle.disabled and not panel.compare_toggle.value
    panel.compare_toggle.value = True
    view = panel.comparison
    assert view.diff.a is first and len(view.diff.b.devices) == 3
    ticks = [w.layout_dict["yaxis"]["ticktext"] for w in view.timelines]
    assert ticks[0] == ticks[1] == ["CPU:0", "CPU:1", "CPU:2"]
    shown = view.diff
    assert panel.run(overrides={"no_such_op": "/cpu:0"}) is None  # a bad override
    assert "no_such_op" in panel.message.value and "stays on screen" in panel.message.value
    assert panel.comparison is view and view.diff is shown
    assert "overrides" not in panel.options
    second = panel.trace
    assert panel.run() is not None  # while comparing: the new pair at once
    assert panel.comparison.diff.a is second and panel.comparison.diff.b is panel.trace


def test_show_placement_compare_to(seed_trace):
    moved = show_placement(inputs_none, device_count={"CPU": 2}, overrides={"C": "/cpu:0"})
    panel = show_placement(moved.trace, compare_to=seed_trace)
    assert panel.compare_toggle.value and panel.comparison.diff.a is seed_trace
    assert "a: compare_to" in panel.comparison.summary.value
    assert list(panel.comparison.diff.moved["op"]) == ["C"]
    # A function is traced with the same arguments and options as the one it is compared to.
    same = show_placement(inputs_none, device_count={"CPU": 2}, compare_to=inputs_none)
    assert len(same.comparison.diff.moved) == 0
    assert len(same.comparison.diff.a.devices) == 2
    # compare_with on a re-runnable panel: the next re-run compares with the run before it.
    panel = PlacementPanel(moved.trace, builder=inputs_none, options={"device_count": {"CPU": 2}})
    panel.compare_with(seed_trace, label="before the move")
    assert "a: before the move" in panel.comparison.summary.value
    assert panel.run() is not None
    assert "a: previous run" in panel.comparison.summary.value
    assert panel.comparison.diff.a is moved.trace
    with pytest.raises(TypeError, match="compare_with takes a PlacementTrace, not str"):
        panel.compare_with("trace.json")
    with pytest.raises(TypeError, match="not int"):
        show_placement(seed_trace, compare_to=42)
    with pytest.raises(TypeError, match="Unknown option 'compare_to' for trace_placement"):
        from tfplace_widget._tracing.tracer import trace_placement

        trace_placement(inputs_none, compare_to=seed_trace)


def test_the_comparison_follows_the_gpu_control(seed_trace):
    panel = PlacementPanel(seed_trace, builder=inputs_none, options={"device_count": {"CPU": 2}})
    assert panel.run() is not None
    panel.compare_toggle.value = True
    panel.as_gpus.value = True  # b becomes the prediction of this run on a machine with a GPU
    view = panel.comparison
    assert view.diff.b.predicted and "predicted, not run" in view.titles[1].value
    assert "GPU:0" in view.timelines[1].layout_dict["yaxis"]["ticktext"]
    assert {"A", "B"} <= set(view.diff.moved["op"])


def test_a_closed_panel_lets_go_of_the_previous_run_and_the_comparison(seed_trace):
    import gc
    import weakref

    panel = PlacementPanel(seed_trace, builder=inputs_none, options={"device_count": {"CPU": 2}})
    panel.run(overrides={"C": "/cpu:0"}, compare=True)
    view, widgets = panel.comparison, [w for w in panel.comparison.timelines]
    refs = [weakref.ref(panel.trace), weakref.ref(view)] + [weakref.ref(w) for w in widgets]
    del view, widgets
    panel.close()
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)
    assert panel.comparison is None


def test_comparing_without_a_previous_run_is_a_message(panel):
    panel.compare_toggle.value = True  # from code: the button itself is disabled
    assert "no previous run to compare with yet" in panel.message.value
    assert not panel.compare_toggle.value and panel.comparison is None
    assert panel.table.layout.display is None  # the single view stays


# -- Save and Export HTML (issue 14) -----------------------------------------------------------
def test_the_save_button_writes_a_tfplace_file_next_to_the_notebook(panel, tmp_path, monkeypatch):
    import pandas as pd

    from tfplace_widget import PlacementTrace

    monkeypatch.chdir(tmp_path)  # a kernel runs in its notebook's folder
    panel.save_button.click()
    [written] = list(tmp_path.glob("*.tfplace"))
    assert f"Saved the trace to {written}" in panel.message.value
    loaded = PlacementTrace.load(written)
    pd.testing.assert_frame_equal(loaded.ops, panel.trace.ops)
    panel.save_button.click()  # a second save never overwrites the first
    assert len(list(tmp_path.glob("*.tfplace"))) == 2


def test_a_save_that_cannot_write_says_so_and_keeps_the_panel(panel, tmp_path):
    before = list(panel.visible_ops["op"])
    missing = tmp_path / "no" / "such" / "folder"
    panel._write_file(lambda: panel.save(missing), "Saved the trace to")
    assert "Nothing was written" in panel.message.value
    assert list(panel.visible_ops["op"]) == before


def test_the_export_html_button_writes_a_report_next_to_the_notebook(panel, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    panel.search.value = "C"
    panel.html_button.click()
    [written] = list(tmp_path.glob("*.html"))
    assert f"Wrote the HTML report to {written}" in panel.message.value
    page = written.read_text(encoding="utf-8")
    assert page.lstrip().lower().startswith("<!doctype html") and "plotly" in page.lower()


def test_a_regex_with_groups_searches_without_a_warning(seed_cpu, recwarn):
    """pandas warns about match groups in str.contains; the user's regex may well have some."""
    panel = PlacementPanel(seed_cpu)
    try:
        panel.regex.value = True
        panel.search.value = "(A|B)"
        assert set(panel.visible_ops["op"]) >= {"A", "B"} and not panel.message.value
        assert not [w for w in recwarn if "regular expression" in str(w.message)]
    finally:
        panel.close()


def _pick_row(panel, op, device):
    """Pick the row of ``op`` on ``device`` as the browser does: both traits in one message."""
    page = panel.table.rows
    at = [r for r, row in enumerate(page) if row[0] == op and panel.table.row_devices[r] == device][
        0
    ]
    panel.table.set_state({"selected_device": panel.table.row_devices[at], "selected_op": op})


def _click_bar(panel, op, device):
    """Click the bar of ``op`` on ``device`` as the browser does (curveNumber, pointNumber)."""
    timeline = panel._timeline
    for traces in timeline._device_traces:
        points = [
            i
            for i, row in enumerate(traces.rows)
            if timeline._ops[row] == op and timeline._devices[row] == device
        ]
        if points:
            message = {"event": "click", "curve": traces.base_index, "point": points[0]}
            panel.timeline._handle_message(panel.timeline, message, [])
            return
    raise AssertionError(f"no bar of {op} on {device}")


def test_picking_an_op_that_runs_on_each_device_highlights_that_devices_bar_only(panel):
    events = panel.trace.events
    sources = sorted(set(events.loc[events["op"] == "_SOURCE", "device"].astype(str)))
    assert len(sources) == 2  # one _SOURCE per partition (CPU:0 and CPU:1)
    timeline = panel._timeline
    for device in sources:
        _pick_row(panel, "_SOURCE", device)
        rows = timeline._selected_rows
        assert len(rows) >= 1 and set(timeline._devices[rows]) == {device}
    _click_bar(panel, "_SOURCE", sources[0])  # a bar picks its op on its device
    assert (panel.table.selected_op, panel.table.selected_device) == ("_SOURCE", sources[0])
    assert set(timeline._devices[timeline._selected_rows]) == {sources[0]}


def test_clicking_a_bar_turns_the_table_to_the_page_of_its_row():
    panel = show_placement(many_ops, device_count={"CPU": 2})
    visible = panel.visible_ops
    at = 2 * PAGE_SIZE + 3
    op, device = str(visible["op"].iloc[at]), str(visible["device"].iloc[at])
    assert panel.table.page == 0
    _click_bar(panel, op, device)
    assert panel.table.page == 2
    shown = [(row[0], panel.table.row_devices[r]) for r, row in enumerate(panel.table.rows)]
    assert (op, device) in shown
    assert (panel.table.selected_op, panel.table.selected_device) == (op, device)


# -- try the picked finding's fix (issue 33) ---------------------------------------------------
def test_try_this_fix_runs_the_fix_and_shows_the_copies_gone(seed_trace):
    """inputs_none: A and B (no request, CPU:0) copied to C on CPU:1; the fix puts them on
    CPU:1 and the panel shows the two runs compared, with the effect measured."""
    panel = PlacementPanel(seed_trace, builder=inputs_none, options={"device_count": {"CPU": 2}})
    assert panel.try_fix_button.layout.display == "none"  # no finding picked yet
    findings = panel.trace.findings
    index = next(i for i, fix in enumerate(findings["fix"]) if fix and fix["overrides"])
    panel.findings_view.selected = index
    assert panel.try_fix_button.layout.display is None
    assert "wrap the lines that make them (" in panel.try_fix_button.tooltip
    assert ") in `with tf.device('/CPU:1'):`" in panel.try_fix_button.tooltip
    before = panel.trace
    panel.try_fix_button.click()
    effect = panel.fix_effect
    assert effect is not None and effect.verified, panel.message.value
    assert effect.copies == (3, 1)
    assert "Try this fix: verified: the finding is gone, copies 3 -&gt; 1" in panel.message.value
    assert panel.trace.device_of("A") == CPU.format(1) and panel.trace is not before
    view = panel.comparison
    assert view is not None and view.diff.b is panel.trace
    assert "a: without the fix" in view.summary.value
    assert panel.options["overrides"] == effect.overrides  # the re-runs after keep the fix
    loaded = PlacementPanel(seed_trace)  # no builder: nothing to run
    loaded.findings_view.selected = index
    assert loaded.try_fix_button.layout.display == "none"


def test_suggest_a_placement_shows_tensorflows_placement_against_the_suggested_one(seed_trace):
    """The button shows once the findings carry a fix to try; clicked, it tries each fix,
    applies the verified ones together and draws the comparison view with both runs."""
    panel = PlacementPanel(seed_trace, builder=inputs_none, options={"device_count": {"CPU": 2}})
    assert panel.suggest_button.layout.display is None
    before = panel.trace
    panel.suggest_button.click()
    effect = panel.fix_effect
    assert effect is not None and effect.verified, panel.message.value
    assert [t.verified for t in effect.trials] == [True] and effect.copies == (3, 1)
    assert "Suggest a placement: verified (1 of 1 fixes verified)" in panel.message.value
    assert panel.trace is not before and panel.trace.device_of("A") == CPU.format(1)
    view = panel.comparison
    assert view is not None and view.diff.b is panel.trace and view.diff.a is effect.before
    assert "a: TensorFlow&#x27;s placer · b: suggested" in view.summary.value
    assert panel.options["overrides"] == effect.overrides
    assert PlacementPanel(seed_trace).suggest_button.layout.display == "none"  # no code to run


def test_a_finding_with_a_fix_shows_its_edit_under_the_message(seed_builders):
    """The seed's inputs_cpu: the copies to C carry a fix whose edit names the lines that make
    A and B (in conftest.py); the result's copy back to the caller has none. The panel's list
    (and its static snapshot) shows the edit of the first, nothing for the second."""
    import html
    import inspect

    import conftest

    source, first = inspect.getsourcelines(conftest._seed_builders)
    line_a = first + next(i for i, text in enumerate(source) if 'name="A"' in text)
    panel = show_placement(seed_builders["inputs_cpu"], device_count={"CPU": 2})
    items = panel.findings_view.items
    findings = panel.trace.findings
    fixed = [i for i, fix in zip(items, findings["fix"], strict=True) if fix and fix["edit"]]
    unfixed = [i for i, fix in zip(items, findings["fix"], strict=True) if not fix]
    assert len(fixed) == 1 and len(unfixed) == 1, findings[["kind", "message", "fix"]]
    edit = fixed[0]["edit"]
    assert f"conftest.py:{line_a} in inputs_cpu" in edit and "tf.device('/CPU:1')" in edit
    assert edit not in fixed[0]["message"]  # under it, not already in it
    assert unfixed[0]["edit"] == ""
    snapshot = panel._repr_mimebundle_()["text/html"]
    assert html.escape(edit) in snapshot
    assert snapshot.count("class='tfplace-finding-edit'") == 1
    from tfplace_widget._export.html import findings_data  # the HTML report's list: the same

    report = findings_data(panel.trace)["findings"]
    assert [i["edit"] for i in report] == [i["edit"] for i in items]


def test_a_loaded_traces_panel_does_not_import_tensorflow(seed_trace, tmp_path):
    """A trace loaded from its file, in a fresh process: its panel, findings included, shows
    what the file holds without importing TensorFlow (3 s or more in a fresh kernel). A
    *pickled* trace is another matter: its graph facts keep the registry they were read from
    (``_tfadapter.registry.Registry``, pickled by name), and its findings replay the placer
    with this process's registry, which imports TensorFlow."""
    saved = tmp_path / "seed.tfplace"
    seed_trace.save(saved)
    code = (
        "import sys\n"
        "from tfplace_widget import PlacementTrace\n"
        "from tfplace_widget._widgets.panel import PlacementPanel\n"
        f"panel = PlacementPanel(PlacementTrace.load({str(saved)!r}))\n"
        "print(len(panel.visible_ops), len(panel.trace.findings), 'tensorflow' in sys.modules)\n"
    )
    ops, findings, imported = run_python(code, timeout=300).stdout.split()
    assert (int(ops), int(findings)) == (len(seed_trace.ops), len(seed_trace.findings))
    assert imported == "False"


def test_the_chips_and_the_timeline_share_one_factorize_of_the_events(classic_panel, monkeypatch):
    """The device chips and the timeline's lanes group the same events by device and lane:
    the panel factorizes those columns once per drawing (about 0.1 s each at a million events)
    and hands the codes to both; answers as when each made its own."""
    import pandas as pd

    from tfplace_widget._analyses.summary import device_summaries, format_us
    from tfplace_widget._rendering.figure import TimelineFigure

    trace = classic_panel.trace
    n_events = len(trace.events)
    calls = []
    factorize = pd.factorize

    def counting(values, *args, **kwargs):
        if len(values) == n_events and not isinstance(values, np.ndarray):  # a column
            calls.append(getattr(values, "name", type(values).__name__))
        return factorize(values, *args, **kwargs)

    monkeypatch.setattr(pd, "factorize", counting)
    panel = PlacementPanel(trace)
    assert sorted(calls) == ["device", "lane"], calls
    monkeypatch.setattr(pd, "factorize", factorize)
    figure = TimelineFigure(
        trace.events, trace.devices, trace.transfers, trace.inputs, memory=trace.memory
    )
    assert panel._timeline.lanes == figure.lanes
    assert (panel._timeline.lane_y == figure.lane_y).all()
    assert list(panel._timeline._row_colors) == list(figure._row_colors)
    as_lists = lambda value: value.tolist()  # noqa: E731  (numpy arrays, for json)
    assert json.dumps(panel._timeline.data, default=as_lists) == json.dumps(
        figure.data, default=as_lists
    )
    for summary in device_summaries(trace.ops, trace.events, trace.devices):
        description = panel.chips.chip_of[summary.device].description
        assert f" · {summary.ops:,} ops · {format_us(summary.busy_us)} busy" in description


def test_a_panel_drawn_again_reads_events_edited_in_place(classic_panel):
    """Nothing the panel derives from the events outlives one drawing: edited in place (a
    device renamed in ``trace.events``), the trace drawn again shows the edit."""
    trace = dataclasses.replace(classic_panel.trace)
    trace.events = trace.events.copy()
    panel = PlacementPanel(trace)
    before = list(panel._timeline.lanes)
    device = trace.events["device"].iloc[0]
    renamed = device.replace("CPU:0", "CPU:9")
    trace.events.loc[trace.events["device"] == device, "device"] = renamed
    trace.events.loc[trace.events["lane"] == device, "lane"] = renamed
    panel.show_trace(trace)
    after = [pair for pair in panel._timeline.lanes if pair not in before]
    assert (renamed, renamed) in after


def test_the_snapshot_shows_the_chips_the_panel_drew(classic_panel, monkeypatch):
    """``display``'s static snapshot reads the device chips' numbers the panel found (a pass
    over every op and event: a fifth of a second at a million ops), and says the same as when
    it finds them itself."""
    import tfplace_widget._rendering.snapshot as snapshot

    panel = PlacementPanel(classic_panel.trace)
    found_here = snapshot.chips_html(panel.trace)

    def refused(*args, **kwargs):
        raise AssertionError("device_summaries again")

    monkeypatch.setattr(snapshot, "device_summaries", refused)
    html = panel._repr_mimebundle_()["text/html"]
    assert "No static snapshot" not in html
    assert found_here in html and " busy</span>" in found_here
