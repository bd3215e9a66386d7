"""The panel's static picture: HTML that shows the panel where no widget can be drawn.

A notebook converted with nbconvert, viewed on GitHub or nbviewer, or opened in a frontend
without the widget manager shows an output's ``text/html`` instead of its widget view. The
panel and the comparison view put this snapshot there (their ``_repr_mimebundle_``): a line
saying it is a snapshot of the live panel, the header, the device chips, the findings, the
first ``SNAPSHOT_ROWS`` rows of the table and the timeline as an inline SVG (one lane per
device lane, bars in device colours; with allocator records, each device's memory peak and the
ops holding it, and a memory row per device under the lanes). No script, nothing fetched; the style sheet is
``_static/snapshot.css``, read once at import.

Pure functions of a trace and of the :class:`TimelineFigure` the panel drew (its lanes, the
lane of each event, the time span). Everything from the trace is escaped. The output stays
small whatever the trace's size: a bounded number of rows and findings, names cut to
``MAX_NAME`` characters, and at most ``MAX_RECTS`` rects in the SVG (bars of a lane that touch
at the drawing's resolution are merged into one; past the limit the resolution is coarsened
until they fit), on at most ``MAX_LANES`` lanes.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from .. import _static as static
from .._analyses.findings import finding_groups
from .._analyses.summary import DeviceSummary, device_summaries, format_us
from .._model.devices import short_device
from .._model.trace import PlacementTrace
from .colors import device_color, text_color_on
from .figure import TimelineFigure
from .finding_items import finding_edit
from .html_parts import NUMBER_COLUMNS, TABLE_COLUMNS, header_html, table_cells
from .memory_lane import memory_items, memory_rows, thin
from .text_report import cut

SNAPSHOT_ROWS = 20
MAX_FINDINGS = 10
MAX_RECTS = 400  # ~55 bytes each: the SVG stays under ~25 KB
MAX_LANES = 40
MAX_NAME = 100  # characters of an op name or message shown; the rest is cut with "…"
MAX_MESSAGE = 300
LABEL_WIDTH = 160  # px left of the bars, for the lane labels
PLOT_WIDTH = 760  # px of the time axis
LANE_HEIGHT = 18
AXIS_HEIGHT = 30
TICKS = 5
MEMORY_ROW_HEIGHT = 40  # px of a device's row of the memory lane
MEMORY_POINTS = 120  # points of a device's memory curve in the SVG
SEVERITY_COLORS = {"high": "#d32f2f", "medium": "#ed6c02", "info": "#0288d1"}
_CSS = static.text("snapshot.css")


def panel_snapshot_html(
    trace: PlacementTrace,
    figure: TimelineFigure | None,
    *,
    rows: pd.DataFrame | None = None,
    findings: pd.DataFrame | None = None,
    findings_note: str = "",
    memory: Sequence[dict] | None = None,
    summaries: Sequence[DeviceSummary] | None = None,
) -> str:
    """The placement panel of ``trace`` as static HTML: ``rows`` are the table's rows in their
    order (by default ``trace.ops``), ``findings`` a ``trace.findings`` frame (``None``: not
    found, ``findings_note`` says why), ``figure`` the timeline the panel drew, ``memory`` the
    memory peaks the panel shows (``memory_items``; by default found here), ``summaries`` its
    device chips' numbers (``device_summaries``; by default found here)."""
    rows = trace.ops if rows is None else rows
    notes = figure.notes(len(trace.transfers)) if figure is not None else []
    shown = min(len(rows), SNAPSHOT_ROWS)
    parts = [
        snapshot_note("panel", shown, len(trace.ops)),
        header_html(_cut_texts(trace), [cut(note, MAX_MESSAGE) for note in notes]),
        chips_html(trace, summaries),
        findings_html(findings, findings_note, trace=trace),
        memory_html(memory_items(trace) if memory is None else memory),
        as_wide_as_the_table(
            [timeline_svg(figure) if figure is not None else ""],
            table_html(
                [label for _, label in TABLE_COLUMNS],
                table_cells(rows.head(shown)),
                [device_color(d) for d in rows["device"].head(shown)],
                [column in NUMBER_COLUMNS for column, _ in TABLE_COLUMNS],
            ),
        ),
    ]
    return page(parts)


