"""The findings list's items: what the browser draws for each finding, the same for the
panel's list (``widgets.findings``) and the HTML report's (``export.html``), both drawn by
``_static/findings.js``."""

from __future__ import annotations

from typing import Any

import pandas as pd

from .._analyses.findings import finding_groups


def finding_items(findings: pd.DataFrame, trace: object = None) -> list[dict]:
    """One plain dict per finding, in the frame's order (``selected`` is a row of it), what
    the browser draws (``ops`` stay in the kernel): ``predicted`` and ``group``, the header
    the browser draws above the first finding of each group ("" for measured findings alone),
    and ``edit``, the change its fix asks of the user's code (:func:`finding_edit`).

    Args:
        findings: ``trace.findings`` (or any frame of its columns).
        trace: The trace they are of; it words the predicted findings' header.
    """
    group_of = {
        index: header for header, rows in finding_groups(findings, trace) for index in rows.index
    }
    predicted = findings["predicted"] if "predicted" in findings else [False] * len(findings)
    fixes = findings["fix"] if "fix" in findings else [None] * len(findings)
    return [
        {
            "kind": str(kind),
            "severity": str(severity),
            "message": str(message),
            "count": len(ops),
            "predicted": bool(marked),
            "group": group_of.get(index, ""),
            "edit": finding_edit(fix),
        }
        for index, kind, severity, message, ops, marked, fix in zip(
            findings.index,
            findings["kind"],
            findings["severity"],
            findings["message"],
            findings["ops"],
            predicted,
            fixes,
            strict=True,
        )
    ]


def finding_edit(fix: Any) -> str:
    """The line of code a finding's ``fix`` asks the user to change, as the findings lists
    show it under the message ("Edit: wrap ... (train.py:42 in step) in ..."); "" for a
    finding without one (no fix, or ``no_fix``: nothing in the user's code cures it)."""
    edit = fix.get("edit") if isinstance(fix, dict) else None
    return f"Edit: {edit}" if edit else ""


def severity_counts(findings: pd.DataFrame) -> str:
    """``"2 high, 1 info"``: the findings per severity, worst first, zeros left out."""
    counts = findings["severity"].astype(str).value_counts()
    order = ("high", "medium", "info")
    return ", ".join(f"{int(counts[s])} {s}" for s in order if counts.get(s, 0))
