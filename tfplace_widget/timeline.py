"""The timeline: one lane per device (GPU streams and copies as sub-lanes), bars in device colours.

Built once per trace; a search only replaces the small "matches" overlay traces and dims the
base bars, inside ``fig.batch_update()`` so one keystroke sends one message. Above
``WEBGL_THRESHOLD`` bars the traces are WebGL (``Scattergl`` lines drawn as thick bars), and
only the ``MAX_BARS`` longest events are drawn (the header says so).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .colors import device_color
from .devices import lane_kind, lane_kinds, short_device
from .plotly_bundle import CompactFigureWidget
from .summary import format_us

WEBGL_THRESHOLD = 3000
MAX_BARS = 10_000
MAX_MATCH_BARS = 2_000
MAX_ARROWS = 100  # more transfers than this: arrows would hide the bars, draw none
DIM_OPACITY = 0.25
MATCH_OUTLINE = "#222222"
SELECTED_COLOR = "#ff2d78"  # a selection ring that reads on light and dark themes
BAR_HEIGHT = 0.8


@dataclass
class _DeviceTraces:
    """Which event rows each base/match trace of one device draws (trace point -> event)."""

    device: str
    rows: np.ndarray
    base_index: int
    match_index: int
    match_rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))


class Timeline:
    """Owns the plotly ``FigureWidget`` and the mapping between its points and event rows."""

    def __init__(
        self,
        events: pd.DataFrame,
        devices: list[str],
        transfers: pd.DataFrame,
        inputs: dict[str, list[str]],
        figure: go.FigureWidget | None = None,
    ) -> None:
        self.events = events
        self.devices = devices
        self.total = len(events)
        self.shown = self._choose_shown(events)
        self.webgl = len(self.shown) > WEBGL_THRESHOLD
        self.lanes, lane_of_row = self._lanes(events)
        self.lane_y = lane_of_row
        self.figure = figure
        if figure is not None:  # re-used by a panel re-run: drop the last run's traces
            figure.data = ()
        self._device_traces: list[_DeviceTraces] = []
        self._selected_index = -1
        self._no_rows = np.empty(0, dtype=np.int64)
        self.matches_shown = self.matches_total = 0  # search matches outlined / drawn-and-matching
        self.arrows_drawn = False
        # Bars at least 1/1500 of the step wide, so 1 µs ops in a long step stay visible (the
        # hover text gives the real duration).
        self._span = (
            float((events["start_us"] + events["duration_us"]).max()) if len(events) else 0.0
        )
        self._min_width = max(0.5, self._span / 1500)
        self._selected_rows = self._no_rows
        self._ops = events["op"].to_numpy(dtype=object)
        self._hover = np.full(len(events), None, dtype=object)
        colors = {device: device_color(device) for device in pd.unique(events["device"])}
        self._row_colors = events["device"].map(colors).to_numpy(dtype=object)
        self._build(transfers, inputs)

    # -- construction -------------------------------------------------------------------------
    @staticmethod
    def _choose_shown(events: pd.DataFrame) -> np.ndarray:
        rows = np.arange(len(events))
        if len(events) <= MAX_BARS:
            return rows
        longest = np.argsort(-events["duration_us"].to_numpy(), kind="stable")[:MAX_BARS]
        return np.sort(longest)

    def _lanes(self, events: pd.DataFrame) -> tuple[list[tuple[str, str]], np.ndarray]:
        """Ordered (device, lane) pairs: the device's own lane first, then streams and copies."""
        # Integer codes per column, then per pair: a MultiIndex would build 100k tuples.
        device_codes, devices = pd.factorize(events["device"])
        lane_codes, lanes = pd.factorize(events["lane"])
        codes, pair_codes = pd.factorize(device_codes.astype(np.int64) * len(lanes) + lane_codes)
        pairs = [(devices[c // len(lanes)], lanes[c % len(lanes)]) for c in pair_codes.tolist()]
        order = {d: i for i, d in enumerate(self.devices)}
        keyed = sorted(
            pairs,
            key=lambda p: (order.get(p[0], len(order)), lane_kind(p[1]) != "device", p[1]),
        )
        position = {pair: i for i, pair in enumerate(keyed)}
        remap = np.array([position[pair] for pair in pairs], dtype=np.float64)
        return keyed, remap[codes] if len(codes) else np.empty(0)

    def _hover_rows(self, rows: np.ndarray) -> np.ndarray:
        """Hover texts of event ``rows``, made on first use (only drawn bars ever need one)."""
        cache = self._hover
        missing = rows[pd.isna(cache[rows])] if len(rows) else rows
        if len(missing):
            events = self.events.iloc[missing]
            types = events["label"].str.extract(r" = ([^(]*)\(", expand=False).fillna("")
            where = {
                lane: html.escape(f"{short_device(device)} {_lane_suffix(lane)}".strip())
                for device, lane in set(zip(events["device"], events["lane"], strict=True))
            }
            cache[missing] = [
                f"<b>{html.escape(op)}</b> {html.escape(t)}<br>{where[lane]}"
                f"<br>start {format_us(s)}, took {format_us(u)}"
                for op, t, lane, s, u in zip(
                    events["op"],
                    types,
                    events["lane"],
                    events["start_us"],
                    events["duration_us"],
                    strict=True,
                )
            ]
        return cache[rows]

    def _build(self, transfers: pd.DataFrame, inputs: dict[str, list[str]]) -> None:
        """Make the traces and layout, then the figure (or fill the re-used one).

        A new figure gets its traces in its constructor, so they go to the browser as the
        figure's own state (``_widget_data``), which a notebook saved with its widget state
        keeps; traces added to a live figure travel only as one-off messages.
        """
        device_of_row = self.events["device"].to_numpy(dtype=object)
        shown = self.shown
        traces: list[go.BaseTraceType] = []
        for device in self.devices:
            rows = shown[device_of_row[shown] == device]
            color = device_color(device)
            traces.append(self._bar_trace(rows, color, short_device(device), opacity=1.0))
            traces.append(
                self._bar_trace(
                    rows[:0],
                    color,
                    f"{short_device(device)} matches",
                    opacity=1.0,
                    outline=MATCH_OUTLINE,
                )
            )
            self._device_traces.append(
                _DeviceTraces(device, rows, len(traces) - 2, len(traces) - 1)
            )
        traces.append(
            self._bar_trace(
                shown[:0], SELECTED_COLOR, "selected", opacity=1.0, outline=SELECTED_COLOR, width=3
            )
        )
        self._selected_index = len(traces) - 1
        arrows = self._arrows(transfers, inputs)
        if arrows is not None:
            traces.append(arrows)
        layout = self._layout()
        if self.figure is None:
            self.figure = CompactFigureWidget(data=traces, layout=layout)
        else:
            with self.figure.batch_update():
                self.figure.add_traces(traces)
                self.figure.update_layout(layout)
        fig = self.figure
        for device_traces in self._device_traces:
            for index in (device_traces.base_index, device_traces.match_index):
                fig.data[index].on_click(self._forward_click)

    def _layout(self) -> dict:
        span = self._span or 1.0
        return dict(
            barmode="overlay",
            height=min(900, 90 + 34 * max(1, len(self.lanes))),
            margin=dict(l=10, r=10, t=30, b=40),
            showlegend=False,
            clickmode="event",
            hovermode="closest",
            dragmode="zoom",
            template="none",  # readable on JupyterLab's light and dark themes
            paper_bgcolor="rgba(0,0,0,0)",
            plot_bgcolor="rgba(0,0,0,0)",
            font=dict(color="#8a8a8a", size=12),
            autosize=True,
            xaxis=dict(
                title="time since the step started (µs)",
                gridcolor="rgba(128,128,128,0.25)",
                range=[0, span * 1.02],
                zeroline=False,
            ),
            yaxis=dict(
                tickvals=list(range(len(self.lanes))),
                ticktext=[html.escape(_lane_label(d, lane)) for d, lane in self.lanes],
                autorange="reversed",
                automargin=True,
                fixedrange=True,
                zeroline=False,
                showgrid=False,
            ),
        )

    def _bar_trace(
        self,
        rows: np.ndarray,
        color: str | np.ndarray,
        name: str,
        *,
        opacity: float,
        outline: str | None = None,
        width: float = 1.5,
    ) -> go.BaseTraceType:
        """Bars for event ``rows``: ``go.Bar`` below the WebGL threshold, thick GL lines above."""
        starts = self.events["start_us"].to_numpy(dtype=np.float64)[rows]
        durations = np.maximum(
            self.events["duration_us"].to_numpy(dtype=np.float64)[rows], self._min_width
        )
        lanes = self.lane_y[rows]
        if self.webgl:
            # Many bars: float32 coordinates, and the hover text once per bar (on its start
            # point); overlays carry no text at all, the bar underneath answers the hover.
            gaps = np.full(len(rows), np.nan, dtype=np.float32)
            ends = starts + durations
            x = np.column_stack([starts.astype(np.float32), ends.astype(np.float32), gaps])
            y = np.column_stack([lanes.astype(np.float32), lanes.astype(np.float32), gaps])
            # GL lines have no outline: matches are drawn bolder in their device colour.
            line_color = color if isinstance(color, str) else SELECTED_COLOR
            overlay = outline is not None or not isinstance(color, str)
            text = None
            if not overlay:
                blanks = np.full(len(rows), "", dtype=object)
                text = np.column_stack([self._hover_rows(rows), blanks, blanks]).ravel()
            return go.Scattergl(
                x=x.ravel(),
                y=y.ravel(),
                text=text,
                mode="lines",
                name=name,
                opacity=opacity,
                line=dict(color=line_color, width=18 if overlay else 14),
                hoverinfo="skip" if overlay else None,
                hovertemplate=None if overlay else "%{text}<extra></extra>",
            )
        hover = self._hover_rows(rows)
        return go.Bar(
            base=starts,
            x=durations,
            y=lanes,
            orientation="h",
            width=BAR_HEIGHT,
            name=name,
            marker=dict(
                color=color, line=dict(color=outline or color, width=width if outline else 0)
            ),
            opacity=opacity,
            hovertext=hover,
            hovertemplate="%{hovertext}<extra></extra>",
        )

    def _arrows(self, transfers: pd.DataFrame, inputs: dict[str, list[str]]) -> go.Scatter | None:
        """Cross-device transfers as lines from the producer's end to the consumer's start."""
        self.arrows_drawn = 0 < len(transfers) <= MAX_ARROWS
        if not self.arrows_drawn:
            return None
        # TF names the receiving node "<producer>/_<n>": find the readers of the drawn ones.
        wanted = {tensor.rsplit(":", 1)[0] for tensor in transfers["tensor"].iloc[:MAX_ARROWS]}
        readers: dict[str, list[str]] = {}
        for op, ins in inputs.items():
            for name in ins:
                if "/_" in name:  # cheap test first: most inputs are not received tensors
                    head, _, tail = name.rpartition("/_")
                    if head in wanted and tail.isdigit():
                        readers.setdefault(head, []).append(op)
        events = self.events
        involved = wanted.union(*readers.values())
        op_level = events[(lane_kinds(events["lane"]) == "device") & events["op"].isin(involved)]
        keyed = op_level.assign(end=op_level["start_us"] + op_level["duration_us"]).groupby(
            ["op", "device"], sort=False
        )
        first_start = keyed["start_us"].min().to_dict()
        last_end = keyed["end"].max().to_dict()
        lane_of = {d: i for i, (d, lane) in enumerate(self.lanes) if lane_kind(lane) == "device"}
        x, y = [], []
        for tensor, src, dst in zip(
            transfers["tensor"], transfers["src_device"], transfers["dst_device"], strict=True
        ):
            producer = tensor.rsplit(":", 1)[0]
            x0 = last_end.get((producer, src))
            y0, y1 = lane_of.get(src), lane_of.get(dst)
            if x0 is None or y0 is None or y1 is None:
                continue
            starts = [
                first_start[(c, dst)] for c in readers.get(producer, ()) if (c, dst) in first_start
            ]
            x += [float(x0), float(min(starts)) if starts else float(x0), None]
            y += [y0, y1, None]
        if not x:
            return None
        return go.Scatter(
            x=x,
            y=y,
            mode="lines+markers",
            name="transfers",
            hoverinfo="skip",
            line=dict(color="#7f7f7f", width=1.5, dash="dot"),
            marker=dict(symbol="arrow", size=9, angleref="previous", color="#7f7f7f"),
        )

    # -- updates ------------------------------------------------------------------------------
    def highlight(self, event_mask: np.ndarray | None) -> None:
        """Outline the events where ``event_mask`` is True (``None``: no search, none dimmed).

        Only traces whose content changes are touched, so a keystroke that keeps the same
        matches sends nothing, and a fresh figure gets no updates before it is first drawn.
        """
        fig = self.figure
        opacity = 1.0 if event_mask is None else DIM_OPACITY
        budget = MAX_MATCH_BARS  # shared by all devices: one keystroke stays a small message
        self.matches_shown = self.matches_total = 0
        with fig.batch_update():
            for traces in self._device_traces:
                if event_mask is None:
                    rows = traces.rows[:0]
                else:
                    rows = traces.rows[event_mask[traces.rows]]
                    self.matches_total += len(rows)
                    rows = rows[:budget]
                    budget -= len(rows)
                    self.matches_shown += len(rows)
                base = fig.data[traces.base_index]
                if base.opacity != opacity:
                    base.opacity = opacity
                if not np.array_equal(rows, traces.match_rows):
                    traces.match_rows = rows
                    self._set_rows(fig.data[traces.match_index], rows)

    def select(self, op: str) -> None:
        """Draw the events of ``op`` in the 'selected' overlay."""
        rows = np.flatnonzero(self._ops == op)[:MAX_MATCH_BARS] if op else self._no_rows
        if np.array_equal(rows, self._selected_rows):
            return
        self._selected_rows = rows
        with self.figure.batch_update():
            self._set_rows(self.figure.data[self._selected_index], rows)

    def _set_rows(self, trace: go.BaseTraceType, rows: np.ndarray) -> None:
        """Point an overlay trace at other event rows (the selected overlay keeps device fills)."""
        selected = trace is self.figure.data[self._selected_index]
        fill = self._row_colors[rows] if selected else "#000000"
        fresh = self._bar_trace(rows, fill, trace.name, opacity=1.0)
        if self.webgl:
            trace.update(x=fresh.x, y=fresh.y, text=fresh.text)
        elif selected:
            trace.update(
                base=fresh.base, x=fresh.x, y=fresh.y, hovertext=fresh.hovertext, marker_color=fill
            )
        else:
            trace.update(base=fresh.base, x=fresh.x, y=fresh.y, hovertext=fresh.hovertext)

    # -- clicks -------------------------------------------------------------------------------
    on_select = None  # set by the panel: called with the op name of a clicked bar

    def _forward_click(self, trace, points, _state) -> None:
        if not points.point_inds or self.on_select is None:
            return
        row = self.row_of_point(trace, points.point_inds[0])
        if row is not None:
            self.on_select(self._ops[row])

    def row_of_point(self, trace: go.BaseTraceType, point: int) -> int | None:
        """The event row drawn by point ``point`` of ``trace``."""
        for traces in self._device_traces:
            if trace is self.figure.data[traces.base_index]:
                rows = traces.rows
            elif trace is self.figure.data[traces.match_index]:
                rows = traces.match_rows
            else:
                continue
            index = point // 3 if self.webgl else point
            return int(rows[index]) if index < len(rows) else None
        return None

    def release(self) -> None:
        """Let go of the events, and of the figure's traces and their click callbacks (which
        point back here), when a re-run replaces this timeline or the panel closes: they are
        freed at once, not at the cyclic collector's next full pass."""
        figure = self.figure
        if figure is not None:
            for trace in figure.data:
                trace.on_click(None)
            figure.data = ()
        self.on_select = None
        self.figure = None
        self.events = self.events.head(0).copy()
        self.shown = self.lane_y = self._no_rows
        self._ops = self._hover = self._row_colors = np.empty(0, dtype=object)
        self._device_traces = []
        self._selected_rows = self._no_rows

    def highlighted_ops(self) -> set[str]:
        """Names of the ops currently outlined as search matches (for tests and the header)."""
        return {self._ops[r] for t in self._device_traces for r in t.match_rows}


def _lane_suffix(lane: str) -> str:
    kind = lane_kind(lane)
    return "" if kind == "device" else lane.rsplit("/", 1)[-1]


def _lane_label(device: str, lane: str) -> str:
    suffix = _lane_suffix(lane)
    return f"{short_device(device)} {suffix}".strip()
