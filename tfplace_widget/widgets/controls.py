"""Controls that several views share, made one way: the search box and its two toggles."""

from __future__ import annotations

import ipywidgets as widgets

from ..rendering.search import SEARCH_HELP, SEARCH_PLACEHOLDER


def search_controls() -> tuple[widgets.Text, widgets.Checkbox, widgets.Checkbox]:
    """``(search box, regex toggle, match-case toggle)``, as the panel and the comparison
    view show them (substring by default, ``*``/``?`` globs over the whole name, a regex when
    ticked), the rules in the box's tooltip."""
    search = widgets.Text(
        placeholder=SEARCH_PLACEHOLDER,
        tooltip=SEARCH_HELP,
        continuous_update=True,
        layout=widgets.Layout(width="320px"),
    )
    regex = widgets.Checkbox(description="regex", indent=False, layout=widgets.Layout(width="auto"))
    case_sensitive = widgets.Checkbox(
        description="match case", indent=False, layout=widgets.Layout(width="auto")
    )
    return search, regex, case_sensitive
