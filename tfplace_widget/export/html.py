"""``trace.to_html(path)``: the panel as one self-contained HTML file, for people without a kernel.

The file opens from disk in any current browser, offline: no server, no kernel, nothing
fetched. It holds the panel's header (``panel_html.header_html``), the device chips, the
search box (the panel's rules, ported to JavaScript: ``SEARCH_JS``), "showing N of M ops",
the timeline and the op table, and works like the panel: typing narrows the table and
outlines the matching bars (the rest dimmed), a chip or the op-type menu keeps only those
ops, a click on a row rings the op in the timeline and a click on a bar picks its op.

How it is built, so that it stays the panel's picture:

- the timeline is :class:`~tfplace_widget.timeline.TimelineFigure`, the very trace dicts and
  layout the panel's widget draws (lanes, device colours, WebGL above 3,000 bars, the 10,000
  longest events); a search changes the same overlays the widget's does (the dimmed bars and
  the "matches" traces, at most ``MAX_MATCH_BARS`` outlined), computed in the page from the
  drawn points;
- plotly.js is embedded once, as plotly's Python package ships it (found as
  ``bundle_holder`` finds it, without importing plotly); nothing is loaded from the network.
  It comes last in the page: the table shows before the browser has read its 4.8 MB, and the
  timeline is drawn once it has;
- the data is one JSON document of column arrays: strings with few distinct values
  (type, device, request, how, reason) as a list of values and one code per op, numbers as
  base64 little-endian float64 (NaN kept), the figure's numeric arrays as base64 typed arrays;
  the document is gzipped and base64-encoded into the page (about 8 times smaller: 100k ops
  fit in a few MB next to plotly.js's 4.8) and unpacked by the browser's
  ``DecompressionStream`` (Chrome 80, Firefox 113, Safari 16.4);
- the table shows one page of rows at a time (``PAGE_SIZE``), like the panel's, so 100k ops
  open as fast as 100.

Everything from the trace is escaped: the header by ``header_html``; names in the table,
chips and details are set as text (``textContent``), never parsed as HTML; the hover texts
and lane labels are escaped by the timeline; the data is base64, so no name can end the
``<script>`` element that holds it.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import os
import pathlib
import sys
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..colors import device_color, text_color_on
from ..devices import name_in_task, short_device, task_of, tasks_of
from ..panel_html import PAGE_SIZE, TABLE_COLUMNS, header_html
from ..plotly_js import plotly_js_path
from ..summary import device_summaries, format_us
from ..timeline import (
    DIM_OPACITY,
    MAX_MATCH_BARS,
    SELECTED_COLOR,
    TimelineFigure,
)
from .output import write_atomically

if TYPE_CHECKING:  # pragma: no cover
    from ..trace import PlacementTrace

COLUMNS = TABLE_COLUMNS  # the panel's table: the same columns and headings
_CODED = ("type", "device", "requested_device", "how", "reason")
_NUMBERS = ("start_us", "duration_us", "runs")
_DTYPES = {np.dtype(np.float32): "f4", np.dtype(np.float64): "f8", np.dtype(np.int32): "i4"}
GZIP_LEVEL = 6
FORMAT_VERSION = 1  # of the JSON document in the page (data-version), for tools that read it

# The panel's search rules (``tfplace_widget.search``) in JavaScript. Kept free of the DOM so
# that tests run it under node against ``search.match_names``.
SEARCH_JS = r"""
class SearchError extends Error {}

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\\/]/g, "\\$&");
}