def comparison_snapshot_html(
    summary: str,
    titles: Sequence[str],
    figures: Sequence[TimelineFigure | None],
    labels: Sequence[str],
    cells: Sequence[Sequence[str]],
    colors: Sequence[str],
    total: int,
    numbers: Sequence[bool] = (),
) -> str:
    """The comparison view as static HTML: its ``summary`` and timeline ``titles`` (HTML the
    view made, already escaped), both timelines, and the first rows of the diff table
    (``cells``, ``colors`` and ``labels`` as the view's table has them, ``numbers`` true for
    its columns of numbers; ``total`` rows)."""
    shown = min(len(cells), SNAPSHOT_ROWS)
    timelines = []
    for title, figure in zip(titles, figures, strict=True):
        timelines += [title, timeline_svg(figure) if figure is not None else ""]
    table = table_html(labels, list(cells)[:shown], list(colors)[:shown], numbers)
    parts = [
        snapshot_note("comparison view", shown, total),
        summary,
        as_wide_as_the_table(timelines, table),
    ]
    return page(parts)


def guarded(make: Callable[[], str]) -> str:
    """``make()``, or a line saying why there is no snapshot: a bug here must never cost the
    live panel its output (IPython shows nothing of a display whose bundle raised)."""
    try:
        return make()
    except Exception as exc:
        return (
            "<div class='tfplace-snapshot-note'>No static snapshot of this panel: "
            f"{html.escape(type(exc).__name__)}: {html.escape(cut(str(exc), MAX_MESSAGE))}</div>"
        )


def page(parts: Sequence[str]) -> str:
    """The snapshot's parts in one ``div``, with its style sheet."""
    return (
        f"<div class='tfplace-snapshot'><style>{_CSS}</style>"
        + "".join(p for p in parts)
        + "</div>"
    )


def snapshot_note(what: str, shown: int, total: int) -> str:
    """The line that says this is a snapshot, and how many ops the table leaves out."""
    left = total - shown
    rows = f"The table shows the first {shown:,} of {total:,} ops" + (
        f"; {left:,} are not shown." if left > 0 else "."
    )
    return (
        f"<div class='tfplace-snapshot-note'>A static snapshot of the live {html.escape(what)}, "
        "as it was when the cell ran: run the notebook to search, filter and re-run. "
        f"{rows}</div>"
    )


def chips_html(trace: PlacementTrace, summaries: Sequence[DeviceSummary] | None = None) -> str:
    """One chip per device in its colour (the first ``MAX_LANES``): its ops and busy time
    (``summaries``, the panel's chips', else found here: a pass over every op and event)."""
    chips = []
    if summaries is None:
        summaries = device_summaries(trace.ops, trace.events, trace.devices)
    for summary in summaries[:MAX_LANES]:
        color = device_color(summary.device)
        name = cut(short_device(summary.device) or summary.device, MAX_NAME)
        chips.append(
            f"<span class='tfplace-snapshot-chip' title='{html.escape(cut(summary.device, MAX_NAME))}' "
            f"style='background:{color};color:{text_color_on(color)}'>"
            f"{html.escape(name)} · {summary.ops:,} ops"
            f" · {html.escape(format_us(summary.busy_us))} busy</span>"
        )
    if len(summaries) > MAX_LANES:
        chips.append(f"<span>and {len(summaries) - MAX_LANES:,} more devices</span>")
    return f"<div class='tfplace-snapshot-chips'>{''.join(chips)}</div>"


def _cut_texts(trace: PlacementTrace) -> PlacementTrace:
    """``trace`` with the texts its header shows cut: its source, mode reason and the first
    ``MAX_FINDINGS`` notes."""
    return dataclasses.replace(
        trace,
        source=cut(trace.source, MAX_NAME),
        mode_reason=cut(trace.mode_reason, MAX_MESSAGE),
        notes=[cut(note, MAX_MESSAGE) for note in trace.notes[:MAX_FINDINGS]],
    )


