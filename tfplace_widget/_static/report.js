// The data element: base64 of the gzipped JSON document (see report_html).
async function readData() {
  const text = atob(document.getElementById("tfplace-data").textContent.trim());
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}
const DATA = await readData();
const TYPED = { f4: Float32Array, f8: Float64Array, i4: Int32Array };
const PAGE_SIZE = DATA.page_size;

function decode(value) {
  if (Array.isArray(value)) return value.map(decode);
  if (value === null || typeof value !== "object") return value;
  if (typeof value.b64 === "string" && value.dtype in TYPED) {
    const text = atob(value.b64);
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    return new TYPED[value.dtype](bytes.buffer);
  }
  const out = {};
  for (const [key, item] of Object.entries(value)) out[key] = decode(item);
  return out;
}

const count = (n) => n.toLocaleString("en-US");

const columns = decode(DATA.columns);
const total = DATA.total;
const names = columns.op;
const lowered = names.map((name) => name.toLowerCase());
const el = (id) => document.getElementById(id);
const state = { text: DATA.search, regex: false, caseSensitive: false, devices: new Set(),
                type: "", sortBy: "start_us", ascending: true, page: 0, selected: -1,
                finding: -1 };
let visible = new Int32Array(0);
let opMask = new Uint8Array(total);

// -- table --------------------------------------------------------------------------------
const sortOrders = new Map();
function sortOrder() {
  const key = state.sortBy + (state.ascending ? "+" : "-");
  let order = sortOrders.get(key);
  if (order) return order;
  const rows = Array.from({ length: total }, (_, i) => i);
  const column = columns[state.sortBy];
  const sign = state.ascending ? 1 : -1;
  if (DATA.numbers.includes(state.sortBy)) {  // missing values last, either way (pandas)
    rows.sort((a, b) => {
      const x = column[a], y = column[b];
      if (x !== x || y !== y) return (x !== x) - (y !== y);
      return x < y ? -sign : x > y ? sign : 0;
    });
  } else if (state.sortBy === "op") {
    rows.sort((a, b) => (names[a] < names[b] ? -sign : names[a] > names[b] ? sign : 0));
  } else {
    const values = column.values;
    const rank = new Int32Array(values.length);
    values.map((v, i) => i).sort((a, b) => (values[a] < values[b] ? -1 : values[a] > values[b] ? 1 : 0))
      .forEach((code, r) => { rank[code] = r; });
    const codes = column.codes;
    rows.sort((a, b) => sign * (rank[codes[a]] - rank[codes[b]]));
  }
  order = Int32Array.from(rows);
  sortOrders.set(key, order);
  return order;
}

function cell(row, name) {
  const column = columns[name];
  if (name === "op") return names[row];
  if (name === "runs") { const v = column[row]; return v === v ? count(v) : ""; }
  if (DATA.numbers.includes(name)) return formatUs(column[row]);
  return column.values[column.codes[row]];
}

function deviceColor(row) { return DATA.device_colors[columns.device.codes[row]]; }
function deviceInk(row) { return DATA.device_inks[columns.device.codes[row]]; }
function fullDevice(row) { return columns.device_full[columns.device.codes[row]]; }

// The op table and the findings list are the panel's (_static/table.js as opTable,
// _static/findings.js as findingsList), each given a model of this page: in the panel they
// read their traits (those of widgets.table.OpTable, widgets.findings.FindingsList) from an
// anywidget model and set them when used, and the kernel answers; here the page answers.
// put: the page gives the view a value (a new value tells it, and it redraws once); set and
// save_changes: the view's side, as on an anywidget model; `answer` gets the names it set.
function pageModel(traits, answer) {
  const listeners = new Map();
  const touched = new Set();  // what the view set since it last saved
  const put = (name, value) => {
    if (traits[name] === value) return;
    traits[name] = value;
    for (const listener of listeners.get("change:" + name) ?? []) listener();
  };
  return {
    put,
    get: (name) => traits[name],
    set(name, value) { touched.add(name); put(name, value); },
    on(event, listener) {
      if (!listeners.has(event)) listeners.set(event, []);
      listeners.get(event).push(listener);
    },
    save_changes() {
      const names = new Set(touched);
      touched.clear();
      answer(names);
    },
  };
}

const tableColumns = DATA.column_labels.map(([name]) => name);
let pageRows = new Int32Array(0);  // the rows (of `columns`) on the table's page
const tableModel = pageModel({
  columns: tableColumns, labels: DATA.column_labels.map(([, label]) => label),
  widths: DATA.column_widths, numbers: DATA.numbers, page_size: PAGE_SIZE,
}, (touched) => answerTable(touched));

