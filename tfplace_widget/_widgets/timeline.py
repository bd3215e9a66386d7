"""The timeline's widget: a plotly.js figure drawn from kernel state, clicks sent back.

A small anywidget, not plotly's ``go.FigureWidget``: importing that one pulls in
``plotly.io`` -> nbformat -> jsonschema's grammars (over a second in a fresh kernel, for code
this package never calls), and its Python side validates every update. This widget's state is
the figure itself, as plotly.js takes it:

- ``figure``: ``{"data": [...], "layout": {...}}``, set when a trace is drawn (numeric arrays
  travel as binary buffers, ``{"dtype": "f8", "bdata": <bytes>}``);
- ``overlays``: ``{trace index: {attribute: value}}``, what a search or a pick changes since
  (the dimmed opacity, the outlined matches, the selected op): one small message per keystroke.

The browser draws ``figure`` with the overlays merged in (``Plotly.react``, which keeps the
user's zoom while ``layout.uirevision`` stays the same) and sends ``{"event": "click", "curve",
"point"}`` when a bar is clicked. plotly.js itself comes once per kernel from the hidden
``bundle_holder.PlotlyBundle``; a view that finds no import of it started in its frame 2 s
after it renders (a frontend that gives each output a frame of its own, or never runs the
holder's ``initialize`` there) sends ``{"event": "need_plotly"}`` and gets the same gzipped
bundle in a reply (``{"event": "plotly", "digest"}`` and one buffer). A page reload or a notebook saved with its widget state redraws
the figure as it is now, since both traits are the whole of it. The browser's side:
``_static/bundle_entry.js`` then ``_static/timeline.js``, and ``timeline.css``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

import anywidget
import numpy as np
import pandas as pd
import traitlets
from ipywidgets import widget_serialization

from .. import _static as static
from .._model.devices import EventKeys
from .._rendering.arrays import encode
from .._rendering.figure import DIM_OPACITY, MAX_MATCH_BARS, SELECTED_COLOR, TimelineFigure
from .bundle_holder import ENTRY_JS, WAIT_S, PlotlyBundle, bundle, fill_js, holder

_ESM = ENTRY_JS + "\n" + static.text("timeline.js")  # $DIGEST and $WAIT_MS: see fill_js


PICK_TO_DRAW = "Pick an op in the table to draw its events, also those the sample left out."


class TimelineWidget(anywidget.AnyWidget):
    """The plotly.js figure of a timeline, and the clicks on it (see the module's docstring)."""

    _esm = fill_js(_ESM, digest=bundle().digest, wait_ms=WAIT_S * 1000)
    _css = static.widget_source("timeline.css")
    figure = traitlets.Dict().tag(sync=True)
    overlays = traitlets.Dict().tag(sync=True)
    # Points at the holder: keeps it in this widget's dependencies (ipywidgets.embed), and
    # bundle_holder.holder() re-points timelines at a new holder.
    _plotly_bundle = traitlets.Instance(PlotlyBundle, allow_none=True).tag(
        sync=True, **widget_serialization
    )
    _waits_for_plotly_bundle = True

    def __init__(self, **kwargs: Any) -> None:
        # The holder first: its comm_open must reach the browser before this widget's.
        super().__init__(_plotly_bundle=holder(), **kwargs)
        self._data: list[dict] = []
        self._layout: dict = {}
        self._overlays: dict[int, dict] = {}
        self._on_click: Callable[[int, int], None] | None = None
        self.on_msg(self._handle_message)

    def draw(self, data: list[dict], layout: dict) -> None:
        """Show a new figure (the overlays go with the old one), in one message."""
        self._data, self._layout, self._overlays = data, layout, {}
        with self.hold_sync():
            self.figure = {"data": encode(data), "layout": encode(layout)}
            self.overlays = {}

    def set_overlays(self, overlays: dict[int, dict]) -> None:
        """Replace the overlays (``{trace index: attributes}``), in one message."""
        self._overlays = overlays
        self.overlays = {str(index): encode(attrs) for index, attrs in overlays.items()}

    def drawn(self) -> list[dict]:
        """The traces as the browser draws them now: each trace with its overlay merged in."""
        return [{**trace, **self._overlays.get(i, {})} for i, trace in enumerate(self._data)]

    @property
    def layout_dict(self) -> dict:
        """The figure's layout, as sent."""
        return self._layout

    def to_figure(self) -> Any:
        """The timeline as drawn now, as a plotly ``go.Figure`` (to save or restyle a copy)."""
        import plotly.graph_objects as go

        return go.Figure(data=self.drawn(), layout=self._layout)

    def on_click(self, callback: Callable[[int, int], None] | None) -> None:
        """Call ``callback(trace_index, point_index)`` when a bar is clicked (None: stop)."""
        self._on_click = callback

    def clear(self) -> None:
        """Drop the figure (kernel side and browser side) and the click callback."""
        self._on_click = None
        self.draw([], {})

    def _handle_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        if content.get("event") == "need_plotly":
            self._send_plotly()
            return
        if content.get("event") != "click":
            return
        curve, point = content.get("curve"), content.get("point")
        if self._on_click is not None and isinstance(curve, int) and isinstance(point, int):
            self._on_click(curve, point)

    def _send_plotly(self) -> None:
        """Answer a view that found no plotly.js in its frame (the holder's widget never reached
        it: Colab's output frames, VS Code) with the bundle itself, gzipped, as one binary
        buffer; the view imports it as the holder would (``_static/bundle_entry.js``)."""
        code = bundle()
        self.send({"event": "plotly", "digest": code.digest}, buffers=[code.gzipped])


class Timeline(TimelineFigure):
    """A :class:`TimelineFigure` drawn in its ``TimelineWidget``: owns the widget, the search's
    overlays and the clicks."""

    sample_hint = PICK_TO_DRAW  # a picked op's events are drawn from all of them (``select``)

    def __init__(
        self,
        events: pd.DataFrame,
        devices: list[str],
        transfers: pd.DataFrame,
        inputs: dict[str, list[str]],
        widget: TimelineWidget | None = None,
        *,
        lanes: Sequence[tuple[str, str]] | None = None,
        x_span: float | None = None,
        folded_tasks: Collection[str] = (),
        memory: pd.DataFrame | None = None,
        keys: EventKeys | None = None,
    ) -> None:
        """``lanes``, ``x_span``, ``folded_tasks``, ``memory`` and ``keys``: see
        :class:`TimelineFigure`. ``widget``: draw into this one (a re-run keeps the panel's
        widget) instead of a new one."""
        if widget is None:
            widget = TimelineWidget()
        self.widget = widget
        self._overlays: dict[int, dict] = {}  # trace index -> what a search or a pick changed
        self.matches_shown = self.matches_total = 0  # search matches outlined / drawn-and-matching
        super().__init__(
            events,
            devices,
            transfers,
            inputs,
            lanes=lanes,
            x_span=x_span,
            folded_tasks=folded_tasks,
            memory=memory,
            keys=keys,
        )
        self._selected_rows = self._no_rows
        self._devices = self.events["device"].astype(str).to_numpy(dtype=object)
        # The widget's state is the whole figure.
        self.widget.draw(self.data, self.layout)
        self.widget.on_click(self._forward_click)

    # -- updates ------------------------------------------------------------------------------
    def highlight(self, event_mask: np.ndarray | None) -> None:
        """Outline the events where ``event_mask`` is True (``None``: no search, none dimmed).

        Only overlays whose content changes are rebuilt, and a keystroke that keeps the same
        matches sends nothing.
        """
        opacity = 1.0 if event_mask is None else DIM_OPACITY
        budget = MAX_MATCH_BARS  # shared by all devices: one keystroke stays a small message
        self.matches_shown = self.matches_total = 0
        changed = False
        for traces in self._device_traces:
            if event_mask is None:
                rows = traces.rows[:0]
            else:
                rows = traces.rows[event_mask[traces.rows]]
                self.matches_total += len(rows)
                rows = rows[:budget]
                budget -= len(rows)
                self.matches_shown += len(rows)
            dimmed = {"opacity": opacity} if opacity != 1.0 else None
            if self._overlays.get(traces.base_index) != dimmed:
                self._set_overlay(traces.base_index, dimmed)
                changed = True
            if not np.array_equal(rows, traces.match_rows):
                traces.match_rows = rows
                self._set_overlay(traces.match_index, self._rows_overlay(rows))
                changed = True
        if changed:
            self.widget.set_overlays(dict(self._overlays))

    def select(self, op: str, device: str = "") -> None:
        """Draw the events of ``op`` (on ``device`` only, if given: ``_SOURCE`` runs once per
        device) in the 'selected' overlay."""
        if op:
            picked = self._ops == op
            if device:
                picked &= self._devices == device
            rows = np.flatnonzero(picked)[:MAX_MATCH_BARS]
        else:
            rows = self._no_rows
        if np.array_equal(rows, self._selected_rows):
            return
        self._selected_rows = rows
        self._set_overlay(self._selected_index, self._rows_overlay(rows, selected=True))
        self.widget.set_overlays(dict(self._overlays))

    def _set_overlay(self, index: int, attrs: dict | None) -> None:
        """Set (or with ``None`` drop) the overlay of trace ``index``."""
        if attrs is None:
            self._overlays.pop(index, None)
        else:
            self._overlays[index] = attrs

    def _rows_overlay(self, rows: np.ndarray, *, selected: bool = False) -> dict | None:
        """The attributes that point an overlay trace at event ``rows`` (None: no rows, the
        trace as built is empty). The selected overlay keeps each bar's device colour."""
        if not len(rows):
            return None
        fill = self._row_colors[rows] if selected else "#000000"
        fresh = self._bar_trace(rows, fill, "", opacity=1.0)
        if self.webgl:
            return {key: fresh[key] for key in ("x", "y")}
        attrs = {key: fresh[key] for key in ("base", "x", "y", "hovertext")}
        if selected:
            attrs["marker"] = dict(color=fill, line=dict(color=SELECTED_COLOR, width=3))
        return attrs

    # -- clicks -------------------------------------------------------------------------------
    on_select = None  # set by the panel: called with the op name and device of a clicked bar

    def _forward_click(self, trace_index: int, point: int) -> None:
        if self.on_select is None:
            return
        row = self.row_of_point(trace_index, point)
        if row is not None:
            self.on_select(self._ops[row], self._devices[row])

    def row_of_point(self, trace_index: int, point: int) -> int | None:
        """The event row drawn by point ``point`` of trace ``trace_index``."""
        for traces in self._device_traces:
            if trace_index == traces.base_index:
                rows = traces.rows
            elif trace_index == traces.match_index:
                rows = traces.match_rows
            else:
                continue
            index = point // 3 if self.webgl else point
            return int(rows[index]) if 0 <= index < len(rows) else None
        return None

    def release(self) -> None:
        """Let go of the events and of the widget (whose click callback points back here),
        when a re-run replaces this timeline or the panel closes: they are freed at once, not
        at the cyclic collector's next full pass. The widget keeps its figure until redrawn."""
        self.widget.on_click(None)
        self.on_select = None
        self.widget = None
        self.events = self.events.head(0).copy()
        self.shown = self.lane_y = self._no_rows
        self._ops = self._hover = self._row_colors = np.empty(0, dtype=object)
        self._devices = np.empty(0, dtype=object)
        self.data, self.layout = [], {}  # the widget keeps what it drew
        self._device_traces = []
        self._overlays = {}
        self._selected_rows = self._no_rows

    def highlighted_ops(self) -> set[str]:
        """Names of the ops currently outlined as search matches (for tests and the header)."""
        return {self._ops[r] for t in self._device_traces for r in t.match_rows}
