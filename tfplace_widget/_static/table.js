// The op table: the pager above a scrolling table of one page of rows, for the panel
// (_widgets/table.py, this file is its anywidget _esm) and the HTML report (_export/html.py runs
// it as a script, without the last line, and hands it a model of its own: report.js).
// `model` is the data source: an anywidget model (get, set, save_changes, on "change:NAME")
// with the traits of widgets.table.OpTable; a click sets traits and saves them, and whoever
// holds the rows (the panel's kernel, the report's page) answers with a new page.
// The columns are sized to the table's box (fitColumns) so that the table fits its output: a long
// name is cut short with an ellipsis and shown whole on hover (title); the columns of numbers
// (the model's `numbers`: html_parts.NUMBER_COLUMNS) are right-aligned. From the keyboard, Tab reaches the
// pager, each column header (Enter or Space sorts) and the rows (one tab stop: the picked row or
// the first; Up/Down/Home/End move between rows, Enter or Space picks, as a click does).
// Column widths in px for a box `width` px wide (`widths`: html_parts.TABLE_WIDTHS): a fixed
// column gets its width in em, the others share what is left by their share, each at least
// its minimum; the table is as wide as its columns (wider than the box: it scrolls sideways).
function fitColumns(columns, widths, width, em) {
  let fixed = 0, shares = 0;
  for (const column of columns) {
    const w = widths[column] ?? { share: 1, min_em: 5 };
    if (w.em) fixed += w.em * em; else shares += w.share;
  }
  const rest = Math.max(0, width - fixed);
  return columns.map((column) => {
    const w = widths[column] ?? { share: 1, min_em: 5 };
    return Math.floor(w.em ? w.em * em : Math.max(w.min_em * em, rest * w.share / shares));
  });
}

