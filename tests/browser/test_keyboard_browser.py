"""The panel from the keyboard alone, and its table at 800 px, in JupyterLab and in Notebook 7.

Keyboard: Tab from the top of the panel reaches a device chip, a finding, the search box and the
table's rows (never plotly's mode-bar buttons); Enter presses a chip, shows a finding's ops,
picks a row (its details below, its bar ringed); typing narrows the table. Width: with the
notebook's output 800 px wide every column heading is inside the table's box, nothing scrolls
sideways, the pager sits above the rows, a name cut short is whole on hover, the requested
device is in its short form and the numbers are right-aligned.

Each test runs once per frontend (the ``frontend`` fixture: ``[lab]``, ``[notebook7]``); the
screenshots are named after it (``keyboard-row-picked-notebook7.png``).
"""

from __future__ import annotations

import re

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
    x = tf.ones((4,), name="x")
    for i in range(60):  # three pages of ops, with names longer than the op column
        with tf.name_scope(f"a_rather_long_scope_name_for_block_{i:02d}"):
            x = tf.add(x, 1.0, name="add_with_a_long_descriptive_name")
    with tf.device("/cpu:1"):
        y = tf.multiply(x, 2.0, name="scaled_on_cpu1")
    return [tf.reduce_sum(back, name="loss"), y]


