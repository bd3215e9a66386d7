"""The HTML report of a real XLA:CPU run (issue 23) opened from disk in headless Chromium: the op
table has the ``xla_op`` column (each op's HLO instruction, as in ``trace.ops``) and the page
lists the instructions XLA ran (``trace.xla``), the longest first. The run is
``tests/tracing/test_xla.py``'s ``compiled`` fixture (a ``jit_compile=True`` matmul, add and
reduction, two steps); the names checked come from its ``trace.xla``. Skipped on TensorFlow
2.16, whose profile records no XLA instruction.
"""

from __future__ import annotations

import pytest
from test_xla import compiled  # noqa: F401  (the fixture: one real XLA:CPU run)

from tfplace_widget._analyses.summary import format_us
from tfplace_widget._export.html import write_html

from .conftest import SCREENSHOTS
from .test_html_report_browser import open_report  # noqa: F401  (the page opener)

XLA_ROWS_JS = """() => Array.from(document.querySelectorAll('#tfplace-xla tbody tr'),
    (r) => Array.from(r.cells, (c) => [c.dataset.column, c.textContent]))"""
OP_CELLS_JS = """() => Array.from(document.querySelectorAll('#tfplace-table tbody tr'),
    (r) => [r.dataset.op, r.querySelector('td[data-column="xla_op"]')?.textContent])"""


def fit_at_800(page) -> dict:
    """Where the op table's headings are in its box, and whether it scrolls sideways."""
    return page.evaluate(
        """() => {
            const box = document.querySelector('#tfplace-table .tfplace-table-scroll');
            const outer = box.getBoundingClientRect();
            const heads = Array.from(box.querySelectorAll('th'), (th) => {
                const r = th.getBoundingClientRect();
                return {column: th.dataset.column, w: r.width, sw: th.scrollWidth,
                        inside: r.left >= outer.left - 1 && r.right <= outer.right + 1,
                        cut: th.scrollWidth > th.clientWidth};
            });
            return {width: outer.width, heads, sideways: box.scrollWidth > box.clientWidth + 1};
        }"""
    )


def check_fit(fit: dict) -> None:
    assert abs(fit["width"] - 800) < 2, fit["width"]
    assert len(fit["heads"]) == 10, fit
    bad = [h for h in fit["heads"] if not h["inside"] or h["cut"]]
    assert not bad and not fit["sideways"], (bad, fit["sideways"])


def test_xla_report_shows_the_column_and_the_instructions(compiled, open_report, tmp_path):  # noqa: F811
    if compiled.xla.empty:
        pytest.skip("this TensorFlow's profile records no XLA instruction (2.16)")
    report = open_report(write_html(compiled, tmp_path / "xla.html"))
    page = report.page
    headings = page.eval_on_selector_all(
        "#tfplace-table thead th", "(ths) => ths.map((th) => th.dataset.column)"
    )
    assert headings[-1] == "xla_op"
    cells = dict(page.evaluate(OP_CELLS_JS))
    want = compiled.ops.set_index("op")["xla_op"].astype(object).fillna("").to_dict()
    assert cells == want and any(cells.values())
    # At 800 px (the page pads 16 px each side) the ten headings, xla_op the tenth, fit.
    page.set_viewport_size({"width": 832, "height": 1000})
    page.wait_for_timeout(300)
    check_fit(fit_at_800(page))
    page.click("#tfplace-table th[data-column='xla_op']")  # sorted by it: the arrow fits too
    page.wait_for_selector("#tfplace-table th[data-column='xla_op'][aria-sort='ascending']")
    check_fit(fit_at_800(page))
    page.screenshot(path=str(SCREENSHOTS / "html-report-xla-800px.png"), full_page=True)

    section = page.locator("#tfplace-xla")
    assert section.is_visible()
    xla = compiled.xla
    per = (
        xla.groupby("instruction")["duration_us"]
        .agg(["size", "sum"])
        .sort_values("sum", ascending=False)
    )
    assert f"XLA instructions: {len(per)}" in section.locator("h3").inner_text()
    rows = [dict(row) for row in page.evaluate(XLA_ROWS_JS)]
    assert sorted(row["instruction"] for row in rows) == sorted(per.index)
    totals = [per.loc[row["instruction"], "sum"] for row in rows]
    assert totals == sorted(totals, reverse=True)  # the longest first
    for row in rows:
        name = row["instruction"]
        mine = xla[xla["instruction"] == name].iloc[0]
        assert row["kind"] == mine["kind"] and row["cluster"] == mine["cluster"]
        assert row["runs"] == str(per.loc[name, "size"]) and row["device"] == "CPU:0"
        assert row["total_us"] == format_us(per.loc[name, "sum"])
        assert row["tf_ops"] == ", ".join(mine["tf_ops"]) and row["source"] == mine["source"]