// The table was used: a row picked (again: unpicked), a header sorts, the pager turns.
function answerTable(touched) {
  const get = tableModel.get;
  if (touched.has("selected_op")) {
    const op = get("selected_op"), device = get("selected_device");
    const at = pageRows.findIndex((row) => names[row] === op && fullDevice(row) === device);
    if (at >= 0) select(pageRows[at], false);
  } else if (touched.has("sort_by") || touched.has("sort_ascending")) {
    state.sortBy = get("sort_by");
    state.ascending = get("sort_ascending");
    update(false);
  } else if (touched.has("page")) {
    state.page = get("page");
    showPage();
  }
}

// The page of `visible` the table shows: its rows as text (the requested device also in its
// short form, CPU:0), their devices and colours, the pick and the order.
function showPage() {
  const pages = Math.max(1, Math.ceil(visible.length / PAGE_SIZE));
  state.page = Math.min(state.page, pages - 1);
  pageRows = visible.slice(state.page * PAGE_SIZE, (state.page + 1) * PAGE_SIZE);
  const rows = Array.from(pageRows);
  const requested = columns.requested_device;
  const picked = state.selected;
  tableModel.put("row_colors", rows.map(deviceColor));
  tableModel.put("row_inks", rows.map(deviceInk));
  tableModel.put("row_devices", rows.map(fullDevice));
  tableModel.put("requested_short", rows.map((row) => requested.short[requested.codes[row]]));
  tableModel.put("selected_op", picked < 0 ? "" : names[picked]);
  tableModel.put("selected_device", picked < 0 ? "" : fullDevice(picked));
  tableModel.put("sort_by", state.sortBy);
  tableModel.put("sort_ascending", state.ascending);
  tableModel.put("page", state.page);
  tableModel.put("total", visible.length);
  tableModel.put("rows", rows.map((row) => tableColumns.map((name) => cell(row, name))));
}

// -- timeline ------------------------------------------------------------------------------
const T = DATA.timeline;
const figure = decode(DATA.figure);
const plot = el("tfplace-timeline");
// No "Edit in Chart Studio" button: plotly.js shows it by default, and it would send the
// figure to plotly's cloud (nothing is fetched or sent from the page).
const CONFIG = {
  displaylogo: false, responsive: true, showSendToCloud: false, showEditInChartStudio: false,
};
// The mode-bar buttons stay for the mouse, out of the tab order (the op table is the
// keyboard's way to the bars, as in the panel's timeline.js); plotly remakes them on redraws.
function untab() {
  for (const button of plot.querySelectorAll(".modebar-btn")) button.tabIndex = -1;
}
plot.setAttribute("role", "figure");
plot.setAttribute("aria-label", "Timeline of the ops on each device. From the keyboard, pick "
  + "an op in the op table (Tab to its rows, Up and Down, Enter): its bar is ringed here.");
const pointOps = T.devices.map((d) => decode(d.ops));  // per device trace: op row of each bar
let overlays = {};
let matchPoints = T.devices.map(() => new Int32Array(0));
let matchesShown = 0, matchesTotal = 0;

// Points ``idx`` (bar numbers) of trace ``trace``: a bar is one point, a WebGL bar three.
function subset(trace, idx, keys) {
  const out = {};
  const per = T.webgl ? 3 : 1;
  for (const key of keys) {
    const source = trace[key];
    const Kind = source.constructor;
    const picked = Kind === Array ? new Array(idx.length * per) : new Kind(idx.length * per);
    for (let k = 0; k < idx.length; k++) {
      for (let j = 0; j < per; j++) picked[k * per + j] = source[idx[k] * per + j];
    }
    out[key] = picked;
  }
  return out;
}
const GEOMETRY = T.webgl ? ["x", "y"] : ["base", "x", "y", "hovertext"];

function highlight(filtering) {
  let budget = T.max_match_bars;
  matchesShown = matchesTotal = 0;
  T.devices.forEach((d, i) => {
    const ops = pointOps[i];
    const base = figure.data[d.base];
    if (!filtering) {
      delete overlays[d.base];
      delete overlays[d.match];
      matchPoints[i] = new Int32Array(0);
      return;
    }
    const hits = [];
    for (let k = 0; k < ops.length; k++) if (ops[k] >= 0 && opMask[ops[k]]) hits.push(k);
    matchesTotal += hits.length;
    const kept = hits.slice(0, Math.max(0, budget));
    budget -= kept.length;
    matchesShown += kept.length;
    matchPoints[i] = Int32Array.from(kept);
    overlays[d.base] = { opacity: T.dim_opacity };
    if (kept.length) overlays[d.match] = subset(base, kept, GEOMETRY);
    else delete overlays[d.match];
  });
}

