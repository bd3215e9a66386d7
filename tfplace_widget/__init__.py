"""tfplace_widget: see where TensorFlow placed every op, why, and when it ran.

Thin on purpose: TensorFlow, pandas and plotly load on first use, so ``%load_ext`` is instant.
"""

from __future__ import annotations

from importlib import metadata as _metadata
from typing import TYPE_CHECKING, Any

from .errors import TraceError

if TYPE_CHECKING:  # pragma: no cover
    from .panel import PlacementPanel, show_placement
    from .trace import PlacementTrace
    from .tracer import trace_placement

__all__ = [
    "PlacementPanel",
    "PlacementTrace",
    "TraceError",
    "load_ipython_extension",
    "show_placement",
    "trace_placement",
    "unload_ipython_extension",
]
try:  # one source of truth: the installed package's metadata (pyproject.toml)
    __version__ = _metadata.version("tfplace_widget")
except _metadata.PackageNotFoundError:  # imported from a source tree that is not installed
    __version__ = "0+unknown"

_LAZY = {
    "trace_placement": ("tracer", "trace_placement"),
    "PlacementTrace": ("trace", "PlacementTrace"),
    "show_placement": ("panel", "show_placement"),
    "PlacementPanel": ("panel", "PlacementPanel"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(f".{module}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tfplace_widget' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext tfplace_widget``: add ``show_placement``, ``trace_placement`` and ``%%tfplace``."""
    from .magics import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext tfplace_widget``: remove what loading added."""
    from .magics import unload

    unload(ipython)
