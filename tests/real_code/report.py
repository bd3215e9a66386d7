"""The oracle's tables: agreement per program, and each finding kind against the corpus."""

from __future__ import annotations

from typing import Any


def _ratio(pair: list[int]) -> str:
    agree, compared = pair
    share = f" ({100 * agree / compared:.0f}%)" if compared else ""
    return f"{agree}/{compared}{share}"


def agreement_table(results: dict[str, dict[str, Any]]) -> str:
    """Markdown: per program, ops agreeing with TF's log and partition graphs, how-checks,
    prediction errors, CPU-only resources predicted elsewhere, findings flagged."""
    lines = [
        "| program | mode | ops | devices = placement log | devices = partition graphs "
        "| ops not mapped | how = graph's rule | prediction errors | CPU-only resources "
        "off the CPU | findings flagged / listed |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, result in results.items():
        if "error" in result or "tool_error" in result:
            what = "oracle error" if "error" in result else "the tool raised"
            lines.append(f"| {name} | {what} | | | | | | | | |")
            continue
        devices, how = result["devices"], result["how"]
        prediction, findings = result["prediction"], result["findings"]
        listed = sum(findings["by_kind"].values())
        lines.append(
            f"| {name} | {result['mode']} | {result['ops']} | {_ratio(devices['log'])} "
            f"| {_ratio(devices['partition'])} | {sum(devices['unmapped'].values())} "
            f"| {_ratio([how['agree'], how['checked']])} | {len(prediction['errors'])} "
            f"| {len(prediction['cpu_wrong'])}/{prediction['cpu_checked']} "
            f"| {len(findings['flagged'])}/{listed} |"
        )
    return "\n".join(lines)


def findings_table(results: dict[str, dict[str, Any]]) -> str:
    """Markdown: each finding kind (rows) against the corpus (columns), listed (flagged)."""
    ran = {n: r for n, r in results.items() if "findings" in r}
    kinds = sorted({k for r in ran.values() for k in r["findings"]["by_kind"]})
    lines = ["| kind | " + " | ".join(ran) + " |", "| --- |" + " --- |" * len(ran)]
    for kind in kinds:
        cells = []
        for result in ran.values():
            listed = result["findings"]["by_kind"].get(kind, 0)
            flagged = sum(f["kind"] == kind for f in result["findings"]["flagged"])
            cells.append(f"{listed} ({flagged} flagged)" if flagged else str(listed or ""))
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def xla_table(results: dict[str, dict[str, Any]]) -> str:
    """Markdown: per XLA program, its clusters against XLA's dumped HLO and the log's device."""
    lines = [
        "| program | executed instructions in XLA's HLO | ops with an xla_op it names / ops "
        "| HLO op names | devices = placement log | findings problems | disagreements |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, result in results.items():
        xla = result.get("xla")
        if not xla:
            continue
        if xla.get("no_instructions"):
            lines.append(f"| {name} | no XLA instruction events in the profile | | | | | |")
            continue
        wrong = len(xla["disagreements"])
        lines.append(
            f"| {name} | {xla['instructions']} | {xla['ops_with_instruction']}/"
            f"{xla['ops_checked']} | {xla['hlo_op_names']} | {_ratio(xla['devices'])} "
            f"| {len(xla['findings'])} | {wrong} |"
        )
    return "\n".join(lines)


def disagreements(results: dict[str, dict[str, Any]]) -> str:
    """Every disagreement, one line each, for the lead to route."""
    lines = []
    for name, result in results.items():
        if "tool_error" in result:
            lines.append(f"- {name}: the tool raised {result['tool_error'][:300]}")
        if "devices" not in result:
            continue
        for d in result["devices"]["disagreements"]:
            lines.append(
                f"- {name}: device of {d['op']} ({d['type']}, {d['how']}): tool {d['tool']}, "
                f"TF ({d['source']}) {d['tf']}"
            )
        for d in result["how"]["disagreements"]:
            lines.append(
                f"- {name}: how of {d['op']} ({d['type']}): tool {d['tool']}, "
                f"TF's graph: {d['tf']} ({d['rule']})"
            )
        for e in result["prediction"]["errors"]:
            lines.append(f"- {name}: prediction error on {e['op']} ({e['type']}): {e['reason']}")
        for w in result["prediction"]["cpu_wrong"]:
            lines.append(f"- {name}: predicted {w['op']} ({w['resource']}) on {w['predicted']}")
        for f in result["findings"]["flagged"]:
            lines.append(f"- {name}: {f['kind']} {f['check']}: {f['detail']}: {f['message']}")
        xla = result.get("xla") or {}
        for d in xla.get("disagreements", []):
            lines.append(
                f"- {name}: XLA {d['cluster']}, {d['what']}: tool {d['tool']}, TF's HLO/log "
                f"{d['tf']}"
            )
        for d in xla.get("executed_not_listed", []):
            lines.append(f"- {name}: XLA op {d['op']} has no xla_op; TF's HLO: {d['tf']}")
        for f in xla.get("findings", []):
            lines.append(f"- {name}: {f['kind']}: {f['problem']}")
    return "\n".join(lines)
