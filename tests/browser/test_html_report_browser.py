"""The static HTML report opened from disk in headless Chromium: no server, no kernel, no network.

The file is written by ``export.html.write_html`` from real traces (the seed experiment run in
a Session, a vendored GPU trace, a generated 10k-op graph), opened as ``file://``, and used as a
person would: type into the search box, tick ``regex``, click a row, click a bar. The table,
"showing N of M" and the timeline's traces (plotly.js's own ``gd.data``) must follow.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_findings_predicted import copy_and_int_matmul

from tfplace_widget import PlacementTrace
from tfplace_widget._analyses.findings import MEASURED_HEADER, PREDICTED_HEADER
from tfplace_widget._export.html import SEARCH_JS, write_html
from tfplace_widget._rendering.search import match_names

from .conftest import SCREENSHOTS, VIEWPORT

REPO = Path(__file__).resolve().parents[2]
GPU_TRACES_DIR = REPO / "tfplace_widget" / "examples" / "gpu_traces"
READY_MS = 30_000
# What plotly.js drew: each trace's name, opacity and number of points.
TRACES_JS = """() => document.getElementById('tfplace-timeline').data.map(
    (t) => ({name: t.name, opacity: t.opacity, n: (t.x || []).length}))"""
ROWS_JS = (
    "() => Array.from(document.querySelectorAll('#tfplace-table tbody tr'), (r) => r.dataset.op)"
)


class Report:
    """A report open in a page, with the steps a reader takes."""

    def __init__(self, page: Any) -> None:
        self.page = page

    def rows(self) -> list[str]:
        return self.page.evaluate(ROWS_JS)

    def status(self) -> str:
        return self.page.inner_text("#tfplace-status")

    def traces(self) -> dict[str, dict]:
        return {t["name"]: t for t in self.page.evaluate(TRACES_JS)}

    def type(self, text: str, *, clear: bool = True) -> None:
        """Type ``text`` into the search box, and wait until the table has changed."""
        before = self.status()
        box = self.page.locator("#tfplace-search")
        if clear:
            box.fill("")
        box.click()
        box.press_sequentially(text, delay=40)
        self.page.wait_for_function(
            "(before) => document.getElementById('tfplace-status').innerText !== before",
            arg=before,
            timeout=10_000,
        )
        self.page.wait_for_timeout(100)  # the timeline redraw after the last keystroke


@pytest.fixture
def open_report(chromium, request) -> Iterator:
    """``open_report(path, dark=False)``: a fresh page on ``file://path``, ready (table and
    timeline drawn); pages that raised or logged errors fail the test."""
    contexts, errors = [], []

    def opener(path: Path, *, dark: bool = False) -> Report:
        context = chromium.new_context(
            viewport=VIEWPORT, color_scheme="dark" if dark else "light", offline=True
        )
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("dialog", lambda d: errors.append(f"dialog: {d.message}") or d.dismiss())
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(path.resolve().as_uri())
        page.wait_for_function("document.body.dataset.ready === 'true'", timeout=READY_MS)
        assert all(url.startswith("file://") for url in requests), requests
        return Report(page)

    yield opener
    for context in contexts:
        context.close()
    assert not errors, errors


def test_a_line_of_code_finds_its_op_and_the_details_name_the_line(seed_cpu, open_report, tmp_path):
    """Searching ``conftest.py:N`` (the line that made C) lists C alone; C's details say that
    line (its full path in the tooltip), a copy's that TensorFlow's runtime made it."""
    ops = seed_cpu.ops.set_index("op")
    source, path = ops.loc["C", "source"], ops.loc["C", "source_path"]
    report = open_report(write_html(seed_cpu, tmp_path / "seed.html"))
    report.type(source.split(" in ")[0])
    assert report.rows() == ["C"]
    report.page.click("#tfplace-table tbody tr[data-op='C']")
    details = report.page.locator("#tfplace-details")
    details.wait_for(state="visible")
    assert f"source: {source}" in details.inner_text()
    assert details.locator(".tfplace-source").get_attribute("title") == path
    report.page.screenshot(path=str(SCREENSHOTS / "html-report-source.png"), full_page=True)
    recv = ops.index[ops["type"] == "_Recv"][0]
    report.type("")  # every op again (the seed's fit one page)
    report.page.click(f"#tfplace-table tbody tr[data-op='{recv}']")
    assert "made by TensorFlow's runtime, not by your code" in details.inner_text()


def test_seed_report_search_narrows_table_and_timeline(seed_cpu, open_report, tmp_path):
    path = write_html(seed_cpu, tmp_path / "seed.html")
    report = open_report(path)
    total = len(seed_cpu.ops)
    assert sorted(report.rows()) == sorted(seed_cpu.ops["op"])
    assert report.status() == f"showing {total} of {total} ops"
    assert "TensorFlow placement" in report.page.inner_text("#tfplace-header")
    traces = report.traces()
    assert traces["CPU:0"]["opacity"] == 1 and traces["CPU:1 matches"]["n"] == 0
    report.page.screenshot(path=str(SCREENSHOTS / "html-report-seed.png"), full_page=True)

    report.type("C")
    rows = report.rows()
    want = seed_cpu.ops["op"][match_names(seed_cpu.ops["op"], "C")].tolist()
    assert sorted(rows) == sorted(want) and "C" in rows and len(rows) < total
    assert report.status() == f"showing {len(want)} of {total} ops"
    traces = report.traces()
    assert traces["CPU:0"]["opacity"] == pytest.approx(0.25)
    assert traces["CPU:1"]["opacity"] == pytest.approx(0.25)
    assert traces["CPU:1 matches"]["n"] >= 1  # C ran on CPU:1
    report.page.screenshot(path=str(SCREENSHOTS / "html-report-seed-searched.png"), full_page=True)

    # A glob, then a regex (ticked): the panel's rules.
    report.type("_s*n*")
    want = seed_cpu.ops["op"][match_names(seed_cpu.ops["op"], "_s*n*")].tolist()
    assert sorted(report.rows()) == sorted(want)
    report.page.check("#tfplace-regex")
    report.type("^C$")
    assert report.rows() == ["C"]
    assert report.traces()["CPU:1 matches"]["n"] == 1
    report.type("(")  # a bad pattern: a message, the last result stays
    message = report.page.locator("#tfplace-message")
    message.wait_for(state="visible", timeout=5_000)
    assert message.inner_text().startswith("Invalid regular expression '('")

    # A click on a row rings the op in the timeline and shows why it is there.
    report.page.uncheck("#tfplace-regex")
    report.type("C")
    report.page.click("#tfplace-table tbody tr[data-op='C']")
    details = report.page.locator("#tfplace-details")
    details.wait_for(state="visible")
    assert "explicit" in details.inner_text() and "CPU:1" in details.inner_text()
    report.page.wait_for_function(
        "() => document.getElementById('tfplace-timeline').data"
        ".some((t) => t.name === 'selected' && (t.x || []).length === 1)"
    )
    report.type("")  # cleared: every op back, nothing dimmed
    assert len(report.rows()) == total
    assert report.traces()["CPU:0"]["opacity"] == 1


def test_gpu_report_click_a_bar_and_chips(open_report, tmp_path):
    trace = PlacementTrace.from_chrome_trace(GPU_TRACES_DIR / "riptide" / "timeline.ctf.json")
    path = write_html(trace, tmp_path / "riptide.html", search="grad")
    report = open_report(path, dark=True)
    want = trace.ops["op"][match_names(trace.ops["op"], "grad")].tolist()
    assert report.page.input_value("#tfplace-search") == "grad"
    assert sorted(report.rows()) == sorted(want)
    matches = report.traces()["GPU:0 matches"]
    assert matches["n"] > 0 and not report.page.evaluate(
        "() => document.getElementById('tfplace-timeline')._fullData[0].type === 'scattergl'"
    )
    report.page.screenshot(path=str(SCREENSHOTS / "html-report-gpu-dark.png"), full_page=True)
    # The CPU:0 chip keeps CPU:0's ops (none of them match "grad": cleared first).
    report.type("")
    report.page.click("#tfplace-chips button[data-device$='CPU:0']")
    report.page.wait_for_function(
        "() => document.querySelectorAll('#tfplace-table tbody tr').length === "
        f"{int((trace.ops['device'] == trace.devices[-1]).sum())}"
    )
    assert set(
        report.page.evaluate(
            "() => Array.from(document.querySelectorAll('#tfplace-table td[data-column=device]'),"
            " (td) => td.textContent)"
        )
    ) == {"CPU:0"}
    report.page.click("#tfplace-chips button[data-device$='CPU:0']")
    # Click the longest drawn bar: its op is picked, its row shown and selected.
    box = report.page.evaluate(
        """() => {
            const paths = Array.from(document.querySelectorAll('#tfplace-timeline .barlayer .point path'));
            const boxes = paths.map((p) => p.getBoundingClientRect());
            const widest = boxes.reduce((a, b) => (b.width > a.width ? b : a));
            return {x: widest.x + widest.width / 2, y: widest.y + widest.height / 2};
        }"""
    )
    report.page.mouse.click(box["x"], box["y"])
    selected = report.page.locator("#tfplace-table tr.tfplace-selected")
    selected.wait_for(timeout=5_000)
    op = selected.get_attribute("data-op")
    assert op in set(trace.ops["op"])
    assert op in report.page.inner_text("#tfplace-details")


def test_names_stay_text_in_the_page(seed_cpu, open_report, tmp_path):
    hostile = "C</script><img src=x onerror=alert(1)>"
    ops = seed_cpu.ops.assign(op=seed_cpu.ops["op"].replace({"C": hostile}))
    events = seed_cpu.events.assign(op=seed_cpu.events["op"].replace({"C": hostile}))
    trace = dataclasses.replace(seed_cpu, ops=ops, events=events)
    report = open_report(write_html(trace, tmp_path / "hostile.html", search="<img"))
    assert report.rows() == [hostile]  # shown as text, found by its text
    assert report.page.locator("img").count() == 0
    assert report.traces()["CPU:1 matches"]["n"] == 1


def _graphs() -> Any:
    spec = importlib.util.spec_from_file_location("_bench_graphs", REPO / "benchmarks/graphs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_10k_ops_webgl_report(trace_placement, open_report, tmp_path):
    graphs = _graphs()
    trace = trace_placement(graphs.builder(graphs.make_graph_def(10_000)), device_count={"CPU": 4})
    report = open_report(write_html(trace, tmp_path / "10k.html"))
    assert report.page.evaluate(
        "() => document.getElementById('tfplace-timeline')._fullData[0].type === 'scattergl'"
    )
    assert len(report.rows()) == 50  # one page
    assert "page 1 of" in report.page.inner_text(".tfplace-pager")
    report.type("c3/add1")
    want = int(match_names(trace.ops["op"], "c3/add1").sum())
    assert report.status().startswith(f"showing {want:,} of {len(trace.ops):,} ops")
    matches = sum(t["n"] for name, t in report.traces().items() if name.endswith("matches"))
    assert 0 < matches <= 3 * 2_000  # three points per GL bar, at most MAX_MATCH_BARS
    ms = float(report.page.evaluate("() => document.body.dataset.readyMs"))
    print(f"\n10k-op report ready {ms:.0f} ms after navigation")


def test_chromium_runs_the_search_as_the_table_says(chromium):
    """The page's search in Chromium's own regex engine, on the table of cases that
    ``tests/rendering/test_search_cases.py`` checks ``search.py`` and node on."""
    from test_search_cases import CASES, NAMES

    queries = [[case["pattern"], case["regex"], case["case"]] for case in CASES]
    page = chromium.new_page()
    try:
        answers = page.evaluate(
            "([names, queries]) => {"
            + SEARCH_JS
            + """
            const lowered = names.map((n) => n.toLowerCase());
            return queries.map(([text, regex, caseSensitive]) => {
              try {
                return {mask: Array.from(matchNames(names, lowered, text, regex, caseSensitive))};
              } catch (error) {
                if (!(error instanceof SearchError)) throw error;
                return {error: error.message};
              }
            });
            }""",
            [NAMES, queries],
        )
    finally:
        page.close()
    disagree = []
    for case, answer in zip(CASES, answers, strict=True):
        expected = None if case.get("error") else case.get("js_matches", case.get("matches"))
        got = (
            None
            if "error" in answer
            else [n for n, hit in zip(NAMES, answer["mask"], strict=True) if hit]
        )
        if got != expected:
            disagree.append((case, answer))
    assert not disagree, json.dumps(disagree, ensure_ascii=False)


def test_cluster_report_groups_chips_per_task(trace_placement, open_report, tmp_path):
    import tensorflow as tf

    def build() -> Any:
        v1 = tf.compat.v1
        with v1.device(v1.train.replica_device_setter(ps_tasks=1)):
            w = tf.Variable(tf.ones((10, 10)), name="w")
        with tf.device("/job:worker/task:1"):
            return tf.reduce_sum(tf.matmul(tf.ones((2, 10)), w), name="z")

    trace = trace_placement(
        build, mode="graph", cluster="local:worker=2,ps=1", device_count={"CPU": 2}
    )
    report = open_report(write_html(trace, tmp_path / "cluster.html"))
    tasks = report.page.locator("#tfplace-chips .tfplace-task").all_inner_texts()
    assert tasks == ["/job:ps/task:0", "/job:worker/task:0", "/job:worker/task:1"]
    first_group = report.page.locator("#tfplace-chips .tfplace-task-group").first
    assert first_group.locator("button").count() == 2  # the ps task's two CPUs
    assert first_group.locator("button").first.inner_text().startswith("CPU:0 · ")
    assert "between tasks" in report.page.inner_text("body")
    report.page.screenshot(path=str(SCREENSHOTS / "html-report-cluster.png"), full_page=True)
    first_group.locator("button").first.click()
    ps_ops = int((trace.ops["device"] == trace.devices[0]).sum())
    report.page.wait_for_function(
        f"() => document.querySelectorAll('#tfplace-table tbody tr').length === {ps_ops}"
    )
    devices = report.page.evaluate(
        "() => Array.from(document.querySelectorAll('#tfplace-table td[data-column=device]'),"
        " (td) => td.textContent)"
    )
    assert set(devices) == {"/job:ps/task:0/CPU:0"}


FOCUSED_JS = """() => {
    const e = document.activeElement;
    return {tag: e.tagName, id: e.id, op: e.dataset.op ?? null, column: e.dataset.column ?? null,
            device: e.dataset.device ?? null, modebar: e.classList.contains('modebar-btn')};
}"""


def test_report_from_the_keyboard_and_at_800_px(open_report, tmp_path):
    trace = PlacementTrace.from_chrome_trace(GPU_TRACES_DIR / "riptide" / "timeline.ctf.json")
    report = open_report(write_html(trace, tmp_path / "riptide.html"))
    page = report.page
    # The table at 800 px (the page's 16 px padding each side): every heading inside its box,
    # nothing to scroll sideways, the pager above the rows.
    page.set_viewport_size({"width": 832, "height": 1000})
    page.wait_for_timeout(300)
    fit = page.evaluate(
        """() => {
            const box = document.querySelector('#tfplace-table .tfplace-table-scroll');
            const outer = box.getBoundingClientRect();
            const heads = Array.from(box.querySelectorAll('th'), (th) => {
                const r = th.getBoundingClientRect();
                return {column: th.dataset.column, inside: r.left >= outer.left - 1
                        && r.right <= outer.right + 1, cut: th.scrollWidth > th.clientWidth};
            });
            const pager = document.querySelector('#tfplace-table .tfplace-pager');
            const row = box.querySelector('tbody tr').getBoundingClientRect();
            return {width: outer.width, heads, sideways: box.scrollWidth > box.clientWidth + 1,
                    pagerAbove: pager.getBoundingClientRect().bottom <= row.top + 1};
        }"""
    )
    assert abs(fit["width"] - 800) < 2, fit["width"]
    assert len(fit["heads"]) == 9 and all(h["inside"] and not h["cut"] for h in fit["heads"]), fit
    assert not fit["sideways"] and fit["pagerAbove"], fit
    page.screenshot(path=str(SCREENSHOTS / "html-report-800px.png"), full_page=True)

    # From the keyboard: Tab to the search box, type, Tab on to the rows (past the timeline's
    # mode bar, which is out of the tab order), Enter picks the op.
    seen = []

    def tab_until(wanted):
        for _ in range(60):
            page.keyboard.press("Tab")
            seen.append(page.evaluate(FOCUSED_JS))
            if wanted(seen[-1]):
                return seen[-1]
        raise AssertionError(seen)

    chip = tab_until(lambda f: f["device"] is not None)
    page.keyboard.press("Enter")
    page.wait_for_function(
        '(d) => document.querySelector(`#tfplace-chips button[data-device="${d}"]`)'
        ".getAttribute('aria-pressed') === 'true'",
        arg=chip["device"],
    )
    page.keyboard.press("Space")  # and off again
    tab_until(lambda f: f["id"] == "tfplace-search")
    before = report.status()
    page.keyboard.type("grad", delay=30)
    page.wait_for_function(
        "(b) => document.getElementById('tfplace-status').innerText !== b", arg=before
    )
    header = tab_until(lambda f: f["tag"] == "TH")
    page.keyboard.press("Enter")
    page.wait_for_function(
        '(c) => document.querySelector(`#tfplace-table th[data-column="${c}"]`)'
        ".getAttribute('aria-sort') === 'ascending' && document.activeElement.tagName === 'TH'",
        arg=header["column"],
    )
    row = tab_until(lambda f: f["tag"] == "TR")
    assert "grad" in row["op"].lower(), row
    page.keyboard.press("ArrowDown")
    second = page.evaluate(FOCUSED_JS)
    assert second["tag"] == "TR" and second["op"] != row["op"], second
    page.keyboard.press("Enter")
    selected = page.locator("#tfplace-table tr.tfplace-selected")
    selected.wait_for(timeout=5_000)
    assert selected.get_attribute("data-op") == second["op"]
    assert page.evaluate(FOCUSED_JS)["op"] == second["op"]  # the focus stays on the row
    assert second["op"] in page.inner_text("#tfplace-details")
    assert not [f for f in seen if f["modebar"]], seen
    tabindexes = page.locator(".modebar-btn").evaluate_all("(b) => b.map((x) => x.tabIndex)")
    assert tabindexes and all(t == -1 for t in tabindexes), tabindexes
    page.screenshot(path=str(SCREENSHOTS / "html-report-keyboard.png"), full_page=True)


# -- findings (issue 24) -----------------------------------------------------------------------
# The findings section in document order: each header's text and each finding's kind.
SECTION_JS = """() => Array.from(
    document.querySelectorAll('#tfplace-findings .tfplace-findings-group, #tfplace-findings button'),
    (n) => n.tagName === 'BUTTON' ? 'finding:' + n.dataset.kind : 'header:' + n.textContent)"""
ROWS_JS = """() => Array.from(document.querySelectorAll('#tfplace-table tbody tr'), (r) => r.dataset.op)"""


def test_the_report_groups_predicted_findings_and_a_click_filters(
    tf, trace_placement, open_report, tmp_path
):
    trace = trace_placement(lambda: copy_and_int_matmul(tf), device_count={"CPU": 2})
    report = open_report(write_html(trace, tmp_path / "cpu.html"))
    page = report.page
    section = page.evaluate(SECTION_JS)
    headers = [s for s in section if s.startswith("header:")]
    assert headers == [f"header:{MEASURED_HEADER}", f"header:{PREDICTED_HEADER}"], section
    predicted_at = section.index(f"header:{PREDICTED_HEADER}")
    assert "finding:costly_transfer" in section[1:predicted_at]
    assert {"finding:cpu_fallback", "finding:ping_pong"} <= set(section[predicted_at:])
    page.locator("#tfplace-findings").screenshot(path=str(SCREENSHOTS / "html-report-findings.png"))
    every = page.evaluate(ROWS_JS)
    fallback = page.locator("#tfplace-findings button[data-kind='cpu_fallback']")
    fallback.focus()
    page.keyboard.press("Enter")  # a button: the keyboard reaches it, Enter clicks
    page.wait_for_function(f"(n) => ({ROWS_JS})().length < n", arg=len(every))
    rows = set(page.evaluate(ROWS_JS))
    finding = trace.findings[trace.findings["kind"] == "cpu_fallback"].iloc[0]
    assert "int_matmul" in rows and rows <= set(finding["ops"]), rows
    assert fallback.get_attribute("aria-pressed") == "true"
    fallback.click()  # again: every op
    page.wait_for_function(f"(n) => ({ROWS_JS})().length === n", arg=len(every))


def test_a_gpu_trace_report_draws_no_header(open_report, tmp_path):
    # ikhlestov's: its host-to-GPU copy is half the step (KittiBox's findings are each under
    # 0.1% of its step, so none is listed)
    recorded = GPU_TRACES_DIR / "ikhlestov-tensorflow-profiling" / "GPU_timeline_01.json"
    trace = PlacementTrace.from_chrome_trace(recorded)
    report = open_report(write_html(trace, tmp_path / "gpu.html"))
    section = report.page.evaluate(SECTION_JS)
    assert len(section) == len(trace.findings) > 0
    assert all(s.startswith("finding:") for s in section), section


def test_the_report_offers_no_button_that_sends_the_figure_to_plotly(open_report, tmp_path):
    """Issue 31: plotly.js's "Edit in Chart Studio" mode-bar button (``showSendToCloud``, on
    by default) was in the report: a click posts the figure to plotly's cloud."""
    # ikhlestov's: its host-to-GPU copy is half the step (KittiBox's findings are each under
    # 0.1% of its step, so none is listed)
    recorded = GPU_TRACES_DIR / "ikhlestov-tensorflow-profiling" / "GPU_timeline_01.json"
    trace = PlacementTrace.from_chrome_trace(recorded)
    report = open_report(write_html(trace, tmp_path / "gpu.html"))
    titles = report.page.locator(".modebar-btn").evaluate_all(
        "(b) => b.map((x) => x.getAttribute('data-title') || '')"
    )
    assert titles and not [t for t in titles if "Chart Studio" in t or "Share" in t], titles
