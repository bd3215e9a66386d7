"""``trace.to_html(path)``: the panel as one self-contained HTML file, for people without a kernel.

The file opens from disk in any current browser, offline: no server, no kernel, nothing
fetched. It holds the panel's header (``panel_html.header_html``), the device chips, the
search box (the panel's rules, in JavaScript: ``SEARCH_JS``), the findings (the panel's list:
``_static/findings.js``), "showing N of M ops", the timeline and the op table (the panel's own:
``_static/table.js``),
and works like the panel: typing narrows the table and outlines the matching bars (the rest
dimmed), a chip, a finding or the op-type menu keeps only those ops, a click on a row rings
the op in the timeline and a click on a bar picks its op. The findings measured in this run come first; those predicted for a machine with
a GPU that the run did not have follow under a header of their own (``finding_groups``).

How it is built, so that it stays the panel's picture:

- the timeline is :class:`~tfplace_widget._rendering.figure.TimelineFigure`, the very trace dicts and
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

With TensorFlow's allocator records (issue 34) the timeline has the panel's memory lane and,
above the controls, each device's memory peak with the ops holding it (``_static/memory.js``,
the panel's; a click on an op picks it). With XLA (issue 23) the op table has the ``xla_op`` column (the HLO instruction each op of a
cluster went into), and a table under it lists the instructions XLA ran (``trace.xla``, one
row per instruction with its runs and time, the longest first); the timeline draws them on
their device's lane as the panel's does. A trace without XLA shows neither.

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
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .. import _static as static
from .._analyses.summary import device_summaries, format_us
from .._model.devices import name_in_task, short_device, task_of, tasks_of
from .._rendering.arrays import as_base64, encode
from .._rendering.colors import device_color, ink_colors, text_color_on
from .._rendering.figure import (
    DIM_OPACITY,
    MAX_MATCH_BARS,
    SELECTED_COLOR,
    TimelineFigure,
    event_rows,
)
from .._rendering.finding_items import finding_items, severity_counts
from .._rendering.html_parts import (
    NUMBER_COLUMNS,
    PAGE_SIZE,
    TABLE_COLUMNS,
    TABLE_WIDTHS,
    header_html,
)
from .._rendering.memory_lane import memory_items
from .._rendering.plotly_js import plotly_js_path
from .._rendering.search import SEARCH_HELP, SEARCH_PLACEHOLDER
from .output import write_atomically

if TYPE_CHECKING:  # pragma: no cover
    from .._model.trace import PlacementTrace

COLUMNS = TABLE_COLUMNS  # the panel's table: the same columns and headings
_CODED = ("type", "device", "requested_device", "how", "reason")
SOURCE_COLUMNS = ("source", "source_path")  # coded, -1 where not recorded; absent if nowhere
XLA_COLUMN = ("xla_op", "XLA")  # in the op table when an op went into an XLA instruction
# Its width, fixed: its heading (with the sort arrow) fits, and so do the other columns at
# 800 px when the names and reasons share what is left in proportion to their least widths.
XLA_WIDTH = {"em": 4.6}
MAX_XLA_ROWS = 500  # instructions listed in the report's XLA table (the longest)
GZIP_LEVEL = 6
FORMAT_VERSION = 1  # of the JSON document in the page (data-version), for tools that read it

# The page's script and style sheets, in static/: the panel's search rules
# (``tfplace_widget._rendering.search``) and ``summary.format_us`` in JavaScript, free of the DOM
# (tests/js/ runs them under node), the panel's op table and findings list (``table.js`` and
# ``findings.js``, their anywidget modules as scripts: ``opTable`` and ``findingsList``), then
# the page itself, which hands each a model of its own.
SEARCH_JS = static.text("search.js")
FORMAT_JS = static.text("format.js")
TABLE_JS = static.page_script("table.js", "opTable")
FINDINGS_JS = static.page_script("findings.js", "findingsList")
MEMORY_JS = static.page_script("memory.js", "memoryPeaks")
_APP_JS = static.text("report.js")
_VIEWS_CSS = static.text("table.css") + static.text("findings.css") + static.text("memory.css")
_CSS = static.text("report.css")


def write_html(
    trace: PlacementTrace, path: str | os.PathLike, *, search: str = "", overwrite: bool = True
) -> pathlib.Path:
    """Write ``trace`` as one self-contained HTML report to ``path`` (see the module
    docstring); return the path.

    ``search`` fills the search box (the report opens narrowed to it). The file appears
    complete or not at all; a path that cannot be written is a
    :class:`~tfplace_widget.TraceWriteError` (a ``TraceError`` and an ``OSError``)
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
    figure = TimelineFigure(
        trace.events, trace.devices, trace.transfers, trace.inputs, memory=trace.memory
    )
    data = report_data(trace, figure, search=search)
    header = header_html(trace, figure.notes(len(trace.transfers)))
    title = "TensorFlow placement" + (f" · {trace.source}" if trace.source else "")
    from .._model.version import __version__

    return "".join(
        [
            "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n",
            "<meta name='viewport' content='width=device-width, initial-scale=1'>\n",
            f"<meta name='generator' content='tfplace_widget {html.escape(__version__)}'>\n",
            f"<title>{html.escape(title)}</title>\n<style>\n{_VIEWS_CSS}</style>\n",
            f"<style>\n{_CSS}</style>\n</head>\n<body>\n",
            "<main class='tfplace-report'>\n",
            f"<header id='tfplace-header'>{header}</header>\n",
            "<div id='tfplace-chips'></div>\n",
            "<section id='tfplace-findings' aria-label='findings'></section>\n",
            "<section id='tfplace-memory' aria-label='memory peaks' hidden></section>\n",
            "<div class='tfplace-controls'>",
            "<input id='tfplace-search' type='search' aria-label='search op names' ",
            f"placeholder='{html.escape(SEARCH_PLACEHOLDER)}' title='{html.escape(SEARCH_HELP)}' ",
            "autocomplete='off'>",
            "<label><input id='tfplace-regex' type='checkbox'> regex</label>",
            "<label><input id='tfplace-case' type='checkbox'> match case</label>",
            "<select id='tfplace-type' aria-label='op type'>",
            "<option value=''>all op types</option></select></div>\n",
            "<div id='tfplace-status'></div>\n<div id='tfplace-message' hidden></div>\n",
            "<div id='tfplace-timeline'></div>\n<div id='tfplace-details' hidden></div>\n",
            "<div id='tfplace-table'></div>\n",
            "<section id='tfplace-xla' hidden></section>\n",
            "<noscript>This report needs JavaScript for its table and timeline.</noscript>\n",
            f"<footer>Written by tfplace_widget {html.escape(__version__)}: a static copy of ",
            "the placement panel, with no kernel behind it.</footer>\n</main>\n",
            "<script id='tfplace-data' type='application/octet-stream' ",
            f"data-encoding='gzip+base64' data-version='{FORMAT_VERSION}'>",
            packed_json(data),
            "</script>\n<script>\n'use strict';\n(async () => {\n",
            SEARCH_JS,
            "\n",
            FORMAT_JS,
            "\n",
            TABLE_JS,
            FINDINGS_JS,
            MEMORY_JS,
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
        figure = TimelineFigure(
            trace.events, trace.devices, trace.transfers, trace.inputs, memory=trace.memory
        )
    ops = trace.ops
    labels, widths = _table_columns(ops)
    columns: dict[str, Any] = {"op": ops["op"].astype(str).tolist()}
    for name in _CODED + tuple(n for n, _ in labels if n == XLA_COLUMN[0]):
        values = ops[name] if name in ops else pd.Series([""] * len(ops))
        codes, uniques = pd.factorize(values.astype(object).fillna("").astype(str))
        columns[name] = {"values": list(uniques), "codes": codes.tolist()}
    for name in SOURCE_COLUMNS:  # the user's lines, for the details and a train.py:42 search
        if name in ops and ops[name].notna().any():
            codes, uniques = pd.factorize(ops[name].astype(object))  # <NA>: code -1
            columns[name] = {"values": list(uniques), "codes": codes.tolist()}
    requested = columns["requested_device"]
    requested["short"] = [short_device(v) or v for v in requested["values"]]  # CPU:0
    full_devices = columns["device"]["values"]
    columns["device_full"] = full_devices
    columns["device"] = {
        "values": [short_device(d) or d for d in full_devices],
        "codes": columns["device"]["codes"],
    }
    for name in NUMBER_COLUMNS:
        values = ops[name] if name in ops else pd.Series(np.nan, index=ops.index)
        numbers = pd.to_numeric(values, errors="coerce").astype("float64")
        columns[name] = as_base64(numbers.to_numpy(dtype=np.float64, na_value=np.nan))
    device_code = {device: i for i, device in enumerate(full_devices)}
    grouped = len(tasks_of(trace.devices)) > 1  # across a cluster: chips per task, as the panel
    chips = [
        {
            "device": s.device,
            "code": device_code.get(s.device, -1),
            "task": task_of(s.device) if grouped else "",
            "label": (
                f"{name_in_task(s.device) if grouped else short_device(s.device)}"
                f" · {s.ops:,} ops · {format_us(s.busy_us)} busy"
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
        "column_labels": labels,
        "column_widths": widths,
        "numbers": list(NUMBER_COLUMNS),
        "columns": columns,
        "device_colors": [device_color(d) for d in full_devices],
        "device_inks": [ink_colors(device_color(d)) for d in full_devices],
        "chips": chips,
        "types": sorted(t for t in columns["type"]["values"] if t),
        "figure": {
            "data": encode(figure.data, as_base64),
            "layout": encode(figure.layout, as_base64),
        },
        "timeline": _timeline_map(trace, figure),
        **findings_data(trace),
        "memory": memory_items(trace),
        "xla": xla_table(trace),
    }


def findings_data(trace: PlacementTrace) -> dict[str, Any]:
    """The report's findings: ``findings``, the panel's list items
    (:func:`~tfplace_widget._rendering.finding_items.finding_items`, in ``trace.findings``'s
    order, the measured ones first), each with ``rows``, the table rows of its ops (a click
    keeps only those); ``findings_counts``, the title's count per severity; and
    ``findings_note``, why there are none when finding them failed (the rest of the report is
    still written, as the panel still shows)."""
    try:
        found = trace.findings
    except Exception as exc:  # a failure to find them must not cost the report
        note = f"could not be computed: {type(exc).__name__}"
        return {"findings": [], "findings_counts": "", "findings_note": note}
    # the rows of the findings' ops only: one pass in C over the column, not a Python one
    wanted = {str(op) for ops in found["ops"] for op in ops}
    names = trace.ops["op"].astype(str)
    rows_of: dict[str, list[int]] = {}
    listed = np.flatnonzero(names.isin(wanted).to_numpy(dtype=bool))
    for row, name in zip(listed.tolist(), names.iloc[listed].tolist(), strict=True):
        rows_of.setdefault(name, []).append(row)
    items = finding_items(found, trace)
    for item, ops in zip(items, found["ops"], strict=True):
        item["rows"] = sorted({row for op in ops for row in rows_of.get(str(op), ())})
    return {"findings": items, "findings_counts": severity_counts(found), "findings_note": ""}


def _table_columns(ops: pd.DataFrame) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """The op table's columns and widths: the panel's, and ``xla_op`` after them when an op
    went into an XLA instruction (a trace without XLA keeps the panel's table)."""
    name = XLA_COLUMN[0]
    if name not in ops or not ops[name].notna().any():
        return list(COLUMNS), dict(TABLE_WIDTHS)
    # One more column leaves the shared ones (op, type, reason) about their least widths at
    # 800 px: shared in proportion to those, none is pushed past what is left.
    widths: dict[str, Any] = {
        column: ({**w, "share": w["min_em"]} if "share" in w else dict(w))
        for column, w in TABLE_WIDTHS.items()
    }
    return [*COLUMNS, XLA_COLUMN], {**widths, name: XLA_WIDTH}


def xla_table(trace: PlacementTrace) -> dict[str, Any] | None:
    """The report's table of the HLO instructions XLA ran (``None`` without XLA): one row per
    instruction of a cluster on a device, with its kind, runs, total and mean time (µs), the
    TF ops in it and the user's line, the longest first, at most :data:`MAX_XLA_ROWS`
    (``total`` says how many there were)."""
    xla = getattr(trace, "xla", None)
    if xla is None or not len(xla):
        return None
    keys = ["cluster", "instruction", "device"]
    grouped = xla.groupby(keys, sort=False)
    rows = grouped.agg(
        kind=("kind", "first"),
        runs=("duration_us", "size"),
        total_us=("duration_us", "sum"),
        tf_ops=("tf_ops", "first"),
        source=("source", "first"),
        first_us=("start_us", "min"),
    ).reset_index()
    rows = rows.sort_values(["total_us", "first_us"], ascending=[False, True], kind="stable")
    shown = rows.head(MAX_XLA_ROWS)
    return {
        "total": len(rows),
        "time_us": int(xla["duration_us"].sum()),
        "rows": [
            {
                "cluster": str(r.cluster),
                "instruction": str(r.instruction),
                "kind": str(r.kind),
                "device": short_device(str(r.device)) or str(r.device),
                "runs": int(r.runs),
                "total_us": int(r.total_us),
                "mean_us": float(r.total_us) / int(r.runs),
                "tf_ops": [str(op) for op in r.tf_ops],
                "source": "" if pd.isna(r.source) else str(r.source),
            }
            for r in shown.itertuples(index=False)
        ],
    }


def _timeline_map(trace: PlacementTrace, figure: TimelineFigure) -> dict[str, Any]:
    """For each device's bar trace, the ``trace.ops`` row of each bar (by op and device, as
    the panel matches them; -1 for an event without an op row)."""
    event_row = event_rows(trace.ops, figure.events).astype(np.int32)
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
                "ops": as_base64(event_row[t.rows].astype(np.int32)),
            }
            for t in figure.device_traces
        ],
    }


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
