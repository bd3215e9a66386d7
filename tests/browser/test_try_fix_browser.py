""" "Try this fix" in a real JupyterLab (issue 33): the seed experiment's ``inputs_cpu`` copies A
and B from CPU:0 to C on CPU:1; a click on its copy finding, then on "Try this fix", runs the
builder again with A and B on CPU:1 and shows the two runs compared, the copies gone."""

from __future__ import annotations

from .conftest import SCREENSHOTS, write_notebook

CELLS = [
    "%load_ext tfplace_widget",
    """import tensorflow as tf


def inputs_cpu():
    with tf.device("/cpu:0"):
        a = tf.ones((1000,), name="A")
        b = tf.ones((1000,), name="B")
    with tf.device("/cpu:1"):
        c = tf.add(a, b, name="C")
    return c


panel = show_placement(inputs_cpu, device_count={"CPU": 2})
panel""",
]
PANEL = ".tfplace-panel"
COMPARISON = f"{PANEL} .tfplace-comparison"


def test_try_this_fix_shows_the_comparison_with_the_copies_gone(lab, jupyter_lab):
    name = write_notebook(jupyter_lab.root / "try_fix.ipynb", CELLS).name
    lab.open_notebook(name)
    lab.run_all_cells(timeout_s=240)
    assert not lab.errors()
    panel = lab.page.locator(PANEL).first
    panel.locator(".tfplace-table tbody tr").first.wait_for(timeout=30_000)
    button = panel.locator(".tfplace-try-fix")
    assert button.is_hidden()  # no finding picked yet
    finding = panel.locator(".tfplace-finding", has_text="2 copies from CPU:0 to CPU:1")
    finding.click()
    button.wait_for(state="visible", timeout=15_000)
    button.click()

    comparison = lab.page.locator(COMPARISON)
    comparison.locator(".js-plotly-plot").nth(1).wait_for(timeout=60_000)
    message = panel.locator(".tfplace-message, .widget-html", has_text="Try this fix:").first
    message.wait_for(timeout=30_000)
    text = message.inner_text()
    assert "Try this fix: verified: the finding is gone, copies 3 -> 1" in text, text
    summary = comparison.inner_text()
    assert "a: without the fix" in summary
    moved = {
        row.get_attribute("data-op")
        for row in comparison.locator(".tfplace-table tbody tr").all()
        if row.locator("td[data-column='status']").inner_text() == "moved"
    }
    assert {"A", "B"} <= moved, moved
    comparison.scroll_into_view_if_needed()
    panel.screenshot(path=str(SCREENSHOTS / "try-this-fix.png"))
