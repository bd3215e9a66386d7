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
``bundle_holder.PlotlyBundle``; a page reload or a notebook saved with its widget state redraws
the figure as it is now, since both traits are the whole of it. The browser's side:
``static/bundle_entry.js`` then ``static/timeline.js``, and ``timeline.css``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anywidget
import numpy as np
import traitlets
from ipywidgets import widget_serialization

from . import static
from .bundle_holder import _ENTRY_JS, WAIT_S, PlotlyBundle, _js, bundle, holder

_DTYPES = {np.dtype(np.float32): "f4", np.dtype(np.float64): "f8", np.dtype(np.int32): "i4"}

_ESM = _ENTRY_JS + "\n" + static.text("timeline.js")  # $DIGEST and $WAIT_MS: see _js


def encode(value: Any) -> Any:
    """``value`` with numpy arrays (nested in dicts and lists) as plotly.js data: numbers as
    ``{"dtype", "bdata"}`` binary buffers, anything else as a list (NaN and None as null)."""
    if isinstance(value, dict):
        return {key: encode(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(item) for item in value]
    if isinstance(value, np.ndarray):
        kind = _DTYPES.get(value.dtype)
        if kind is not None:
            return {"dtype": kind, "bdata": np.ascontiguousarray(value).tobytes()}
        return [None if item is None or item != item else item for item in value.tolist()]
    return value


class TimelineWidget(anywidget.AnyWidget):
    """The plotly.js figure of a timeline, and the clicks on it (see the module's docstring)."""

    _esm = _js(_ESM, digest=bundle().digest, wait_ms=WAIT_S * 1000)
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
        if not isinstance(content, dict) or content.get("event") != "click":
            return
        curve, point = content.get("curve"), content.get("point")
        if self._on_click is not None and isinstance(curve, int) and isinstance(point, int):
            self._on_click(curve, point)
