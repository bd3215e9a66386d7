"""Every widget under a widget: what closing a panel or a view must close.

One definition for the panel and the comparison view; no TensorFlow, no state.
"""

from __future__ import annotations

import ipywidgets as widgets

_SHARED_WIDGET_TRAITS = {"_plotly_bundle"}  # widgets a panel points at but does not own


def widget_tree(root: widgets.Widget) -> list[widgets.Widget]:
    """``root`` and every widget under it (children, layouts, styles, the timeline), parents
    first.

    The kernel's one plotly.js holder, which every timeline points at (``_plotly_bundle``), is
    shared, not the panel's: it is left out.
    """
    found: dict[int, widgets.Widget] = {}
    stack = [root]
    while stack:
        widget = stack.pop()
        if id(widget) in found:
            continue
        found[id(widget)] = widget
        for name in widget.keys:
            if name in _SHARED_WIDGET_TRAITS:
                continue
            value = getattr(widget, name, None)
            for item in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(item, widgets.Widget):
                    stack.append(item)
    return list(found.values())
