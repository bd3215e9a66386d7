"""Files written by older versions, read as a trace made now: the columns added since (issue 15's
``cross_task``, ``model.columns.OPS_ADDED_LATER``), and which saved findings are kept."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..model.columns import OPS_ADDED_LATER
from ..model.devices import crosses_tasks


def add_missing_columns(frames: dict[str, pd.DataFrame], predicted: bool) -> None:
    """Add (in place) the columns a file written before them lacks, so that every loaded trace
    has the columns of a fresh one: ``transfers.cross_task`` computed (a prediction's as well),
    each of ``OPS_ADDED_LATER`` missing on every row (a prediction has none of them)."""
    transfers, ops = frames["transfers"], frames["ops"]
    if "cross_task" not in transfers.columns:
        sources, targets = transfers["src_device"].tolist(), transfers["dst_device"].tolist()
        transfers["cross_task"] = crosses_tasks(sources, targets)  # as sources.frames makes it
    for column in OPS_ADDED_LATER:
        if column not in ops.columns and not predicted:
            ops[column] = pd.array([pd.NA] * len(ops), dtype="string")


def written_here(manifest: dict[str, Any]) -> bool:
    """Was the file written by this version of tfplace_widget? Another version's findings are
    found again (from ``facts.json``, on first use): the analyses change between versions, the
    placement they read does not."""
    from ..model.version import __version__

    return manifest.get("written_by") == f"tfplace_widget {__version__}"


def current_findings(findings: pd.DataFrame) -> pd.DataFrame | None:
    """Saved findings to keep, or None to find them again: so are those saved without the
    ``predicted`` column (issue 24), as which are predictions is not in them, and those saved
    without ``fix`` (issue 33)."""
    return findings if {"predicted", "fix"} <= set(findings) else None
