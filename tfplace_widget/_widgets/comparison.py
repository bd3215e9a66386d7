"""Two placements one above the other: the comparison view of a :class:`PlacementDiff`.

Both timelines are drawn on the same device lanes and the same time axis, so a bar that moved
changes lanes between them and a longer step ends further right. The moved ops are outlined in
both; below, the diff table (one row per op, searchable, filterable by status) and the summary
of ``compare``. ``show_comparison(a, b)`` shows it on its own; the placement panel composes it
for "compare with the previous run". The view never runs TensorFlow: it draws the diff it is
given (``show_comparison`` traces functions first, through ``dispatch.as_trace``).
"""

from __future__ import annotations

import html
import sys
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
import numpy as np
import pandas as pd

from .._analyses.compare import STATUS_VALUES, PlacementDiff, compare, step_time_us
from .._analyses.summary import format_us
from .._model.devices import short_device
from .._model.errors import SearchError
from .._model.trace import PlacementTrace
from .._rendering.colors import device_color, ink_style
from .._rendering.figure import shared_lanes
from .._rendering.html_parts import PAGE_SIZE
from .._rendering.search import filter_ops, searchable
from .._rendering.snapshot import SNAPSHOT_ROWS, comparison_snapshot_html, guarded
from .controls import search_controls
from .table import OpTable
from .timeline import Timeline
from .tree import widget_tree

DIFF_COLUMNS = [
    ("op", "op"),
    ("type", "type"),
    ("status", "status"),
    ("device_a", "device a"),
    ("device_b", "device b"),
    ("how_a", "how a"),
    ("how_b", "how b"),
    ("duration_a_us", "duration a"),
    ("duration_b_us", "duration b"),
    ("delta_us", "change"),
]
STATUS_LABELS = {
    "moved": "moved",
    "replaced": "another op",
    "only_a": "only in a",
    "only_b": "only in b",
    "same": "same device",
}