// A Python ``re`` pattern as a JavaScript RegExp source and flags: the spellings JavaScript
// lacks are rewritten ((?P<name>, (?P=name), \A, \Z, \a, {,n}, (?#...), leading (?imsx)),
// and an escape Python rejects (\q) is rejected here too.
function translatePattern(text) {
  let flags = "";
  let i = 0;
  const lead = /^\(\?([aiLmsux]+)\)/.exec(text);
  if (lead) {
    for (const flag of lead[1]) {
      if (flag === "i" || flag === "m" || flag === "s") flags += flag;
      else if (flag !== "a" && flag !== "u") {
        throw new SearchError(`the inline flag (?${flag}) cannot be used in the report`);
      }
    }
    i = lead[0].length;
  }
  let out = "";
  let inClass = false;
  while (i < text.length) {
    const ch = text[i];
    if (ch === "\\") {
      const next = text[i + 1];
      if (next === undefined) throw new SearchError("bad escape (end of pattern)");
      if (/[A-Za-z]/.test(next)) {
        if (next === "A" && !inClass) out += "^";
        else if (next === "Z" && !inClass) out += "$";
        else if (next === "a") out += "\\x07";
        else if ("bBdDfnrsStvwWxu".includes(next)) out += "\\" + next;
        else throw new SearchError(`bad escape \\${next} at position ${i}`);
      } else {
        out += "\\" + next;
      }
      i += 2;
      continue;
    }
    if (inClass) {
      if (ch === "]") inClass = false;
      out += ch;
      i += 1;
      continue;
    }
    if (ch === "[") {
      inClass = true;
      out += ch;
      i += 1;
      if (text[i] === "^") { out += "^"; i += 1; }
      if (text[i] === "]") { out += "\\]"; i += 1; }  // Python: a leading ] is literal
      continue;
    }
    if (text.startsWith("(?P<", i)) { out += "(?<"; i += 4; continue; }
    if (text.startsWith("(?P=", i)) {
      const end = text.indexOf(")", i);
      if (end < 0) throw new SearchError("missing ), unterminated name");
      out += "\\k<" + text.slice(i + 4, end) + ">";
      i = end + 1;
      continue;
    }
    if (text.startsWith("(?#", i)) {
      const end = text.indexOf(")", i);
      if (end < 0) throw new SearchError("missing ), unterminated comment");
      i = end + 1;
      continue;
    }
    const empty = /^\{,(\d+)\}/.exec(text.slice(i));
    if (empty) { out += `{0,${empty[1]}}`; i += empty[0].length; continue; }
    out += ch;
    i += 1;
  }
  return { source: out, flags };
}

// search.compile_query: a RegExp, or null when a plain substring test will do.
function compileQuery(text, regex, caseSensitive) {
  if (regex) {
    try {
      const { source, flags } = translatePattern(text);
      const all = new Set(flags + (caseSensitive ? "" : "i"));
      return new RegExp(source, [...all].join(""));
    } catch (error) {
      const why = String(error && error.message ? error.message : error);
      throw new SearchError(
        `Invalid regular expression '${text}': ${why}. Fix it, or untick 'regex' to ` +
        "search for the text as typed.");
    }
  }
  if (text.includes("*") || text.includes("?")) {
    const body = text.split(/([*?])/).map(
      (part) => (part === "*" ? ".*" : part === "?" ? "." : escapeRegExp(part))).join("");
    return new RegExp(body, caseSensitive ? "" : "i");
  }
  return null;
}

// search.match_names: 1 where names[i] matches (all 1 for an empty text). ``lowered`` is the
// names lower-cased once (the case-insensitive substring test).
function matchNames(names, lowered, text, regex, caseSensitive) {
  const mask = new Uint8Array(names.length);
  if (!text) { mask.fill(1); return mask; }
  const pattern = compileQuery(text, regex, caseSensitive);
  if (pattern === null) {
    if (caseSensitive) {
      for (let i = 0; i < names.length; i++) mask[i] = names[i].includes(text) ? 1 : 0;
    } else {
      const needle = text.toLowerCase();
      for (let i = 0; i < names.length; i++) mask[i] = lowered[i].includes(needle) ? 1 : 0;
    }
    return mask;
  }
  for (let i = 0; i < names.length; i++) mask[i] = pattern.test(names[i]) ? 1 : 0;
  return mask;
}
"""

# ``summary.format_us`` in JavaScript (the table's start and duration), free of the DOM too.
FORMAT_JS = r"""
// Python's format(x, ".0f") rounds an exact half to even; toFixed rounds it up.
function fixed0(x) {
  const floor = Math.floor(x);
  if (x - floor === 0.5) return String(floor % 2 === 0 ? floor : floor + 1);
  return x.toFixed(0);
}