panel = show_placement(step, device_count={"CPU": 2})
panel""",
]
PANEL = ".tfplace-panel"
ROWS = f"{PANEL} .tfplace-table tbody tr"
# What has the focus, described: enough to tell a chip, a finding, the search box, a row apart.
FOCUSED_JS = """() => {
    const e = document.activeElement;
    if (!e) return {};
    return {
        tag: e.tagName, cls: String(e.className), op: e.dataset.op ?? null,
        column: e.dataset.column ?? null, index: e.dataset.index ?? null,
        modebar: e.classList.contains('modebar-btn'),
        input: e.tagName === 'INPUT' ? e.type : null,
        label: e.labels && e.labels.length ? e.labels[0].textContent : null,
        inPanel: Boolean(e.closest('.tfplace-panel')),
    };
}"""
# "showing N of M ops": N, the ops the filters keep.
SHOWN_JS = f"""() => Number(/showing ([\\d,]+) of/.exec(
    document.querySelector('{PANEL}').innerText)[1].replace(/,/g, ''))"""
ROW_OPS_JS = f"""() => Array.from(document.querySelectorAll('{ROWS}'), (r) => r.dataset.op)"""


def _accept_kernel_dialog(lab, timeout_ms: int) -> bool:
    """Pick the default kernel if JupyterLab asks for one within ``timeout_ms``: on a loaded
    machine the dialog can come after ``open_notebook`` stopped waiting for it."""
    dialog = lab.page.locator(".jp-Dialog")
    try:
        dialog.wait_for(timeout=timeout_ms)
    except Exception:
        return False
    if "kernel" not in dialog.inner_text().lower():
        return False
    dialog.locator(".jp-mod-accept").click()
    lab.wait_for_kernel_idle()
    return True


def _shot(lab, name: str) -> str:
    """Where the screenshot ``name`` of this frontend goes: ``<name>-<frontend>.png``."""
    return str(SCREENSHOTS / f"{name}-{lab.server.app}.png")


def _open_panel(lab, name: str):
    write_notebook(lab.server.root / name, CELLS)
    lab.open_notebook(name)
    _accept_kernel_dialog(lab, 8_000)
    panel = lab.page.locator(PANEL).first
    rows = panel.locator(".tfplace-table tbody tr").first
    try:
        lab.run_all_cells(timeout_s=240)
        rows.wait_for(timeout=30_000)
    except Exception:
        if not _accept_kernel_dialog(lab, 1_000):
            raise
        lab.run_all_cells(timeout_s=240)
        rows.wait_for(timeout=30_000)
    assert not lab.errors()
    panel.locator(".tfplace-finding").first.wait_for(timeout=30_000)
    return panel


def _tab_until(lab, wanted, seen: list[dict], limit: int = 80) -> dict:
    """Press Tab until ``wanted(focused)``; every element passed is added to ``seen``."""
    for _ in range(limit):
        lab.page.keyboard.press("Tab")
        focused = lab.page.evaluate(FOCUSED_JS)
        seen.append(focused)
        if wanted(focused):
            return focused
    raise AssertionError(f"not reached in {limit} Tabs; passed: {seen[-limit:]}")


def test_the_panel_from_the_keyboard_alone(frontend):
    """In Notebook 7 too: its app starts without ``bubblingKeydown``, so its command-mode
    shortcuts saw a row's ArrowDown first (the focus went to the notebook's footer) until each
    row carried ``data-lm-suppress-shortcuts`` (_static/table.js); each ArrowDown is checked to
    leave the focus on a row."""
    lab = frontend
    panel = _open_panel(lab, "keyboard.ipynb")
    page = lab.page
    all_ops = page.evaluate(ROW_OPS_JS)
    total = page.evaluate(SHOWN_JS)
    panel.scroll_into_view_if_needed()
    # Start where a reader starts: the panel's header (a click sets where Tab goes from).
    panel.locator(".widget-html").first.click(position={"x": 2, "y": 2})
    seen: list[dict] = []

    # A device chip: Enter presses it, the table keeps only that device's ops.
    _tab_until(lab, lambda f: "tfplace-chip" in f["cls"], seen)
    page.keyboard.press("Enter")
    page.wait_for_function(
        f"""() => document.querySelector('{PANEL} .tfplace-chip.mod-active') !== null
            && ({SHOWN_JS})() < {total}""",
        timeout=15_000,
    )
    page.keyboard.press("Enter")  # and again: every op back
    page.wait_for_function(
        f"""() => document.querySelector('{PANEL} .tfplace-chip.mod-active') === null
            && ({SHOWN_JS})() === {total}""",
        timeout=15_000,
    )

    # A finding: Enter shows only its ops; it says so to screen readers (aria-pressed).
    finding = _tab_until(lab, lambda f: f["index"] is not None, seen)
    item = panel.locator(f".tfplace-finding[data-index='{finding['index']}']")
    assert item.get_attribute("role") == "button" and item.get_attribute("aria-label")
    page.keyboard.press("Enter")
    page.wait_for_function(
        f"""(i) => {{
            const li = document.querySelector('{PANEL} .tfplace-finding[data-index="' + i + '"]');
            return li && li.getAttribute('aria-pressed') === 'true'
                && document.activeElement === li;
        }}""",
        arg=finding["index"],
        timeout=15_000,
    )
    page.wait_for_function(
        f"(n) => document.querySelectorAll('{ROWS}').length < n", arg=len(all_ops)
    )
    panel.screenshot(path=_shot(lab, "keyboard-finding-focused"))
    page.keyboard.press("Space")  # Space: every op again
    page.wait_for_function(
        f"(n) => document.querySelectorAll('{ROWS}').length === n", arg=len(all_ops)
    )

    # The search box, by its label; typing narrows the table.
    box = _tab_until(lab, lambda f: f["input"] == "text", seen)
    assert box["inPanel"] and box["label"] == "search", box
    page.keyboard.type("scaled", delay=40)
    page.wait_for_function(
        f"() => {{ const ops = ({ROW_OPS_JS})(); "
        "return ops.length > 0 && ops.every((op) => op.includes('scaled')); }",
        timeout=15_000,
    )

    # On to the table, past the timeline: no mode-bar button on the way; Enter on a header
    # sorts, Enter on the row picks its op (details below, its bar ringed in the timeline).
    header = _tab_until(lab, lambda f: f["tag"] == "TH", seen)
    assert all(not f["modebar"] for f in seen), [f for f in seen if f["modebar"]]
    page.keyboard.press("Enter")
    page.wait_for_function(
        f"""(c) => document.querySelector('{PANEL} th[data-column="' + c + '"]')
            .getAttribute('aria-sort') !== 'none'""",
        arg=header["column"],
    )
    row = _tab_until(lab, lambda f: f["tag"] == "TR", seen)
    assert "scaled_on_cpu1" in row["op"], row  # one of the ops the search kept
    for _ in range(8):  # Down (or up) to the op itself
        # The focused row and the rows' order, read together: the sorted rows may be drawn after
        # the first row took the focus (a loaded machine), and the op may then be above it.
        focused, ops = page.evaluate(f"() => [({FOCUSED_JS})(), ({ROW_OPS_JS})()]")
        assert focused["tag"] == "TR" and focused["inPanel"], (
            "an arrow key took the focus out of the table",
            focused,
        )
        if focused["op"] == "scaled_on_cpu1":
            break
        below = ops.index("scaled_on_cpu1") > ops.index(focused["op"])
        page.keyboard.press("ArrowDown" if below else "ArrowUp")
        # The next row has the focus before it is read (CI read the row above, loaded, and went
        # on pressing past the op), unless the sorted rows came between the read and the key:
        # the key then went the way the old order said, which moves nothing on the first or the
        # last row (CI's focus stayed on its row for 30 s), and the loop reads the new order.
        page.wait_for_function(
            f"""([op, order]) => {{
                const now = document.activeElement;
                return (now && now.dataset.op !== op)
                    || ({ROW_OPS_JS})().join('\\n') !== order;
            }}""",
            arg=[focused["op"], "\n".join(ops)],
        )
    page.keyboard.press("Enter")
    page.wait_for_function(
        f"""() => {{
            const tr = document.querySelector('{ROWS}.tfplace-selected');
            return tr && tr.dataset.op === 'scaled_on_cpu1' && document.activeElement === tr
                && tr.getAttribute('aria-selected') === 'true';
        }}""",
        timeout=15_000,
    )
    panel.locator("code", has_text="scaled_on_cpu1").first.wait_for(timeout=10_000)
    page.wait_for_function(  # the timeline's ring on the picked op's bar
        f"""() => {{
            const plot = document.querySelector('{PANEL} .js-plotly-plot');
            return (plot?.data || []).some((t) => t.name === 'selected' && (t.x || []).length > 0);
        }}""",
        timeout=15_000,
    )
    ring = page.evaluate(
        "() => getComputedStyle(document.activeElement).outlineStyle + ' '"
        " + getComputedStyle(document.activeElement).outlineWidth"
    )
    assert ring.startswith("solid") and not ring.endswith(" 0px"), ring  # a visible focus ring
    panel.screenshot(path=_shot(lab, "keyboard-row-picked"))
    # The modebar buttons are there for the mouse, out of the tab order.
    tabindexes = panel.locator(".modebar-btn").evaluate_all(
        "(buttons) => buttons.map((b) => b.tabIndex)"
    )
    assert tabindexes and all(t == -1 for t in tabindexes), tabindexes
    assert not [e for e in lab.console_errors if "tfplace" in e.lower()]


# Every heading inside the box and nothing cut off to the right; the pager above the rows.
FIT_JS = f"""() => {{
    const panel = document.querySelector('{PANEL}');
    const box = panel.querySelector('.tfplace-table-scroll');
    const outer = box.getBoundingClientRect();
    const heads = Array.from(box.querySelectorAll('th'), (th) => {{
        const r = th.getBoundingClientRect();
        return {{column: th.dataset.column, left: r.left, right: r.right, width: r.width,
                 cut: th.scrollWidth > th.clientWidth}};
    }});
    const pager = panel.querySelector('.tfplace-pager').getBoundingClientRect();
    const firstRow = box.querySelector('tbody tr').getBoundingClientRect();
    const output = panel.closest('.jp-OutputArea-output').getBoundingClientRect();
    return {{
        output: output.width, box: {{left: outer.left, right: outer.right}}, heads,
        sideways: box.scrollWidth > box.clientWidth + 1,
        pagerAbove: pager.bottom <= firstRow.top + 1, pagerHeight: pager.height,
        pagerText: panel.querySelector('.tfplace-pager').innerText,
    }};
}}"""


def _set_output_width(lab, width: int) -> float:
    """Resize the window so that the panel's output area is ``width`` px wide."""
    page = lab.page
    measure = f"() => document.querySelector('{PANEL}').closest('.jp-OutputArea-output')"
    measure += ".getBoundingClientRect().width"
    for _ in range(4):
        now = page.evaluate(measure)
        if abs(now - width) < 1:
            break
        size = page.viewport_size
        page.set_viewport_size({"width": int(size["width"] - (now - width)), "height": 1000})
        page.wait_for_timeout(600)  # JupyterLab lays out again, the table follows
    return page.evaluate(measure)