function renderOpTable({ model, el }) {
  el.classList.add("tfplace-table");
  const root = document.createElement("div");
  el.appendChild(root);
  let focusRow = 0;  // the row that holds the rows' tab stop
  let fit = () => {};  // sizes the columns of the table on screen to its box

  function activate(event, action) {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();  // Space would scroll the page
      action();
    }
  }

  function sortOn(column) {
    if (model.get("sort_by") === column) {
      model.set("sort_ascending", !model.get("sort_ascending"));
    } else {
      model.set("sort_by", column);
      model.set("sort_ascending", true);
    }
    model.save_changes();
  }

  // What had the focus in the table, to give it back after a redraw.
  function focused() {
    const active = document.activeElement;
    if (!active || !root.contains(active)) return null;
    if (active.dataset.op !== undefined) return `tr[data-op="${CSS.escape(active.dataset.op)}"]`;
    if (active.tagName === "TH") return `th[data-column="${CSS.escape(active.dataset.column)}"]`;
    if (active.dataset.pager) return `button[data-pager="${active.dataset.pager}"]`;
    return null;
  }

  function draw() {
    const columns = model.get("columns");
    const labels = model.get("labels");
    const rows = model.get("rows");
    const colors = model.get("row_colors");
    const inks = model.get("row_inks");
    const requested = model.get("requested_short");
    const selected = model.get("selected_op");
    // A pick is of one op on one device: _SOURCE runs once per device.
    const selectedDevice = model.get("selected_device") || "";
    const devices = model.get("row_devices") || [];
    const isPicked = (row, r) => row[0] === selected
      && (!selectedDevice || devices[r] === undefined || devices[r] === selectedDevice);
    const sortBy = model.get("sort_by");
    const asc = model.get("sort_ascending");
    const page = model.get("page");
    const numbers = new Set(model.get("numbers"));
    const pages = Math.max(1, Math.ceil(model.get("total") / model.get("page_size")));
    const refocus = focused();
    root.replaceChildren();

    const pager = document.createElement("div");
    pager.className = "tfplace-pager";
    const prev = document.createElement("button");
    prev.textContent = "\u2039 prev";
    prev.dataset.pager = "prev";
    prev.setAttribute("aria-label", "previous page");
    prev.disabled = page <= 0;
    prev.addEventListener("click", () => { model.set("page", page - 1); model.save_changes(); });
    const next = document.createElement("button");
    next.textContent = "next \u203A";
    next.dataset.pager = "next";
    next.setAttribute("aria-label", "next page");
    next.disabled = page >= pages - 1;
    next.addEventListener("click", () => { model.set("page", page + 1); model.save_changes(); });
    const where = document.createElement("span");
    where.className = "tfplace-pager-where";
    where.textContent = `page ${page + 1} of ${pages}`;
    pager.append(prev, where, next);
    root.appendChild(pager);

    const scroller = document.createElement("div");
    scroller.className = "tfplace-table-scroll";
    const table = document.createElement("table");
    table.setAttribute("aria-label", `ops, page ${page + 1} of ${pages}: Enter on a row picks `
      + "its op and rings its bar in the timeline");
    const group = document.createElement("colgroup");
    columns.forEach((column) => {
      const col = document.createElement("col");
      col.className = "tfplace-col-" + column;
      group.appendChild(col);
    });
    table.appendChild(group);
    const head = table.createTHead().insertRow();
    columns.forEach((column, i) => {
      const th = document.createElement("th");
      th.textContent = labels[i] + (column === sortBy ? (asc ? " \u25B2" : " \u25BC") : "");
      th.title = "Sort by " + labels[i];
      th.dataset.column = column;
      th.tabIndex = 0;
      th.setAttribute("aria-sort", column === sortBy ? (asc ? "ascending" : "descending") : "none");
      if (numbers.has(column)) th.classList.add("tfplace-number");
      th.addEventListener("click", () => sortOn(column));
      th.addEventListener("keydown", (event) => activate(event, () => sortOn(column)));
      head.appendChild(th);
    });
    const body = table.createTBody();
    // JupyterLab's command mode takes Up/Down (to the next cell) before the row sees them.
    body.dataset.lmSuppressShortcuts = "true";
    const at = rows.findIndex(isPicked);
    focusRow = at >= 0 ? at : Math.min(focusRow, Math.max(0, rows.length - 1));
    rows.forEach((row, r) => {
      const tr = body.insertRow();
      tr.dataset.op = row[0];
      // Lumino's shortcuts skip a key whose target carries this: Notebook 7 (no bubbling keydown)
      // would take a row's ArrowDown as "move to the next cell" (the tbody's mark is not enough:
      // the focused row itself matches the shortcut's selector).
      tr.dataset.lmSuppressShortcuts = "true";
      tr.tabIndex = r === focusRow ? 0 : -1;
      tr.style.setProperty("--tfplace-device", colors[r]);
      if (inks[r]) {
        tr.style.setProperty("--tfplace-ink-light", inks[r][0]);
        tr.style.setProperty("--tfplace-ink-dark", inks[r][1]);
      }
      const picked = isPicked(row, r);
      if (picked) tr.classList.add("tfplace-selected");
      tr.setAttribute("aria-selected", String(picked));
      row.forEach((value, c) => {
        const td = tr.insertCell();
        const column = columns[c];
        const shown = column === "requested_device" && requested[r] !== undefined
          ? requested[r] : value;
        td.textContent = shown;  // textContent: names are never parsed as HTML
        td.title = value;         // the whole text on hover when the cell is cut short
        td.dataset.column = column;
        if (numbers.has(column)) td.classList.add("tfplace-number");
      });
      const pick = () => {
        focusRow = r;
        model.set("selected_device", devices[r] || "");
        model.set("selected_op", row[0]);
        model.save_changes();
      };
      tr.addEventListener("click", pick);
      tr.addEventListener("keydown", (event) => {
        const moves = { ArrowDown: r + 1, ArrowUp: r - 1, Home: 0, End: rows.length - 1 };
        if (event.key in moves) {
          event.preventDefault();
          const target = body.rows[Math.max(0, Math.min(rows.length - 1, moves[event.key]))];
          tr.tabIndex = -1;
          target.tabIndex = 0;
          focusRow = target.sectionRowIndex;
          target.focus();
          return;
        }
        activate(event, pick);
      });
    });
    scroller.appendChild(table);
    root.appendChild(scroller);
    fit = () => {
      const width = scroller.clientWidth;
      if (!width) return;
      const em = parseFloat(getComputedStyle(table).fontSize) || 13;
      const px = fitColumns(columns, model.get("widths"), width, em);
      Array.from(group.children).forEach((col, i) => { col.style.width = px[i] + "px"; });
      table.style.width = px.reduce((a, b) => a + b, 0) + "px";
    };
    fit();

    if (refocus) {
      // A pager button that just went disabled gives the focus to the other one.
      const again = root.querySelector(refocus);
      const target = again && !again.disabled ? again
        : root.querySelector("button[data-pager]:not(:disabled)");
      target?.focus({ preventScroll: true });
    }
  }

  // One redraw for the several traits a new page changes at once.
  let queued = false;
  const later = () => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => { queued = false; draw(); });
  };
  ["rows", "row_inks", "requested_short", "selected_op", "selected_device", "row_devices", "sort_by", "sort_ascending", "page",
    "total", "widths"].forEach((name) => model.on("change:" + name, later));
  draw();
  // The output area changes width without a window resize (JupyterLab's panels): follow it.
  let width = 0;
  const observer = new ResizeObserver(() => {
    if (el.clientWidth !== width) { width = el.clientWidth; fit(); }
  });
  observer.observe(el);
  return () => observer.disconnect();
}
export default { render: renderOpTable };
