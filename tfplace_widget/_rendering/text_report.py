"""The text report: what ``tfplace show`` and ``tfplace run`` print, as plain text.

What the panel's header, findings and table say (devices, how the ops were placed, transfers,
the worst findings, the matching ops) and the ``--expect-device`` results, in aligned columns,
with ANSI styles only on a terminal. Shared rendering, like the HTML report's parts: the CLI
(:mod:`tfplace_widget._cli`) only decides what to print and where. Only the standard library is
imported at start-up (``tfplace --help`` stays instant); pandas comes with the first trace.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # pragma: no cover
    from .._analyses.expectations import Outcome
    from .._model.trace import PlacementTrace

DEFAULT_LIMIT = 20  # op rows printed by `show`
DEFAULT_FINDINGS = 5  # findings printed
MAX_OFFENDERS = 50  # offending ops listed per failed expectation
_STYLES = {"bold": "1", "dim": "2", "red": "31", "yellow": "33", "green": "32", "cyan": "36"}
# What a name read from a file must not send to a terminal: C0 controls but tab (newline
# too: a name cannot start a line of its own), DEL, C1 controls (ESC and CSI start the
# sequences that move the cursor, clear the screen, set the window title or write the
# clipboard), the bidirectional overrides and isolates (text that reads other than it is),
# and lone surrogates (which no terminal encoding can write).
_UNSAFE = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f"  # C0 but tab, DEL, C1
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidirectional marks and overrides
    "\ud800-\udfff]"  # lone surrogates
)
# The tool's own styles (TextOutput.style, _STYLES), the only escape sequences it writes.
_OWN_STYLE = re.compile("(\033\\[(?:0|(?:1|2|3[1236])(?:;(?:1|2|3[1236]))*)m)")


def printable(text: str, *, keep_styles: bool = False, newlines: bool = False) -> str:
    """``text`` safe to print on a terminal: each unsafe character (``_UNSAFE``) written as
    its escape (``\\x1b``, ``\\u202e``), so that a name from a file shows as what it is and
    cannot drive the terminal. ``keep_styles``: the tool's own SGR styles stay (all other
    escapes do not); ``newlines``: so do line breaks, where a text is several lines."""
    if keep_styles:
        parts = _OWN_STYLE.split(text)
        return "".join(
            part if i % 2 else printable(part, newlines=newlines) for i, part in enumerate(parts)
        )
    if newlines:
        return "\n".join(printable(line) for line in text.split("\n"))
    return _UNSAFE.sub(_escape, text)


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    if code in (0x0A, 0x0D):
        return "\\n" if code == 0x0A else "\\r"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


# Characters of a cell shown in a table's padded columns, and in its last column.
MAX_COLUMN = 80
MAX_LAST_COLUMN = 1000


def cut(text: str, limit: int) -> str:
    """``text``, or its first ``limit - 1`` characters and "…"."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class TextOutput:
    """Plain text to ``stream``, with ANSI styles only when asked or when it is a terminal."""

    def __init__(self, stream: TextIO, color: str = "auto") -> None:
        self.stream = stream
        if color == "auto":
            is_tty = getattr(stream, "isatty", lambda: False)()
            color = "always" if is_tty and not os.environ.get("NO_COLOR") else "never"
        self.color = color == "always"

    def style(self, text: str, *styles: str) -> str:
        if not self.color or not styles or not text:
            return text
        codes = ";".join(_STYLES[s] for s in styles)
        return f"\033[{codes}m{printable(text)}\033[0m"

    def line(self, text: str = "") -> None:
        """One line: its text :func:`printable` (names from a file drive no terminal)."""
        print(printable(text, keep_styles=self.color), file=self.stream)

    def heading(self, text: str) -> None:
        self.line(self.style(text, "bold"))

    def table(
        self,
        rows: list[list[str]],
        header: list[str],
        *,
        right: Sequence[int] = (),
        styles: dict[int, Callable[[str], tuple[str, ...]]] | None = None,
        indent: str = "  ",
    ) -> None:
        """Rows in aligned columns (the last one not padded), under a dimmed header. A cell
        longer than ``MAX_COLUMN`` characters (``MAX_LAST_COLUMN`` in the last column) is cut
        with "…": one long name does not widen every line."""
        last = len(header) - 1
        rows = [
            [cut(str(v), MAX_LAST_COLUMN if i == last else MAX_COLUMN) for i, v in enumerate(r)]
            for r in rows
        ]
        widths = [max(len(str(v)) for v in column) for column in zip(header, *rows, strict=False)]

        def cells(values: list[str], header_row: bool) -> str:
            parts = []
            for index, value in enumerate(values):
                text = str(value)
                if index < last:
                    pad = widths[index] - len(text)
                    text = " " * pad + text if index in right else text + " " * pad
                if header_row:
                    text = self.style(text, "dim")
                elif styles and index in styles:
                    text = self.style(text, *styles[index](str(value)))
                parts.append(text)
            return (indent + "  ".join(parts)).rstrip()

        self.line(cells(header, True))
        for row in rows:
            self.line(cells(row, False))


