"""The panel's HTML: header, op details, messages and the log view, as strings.

Pure functions of a trace (and of what the timeline drew): no widget, no state. Everything from
the trace or the user is escaped here, so the panel can put the results straight into
``widgets.HTML`` values.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import pandas as pd

from .._analyses.summary import format_bytes, format_us, how_counts, plural, transfer_bytes_text
from .._explain import HOW_VALUES
from .._model.devices import short_device, tasks_of
from .._model.trace import PlacementTrace
from .colors import device_color, ink_style

# The op table's columns (as in ``trace.ops``) and headings, and its rows per page: the panel
# and the HTML report show the same table.
TABLE_COLUMNS = [
    ("op", "op"),
    ("type", "type"),
    ("device", "device"),
    ("requested_device", "requested"),
    ("how", "how"),
    ("reason", "reason"),
    ("start_us", "start"),
    ("duration_us", "duration"),
    ("runs", "runs"),
]
# The op table's columns of numbers, right-aligned, in the panel (OpTable's ``numbers``), the
# snapshot and the HTML report (sent to its page as float arrays).
NUMBER_COLUMNS = ("start_us", "duration_us", "runs")
PAGE_SIZE = 50
# How the table's columns share its width, so that it fits the output (800 px shows every
# column): a column of short values has a fixed width in em (its heading with the sort arrow
# and its values fit; a
# longer value is cut with an ellipsis, whole on hover); the names and reasons share what is
# left, each at least ``min_em``. ``_static/table.js`` applies it (the panel's and the report's).
TABLE_WIDTHS: dict[str, dict[str, float]] = {
    "op": {"share": 0.42, "min_em": 9},
    "type": {"share": 0.22, "min_em": 5.5},
    "device": {"em": 6},
    "requested_device": {"em": 7},
    "how": {"em": 6.4},
    "reason": {"share": 0.36, "min_em": 6},
    "start_us": {"em": 5.5},
    "duration_us": {"em": 6.8},
    "runs": {"em": 4.6},
}

MODE_LABELS = {
    "function": "TF2 code, run in the eager runtime",
    "graph": "graph builder, run in a Session",
}
PREDICTED_WORDS = "predicted, not run"
COUNTED_HOWS = ("explicit", "implicit", "colocated", "soft")  # shown even when 0
_MESSAGE_COLORS = {"error": "#d32f2f", "warning": "#ed6c02", "info": "#0288d1"}


def header_html(trace: PlacementTrace, notes: Sequence[str] = ()) -> str:
    """What ran, on how many devices, how the ops got there, the copies, then which mode ran
    and why, ``notes`` (the timeline's own) and the trace's notes, one line each."""
    counts = how_counts(trace.ops)
    how_text = " · ".join(
        f"<b>{counts.get(h, 0):,}</b> {h}"
        for h in HOW_VALUES
        if counts.get(h, 0) or h in COUNTED_HOWS
    )
    lines = (
        [trace.mode_reason, *notes, *trace.notes] if trace.mode_reason else [*notes, *trace.notes]
    )
    if trace.truncated:
        lines.append(
            "TensorFlow stopped recording at 2^20 nodes per step: the trace is incomplete."
        )
    source = f" <span style='opacity:.7'>{html.escape(trace.source)}</span>" if trace.source else ""
    predicted = getattr(trace, "predicted", False)
    mode = PREDICTED_WORDS if predicted else MODE_LABELS.get(trace.mode, "")
    mode_tag = f" <span style='opacity:.7'>· {html.escape(mode)}</span>" if mode else ""
    if predicted:
        mode_tag = (
            " <span class='tfplace-predicted' style='color:#ed6c02;font-weight:600'>· "
            f"{html.escape(mode)}</span>"
        )
    transfers = "predicted cross-device copies" if predicted else "cross-device transfers"
    moved = transfer_bytes_text(trace.transfers)
    if predicted and moved == "sizes not recorded":
        moved = "sizes unknown: nothing ran"
    return (
        f"<div style='color:var(--jp-ui-font-color1)'>"
        f"<b>TensorFlow placement</b>{source}{mode_tag}: {len(trace.ops):,} "
        f"{plural('op', len(trace.ops))} on {len(trace.devices):,} "
        f"{plural('device', len(trace.devices))}{_tasks_text(trace)} · {how_text} · "
        f"<b>{len(trace.transfers):,}</b> {transfers} ({html.escape(moved)})"
        f"{_cross_task_text(trace.transfers)}"
        + "".join(f"<div style='opacity:.8'>{html.escape(n)}</div>" for n in lines)
        + "</div>"
    )


def _tasks_text(trace: PlacementTrace) -> str:
    """`` of 3 tasks`` across a cluster; nothing on one machine."""
    tasks = len(tasks_of(trace.devices))
    return f" of {tasks} tasks" if tasks > 1 else ""


def _cross_task_text(transfers: pd.DataFrame) -> str:
    """`` · 5 between tasks (44.4 kB over the network)``: the copies a cluster pays for."""
    if "cross_task" not in transfers or not transfers["cross_task"].any():
        return ""
    crossing = transfers[transfers["cross_task"].to_numpy(dtype=bool)]
    return (
        f" · <b class='tfplace-cross-task'>{len(crossing):,}</b> between tasks "
        f"({html.escape(transfer_bytes_text(crossing))} over the network)"
    )


def details_html(trace: PlacementTrace, op: str) -> str:
    """One op's device, how and why, inputs, outputs and copies; ``""`` for an unknown op."""
    ops = trace.ops
    rows = ops[ops["op"] == op] if op else ops.iloc[0:0]
    if rows.empty:
        return ""
    row = rows.iloc[0]
    inputs = trace.inputs.get(op, [])
    outputs = trace.consumers_of(op)
    transfers = trace.transfers[trace.transfers["tensor"].str.rsplit(":", n=1).str[0] == op]
    color = device_color(row["device"])

    def names(values: list[str]) -> str:
        return ", ".join(f"<code>{html.escape(v)}</code>" for v in values[:20]) or "none"

    moves = (
        "".join(
            f"<li><code>{html.escape(t.tensor)}</code> {html.escape(short_device(t.src_device))} → "
            f"{html.escape(short_device(t.dst_device))}"
            f"{'' if pd.isna(t.bytes) else ' · ' + html.escape(format_bytes(t.bytes))}"
            f"{' · between tasks, over the network' if getattr(t, 'cross_task', False) else ''}"
            "</li>"
            for t in transfers.itertuples(index=False)
        )
        or "<li>none</li>"
    )
    return (
        f"<div style='border-left:6px solid {color};padding:4px 10px;"
        f"color:var(--jp-ui-font-color1)'>"
        f"<b><code>{html.escape(op)}</code></b> ({html.escape(row['type'])}) on "
        f"<b class='tfplace-ink' style='{ink_style(color)}'>{html.escape(row['device'])}</b>"
        " · how: "
        f"<b>{html.escape(str(row['how']))}</b><br>{html.escape(row['reason'])}<br>"
        f"{_source_html(row)}"
        f"inputs: {names(inputs)}<br>outputs: {names(outputs)}<br>"
        f"transfers:<ul style='margin:0'>{moves}</ul></div>"
    )


# What the op details say of an op with an empty ``source``.
RUNTIME_SOURCE = "made by TensorFlow's runtime, not by your code"


def _source_html(row: pd.Series) -> str:
    """``source: train.py:42 in step`` (its full path in the tooltip) line of the op details;
    what made it for an op of the runtime's; nothing where the trace recorded no source."""
    source = row.get("source")
    if not isinstance(source, str):  # <NA>, or a trace (file) without the column
        return ""
    if not source:
        return f"source: <i class='tfplace-source'>{RUNTIME_SOURCE}</i><br>"
    path = row.get("source_path")
    title = f" title='{html.escape(path, quote=True)}'" if isinstance(path, str) else ""
    return f"source: <code class='tfplace-source'{title}>{html.escape(source)}</code><br>"


def message_html(text: str, kind: str = "info") -> str:
    """A message box (``info``, ``warning`` or ``error``); ``""`` for no text."""
    if not text:
        return ""
    return (
        f"<div style='border-left:4px solid {_MESSAGE_COLORS[kind]};padding:4px 8px;"
        f"white-space:pre-wrap;color:var(--jp-ui-font-color1)'>{html.escape(text)}</div>"
    )


def log_html(shown: Sequence[str], matching: int) -> str:
    """The log lines on screen, with how many of the ``matching`` lines they are."""
    note = (
        f"showing {len(shown):,} of {matching:,} matching lines"
        if matching > len(shown)
        else f"{matching:,} lines"
    )
    return (
        f"<div style='opacity:.7'>{note}</div><pre style='max-height:300px;overflow:auto;"
        f"font-size:11px;color:var(--jp-ui-font-color1)'>"
        f"{html.escape(chr(10).join(shown))}</pre>"
    )


def status_html(shown: int, total: int, outlined: str = "", finding: str = "") -> str:
    """``showing N of M ops``, what the timeline outlines, and the finding filtering them."""
    text = f"showing <b>{shown:,}</b> of {total:,} ops{outlined}"
    if finding:
        text += f" · ops of the finding <code>{html.escape(finding)}</code>"
    return text


def table_cells(rows: pd.DataFrame) -> list[list[str]]:
    """The op table's ``rows`` as the panel shows them (``TABLE_COLUMNS``, device names short,
    times formatted, runs with thousands separators): the panel's pages and the snapshot's."""
    cells = []
    for record in rows[[c for c, _ in TABLE_COLUMNS]].itertuples(index=False):
        op, typ, device, requested, how, reason, start, duration, runs = record
        cells.append(
            [
                op,
                typ,
                short_device(device) or device,
                requested,
                str(how),
                reason,
                format_us(start),
                format_us(duration),
                "" if pd.isna(runs) else f"{int(runs):,}",
            ]
        )
    return cells
