"""The op table's view state: which rows of a trace the search and the filters keep, in what order.

The placement panel reads its controls (the search box, the regex and case ticks, the op type,
the table's sort column and page) and asks a :class:`TableState` for the rows to draw. The state
keeps what the controls do not: the device chips' filter, the clicked finding's ops, the sort
orders already computed and the per-trace lookups a keystroke reuses (the lower-cased names and
each timeline event's row). Plain Python over the trace's frames, no widgets: it is tested
without a browser or a kernel.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._model.trace import PlacementTrace
from .._rendering.colors import device_color
from .._rendering.figure import event_rows
from .._rendering.html_parts import PAGE_SIZE, TABLE_COLUMNS, table_cells
from .._rendering.search import SearchIndex, filter_ops, searchable


class TableState:
    """Search, filter, sort and page state of the op table of one trace at a time."""

    def __init__(self) -> None:
        self.device_filter: set[str] = set()
        self.event_mask: np.ndarray | None = None  # the timeline's outlined events, or none
        self.finding_ops: set[str] | None = None  # the clicked finding's ops, or no filter
        self.filtering = False  # whether the last apply() kept a subset (any filter set)
        self.ops: pd.DataFrame | None = None
        self.kept = np.zeros(0, dtype=np.int64)  # the kept rows' positions in ops, table order
        self._visible: pd.DataFrame | None = None  # their frame, made when first asked for
        self._index: SearchIndex | None = None  # the names' search index, once made
        self.events: pd.DataFrame | None = None
        self.event_row: np.ndarray | None = None  # each event's row in ops (-1: none)
        self.drawn: np.ndarray | None = None  # the events the timeline draws (None: all)
        self.sort_orders: dict[tuple[str, bool], np.ndarray] = {}

    def show(self, trace: PlacementTrace) -> None:
        """Take ``trace``'s ops (a new run, or its prediction): the filters stay, on the devices
        it still has."""
        self.ops = trace.ops
        self._index = None  # made on the first search (or by the panel, once on screen)
        self.sort_orders = {}
        self.events = trace.events
        self.event_row = None  # found when first needed, or by locate_events
        self.drawn = None
        self.device_filter &= set(trace.devices)

    @property
    def lowered(self) -> SearchIndex | None:
        """The search's index of the op names (:func:`searchable`), made when first asked
        for: seconds at a million ops, which a panel spends once it is on screen."""
        if self._index is None and self.ops is not None:
            self._index = searchable(self.ops["op"])
        return self._index

    def draw_events(self, drawn: np.ndarray) -> None:
        """Only the events ``drawn`` (the timeline's bars: the only ones it outlines) are to be
        located, by the first search that outlines any or by :meth:`locate_events` (the panel
        calls it right after a large trace's cell): at a million ops locating them reads every
        op name (0.1-0.4 s), which the panel on screen does not need."""
        self.drawn = drawn
        self.event_row = None

    def locate_events(self, drawn: np.ndarray | None = None) -> None:
        """Find each event's row in ``ops`` (by op and device), so that a keystroke's mask over
        the ops becomes the timeline's mask over the events with one numpy take. ``drawn``:
        only these events' (default: :meth:`draw_events`'); the others get -1 (never
        outlined); a million events cost seconds, ten thousand bars milliseconds. Without
        either, all events."""
        events = self.events
        drawn = self.drawn if drawn is None else drawn
        if drawn is None:
            self.event_row = event_rows(self.ops, events)
            return
        rows = np.full(len(events), -1, dtype=np.int64)
        rows[drawn] = event_rows(self.ops, events.iloc[drawn])
        self.event_row = rows

    def filter_devices(self, devices: tuple[str, ...], pressed: bool) -> None:
        """A device chip (or a task's) pressed adds its devices to the filter; released, drops them."""
        if pressed:
            self.device_filter.update(devices)
        else:
            self.device_filter.difference_update(devices)

    def mask(self, text: str, *, regex: bool, case: bool, op_type: str) -> np.ndarray:
        """Which rows of ``ops`` the search, the device and type filters and the finding keep
        (``SearchError`` for a bad search; nothing changes then)."""
        ops = self.ops
        mask = filter_ops(
            ops,
            text,
            regex=regex,
            case=case,
            devices=self.device_filter,
            types=[op_type] if op_type else (),
            lowered=self.lowered if text else None,  # no text: no index needed
        )
        if self.finding_ops is not None:
            mask &= ops["op"].isin(self.finding_ops).to_numpy(dtype=bool)
        return mask

    def apply(
        self, text: str, *, regex: bool, case: bool, op_type: str, sort_by: str, ascending: bool
    ) -> np.ndarray:
        """Keep the rows the search and filters keep as ``visible``, sorted by ``sort_by``, and
        outline their events when anything filters; the kept rows' positions in ``ops``
        (``SearchError`` for a bad search, with the rows kept before still kept)."""
        mask = self.mask(text, regex=regex, case=case, op_type=op_type)
        order = self.sort_order(sort_by, ascending)
        kept = self.kept = order[mask[order]]
        self._visible = None  # a keystroke shows one page: the frame of all kept rows waits
        self.filtering = (
            bool(text) or bool(self.device_filter) or bool(op_type) or self.finding_ops is not None
        )
        if self.filtering and self.event_row is None:
            self.locate_events()
        keep = np.append(mask, False)  # row -1: an event without an ops row
        self.event_mask = keep[self.event_row] if self.filtering else None
        return kept

    def sort_order(self, sort_by: str, ascending: bool) -> np.ndarray:
        key = (sort_by, ascending)
        order = self.sort_orders.get(key)
        if order is None:
            column = self.ops[key[0]] if key[0] in self.ops else self.ops["op"]
            if isinstance(column.dtype, pd.CategoricalDtype):
                column = column.astype(str)
            order = np.asarray(
                column.reset_index(drop=True)
                .sort_values(ascending=key[1], na_position="last", kind="stable")
                .index
            )
            self.sort_orders[key] = order
        return order

    @property
    def visible(self) -> pd.DataFrame:
        """The kept rows of ``ops`` in table order (``visible_ops``), made on first use after
        :meth:`apply`: a keystroke that keeps most of a million rows draws one page of them."""
        if self._visible is None:
            if self.ops is None:
                return pd.DataFrame(columns=[c for c, _ in TABLE_COLUMNS])
            self._visible = self.ops.iloc[self.kept]
        return self._visible

    def page(self, page: int) -> pd.DataFrame:
        """Page ``page`` of the visible rows, taken from ``ops`` alone (as ``visible``'s)."""
        rows = self.kept[page * PAGE_SIZE : (page + 1) * PAGE_SIZE]
        return self.ops.iloc[rows] if self.ops is not None else self.visible

    def page_rows(self, page: int) -> tuple[list[list[str]], list[str]]:
        """Page ``page`` of the visible rows as the table shows them, and each row's colour."""
        rows = self.page(page)
        return table_cells(rows), [device_color(d) for d in rows["device"]]

    def page_devices(self, page: int) -> list[str]:
        """The (whole) device of each row of page ``page``, as :meth:`page_rows` orders them."""
        return [str(d) for d in self.page(page)["device"]]

    def page_of(self, op: str, device: str) -> int | None:
        """The page that shows ``op`` on ``device`` (None: no visible row is it)."""
        if self.ops is None:
            return None
        ops, kept = self.ops, self.kept
        at = np.flatnonzero(
            (ops["op"].iloc[kept].astype(str) == op).to_numpy()
            & (ops["device"].iloc[kept].astype(str) == device).to_numpy()
        )
        return int(at[0]) // PAGE_SIZE if len(at) else None

    def clear(self) -> None:
        """Let go of the trace's frames and lookups (a closed panel keeps none)."""
        self.kept = np.zeros(0, dtype=np.int64)
        self._visible = self.ops.iloc[:0] if self.ops is not None else None
        self.ops = self.events = self._index = self.event_row = self.event_mask = None
        self.drawn = None
        self.finding_ops = None
        self.sort_orders = {}
