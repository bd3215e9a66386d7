"""The findings above the table in a real JupyterLab: drawn worst first, a click filters."""

from __future__ import annotations

from tfplace_widget._analyses.findings import PREDICTED_HEADER, PREDICTION_HEADER

from .conftest import SCREENSHOTS, write_notebook

CELLS = [
    "%load_ext tfplace_widget",
    """import numpy as np
import tensorflow as tf


def step():
    ds = tf.data.Dataset.from_tensor_slices(np.ones((8, 4), np.float32)).batch(2).repeat()
    batch = tf.compat.v1.data.make_one_shot_iterator(ds).get_next(name="batch")
    hidden = tf.matmul(batch, tf.ones((4, 4), name="w"), name="dense")
    counts = tf.cast(hidden, tf.int32, name="to_int")
    int_mm = tf.matmul(counts, tf.ones((4, 4), tf.int32, name="int_w"), name="int_matmul")
    back = tf.cast(int_mm, tf.float32, name="to_float")
    label = tf.strings.join(["sum: ", tf.strings.as_string(tf.reduce_sum(back))], name="label")
    return [tf.reduce_sum(back, name="loss"), label]


panel = show_placement(step, device_count={"CPU": 2})
panel""",
]
PANEL = ".tfplace-panel"
FINDING = f"{PANEL} .tfplace-finding"
ROWS_JS = """() => Array.from(
    document.querySelectorAll('.tfplace-panel .tfplace-table tbody tr'), (r) => r.dataset.op)"""
MATCHES_JS = """() => {
    const plot = document.querySelector('.tfplace-panel .js-plotly-plot');
    if (!plot || !plot.data) return 0;  // being drawn again: ask again
    return plot.data.filter((t) => t.name.endsWith('matches')).reduce(
        (n, t) => n + (t.y || []).length, 0);
}"""


def test_clicking_a_finding_filters_the_table_and_timeline(lab, jupyter_lab):
    name = write_notebook(jupyter_lab.root / "findings.ipynb", CELLS).name
    lab.open_notebook(name)
    lab.run_all_cells(timeout_s=240)
    assert not lab.errors()
    panel = lab.page.locator(PANEL).first
    panel.locator(".tfplace-table tbody tr").first.wait_for(timeout=30_000)
    findings = lab.page.locator(FINDING)
    findings.first.wait_for(timeout=15_000)
    # Above the table, worst first, with the fix in the message.
    boxes = [
        panel.locator(".tfplace-findings").bounding_box(),
        panel.locator(".tfplace-table").bounding_box(),
    ]
    assert boxes[0]["y"] + boxes[0]["height"] <= boxes[1]["y"]
    severities = findings.evaluate_all("(items) => items.map((i) => i.className)")
    assert "tfplace-severity-high" in severities[0]
    title = panel.locator(".tfplace-findings-title").inner_text()
    assert title.startswith(f"\u25be Findings: {findings.count()}")
    # Two CPUs, no GPU: every finding is a prediction for a machine with one, under the header
    # that says so (issue 24), above the first of them.
    header = panel.locator(".tfplace-findings-group")
    assert header.all_inner_texts() == [PREDICTED_HEADER]
    assert header.bounding_box()["y"] < findings.first.bounding_box()["y"]
    panel.scroll_into_view_if_needed()
    panel.screenshot(path=str(SCREENSHOTS / "findings-panel.png"))

    all_rows = lab.page.evaluate(ROWS_JS)
    cast = findings.filter(has_text="Cast to float32 before the MatMul (int_matmul)")
    assert cast.count() == 1
    # Its fix's edit, at the line of the cell that made the op, under the message; none for
    # the ping-pong, which has no fix.
    line = 1 + next(i for i, text in enumerate(CELLS[1].splitlines()) if '"int_matmul"' in text)
    edit = cast.locator(".tfplace-finding-edit")
    assert edit.inner_text().startswith("Edit: cast the inputs of int_matmul (In[")
    assert f":{line} in step) to float32" in edit.inner_text()
    message = cast.locator(".tfplace-finding-message").bounding_box()
    assert edit.bounding_box()["y"] >= message["y"] + message["height"] - 1
    ping_pong = findings.filter(has=lab.page.locator("code", has_text="ping_pong"))
    assert ping_pong.count() == 1 and ping_pong.locator(".tfplace-finding-edit").count() == 0
    cast.click()
    lab.page.wait_for_function(
        f"(n) => ({ROWS_JS})().length < n", arg=len(all_rows), timeout=15_000
    )
    rows = set(lab.page.evaluate(ROWS_JS))
    assert "int_matmul" in rows and rows <= {"int_matmul", "int_w"}, rows
    assert "tfplace-selected" in cast.get_attribute("class")
    lab.page.wait_for_function(f"() => ({MATCHES_JS})() > 0", timeout=15_000)
    assert panel.get_by_text("ops of the finding").count() == 1
    panel.screenshot(path=str(SCREENSHOTS / "findings-panel-filtered.png"))

    cast.click()  # a second click shows every op again
    lab.page.wait_for_function(
        f"(n) => ({ROWS_JS})().length === n", arg=len(all_rows), timeout=15_000
    )
    panel.locator(".tfplace-findings-title").click()  # collapse to the count
    lab.page.wait_for_function(
        "() => document.querySelectorAll('.tfplace-panel .tfplace-finding').length === 0",
        timeout=15_000,
    )
    # "as on a machine with 1 GPUs": the predicted placement, said so in the header.
    panel.get_by_label("as on a machine with").check()
    panel.locator(".tfplace-predicted").wait_for(timeout=30_000)
    lab.page.wait_for_function(
        "() => document.querySelector('.tfplace-panel .tfplace-findings-title')"
        ".textContent.includes('Findings: ')",
        timeout=15_000,
    )
    assert panel.locator(".tfplace-table tbody tr[data-op='int_matmul']").count() == 1
    # the table's rows may arrive after the header's (a second or two on a loaded machine)
    lab.page.wait_for_function(
        "() => Array.from(document.querySelectorAll("
        "'.tfplace-panel .tfplace-table tbody td[data-column=\"device\"]'),"
        " (c) => c.textContent).includes('GPU:0')",
        timeout=15_000,
    )
    devices = panel.locator(".tfplace-table tbody td[data-column='device']").all_inner_texts()
    assert "GPU:0" in devices and "CPU:0" in devices, devices
    # predict_placement's findings: all predicted, under the prediction's own header.
    assert panel.locator(".tfplace-findings-group").all_inner_texts() == [PREDICTION_HEADER]
    panel.screenshot(path=str(SCREENSHOTS / "findings-panel-predicted.png"))
    assert not [e for e in lab.console_errors if "tfplace" in e.lower()]