// summary.format_us: 850 µs, 12.3 ms, 1.25 s.
function formatUs(us) {
  if (us !== us) return "";
  if (us < 1000) return `${fixed0(us)} \u00b5s`;
  if (us < 1000000) return `${(us / 1000).toFixed(1)} ms`;
  return `${(us / 1000000).toFixed(2)} s`;
}
"""

_APP_JS = r"""
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
                type: "", sortBy: "start_us", ascending: true, page: 0, selected: -1 };
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
  if (name === "runs") { const v = column[row]; return v === v ? String(v) : ""; }
  if (DATA.numbers.includes(name)) return formatUs(column[row]);
  return column.values[column.codes[row]];
}

function deviceColor(row) { return DATA.device_colors[columns.device.codes[row]]; }

function renderTable() {
  const root = el("tfplace-table");
  const pages = Math.max(1, Math.ceil(visible.length / PAGE_SIZE));
  state.page = Math.min(state.page, pages - 1);
  const table = document.createElement("table");
  const head = table.createTHead().insertRow();
  for (const [name, label] of DATA.column_labels) {
    const th = document.createElement("th");
    th.textContent = label + (name === state.sortBy ? (state.ascending ? " \u25B2" : " \u25BC") : "");
    th.title = "Sort by " + label;
    th.dataset.column = name;
    th.addEventListener("click", () => {
      if (state.sortBy === name) state.ascending = !state.ascending;
      else { state.sortBy = name; state.ascending = true; }
      update(false);
    });
    head.appendChild(th);
  }
  const body = table.createTBody();
  const start = state.page * PAGE_SIZE;
  for (let k = start; k < Math.min(start + PAGE_SIZE, visible.length); k++) {
    const row = visible[k];
    const tr = body.insertRow();
    tr.dataset.op = names[row];
    tr.style.setProperty("--tfplace-device", deviceColor(row));
    if (row === state.selected) tr.classList.add("tfplace-selected");
    for (const [name] of DATA.column_labels) {
      const td = tr.insertCell();
      const text = cell(row, name);
      td.textContent = text;  // never parsed as HTML
      td.title = text;
      td.dataset.column = name;
    }
    tr.addEventListener("click", () => select(row, false));
  }
  const pager = document.createElement("div");
  pager.className = "tfplace-pager";
  const prev = document.createElement("button");
  prev.textContent = "\u2039 prev";
  prev.disabled = state.page <= 0;
  prev.addEventListener("click", () => { state.page -= 1; renderTable(); });
  const next = document.createElement("button");
  next.textContent = "next \u203A";
  next.disabled = state.page >= pages - 1;
  next.addEventListener("click", () => { state.page += 1; renderTable(); });
  const where = document.createElement("span");
  where.textContent = `page ${state.page + 1} of ${pages}`;
  pager.append(prev, where, next);
  root.replaceChildren(table, pager);
}

// -- timeline ------------------------------------------------------------------------------
const T = DATA.timeline;
const figure = decode(DATA.figure);
const plot = el("tfplace-timeline");
const CONFIG = { displaylogo: false, responsive: true };
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
  drawn = Plotly.react(plot, traces, figure.layout, CONFIG);
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

function renderDetails() {
  const box = el("tfplace-details");
  const row = state.selected;
  if (row < 0) { box.replaceChildren(); box.hidden = true; return; }
  box.hidden = false;
  box.style.borderLeftColor = deviceColor(row);
  const title = document.createElement("b");
  title.textContent = names[row];
  const rest = document.createElement("span");
  rest.textContent = ` (${cell(row, "type")}) on ${columns.device_full[columns.device.codes[row]]}` +
    ` \u00b7 how: ${cell(row, "how")} \u00b7 ${cell(row, "reason")}`;
  box.replaceChildren(title, rest);
}

function select(row, fromTimeline) {
  state.selected = state.selected === row && !fromTimeline ? -1 : row;
  if (fromTimeline && state.selected >= 0) {  // show its row: the page that holds it
    const at = visible.indexOf(state.selected);
    if (at >= 0) state.page = Math.floor(at / PAGE_SIZE);
  }
  renderTable();
  renderDetails();
  ring();
  drawTimeline();
}

