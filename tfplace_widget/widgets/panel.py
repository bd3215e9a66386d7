"""The placement panel: its layout, its filter state and the controls that change them.

``show_placement`` is the one entry point; it dispatches on what it is given (a graph builder,
a :class:`PlacementTrace`, a RunMetadata or a trace file). The panel filters in the kernel
with vectorised pandas and sends the browser only the rows on screen. What it draws lives in
views of their own: ``panel_html`` (header, details, messages, log), ``findings_view`` (the
findings above the table), ``table`` (the op table), ``timeline`` (the timeline) and
``comparison_view`` (this run against the previous one, or against ``compare_to``).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
import numpy as np
import pandas as pd

from ..analyses.compare import compare
from ..analyses.summary import device_summaries, format_us, task_summaries
from ..export.output import write_new_file
from ..model.devices import short_device, task_of, tasks_of
from ..model.errors import TraceError
from ..model.reasons import HOW_VALUES  # noqa: F401  (one definition, re-exported for callers)
from ..model.trace import PlacementTrace
from ..rendering.colors import device_color
from ..rendering.html_parts import (
    PAGE_SIZE,
    TABLE_COLUMNS,
    details_html,
    header_html,
    log_html,
    message_html,
    status_html,
)
from ..rendering.search import SearchError, filter_ops, matching_lines, searchable
from ..rendering.snapshot import guarded, panel_snapshot_html
from ..tracing.options import normalize_device_count
from ..tracing.tracer import MAX_DEVICES_PER_TYPE, check_option_names, trace_placement
from .chips import DeviceChips
from .comparison import ComparisonView
from .controls import search_controls
from .findings import FindingsList
from .table import OpTable
from .timeline import Timeline
from .tree import widget_tree as _widget_tree

MAX_LOG_LINES = 400
FINDINGS_LATER_OPS = 20_000  # larger traces find their findings after the cell
MAX_GPUS = 8  # the "as on a machine with N GPUs" control
MAX_CPUS = MAX_DEVICES_PER_TYPE  # what trace_placement accepts; a larger given count widens it


class PlacementPanel(widgets.VBox):
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
        self._device_filter: set[str] = set()
        self._event_mask: np.ndarray | None = None  # the timeline's outlined events, or none
        self._finding_ops: set[str] | None = None  # the clicked finding's ops, or no filter
        self._findings_frame: pd.DataFrame | None = None  # trace.findings, as on screen
        self._findings_error = ""  # why there are none on screen, when finding them failed
        self._syncing = False
        self._previous: PlacementTrace | None = None  # what was on screen before the last run
        self._compare_labels = ("previous run", "this run")
        self._comparison: ComparisonView | None = None

        self.header = widgets.HTML(layout=widgets.Layout(margin="0 0 4px 0"))
        self.chips = DeviceChips(on_filter=self._on_chips_filter, on_fold=self._on_fold)
        self.findings_view = FindingsList()
        self.search, self.regex, self.case_sensitive = search_controls()
        self.type_filter = widgets.Dropdown(
            layout=widgets.Layout(width="200px"), tooltip="show only ops of one type"
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
        self.table.observe(self._on_select_change, "selected_op")
        self.findings_view.observe(self._on_finding_change, "selected")
        self.log_section.observe(self._on_log_toggle, "selected_index")
        self.rerun.on_click(self._on_rerun_click)
        self.move_rerun.on_click(self._on_move_click)
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
        return self._visible

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
                    rows=self._visible,
                    findings=self._findings_frame,
                    findings_note=self._findings_error or self.findings_view.note,
                )
            )
        )
        return bundle

    def close(self) -> None:
        """Close every widget of the panel and let go of them, of the trace, the function and
        its arguments: the kernel keeps nothing of a closed panel but this empty shell (which
        IPython's output history may still hold), whose ``trace``, ``timeline``, ``search``...
        are ``None``. Take ``panel.trace`` first to keep it."""
        if self._closed:
            return
        self._closed = True
        # __init__ failed part-way: there is no panel to take apart; or the interpreter is
        # exiting (ipywidgets closes widgets from __del__), when there is nothing to free.
        if not self._built or sys.is_finalizing():
            super().close()
            return
        tree = _widget_tree(self)
        for widget in reversed(tree):  # children first, the panel's own box last
            if widget is not self:
                widget.close()
        super().close()
        # No cycles left through the panel's observers and click handler, and no data in the
        # closed widgets: what the panel held is freed at once, not at the next full collection.
        for widget in tree:
            widget.unobserve_all()
        self.rerun.on_click(self._on_rerun_click, remove=True)
        self.move_rerun.on_click(self._on_move_click, remove=True)
        self.save_button.on_click(self._on_save_click, remove=True)
        self.html_button.on_click(self._on_html_click, remove=True)
        if self._comparison is not None:
            self._comparison.release()
        self._comparison = self._previous = None
        if self._timeline is not None:
            widget = self._timeline.widget
            self._timeline.release()
            widget.clear()  # closed: nothing is sent, the kernel lets go of the traces
        self._timeline = None
        for box in tree:
            if isinstance(box, widgets.Box):
                box.children = ()
        self.table.rows, self.table.row_colors = [], []
        for view in (self.header, self.status, self.message, self.details, self.log_view):
            view.value = ""
        self.findings_view.items, self._finding_ops, self._findings_frame = [], None, None
        self.type_filter.options = ()
        self.trace = self.traced = None
        self.builder = None
        self.args = ()
        self.options = {}
        self._visible = pd.DataFrame(columns=list(self._visible.columns))
        self._lowered = self._event_row = self._event_mask = None
        self._sort_orders = {}
        self._log_lines = []
        for name, value in list(vars(self).items()):  # the closed controls, table, views...
            if isinstance(value, widgets.Widget):
                setattr(self, name, None)

    def show_trace(self, trace: PlacementTrace) -> None:
        """Put ``trace`` on screen (header, chips, table, timeline, log), keeping the search;
        with "as on a machine with N GPUs" ticked, its predicted placement on that machine."""
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
        self._lowered = searchable(ops["op"])
        self._sort_orders: dict[tuple[str, bool], np.ndarray] = {}
        # Each event's row in trace.ops (by op and device): a keystroke's mask over the ops
        # becomes the timeline's mask over the events with one numpy take.
        keys = ops[["op", "device"]].assign(_row=np.arange(len(ops)))
        keys = keys.drop_duplicates(["op", "device"])
        located = trace.events[["op", "device"]].merge(keys, how="left", on=["op", "device"])
        self._event_row = located["_row"].fillna(-1).to_numpy(dtype=np.int64)
        self._log_lines = trace.log.splitlines()
        self._device_filter &= set(trace.devices)
        for device in trace.devices:  # a device new to the kernel gets its colour in this order
            device_color(device)
        self._render_chips()  # first: a re-run keeps the tasks folded that it still has
        self._draw_timeline()
        self._render_header()
        self._render_findings()
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

    def run(
        self, overrides: dict[str, str] | None = None, *, compare: bool = False
    ) -> PlacementTrace | None:
        """Trace the builder again with the panel's settings; on failure keep the last result.

        ``overrides`` (``{op: device}``) are merged into the panel's ``overrides`` option, and
        kept for the re-runs after. What was on screen before becomes "the previous run";
        ``compare=True`` shows the comparison with it at once."""
        if self.builder is None:
            self._show_message(
                "This panel shows a loaded trace; there is no graph builder to "
                "re-run. Call show_placement(fn) with a function to explore."
            )
            return None
        options = self._options_from_controls()
        if overrides:
            options["overrides"] = {**(options.get("overrides") or {}), **overrides}
        previous = self.trace
        self.rerun.disabled = True
        self.rerun.description = "Running..."
        try:
            trace = trace_placement(self.builder, *self.args, **options)
        except (TraceError, ValueError) as exc:
            self._show_error(exc)
            return None
        except Exception as exc:  # unexpected: show it rather than lose it in the log
            self._show_error(exc)
            return None
        finally:
            self.rerun.disabled = False
            self.rerun.description = "Re-run"
        self.options = options
        self.error = ""
        self._show_message("")
        self._previous = previous
        self._compare_labels = ("previous run", "this run")
        self.compare_toggle.disabled = False
        self.show_trace(trace)
        if compare and not self.compare_toggle.value:
            self.compare_toggle.value = True  # the observer draws the comparison
        return trace

    def compare_with(self, trace: PlacementTrace, label: str = "compare_to") -> None:
        """Show the comparison of ``trace`` (as ``a``, named ``label``) with the trace on
        screen (``b``), as after a re-run (the compare toggle then leads back to the single
        view); the next re-run compares with the run before it again."""
        if not isinstance(trace, PlacementTrace):
            raise TypeError(f"compare_with takes a PlacementTrace, not {type(trace).__name__}.")
        self._previous = trace
        self._compare_labels = (label, "this run")
        self.compare_toggle.disabled = False
        if self.compare_toggle.value:
            self._show_comparison()
            self._apply_filters()
        else:
            self.compare_toggle.value = True

    @property
    def comparison(self) -> ComparisonView | None:
        """The comparison view on screen, or ``None`` in the single view."""
        toggle = self.compare_toggle
        return self._comparison if toggle is not None and toggle.value else None

    # -- compare with the previous run ---------------------------------------------------------
    def _show_comparison(self) -> None:
        """Draw ``compare(previous, on screen)`` in the comparison view and show it in place of
        the single view's chips, findings, timeline and table."""
        if self._previous is None:
            raise ValueError(
                "There is no previous run to compare with yet: re-run first, or open the panel "
                "with show_placement(..., compare_to=...)."
            )
        diff = compare(self._previous, self.trace)
        if self._comparison is None:
            self._comparison = ComparisonView(diff, self._compare_labels, search=False)
            self._comparison_box.children = [self._comparison]
        else:
            self._comparison.show(diff, self._compare_labels)
        self._set_comparing(True)

    def _set_comparing(self, comparing: bool) -> None:
        single = "none" if comparing else None
        for view in (self.chips, self.findings_view, self._figure_box, self.table, self.details):
            view.layout.display = single
        self.status.layout.display = single
        if comparing:
            self.move_box.layout.display = "none"
        self._comparison_box.layout.display = "flex" if comparing else "none"
        self.compare_toggle.description = (
            "back to the single view" if comparing else "compare with the previous run"
        )

    def _on_compare_toggle(self, change: dict) -> None:
        if self._closed or self._syncing:
            return
        if not change["new"]:
            self._set_comparing(False)
            self._guard(lambda: self._render_move(self.table.selected_op))
            return
        try:
            self._show_comparison()
            self._apply_filters()
        except Exception as exc:  # keep the single view on screen
            self._syncing = True
            try:
                self.compare_toggle.value = False
            finally:
                self._syncing = False
            self._set_comparing(False)
            self._show_error(exc, kept="The single view stays on screen.")

    # -- move the picked op and re-run -----------------------------------------------------------
    def _render_move(self, op: str) -> None:
        """Offer "move to [device]" and "Re-run" for a picked op the builder can override."""
        devices = _move_targets(self.trace, op, self.traced.devices) if self.builder else []
        comparing = self.compare_toggle.value
        self.move_box.layout.display = "none" if comparing or not devices else None
        if devices:
            self.move_to.options = [(short_device(d) or d, d) for d in devices]
            self.move_rerun.tooltip = (
                f"Trace again with overrides={{{op!r}: <device>}} and compare with this run"
            )

    def _on_move_click(self, _button: widgets.Button) -> None:
        op, device = self.table.selected_op, self.move_to.value
        if not op or not device:
            self._show_message("Pick an op in the table or timeline first.", kind="warning")
            return
        self.run(overrides={op: device}, compare=True)

    # -- as on a machine with N GPUs ----------------------------------------------------------
    def _predicted(self, trace: PlacementTrace) -> PlacementTrace:
        from ..analyses.predict import predict_placement

        soft = bool(self.options.get("soft_placement", True))
        return predict_placement(trace, gpus=int(self.gpus.value), soft_placement=soft)

    def _can_predict(self) -> None:
        """The GPU control works for a trace made with its graph that is not a prediction."""
        trace = self.traced
        able = getattr(trace, "facts", None) is not None and not getattr(trace, "predicted", False)
        self.as_gpus.disabled = self.gpus.disabled = not able
        if not able:
            self.as_gpus.tooltip = (
                "Needs a trace made with its graph (not loaded from a Chrome trace or a "
                "RunMetadata without graph=, and not already a prediction)"
            )

    def _untick_gpus(self) -> None:
        self._syncing = True
        try:
            self.as_gpus.value = False
        finally:
            self._syncing = False

    def _on_gpus_change(self, change: dict) -> None:
        if self._syncing or self._closed:
            return
        if change["owner"] is self.gpus and not self.as_gpus.value:
            return  # the count alone changes nothing on screen
        if not self.as_gpus.value:
            self._guard(lambda: self._display(self.traced))
            return
        try:
            predicted = self._predicted(self.traced)
        except Exception as exc:  # keep the previous result on screen
            if change["owner"] is self.as_gpus:
                self._untick_gpus()
            self._show_error(exc)
            return
        self.error = ""
        self._show_message("")
        self._guard(lambda: self._display(predicted))

    # -- controls <-> options -----------------------------------------------------------------
    def _set_controls_from_options(self) -> None:
        options = self.options
        self.soft_placement.value = bool(options.get("soft_placement", True))
        self.optimize.value = bool(options.get("optimize", False))
        self.device_scope.value = options.get("device_scope") or ""
        # The count the options ask for, as given (keys are upper-case here); without one, the
        # trace's own count (a TF2 trace runs on the runtime's CPUs); across a cluster, per task
        # (device_count applies to each task).
        devices = self.trace.devices if self._has_trace() else []
        per_task = Counter(task_of(d) for d in devices if "CPU:" in d)
        cpus_in_trace = max(per_task.values(), default=1)
        self.cpus.description = "CPUs per task" if len(per_task) > 1 else "CPUs"
        count = max(1, int((options.get("device_count") or {}).get("CPU", cpus_in_trace or 1)))
        self.cpus.max = max(MAX_CPUS, count)  # before the value: the control clamps to max
        self.cpus.value = self._shown_cpus = count
        runnable = self.builder is not None
        for control in (
            self.soft_placement,
            self.optimize,
            self.device_scope,
            self.cpus,
            self.rerun,
        ):
            control.disabled = not runnable

    def _options_from_controls(self) -> dict[str, Any]:
        options = dict(self.options)
        options["soft_placement"] = self.soft_placement.value
        options["optimize"] = self.optimize.value
        options["device_scope"] = self.device_scope.value.strip() or None
        counts = options.get("device_count")
        asked = (counts or {}).get("CPU")
        cpus = int(self.cpus.value)
        if cpus != (self._shown_cpus if asked is None else asked):
            # Only when the user changed it: an untouched control re-runs with the options the
            # panel was made with, and TF2 code cannot change its CPU count once the runtime
            # runs, so a TF2 trace's count is not passed back unasked.
            options["device_count"] = {**(counts or {}), "CPU": cpus}
        return options

    def _draw_timeline(self) -> None:
        """(Re)draw the timeline of the trace on screen, with the tasks folded that the chips
        say. A re-run draws into the same widget (one comm for the panel's life, and the page
        keeps its view) and lets go of the timeline it replaces."""
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
        )
        self._timeline.on_select = self._select_from_timeline
        self._figure_box.children = [self._timeline.widget]

    def _has_trace(self) -> bool:
        return getattr(self, "trace", None) is not None

    # -- rendering ----------------------------------------------------------------------------
    def _render_header(self) -> None:
        notes = self._timeline.notes(len(self.trace.transfers))
        self.header.value = header_html(self.trace, notes)

    def _render_findings(self) -> None:
        """The trace's findings above the table. A large trace's are found right after the
        cell, on the kernel's event loop (about 2 s per 100k ops), so the panel shows first;
        elsewhere (scripts, tests), or for a smaller trace, at once."""
        self._finding_ops = None
        self._findings_error = ""
        if len(self.trace.ops) > FINDINGS_LATER_OPS and "_findings_cache" not in vars(self.trace):
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no event loop in this thread: not a kernel running a cell
                loop = None
            if loop is not None:
                self._findings_frame = None
                self.findings_view.wait(f"finding them in {len(self.trace.ops):,} ops...")
                trace = self.trace
                loop.call_soon(lambda: self._findings_later(trace))
                return
        self._show_findings()

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
            self.findings_view.show(_NO_FINDINGS)
            self._findings_error = f"Findings could not be computed: {type(exc).__name__}: {exc}"
            self._show_message(self._findings_error, kind="warning")
            return
        self._findings_frame = findings
        self.findings_view.show(findings)

    def _render_chips(self) -> None:
        trace = self.trace
        across_tasks = len(tasks_of(trace.devices)) > 1  # else no groups: skip their sums
        colors = self.chips.show(
            device_summaries(trace.ops, trace.events, trace.devices),
            task_summaries(trace.ops, trace.events, trace.devices) if across_tasks else [],
            self._device_filter,
        )
        self.table.cover_colors(colors)

    def _apply_filters(self) -> None:
        """Recompute ``visible_ops`` and refresh table, status, timeline and log view."""
        ops = self.trace.ops
        try:
            mask = filter_ops(
                ops,
                self.search.value,
                regex=self.regex.value,
                case=self.case_sensitive.value,
                devices=self._device_filter,
                types=[self.type_filter.value] if self.type_filter.value else (),
                lowered=self._lowered,
            )
        except SearchError as exc:
            self._show_message(str(exc), kind="warning")
            return
        if self._finding_ops is not None:
            mask &= ops["op"].isin(self._finding_ops).to_numpy(dtype=bool)
        if self.message.value and not self.error:  # a fixed search: back to the standing note
            self._show_message(self._findings_error, kind="warning")
        order = self._sort_order()
        kept = order[mask[order]]
        self._visible = ops.iloc[kept]
        filtering = (
            bool(self.search.value)
            or bool(self._device_filter)
            or bool(self.type_filter.value)
            or self._finding_ops is not None
        )
        self.table.page = 0
        self._render_page()
        keep = np.append(mask, False)  # row -1: an event without an ops row
        self._event_mask = keep[self._event_row] if filtering else None
        self._timeline.highlight(self._event_mask)
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
            if self._finding_ops is not None and 0 <= selected < len(self.findings_view.items)
            else ""
        )
        self.status.value = status_html(len(kept), len(ops), outlined, finding)
        if self._comparison is not None and self.compare_toggle.value:
            self._comparison.filter(
                self.search.value,
                regex=self.regex.value,
                case=self.case_sensitive.value,
                types=[self.type_filter.value] if self.type_filter.value else (),
            )
        if self.log_section.selected_index == 0:
            self._render_log()

    def _sort_order(self) -> np.ndarray:
        key = (self.table.sort_by, self.table.sort_ascending)
        order = self._sort_orders.get(key)
        if order is None:
            column = self.trace.ops[key[0]] if key[0] in self.trace.ops else self.trace.ops["op"]
            if isinstance(column.dtype, pd.CategoricalDtype):
                column = column.astype(str)
            order = np.asarray(
                column.reset_index(drop=True)
                .sort_values(ascending=key[1], na_position="last", kind="stable")
                .index
            )
            self._sort_orders[key] = order
        return order

    def _render_page(self) -> None:
        page = self.table.page
        rows = self._visible.iloc[page * PAGE_SIZE : (page + 1) * PAGE_SIZE]
        formatted = []
        for record in rows[[c for c, _ in TABLE_COLUMNS]].itertuples(index=False):
            op, typ, device, requested, how, reason, start, duration, runs = record
            formatted.append(
                [
                    op,
                    typ,
                    short_device(device) or device,
                    requested,
                    str(how),
                    reason,
                    format_us(start),
                    format_us(duration),
                    "" if pd.isna(runs) else str(int(runs)),
                ]
            )
        with self.table.hold_sync():
            self.table.total = len(self._visible)
            self.table.rows = formatted
            self.table.row_colors = [device_color(d) for d in rows["device"]]

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

    def save(self, folder: str | os.PathLike = ".") -> str:
        """Write the trace on screen to a new ``.tfplace`` file in ``folder`` (the notebook's
        folder by default: a kernel runs there); return its path. The Save button calls it."""
        trace = self.trace
        return write_new_file(
            _new_file_base(folder, trace), ".tfplace", lambda p: trace.save(p, overwrite=False)
        )

    def export_html(self, folder: str | os.PathLike = ".") -> str:
        """Write the trace on screen as a self-contained HTML report in ``folder`` (with the
        current search); return its path. The Export HTML button calls it."""
        trace, search = self.trace, self.search.value
        return write_new_file(
            _new_file_base(folder, trace),
            ".html",
            lambda p: trace.to_html(p, search=search, overwrite=False),
        )

    def _on_save_click(self, _button: widgets.Button) -> None:
        self._write_file(self.save, "Saved the trace to")

    def _on_html_click(self, _button: widgets.Button) -> None:
        self._write_file(self.export_html, "Wrote the HTML report to")

    def _write_file(self, write: Callable[[], str], done: str) -> None:
        """Run a file writer; say where it wrote, or why it could not (the panel stays)."""
        try:
            path = write()
        except Exception as exc:
            self._show_error(exc, kept="Nothing was written; the panel stays as it was.")
            return
        self._show_message(f"{done} {os.path.abspath(path)}")

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
        if pressed:
            self._device_filter.update(devices)
        else:
            self._device_filter.difference_update(devices)
        self.chips.sync(self._device_filter)
        self._guard(self._apply_filters)

    def _on_fold(self, _folded: frozenset[str]) -> None:
        def redraw() -> None:  # the search's outlines and the picked op stay as they were
            self._draw_timeline()
            self._render_header()
            self._timeline.highlight(self._event_mask)
            self._timeline.select(self.table.selected_op)

        self._guard(redraw)

    def _on_sort_change(self, _change: dict) -> None:
        self._guard(self._apply_filters)

    def _on_page_change(self, _change: dict) -> None:
        self._guard(self._render_page)

    def _on_select_change(self, change: dict) -> None:
        def update() -> None:
            self._render_details(change["new"])
            self._render_move(change["new"])
            self._timeline.select(change["new"])

        self._guard(update)

    def _on_finding_change(self, change: dict) -> None:
        """A click on a finding keeps only its ops (a second click, or -1, shows all again)."""
        index = change["new"]
        frame = self._findings_frame
        if frame is not None and 0 <= index < len(frame):
            self._finding_ops = set(frame["ops"].iloc[index])
        else:
            self._finding_ops = None
        self._guard(self._apply_filters)

    def _select_from_timeline(self, op: str) -> None:
        self.table.selected_op = op

    def _on_rerun_click(self, _button: widgets.Button) -> None:
        self.run()

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
        from ..tracing.dispatch import as_trace

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
    if isinstance(fn_or_trace, (PlacementTrace, str, os.PathLike)) or (
        type(fn_or_trace).__name__ == "RunMetadata"
    ):  # already traced: a trace, a trace file (.tfplace, Chrome JSON, RunMetadata) or proto
        from ..tracing.dispatch import as_trace

        return PlacementPanel(as_trace(fn_or_trace, **options))
    if callable(fn_or_trace):
        trace = trace_placement(fn_or_trace, *args, **options)
        return PlacementPanel(trace, builder=fn_or_trace, options=options, args=args)
    raise TypeError(
        f"show_placement takes a function to trace (a tf.function, a Keras model, or a graph "
        f"builder), a PlacementTrace, a RunMetadata or a trace file path, not "
        f"{type(fn_or_trace).__name__}."
    )


