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
