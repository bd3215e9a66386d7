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
        "| program | mode | oneDNN | seconds | ops | devices = placement log "
        "| devices = partition graphs | ops not mapped | step ops placed with a row "
        "| tf.data ops placed with a row | how = graph's rule | gpu_kernel = registry "
        "| prediction errors | CPU-only resources off the CPU | findings flagged / listed |",
        "| --- " * 15 + "|",
    ]
    for name, result in results.items():
        if "error" in result or "tool_error" in result:
            what = "oracle error" if "error" in result else "the tool raised"
            lines.append(f"| {name} | {what} |" + " |" * 13)
            continue
        devices, how = result["devices"], result["how"]
        prediction, findings = result["prediction"], result["findings"]
        kernels = result["kernels"]
        listed = sum(f.get("listed", True) for f in findings["rows"])
        lines.append(
            f"| {name} | {result['mode']} | {'on' if result['onednn'] else 'off'} "
            f"| {result['seconds']} | {result['ops']} | {_ratio(devices['log'])} "
            f"| {_ratio(devices['partition'])} | {sum(devices['unmapped'].values())} "
            f"| {_ratio(result['completeness']['placed'])} | {_ratio(result['pipeline']['placed'])} "
            f"| {_ratio([how['agree'], how['checked']])} "
            f"| {_ratio([kernels['checked'] - len(kernels['disagreements']), kernels['checked']])} "
            f"| {len(prediction['errors'])} "
            f"| {len(prediction['cpu_wrong'])}/{prediction['cpu_checked']} "
            f"| {len(findings['flagged'])}/{listed} |"
        )
    return "\n".join(lines)


def memory_table(results: dict[str, dict[str, Any]]) -> str:
    """Markdown: per program, the step's memory as the trace has it against TensorFlow's own
    count of the host allocator around the traced call (``checks.memory_check``)."""
    lines = [
        "| program | mode | allocator keeps stats | memory rows | in use before | step peak "
        "(trace) | allocator's peak | before + step peak = allocator's peak |",
        "| --- " * 8 + "|",
    ]
    for name, result in results.items():
        memory = result.get("memory")
        if memory is None:
            continue
        agrees = {True: "yes", False: "**no**", None: "not compared"}[memory["agrees"]]
        if memory["agrees"] is None and memory.get("xla_unrecorded"):
            agrees += " (no XLA instruction in this TensorFlow's profile: no cluster)"
        elif memory["agrees"] is not None and memory.get("xla"):
            agrees += " (XLA's buffers: the cluster's)"
        elif memory["agrees"] is not None and memory.get("pipeline"):
            agrees += " (at most: tf.data allocates beside the step)"
        elif memory["agrees"] and not memory.get("exact", True):
            agrees += " (at most: its ops ran in parallel, and another call peaked higher)"
        lines.append(
            f"| {name} | {result['mode']} | {'yes' if memory['stats'] else 'no'} "
            f"| {memory['rows']} | {memory['before']} | {memory['step_peak']:,} "
            f"| {memory['allocator_peak']} | {agrees} |"
        )
    return "\n".join(lines)


