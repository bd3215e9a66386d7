function render({ model, el }) {
  el.classList.add("tfplace-findings");
  const root = document.createElement("div");
  el.appendChild(root);

  function draw() {
    const items = model.get("items");
    const selected = model.get("selected");
    const open = model.get("expanded") && items.length > 0;
    root.replaceChildren();
    const title = document.createElement("div");
    title.className = "tfplace-findings-title";
    const counts = model.get("counts");
    const note = model.get("note");
    title.textContent = (items.length ? (open ? "\u25BE " : "\u25B8 ") : "") + "Findings: "
      + (note || (items.length ? items.length + (counts ? " (" + counts + ")" : "") : "none"));
    if (items.length) {
      title.title = open ? "Collapse the findings" : "Show the findings";
      title.addEventListener("click", () => { model.set("expanded", !open); model.save_changes(); });
    }
    root.appendChild(title);
    if (!open) return;
    const list = document.createElement("ol");
    list.className = "tfplace-findings-list";
    items.forEach((item, i) => {
      const li = document.createElement("li");
      li.className = "tfplace-finding tfplace-severity-" + item.severity;
      if (i === selected) li.classList.add("tfplace-selected");
      li.dataset.index = String(i);
      li.dataset.kind = item.kind;
      li.title = i === selected ? "Click to show every op again"
        : "Click to show only its " + item.count + " ops in the table and timeline";
      const badge = document.createElement("span");
      badge.className = "tfplace-badge";
      badge.textContent = item.severity;
      const kind = document.createElement("code");
      kind.textContent = item.kind;
      const text = document.createElement("span");
      text.className = "tfplace-finding-message";
      text.textContent = item.message;  // textContent: op names are never parsed as HTML
      const ops = document.createElement("span");
      ops.className = "tfplace-finding-ops";
      ops.textContent = item.count + (item.count === 1 ? " op" : " ops");
      li.append(badge, kind, text, ops);
      li.addEventListener("click", () => {
        model.set("selected", model.get("selected") === i ? -1 : i);
        model.save_changes();
      });
      list.appendChild(li);
    });
    root.appendChild(list);
  }

  ["items", "selected", "expanded", "counts", "note"].forEach((name) => model.on("change:" + name, draw));
  draw();
}
export default { render };
