"""The memory lane and the memory peaks (issue 34) as drawn in a browser, from TensorFlow's own
allocator records.

A two-layer dense net's training step in graph mode on two real CPUs (``test_memory``'s: its
first layer pinned to CPU:0, the rest on CPU:1), traced here with FULL_TRACE, saved, and opened in a panel in
JupyterLab and in the HTML report. What plotly.js drew (its own ``gd.data``) must hold one
step curve (``line.shape: "hv"``) per device with records and a marker on its peak at
``trace.memory_peaks()``'s bytes and time; the memory list must name each device's peak and
the ops holding it; a click on such an op picks it (its details say why it is on that device).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_memory import dense_training_step

from tfplace_widget import PlacementTrace
from tfplace_widget._analyses.summary import format_bytes
from tfplace_widget._export.html import write_html
from tfplace_widget._model.devices import short_device

from .conftest import SCREENSHOTS, VIEWPORT, write_notebook

# The memory lane as plotly.js drew it: its curves and its peak markers, by their meta.
MEMORY_JS = """(plot) => plot.data.filter((t) => t.meta && (t.meta.memory || t.meta.memory_peak))
    .map((t) => ({device: t.meta.memory || t.meta.memory_peak, peak: Boolean(t.meta.memory_peak),
                  shape: t.line && t.line.shape, yaxis: t.yaxis, n: t.x.length,
                  x: Array.from(t.x), y: Array.from(t.y), text: t.text ? t.text[0] : ''}))"""
# The lane's rows that plotly drew: a y axis per device under the lanes, with its curve's path.
DRAWN_JS = """(plot) => ({
    axes: Array.from(plot.querySelectorAll('.g-y2title, .g-y3title'), (e) => e.textContent),
    curves: plot.querySelectorAll('.scatterlayer .trace .js-line').length})"""


@pytest.fixture(scope="module")
def dense_trace(tf, trace_placement, tmp_path_factory) -> tuple[PlacementTrace, Any]:
    """The traced step, saved (what the panel and the report open) and loaded back."""
    traced = trace_placement(lambda: dense_training_step(tf), device_count={"CPU": 2})
    path = tmp_path_factory.mktemp("memory") / "dense.tfplace"
    traced.save(path)
    trace = PlacementTrace.load(path)
    assert len(trace.memory), "graph mode's FULL_TRACE step_stats carry allocator records"
    return trace, path


def _check_lane(drawn: list[dict], trace: PlacementTrace) -> None:
    """The drawn lane holds, per device and allocator of ``trace.memory_peaks()``, a step
    curve and a peak marker at the peak's bytes and time."""
    peaks = trace.memory_peaks()
    assert set(peaks["device"]) == {d for d in trace.devices if "CPU" in d}  # both CPUs allocated
    markers = [t for t in drawn if t["peak"]]
    curves = [t for t in drawn if not t["peak"]]
    assert len(markers) == len(curves) == len(peaks), drawn
    for row in peaks.itertuples(index=False):
        [marker] = [t for t in markers if t["device"] == row.device]
        assert marker["y"] == [row.peak_bytes] and marker["x"] == [row.peak_time_us], marker
        assert format_bytes(row.peak_bytes) in marker["text"], marker
        [curve] = [t for t in curves if t["device"] == row.device]
        assert curve["shape"] == "hv" and curve["yaxis"] == marker["yaxis"] != "y"
        assert max(curve["y"]) == row.peak_bytes  # every record drawn: a small step


def _check_list(texts: dict[str, str], trace: PlacementTrace) -> None:
    """The memory list: per device its peak and the op holding the most of it, and on a line
    of its own what the device holds through the step (the variables on both CPUs)."""
    from tfplace_widget._rendering.memory_lane import memory_items

    persistent = {item["device"]: item["persistent"] for item in memory_items(trace)}
    for row in trace.memory_peaks().itertuples(index=False):
        text = texts[row.device]
        assert text.startswith(short_device(row.device)), text
        assert f"peak {format_bytes(row.peak_bytes)}" in text and row.ops[0] in text, text
        line = f"held through the step: {format_bytes(row.persistent_bytes)}"
        assert row.persistent_bytes > 0 and line in text and persistent[row.device] in text