class ComparisonView(widgets.VBox):
    """The summary, the two aligned timelines (``a`` above ``b``) and the diff table.

    ``search=True`` gives the view a search box of its own (``show_comparison``); the panel
    passes ``False`` and calls :meth:`filter` from its own box instead.
    """

    def __init__(
        self, diff: PlacementDiff, labels: tuple[str, str] = ("a", "b"), *, search: bool = True
    ) -> None:
        self._closed = False
        self.diff = diff
        self.labels = labels
        self._text, self._regex, self._case, self._types = "", False, False, ()
        self._timelines: list[Timeline | None] = [None, None]
        self._rows = diff.ops
        self.summary = widgets.HTML()
        self.status_filter = widgets.Dropdown(layout=widgets.Layout(width="200px"))
        self.status_filter.add_class("tfplace-status-filter")
        self.status = widgets.HTML()
        self.titles = [widgets.HTML(), widgets.HTML()]
        self._figure_boxes = [
            widgets.Box(layout=widgets.Layout(width="100%", display="block")) for _ in range(2)
        ]
        self.table = OpTable(
            columns=[c for c, _ in DIFF_COLUMNS],
            labels=[label for _, label in DIFF_COLUMNS],
            page_size=PAGE_SIZE,
            sort_by="",
        )
        self.details = widgets.HTML()
        finder: list[widgets.Widget] = []
        self.search = self.regex = self.case_sensitive = None
        if search:
            self.search, self.regex, self.case_sensitive = search_controls()
            for control in (self.search, self.regex, self.case_sensitive):
                control.observe(self._on_own_search, "value")
            finder = [self.search, self.regex, self.case_sensitive]
        row = widgets.HBox(
            [*finder, self.status_filter, self.status],
            layout=widgets.Layout(flex_flow="row wrap", align_items="center"),
        )
        super().__init__(
            [
                self.summary,
                row,
                self.titles[0],
                self._figure_boxes[0],
                self.titles[1],
                self._figure_boxes[1],
                self.table,
                self.details,
            ],
            layout=widgets.Layout(width="100%"),
        )
        self.add_class("tfplace-comparison")
        self.status_filter.observe(self._on_status_change, "value")
        self.table.observe(self._on_sort_change, ["sort_by", "sort_ascending"])
        self.table.observe(self._on_page_change, "page")
        self.table.observe(self._on_select_change, "selected_op")
        self.show(diff, labels)

    # -- public -------------------------------------------------------------------------------
    @property
    def timelines(self) -> list[Any]:
        """The two timeline widgets (``a``'s, then ``b``'s)."""
        return [t.widget if t is not None else None for t in self._timelines]

    @property
    def visible_ops(self) -> pd.DataFrame:
        """The rows of ``diff.ops`` that the search and the status filter keep, in table order."""
        return self._rows

    def show(self, diff: PlacementDiff, labels: tuple[str, str] | None = None) -> None:
        """Draw ``diff`` (a re-run's new comparison) into the same widgets."""
        self.diff = diff
        self.labels = labels or self.labels
        a, b = diff.a, diff.b
        devices = list(dict.fromkeys([*a.devices, *b.devices]))
        lanes = shared_lanes([a.events, b.events], devices, every_device=True)
        span = max(_end_us(a), _end_us(b))
        for side, trace in enumerate((a, b)):
            previous = self._timelines[side]
            widget = previous.widget if previous is not None else None
            if previous is not None:
                previous.release()
            timeline = Timeline(
                trace.events,
                devices,
                trace.transfers,
                trace.inputs,
                widget=widget,
                lanes=lanes,
                x_span=span,
            )
            timeline.on_select = self._select_from_timeline
            self._timelines[side] = timeline
            self._figure_boxes[side].children = [timeline.widget]
            self.titles[side].value = _title_html(self.labels[side], "ab"[side], trace)
        # Once per diff, not per keystroke: the lower-cased names, each event's (op, device).
        self._lowered = searchable(diff.ops["op"])
        self._event_keys = [
            pd.MultiIndex.from_arrays([t.events["op"], t.events["device"]]) for t in (a, b)
        ]
        self.summary.value = _summary_html(diff, self.labels)
        counts = diff.ops["status"].value_counts()
        current = self.status_filter.value
        self.status_filter.options = [(f"every op ({len(diff.ops):,})", "")] + [
            (f"{STATUS_LABELS[s]} ({counts.get(s, 0):,})", s) for s in STATUS_VALUES
        ]
        self.status_filter.value = current if current in STATUS_VALUES else ""
        self.apply()

    def filter(
        self, text: str = "", *, regex: bool = False, case: bool = False, types: tuple = ()
    ) -> None:
        """Keep the ops whose name matches ``text`` (as the panel's search box: substring,
        whole-name glob or regex) and whose type is one of ``types`` (any, when empty).
        ``SearchError`` for a bad regex, with the rows on screen kept."""
        kept = (self._text, self._regex, self._case, self._types)
        self._text, self._regex, self._case, self._types = text, regex, case, tuple(types)
        try:
            self.apply()
        except SearchError:
            self._text, self._regex, self._case, self._types = kept
            raise

    def apply(self) -> None:
        """Recompute the table's rows and what the timelines outline: the ops the search and
        the status filter keep; with neither, the moved ones."""
        ops = self.diff.ops
        mask = filter_ops(
            ops,
            self._text,
            regex=self._regex,
            case=self._case,
            types=self._types,
            lowered=self._lowered,
        )
        status = self.status_filter.value
        if status:
            mask = mask & (ops["status"] == status).to_numpy(dtype=bool)
        rows = ops[mask]
        if self.table.sort_by in rows:
            column = rows[self.table.sort_by]
            if isinstance(column.dtype, pd.CategoricalDtype):
                column = column.astype(str)
            order = column.sort_values(
                ascending=self.table.sort_ascending, na_position="last", kind="stable"
            ).index
            rows = rows.loc[order]
        self._rows = rows
        filtering = bool(self._text or self._types or status)
        outlined = rows if filtering else self.diff.moved
        for side, timeline in enumerate(self._timelines):
            if timeline is not None:
                timeline.highlight(
                    _event_mask(self._event_keys[side], outlined, side)
                    if filtering or len(outlined)
                    else None
                )
        what = "ops" if filtering else "moved ops"
        self.status.value = (
            f"showing <b>{len(rows):,}</b> of {len(ops):,} ops · the timelines outline the {what}"
        )
        self.table.page = 0
        self._render_page()

    def highlighted_ops(self) -> list[set[str]]:
        """The ops outlined in each timeline (``a``'s, then ``b``'s)."""
        return [t.highlighted_ops() if t is not None else set() for t in self._timelines]

    def release(self) -> None:
        """Let go of the timelines' events and widgets (the panel closes the widgets)."""
        for timeline in self._timelines:
            if timeline is not None:
                widget = timeline.widget
                timeline.release()
                widget.clear()
        self._timelines = [None, None]
        self.diff = None
        self._rows = self._rows.head(0)
        self._event_keys = []
        if self.table is not None:
            self.table.rows, self.table.row_colors = [], []

    def snapshot_html(self) -> str:
        """The view as static HTML, as on screen now (see ``rendering.snapshot``)."""
        rows = self._rows.head(SNAPSHOT_ROWS)
        return comparison_snapshot_html(
            self.summary.value,
            [title.value for title in self.titles],
            self._timelines,
            [label for _, label in DIFF_COLUMNS],
            _formatted_rows(rows),
            _row_colors(rows),
            len(self.diff.ops),
            [column.endswith("_us") for column, _ in DIFF_COLUMNS],
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        """The widget view, and beside it the static snapshot (``text/html``) that nbconvert,
        GitHub and nbviewer show where no widget can be drawn."""
        bundle = super()._repr_mimebundle_(**kwargs)
        if self.diff is not None:
            bundle["text/html"] = guarded(self.snapshot_html)
        return bundle

    def close(self) -> None:
        """Close the view and every widget in it (twice is harmless)."""
        if getattr(self, "_closed", True) or sys.is_finalizing():  # at exit: nothing to free
            super().close()
            return
        self._closed = True
        self.release()
        for widget in reversed(widget_tree(self)):
            if widget is not self:
                widget.close()
        super().close()

    # -- rendering ----------------------------------------------------------------------------
    def _render_page(self) -> None:
        page = self.table.page
        rows = self._rows.iloc[page * PAGE_SIZE : (page + 1) * PAGE_SIZE]
        with self.table.hold_sync():
            self.table.total = len(self._rows)
            self.table.rows = _formatted_rows(rows)
            self.table.row_colors = _row_colors(rows)

    def _render_details(self, op: str) -> None:
        rows = self.diff.ops[self.diff.ops["op"] == op] if op else self.diff.ops.iloc[0:0]
        if rows.empty:
            self.details.value = ""
            return
        row = rows.iloc[0]
        sides = []
        for side in "ab":
            device = row[f"device_{side}"]
            where = (
                f"<b class='tfplace-ink' style='{ink_style(device_color(device))}'>"
                f"{html.escape(device)}</b> "
                f"({html.escape(str(row[f'how_{side}']))})"
                if device
                else "not in this trace"
            )
            sides.append(f"{html.escape(self.labels['ab'.index(side)])}: {where}")
        self.details.value = (
            "<div style='color:var(--jp-ui-font-color1)'>"
            f"<b><code>{html.escape(op)}</code></b> ({html.escape(row['type'])}) · "
            f"{html.escape(STATUS_LABELS.get(str(row['status']), str(row['status'])))}<br>"
            + "<br>".join(sides)
            + "</div>"
        )

    # -- observers ----------------------------------------------------------------------------
    def _on_own_search(self, _change: dict) -> None:
        try:
            self.filter(self.search.value, regex=self.regex.value, case=self.case_sensitive.value)
        except SearchError as exc:
            self.status.value = f"<span style='color:#d32f2f'>{html.escape(str(exc))}</span>"

    def _on_status_change(self, _change: dict) -> None:
        if self.diff is not None:
            self.apply()

    def _on_sort_change(self, _change: dict) -> None:
        if self.diff is not None:
            self.apply()

    def _on_page_change(self, _change: dict) -> None:
        if self.diff is not None:
            self._render_page()

    def _on_select_change(self, change: dict) -> None:
        if self.diff is None:
            return
        self._render_details(change["new"])
        for timeline in self._timelines:
            if timeline is not None:
                timeline.select(change["new"])

    def _select_from_timeline(self, op: str, _device: str = "") -> None:
        """A clicked bar picks its op (by name: the two runs may place it apart)."""
        self.table.selected_op = op


def show_comparison(
    a: Any,
    b: Any,
    *,
    labels: tuple[str, str] = ("a", "b"),
    trace: Callable[[Any], PlacementTrace] | None = None,
) -> ComparisonView:
    """Show ``compare(a, b)``: both timelines on the same lanes and time axis, the moved ops
    outlined in both, the diff table and its summary.

    ``a`` and ``b`` are :class:`PlacementTrace` objects or anything ``show_placement`` takes (a
    function is traced here with the default options; trace it first with
    ``trace_placement(fn, ...)`` to choose them). ``labels`` name the two sides on screen.
    """
    from .._tracing.dispatch import as_trace

    if not (
        isinstance(labels, tuple) and len(labels) == 2 and all(isinstance(x, str) for x in labels)
    ):
        raise TypeError(f"labels must be a tuple of two strings, not {labels!r}.")
    return ComparisonView(compare(a, b, trace=trace or as_trace), labels)


def _formatted_rows(rows: pd.DataFrame) -> list[list[str]]:
    """The diff table's cells for ``rows`` of ``diff.ops``, as the view's table shows them."""
    formatted = []
    records = rows[[c for c, _ in DIFF_COLUMNS]].itertuples(index=False)
    for record, type_a in zip(records, rows["type_a"], strict=True):
        op, typ, status, dev_a, dev_b, how_a, how_b, dur_a, dur_b, delta = record
        formatted.append(
            [
                op,
                f"{type_a} → {typ}" if status == "replaced" else typ,
                STATUS_LABELS.get(str(status), str(status)),
                short_device(dev_a) or dev_a,
                short_device(dev_b) or dev_b,
                str(how_a),
                str(how_b),
                _us(dur_a),
                _us(dur_b),
                "" if pd.isna(delta) else ("+" if delta > 0 else "") + _us(delta),
            ]
        )
    return formatted


def _row_colors(rows: pd.DataFrame) -> list[str]:
    """Each row's colour: its device in ``b``, or in ``a`` for an op only in ``a``."""
    return [device_color(b or a) for a, b in zip(rows["device_a"], rows["device_b"], strict=True)]


def _event_mask(events: pd.MultiIndex, rows: pd.DataFrame, side: int) -> np.ndarray:
    """Which events (their (op, device) keys, of side ``a``, 0, or ``b``, 1) belong to the
    diff ``rows``: by op and device, so that one of ``_SOURCE``'s rows (one per device) is not
    all of them."""
    devices = rows[f"device_{'ab'[side]}"]
    present = (devices != "").to_numpy(dtype=bool)
    if not present.any():
        return np.zeros(len(events), dtype=bool)
    return events.isin(pd.MultiIndex.from_arrays([rows["op"][present], devices[present]]))


def _end_us(trace: PlacementTrace) -> float:
    events = trace.events
    return float((events["start_us"] + events["duration_us"]).max()) if len(events) else 0.0


def _us(value: Any) -> str:
    """A duration, or a signed change of one; ``""`` when it is unknown."""
    if pd.isna(value):
        return ""
    return ("-" if value < 0 else "") + format_us(abs(float(value)))


def _title_html(label: str, side: str, trace: PlacementTrace) -> str:
    step = step_time_us(trace)
    predicted = " · predicted, not run" if getattr(trace, "predicted", False) else ""
    return (
        "<div style='color:var(--jp-ui-font-color1);margin-top:4px'>"
        f"<b>{side}: {html.escape(label)}</b>{html.escape(predicted)} · {len(trace.ops):,} ops · "
        f"{len(trace.transfers):,} transfers"
        + (
            f" · step {html.escape(format_us(step))}"
            if step is not None
            else " · no bars: nothing ran"
        )
        + "</div>"
    )


def _summary_html(diff: PlacementDiff, labels: tuple[str, str]) -> str:
    moved = int((diff.ops["status"] == "moved").sum())
    return (
        "<div style='color:var(--jp-ui-font-color1)'>"
        f"<b>Comparison</b> · a: {html.escape(labels[0])} · b: {html.escape(labels[1])} · "
        f"<b>{moved}</b> moved<br>{html.escape(diff.summary)}</div>"
    )
