"""Move one op and re-run, in a real JupyterLab: the comparison appears with the op outlined."""

from __future__ import annotations

from .conftest import SCREENSHOTS, write_notebook

CELLS = [
    "%load_ext tfplace_widget",
    """import tensorflow as tf


def seed():
    a = tf.ones((1000,), name="A")
    b = tf.ones((1000,), name="B")
    with tf.device("/cpu:1"):
        c = tf.add(a, b, name="C")
    return c


panel = show_placement(seed, device_count={"CPU": 2})
panel""",
]
PANEL = ".tfplace-panel"
COMPARISON = f"{PANEL} .tfplace-comparison"
# What plotly drew in each of the comparison's two timelines: the outlined ("matches") bars.
MATCHES_JS = """() => Array.from(
    document.querySelectorAll('.tfplace-comparison .js-plotly-plot'),
    (plot) => Object.fromEntries(plot.data.filter((t) => t.name.endsWith('matches'))
        .map((t) => [t.name, (t.y || []).length])))"""
TICKS_JS = """() => Array.from(
    document.querySelectorAll('.tfplace-comparison .js-plotly-plot'),
    (plot) => [Array.from(plot.layout.yaxis.ticktext), Array.from(plot.layout.xaxis.range),
               Array.from(plot.layout.yaxis.range)])"""


def test_move_an_op_rerun_and_see_it_outlined_in_both_timelines(lab, jupyter_lab):
    name = write_notebook(jupyter_lab.root / "compare.ipynb", CELLS).name
    lab.open_notebook(name)
    lab.run_all_cells(timeout_s=240)
    assert not lab.errors()
    panel = lab.page.locator(PANEL).first
    panel.locator(".tfplace-table tbody tr").first.wait_for(timeout=30_000)
    assert panel.locator(".tfplace-move-to").is_hidden()  # nothing picked yet

    panel.locator(".tfplace-table tbody tr[data-op='C']").click()
    move_to = panel.locator(".tfplace-move-to select")
    move_to.wait_for(state="visible", timeout=15_000)
    assert move_to.locator("option").all_inner_texts() == ["CPU:0"]  # not C's own CPU:1
    move_to.select_option(label="CPU:0")
    panel.locator(".tfplace-move-rerun").scroll_into_view_if_needed()
    lab.screenshot("comparison-move-to")
    panel.locator(".tfplace-move-rerun").click()

    lab.page.locator(f"{COMPARISON} .js-plotly-plot").nth(1).wait_for(timeout=60_000)
    lab.page.wait_for_function(
        f"() => ({MATCHES_JS})().length === 2 && ({MATCHES_JS})().every("
        "(m) => Object.values(m).some((n) => n > 0))",
        timeout=30_000,
    )
    before, after = lab.page.evaluate(MATCHES_JS)
    assert before == {"CPU:0 matches": 0, "CPU:1 matches": 1}, before  # C ran on CPU:1...
    assert after == {"CPU:0 matches": 1, "CPU:1 matches": 0}, after  # ...and now on CPU:0
    (ticks_a, x_a, y_a), (ticks_b, x_b, y_b) = lab.page.evaluate(TICKS_JS)
    assert ticks_a == ticks_b == ["CPU:0", "CPU:1"] and x_a == x_b  # aligned...
    assert y_a == y_b == [1.5, -0.5]  # ...and both lanes drawn, though b ran nothing on CPU:1
    comparison = lab.page.locator(COMPARISON)
    first = comparison.locator(".tfplace-table tbody tr").first
    assert first.get_attribute("data-op") == "C"
    assert first.locator("td[data-column='status']").inner_text() == "moved"
    assert "1 op moved: C (CPU:1 -> CPU:0)." in comparison.inner_text()
    single = panel.locator(":scope > .tfplace-table")  # the panel's own table
    assert single.count() == 1 and single.is_hidden()  # the single view is put away
    comparison.scroll_into_view_if_needed()
    panel.screenshot(path=str(SCREENSHOTS / "comparison-panel.png"))

    toggle = panel.locator(".tfplace-compare-toggle")
    assert "back to the single view" in toggle.inner_text()
    toggle.click()
    comparison.wait_for(state="hidden", timeout=15_000)
    single.wait_for(state="visible", timeout=15_000)
    devices = single.locator("tbody tr[data-op='C'] td[data-column='device']").all_inner_texts()
    assert devices == ["CPU:0"], devices  # the single view shows the new run
    assert not [e for e in lab.console_errors if "tfplace" in e.lower()]
