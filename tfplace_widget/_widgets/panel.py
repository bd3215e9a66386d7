"""The placement panel: its layout, and the wiring of its controls to its state and actions.

``show_placement`` is the one entry point; it takes what ``tracing.dispatch.as_trace`` takes
(a graph builder or TF2 function, a :class:`PlacementTrace`, a RunMetadata or a trace file).
The panel filters in the kernel with vectorised pandas and sends the browser only the rows on
screen. Its parts live in modules of their own: ``panel_state`` (the table's search, filter,
sort and page state, plain Python), ``panel_actions`` (re-run, predict, compare, save, close),
``rendering.html_parts`` (header, details, messages, log), ``findings`` (the findings above
the table), ``table`` (the op table), ``timeline`` (the timeline) and ``comparison`` (this run
against the previous one, or against ``compare_to``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
import pandas as pd

from .._analyses.summary import DeviceSummary, device_summaries, task_summaries
from .._explain import HOW_VALUES  # noqa: F401  (one definition, re-exported for callers)
from .._model.devices import EventKeys, tasks_of
from .._model.errors import SearchError
from .._model.trace import PlacementTrace
from .._rendering.colors import device_color
from .._rendering.html_parts import (
    PAGE_SIZE,  # noqa: F401  (re-exported for callers)
    TABLE_COLUMNS,
    details_html,
    header_html,
    log_html,
    message_html,
    status_html,
)
from .._rendering.search import matching_lines
from .._rendering.snapshot import guarded, panel_snapshot_html
from .._tracing.dispatch import as_trace, is_traced
from .._tracing.options import normalize_device_count
from .._tracing.tracer import check_option_names
from .chips import DeviceChips
from .comparison import ComparisonView
from .controls import search_controls
from .findings import FindingsList
from .memory import MemoryPeaks
from .panel_actions import MAX_CPUS, PanelActions
from .panel_state import TableState
from .table import OpTable
from .timeline import Timeline

MAX_LOG_LINES = 400
FINDINGS_LATER_OPS = 20_000  # larger traces find their findings after the cell
MAX_GPUS = 8  # the "as on a machine with N GPUs" control


# A prediction places ops without running them: it has no times to draw.
PREDICTED_TIMELINE_NOTE = (
    "The timeline is empty: a prediction places the ops without running them, so it has no "
    "times; the run it was predicted from has them."
)


class PlacementPanel(PanelActions, widgets.VBox):
    """Everything one traced run shows; re-run it with other placement settings in place."""

    _closed = False
    _built = False  # True once __init__ has finished (ipywidgets closes a widget in __del__)

    def __init__(
        self,
        trace: PlacementTrace,
        builder: Callable[..., Any] | None = None,
        options: dict[str, Any] | None = None,
        args: tuple = (),
    ) -> None:
        self.options = _normalized(options or {})  # a bad device_count fails before any widget
        self.builder = builder
        self.args = tuple(args)
        self.error: str = ""
        self.view_state = TableState()  # the table's filters, sort and visible rows
        self._findings_frame: pd.DataFrame | None = None  # trace.findings, as on screen
        self._findings_error = ""  # why there are none on screen, when finding them failed
        self._device_summaries: list[DeviceSummary] | None = None  # the chips', as on screen
        self._syncing = False
        self._previous: PlacementTrace | None = None  # what was on screen before the last run
        self._compare_labels = ("previous run", "this run")
        self._comparison: ComparisonView | None = None
        self.fix_effect: Any = None  # the last "Try this fix" (a FixEffect)

        self.header = widgets.HTML(layout=widgets.Layout(margin="0 0 4px 0"))
        self.chips = DeviceChips(on_filter=self._on_chips_filter, on_fold=self._on_fold)
        self.findings_view = FindingsList()
        self.memory_view = MemoryPeaks()
        self.try_fix_button = widgets.Button(
            description="Try this fix",
            icon="flask",
            tooltip="Run the code again with the picked finding's fix, then compare",
            layout=widgets.Layout(width="auto", display="none", margin="0 0 4px 16px"),
        )
        self.try_fix_button.add_class("tfplace-try-fix")
        self.suggest_button = widgets.Button(
            description="Suggest a placement",
            icon="magic",
            tooltip=(
                "Try every finding's fix, apply those that verified together, and compare "
                "with TensorFlow's placement"
            ),
            layout=widgets.Layout(width="auto", display="none", margin="0 0 4px 16px"),
        )
        self.suggest_button.add_class("tfplace-suggest")
        self.search, self.regex, self.case_sensitive = search_controls()
        self.type_filter = widgets.Dropdown(
            description="type",  # its <label>, for screen readers
            layout=widgets.Layout(width="auto"),
            style={"description_width": "initial"},
            tooltip="show only ops of one type",
        )
        self.status = widgets.HTML()
        self.message = widgets.HTML()
        self.soft_placement = widgets.Checkbox(
            description="soft placement", indent=False, layout=widgets.Layout(width="auto")
        )
        self.optimize = widgets.Checkbox(
            description="optimizations (Grappler)",
            indent=False,
            layout=widgets.Layout(width="auto"),
        )
        self.device_scope = widgets.Text(
            description="device scope",
            placeholder="e.g. /cpu:1",
            layout=widgets.Layout(width="240px"),
            style={"description_width": "initial"},
        )
        self.cpus = widgets.BoundedIntText(
            description="CPUs",
            min=1,
            max=MAX_CPUS,
            layout=widgets.Layout(width="130px"),
            style={"description_width": "initial"},
        )
        self.as_gpus = widgets.Checkbox(
            description="as on a machine with",
            indent=False,
            layout=widgets.Layout(width="auto"),
            tooltip="Show where TensorFlow's placer would put each op with this many GPUs "
            "added (predicted, not run)",
        )
        self.gpus = widgets.BoundedIntText(
            value=1, min=1, max=MAX_GPUS, layout=widgets.Layout(width="60px")
        )
        self.gpus_label = widgets.HTML("GPUs")
        self.rerun = widgets.Button(
            description="Re-run",
            icon="refresh",
            button_style="primary",
            tooltip="Trace again with these settings",
        )
        self.table = OpTable(
            columns=[c for c, _ in TABLE_COLUMNS],
            labels=[label for _, label in TABLE_COLUMNS],
            page_size=PAGE_SIZE,
        )
        self.details = widgets.HTML()
        self.move_to = widgets.Dropdown(
            description="move to",
            layout=widgets.Layout(width="260px"),
            style={"description_width": "initial"},
        )
        self.move_to.add_class("tfplace-move-to")
        self.move_rerun = widgets.Button(
            description="Re-run and compare",
            icon="refresh",
            tooltip="Trace again with the picked op on this device (overrides=), then compare",
            layout=widgets.Layout(width="auto"),  # the default 148 px cut it to "Re-run and co..."
        )
        self.move_rerun.add_class("tfplace-move-rerun")
        self.move_box = widgets.HBox(
            [self.move_to, self.move_rerun],
            layout=widgets.Layout(align_items="center", display="none", margin="0 0 4px 16px"),
        )
        self.compare_toggle = widgets.ToggleButton(
            description="compare with the previous run",
            icon="columns",
            disabled=True,
            tooltip="Show this run and the one before it one above the other, and what moved",
            layout=widgets.Layout(width="auto"),
        )
        self.compare_toggle.add_class("tfplace-compare-toggle")
        self.save_button = widgets.Button(
            description="Save",
            icon="save",
            tooltip="Write this trace to a .tfplace file next to the notebook "
            "(PlacementTrace.load or show_placement opens it)",
        )
        self.html_button = widgets.Button(
            description="Export HTML",
            icon="file-code-o",
            tooltip="Write a self-contained HTML report next to the notebook (opens offline)",
        )
        self._comparison_box = widgets.Box(
            layout=widgets.Layout(width="100%", display="none", flex_flow="column")
        )
        self.log_view = widgets.HTML()
        self.log_section = widgets.Accordion(children=[self.log_view], selected_index=None)
        self._figure_box = widgets.Box(layout=widgets.Layout(width="100%", display="block"))

        explore = widgets.HBox(
            [
                self.soft_placement,
                self.optimize,
                self.device_scope,
                self.cpus,
                self.rerun,
                self.as_gpus,
                self.gpus,
                self.gpus_label,
                self.compare_toggle,
                self.save_button,
                self.html_button,
            ],
            layout=widgets.Layout(flex_flow="row wrap", align_items="center"),
        )
        finder = widgets.HBox(
            [self.search, self.regex, self.case_sensitive, self.type_filter, self.status],
            layout=widgets.Layout(flex_flow="row wrap", align_items="center"),
        )
        super().__init__(
            [
                self.header,
                self.chips,
                self.findings_view,
                widgets.HBox([self.try_fix_button, self.suggest_button]),
                self.memory_view,
                finder,
                self.message,
                self._comparison_box,
                self._figure_box,
                self.table,
                self.details,
                self.move_box,
                explore,
                self.log_section,
            ],
            layout=widgets.Layout(width="100%"),
        )
        self.add_class("tfplace-panel")

        self.search.observe(self._on_filter_change, "value")
        self.regex.observe(self._on_filter_change, "value")
        self.case_sensitive.observe(self._on_filter_change, "value")
        self.type_filter.observe(self._on_filter_change, "value")
        self.table.observe(self._on_sort_change, ["sort_by", "sort_ascending"])
        self.table.observe(self._on_page_change, "page")
        self.table.observe(self._on_select_change, ["selected_op", "selected_device"])
        self.findings_view.observe(self._on_finding_change, "selected")
        self.memory_view.observe(self._on_memory_pick, "picked_op")
        self.log_section.observe(self._on_log_toggle, "selected_index")
        self.rerun.on_click(self._on_rerun_click)
        self.move_rerun.on_click(self._on_move_click)
        self.try_fix_button.on_click(self._on_try_fix_click)
        self.suggest_button.on_click(self._on_suggest_click)
        self.save_button.on_click(self._on_save_click)
        self.html_button.on_click(self._on_html_click)
        self.compare_toggle.observe(self._on_compare_toggle, "value")
        self.as_gpus.observe(self._on_gpus_change, "value")
        self.gpus.observe(self._on_gpus_change, "value")
        self.trace = self.traced = trace
        self._set_controls_from_options()
        self.show_trace(trace)
        self._built = True

    # -- public -------------------------------------------------------------------------------
    @property
    def timeline(self) -> Any:
        """The timeline widget of the trace on screen (``None`` once closed):
        ``panel.timeline.to_figure()`` gives it as a plotly ``go.Figure``."""
        return self._timeline.widget if self._timeline is not None else None

    @property
    def visible_ops(self) -> pd.DataFrame:
        """The rows of ``trace.ops`` that the current search and filters keep, in table order."""
        return self.view_state.visible

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        """The widget view, and beside it a static snapshot (``text/html``, see
        ``rendering.snapshot``) that nbconvert, GitHub and nbviewer show where no widget can be
        drawn; the comparison's while the panel shows one."""
        bundle = super()._repr_mimebundle_(**kwargs)
        if self._closed or not self._has_trace():
            return bundle
        bundle["text/html"] = guarded(
            lambda: (
                self.comparison.snapshot_html()
                if self.comparison is not None
                else panel_snapshot_html(
                    self.trace,
                    self._timeline,
                    rows=self.view_state.visible,
                    findings=self._findings_frame,
                    findings_note=self._findings_error or self.findings_view.note,
                    memory=self.memory_view.items,
                    summaries=self._device_summaries,
                )
            )
        )
        return bundle

    def show_trace(self, trace: PlacementTrace) -> None:
        """Put a trace on screen (header, chips, table, timeline, log), keeping the search.

        Args:
            trace: The trace to show; with "as on a machine with N GPUs" ticked, its predicted
                placement on that machine is shown instead.
        """
        self.traced = trace
        self._can_predict()
        if self.as_gpus.value:
            try:
                self._display(self._predicted(trace))
                return
            except Exception as exc:  # the run itself is good: show it, and why not predicted
                self._untick_gpus()
                self._display(trace)
                self._show_error(exc, kept="The trace as it ran is on screen.")
                return
        self._display(trace)

    def _display(self, trace: PlacementTrace) -> None:
        """Draw ``trace`` (the one that ran, or its prediction) in every view."""
        self.trace = trace
        ops = trace.ops
        self.view_state.show(trace)
        self._index_later(trace)
        self._log_lines = trace.log.splitlines()
        for device in trace.devices:  # a device new to the kernel gets its colour in this order
            device_color(device)
        keys = EventKeys.of(trace.events)  # the chips and the timeline group the same events
        self._render_chips(keys)  # first: a re-run keeps the tasks folded that it still has
        self._draw_timeline(keys)
        self._render_header()
        self._render_findings()
        self.memory_view.show(trace)
        types = sorted(t for t in ops["type"].unique() if t)
        self._syncing = True
        try:
            current = self.type_filter.value
            self.type_filter.options = [("all op types", "")] + [(t, t) for t in types]
            self.type_filter.value = current if current in types else ""
        finally:
            self._syncing = False
        self.log_section.set_title(0, f"TensorFlow log ({len(self._log_lines)} lines)")
        self._render_details(self.table.selected_op)  # the picked op, as in this trace
        self._render_move(self.table.selected_op)
        if self.compare_toggle.value:
            self._show_comparison()
        self._apply_filters()

    def _draw_timeline(self, keys: EventKeys | None = None) -> None:
        """(Re)draw the timeline of the trace on screen, with the tasks folded that the chips
        say. A re-run draws into the same widget (one comm for the panel's life, and the page
        keeps its view) and lets go of the timeline it replaces. ``keys``: the trace's events'
        (:class:`EventKeys`), made for this drawing (else made here)."""
        trace = self.trace
        previous = getattr(self, "_timeline", None)
        widget = previous.widget if previous is not None else None
        if previous is not None:
            previous.release()
        self._timeline = Timeline(
            trace.events,
            trace.devices,
            trace.transfers,
            trace.inputs,
            widget=widget,
            folded_tasks=self.chips.folded,
            memory=trace.memory,
            keys=keys,
        )
        self._timeline.on_select = self._select_from_timeline
        self._figure_box.children = [self._timeline.widget]
        self.view_state.draw_events(self._timeline.shown)  # the search outlines only these

    # -- rendering ----------------------------------------------------------------------------
    def _render_header(self) -> None:
        notes = self._timeline.notes(len(self.trace.transfers))
        if self.trace.predicted and not len(self.trace.events):
            notes.append(PREDICTED_TIMELINE_NOTE)
        self.header.value = header_html(self.trace, notes)

    def _render_findings(self) -> None:
        """The trace's findings above the table. A large trace's (about 10 s at a million ops
        on a 2-core machine) are found after the cell in a thread of their own
        (``_find_beside``), so the panel shows first and the kernel keeps answering its
        keystrokes and the next cell meanwhile; elsewhere (scripts, tests), or for a smaller
        trace, at once."""
        self.view_state.finding_ops = None
        self._findings_error = ""
        if "_findings_cache" not in vars(self.trace):
            loop = _after_the_cell(self.trace)
            if loop is not None:
                self._findings_frame = None
                self.findings_view.wait(f"finding them in {len(self.trace.ops):,} ops...")
                self._find_beside(loop, self.trace)
                return
        self._show_findings()

    def _find_beside(self, loop: asyncio.AbstractEventLoop, trace: PlacementTrace) -> None:
        """Find ``trace``'s findings (kept in the trace) in a daemon thread, then show them on
        ``loop``, the kernel's. The thread starts once the cell is over and the search index
        made (the loop's callbacks run in order), not to share the interpreter with either. It
        holds no widget: what is on screen changes on the loop only. A daemon: a kernel shut
        down meanwhile does not wait for it."""

        def find() -> None:
            # a failure is found again on the loop, which says what failed
            with contextlib.suppress(Exception):
                trace.findings  # noqa: B018  (kept in the trace by reading it)
            # a loop closed meanwhile (the kernel is gone) refuses the call
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(lambda: self._findings_later(trace))

        thread = threading.Thread(target=find, name="tfplace-findings", daemon=True)
        loop.call_soon(thread.start)

    def _index_later(self, trace: PlacementTrace) -> None:
        """A large trace's search index (the distinct names, lower-cased) and its drawn bars'
        rows in the table (what a search outlines) are found right after the cell, on the
        kernel's event loop before the findings (about 2 s at a million ops), so the panel
        shows first and the first keystroke finds them; elsewhere (scripts, tests), by the
        first search."""
        loop = _after_the_cell(trace)
        if loop is None:
            return
        state = self.view_state

        def index() -> None:
            if self.trace is trace:  # not replaced meanwhile
                if state.event_row is None:
                    state.locate_events()
                state.lowered  # noqa: B018  (made by reading it)

        loop.call_soon(lambda: self._guard(index))

    def _findings_later(self, trace: PlacementTrace) -> None:
        if not self._closed and self.trace is trace:  # not closed or replaced meanwhile
            self._guard(self._show_findings)

    def _show_findings(self) -> None:
        """Find the findings; a failure to find them is a message, and the rest of the panel
        still shows."""
        try:
            findings = self.trace.findings
        except Exception as exc:  # a bug in one analysis must not cost the panel
            self._findings_frame = None
            self.suggest_button.layout.display = "none"
            self.findings_view.show(_NO_FINDINGS)
            self._findings_error = f"Findings could not be computed: {type(exc).__name__}: {exc}"
            self._show_message(self._findings_error, kind="warning")
            return
        self._findings_frame = findings
        self.findings_view.show(findings, self.trace)
        fixes = any((fix or {}).get("overrides") for fix in findings.get("fix", ()))
        self.suggest_button.layout.display = None if fixes and self.builder is not None else "none"

    def _render_chips(self, keys: EventKeys | None = None) -> None:
        trace = self.trace
        keys = EventKeys.of(trace.events) if keys is None else keys
        across_tasks = len(tasks_of(trace.devices)) > 1  # else no groups: skip their sums
        self._device_summaries = device_summaries(trace.ops, trace.events, trace.devices, keys)
        colors = self.chips.show(
            self._device_summaries,
            task_summaries(trace.ops, trace.events, trace.devices, keys) if across_tasks else [],
            self.view_state.device_filter,
        )
        self.table.cover_colors(colors)

    def _apply_filters(self) -> None:
        """Recompute ``visible_ops`` and refresh table, status, timeline and log view."""
        state = self.view_state
        try:
            kept = state.apply(
                self.search.value,
                regex=self.regex.value,
                case=self.case_sensitive.value,
                op_type=self.type_filter.value,
                sort_by=self.table.sort_by,
                ascending=self.table.sort_ascending,
            )
        except SearchError as exc:
            self._show_message(str(exc), kind="warning")
            return
        if self.message.value and not self.error:  # a fixed search: back to the standing note
            self._show_message(self._findings_error, kind="warning")
        self.table.page = 0
        self._render_page()
        self._timeline.highlight(state.event_mask)
        timeline = self._timeline
        outlined = (
            f" · timeline outlines {timeline.matches_shown:,} of {timeline.matches_total:,} "
            "matching bars"
            if timeline.matches_total > timeline.matches_shown
            else ""
        )
        selected = self.findings_view.selected
        finding = (
            self.findings_view.items[selected]["kind"]
            if state.finding_ops is not None and 0 <= selected < len(self.findings_view.items)
            else ""
        )
        self.status.value = status_html(len(kept), len(state.ops), outlined, finding)
        if self._comparison is not None and self.compare_toggle.value:
            self._comparison.filter(
                self.search.value,
                regex=self.regex.value,
                case=self.case_sensitive.value,
                types=[self.type_filter.value] if self.type_filter.value else (),
            )
        if self.log_section.selected_index == 0:
            self._render_log()

    def _render_page(self) -> None:
        rows, colors = self.view_state.page_rows(self.table.page)
        with self.table.hold_sync():
            self.table.total = len(self.view_state.kept)
            self.table.rows = rows
            self.table.row_colors = colors
            self.table.row_devices = self.view_state.page_devices(self.table.page)

    def _render_log(self) -> None:
        lines = (
            matching_lines(
                self._log_lines, self.search.value, regex=False, case=self.case_sensitive.value
            )
            if not self.regex.value
            else (self._log_lines)
        )
        self.log_view.value = log_html(lines[:MAX_LOG_LINES], len(lines))

    def _render_details(self, op: str) -> None:
        self.details.value = details_html(self.trace, op)

    def _show_message(self, text: str, kind: str = "info") -> None:
        self.message.value = message_html(text, kind)

    def _show_error(
        self, exc: BaseException, kept: str = "The last good result stays on screen."
    ) -> None:
        self.error = f"{type(exc).__name__}: {exc}"
        self._show_message(f"{self.error}\n\n{kept}", kind="error")

    # -- observers ----------------------------------------------------------------------------
    def _on_filter_change(self, _change: dict) -> None:
        if not self._syncing:
            self._guard(self._apply_filters)

    def _on_chips_filter(self, devices: tuple[str, ...], pressed: bool) -> None:
        self.view_state.filter_devices(devices, pressed)
        self.chips.sync(self.view_state.device_filter)
        self._guard(self._apply_filters)

    def _on_fold(self, _folded: frozenset[str]) -> None:
        def redraw() -> None:  # the search's outlines and the picked op stay as they were
            self._draw_timeline()
            self._render_header()
            self._timeline.highlight(self.view_state.event_mask)
            self._timeline.select(self.table.selected_op, self.table.selected_device)

        self._guard(redraw)

    def _on_sort_change(self, _change: dict) -> None:
        self._guard(self._apply_filters)

    def _on_page_change(self, _change: dict) -> None:
        self._guard(self._render_page)

    def _on_select_change(self, _change: dict) -> None:
        """A pick is of one op on one device (both traits may change in one message)."""
        op, device = self.table.selected_op, self.table.selected_device

        def update() -> None:
            self._render_details(op)
            self._render_move(op)
            self._timeline.select(op, device)

        self._guard(update)

    def _on_finding_change(self, change: dict) -> None:
        """A click on a finding keeps only its ops (a second click, or -1, shows all again)."""
        index = change["new"]
        frame = self._findings_frame
        if frame is not None and 0 <= index < len(frame):
            self.view_state.finding_ops = set(frame["ops"].iloc[index])
        else:
            self.view_state.finding_ops = None
        self._render_try_fix(index)
        self._guard(self._apply_filters)

    def _on_memory_pick(self, change: dict) -> None:
        """A click on an op holding a device's memory peak picks it, as a click on its bar."""
        op, device = change["new"], self.memory_view.picked_device
        if op:
            self._guard(lambda: self._select_from_timeline(op, device))
            self.memory_view.picked_op = ""  # the same op again is a new click

    def _select_from_timeline(self, op: str, device: str = "") -> None:
        """A clicked bar picks its op on its device, and turns the table to the page of its row."""
        page = self.view_state.page_of(op, device)
        with self.table.hold_trait_notifications(), self.table.hold_sync():
            self.table.selected_device = device
            self.table.selected_op = op
        if page is not None and page != self.table.page:
            self.table.page = page  # _on_page_change draws it

    def _on_log_toggle(self, change: dict) -> None:
        if change["new"] == 0:
            self._guard(self._render_log)

    def _guard(self, action: Callable[[], None]) -> None:
        """Run an observer; show any error in the panel instead of losing it in the log."""
        if self._closed:  # a closed panel has no trace left to filter
            return
        try:
            action()
        except Exception as exc:  # a broken callback must not break the panel
            self._show_error(exc)