function ring() {
  delete overlays[T.selected_index];
  if (state.selected < 0) return;
  const parts = [];
  T.devices.forEach((d, i) => {
    const idx = [];
    const ops = pointOps[i];
    for (let k = 0; k < ops.length; k++) if (ops[k] === state.selected) idx.push(k);
    if (idx.length) parts.push([figure.data[d.base], idx, d.color]);
  });
  if (!parts.length) return;
  const merged = {};
  for (const key of GEOMETRY) merged[key] = [];
  const colors = [];
  for (const [trace, idx, color] of parts) {
    const some = subset(trace, idx, GEOMETRY);
    for (const key of GEOMETRY) merged[key].push(...some[key]);
    for (let k = 0; k < idx.length; k++) colors.push(color);
  }
  if (!T.webgl) merged.marker = { color: colors, line: { color: T.selected_color, width: 3 } };
  overlays[T.selected_index] = merged;
}

let drawn = null;
// plotly.js comes after this script in the page (the table need not wait for it): it has
// run when the document is parsed.
let plotlyLoaded = false;
const plotlyReady = new Promise((resolve) => {
  if (document.readyState !== "loading") resolve();
  else document.addEventListener("DOMContentLoaded", () => resolve(), { once: true });
});

function drawTimeline() {
  if (!plotlyLoaded) return Promise.resolve();
  const traces = figure.data.map((trace, i) => (i in overlays ? { ...trace, ...overlays[i] } : trace));
  drawn = Plotly.react(plot, traces, figure.layout, CONFIG).then((gd) => { untab(); return gd; });
  return drawn;
}

// -- header controls, status, details ------------------------------------------------------
function renderChips() {
  // Across a cluster the chips come grouped per task (chip.task), each group on a row of its own.
  const box = el("tfplace-chips");
  const buttons = DATA.chips.map((chip) => {
    const button = document.createElement("button");
    button.className = "tfplace-chip";
    button.style.background = chip.color;
    button.style.color = chip.text_color;
    button.textContent = chip.label;
    button.title = `${chip.device}: click to show only its ops`;
    button.dataset.device = chip.device;
    button.setAttribute("aria-pressed", String(state.devices.has(chip.code)));
    button.addEventListener("click", () => {
      if (state.devices.has(chip.code)) state.devices.delete(chip.code);
      else state.devices.add(chip.code);
      button.setAttribute("aria-pressed", String(state.devices.has(chip.code)));
      update(true);
    });
    return button;
  });
  if (!DATA.chips.some((chip) => chip.task)) { box.replaceChildren(...buttons); return; }
  const groups = [];
  DATA.chips.forEach((chip, i) => {
    if (!groups.length || groups[groups.length - 1].task !== chip.task) {
      const row = document.createElement("div");
      row.className = "tfplace-task-group";
      const label = document.createElement("span");
      label.className = "tfplace-task";
      label.textContent = chip.task;
      row.append(label);
      groups.push({task: chip.task, row});
    }
    groups[groups.length - 1].row.append(buttons[i]);
  });
  box.style.flexDirection = "column";
  box.replaceChildren(...groups.map((group) => group.row));
}

// -- findings (_export/html.py findings_data) --------------------------------------------------
// The panel's list: a click (or Enter/Space) on a finding keeps only its ops (its `rows`),
// again shows every op. The measured ones come first; those predicted for a machine with a GPU
// that this run did not have are under a header saying so, never read as what ran.
const findingRows = DATA.findings.map((finding) => new Set(finding.rows));
const findingsModel = pageModel({
  items: DATA.findings, counts: DATA.findings_counts, note: DATA.findings_note,
  selected: -1, expanded: DATA.findings.length > 0,
}, (touched) => {
  if (!touched.has("selected")) return;
  state.finding = findingsModel.get("selected");
  update(true);
});

// -- memory peaks (_rendering/memory_lane.memory_items; [] without allocator records) ----------
// The panel's list: a click on an op holding a device's peak picks it, as a click on its bar.
const memoryModel = pageModel({ items: DATA.memory ?? [], picked_op: "", picked_device: "" },
  (touched) => {
    if (!touched.has("picked_op")) return;
    const op = memoryModel.get("picked_op"), device = memoryModel.get("picked_device");
    const row = names.findIndex((name, i) => name === op && fullDevice(i) === device);
    if (row >= 0) select(row, true);
  });

