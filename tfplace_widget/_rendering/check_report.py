"""The text of a placement check: what ``PlacementAssertionError`` says and the ``tfplace``
pytest plugin prints in a failed test's report.

A first line that says what failed and against what (the trace, or a prediction for a GPU
machine); each check, ``ok`` or ``FAIL``; then the ops not where the check wants them (op,
type, device, expected, the user's source line when the trace has it, reason), the copies
over ``max_copies`` and the CPU fallbacks' findings. Plain text, the text report's columns.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from .text_report import MAX_OFFENDERS, TextOutput, expectation_rows, status_style

if TYPE_CHECKING:  # pragma: no cover
    from .._analyses.checks import PlacementCheck


def check_headline(check: PlacementCheck) -> str:
    """One line: what failed (or that all held) and what was checked."""
    failed = []
    for outcome in check.failed_expectations:
        count = len(outcome.wrong)
        failed.append(
            f"{count:,} op{'s' if count != 1 else ''} not on {outcome.expectation.device} "
            f"({outcome.expectation.text})"
        )
    if check.too_many_copies:
        assert check.copies is not None
        failed.append(f"{_copies(len(check.copies))}, more than max_copies={check.max_copies}")
    if check.fallback_count:
        count = check.fallback_count
        failed.append(f"{count} CPU fallback{'s' if count != 1 else ''} (allow_cpu_fallback=False)")
    against = f"checked against {check.basis}"
    if not failed:
        return f"Placement as expected, {against}."
    return f"{'; '.join(failed)}; {against}."


def check_report(check: PlacementCheck) -> str:
    """The whole text, without colours (an exception message, a pytest report section)."""
    stream = io.StringIO()
    out = TextOutput(stream, color="never")
    out.line(check_headline(check))
    if check.predicted:
        out.line(check.note)
    out.line("")
    out.table(_check_rows(check), ["", "check", "found"], styles={0: status_style})
    from .._analyses.summary import short_names

    short = short_names(check.checked.devices)
    offending = check.offending()
    if not offending.empty:
        out.line("")
        out.heading("Ops not where expected")
        listed = offending.head(MAX_OFFENDERS)
        columns = list(listed.columns)
        columns.append(columns.pop(columns.index("reason")))  # the long one last
        rows = [
            [
                _text(short.get(str(v), v) if c == "device" else v)
                for c, v in zip(columns, r, strict=True)
            ]
            for r in listed[columns].itertuples(index=False)
        ]
        out.table(rows, columns)
        _more(out, len(offending), len(listed))
    if check.too_many_copies:
        assert check.copies is not None
        out.line("")
        out.heading(
            f"Copies between devices ({len(check.copies):,}, max_copies={check.max_copies})"
        )
        listed = check.copies.head(MAX_OFFENDERS)
        rows = [
            [
                str(r.tensor),
                short.get(str(r.src_device), str(r.src_device)),
                short.get(str(r.dst_device), str(r.dst_device)),
                _text(r.bytes, "{:,}"),
                str(r.reason),
            ]
            for r in listed.itertuples(index=False)
        ]
        out.table(rows, ["tensor", "from", "to", "bytes", "reason"], right=(3,))
        _more(out, len(check.copies), len(listed))
    if check.fallback_count:
        assert check.fallbacks is not None
        out.line("")
        out.heading("CPU fallbacks")
        for message in check.fallbacks["message"]:
            out.line(f"  - {message}")
    return stream.getvalue().rstrip("\n")


def _check_rows(check: PlacementCheck) -> list[list[str]]:
    rows = expectation_rows(check.outcomes)
    if check.max_copies is not None and check.copies is not None:
        count = len(check.copies)
        status = "FAIL" if check.too_many_copies else "ok"
        rows.append(
            [
                status,
                f"max_copies={check.max_copies}",
                _copies(count),
            ]
        )
    if check.fallbacks is not None:
        count = check.fallback_count
        ops = len({op for ops in check.fallbacks["ops"] for op in ops})
        found = (
            f"{count} finding{'s' if count != 1 else ''} ({ops} op{'s' if ops != 1 else ''})"
            if count
            else "none"
        )
        rows.append(["FAIL" if count else "ok", "allow_cpu_fallback=False", found])
    return rows


def _copies(count: int) -> str:
    return f"{count:,} cop{'ies' if count != 1 else 'y'}"


def _text(value: Any, number: str = "") -> str:
    """A cell: "" for a missing value, ``number`` formatting for a number."""
    try:
        import pandas as pd

        if pd.isna(value):
            return ""
    except (TypeError, ValueError):
        pass
    return number.format(int(value)) if number else str(value)


def _more(out: TextOutput, total: int, listed: int) -> None:
    if total > listed:
        out.line(f"  ... and {total - listed:,} more")