def status_style(value: str) -> tuple[str, ...]:
    return ("green",) if value == "ok" else ("red", "bold")


def severity_style(value: str) -> tuple[str, ...]:
    return {"high": ("red", "bold"), "medium": ("yellow",)}.get(value, ())


def _print_findings(out: TextOutput, trace: PlacementTrace, shown: Any) -> None:
    """``shown`` (the first rows of ``trace.findings``) in a table per group: those measured in
    this run, then, under a header of their own, the predictions for a machine with a GPU, so
    that a CPU-only run's "would run on the CPU" never reads as what ran."""
    from .._analyses.findings import finding_groups

    for header, rows in finding_groups(shown, trace):
        if header:
            out.line(out.style(f"  {header}:", "bold"))
        out.table(
            [[str(r.severity), str(r.kind), str(r.message)] for r in rows.itertuples()],
            ["severity", "kind", "message"],
            styles={0: severity_style},
            indent="    " if header else "  ",
        )


def _print_memory(out: TextOutput, trace: PlacementTrace, short: dict[str, str]) -> None:
    """Each device's memory peak from TensorFlow's allocator records (the panel's memory list,
    ``memory_items``): when, the ops holding the most of it, and what the device holds
    through the step apart from it; nothing when the trace has no records."""
    from .memory_lane import memory_items

    items = memory_items(trace, max_ops=3)
    if not items:
        return
    out.line("")
    out.heading(
        "Memory peak per device (TensorFlow's allocator records, the step's own tensors; "
        "persistent: variables and constants held through the step)"
    )
    rows = []
    for item in items:
        held = [f"{op['op']} {op['bytes']}" for op in item["ops"]]
        more = f", +{item['more']:,} more" if item["more"] else ""
        recorded = item["recorded"]
        rows.append(
            [
                short.get(item["device"], item["device"]),
                item["allocator"],
                item["peak"] if recorded else "none recorded",
                item["at"] if recorded else "",
                ", ".join(held) + more,
            ]
        )
    out.table(rows, ["device", "allocator", "peak", "at", "held by"], right=(2, 3))
    for item in items:
        if item["persistent"]:
            out.line(f"  {short.get(item['device'], item['device'])}: {item['persistent']}")