def findings_table(results: dict[str, dict[str, Any]]) -> str:
    """Markdown: each finding kind (rows; the trace's and the prediction's) against the corpus
    (columns): ``listed`` and, when any, how many state a false cause (``c``), offer a fix the
    user cannot apply (``f``), or are not material (``m``)."""
    ran = {n: r for n, r in results.items() if "findings" in r}
    kinds = sorted(
        {
            (f["source"], f["kind"])
            for r in ran.values()
            for f in r["findings"]["rows"]
            if f.get("listed", True)
        }
    )
    lines = ["| kind | " + " | ".join(ran) + " |", "| --- |" + " --- |" * len(ran)]
    for source, kind in kinds:
        cells = []
        for result in ran.values():
            rows = [
                f
                for f in result["findings"]["rows"]
                if f["kind"] == kind and f["source"] == source and f.get("listed", True)
            ]
            cells.append(_cell(rows))
        lines.append(f"| {kind} ({source}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def findings_summary(results: dict[str, dict[str, Any]]) -> str:
    """Markdown: per finding kind over the whole corpus, how many are listed, how many state a
    true cause, offer an applicable fix (of those offering one) and are material."""
    totals: dict[tuple[str, str], list[int]] = {}
    for result in results.values():
        for f in result.get("findings", {}).get("rows", []):
            t = totals.setdefault((f["kind"], f["source"]), [0, 0, 0, 0, 0, 0])
            if not f.get("listed", True):  # left out of trace.findings as immaterial
                t[5] += 1
                continue
            t[0] += 1
            t[1] += f["cause"]
            t[2] += f["fix"] is not None
            t[3] += f["fix"] is True
            t[4] += f["material"]
    lines = [
        "| kind | listed | cause true | fix applicable / fixes offered | material | left out "
        "(immaterial) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for (kind, source), (n, cause, fixes, fix_ok, material, left) in sorted(totals.items()):
        lines.append(
            f"| {kind} ({source}) | {n} | {cause}/{n} | {fix_ok}/{fixes} | {material}/{n} "
            f"| {left} |"
        )
    return "\n".join(lines)


def _cell(rows: list[dict]) -> str:
    if not rows:
        return ""
    marks = [
        f"{count}{mark}"
        for count, mark in (
            (sum(not f["cause"] for f in rows), "c"),
            (sum(f["fix"] is False for f in rows), "f"),
            (sum(not f["material"] for f in rows), "m"),
        )
        if count
    ]
    return f"{len(rows)} ({' '.join(marks)})" if marks else str(len(rows))


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
            lines.append(
                f"- {name}: {f['kind']} ({f['source']}) {f['check']}: {f['detail']}: {f['message']}"
            )
        missing = result["completeness"]["missing_types"]
        if missing:
            lines.append(f"- {name}: ops TF placed in the step with no row: {missing}")
        for m in result["completeness"]["missing"][:5]:
            lines.append(f"  - {m['op']} ({m['type']}) in {m['function']}")
        pipeline = result["pipeline"]
        if pipeline["missing"]:
            types = sorted({m["type"] for m in pipeline["missing"]})
            lines.append(
                f"- {name}: {len(pipeline['missing'])} ops of tf.data functions "
                f"{sorted(set(pipeline['functions']))} TF placed have no row ({', '.join(types)})"
            )
        for d in pipeline["disagreements"]:
            lines.append(
                f"- {name}: tf.data op {d['op']} ({d['type']}): tool {d['tool']}, TF {d['tf']}"
            )
        for d in result["kernels"]["disagreements"]:
            lines.append(
                f"- {name}: gpu_kernel of {d['op']} ({d['type']}): tool {d['tool']}, "
                f"registry {d['tf']}"
            )
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


def fixes_table(results: dict[str, dict[str, Any]]) -> str:
    """Per program: the fixes its findings carry (offered to try), how many ``try_fix``
    verified (of them, predicted for a GPU machine) and rejected, and why each rejected one
    was; and the edits that carry no overrides to try them with (``not_simulable``) (issue 33)."""
    lines = [
        "| program | fixes to try | verified (predicted) | rejected | edits not simulable "
        "| why rejected |",
        "|---|---|---|---|---|---|",
    ]
    for name, result in sorted(results.items()):
        every = result.get("fixes") or []
        trials = [t for t in every if t.get("simulable", True)]
        rejected = [t for t in trials if not t["verified"]]
        predicted = sum(bool(t.get("predicted")) for t in trials if t["verified"])
        why = "; ".join(sorted({t["why"] for t in rejected})) or ""
        lines.append(
            f"| {name} | {len(trials)} | {len(trials) - len(rejected)} ({predicted}) "
            f"| {len(rejected)} | {len(every) - len(trials)} | {why} |"
        )
    return "\n".join(lines)
