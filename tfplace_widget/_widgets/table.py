"""The op table: a small anywidget that shows one page of rows and reports clicks.

The kernel keeps the whole DataFrame; the browser only ever receives the rows of the current
page (``rows``), like ipydatagrid's streaming grid. Header clicks set ``sort_by`` /
``sort_ascending``, row clicks set ``selected_op`` and ``selected_device`` (an op such as
``_SOURCE`` runs once per device: a pick is of one op on one device, ``row_devices`` gives each
row's device), the pager sets ``page``: the panel observes these traits and answers with a new
page. The browser's side: ``_static/table.js`` and
``table.css``.

What the table draws beside the rows it is given: each row's device-colour ink for light and
dark themes (``row_inks``, from ``row_colors``: WCAG AA text, see ``colors.ink_colors``), the
short form of each requested device (``requested_short``: ``CPU:0``, the whole name on hover)
and how the columns share the width (``widths``, ``html_parts.TABLE_WIDTHS``). Keyboard use:
see ``_static/table.js``.
"""

from __future__ import annotations

import anywidget
import traitlets

from .. import _static as static
from .._model.devices import short_device
from .._rendering.colors import chip_css, color_class, ink_colors
from .._rendering.html_parts import NUMBER_COLUMNS, TABLE_WIDTHS

_CSS = static.text("table.css")  # and chip_css(): one sheet, see cover_colors


class OpTable(anywidget.AnyWidget):
    """One page of the op table; the panel fills ``rows`` and listens to the user's clicks."""

    _esm = static.widget_source("table.js")
    _css = _CSS + chip_css()
    columns = traitlets.List(traitlets.Unicode()).tag(sync=True)
    labels = traitlets.List(traitlets.Unicode()).tag(sync=True)
    rows = traitlets.List(traitlets.List()).tag(sync=True)
    row_colors = traitlets.List(traitlets.Unicode()).tag(sync=True)
    total = traitlets.Int(0).tag(sync=True)
    page = traitlets.Int(0).tag(sync=True)
    page_size = traitlets.Int(50).tag(sync=True)
    sort_by = traitlets.Unicode("start_us").tag(sync=True)
    sort_ascending = traitlets.Bool(True).tag(sync=True)
    selected_op = traitlets.Unicode("").tag(sync=True)
    selected_device = traitlets.Unicode("").tag(sync=True)  # the picked row's (whole) device
    row_devices = traitlets.List(traitlets.Unicode()).tag(sync=True)  # each row's whole device
    row_inks = traitlets.List(traitlets.List(traitlets.Unicode())).tag(sync=True)
    requested_short = traitlets.List(traitlets.Unicode()).tag(sync=True)
    widths = traitlets.Dict(TABLE_WIDTHS).tag(sync=True)
    numbers = traitlets.List(traitlets.Unicode(), list(NUMBER_COLUMNS)).tag(
        sync=True
    )  # right-aligned

    @traitlets.observe("row_colors")
    def _inks(self, change: dict) -> None:
        self.row_inks = [list(ink_colors(color)) for color in change["new"]]

    @traitlets.observe("rows", "columns")
    def _requested(self, change: dict) -> None:
        if "requested_device" not in self.columns:
            self.requested_short = []
            return
        at = self.columns.index("requested_device")
        self.requested_short = [
            short_device(str(row[at])) or str(row[at]) if len(row) > at else "" for row in self.rows
        ]

    def cover_colors(self, colors: list[str]) -> None:
        """Make sure the style sheet paints chips of ``colors`` (device colours past the first
        ``CSS_COLORS``): the sheet is shared by every table of the page, so the new one has a
        rule for every colour the kernel has given out."""
        if any(f".{color_class(color)}." not in self._css for color in colors):
            self._css = _CSS + chip_css()