function renderDetails() {
  const box = el("tfplace-details");
  const row = state.selected;
  if (row < 0) { box.replaceChildren(); box.hidden = true; return; }
  box.hidden = false;
  box.style.borderLeftColor = deviceColor(row);
  const title = document.createElement("b");
  title.textContent = names[row];
  const rest = document.createElement("span");
  rest.textContent = ` (${cell(row, "type")}) on ${fullDevice(row)}` +
    ` \u00b7 how: ${cell(row, "how")} \u00b7 ${cell(row, "reason")}`;
  box.replaceChildren(title, rest, ...sourceParts(row));
}

// The details' "source:" (html_parts._source_html): the user's line (its full path in the
// tooltip), what made an op of the runtime's, nothing where the trace recorded none.
function sourceParts(row) {
  const source = columns.source;
  const code = source ? source.codes[row] : -1;
  if (code < 0) return [];
  const text = source.values[code];
  const value = document.createElement(text ? "code" : "i");
  value.className = "tfplace-source";
  value.textContent = text || "made by TensorFlow's runtime, not by your code";
  const paths = columns.source_path;
  if (text && paths && paths.codes[row] >= 0) value.title = paths.values[paths.codes[row]];
  return [document.createElement("br"), "source: ", value];
}

function select(row, fromTimeline) {
  state.selected = state.selected === row && !fromTimeline ? -1 : row;
  if (fromTimeline && state.selected >= 0) {  // show its row: the page that holds it
    const at = visible.indexOf(state.selected);
    if (at >= 0) state.page = Math.floor(at / PAGE_SIZE);
  }
  showPage();
  renderDetails();
  ring();
  drawTimeline();
}

function update(fromFilters) {
  const message = el("tfplace-message");
  let mask;
  try {
    mask = matchNames(names, lowered, state.text, state.regex, state.caseSensitive);
    const paths = columns.source_path;  // a train.py:42 search finds the ops that line made
    if (paths && !state.regex) {
      const made = matchSource(paths.values, paths.codes, state.text, state.caseSensitive);
      for (let i = 0; i < total; i++) mask[i] |= made[i];
    }
    message.textContent = "";
    message.hidden = true;
  } catch (error) {
    if (!(error instanceof SearchError)) throw error;
    message.textContent = error.message;  // a bad pattern: say so, keep the last good result
    message.hidden = false;
    return;
  }
  const devices = columns.device.codes, types = columns.type.codes;
  const typeCode = state.type === "" ? -1 : columns.type.values.indexOf(state.type);
  for (let i = 0; i < total; i++) {
    if (mask[i] && state.devices.size && !state.devices.has(devices[i])) mask[i] = 0;
    if (mask[i] && typeCode >= 0 && types[i] !== typeCode) mask[i] = 0;
    if (mask[i] && state.finding >= 0 && !findingRows[state.finding].has(i)) mask[i] = 0;
  }
  opMask = mask;
  const order = sortOrder();
  const kept = new Int32Array(total);
  let n = 0;
  for (let k = 0; k < order.length; k++) if (mask[order[k]]) kept[n++] = order[k];
  visible = kept.subarray(0, n);
  if (fromFilters) state.page = 0;
  showPage();
  const filtering = Boolean(state.text) || state.devices.size > 0 || state.type !== ""
    || state.finding >= 0;
  if (fromFilters) { highlight(filtering); drawTimeline(); }
  const outlined = matchesTotal > matchesShown
    ? ` \u00b7 timeline outlines ${count(matchesShown)} of ${count(matchesTotal)} matching bars` : "";
  const status = el("tfplace-status");
  const shown = document.createElement("b");
  shown.textContent = count(n);
  status.replaceChildren("showing ", shown, ` of ${count(total)} ops${outlined}`);
}

