"""How a trace was made: the code, its arguments and the options of ``trace_placement``, and
the resources its calls handed to functions (TF2 code: its variables, whose values ``try_fix``
keeps and puts back), kept on the trace in memory only (never in a ``.tfplace`` file), so that a
fix can be tried by running the same code again."""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._model.trace import PlacementTrace
from .user_state import Handed

# trace -> Recipe, beside the trace rather than on it: never saved, copied or pickled with it
# (the code is often a closure), and gone with the trace.
_RECIPES: weakref.WeakKeyDictionary[PlacementTrace, Recipe] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Recipe:
    """``trace_placement(fn, *args, **options)``, and the resources its calls handed to
    functions (``handed``, by the handle's identity: TF2 code's variables, iterators...; a
    graph builder's steps run in a fresh graph each trace, and hand none)."""

    fn: Any
    args: tuple
    options: dict[str, Any] = field(default_factory=dict)
    handed: Mapping[int, Handed] = field(default_factory=dict)

    def with_options(self, **changes: Any) -> dict[str, Any]:
        """The options with ``changes``; ``overrides`` are merged into the recipe's own."""
        options = {**self.options, **{k: v for k, v in changes.items() if k != "overrides"}}
        if "overrides" in changes:
            options["overrides"] = {**(self.options.get("overrides") or {}), **changes["overrides"]}
        return options


def remember(
    trace: PlacementTrace,
    fn: Any,
    args: tuple,
    options: Mapping[str, Any],
    handed: Mapping[int, Handed] | None = None,
) -> None:
    """Keep beside ``trace`` how it was made; ``handed``: the resources its calls handed to
    functions."""
    _RECIPES[trace] = Recipe(fn, tuple(args), dict(options), dict(handed or {}))


def recipe_or_none(trace: PlacementTrace) -> Recipe | None:
    """How ``trace`` was made, when this process made it."""
    return _RECIPES.get(trace)


def recipe_of(trace: PlacementTrace, what: str) -> Recipe:
    """How ``trace`` was made, or a ``ValueError`` saying why ``what`` cannot run it again."""
    recipe = _RECIPES.get(trace)
    if recipe is None:
        made = (
            "was predicted by predict_placement from a trace with no code"
            if trace.predicted
            else "was not made by trace_placement in this process (loaded from a .tfplace "
            "file, read from TensorFlow's records, or made elsewhere)"
        )
        raise ValueError(
            f"{what} runs the traced code again, and this trace {made}: it has no code to "
            "re-run (a .tfplace file keeps the placement, never the code). Trace the code in "
            "this process with trace_placement(fn, ...), then call it on that trace."
        )
    return recipe
