"""Moved to :mod:`tfplace_widget.widgets.panel`; this import path stays for code and notebooks that use it."""

from .widgets.panel import (  # noqa: F401
    FINDINGS_LATER_OPS,
    MAX_CPUS,
    MAX_GPUS,
    MAX_LOG_LINES,
    PlacementPanel,
    show_placement,
)

__all__ = [
    "FINDINGS_LATER_OPS",
    "MAX_CPUS",
    "MAX_GPUS",
    "MAX_LOG_LINES",
    "PlacementPanel",
    "show_placement",
]