def test_the_table_fits_800_px_with_the_pager_above_the_rows(frontend):
    lab = frontend
    panel = _open_panel(lab, "narrow.ipynb")
    for width in (968, 800):
        got = _set_output_width(lab, width)
        assert abs(got - width) < 2, got
        table = panel.locator(".tfplace-table")
        table.scroll_into_view_if_needed()
        fit = lab.page.evaluate(FIT_JS)
        assert len(fit["heads"]) == 9
        outside = [
            h
            for h in fit["heads"]
            if h["left"] < fit["box"]["left"] - 1 or h["right"] > fit["box"]["right"] + 1
        ]
        assert not outside, (width, outside, fit["box"])
        assert not [h for h in fit["heads"] if h["cut"]], (width, fit["heads"])
        assert not fit["sideways"], width
        assert fit["pagerAbove"] and fit["pagerHeight"] > 0, fit
        assert re.search(r"page 1 of [2-9]", fit["pagerText"]), fit["pagerText"]
        table.screenshot(path=_shot(lab, f"table-{width}px"))
    # A long name is cut with an ellipsis, whole on hover; requested devices in short form;
    # numbers right-aligned.
    cells = lab.page.evaluate(
        f"""() => Array.from(document.querySelectorAll('{ROWS} td'), (td) => ({{
            column: td.dataset.column, text: td.textContent, title: td.title,
            cut: td.scrollWidth > td.clientWidth, align: getComputedStyle(td).textAlign}}))"""
    )
    cut_ops = [c for c in cells if c["column"] == "op" and c["cut"]]
    assert cut_ops and all(c["title"] == c["text"] for c in cut_ops), cut_ops[:3]
    # every long name on the page is cut (which other names are cut depends on the row order,
    # the ops' start times, and on the font: not asserted)
    long_names = [
        c for c in cells if c["column"] == "op" and c["text"].startswith("a_rather_long_scope")
    ]
    assert long_names and all(c["cut"] for c in long_names), long_names[:3]
    for c in cells:
        if c["column"] in ("start_us", "duration_us", "runs"):
            assert c["align"] == "right", c
    # The op placed with tf.device("/cpu:1"): its request in short form, whole on hover.
    panel.locator("input[type=text]").first.fill("scaled")
    lab.page.wait_for_function(
        f"() => Array.from(document.querySelectorAll('{ROWS}'))"
        ".some((r) => r.dataset.op === 'scaled_on_cpu1')",
        timeout=15_000,
    )
    requested = panel.locator(
        ".tfplace-table tr[data-op='scaled_on_cpu1'] td[data-column='requested_device']"
    )
    assert requested.inner_text() == "CPU:1", requested.inner_text()
    assert requested.get_attribute("title").endswith("CPU:1")
    panel.screenshot(path=_shot(lab, "table-800px-panel"))