def _move_targets(trace: PlacementTrace, op: str, devices: list[str]) -> list[str]:
    """The devices ``op`` can be asked to move to: those of the run other than its own; none
    for an op TensorFlow's runtime added (``_Send``, ``_Recv``...: not in the built graph, so
    ``overrides`` cannot ask for them) or an op not in ``trace``."""
    rows = trace.ops[trace.ops["op"] == op] if op else trace.ops.iloc[0:0]
    if rows.empty or (rows["how"] == "runtime").all():
        return []
    placed = set(rows["device"])
    return [d for d in devices if d not in placed]


def _normalized(options: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``options`` with ``device_count``'s keys upper-case (``ValueError`` on a
    conflict), so the controls and a re-run read one spelling."""
    options = dict(options)
    if options.get("device_count") is not None:
        options["device_count"] = normalize_device_count(options["device_count"])
    return options


def _new_file_base(folder: str | os.PathLike, trace: PlacementTrace) -> str:
    """A file name in ``folder`` from the trace's source and the time, without its suffix;
    ``write_new_file`` adds ``-2``... when it is taken, and never overwrites."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", os.path.basename(trace.source or "trace")).strip("._")
    return os.path.join(os.fspath(folder), f"{stem or 'trace'}-{time.strftime('%Y%m%d-%H%M%S')}")
