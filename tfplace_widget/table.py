"""The op table: a small anywidget that shows one page of rows and reports clicks.

The kernel keeps the whole DataFrame; the browser only ever receives the rows of the current
page (``rows``), like ipydatagrid's streaming grid. Header clicks set ``sort_by`` /
``sort_ascending``, row clicks set ``selected_op``, the pager sets ``page``: the panel observes
these traits and answers with a new page.
"""

from __future__ import annotations

import anywidget
import traitlets

from .colors import chip_css, color_class

_ESM = r"""
function render({ model, el }) {
  el.classList.add("tfplace-table");
  const root = document.createElement("div");
  el.appendChild(root);

  function draw() {
    const columns = model.get("columns");
    const labels = model.get("labels");
    const rows = model.get("rows");
    const colors = model.get("row_colors");
    const selected = model.get("selected_op");
    const sortBy = model.get("sort_by");
    const asc = model.get("sort_ascending");
    const page = model.get("page");
    const pages = Math.max(1, Math.ceil(model.get("total") / model.get("page_size")));
    root.replaceChildren();

    const table = document.createElement("table");
    const head = table.createTHead().insertRow();
    columns.forEach((column, i) => {
      const th = document.createElement("th");
      th.textContent = labels[i] + (column === sortBy ? (asc ? " \u25B2" : " \u25BC") : "");
      th.title = "Sort by " + labels[i];
      th.dataset.column = column;
      th.addEventListener("click", () => {
        if (model.get("sort_by") === column) {
          model.set("sort_ascending", !model.get("sort_ascending"));
        } else {
          model.set("sort_by", column);
          model.set("sort_ascending", true);
        }
        model.save_changes();
      });
      head.appendChild(th);
    });
    const body = table.createTBody();
    rows.forEach((row, r) => {
      const tr = body.insertRow();
      tr.dataset.op = row[0];
      tr.style.setProperty("--tfplace-device", colors[r]);
      if (row[0] === selected) tr.classList.add("tfplace-selected");
      row.forEach((value, c) => {
        const td = tr.insertCell();
        td.textContent = value;  // textContent: names are never parsed as HTML
        td.title = value;         // the full text on hover when the cell is cut short
        td.dataset.column = columns[c];
      });
      tr.addEventListener("click", () => {
        model.set("selected_op", row[0]);
        model.save_changes();
      });
    });
    root.appendChild(table);

    const pager = document.createElement("div");
    pager.className = "tfplace-pager";
    const prev = document.createElement("button");
    prev.textContent = "\u2039 prev";
    prev.disabled = page <= 0;
    prev.addEventListener("click", () => { model.set("page", page - 1); model.save_changes(); });
    const next = document.createElement("button");
    next.textContent = "next \u203A";
    next.disabled = page >= pages - 1;
    next.addEventListener("click", () => { model.set("page", page + 1); model.save_changes(); });
    const where = document.createElement("span");
    where.textContent = `page ${page + 1} of ${pages}`;
    pager.append(prev, where, next);
    root.appendChild(pager);
  }

  ["rows", "selected_op", "sort_by", "sort_ascending", "page", "total"].forEach(
    (name) => model.on("change:" + name, draw));
  draw();
}
export default { render };
"""

_CSS = r"""
.tfplace-table { max-height: 460px; max-width: 100%; width: 100%; overflow: auto; font-size: var(--jp-ui-font-size1, 13px); }
.tfplace-table table { border-collapse: collapse; width: 100%; table-layout: auto;
  color: var(--jp-ui-font-color1, #222); background: var(--jp-layout-color1, #fff); }
.tfplace-table th { position: sticky; top: 0; cursor: pointer; text-align: left; white-space: nowrap;
  padding: 4px 8px; background: var(--jp-layout-color2, #eee);
  border-bottom: 1px solid var(--jp-border-color1, #ccc); user-select: none; }
.tfplace-table td { padding: 3px 8px; border-bottom: 1px solid var(--jp-border-color3, #eee);
  white-space: nowrap; max-width: 28em; overflow: hidden; text-overflow: ellipsis; }
.tfplace-table td[data-column="reason"] { max-width: 24em; }
.tfplace-table td[data-column="op"] { max-width: 16em; }
.tfplace-table td[data-column="op"] { border-left: 6px solid var(--tfplace-device); font-family:
  var(--jp-code-font-family, monospace); }
.tfplace-table td[data-column="device"] { color: var(--tfplace-device); font-weight: 600; }
.tfplace-table tbody tr { cursor: pointer; }
.tfplace-table tbody tr:hover { background: var(--jp-layout-color2, #f3f3f3); }
.tfplace-table tr.tfplace-selected { background: var(--jp-brand-color3, #cfe8fc);
  outline: 2px solid var(--tfplace-device); }
.tfplace-pager { display: flex; gap: 8px; align-items: center; padding: 4px 0;
  color: var(--jp-ui-font-color1, #222); }
.tfplace-pager button { font: inherit; }
"""


class OpTable(anywidget.AnyWidget):
    """One page of the op table; the panel fills ``rows`` and listens to the user's clicks."""

    _esm = _ESM
    _css = _CSS + chip_css()
    columns = traitlets.List(traitlets.Unicode()).tag(sync=True)
    labels = traitlets.List(traitlets.Unicode()).tag(sync=True)
    rows = traitlets.List(traitlets.List()).tag(sync=True)
    row_colors = traitlets.List(traitlets.Unicode()).tag(sync=True)
    total = traitlets.Int(0).tag(sync=True)
    page = traitlets.Int(0).tag(sync=True)
    page_size = traitlets.Int(50).tag(sync=True)
    sort_by = traitlets.Unicode("start_us").tag(sync=True)
    sort_ascending = traitlets.Bool(True).tag(sync=True)
    selected_op = traitlets.Unicode("").tag(sync=True)

    def cover_colors(self, colors: list[str]) -> None:
        """Make sure the style sheet paints chips of ``colors`` (device colours past the first
        ``CSS_COLORS``): the sheet is shared by every table of the page, so the new one has a
        rule for every colour the kernel has given out."""
        if any(f".{color_class(color)}." not in self._css for color in colors):
            self._css = _CSS + chip_css()
