"""The static snapshot as nbconvert's HTML shows it (JupyterLab's style sheet, as on GitHub):
names and other text left-aligned, numbers right-aligned, and the timeline as wide as the table.

nbconvert's (and JupyterLab's) ``.jp-RenderedHTMLCommon td`` right-aligns every cell and wins
over the snapshot's own style sheet; the snapshot's alignment and widths must hold against it.
"""

from __future__ import annotations

import nbformat

from tfplace_widget import PlacementPanel

from .conftest import SCREENSHOTS

MEASURE_JS = """() => {
  const s = document.querySelector('.tfplace-snapshot');
  const width = (el) => el.getBoundingClientRect().width;
  const align = (el) => el.textContent + ':' + getComputedStyle(el).textAlign;
  return {
    timeline: width(s.querySelector('svg')),
    table: width(s.querySelector('table')),
    heads: [...s.querySelectorAll('thead th')].map(align),
    cells: [...s.querySelectorAll('tbody tr')].map((tr) => [...tr.cells].map(align)),
  };
}"""


def test_nbconverts_snapshot_aligns_text_left_numbers_right_and_the_timeline_to_the_table(
    seed_cpu, chromium, tmp_path
):
    from nbconvert import HTMLExporter

    panel = PlacementPanel(seed_cpu)
    try:
        bundle = panel._repr_mimebundle_()
    finally:
        panel.close()
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("show_placement(inputs_cpu)")
    cell.outputs = [
        nbformat.v4.new_output(
            "execute_result", data={"text/html": bundle["text/html"]}, execution_count=1
        )
    ]
    notebook.cells = [cell]
    page_html, _ = HTMLExporter(template_name="lab").from_notebook_node(notebook)
    (tmp_path / "snapshot.html").write_text(page_html)
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto((tmp_path / "snapshot.html").as_uri())
        snapshot = page.locator(".tfplace-snapshot").first
        snapshot.wait_for(timeout=30_000)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        snapshot.screenshot(path=str(SCREENSHOTS / "snapshot-nbconvert.png"))
        seen = page.evaluate(MEASURE_JS)
    finally:
        context.close()
    numbers = {"start", "duration", "runs"}
    for head in seen["heads"]:
        label, align = head.rsplit(":", 1)
        assert align == ("right" if label in numbers else "left"), seen["heads"]
    labels = [head.rsplit(":", 1)[0] for head in seen["heads"]]
    for row in seen["cells"]:
        for label, cell in zip(labels, row, strict=True):
            assert cell.rsplit(":", 1)[1] == ("right" if label in numbers else "left"), row
    assert abs(seen["timeline"] - seen["table"]) <= 1, seen