_NO_FINDINGS = pd.DataFrame({"kind": [], "severity": [], "ops": [], "message": []})


def show_placement(fn_or_trace: Any, *args: Any, **options: Any) -> PlacementPanel:
    """Trace ``fn(*args)`` (or take a trace, RunMetadata or trace file) and show the panel.

    ``fn`` is TF2 code (a tf.function, a Keras model, ``model.train_on_batch``, any callable)
    or a TF1 graph builder; options are those of :func:`trace_placement`, keyword-only;
    unknown ones raise ``TypeError``. ``compare_to=`` (a trace, or anything this function
    takes; a function is traced with the same arguments and options) opens the panel on the
    comparison of that placement (``a``) with this one (``b``).
    """
    compare_to = options.pop("compare_to", None)
    check_option_names(options, "show_placement")
    if compare_to is not None:
        before = (
            as_trace(compare_to, *args, **options)
            if callable(compare_to) and not isinstance(compare_to, PlacementTrace)
            else as_trace(compare_to)
        )
        panel = show_placement(fn_or_trace, *args, **options)
        panel.compare_with(before)
        return panel
    options = _normalized(options)
    if args and not callable(fn_or_trace):
        raise TypeError(
            "Arguments after the first are passed to the function to trace; "
            f"{type(fn_or_trace).__name__} is not callable."
        )
    if not is_traced(fn_or_trace) and not callable(fn_or_trace):
        raise TypeError(
            f"show_placement takes a function to trace (a tf.function, a Keras model, or a graph "
            f"builder), a PlacementTrace, a RunMetadata or a trace file path, not "
            f"{type(fn_or_trace).__name__}."
        )
    trace = as_trace(fn_or_trace, *args, **options)
    if is_traced(fn_or_trace):  # a trace, a trace file or a RunMetadata: nothing to re-run
        return PlacementPanel(trace)
    return PlacementPanel(trace, builder=fn_or_trace, options=options, args=args)


def _normalized(options: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``options`` with ``device_count``'s keys upper-case (``ValueError`` on a
    conflict), so the controls and a re-run read one spelling."""
    options = dict(options)
    if options.get("device_count") is not None:
        options["device_count"] = normalize_device_count(options["device_count"])
    return options


def _after_the_cell(trace: PlacementTrace) -> asyncio.AbstractEventLoop | None:
    """The event loop running this cell (a kernel's) when ``trace`` is large enough for the
    panel to finish its work after the cell; None for a smaller trace, or with no loop
    running in this thread (a script, a test)."""
    if len(trace.ops) <= FINDINGS_LATER_OPS:
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
