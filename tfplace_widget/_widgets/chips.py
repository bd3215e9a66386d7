"""The device chips above the table: one per device, in its colour; a click shows only its ops.

On one machine they are one row. Across a cluster they are grouped per task
(``/job:ps/task:0``): a task chip filters on all of the task's devices, and a fold button
collapses the group (its chips hidden, its timeline lanes folded into one). The chips hold no
filter state of their own: the panel owns it and tells them what to show pressed.

A chip is a button: Tab reaches it, Enter or Space presses it, ``chips.css`` rings it when
focused. ipywidgets' toggle buttons set no ``aria-pressed``, so a chip's tooltip (its title,
which screen readers read as its description) says whether it is pressed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

import ipywidgets as widgets
from ipywidgets.widgets.widget_bool import ToggleButtonStyle

from .._analyses.summary import DeviceSummary, TaskSummary, format_us
from .._model.devices import name_in_task, short_device
from .._rendering.colors import color_class, device_color
from .tree import widget_tree

FOLDED_ICON, OPEN_ICON = "caret-right", "caret-down"


class DeviceChips(widgets.Box):
    """Device chips, grouped by task when the trace spans several tasks.

    ``on_filter(devices, pressed)`` is called when a chip is clicked (a task chip passes all of
    its devices); ``on_fold(folded_tasks)`` when a task's group is collapsed or opened.
    """

    def __init__(
        self,
        on_filter: Callable[[tuple[str, ...], bool], None],
        on_fold: Callable[[frozenset[str]], None],
    ) -> None:
        super().__init__(layout=widgets.Layout(flex_flow="row wrap", align_items="center"))
        self.add_class("tfplace-chips")
        self._on_filter = on_filter
        self._on_fold = on_fold
        self.chip_of: dict[str, widgets.ToggleButton] = {}  # device -> its chip
        self.task_chip_of: dict[str, widgets.ToggleButton] = {}  # task -> its chip
        self.fold_of: dict[str, widgets.ToggleButton] = {}  # task -> its fold button
        self._groups: dict[str, widgets.HBox] = {}
        self._members: dict[str, tuple[str, ...]] = {}
        self.folded: frozenset[str] = frozenset()
        self._syncing = False

    @property
    def grouped(self) -> bool:
        """True when the chips are grouped by task (the trace spans several tasks)."""
        return bool(self.task_chip_of)

    def show(
        self,
        devices: list[DeviceSummary],
        tasks: list[TaskSummary],
        pressed: Collection[str],
    ) -> list[str]:
        """Make the chips of a trace (``pressed``: devices the filter shows), grouped by
        ``tasks`` when given (a trace across a cluster); tasks folded before stay folded. Returns the chips' colours, for the table's style sheet."""
        old = self.children
        # One layout and one style for all the chips of a trace: three widgets per chip made
        # thousands of devices take tens of seconds to show.
        self._look = dict(layout=widgets.Layout(width="auto"), style=ToggleButtonStyle())
        summary_of = {s.device: s for s in devices}
        self.chip_of, self.task_chip_of, self.fold_of, self._groups = {}, {}, {}, {}
        self._members = {t.task: t.devices for t in tasks}
        if tasks:
            self.folded = self.folded & set(self._members)
            self.layout.flex_flow = "column"
            self.layout.align_items = "stretch"
            self.children = [self._group(t, [summary_of[d] for d in t.devices]) for t in tasks]
        else:
            self.folded = frozenset()
            self.layout.flex_flow = "row wrap"
            self.layout.align_items = "center"
            self.children = [self._chip(s, short_device(s.device)) for s in devices]
        self.sync(pressed)
        for widget in old:  # close them (and their layouts and styles): re-runs do not leak
            for part in widget_tree(widget):
                part.close()
        return [device_color(s.device) for s in devices]

    def sync(self, pressed: Collection[str]) -> None:
        """Show the chips of ``pressed`` devices pressed, and a task's chip pressed when all of
        its devices are, without calling back."""
        self._syncing = True
        try:
            for device, chip in self.chip_of.items():
                chip.value = device in pressed
                chip.tooltip = _chip_tooltip(device, "its ops", chip.value)
            for task, chip in self.task_chip_of.items():
                chip.value = all(d in pressed for d in self._members[task])
                chip.tooltip = _chip_tooltip(task, "the ops of its devices", chip.value)
        finally:
            self._syncing = False

    def fold(self, tasks: Iterable[str]) -> None:
        """Collapse exactly ``tasks`` (the others open), as clicking their fold buttons does."""
        wanted = frozenset(tasks) & set(self._members)
        for task, button in self.fold_of.items():
            button.value = task in wanted

    # -- construction -------------------------------------------------------------------------
    def _chip(self, summary: DeviceSummary, name: str) -> widgets.ToggleButton:
        chip = widgets.ToggleButton(
            description=f"{name} · {summary.ops:,} ops · {format_us(summary.busy_us)} busy",
            tooltip=f"{summary.device}: click to show only its ops",
            **self._look,
        )
        chip.add_class("tfplace-chip")
        chip.add_class(color_class(device_color(summary.device)))
        chip.device = summary.device
        chip.observe(self._on_chip, "value")
        self.chip_of[summary.device] = chip
        return chip

    def _group(self, task: TaskSummary, devices: list[DeviceSummary]) -> widgets.HBox:
        folded = task.task in self.folded
        fold = widgets.ToggleButton(
            value=folded,
            icon=FOLDED_ICON if folded else OPEN_ICON,
            tooltip=f"collapse {task.task}: hide its chips, fold its timeline lanes into one",
            layout=widgets.Layout(width="32px", padding="0"),
        )
        fold.add_class("tfplace-fold")
        fold.task = task.task
        fold.observe(self._on_fold_click, "value")
        count = len(task.devices)
        chip = widgets.ToggleButton(
            description=(
                f"{task.task} · {count:,} device{'s' if count != 1 else ''} · {task.ops:,} ops · "
                f"{format_us(task.busy_us)} busy"
            ),
            tooltip=f"{task.task}: click to show only the ops of its devices",
            layout=widgets.Layout(width="auto"),
        )
        chip.add_class("tfplace-task")
        chip.task = task.task
        chip.observe(self._on_task_chip, "value")
        self.task_chip_of[task.task] = chip
        self.fold_of[task.task] = fold
        chips = widgets.HBox(
            # Inside its group a chip needs no task: "CPU:0", not "/job:ps/task:0/CPU:0".
            [self._chip(s, name_in_task(s.device)) for s in devices],
            layout=widgets.Layout(
                flex_flow="row wrap", align_items="center", display="none" if folded else ""
            ),
        )
        group = widgets.HBox(
            [fold, chip, chips], layout=widgets.Layout(flex_flow="row wrap", align_items="center")
        )
        group.add_class("tfplace-task-group")
        self._groups[task.task] = group
        return group

    # -- clicks -------------------------------------------------------------------------------
    def _on_chip(self, change: dict) -> None:
        chip = change["owner"]
        chip.tooltip = _chip_tooltip(chip.device, "its ops", change["new"])
        if not self._syncing:
            self._on_filter((change["owner"].device,), change["new"])

    def _on_task_chip(self, change: dict) -> None:
        chip = change["owner"]
        chip.tooltip = _chip_tooltip(chip.task, "the ops of its devices", change["new"])
        if not self._syncing:
            self._on_filter(self._members[change["owner"].task], change["new"])

    def _on_fold_click(self, change: dict) -> None:
        task = change["owner"].task
        change["owner"].icon = FOLDED_ICON if change["new"] else OPEN_ICON
        self._groups[task].children[2].layout.display = "none" if change["new"] else ""
        self.folded = (self.folded | {task}) if change["new"] else (self.folded - {task})
        self._on_fold(self.folded)


def _chip_tooltip(name: str, ops: str, pressed: bool) -> str:
    """What a chip's title says: the whole name, and what a press does (or did)."""
    if pressed:
        return f"{name}: pressed, showing {ops}; press again to show every op"
    return f"{name}: click to show only {ops}"
