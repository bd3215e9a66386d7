"""The timeline: one lane per device (GPU streams and copies as sub-lanes), bars in device colours.

Built once per trace as plotly.js trace dicts (:class:`TimelineFigure`, pure: no widget, also
what the static HTML report draws), drawn by a ``TimelineWidget`` (:class:`Timeline`); a search only
replaces the small "matches" overlay traces and dims the base bars (the widget's ``overlays``),
so one keystroke sends one small message. Above ``WEBGL_THRESHOLD`` bars the traces are WebGL
(``scattergl`` lines drawn as thick bars), and only the ``MAX_BARS`` longest events are drawn
(the header says so). A trace with allocator records (``trace.memory``) gets a memory lane
under the ops' lanes: each device's live bytes as a step curve, its peak marked
(``memory_lane``); a trace without keeps the figure it had.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._analyses.summary import format_us
from .._model.devices import EventKeys, lane_kind, lane_kinds, short_device, task_of, tasks_of
from .colors import device_color
from .memory_lane import (
    MemoryCurve,
    memory_curves,
    memory_layout,
    memory_notes,
    memory_traces,
)

WEBGL_THRESHOLD = 3000
MAX_BARS = 10_000
MAX_MATCH_BARS = 2_000
MAX_ARROWS = 100  # more transfers than this: arrows would hide the bars, draw none
DIM_OPACITY = 0.25
MATCH_OUTLINE = "#222222"
SELECTED_COLOR = "#ff2d78"  # a selection ring that reads on light and dark themes
BAR_HEIGHT = 0.8
FOLDED_LANE = "(folded)"  # the lane of a collapsed task: (task, FOLDED_LANE) in ``lanes``
_figure_numbers = itertools.count(1)  # layout.uirevision: a new figure resets the zoom


def event_rows(ops: pd.DataFrame, events: pd.DataFrame) -> np.ndarray:
    """Each event's row in ``ops`` (the first row of its op on its device; -1 for an event
    without one), as the panel's search and the HTML report map bars to table rows.

    Integer keys (the op's and the device's codes) looked up in the ops' sorted keys, where
    a pandas merge on the two string columns was slower. A few events (the timeline's drawn
    bars) are looked up among the ops of their names only, found first with one ``isin``."""
    if len(events) * 4 < len(ops):
        named = np.flatnonzero(ops["op"].isin(events["op"]).to_numpy(dtype=bool))
        found = _keyed_rows(ops.iloc[named], events)
        hit = found >= 0
        found[hit] = named[found[hit]]
        return found
    return _keyed_rows(ops, events)


def _keyed_rows(ops: pd.DataFrame, events: pd.DataFrame) -> np.ndarray:
    """:func:`event_rows` by integer keys, over all of ``ops``."""
    n_ops = len(ops)
    keys = np.zeros(n_ops + len(events), dtype=np.int64)
    for column in ("op", "device"):  # NaN is a value of its own, as a merge matches it
        values = np.concatenate(
            [ops[column].to_numpy(dtype=object), events[column].to_numpy(dtype=object)]
        )
        codes, uniques = pd.factorize(values, use_na_sentinel=False)
        keys = keys * max(len(uniques), 1) + codes
    unique, first = np.unique(keys[:n_ops], return_index=True)  # first: first occurrences
    if not len(unique):
        return np.full(len(events), -1, dtype=np.int64)
    wanted = keys[n_ops:]
    at = np.minimum(np.searchsorted(unique, wanted), len(unique) - 1)
    return np.where(unique[at] == wanted, first[at], -1).astype(np.int64)


@dataclass
class _DeviceTraces:
    """Which event rows each base/match trace of one device draws (trace point -> event)."""

    device: str
    rows: np.ndarray
    base_index: int
    match_index: int
    match_rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))


class TimelineFigure:
    """The timeline's figure, as plotly.js takes it: ``data`` (trace dicts, numeric arrays as
    numpy arrays) and ``layout``, and the mapping between its points and event rows.

    Pure (no widget, no kernel): :class:`Timeline` draws it in a ``TimelineWidget`` and keeps
    it up to date with a search; the static HTML report (``export.html``) writes it into a
    page. Per device, trace ``2 * i`` draws its bars and ``2 * i + 1`` its search matches
    (empty as built); then comes the selected op's trace (``selected_index``, empty), when
    drawn the transfer arrows, and with ``memory`` records the memory lane's traces (per
    device and allocator its curve, then its peak: ``memory_curves``).
    """

    # A line the notes add under the sample's, where the figure is drawn with a way to show
    # what the sample left out (the panel's: ``Timeline``).
    sample_hint = ""

    def __init__(
        self,
        events: pd.DataFrame,
        devices: list[str],
        transfers: pd.DataFrame,
        inputs: dict[str, list[str]],
        *,
        lanes: Sequence[tuple[str, str]] | None = None,
        x_span: float | None = None,
        folded_tasks: Collection[str] = (),
        memory: pd.DataFrame | None = None,
        keys: EventKeys | None = None,
    ) -> None:
        """``memory`` (``trace.memory``): with rows, the memory lane is drawn. ``keys``:
        ``events``' device and lane codes (:class:`EventKeys`), when the caller has them (the
        panel's chips group the same events). ``lanes`` (``(device, lane)`` pairs, in order)
        and ``x_span`` (µs) fix the y axis and the x range, so that two timelines drawn one
        above the other line up (see :func:`shared_lanes`); by default they are those of
        ``events``. The lanes of each of ``folded_tasks`` (``/job:ps/task:0``, a collapsed
        group of the panel's chips) are drawn as one lane, ``(task, FOLDED_LANE)`` in
        ``lanes``, bars still in device colours."""
        self.events = events
        self.devices = devices
        # The columns every bar trace reads, once (not a DataFrame lookup per device).
        self._starts = events["start_us"].to_numpy(dtype=np.float64)
        self._durations = events["duration_us"].to_numpy(dtype=np.float64)
        self.total = len(events)
        self.shown = self._choose_shown(events)
        self.webgl = len(self.shown) > WEBGL_THRESHOLD
        self.folded_tasks = frozenset(folded_tasks)
        keys = EventKeys.of(events) if keys is None else keys
        self.lanes, lane_of_row = self._lanes(events, lanes, keys)
        self._fixed_lanes = lanes is not None
        self.lane_y = lane_of_row
        self._device_traces: list[_DeviceTraces] = []
        self._selected_index = -1
        self._no_rows = np.empty(0, dtype=np.int64)
        self.arrows_drawn = False
        # Bars at least 1/1500 of the step wide, so 1 µs ops in a long step stay visible (the
        # hover text gives the real duration).
        self._span = (
            float(x_span)
            if x_span is not None
            else float((events["start_us"] + events["duration_us"]).max())
            if len(events)
            else 0.0
        )
        self._min_width = max(0.5, self._span / 1500)
        self._ops = events["op"].to_numpy(dtype=object)
        self._hover = np.full(len(events), None, dtype=object)
        self._row_colors = _row_colors(events, keys)
        self._keys = keys
        self.memory_curves: list[MemoryCurve] = memory_curves(memory, devices)
        self.data, self.layout = self._build(transfers, inputs)

    @property
    def device_traces(self) -> list[_DeviceTraces]:
        """Per device (in ``devices`` order): its bar and match trace indices and the event
        rows its bars draw, point by point."""
        return self._device_traces

    def device_codes_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``pd.factorize`` of the device of the events ``rows`` (a mask or positions) picks,
        from the codes the figure was drawn with: an integer factorize of those, not a pass
        over a million device names."""
        codes = self._keys.device_codes[rows]
        if (codes < 0).any():  # a missing device: as a factorize of the names has it
            return pd.factorize(self.events["device"].to_numpy(dtype=object)[rows])
        picked, first_seen = pd.factorize(codes)
        return picked, self._keys.devices[first_seen]

    @property
    def selected_index(self) -> int:
        """The index of the selected op's trace in ``data``."""
        return self._selected_index

    @property
    def span_us(self) -> float:
        """The time the x axis spans (µs): the last event's end, or the ``x_span`` given."""
        return self._span

    def lane_labels(self) -> list[str]:
        """Each lane's label (``CPU:0``, ``GPU:0 stream:7``...), in ``lanes`` order, unescaped."""
        return [self._lane_label(device, lane) for device, lane in self.lanes]

    def notes(self, transfers: int) -> list[str]:
        """What the header says about this figure: that it draws a sample, and that the
        ``transfers`` cross-device transfers are listed but not drawn."""
        notes = []
        if self.total > len(self.shown):
            notes.append(
                f"The timeline draws a sample: the {len(self.shown):,} longest "
                f"of {self.total:,} events."
            )
            notes += [self.sample_hint] if self.sample_hint else []
        if transfers and not self.arrows_drawn:
            notes.append(
                f"Transfers are listed, not drawn: {transfers:,} arrows would "
                "hide the bars (pick an op to see its transfers)."
            )
        return notes + memory_notes(self.memory_curves)

    # -- construction -------------------------------------------------------------------------
    @staticmethod
    def _choose_shown(events: pd.DataFrame) -> np.ndarray:
        rows = np.arange(len(events))
        if len(events) <= MAX_BARS:
            return rows
        longest = np.argsort(-events["duration_us"].to_numpy(), kind="stable")[:MAX_BARS]
        return np.sort(longest)

    def _lanes(
        self,
        events: pd.DataFrame,
        fixed: Sequence[tuple[str, str]] | None = None,
        keys: EventKeys | None = None,
    ) -> tuple[list[tuple[str, str]], np.ndarray]:
        """Ordered (device, lane) pairs: the device's own lane first, then streams and copies
        (``fixed`` first when given, in its order, then any pair of ``events`` it lacks)."""
        pairs, codes = _lane_pairs(events, keys)
        keyed = sorted(pairs, key=_lane_key(self.devices))
        if fixed is not None:
            given = [tuple(pair) for pair in fixed]
            known = set(given)
            keyed = given + [pair for pair in keyed if pair not in known]
        keyed, position = _fold(keyed, self.folded_tasks)
        # Each device's own lane (where transfer arrows start and end).
        self._own_lane = {d: y for (d, lane), y in position.items() if lane_kind(lane) == "device"}
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
                    *(  # as lists: iterating an extension array goes value by value
                        column.tolist()
                        for column in (
                            events["op"],
                            types,
                            events["lane"],
                            events["start_us"],
                            events["duration_us"],
                        )
                    ),
                    strict=True,
                )
            ]
        return cache[rows]

    def _build(
        self, transfers: pd.DataFrame, inputs: dict[str, list[str]]
    ) -> tuple[list[dict], dict]:
        """Make the traces and the layout."""
        shown = self.shown
        # The shown rows of each device, in one pass (thousands of devices: not a scan each).
        codes, uniques = pd.factorize(self.events["device"].to_numpy(dtype=object)[shown])
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
        rows_of = {
            d: shown[order[a:b]] for d, a, b in zip(uniques, bounds[:-1], bounds[1:], strict=True)
        }
        self._hover_rows(shown)  # every bar's hover text at once, not device by device
        traces: list[dict] = []
        for device in self.devices:
            rows = rows_of.get(device, shown[:0])
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
        traces += memory_traces(self.memory_curves, self._span)
        return traces, self._layout()

    def _layout(self) -> dict:
        span = self._span or 1.0
        height = min(900, 90 + 34 * max(1, len(self.lanes)))
        layout = dict(
            barmode="overlay",
            height=height,
            margin=dict(l=10, r=10, t=30, b=40),
            showlegend=False,
            clickmode="event",
            hovermode="closest",
            dragmode="zoom",
            uirevision=next(_figure_numbers),  # search updates keep the user's zoom
            # No template (plotly.js's plain defaults): readable on light and dark themes.
            paper_bgcolor="rgba(0,0,0,0)",
            plot_bgcolor="rgba(0,0,0,0)",
            font=dict(color="#8a8a8a", size=12),
            autosize=True,
            xaxis=dict(
                # plotly.js 3 reads a title only as {"text": ...}; several traced steps follow
                # each other on this axis, so it counts from the first op, not from "the step"
                title=dict(text="time since the trace's first op started (µs)"),
                gridcolor="rgba(128,128,128,0.25)",
                range=[0, span * 1.02],
                zeroline=False,
            ),
            shapes=self._task_bands(),
            yaxis=dict(
                # Fixed lanes are all drawn, with bars or not, so that two timelines line up.
                **(
                    dict(range=[len(self.lanes) - 0.5, -0.5])
                    if self._fixed_lanes
                    else dict(autorange="reversed")
                ),
                tickvals=list(range(len(self.lanes))),
                ticktext=[html.escape(self._lane_label(d, lane)) for d, lane in self.lanes],
                automargin=True,
                fixedrange=True,
                zeroline=False,
                showgrid=False,
            ),
        )
        if self.memory_curves:  # the memory lane: a row per device under the lanes
            margins = layout["margin"]
            layout["height"], extra = memory_layout(
                self.memory_curves, height, margins["t"] + margins["b"]
            )
            layout["yaxis"]["domain"] = extra.pop("yaxis_domain")
            layout["xaxis"]["anchor"] = extra.pop("xaxis_anchor")
            layout.update(extra)
        return layout

    def _lane_label(self, device: str, lane: str) -> str:
        if lane != FOLDED_LANE:
            return _lane_label(device, lane)
        count = sum(1 for d in self.devices if task_of(d) == device)
        return f"{device} · {count} device{'s' if count != 1 else ''}"

    def _task_bands(self) -> list[dict]:
        """Across a cluster, a light band behind every other task's lanes, so the lanes of one
        task read as a group (none on one machine)."""
        if len(tasks_of(self.devices)) < 2:
            return []
        tasks = [task_of(device) for device, _ in self.lanes]
        bands = []
        start = 0
        for i in range(1, len(tasks) + 1):
            if i == len(tasks) or tasks[i] != tasks[start]:
                bands.append((start, i - 1))
                start = i
        return [
            dict(
                type="rect",
                xref="paper",
                yref="y",
                x0=0,
                x1=1,
                y0=first - 0.5,
                y1=last + 0.5,
                fillcolor="rgba(128,128,128,0.09)",
                line=dict(width=0),
                layer="below",
            )
            for number, (first, last) in enumerate(bands)
            if number % 2 == 0
        ]

    def _bar_trace(
        self,
        rows: np.ndarray,
        color: str | np.ndarray,
        name: str,
        *,
        opacity: float,
        outline: str | None = None,
        width: float = 1.5,
    ) -> dict:
        """Bars for event ``rows``: a ``bar`` trace below the WebGL threshold, thick GL lines
        above (plotly.js trace dicts; numpy arrays are sent as binary buffers)."""
        starts = self._starts[rows]
        durations = np.maximum(self._durations[rows], self._min_width)
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
            trace = dict(
                type="scattergl",
                x=x.ravel(),
                y=y.ravel(),
                mode="lines",
                name=name,
                opacity=opacity,
                line=dict(color=line_color, width=18 if overlay else 14),
            )
            if overlay:
                trace["hoverinfo"] = "skip"
            else:
                blanks = np.full(len(rows), "", dtype=object)
                trace["text"] = np.column_stack([self._hover_rows(rows), blanks, blanks]).ravel()
                trace["hovertemplate"] = "%{text}<extra></extra>"
            return trace
        hover = self._hover_rows(rows)
        return dict(
            type="bar",
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

    def _arrows(self, transfers: pd.DataFrame, inputs: dict[str, list[str]]) -> dict | None:
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
        lane_of = self._own_lane
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
        return dict(
            type="scatter",
            x=x,
            y=y,
            mode="lines+markers",
            name="transfers",
            hoverinfo="skip",
            line=dict(color="#7f7f7f", width=1.5, dash="dot"),
            marker=dict(symbol="arrow", size=9, angleref="previous", color="#7f7f7f"),
        )


def shared_lanes(
    events: Iterable[pd.DataFrame], devices: Sequence[str], *, every_device: bool = False
) -> list[tuple[str, str]]:
    """The (device, lane) pairs of all ``events`` frames, in a timeline's order (``devices``
    first to last, each device's own lane before its streams and copies): pass them as
    ``Timeline(..., lanes=...)`` to draw several traces on the same lanes. ``every_device``
    adds the own lane of each of ``devices`` that ran nothing (a predicted trace ran nothing
    at all)."""
    pairs: dict[tuple[str, str], None] = {}
    for frame in events:
        pairs.update(dict.fromkeys(_lane_pairs(frame)[0]))
    if every_device:
        own = {device for device, lane in pairs if lane_kind(lane) == "device"}
        pairs.update({(d, d): None for d in devices if d not in own})
    return sorted(pairs, key=_lane_key(devices))


def _fold(
    keyed: list[tuple[str, str]], folded: frozenset[str]
) -> tuple[list[tuple[str, str]], dict[tuple[str, str], int]]:
    """The lanes drawn when ``folded`` tasks are collapsed, and the lane index of each of
    ``keyed``'s pairs: a folded task's pairs all go to its one ``(task, FOLDED_LANE)`` lane."""
    lanes: list[tuple[str, str]] = []
    position: dict[tuple[str, str], int] = {}
    task_lane: dict[str, int] = {}
    for pair in keyed:
        task = task_of(pair[0]) if folded else ""
        if task in folded:
            if task not in task_lane:
                task_lane[task] = len(lanes)
                lanes.append((task, FOLDED_LANE))
            position[pair] = task_lane[task]
        else:
            position[pair] = len(lanes)
            lanes.append(pair)
    return lanes, position


def _lane_pairs(
    events: pd.DataFrame, keys: EventKeys | None = None
) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The distinct (device, lane) pairs of ``events`` and each row's index into them."""
    # Integer codes per column, then per pair: a MultiIndex would build 100k tuples.
    keys = EventKeys.of(events) if keys is None else keys
    lanes = keys.lanes
    codes, pair_codes = pd.factorize(
        keys.device_codes.astype(np.int64) * len(lanes) + keys.lane_codes
    )
    pairs = [(keys.devices[c // len(lanes)], lanes[c % len(lanes)]) for c in pair_codes.tolist()]
    return pairs, codes


def _row_colors(events: pd.DataFrame, keys: EventKeys) -> np.ndarray:
    """Each event's device colour (:func:`device_color`, given in order of first appearance:
    a kernel's colours are handed out in the order devices are first seen)."""
    if (keys.device_codes < 0).any():  # a missing device: pandas' map, which colours it too
        colors = {device: device_color(device) for device in pd.unique(events["device"])}
        return events["device"].map(colors).to_numpy(dtype=object)
    colors = np.array([device_color(device) for device in keys.devices], dtype=object)
    return colors[keys.device_codes]


def _lane_key(devices: Sequence[str]):
    order = {d: i for i, d in enumerate(devices)}
    return lambda p: (order.get(p[0], len(order)), lane_kind(p[1]) != "device", p[1])


def _lane_suffix(lane: str) -> str:
    kind = lane_kind(lane)
    return "" if kind == "device" else lane.rsplit("/", 1)[-1]


def _lane_label(device: str, lane: str) -> str:
    suffix = _lane_suffix(lane)
    return f"{short_device(device)} {suffix}".strip()