function update(fromFilters) {
  const message = el("tfplace-message");
  let mask;
  try {
    mask = matchNames(names, lowered, state.text, state.regex, state.caseSensitive);
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
  }
  opMask = mask;
  const order = sortOrder();
  const kept = new Int32Array(total);
  let n = 0;
  for (let k = 0; k < order.length; k++) if (mask[order[k]]) kept[n++] = order[k];
  visible = kept.subarray(0, n);
  if (fromFilters) state.page = 0;
  renderTable();
  const filtering = Boolean(state.text) || state.devices.size > 0 || state.type !== "";
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
  update(true);
  document.body.dataset.tableMs = performance.now().toFixed(1);  // for benchmarks and tests
  await plotlyReady;
  if (typeof Plotly === "undefined") {
    el("tfplace-timeline").textContent = "plotly.js did not load: the timeline cannot be drawn.";
  } else {
    plotlyLoaded = true;
    drawTimeline();
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
await start();
"""

_CSS = """
:root { color-scheme: light dark; --jp-ui-font-color1: #1f1f1f; --bg: #ffffff; --bg2: #eeeeee;
  --border: #cccccc; --border3: #eeeeee; --hover: #f3f3f3; --selected: #cfe8fc; }
@media (prefers-color-scheme: dark) {
  :root { --jp-ui-font-color1: #e6e6e6; --bg: #111111; --bg2: #2a2a2a; --border: #555555;
    --border3: #2f2f2f; --hover: #222222; --selected: #1d3b53; }
}
body { margin: 0; background: var(--bg); color: var(--jp-ui-font-color1);
  font: 13px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
.tfplace-report { padding: 12px 16px; display: flex; flex-direction: column; gap: 8px; }
#tfplace-chips { display: flex; flex-wrap: wrap; gap: 6px; }
.tfplace-task-group { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; }
.tfplace-task { font-weight: 600; min-width: 11em; }
.tfplace-chip { border: 0; border-radius: 12px; padding: 3px 12px; font: inherit; cursor: pointer;
  opacity: 0.92; }
.tfplace-chip[aria-pressed="true"] { opacity: 1; font-weight: 700;
  box-shadow: 0 0 0 3px var(--jp-ui-font-color1); }
.tfplace-controls { display: flex; flex-wrap: wrap; gap: 12px; align-items: center; }
#tfplace-search { width: 28em; font: inherit; padding: 3px 6px; }
#tfplace-message { border-left: 4px solid #ed6c02; padding: 4px 8px; white-space: pre-wrap; }
#tfplace-timeline { width: 100%; min-height: 120px; }
#tfplace-details { border-left: 6px solid; padding: 4px 10px; font-family: monospace; }
#tfplace-table { max-height: 460px; overflow: auto; }
#tfplace-table table { border-collapse: collapse; width: 100%; }
#tfplace-table th { position: sticky; top: 0; cursor: pointer; text-align: left;
  white-space: nowrap; padding: 4px 8px; background: var(--bg2);
  border-bottom: 1px solid var(--border); user-select: none; }
#tfplace-table td { padding: 3px 8px; border-bottom: 1px solid var(--border3);
  white-space: nowrap; max-width: 28em; overflow: hidden; text-overflow: ellipsis; }
#tfplace-table td[data-column="reason"] { max-width: 24em; }
#tfplace-table td[data-column="op"] { max-width: 16em; font-family: monospace;
  border-left: 6px solid var(--tfplace-device); }
#tfplace-table td[data-column="device"] { color: var(--tfplace-device); font-weight: 600; }
#tfplace-table tbody tr { cursor: pointer; }
#tfplace-table tbody tr:hover { background: var(--hover); }
#tfplace-table tr.tfplace-selected { background: var(--selected);
  outline: 2px solid var(--tfplace-device); }
.tfplace-pager { display: flex; gap: 8px; align-items: center; padding: 4px 0; }
.tfplace-pager button { font: inherit; }
footer { opacity: 0.6; font-size: 11px; }
"""


def write_html(
    trace: PlacementTrace, path: str | os.PathLike, *, search: str = "", overwrite: bool = True
) -> pathlib.Path:
    """Write ``trace`` as one self-contained HTML report to ``path`` (see the module
    docstring); return the path.

    ``search`` fills the search box (the report opens narrowed to it). The file appears
    complete or not at all; a path that cannot be written is a
    :class:`~tfplace_widget.export.TraceWriteError` (a ``TraceError`` and an ``OSError``)
    naming it; with ``overwrite=False`` an existing path is kept and is a ``FileExistsError``
    too. A prediction (no events) still writes a report: its timeline is empty.
    """
    target = os.fspath(path)
    page = report_html(trace, search=search).encode("utf-8")
    write_atomically(
        target, "the HTML report", lambda stream: _write(stream, page), overwrite=overwrite
    )
    return pathlib.Path(target)


def _write(stream: IO[bytes], page: bytes) -> None:
    stream.write(page)


def report_html(trace: PlacementTrace, *, search: str = "") -> str:
    """The report as a string: the page :func:`write_html` writes."""
    if not isinstance(search, str):
        raise TypeError(f"search must be a str (the search box's text), not {search!r}")
    figure = TimelineFigure(trace.events, trace.devices, trace.transfers, trace.inputs)
    data = report_data(trace, figure, search=search)
    header = header_html(trace, figure.notes(len(trace.transfers)))
    title = "TensorFlow placement" + (f" · {trace.source}" if trace.source else "")
    from .. import __version__

    return "".join(
        [
            "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n",
            "<meta name='viewport' content='width=device-width, initial-scale=1'>\n",
            f"<meta name='generator' content='tfplace_widget {html.escape(__version__)}'>\n",
            f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n",
            "<main class='tfplace-report'>\n",
            f"<header id='tfplace-header'>{header}</header>\n",
            "<div id='tfplace-chips'></div>\n",
            "<div class='tfplace-controls'>",
            "<input id='tfplace-search' type='search' aria-label='search op names' ",
            "placeholder='search op names: text, * and ? globs, or a regex' autocomplete='off'>",
            "<label><input id='tfplace-regex' type='checkbox'> regex</label>",
            "<label><input id='tfplace-case' type='checkbox'> match case</label>",
            "<select id='tfplace-type' aria-label='op type'>",
            "<option value=''>all op types</option></select></div>\n",
            "<div id='tfplace-status'></div>\n<div id='tfplace-message' hidden></div>\n",
            "<div id='tfplace-timeline'></div>\n<div id='tfplace-details' hidden></div>\n",
            "<div id='tfplace-table'></div>\n",
            "<noscript>This report needs JavaScript for its table and timeline.</noscript>\n",
            f"<footer>Written by tfplace_widget {html.escape(__version__)}: a static copy of ",
            "the placement panel, with no kernel behind it.</footer>\n</main>\n",
            "<script id='tfplace-data' type='application/octet-stream' ",
            f"data-encoding='gzip+base64' data-version='{FORMAT_VERSION}'>",
            packed_json(data),
            "</script>\n<script>\n'use strict';\n(async () => {",
            SEARCH_JS,
            FORMAT_JS,
            _APP_JS,
            "})().catch((error) => {\n",
            "  document.getElementById('tfplace-message').hidden = false;\n",
            "  document.getElementById('tfplace-message').textContent = ",
            "'The report could not be shown: ' + error;\n  throw error;\n});\n",
            "</script>\n<script>",
            _plotly_js(),
            "</script>\n</body>\n</html>\n",
        ]
    )


def report_data(
    trace: PlacementTrace, figure: TimelineFigure | None = None, *, search: str = ""
) -> dict[str, Any]:
    """The JSON document the page reads: the ops as column arrays, the chips, the timeline's
    figure and which op each of its bars draws."""
    if figure is None:
        figure = TimelineFigure(trace.events, trace.devices, trace.transfers, trace.inputs)
    ops = trace.ops
    columns: dict[str, Any] = {"op": ops["op"].astype(str).tolist()}
    for name in _CODED:
        values = ops[name] if name in ops else pd.Series([""] * len(ops))
        codes, uniques = pd.factorize(values.astype(object).fillna("").astype(str))
        columns[name] = {"values": list(uniques), "codes": codes.tolist()}
    full_devices = columns["device"]["values"]
    columns["device_full"] = full_devices
    columns["device"] = {
        "values": [short_device(d) or d for d in full_devices],
        "codes": columns["device"]["codes"],
    }
    for name in _NUMBERS:
        values = ops[name] if name in ops else pd.Series(np.nan, index=ops.index)
        numbers = pd.to_numeric(values, errors="coerce").astype("float64")
        columns[name] = _typed(numbers.to_numpy(dtype=np.float64, na_value=np.nan))
    device_code = {device: i for i, device in enumerate(full_devices)}
    grouped = len(tasks_of(trace.devices)) > 1  # across a cluster: chips per task, as the panel
    chips = [
        {
            "device": s.device,
            "code": device_code.get(s.device, -1),
            "task": task_of(s.device) if grouped else "",
            "label": (
                f"{name_in_task(s.device) if grouped else short_device(s.device)}"
                f" · {s.ops} ops · {format_us(s.busy_us)} busy"
            ),
            "color": device_color(s.device),
            "text_color": text_color_on(device_color(s.device)),
        }
        for s in device_summaries(ops, trace.events, trace.devices)
    ]
    return {
        "version": FORMAT_VERSION,
        "total": len(ops),
        "search": search,
        "page_size": PAGE_SIZE,
        "column_labels": COLUMNS,
        "numbers": list(_NUMBERS),
        "columns": columns,
        "device_colors": [device_color(d) for d in full_devices],
        "chips": chips,
        "types": sorted(t for t in columns["type"]["values"] if t),
        "figure": {"data": _encode(figure.data), "layout": _encode(figure.layout)},
        "timeline": _timeline_map(trace, figure),
    }


def _timeline_map(trace: PlacementTrace, figure: TimelineFigure) -> dict[str, Any]:
    """For each device's bar trace, the ``trace.ops`` row of each bar (by op and device, as
    the panel matches them; -1 for an event without an op row)."""
    ops = trace.ops
    keys = ops[["op", "device"]].assign(_row=np.arange(len(ops), dtype=np.int64))
    keys = keys.drop_duplicates(["op", "device"])
    located = figure.events[["op", "device"]].merge(keys, how="left", on=["op", "device"])
    event_row = located["_row"].fillna(-1).to_numpy(dtype=np.int32)
    return {
        "webgl": bool(figure.webgl),
        "max_match_bars": MAX_MATCH_BARS,
        "dim_opacity": DIM_OPACITY,
        "selected_color": SELECTED_COLOR,
        "selected_index": figure.selected_index,
        "devices": [
            {
                "device": t.device,
                "color": device_color(t.device),
                "base": t.base_index,
                "match": t.match_index,
                "ops": _typed(event_row[t.rows].astype(np.int32)),
            }
            for t in figure.device_traces
        ],
    }


def _typed(values: np.ndarray) -> dict[str, str]:
    """A numeric array as ``{"dtype", "b64"}``: its little-endian bytes in base64."""
    kind = _DTYPES[values.dtype]
    data = np.ascontiguousarray(values)
    if sys.byteorder != "little":  # pragma: no cover
        data = data.byteswap()
    return {"dtype": kind, "b64": base64.b64encode(data.tobytes()).decode("ascii")}


def _encode(value: Any) -> Any:
    """``value`` as JSON: numpy arrays of numbers as :func:`_typed`, other arrays as lists
    (NaN and None as null), numpy scalars as numbers (like ``timeline_widget.encode``)."""
    if isinstance(value, dict):
        return {key: _encode(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(item) for item in value]
    if isinstance(value, np.ndarray):
        if value.dtype in _DTYPES:
            return _typed(value)
        return [None if item is None or item != item else item for item in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


def packed_json(data: dict[str, Any]) -> str:
    """``data`` as the page holds it: its JSON (UTF-8) gzipped, in base64. Gzip makes the
    columns about 8 times smaller (names share prefixes, codes repeat); base64 has no
    character that could end the ``<script>`` element that holds it."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    packed = gzip.compress(text.encode("utf-8"), compresslevel=GZIP_LEVEL, mtime=0)
    return base64.b64encode(packed).decode("ascii")


def unpack_json(text: str) -> dict[str, Any]:
    """The document :func:`packed_json` made (for tools and tests that read a report)."""
    return json.loads(gzip.decompress(base64.b64decode(text)).decode("utf-8"))


plotly_path = plotly_js_path  # the file the report embeds (the panel's holder sends it too)


def _plotly_js() -> str:
    """plotly.min.js as plotly's package ships it (:func:`plotly_path`)."""
    path = plotly_path()
    try:
        code = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RuntimeError(
            f"plotly.js is missing ({path}): the report embeds it. Install plotly "
            "(pip install plotly), which tfplace_widget depends on."
        ) from exc
    # A "</script" inside would end the element early (plotly.min.js has none today).
    return code.replace("</script", "<\\/script")
