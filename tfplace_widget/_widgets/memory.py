"""The panel's memory peaks: per device, its peak over the step and the ops that hold it.

A small anywidget, drawn by ``_static/memory.js`` (the HTML report runs the same file): the
kernel sends ``rendering.memory_lane.memory_items`` (plain rows); a click on an op sets
``picked_op`` and ``picked_device``, which the panel turns into a pick of that op (its row,
its bar, its details: why it is on that device). Nothing is drawn for a trace without
allocator records.
"""

from __future__ import annotations

import anywidget
import traitlets

from .. import _static as static
from .._rendering.memory_lane import memory_items


class MemoryPeaks(anywidget.AnyWidget):
    """Each device's memory peak; ``picked_op``/``picked_device`` are the clicked op."""

    _esm = static.widget_source("memory.js")
    _css = static.widget_source("memory.css")
    items = traitlets.List(traitlets.Dict()).tag(sync=True)
    picked_op = traitlets.Unicode("").tag(sync=True)
    picked_device = traitlets.Unicode("").tag(sync=True)

    def show(self, trace: object) -> None:
        """Put ``trace``'s memory peaks on screen (none: nothing drawn), nothing picked."""
        with self.hold_sync():
            self.picked_op = self.picked_device = ""
            self.items = memory_items(trace)
