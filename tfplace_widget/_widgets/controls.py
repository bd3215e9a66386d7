"""Controls that several views share, made one way: the search box and its two toggles."""

from __future__ import annotations

import ipywidgets as widgets

from .._rendering.search import SEARCH_HELP, SEARCH_PLACEHOLDER


def search_controls() -> tuple[widgets.Text, widgets.Checkbox, widgets.Checkbox]:
    """``(search box, regex toggle, match-case toggle)``, as the panel and the comparison
    view show them (substring by default, ``*``/``?`` globs over the whole name, a regex when
    ticked), the rules in the box's tooltip."""
    search = widgets.Text(
        # The description is the box's <label> (ipywidgets ties it to the input): what a screen
        # reader announces, and what a click on the word focuses; the placeholder says how.
        description="search",
        placeholder=SEARCH_PLACEHOLDER,
        tooltip=SEARCH_HELP,
        continuous_update=True,
        style={"description_width": "initial"},
        layout=widgets.Layout(width="360px"),
    )
    search.add_class("tfplace-search")
    regex = widgets.Checkbox(description="regex", indent=False, layout=widgets.Layout(width="auto"))
    case_sensitive = widgets.Checkbox(
        description="match case", indent=False, layout=widgets.Layout(width="auto")
    )
    return search, regex, case_sensitive