async function start() {
  const search = el("tfplace-search");
  search.value = state.text;
  let pending = 0;
  const later = () => {  // coalesce fast typing: one update per frame
    cancelAnimationFrame(pending);
    pending = requestAnimationFrame(() => update(true));
  };
  search.addEventListener("input", () => { state.text = search.value; later(); });
  el("tfplace-regex").addEventListener("change", (e) => { state.regex = e.target.checked; later(); });
  el("tfplace-case").addEventListener("change", (e) => { state.caseSensitive = e.target.checked; later(); });
  const typeMenu = el("tfplace-type");
  for (const type of DATA.types) {
    const option = document.createElement("option");
    option.value = type;
    option.textContent = type;
    typeMenu.appendChild(option);
  }
  typeMenu.addEventListener("change", () => { state.type = typeMenu.value; later(); });
  renderChips();
  findingsList.render({ model: findingsModel, el: el("tfplace-findings") });
  memoryPeaks.render({ model: memoryModel, el: el("tfplace-memory") });
  update(true);
  opTable.render({ model: tableModel, el: el("tfplace-table") });
  document.body.dataset.tableMs = performance.now().toFixed(1);  // for benchmarks and tests
  await plotlyReady;
  if (typeof Plotly === "undefined") {
    el("tfplace-timeline").textContent = "plotly.js did not load: the timeline cannot be drawn.";
  } else {
    plotlyLoaded = true;
    drawTimeline();
    plot.on("plotly_afterplot", untab);
    plot.on("plotly_click", (event) => {
      const point = event && event.points && event.points[0];
      if (!point) return;
      const bar = T.webgl ? Math.floor(point.pointNumber / 3) : point.pointNumber;
      T.devices.forEach((d, i) => {
        let op = -1;
        if (point.curveNumber === d.base) op = pointOps[i][bar];
        else if (point.curveNumber === d.match) op = pointOps[i][matchPoints[i][bar]];
        if (op !== undefined && op >= 0) select(op, true);
      });
    });
  }
  // Ready: the table is there and the timeline is painted. WebGL bars are drawn while the
  // next frame renders: wait for that frame, then for a task after it.
  await drawn;
  await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  document.body.dataset.readyMs = performance.now().toFixed(1);
  document.body.dataset.ready = "true";
}
// -- XLA: the HLO instructions a cluster ran (DATA.xla, html.xla_table; null without XLA) ------
// One row per instruction (longest first): what it is, where it ran, how often and how long,
// the TF ops XLA put in it and the user's line. Names are set as text, never parsed as HTML.
function renderXla() {
  const box = el("tfplace-xla");
  const xla = DATA.xla;
  if (!xla || !xla.rows.length) { box.replaceChildren(); box.hidden = true; return; }
  box.hidden = false;
  const title = document.createElement("h3");
  title.style.fontSize = "1em";
  title.style.margin = "1em 0 0.3em";
  const listed = xla.rows.length < xla.total
    ? `the ${count(xla.rows.length)} longest of ${count(xla.total)}` : count(xla.total);
  title.textContent = `XLA instructions: ${listed}, ${formatUs(xla.time_us)} in all`;
  const table = document.createElement("table");
  table.setAttribute("aria-label", "HLO instructions XLA ran, the longest first");
  table.style.borderCollapse = "collapse";
  table.style.width = "100%";
  const heads = [["instruction", "instruction"], ["kind", "kind"], ["cluster", "cluster"],
    ["device", "device"], ["runs", "runs"], ["total_us", "total"], ["mean_us", "mean"],
    ["tf_ops", "TF ops"], ["source", "source"]];
  const numeric = new Set(["runs", "total_us", "mean_us"]);
  const head = table.createTHead().insertRow();
  for (const [name, label] of heads) {
    const th = document.createElement("th");
    th.textContent = label;
    th.dataset.column = name;
    th.style.textAlign = numeric.has(name) ? "right" : "left";
    th.style.padding = "3px 8px";
    head.appendChild(th);
  }
  const body = table.createTBody();
  for (const row of xla.rows) {
    const tr = body.insertRow();
    tr.dataset.instruction = row.instruction;
    for (const [name] of heads) {
      const value = row[name];
      const td = tr.insertCell();
      td.dataset.column = name;
      td.style.padding = "3px 8px";
      if (name === "runs") td.textContent = count(value);
      else if (numeric.has(name)) td.textContent = formatUs(value);
      else if (name === "tf_ops") td.textContent = value.join(", ");
      else td.textContent = value;
      td.title = td.textContent;
      if (numeric.has(name)) td.style.textAlign = "right";
      if (name !== "device" && !numeric.has(name)) td.style.fontFamily = "monospace";
      // short values on one line; a long path or instruction name wraps inside the page
      if (name === "source" || name === "instruction") td.style.overflowWrap = "anywhere";
      else if (name !== "tf_ops") td.style.whiteSpace = "nowrap";
    }
  }
  box.replaceChildren(title, table);
}
renderXla();
await start();