def print_summary(
    trace: PlacementTrace,
    out: TextOutput,
    *,
    search: str = "",
    limit: int = DEFAULT_LIMIT,
    findings: int = DEFAULT_FINDINGS,
    list_ops: bool = True,
) -> None:
    """What the panel's header, findings and table say, as plain text: what ran, devices (ops,
    busy time), how the ops got there, transfers by direction, the worst findings, and the ops
    matching ``search`` (the panel's search: any case, ``*``/``?`` whole-name globs), ``limit`` rows
    (0: all); without a search, the first ops when ``list_ops``."""
    from .._analyses.summary import (
        device_summaries,
        format_bytes,
        format_us,
        how_counts,
        plural,
        short_names,
    )
    from .._analyses.summary import transfer_bytes_text as bytes_text
    from .._explain import HOW_VALUES
    from .html_parts import MODE_LABELS, PREDICTED_WORDS
    from .search import filter_ops

    ops, transfers = trace.ops, trace.transfers
    mode = PREDICTED_WORDS if trace.predicted else MODE_LABELS.get(trace.mode, "loaded from a file")
    source = trace.source or "trace"
    out.line(
        f"{out.style(source, 'bold')}: {len(ops):,} {plural('op', len(ops))} on "
        f"{len(trace.devices)} {plural('device', len(trace.devices))} ({mode})"
    )
    for note in trace.notes:
        out.line(f"  note: {note}")
    if trace.truncated:
        out.line("  note: TensorFlow stopped recording at 2^20 nodes per step: incomplete.")

    short = short_names(list(dict.fromkeys([*trace.devices, *ops["device"].astype(str)])))
    out.line("")
    out.heading("Devices")
    summaries = device_summaries(ops, trace.events, list(trace.devices))
    device_rows = [
        [
            short.get(s.device, s.device),
            f"{s.ops:,}",
            "" if trace.predicted else format_us(s.busy_us),
            s.device if short.get(s.device) != s.device else "",
        ]
        for s in summaries
    ]
    out.table(device_rows, ["device", "ops", "busy", "full name"], right=(1, 2))

    counts = how_counts(ops)
    hows = [h for h in HOW_VALUES if counts.get(h, 0) or h in ("explicit", "implicit")]
    hows += [h for h in counts if h not in HOW_VALUES and counts[h]]
    out.line("")
    out.line(
        out.style("How placed: ", "bold") + ", ".join(f"{counts.get(h, 0):,} {h}" for h in hows)
    )

    _print_memory(out, trace, short)

    out.line("")
    what = "Predicted copies" if trace.predicted else "Transfers"
    moved = bytes_text(transfers) if len(transfers) else "none"
    if trace.predicted and moved == "sizes not recorded":
        moved = "sizes unknown: nothing ran"
    out.heading(f"{what}: {len(transfers):,} ({moved})")
    if len(transfers):
        grouped = (
            transfers.assign(
                src=transfers["src_device"].astype(str), dst=transfers["dst_device"].astype(str)
            )
            .groupby(["src", "dst"], sort=False)["bytes"]
            .agg(["size", "sum", "count"])
            .sort_values("size", ascending=False, kind="stable")
        )
        rows = [
            [
                short.get(src, src),
                short.get(dst, dst),
                f"{int(row['size']):,}",
                format_bytes(row["sum"]) if row["count"] else "",
            ]
            for (src, dst), row in grouped.iterrows()
        ]
        out.table(rows, ["from", "to", "count", "bytes"], right=(2, 3))

    out.line("")
    found = trace.findings
    if found.empty:
        out.heading("Findings: none")
    else:
        shown = found.head(findings)
        if not findings:
            more = "; --findings N lists the first N"
        elif len(shown) < len(found):
            more = f", the first {len(shown)}; --findings {len(found)} lists all"
        else:
            more = ""
        both = "predicted" in found and 0 < int(found["predicted"].sum()) < len(found)
        order = "measured first, each group worst first" if both else "worst first"
        out.heading(f"Findings: {len(found)} ({order}{more})")
        _print_findings(out, trace, shown)

    if not search and not list_ops:
        return
    out.line("")
    mask = filter_ops(ops.assign(op=ops["op"].astype(str)), search)
    matching = ops[mask]
    listed = matching if not limit else matching.head(limit)
    title = f'Ops matching "{search}"' if search else "Ops"
    count = f"{len(matching):,} of {len(ops):,}" if search else f"{len(ops):,}"
    if len(listed) < len(matching):
        count = f"the first {len(listed):,} of {count}; --limit 0 lists all"
    out.heading(f"{title} ({count})")
    if len(listed):
        timed = not trace.predicted
        # where the user's code made each op, when the trace recorded it ("" for the runtime's)
        sourced = "source" in listed and bool(listed["source"].notna().any())
        rows = [
            [
                str(r.op),
                str(r.type),
                short.get(str(r.device), str(r.device)),
                str(r.how),
                _time(r.start_us, format_us) if timed else "",
                _time(r.duration_us, format_us) if timed else "",
                str(r.reason),
                *([_source_cell(r.source)] if sourced else []),
            ]
            for r in listed.itertuples(index=False)
        ]
        out.table(
            rows,
            ["op", "type", "device", "how", "start", "duration", "reason"]
            + (["source"] if sourced else []),
            right=(4, 5),
        )


def _source_cell(source: Any) -> str:
    """An op's ``source`` for the table: the line, "runtime" for an op TensorFlow added."""
    if not isinstance(source, str):  # <NA>: not recorded
        return ""
    return source or "runtime"


def _time(value: Any, format_us: Callable[[float], str]) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return ""
    return format_us(number)


def expectation_rows(outcomes: Sequence[Outcome]) -> list[list[str]]:
    """Per expectation: ``ok`` or ``FAIL``, ``PATTERN=DEVICE``, how many ops (are elsewhere)."""
    rows = []
    for outcome in outcomes:
        expectation, matched, wrong = outcome.expectation, outcome.matched, outcome.wrong
        status = "ok" if wrong.empty else "FAIL"
        detail = (
            f"{len(matched):,} op{'s' if len(matched) != 1 else ''}"
            if wrong.empty
            else f"{len(wrong):,} of {len(matched):,} ops elsewhere"
        )
        rows.append([status, expectation.text, detail])
    return rows


def print_expectations(
    out: TextOutput, outcomes: Sequence[Outcome], devices: Sequence[str]
) -> None:
    """The ``--expect-device`` results: one row per expectation (ok, or how many ops are
    elsewhere), then, for each failed one, its offending ops (the first ``MAX_OFFENDERS``)."""
    from .._analyses.summary import short_names

    out.table(expectation_rows(outcomes), ["", "expectation", "ops"], styles={0: status_style})
    failures = [outcome for outcome in outcomes if not outcome.wrong.empty]
    if not failures:
        return
    short = short_names(devices)
    for outcome in failures:
        expectation, wrong = outcome.expectation, outcome.wrong
        out.line("")
        out.heading(f"Not on {expectation.device} ({expectation.text})")
        listed = wrong.head(MAX_OFFENDERS)
        out.table(
            [
                [str(r.op), short.get(str(r.device), str(r.device)), str(r.how), str(r.reason)]
                for r in listed.itertuples(index=False)
            ],
            ["op", "device", "how", "reason"],
        )
        if len(wrong) > len(listed):
            out.line(f"  ... and {len(wrong) - len(listed):,} more")