def findings_html(
    findings: pd.DataFrame | None, note: str = "", *, trace: PlacementTrace | None = None
) -> str:
    """The first ``MAX_FINDINGS`` findings, worst first as found, with how many are left out:
    those measured in this run, then, under their own header (``finding_groups``), those
    predicted for a machine with a GPU that ``trace`` did not run on."""
    if findings is None:
        why = f" ({html.escape(note)})" if note else ""
        return f"<div><b>Findings:</b> not in this snapshot{why}</div>"
    if not len(findings):
        return "<div><b>Findings:</b> none</div>"
    lists = []
    for header, rows in finding_groups(findings.head(MAX_FINDINGS), trace):
        items = []
        fixes = rows["fix"] if "fix" in rows else [None] * len(rows)
        for kind, severity, message, ops, fix in zip(
            rows["kind"], rows["severity"], rows["message"], rows["ops"], fixes, strict=True
        ):
            color = SEVERITY_COLORS.get(str(severity), "#777777")
            count = len(ops)
            edit = finding_edit(fix)
            items.append(
                f"<li style='border-left-color:{color}'><span class='tfplace-snapshot-badge' "
                f"style='background:{color}'>{html.escape(str(severity))}</span>"
                f"<code>{html.escape(str(kind))}</code>"
                f"{html.escape(cut(str(message), MAX_MESSAGE))}"
                f" <span style='opacity:.7'>({count:,} op{'s' if count != 1 else ''})</span>"
                + (
                    f"<div class='tfplace-finding-edit'>{html.escape(cut(edit, MAX_MESSAGE))}</div>"
                    if edit
                    else ""
                )
                + "</li>"
            )
        title = (
            f"<div class='tfplace-snapshot-findings-group'><b>{html.escape(header)}</b></div>"
            if header
            else ""
        )
        lists.append(f"{title}<ul class='tfplace-snapshot-findings'>{''.join(items)}</ul>")
    more = len(findings) - min(len(findings), MAX_FINDINGS)
    tail = f"<div style='opacity:.7'>and {more:,} more findings</div>" if more > 0 else ""
    return f"<div><b>Findings</b> ({len(findings):,})</div>{''.join(lists)}{tail}"


def memory_html(items: Sequence[dict]) -> str:
    """Each device's memory peak and the ops holding it, with why they are on that device
    (``memory_lane.memory_items``, the panel's list as text); nothing without records."""
    if not items:
        return ""
    lines = []
    for item in items:
        ops = "".join(
            f"<li><code>{html.escape(cut(op['op'], MAX_NAME))}</code> <b>{html.escape(op['bytes'])}"
            f"</b> <span style='opacity:.75'>{html.escape(op['type'])}"
            f"{' · ' + html.escape(op['how']) + ': ' if op['how'] else ''}"
            f"{html.escape(cut(op['reason'], MAX_MESSAGE))}</span></li>"
            for op in item["ops"]
        )
        more = f"<li style='opacity:.7'>and {item['more']:,} more ops</li>" if item["more"] else ""
        peak = (
            f" peak <b>{html.escape(item['peak'])}</b> at {html.escape(item['at'])}, held by:"
            if item.get("recorded", True)
            else ": no allocation of the step recorded"
        )
        held = (
            f"<div style='opacity:.85'>{html.escape(item['persistent'])}</div>"
            if item.get("persistent")
            else ""
        )
        lines.append(
            f"<li style='border-left-color:{item['color']}'><b style='color:{item['color']}'>"
            f"{html.escape(item['label'])}</b> ({html.escape(item['allocator'])}){peak}"
            f"{held}<ol>{ops}{more}</ol></li>"
        )
    return (
        "<div><b>Memory peak per device</b> (TensorFlow's allocator records: the step's own "
        "tensors; variables and constants held through the step apart)</div>"
        f"<ul class='tfplace-snapshot-memory'>{''.join(lines)}</ul>"
    )


