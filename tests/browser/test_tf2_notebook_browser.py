"""Notebook 05 (TF2 code) in a real JupyterLab in headless Chromium: run it, see its panels, search.

Its three panels (the seed experiment as a tf.function, a Keras forward pass, a Keras training
step) each say they traced TF2 code in the eager runtime, draw their bars and table rows, and the
first one narrows its table and timeline to ``C`` when "C" is typed into its search box.
"""

from __future__ import annotations

import re

import pytest

from .conftest import SCREENSHOTS

TF2_NOTEBOOK = "notebooks/05_tf2_functions_and_keras.ipynb"
MODE_LABEL = "TF2 code, run in the eager runtime"
# The panels of the notebook on screen: Lab restores the notebooks that other tests opened as
# hidden tabs, and their panels stay in the page.
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden) .tfplace-panel"
# Per panel: its table's op names, and what plotly drew (gd.data is plotly.js's own trace list).
ROWS_JS = f"""(index) => Array.from(
    document.querySelectorAll('{PANEL}')[index].querySelectorAll('.tfplace-table tbody tr'),
    (row) => row.dataset.op)"""
TRACES_JS = f"""(index) => {{
    const plot = document.querySelectorAll('{PANEL}')[index].querySelector('.js-plotly-plot');
    return plot.data.map((t) => ({{name: t.name, opacity: t.opacity, n: (t.y || []).length}}));
}}"""
# Every panel drawn: table rows and a plotly plot with bars.
PANELS_DRAWN_JS = f"""(count) => {{
    const panels = document.querySelectorAll('{PANEL}');
    return panels.length >= count && Array.from(panels).every((panel) => {{
        const plot = panel.querySelector('.js-plotly-plot');
        return panel.querySelector('.tfplace-table tbody tr') !== null
            && plot !== null && Array.isArray(plot.data)
            && plot.data.some((t) => (t.y || []).length > 0)
            && plot.querySelector('.barlayer .point') !== null;
    }});
}}"""
SHOWING = re.compile(r"showing (\d[\d,]*) of (\d[\d,]*) ops")


def _text(panel) -> str:
    """The panel's text, drawn or not (JupyterLab leaves cells far off screen unrendered, where
    ``inner_text`` is empty)."""
    return panel.evaluate("(element) => element.textContent")


def _showing(panel) -> tuple[int, int]:
    """``(N, M)`` of the panel's "showing N of M ops"."""
    text = _text(panel)
    match = SHOWING.search(text)
    assert match, text[:500]
    return int(match[1].replace(",", "")), int(match[2].replace(",", ""))


def test_tf2_notebook_panels_render_and_search(lab, jupyter_lab):
    if not (jupyter_lab.root / TF2_NOTEBOOK).exists():
        pytest.fail(f"{TF2_NOTEBOOK} is missing from the repository")
    lab.open_notebook(TF2_NOTEBOOK)
    lab.run_all_cells(timeout_s=240)
    assert not lab.errors()
    lab.page.wait_for_function(PANELS_DRAWN_JS, arg=3, timeout=60_000)
    panels = lab.page.locator(PANEL)
    assert panels.count() == 3  # the seed function, the forward pass, the training step
    headers = [_text(panels.nth(i).locator(".widget-html").first) for i in range(3)]
    assert all(MODE_LABEL in header for header in headers), [h[:300] for h in headers]
    assert "train_on_batch" in headers[2], headers[2][:300]

    # The first panel: the seed experiment as a tf.function, C pinned to the stand-in GPU.
    panel = panels.first
    panel.scroll_into_view_if_needed()
    lab.page.wait_for_timeout(300)
    lab.screenshot("tf2-notebook-panel")
    before = lab.page.evaluate(ROWS_JS, 0)
    shown, total = _showing(panel)
    assert {"A", "B", "C"} <= set(before) and shown == total == len(before), (before, shown)
    lanes = {t["name"]: t["n"] for t in lab.page.evaluate(TRACES_JS, 0)}
    assert lanes.get("CPU:0", 0) > 0 and lanes.get("CPU:1", 0) > 0, lanes  # bars on both

    box = panel.locator("input[type=text]").first
    box.click()
    box.press_sequentially("C", delay=60)
    lab.page.wait_for_function(
        f"([i, n]) => document.querySelectorAll('{PANEL}')[i]"
        ".querySelectorAll('.tfplace-table tbody tr').length < n",
        arg=[0, len(before)],
        timeout=15_000,
    )
    after = lab.page.evaluate(ROWS_JS, 0)
    assert "C" in after and all("c" in op.lower() for op in after), after
    assert _showing(panel) == (len(after), total)
    lab.page.wait_for_function(
        f"(i) => ({TRACES_JS})(i).some((t) => t.name.endsWith('matches') && t.n > 0)",
        arg=0,
        timeout=15_000,
    )
    traces = lab.page.evaluate(TRACES_JS, 0)
    dimmed = [t for t in traces if t["name"] in ("CPU:0", "CPU:1")]
    assert dimmed and all(t["opacity"] == pytest.approx(0.25) for t in dimmed), traces
    matches = {t["name"]: t["n"] for t in traces if t["name"].endswith("matches")}
    assert matches.get("CPU:1 matches", 0) >= 1, matches  # C ran on the stand-in, CPU:1
    panel.screenshot(path=str(SCREENSHOTS / "tf2-panel-searched.png"))

    # The training step's panel: Keras's one_step_on_data, a page of its many ops.
    train = panels.nth(2)
    train.scroll_into_view_if_needed()
    lab.page.wait_for_timeout(300)
    shown, total = _showing(train)
    assert shown == total > 100, (shown, total)  # forward pass, gradients, Adam's updates
    train.screenshot(path=str(SCREENSHOTS / "tf2-panel-train-step.png"))
    assert not [e for e in lab.console_errors if "tfplace" in e.lower()]
