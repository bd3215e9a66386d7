// The memory peaks, for the panel (_widgets/memory.py, this file is its anywidget _esm) and the
// HTML report (_export/html.py runs it as a script, without the last line, and hands it a model
// of its own: report.js). `items` are _rendering/memory_lane.memory_items: per device (and
// allocator) with TensorFlow's allocator records, its peak, when, and the ops holding it, most
// bytes first, each with how it got its device and why (its `reason`). An op is a button: a
// click (or Enter, Space) sets `picked_op` and `picked_device` and saves them, and whoever holds
// the ops picks it (its row in the table, its bar ringed in the timeline, its details). Nothing
// is drawn without items. Names and reasons are set with textContent, never parsed as HTML.
function renderMemoryPeaks({ model, el }) {
  el.classList.add("tfplace-memory");
  function draw() {
    const items = model.get("items") ?? [];
    el.replaceChildren();
    el.hidden = items.length === 0;
    if (!items.length) return;
    const title = document.createElement("div");
    title.className = "tfplace-memory-title";
    title.textContent = "Memory peak per device (TensorFlow's allocator records: the step's own "
      + "tensors; variables and constants held through the step apart)";
    const list = document.createElement("ul");
    list.className = "tfplace-memory-list";
    for (const item of items) {
      const li = document.createElement("li");
      li.className = "tfplace-memory-device";
      li.dataset.device = item.device;
      li.dataset.peakBytes = String(item.peak_bytes);
      li.style.borderLeftColor = item.color;
      const head = document.createElement("div");
      const name = document.createElement("b");
      name.textContent = item.label;
      name.style.color = item.color;
      const peak = document.createElement("b");
      peak.className = "tfplace-memory-peak";
      peak.textContent = item.peak;
      if (item.recorded === false) {
        head.append(name, ` (${item.allocator}): no allocation of the step recorded`);
      } else {
        head.append(name, ` (${item.allocator}) peak `, peak, ` at ${item.at}, held by:`);
      }
      const parts = [head];
      if (item.persistent) {
        const held = document.createElement("div");
        held.className = "tfplace-memory-persistent";
        held.textContent = item.persistent;
        parts.push(held);
      }
      const ops = document.createElement("ol");
      ops.className = "tfplace-memory-ops";
      for (const op of item.ops) {
        const row = document.createElement("li");
        const button = document.createElement("button");
        button.type = "button";
        button.className = "tfplace-memory-op";
        button.dataset.op = op.op;
        button.textContent = op.op;
        button.title = `Pick ${op.op}: its row in the table, its bar in the timeline`;
        button.addEventListener("click", () => {
          model.set("picked_device", op.device);
          model.set("picked_op", op.op);
          model.save_changes();
        });
        const size = document.createElement("span");
        size.className = "tfplace-memory-bytes";
        size.textContent = op.bytes;
        const why = document.createElement("span");
        why.className = "tfplace-memory-why";
        why.textContent = op.how ? `${op.type} \u00b7 ${op.how}: ${op.reason}` : op.type;
        why.title = why.textContent;
        row.append(button, size, why);
        ops.appendChild(row);
      }
      if (item.more > 0) {
        const more = document.createElement("li");
        more.className = "tfplace-memory-more";
        more.textContent = `and ${item.more.toLocaleString("en-US")} more ops`;
        ops.appendChild(more);
      }
      li.append(...parts, ops);
      list.appendChild(li);
    }
    el.append(title, list);
  }
  model.on("change:items", draw);
  draw();
}
export default { render: renderMemoryPeaks };
