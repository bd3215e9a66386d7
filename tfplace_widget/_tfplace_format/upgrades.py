"""Files written by older versions, read as a trace made now: the columns added since (issue 15's
``cross_task``, ``model.columns.OPS_ADDED_LATER``), and which saved findings are kept."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._model.columns import OPS_ADDED_LATER, OPS_ADDED_LATER_BYTES, OPS_COLUMNS
from .._model.devices import crosses_tasks
from .._model.memory import TEMPORARY


def add_missing_columns(frames: dict[str, pd.DataFrame], predicted: bool) -> None:
    """Add (in ``frames``) the columns a file written before them lacks, so that every loaded trace
    has the columns of a fresh one: ``transfers.cross_task`` computed (a prediction's as well),
    each of ``OPS_ADDED_LATER`` missing on every row (a prediction has none of them)."""
    transfers, ops = frames["transfers"], frames["ops"]
    if "cross_task" not in transfers.columns:
        sources, targets = transfers["src_device"].tolist(), transfers["dst_device"].tolist()
        transfers["cross_task"] = crosses_tasks(sources, targets)  # as sources.frames makes it
    missing = [c for c in OPS_ADDED_LATER if c not in ops.columns and not predicted]
    for column in missing:
        kind = "Int64" if column in OPS_ADDED_LATER_BYTES else "string"
        ops[column] = pd.array([pd.NA] * len(ops), dtype=kind)
    if missing:  # where a fresh trace has them (a file may lack one added before another)
        order = [c for c in OPS_COLUMNS if c in ops.columns]
        frames["ops"] = ops[order + [c for c in ops.columns if c not in order]]


def add_memory_kind(frames: dict[str, pd.DataFrame]) -> None:
    """A memory frame saved before ``kind`` (issue 34's persistent rows): every row its step's
    own, "temporary"; one saved before ``variable``: no row names its variable (None)."""
    memory = frames.get("memory")
    if memory is not None and "kind" not in memory.columns:
        memory = memory.assign(kind=np.full(len(memory), TEMPORARY, dtype=object))
    if memory is not None and "variable" not in memory.columns:
        memory = memory.assign(variable=pd.Series([None] * len(memory), dtype=object))
    if memory is not None:
        frames["memory"] = memory


def written_here(manifest: dict[str, Any]) -> bool:
    """Was the file written by this version of tfplace_widget? Another version's findings are
    found again (from ``facts.json``, on first use): the analyses change between versions, the
    placement they read does not."""
    from .._model.version import __version__

    return manifest.get("written_by") == f"tfplace_widget {__version__}"


def current_findings(findings: pd.DataFrame) -> pd.DataFrame | None:
    """Saved findings to keep, or None to find them again: so are those saved without the
    ``predicted`` column (issue 24), as which are predictions is not in them, and those saved
    without ``fix`` (issue 33)."""
    return findings if {"predicted", "fix"} <= set(findings) else None
