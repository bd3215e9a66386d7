"""The panel in a real JupyterLab in headless Chromium: render, type, narrow, highlight, pick."""

from __future__ import annotations

import re

import pytest

from .conftest import MAGIC_PANEL_CELL, SCREENSHOTS, write_notebook

SEED_NOTEBOOK = "notebooks/01_seed_experiment.ipynb"
MAGIC_CELLS = [
    "%load_ext tfplace_widget",
    MAGIC_PANEL_CELL,
]
# The first panel's DOM, and what plotly drew for it (gd.data is plotly.js's own trace list).
PANEL = ".tfplace-panel"
TRACES_JS = """(index) => {
    const panel = document.querySelectorAll('.tfplace-panel')[index];
    const plot = panel.querySelector('.js-plotly-plot');
    return plot.data.map((t) => ({name: t.name, opacity: t.opacity, n: (t.y || []).length}));
}"""


def _table_ops(lab, index: int = 0) -> list[str]:
    panel = lab.page.locator(PANEL).nth(index)
    return panel.locator(".tfplace-table tbody tr").evaluate_all(
        "(rows) => rows.map((r) => r.dataset.op)"
    )


def _search_and_check(lab, index: int, text: str) -> None:
    """Type ``text`` into panel ``index``'s search box; the table and timeline follow."""
    panel = lab.page.locator(PANEL).nth(index)
    before = _table_ops(lab, index)
    box = panel.locator("input[type=text]").first
    box.click()
    box.press_sequentially(text, delay=60)
    lab.page.wait_for_function(
        "([i, n]) => document.querySelectorAll('.tfplace-panel')[i]"
        ".querySelectorAll('.tfplace-table tbody tr').length < n",
        arg=[index, len(before)],
        timeout=15_000,
    )
    after = _table_ops(lab, index)
    assert after and all(text.lower() in op.lower() for op in after), after
    assert "C" in after
    assert panel.get_by_text(f"of {len(before)} ops").count() == 1
    lab.page.wait_for_function(
        f"(i) => ({TRACES_JS})(i).some((t) => t.name.endsWith('matches') && t.n > 0)",
        arg=index,
        timeout=15_000,
    )
    traces = lab.page.evaluate(TRACES_JS, index)
    dimmed = [t for t in traces if t["name"] in ("CPU:0", "CPU:1")]
    assert dimmed and all(t["opacity"] == pytest.approx(0.25) for t in dimmed), traces
    matches = {t["name"]: t["n"] for t in traces if t["name"].endswith("matches")}
    assert matches["CPU:1 matches"] >= 1, matches  # C ran on CPU:1


def test_seed_notebook_panels_search_and_pick(lab, jupyter_lab):
    if not (jupyter_lab.root / SEED_NOTEBOOK).exists():
        pytest.fail(f"{SEED_NOTEBOOK} is missing from the repository")
    lab.open_notebook(SEED_NOTEBOOK)
    lab.run_all_cells(timeout_s=240)
    assert not lab.errors()
    panels = lab.page.locator(PANEL)
    panels.first.locator(".tfplace-table tbody tr").first.wait_for(timeout=30_000)
    assert panels.count() >= 2  # inputs_cpu and inputs_none
    panels.first.scroll_into_view_if_needed()
    lab.screenshot("seed-notebook-panel")
    _search_and_check(lab, 0, "C")
    panel = panels.first
    panel.locator(".tfplace-table tbody tr[data-op='C']").click()
    details = panel.locator("code", has_text="C:0")
    details.first.wait_for(timeout=10_000)
    assert "explicit" in panel.inner_text()
    panel.screenshot(path=str(SCREENSHOTS / "seed-panel-searched.png"))
    assert not [e for e in lab.console_errors if "tfplace" in e.lower()]


def test_magic_cell_renders_a_panel_in_light_and_dark(lab, jupyter_lab):
    name = write_notebook(jupyter_lab.root / "magic.ipynb", MAGIC_CELLS).name
    lab.open_notebook(name)
    lab.run_all_cells(timeout_s=240)
    assert not lab.errors()
    panel = lab.page.locator(PANEL).first
    panel.locator(".tfplace-table tbody tr").first.wait_for(timeout=30_000)
    outputs = lab.cell_outputs()
    assert "Device mapping" not in outputs[1] and "placer.cc" not in outputs[1]
    panel.scroll_into_view_if_needed()
    panel.screenshot(path=str(SCREENSHOTS / "magic-panel-light.png"))
    _search_and_check(lab, 0, "C")
    lab.page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Settings$")).click()
    lab.page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).click()
    lab.page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^JupyterLab Dark$")).click()
    lab.page.wait_for_function(
        "() => document.body.dataset.jpThemeLight === 'false'", timeout=15_000
    )
    lab.page.wait_for_timeout(500)
    panel.screenshot(path=str(SCREENSHOTS / "magic-panel-dark.png"))
    # Readable in the dark theme: table text is light on a dark background.
    color = panel.locator(".tfplace-table td").first.evaluate("(td) => getComputedStyle(td).color")
    rgb = [int(v) for v in color[color.index("(") + 1 : color.index(")")].split(",")[:3]]
    assert sum(rgb) > 3 * 150, color


SAMPLED_CELLS = [
    "%load_ext tfplace_widget",
    """from tensorflow.core.protobuf import config_pb2
from tfplace_widget import PlacementTrace

# 12,000 recorded runs on one CPU: the timeline draws the 10,000 longest (the "long_" ops),
# and the 2,000 "short_" ones are left out of its sample.
metadata = config_pb2.RunMetadata()
lane = metadata.step_stats.dev_stats.add(device="/job:localhost/replica:0/task:0/device:CPU:0")
for i in range(12_000):
    name = f"short_{i}" if i < 2_000 else f"long_{i}"
    lane.node_stats.add(
        node_name=name,
        all_start_micros=1_700_000_000_000_000 + 10 * i,
        all_end_rel_micros=1 if i < 2_000 else 5,
        timeline_label=f"{name} = AddV2(x, y)",
    )
show_placement(PlacementTrace.from_run_metadata(metadata))""",
]
SELECTED_JS = """() => {
    const plot = document.querySelector('.tfplace-panel .js-plotly-plot');
    if (!plot || !plot.data) return 0;
    const picked = plot.data.find((t) => t.name === 'selected');
    return picked ? (picked.x || []).length : 0;
}"""


def test_a_sampled_timeline_draws_a_picked_op_it_left_out(lab, jupyter_lab):
    name = write_notebook(jupyter_lab.root / "sampled.ipynb", SAMPLED_CELLS).name
    lab.open_notebook(name)
    lab.run_all_cells(timeout_s=240)
    assert not lab.errors()
    panel = lab.page.locator(PANEL).first
    panel.locator(".tfplace-table tbody tr").first.wait_for(timeout=30_000)
    text = panel.inner_text()
    assert "12,000 ops on 1 device ·" in text
    assert "The timeline draws a sample: the 10,000 longest of 12,000 events." in text
    assert "Pick an op in the table to draw its events, also those the sample left out." in text
    assert lab.page.evaluate(SELECTED_JS) == 0
    box = panel.locator("input[type=text]").first
    box.click()
    box.press_sequentially("short_1999", delay=60)
    row = panel.locator(".tfplace-table tbody tr[data-op='short_1999']")
    row.wait_for(timeout=15_000)
    row.click()
    lab.page.wait_for_function(f"({SELECTED_JS})() > 0", timeout=15_000)
    panel.scroll_into_view_if_needed()
    panel.screenshot(path=str(SCREENSHOTS / "sampled-timeline-picked.png"))
