"""What the placement panel's buttons and controls do: re-run, predict, compare, save, close.

:class:`PanelActions` is the half of :class:`~tfplace_widget._widgets.panel.PlacementPanel` that
changes what is on screen or writes it out: the re-run controller (the controls <-> the
tracing options, "move to [device]" and re-run), "as on a machine with N GPUs" (a predicted
placement), the comparison with the previous run (or ``compare_to``), saving the trace or an
HTML report, and the teardown that lets go of it all. The panel (``panel.py``) builds the
widgets these methods use, wires them, and draws a trace (``show_trace``).
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from .._analyses.compare import compare
from .._analyses.fix_effect import FixEffect
from .._export.output import write_new_file
from .._model.devices import short_device, task_of
from .._model.errors import TraceError
from .._model.trace import PlacementTrace
from .._tracing.fixes import suggest_placement, try_fix
from .._tracing.recipe import Recipe
from .._tracing.tracer import MAX_DEVICES_PER_TYPE, trace_placement
from .comparison import ComparisonView
from .tree import widget_tree as _widget_tree

MAX_CPUS = MAX_DEVICES_PER_TYPE  # what trace_placement accepts; a larger given count widens it


class PanelActions:
    """The placement panel's actions (a base of ``PlacementPanel``, which builds the widgets and
    the state they use: ``self.table``, ``self.rerun``, ``self.view_state``...)."""

    # -- re-run with other settings --------------------------------------------------------------
    def run(
        self, overrides: dict[str, str] | None = None, *, compare: bool = False
    ) -> PlacementTrace | None:
        """Trace the builder again with the panel's settings; on failure keep the last result.

        What was on screen before becomes "the previous run".

        Args:
            overrides: ``{op: device}`` requests merged into the panel's ``overrides`` option,
                and kept for the re-runs after.
            compare: Show the comparison with the previous run at once.

        Returns:
            The new trace, or ``None`` when the run failed (the panel shows why) or the panel
            shows a loaded trace, which has no builder to re-run.
        """
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
        """Show the comparison of ``trace`` with the trace on screen, as after a re-run.

        The compare toggle then leads back to the single view; the next re-run compares with
        the run before it again.

        Args:
            trace: The placement shown as ``a``; the trace on screen is ``b``.
            label: The name of ``a`` on screen.
        """
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
        for view in (
            self.chips,
            self.findings_view,
            self.memory_view,
            self._figure_box,
            self.table,
            self.details,
        ):
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

    # -- try the picked finding's fix (issue 33) ------------------------------------------------
    def _render_try_fix(self, index: int) -> None:
        """Offer "Try this fix" for a picked finding with a fix the builder can run."""
        frame = self._findings_frame
        fix = frame["fix"].iloc[index] if frame is not None and 0 <= index < len(frame) else None
        offered = bool(self.builder is not None and fix and fix.get("overrides"))
        self.try_fix_button.layout.display = None if offered else "none"
        if offered:
            self.try_fix_button.tooltip = f"Run again with this fix and compare: {fix['edit']}"

    def _on_try_fix_click(self, _button: widgets.Button) -> None:
        self.try_fix()

    def try_fix(self, index: int | None = None) -> FixEffect | None:
        """Run the builder again as it is and with the fix of finding ``index`` (the picked one
        by default), and show the two runs compared, with what the fix changed, measured.

        Returns:
            The effect (``trace.try_fix``'s), or ``None`` when there is nothing to try or the
            run failed (the panel shows why).
        """
        index = self.findings_view.selected if index is None else index
        frame = self._findings_frame
        if self.builder is None or frame is None or not 0 <= index < len(frame):
            self._show_message("Pick a finding with a fix first.", kind="warning")
            return None
        row = frame.iloc[index]
        return self._run_fixes(
            self.try_fix_button,
            "Try this fix",
            lambda recipe: try_fix(self.trace, row, recipe=recipe),
            ("without the fix", "with the fix"),
        )

    def _on_suggest_click(self, _button: widgets.Button) -> None:
        self.suggest_placement()

    def suggest_placement(self) -> FixEffect | None:
        """Try every finding's fix, apply the ones that verified together, and show the code
        as it is (TensorFlow's placer's choice) compared with the suggested placement.

        Returns:
            The combined effect (``trace.suggest_placement``'s, each fix's own in ``trials``),
            or ``None`` when the panel has no code to run or the run failed (it shows why).
        """
        if self.builder is None:
            self._show_message("A loaded trace has no code to run again.", kind="warning")
            return None
        return self._run_fixes(
            self.suggest_button,
            "Suggest a placement",
            lambda recipe: suggest_placement(self.trace, recipe=recipe),
            ("TensorFlow's placer", "suggested"),
        )

    def _run_fixes(
        self,
        button: widgets.Button,
        title: str,
        run: Callable[[Recipe], FixEffect],
        labels: tuple[str, str],
    ) -> FixEffect | None:
        """Run the builder with a fix (``run``), show the two runs compared (``labels``) and
        the measured effect; on failure keep what is on screen and say why."""
        recipe = Recipe(self.builder, tuple(self.args), self._options_from_controls())
        description = button.description
        button.disabled, button.description = True, "Trying..."
        try:
            effect = run(recipe)
        except Exception as exc:  # a failed try keeps what is on screen, and says why
            self._show_error(exc)
            return None
        finally:
            button.disabled, button.description = False, description
        self.fix_effect = effect
        verdict = "verified" if effect.verified else "not verified"
        copies_a, copies_b = effect.copies
        tried = [t for t in effect.trials if t.verified]
        fixes = f" ({len(tried)} of {len(effect.trials)} fixes verified)" if effect.trials else ""
        text = (
            f"{title}: {verdict}{fixes}: {effect.why}. Copies {copies_a} -> {copies_b}; ops "
            f"moved: {', '.join(effect.moved) or 'none'}."
        )
        if effect.overrides:  # nothing verified: the code as it is stays on screen
            self.options = recipe.with_options(overrides=effect.overrides)
            self.error = ""
            self._previous = effect.before
            self._compare_labels = labels
            self.compare_toggle.disabled = False
            self.show_trace(effect.after)
            if not self.compare_toggle.value:
                self.compare_toggle.value = True  # the observer draws the comparison
        self._show_message(text, kind="info" if effect.verified else "warning")
        return effect

    # -- as on a machine with N GPUs ----------------------------------------------------------
    def _predicted(self, trace: PlacementTrace) -> PlacementTrace:
        from .._tracing.predict import predict_placement

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

    def _has_trace(self) -> bool:
        return getattr(self, "trace", None) is not None

    def _on_rerun_click(self, _button: widgets.Button) -> None:
        self.run()

    # -- save ----------------------------------------------------------------------------------
    def save(self, folder: str | os.PathLike = ".") -> str:
        """Write the trace on screen to a new ``.tfplace`` file; the Save button calls it.

        Args:
            folder: Where to write it: the notebook's folder by default (a kernel runs there).
                An existing file is never overwritten: the name is a new one.

        Returns:
            The path written.
        """
        trace = self.trace
        return write_new_file(
            _new_file_base(folder, trace), ".tfplace", lambda p: trace.save(p, overwrite=False)
        )

    def export_html(self, folder: str | os.PathLike = ".") -> str:
        """Write the trace on screen as a self-contained HTML report with the current search;
        the Export HTML button calls it.

        Args:
            folder: Where to write it, as in ``save``; the name is a new one.

        Returns:
            The path written.
        """
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

    # -- teardown ------------------------------------------------------------------------------
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
        self.findings_view.items, self._findings_frame = [], None
        self.memory_view.items = []
        self.type_filter.options = ()
        self.trace = self.traced = None
        self.builder = None
        self.args = ()
        self.options = {}
        self.view_state.clear()
        self._log_lines = []
        for name, value in list(vars(self).items()):  # the closed controls, table, views...
            if isinstance(value, widgets.Widget):
                setattr(self, name, None)


def _move_targets(trace: PlacementTrace, op: str, devices: list[str]) -> list[str]:
    """The devices ``op`` can be asked to move to: those of the run other than its own; none
    for an op TensorFlow's runtime added (``_Send``, ``_Recv``...: not in the built graph, so
    ``overrides`` cannot ask for them) or an op not in ``trace``."""
    rows = trace.ops[trace.ops["op"] == op] if op else trace.ops.iloc[0:0]
    if rows.empty or (rows["how"] == "runtime").all():
        return []
    placed = set(rows["device"])
    return [d for d in devices if d not in placed]


def _new_file_base(folder: str | os.PathLike, trace: PlacementTrace) -> str:
    """A file name in ``folder`` from the trace's source and the time, without its suffix;
    ``write_new_file`` adds ``-2``... when it is taken, and never overwrites."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", os.path.basename(trace.source or "trace")).strip("._")
    return os.path.join(os.fspath(folder), f"{stem or 'trace'}-{time.strftime('%Y%m%d-%H%M%S')}")