LIST_JS = """(root) => Object.fromEntries(Array.from(
    root.querySelectorAll('.tfplace-memory-device'), (li) => [li.dataset.device, li.innerText]))"""


def test_memory_lane_and_peaks_in_the_panel(lab, jupyter_lab, dense_trace):
    trace, path = dense_trace
    target = jupyter_lab.root / "dense.tfplace"
    target.write_bytes(path.read_bytes())
    cells = ["from tfplace_widget import show_placement\nshow_placement('dense.tfplace')"]
    lab.open_notebook(write_notebook(jupyter_lab.root / "memory.ipynb", cells).name)
    lab.run_all_cells(timeout_s=240)
    assert not lab.errors()
    panel = lab.page.locator(".tfplace-panel").first
    plot = panel.locator(".js-plotly-plot")
    plot.wait_for(timeout=60_000)
    lab.page.wait_for_function(
        f"(plot) => ({MEMORY_JS})(plot).length > 0", arg=plot.element_handle(), timeout=30_000
    )
    _check_lane(plot.evaluate(MEMORY_JS), trace)
    drawn = plot.evaluate(DRAWN_JS)
    assert sorted(drawn["axes"]) == ["CPU:0 memory", "CPU:1 memory"], drawn
    _check_list(panel.locator(".tfplace-memory").evaluate(LIST_JS), trace)

    # The op holding most of CPU:0's peak: a click picks it, its details say why it is there.
    peak = trace.memory_peaks().set_index("device").loc[trace.devices[0]]
    op = peak["ops"][0]
    reason = trace.ops.set_index(["op", "device"]).loc[(op, trace.devices[0]), "reason"]
    panel.locator(f".tfplace-memory-op[data-op='{op}']").first.click()
    panel.locator(f".tfplace-table tbody tr.tfplace-selected[data-op='{op}']").wait_for(
        timeout=15_000
    )
    details = panel.locator("code", has_text=op).first
    details.wait_for(timeout=15_000)
    assert reason in panel.inner_text()
    memory = panel.locator(".tfplace-memory")
    memory.scroll_into_view_if_needed()
    memory.screenshot(path=str(SCREENSHOTS / "memory-panel-peaks.png"))
    plot.scroll_into_view_if_needed()
    plot.screenshot(path=str(SCREENSHOTS / "memory-panel-timeline.png"))
    assert not [e for e in lab.console_errors if "tfplace" in e.lower()]


def test_memory_lane_and_peaks_in_the_html_report(chromium, dense_trace, tmp_path):
    trace, _ = dense_trace
    report = write_html(trace, tmp_path / "memory.html")
    page = chromium.new_page(viewport=VIEWPORT)
    try:
        page.goto(report.as_uri())
        page.wait_for_function("() => document.body.dataset.ready === 'true'", timeout=30_000)
        plot = page.locator("#tfplace-timeline")
        _check_lane(plot.evaluate(MEMORY_JS), trace)
        _check_list(page.locator("#tfplace-memory").evaluate(LIST_JS), trace)
        op = trace.memory_peaks()["ops"].iloc[-1][0]  # CPU:1's largest holder
        page.locator(f".tfplace-memory-op[data-op='{op}']").first.click()
        page.wait_for_function(
            "(op) => document.getElementById('tfplace-details').innerText.includes(op)", arg=op
        )
        details = page.inner_text("#tfplace-details")
        assert "CPU:1" in details and "explicit" in details, details  # pinned by tf.device
        page.screenshot(path=str(SCREENSHOTS / "memory-report.png"), full_page=True)
    finally:
        page.close()