def table_html(
    labels: Sequence[str],
    cells: Sequence[Sequence[str]],
    colors: Sequence[str],
    numbers: Sequence[bool] = (),
) -> str:
    """A plain table: ``labels`` as headings, one row of ``cells`` per row, each row marked on
    the left in its device colour. Cells are text (escaped here) cut to ``MAX_NAME``; columns
    whose ``numbers`` entry is true are right-aligned, the others left-aligned.

    The alignment is in each cell's ``style``: the hosts that show a snapshot have style sheets
    of their own that win over the snapshot's (JupyterLab's and nbconvert's
    ``.jp-RenderedHTMLCommon td`` right-aligns every cell), but not over a cell's own style."""
    aligns = ["right" if i < len(numbers) and numbers[i] else "left" for i in range(len(labels))]
    head = "".join(
        f"<th style='text-align:{align}'>{html.escape(label)}</th>"
        for label, align in zip(labels, aligns, strict=True)
    )
    body = []
    for row, color in zip(cells, colors, strict=True):
        tds = [
            f"<td style='text-align:{align}'>{html.escape(cut(str(cell), MAX_NAME))}</td>"
            for cell, align in zip(row, aligns, strict=True)
        ]
        if tds:
            tds[0] = tds[0].replace("style='", f"style='border-left-color:{color};", 1)
        body.append(f"<tr>{''.join(tds)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def as_wide_as_the_table(timelines: Sequence[str], table: str) -> str:
    """The ``timelines`` (SVGs and their titles) above ``table`` in one box as wide as the
    table (or as the timeline's own width, if that is wider): the box shrinks to fit its
    content, and each SVG fills its width. Inline styles, for the reason of
    :func:`table_html`."""
    return (
        "<div class='tfplace-snapshot-body' style='display:inline-block'>"
        + "".join(timelines)
        + table
        + "</div>"
    )


def timeline_svg(figure: TimelineFigure, max_rects: int = MAX_RECTS) -> str:
    """The timeline as an inline SVG: a labelled lane per (device, lane) of ``figure``, the
    events as bars in their device's colour (merged where they touch, at most ``max_rects``),
    and a time axis."""
    lanes = figure.lanes[:MAX_LANES]
    labels = figure.lane_labels()[: len(lanes)]
    memory = memory_rows(figure.memory_curves)
    height = LANE_HEIGHT * max(1, len(lanes)) + MEMORY_ROW_HEIGHT * len(memory) + AXIS_HEIGHT
    width = LABEL_WIDTH + PLOT_WIDTH + 30
    span = figure.span_us or 1.0
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' role='img' font-size='11' "
        "style='display:block;width:100%;height:auto' "
        f"font-family='sans-serif'><title>timeline: {len(figure.events):,} events on "
        f"{len(figure.lanes):,} lanes</title>"
    ]
    for y, label in enumerate(labels):
        if y % 2 == 0:
            parts.append(
                f"<rect x='0' y='{y * LANE_HEIGHT}' width='{width}' height='{LANE_HEIGHT}' "
                "fill='#8881'/>"
            )
        parts.append(
            f"<text x='{LABEL_WIDTH - 6}' y='{y * LANE_HEIGHT + 13}' text-anchor='end' "
            f"fill='currentColor'>{html.escape(cut(label, 28))}</text>"
        )
    for lane, x0, x1, color in _merged_bars(figure, len(lanes), span, max_rects):
        parts.append(
            f"<rect x='{LABEL_WIDTH + x0}' y='{lane * LANE_HEIGHT + 2}' width='{x1 - x0}' "
            f"height='{LANE_HEIGHT - 4}' fill='{color}'/>"
        )
    axis = LANE_HEIGHT * max(1, len(lanes))
    parts += _memory_rows(figure, memory, axis, span)
    axis += MEMORY_ROW_HEIGHT * len(memory)
    parts.append(
        f"<line x1='{LABEL_WIDTH}' y1='{axis}' x2='{LABEL_WIDTH + PLOT_WIDTH}' y2='{axis}' "
        "stroke='currentColor' stroke-opacity='.4'/>"
    )
    for tick in range(TICKS + 1):
        x = LABEL_WIDTH + round(PLOT_WIDTH * tick / TICKS)
        parts.append(
            f"<text x='{x}' y='{axis + 14}' text-anchor='middle' fill='currentColor' "
            f"fill-opacity='.7'>{html.escape(format_us(span * tick / TICKS))}</text>"
        )
    more = len(figure.lanes) - len(lanes)
    if more > 0:
        parts.append(
            f"<text x='{LABEL_WIDTH}' y='{axis + 27}' fill='currentColor' fill-opacity='.7'>"
            f"{more:,} more lanes not drawn</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _memory_rows(figure: TimelineFigure, rows: dict[str, str], top: int, span: float) -> list[str]:
    """The memory lane in the SVG: under the lanes from ``top``, a row per device of ``rows``
    with its live bytes as a step curve (at most ``MEMORY_POINTS`` points) in its colour, its
    peak marked and labelled."""
    parts = []
    order = list(rows)
    peak_of: dict[str, int] = {}
    for curve in figure.memory_curves:
        peak_of[curve.device] = max(peak_of.get(curve.device, 0), curve.peak_bytes)
    for curve in figure.memory_curves:
        if curve.device not in rows:
            continue
        row = order.index(curve.device)
        bottom = top + (row + 1) * MEMORY_ROW_HEIGHT - 4
        scale_y = (MEMORY_ROW_HEIGHT - 12) / max(1, peak_of[curve.device])
        kept = thin(curve.live_bytes, MEMORY_POINTS)
        xs = np.clip(curve.time_us[kept] * PLOT_WIDTH / span, 0, PLOT_WIDTH) + LABEL_WIDTH
        ys = bottom - curve.live_bytes[kept] * scale_y
        color = device_color(curve.device)
        path = f"M{LABEL_WIDTH} {bottom}" + "".join(
            f"H{x:.1f}V{y:.1f}" for x, y in zip(xs.tolist(), ys.tolist(), strict=True)
        )
        parts.append(f"<path d='{path}' fill='none' stroke='{color}' stroke-width='1.5'/>")
        px = LABEL_WIDTH + min(curve.peak_time_us * PLOT_WIDTH / span, PLOT_WIDTH)
        py = bottom - curve.peak_bytes * scale_y
        text = curve.peak_label
        anchor = "start" if px < LABEL_WIDTH + 0.5 * PLOT_WIDTH else "end"
        shift = 6 if anchor == "start" else -6
        parts.append(
            f"<circle cx='{px:.1f}' cy='{py:.1f}' r='3' fill='{color}'/>"
            f"<text x='{px + shift:.1f}' y='{py + 4:.1f}' text-anchor='{anchor}' fill='{color}' "
            f"font-size='10'>{html.escape(text)}</text>"
        )
    for row, device in enumerate(order):
        label = f"{short_device(device) or device} memory"
        parts.append(
            f"<text x='{LABEL_WIDTH - 6}' y='{top + row * MEMORY_ROW_HEIGHT + 24}' "
            f"text-anchor='end' fill='currentColor'>{html.escape(cut(label, 28))}</text>"
        )
    return parts


def _merged_bars(
    figure: TimelineFigure, lanes: int, span: float, max_rects: int
) -> list[tuple[int, int, int, str]]:
    """``(lane, x0, x1, colour)`` in pixels: the events of each lane and device, as runs of
    bars that touch at a resolution of 1 px, coarsened (2 px, 4 px...) until at most
    ``max_rects`` runs remain."""
    events = figure.events
    lane_y = np.asarray(figure.lane_y, dtype=np.float64)
    keep = (lane_y >= 0) & (lane_y < lanes)
    if not len(events) or not keep.any():
        return []
    starts = events["start_us"].to_numpy(dtype=np.float64)[keep]
    ends = starts + events["duration_us"].to_numpy(dtype=np.float64)[keep]
    device_codes, devices = figure.device_codes_of(keep)
    group = lane_y[keep].astype(np.int64) * len(devices) + device_codes
    scale = PLOT_WIDTH / span
    # Sorted once by group and start: a pixel column at any resolution keeps that order
    # (floor is monotonic), so each coarser pass needs no sort of its own.
    starts, ends = np.nan_to_num(starts), np.nan_to_num(ends)
    order = np.lexsort((starts, group))
    starts, ends, group = starts[order], ends[order], group[order]
    resolution = 1
    while True:
        x0 = np.floor(starts * scale / resolution).astype(np.int64)
        x1 = np.maximum(np.ceil(ends * scale / resolution).astype(np.int64), x0 + 1)
        # One offset per group keeps groups apart, so one running maximum serves them all.
        offset = group * (PLOT_WIDTH // resolution + 3)
        first, last = x0 + offset, x1 + offset
        reach = np.maximum.accumulate(last)
        new_run = np.ones(len(first), dtype=bool)
        new_run[1:] = first[1:] > reach[:-1]
        if new_run.sum() <= max_rects or resolution >= PLOT_WIDTH:
            break
        resolution *= 2
    heads = np.flatnonzero(new_run)
    tails = np.append(heads[1:], len(first)) - 1
    bars = []
    for head, tail in zip(heads, tails, strict=True):
        code = int(group[head])
        lane, device = divmod(code, len(devices))
        base = int(offset[head])
        x_start = min((int(first[head]) - base) * resolution, PLOT_WIDTH - 1)
        x_end = min((int(reach[tail]) - base) * resolution, PLOT_WIDTH)
        bars.append((lane, x_start, max(x_end, x_start + 1), device_color(devices[device])))
    return bars[:max_rects]
