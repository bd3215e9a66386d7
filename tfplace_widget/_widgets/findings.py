"""The panel's findings section: one clickable line per finding, above the table.

A small anywidget: the kernel sends the findings as plain rows (``items``); a click sets
``selected`` (the finding's index, ``-1`` for none), which the panel turns into a filter on the
finding's ops. With no findings it is one line, "Findings: none", collapsed to that count; a
click on the title collapses or opens the list. Findings predicted for a machine with a GPU
that the trace did not run on come after the measured ones, under a header of their own (each
item's ``group``: ``analyses.findings.finding_groups``), so that none reads as what ran. Messages are drawn with ``textContent``: op names
are never parsed as HTML. The view never runs TensorFlow: it shows ``trace.findings``.
The browser's side: ``_static/findings.js`` and ``findings.css``.
"""

from __future__ import annotations

import anywidget
import pandas as pd
import traitlets

from .. import _static as static
from .._rendering.finding_items import finding_items, severity_counts


class FindingsList(anywidget.AnyWidget):
    """The findings of the trace on screen; ``selected`` is the clicked one (``-1``: none)."""

    _esm = static.widget_source("findings.js")
    _css = static.widget_source("findings.css")
    items = traitlets.List(traitlets.Dict()).tag(sync=True)
    counts = traitlets.Unicode("").tag(sync=True)  # "2 high, 1 info"
    selected = traitlets.Int(-1).tag(sync=True)
    expanded = traitlets.Bool(True).tag(sync=True)
    note = traitlets.Unicode("").tag(sync=True)  # instead of the count, e.g. while finding

    def wait(self, note: str) -> None:
        """No findings yet: say why (they are being found after the cell)."""
        with self.hold_sync():
            self.selected, self.items, self.counts, self.expanded = -1, [], "", False
            self.note = note

    def show(self, findings: pd.DataFrame, trace: object = None) -> None:
        """Put ``findings`` (``trace.findings``) on screen, nothing selected; ``trace`` words
        the predicted findings' header (a CPU-only run's, or predict_placement's)."""
        with self.hold_sync():
            self.selected = -1
            self.note = ""
            self.items = finding_items(findings, trace)
            self.counts = severity_counts(findings)
            self.expanded = bool(self.items)
