"""The panel's findings section: one clickable line per finding, above the table.

A small anywidget: the kernel sends the findings as plain rows (``items``); a click sets
``selected`` (the finding's index, ``-1`` for none), which the panel turns into a filter on the
finding's ops. With no findings it is one line, "Findings: none", collapsed to that count; a
click on the title collapses or opens the list. Messages are drawn with ``textContent``: op names
are never parsed as HTML. The view never runs TensorFlow: it shows ``trace.findings``.
"""

from __future__ import annotations

import anywidget
import pandas as pd
import traitlets

_ESM = r"""
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
"""

_CSS = r"""
.tfplace-findings { color: var(--jp-ui-font-color1, #222); font-size: var(--jp-ui-font-size1, 13px);
  margin: 2px 0 6px 0; }
.tfplace-findings-title { font-weight: 600; cursor: pointer; user-select: none; padding: 2px 0; }
.tfplace-findings-list { margin: 2px 0; padding-left: 0; list-style: none; max-height: 260px;
  overflow: auto; }
.tfplace-finding { display: flex; gap: 8px; align-items: baseline; padding: 3px 6px; cursor: pointer;
  border-left: 4px solid var(--tfplace-severity); border-bottom: 1px solid var(--jp-border-color3, #eee); }
.tfplace-finding:hover { background: var(--jp-layout-color2, #f3f3f3); }
.tfplace-finding.tfplace-selected { background: var(--jp-brand-color3, #cfe8fc);
  outline: 2px solid var(--tfplace-severity); }
.tfplace-severity-high { --tfplace-severity: #d32f2f; }
.tfplace-severity-medium { --tfplace-severity: #ed6c02; }
.tfplace-severity-info { --tfplace-severity: #0288d1; }
.tfplace-badge { flex: none; min-width: 4.2em; text-align: center; border-radius: 3px; padding: 0 4px;
  font-size: 11px; font-weight: 600; color: #fff; background: var(--tfplace-severity); }
.tfplace-finding code { flex: none; font-size: 11px; opacity: .8; }
.tfplace-finding-message { flex: 1 1 auto; white-space: normal; }
.tfplace-finding-ops { flex: none; opacity: .7; font-size: 11px; }
"""


class FindingsList(anywidget.AnyWidget):
    """The findings of the trace on screen; ``selected`` is the clicked one (``-1``: none)."""

    _esm = _ESM
    _css = _CSS
    items = traitlets.List(traitlets.Dict()).tag(sync=True)
    counts = traitlets.Unicode("").tag(sync=True)  # "2 high, 1 info"
    selected = traitlets.Int(-1).tag(sync=True)
    expanded = traitlets.Bool(True).tag(sync=True)
    note = traitlets.Unicode("").tag(sync=True)  # instead of the count, e.g. while finding

    def wait(self, note: str) -> None:
        """No findings yet: say why (they are being found after the cell)."""
        with self.hold_sync():
            self.selected, self.items, self.counts, self.expanded = -1, [], "", False
            self.note = note

    def show(self, findings: pd.DataFrame) -> None:
        """Put ``findings`` (a ``trace.findings`` frame) on screen, nothing selected."""
        with self.hold_sync():
            self.selected = -1
            self.note = ""
            self.items = finding_items(findings)
            self.counts = severity_counts(findings)
            self.expanded = bool(self.items)


def finding_items(findings: pd.DataFrame) -> list[dict]:
    """One plain dict per finding, what the browser draws (``ops`` stay in the kernel)."""
    return [
        {
            "kind": str(kind),
            "severity": str(severity),
            "message": str(message),
            "count": len(ops),
        }
        for kind, severity, message, ops in zip(
            findings["kind"],
            findings["severity"],
            findings["message"],
            findings["ops"],
            strict=True,
        )
    ]


def severity_counts(findings: pd.DataFrame) -> str:
    """``"2 high, 1 info"``: the findings per severity, worst first, zeros left out."""
    counts = findings["severity"].astype(str).value_counts()
    order = ("high", "medium", "info")
    return ", ".join(f"{int(counts[s])} {s}" for s in order if counts.get(s, 0))
