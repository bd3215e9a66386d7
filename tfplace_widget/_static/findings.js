// The findings list, for the panel (_widgets/findings.py, this file is its anywidget _esm) and the
// HTML report (_export/html.py runs it as a script, without the last line, and hands it a model
// of its own: report.js). `model` holds the traits of widgets.findings.FindingsList; a click
// sets `selected` (or `expanded`) and saves it, and whoever holds the ops answers.
// From the keyboard: Tab reaches the title (Enter or Space opens or collapses the list) and each
// finding, a toggle button (Enter or Space shows only its ops, again shows every op) named by
// its finding. A list taller than its box says how many findings are below, and the hint
// scrolls to them. Each item's `group` is the header drawn above the first finding of its group
// (the measured ones, then those predicted for a machine with a GPU); "" draws none. Its `edit`
// (the change its fix asks of the user's code, "" for none) is drawn under its message.
const count = (n) => n.toLocaleString("en-US");

function onActivate(node, action) {
  node.addEventListener("click", action);
  node.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();  // Space would scroll the page
      action();
    }
  });
}

function renderFindingsList({ model, el }) {
  el.classList.add("tfplace-findings");
  const root = document.createElement("div");
  el.appendChild(root);

  let sized = null;  // the observer of the list on screen

  function draw() {
    sized?.disconnect();
    const items = model.get("items");
    const selected = model.get("selected");
    const open = model.get("expanded") && items.length > 0;
    const active = document.activeElement;
    const refocus = active && root.contains(active)
      ? (active.dataset.index !== undefined ? `[data-index="${active.dataset.index}"]` : ".tfplace-findings-title")
      : null;
    root.replaceChildren();
    const title = document.createElement("div");
    title.className = "tfplace-findings-title";
    const counts = model.get("counts");
    const note = model.get("note");
    title.textContent = (items.length ? (open ? "\u25BE " : "\u25B8 ") : "") + "Findings: "
      + (note || (items.length ? items.length + (counts ? " (" + counts + ")" : "") : "none"));
    if (items.length) {
      title.title = open ? "Collapse the findings" : "Show the findings";
      title.tabIndex = 0;
      title.setAttribute("role", "button");
      title.setAttribute("aria-expanded", String(open));
      onActivate(title, () => { model.set("expanded", !open); model.save_changes(); });
    }
    root.appendChild(title);
    if (!open) {
      if (refocus) root.querySelector(refocus)?.focus({ preventScroll: true });
      return;
    }
    const list = document.createElement("ol");
    list.className = "tfplace-findings-list";
    items.forEach((item, i) => {
      if (item.group && (i === 0 || items[i - 1].group !== item.group)) {
        const head = document.createElement("li");
        head.className = "tfplace-findings-group"
          + (item.predicted ? " tfplace-findings-group-predicted" : "");
        head.setAttribute("role", "heading");
        head.setAttribute("aria-level", "4");
        head.textContent = item.group;  // textContent, as the messages
        list.appendChild(head);
      }
      const li = document.createElement("li");
      li.className = "tfplace-findings-item";
      const button = document.createElement("button");
      button.type = "button";
      button.className = "tfplace-finding tfplace-severity-" + item.severity;
      if (i === selected) button.classList.add("tfplace-selected");
      button.dataset.index = String(i);
      button.dataset.kind = item.kind;
      button.title = i === selected ? "Click to show every op again"
        : "Click to show only its " + item.count + " ops in the table and timeline";
      const badge = document.createElement("span");
      badge.className = "tfplace-badge";
      badge.textContent = item.severity;
      const kind = document.createElement("code");
      kind.textContent = item.kind;
      const text = document.createElement("span");
      text.className = "tfplace-finding-message";
      text.textContent = item.message;  // textContent: op names are never parsed as HTML
      // Under the message, the line of code its fix asks the user to change (if it has one).
      const body = document.createElement("span");
      body.className = "tfplace-finding-body";
      body.append(text);
      if (item.edit) {
        const edit = document.createElement("span");
        edit.className = "tfplace-finding-edit";
        edit.textContent = item.edit;
        body.append(edit);
      }
      const ops = document.createElement("span");
      ops.className = "tfplace-finding-ops";
      ops.textContent = count(item.count) + (item.count === 1 ? " op" : " ops");
      button.append(badge, kind, body, ops);
      button.setAttribute("role", "button");  // said outright, for tools that read the attribute
      button.setAttribute("aria-pressed", String(i === selected));
      button.setAttribute("aria-label", `${item.severity} finding ${item.kind}: ${item.message} `
        + `(${ops.textContent}). ${item.edit ? item.edit + " " : ""}${button.title}`);
      // A button: the browser turns Enter and Space into this click.
      button.addEventListener("click", () => {
        model.set("selected", model.get("selected") === i ? -1 : i);
        model.save_changes();
      });
      li.appendChild(button);
      list.appendChild(li);
    });
    root.appendChild(list);
    const more = document.createElement("div");
    more.className = "tfplace-findings-more";
    more.hidden = true;
    more.title = "Scroll the findings to show the next ones";
    more.addEventListener("click", () => list.scrollBy({ top: list.clientHeight * 0.8, behavior: "smooth" }));
    root.appendChild(more);
    // "3 more below": the findings under the list's bottom edge, kept up to date as it scrolls.
    const hint = () => {
      if (!list.clientHeight) return;  // not laid out yet: the observer calls again
      const bottom = list.scrollTop + list.clientHeight;
      let below = 0;
      for (const button of list.querySelectorAll(".tfplace-finding")) {
        if (button.offsetTop + button.offsetHeight / 2 > bottom) below++;
      }
      more.hidden = below === 0;
      more.textContent = `\u25BE ${count(below)} more ${below === 1 ? "finding" : "findings"} below`;
    };
    list.addEventListener("scroll", hint, { passive: true });
    sized = new ResizeObserver(hint);  // once laid out (heights known), and on every resize
    sized.observe(list);
    if (refocus) root.querySelector(refocus)?.focus({ preventScroll: true });
  }

  ["items", "selected", "expanded", "counts", "note"].forEach((name) => model.on("change:" + name, draw));
  draw();
}
export default { render: renderFindingsList };
