"""The oracle's checks of what the tool claims beyond the run: predictions and findings.

Derived from TensorFlow's facts only: the node defs of the graph as built (their op types,
dtypes, requests and resource inputs), the partition graphs (what feeds a ``_Retval``) and
the kernel registry (``kernels.get_registered_kernels_for_op``).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pandas as pd
from checks import CPU_ONLY_CONSUMERS, VARIABLE_CONSUMERS
from ground_truth import DT_RESOURCE, NodeFact, produces_resource
from mapping import Mapping

DT_STRING = 7
# Names TensorFlow and Keras give the ops they make (layers, optimizers, losses, metrics,
# gradients, RNG and loop plumbing): a user cannot put a Cast in front of those.
FRAMEWORK = re.compile(
    r"(^|/)(gradients?|gradient_tape|[a-z_]*(adam|sgd|rmsprop|optimizer|loss_scale|seed_gen"
    r"|dropout|lstm|gru|bidirectional|dense|conv|embedding|flatten|sequential|functional"
    r"|model|metric|accuracy|compile_loss|iteration|pooling|text_vectorization|lookup"
    r"|string_lookup|batch_norm|mobilenet|block|expanded|depthwise|project|mean)[a-z_0-9]*)"
    r"(/|$)",
    re.IGNORECASE,
)


def prediction_check(predicted: Any, mapping: Mapping, cpu_only: list[str]) -> dict:
    """No ``how == "error"`` on code that runs on GPUs; CPU-only resources stay on the CPU."""
    errors = [
        {"op": r.op, "type": r.type, "reason": r.reason}
        for r in predicted.ops.itertuples(index=False)
        if r.how == "error"
    ]
    device = dict(zip(predicted.ops["op"], predicted.ops["device"], strict=False))
    checked, wrong = 0, []
    for op, found in mapping.mapped.items():
        fact = found.tool_fact
        if fact is None:
            continue
        node = fact.node
        kind = "iterator or lookup table" if CPU_ONLY_CONSUMERS.match(node.op) else ""
        if not kind and "variables" in cpu_only and VARIABLE_CONSUMERS.match(node.op):
            kind = "variable the user keeps on a CPU"
        if not kind:
            continue
        resources = [  # the resource's producer, in the tool's naming
            found.tool_prefix + fact.prefix + raw.split(":")[0]
            for raw in node.input
            if not raw.startswith("^") and produces_resource(raw, fact.body)
        ]
        for name in [op, *resources]:
            if name not in device:
                continue
            checked += 1
            if "CPU" not in device[name].upper():
                wrong.append({"op": name, "predicted": device[name], "resource": kind})
    return {"errors": errors, "cpu_checked": checked, "cpu_wrong": wrong}


GPU_SERVING = ("GPU", "DEFAULT")  # a DEFAULT kernel serves every device type


def gpu_kernel_registered(node: Any) -> bool:
    """Whether TensorFlow registers a GPU (or DEFAULT) kernel matching this node def's attrs."""
    from tensorflow.python.framework import kernels

    for kernel in kernels.get_registered_kernels_for_op(node.op).kernel:
        if kernel.device_type in GPU_SERVING and all(_meets(c, node) for c in kernel.constraint):
            return True
    return False


def _meets(constraint: Any, node: Any) -> bool:
    if constraint.name not in node.attr:
        return True  # a default attr value: not known from the node def
    value = node.attr[constraint.name]
    allowed = constraint.allowed_values.list
    if allowed.type:
        types = [value.type] if value.WhichOneof("value") == "type" else list(value.list.type)
        return all(t in allowed.type for t in types)
    if allowed.s:
        return value.s in allowed.s
    return True


def _dtypes(node: Any) -> set[int]:
    found = set()
    for value in node.attr.values():
        kind = value.WhichOneof("value")
        if kind == "type":
            found.add(value.type)
        elif kind == "list":
            found.update(value.list.type)
    return found


def kernel_column_check(trace: Any, mapping: Mapping) -> dict:
    """Each row's ``gpu_kernel`` against the kernel registry, for the node def TensorFlow's
    graph holds: ``yes``/``host`` need a GPU kernel matching its attrs, ``dtype`` a GPU kernel
    for the type but none for these attrs, ``no`` none at all. Rows whose type is not the node
    def's (oneDNN's ``_Mkl`` rewrites) are left out."""
    from tensorflow.python.framework import kernels

    result: dict = {"checked": 0, "disagreements": []}
    for row in trace.ops.itertuples(index=False):
        found = mapping.mapped.get(row.op)
        fact = found.fact if found else None
        if fact is None or row.type != fact.node.op or row.gpu_kernel in ("NA", None, ""):
            continue
        any_gpu = any(
            k.device_type in GPU_SERVING
            for k in kernels.get_registered_kernels_for_op(row.type).kernel
        )
        matching = gpu_kernel_registered(fact.node)
        expected = {True: {"yes", "host"}, False: {"dtype"} if any_gpu else {"no"}}[matching]
        result["checked"] += 1
        if row.gpu_kernel not in expected:
            result["disagreements"].append(
                {"op": row.op, "type": row.type, "tool": row.gpu_kernel, "tf": "/".join(expected)}
            )
    return result


def _returned(ctx: Any, op: str) -> bool:
    """Whether ``op``'s output reaches a ``_Retval`` of the run's partition graphs: itself, or
    (a call TensorFlow inlined, so absent there as a node) an op of its body."""
    return op in ctx.results or any(name.startswith(op + "/") for name in ctx.results)


def findings_check(
    trace: Any, predicted: Any, mapping: Mapping, framework_only: bool, authors: Any
) -> dict:
    """Each finding of the trace and of the prediction: its causes against TF's facts, its
    fix against what the user's code wrote, and whether it is material."""
    facts = {op: found.fact for op, found in mapping.mapped.items() if found.fact is not None}
    has_gpu = any("GPU" in d.upper() for d in trace.devices)
    results = {  # ops whose output the traced run's partition graphs hand back to the caller
        op for op, (tool, name) in mapping.located.items() if name in tool.retval_fed
    }
    context = _Context(trace, mapping, facts, results, has_gpu, framework_only, authors)
    flagged, rows = [], []
    for source, found in (("trace", trace), ("prediction", predicted)):
        listed = set(found.findings["message"])
        seen: Counter = Counter()
        # every finding, those left out as immaterial too: their causes and fixes are held
        for finding in found.all_findings.itertuples(index=False):
            seen[(finding.kind, finding.message)] += 1
            problems = _finding_problems(finding, context)
            share = _time_share(trace, list(finding.ops))
            moved = _bytes_share(found, finding.evidence)
            duplicate = seen[(finding.kind, finding.message)] > 1
            material = (share >= MATERIAL_SHARE or moved >= MATERIAL_SHARE) and not duplicate
            offers_fix = bool(_FIX.search(finding.message))
            checks = {check for check, _ in problems}
            rows.append(
                {
                    "kind": finding.kind,
                    "source": source,
                    "cause": "false cause" not in checks and "present tense" not in checks,
                    "fix": None if not offers_fix else not checks & FIX_CHECKS,
                    "material": material,
                    "listed": finding.message in listed,
                    "share": round(share, 4),
                    "bytes_share": round(moved, 4),
                    "duplicate": duplicate,
                    "severity": str(finding.severity),
                    "message": finding.message,
                    "evidence": {
                        k: v for k, v in finding.evidence.items() if isinstance(v, (int, float))
                    },
                }
            )
            if finding.message in listed and not material:
                problems.append(
                    ("not material", f"{share:.2%} of the step's op time, {moved:.2%} of its bytes")
                )
                checks.add("not material")
            if not problems:
                continue
            details = [detail for _, detail in problems]
            more = f" (+{len(details) - 3} more)" if len(details) > 3 else ""
            flagged.append(  # one entry per finding, with its problems
                {
                    "kind": finding.kind,
                    "source": source,
                    "check": ", ".join(sorted(checks)),
                    "detail": "; ".join(details[:3]) + more,
                    "message": finding.message,
                }
            )
    return {
        "by_kind": dict(Counter(trace.findings["kind"])),
        "predicted_by_kind": dict(Counter(predicted.findings["kind"])),
        "flagged": flagged,
        "rows": rows,
    }


# A finding is material when the ops it names take at least this share of the traced calls'
# op time (the input pipeline's own rows left out; an XLA cluster's ops by its instructions'
# time), or the bytes it copies this share of the bytes the step's ops output, and it is not
# a repeat of another (a necessary condition: it says nothing of stability across steps, nor
# of bytes on a GPU machine). The bytes do not change with the machine's load; a toy step's
# time shares do (gpu_guide's 16-byte copy, 9% of the step's 176 output bytes, takes 18-41%
# of its op time on a quiet machine and under 1% when the load stretches another op).
MATERIAL_SHARE = 0.01
FIX_CHECKS = {"fix impossible", "fix not the user's"}
# A fix: an imperative after a sentence break or a colon ("... step: fetch only what you need").
_FIX = re.compile(
    r"(^|[.:;]\s+|, or )(iterate|cast|move|create|place|put|run|fetch|use|keep|give|pass|make|"
    r"feed|prefetch|wrap|set|call|remove|drop|avoid|compile|return|batch|split|merge|read)\b"
    r"(?!\s*\()",  # not an op type listed with its numbers: "; Cast (Cast, 6 µs in 3 runs)"
    re.IGNORECASE,
)


def _bytes_share(trace: Any, evidence: dict) -> float:
    """The bytes a finding says it copies over the bytes ``trace``'s ops output (0 when either
    is unrecorded)."""
    moved = evidence.get("bytes", -1)
    sizes = pd.to_numeric(trace.ops.get("output_bytes", pd.Series(dtype=float)), errors="coerce")
    total = float(sizes.sum()) if sizes.notna().any() else 0.0
    if not isinstance(moved, int | float) or moved <= 0 or total <= 0:
        return 0.0
    return float(moved) / total


def _time_share(trace: Any, ops: list[str]) -> float:
    rows = trace.ops
    if "input_stage" in rows:
        rows = rows[rows["input_stage"].isna()]
    durations = rows["duration_us"].astype(float).fillna(0)
    named = float(durations[rows["op"].isin(ops)].sum())
    total = float(durations.sum())
    xla = getattr(trace, "xla", None)
    if xla is not None and len(xla):
        wanted = set(ops)
        mine = xla["tf_ops"].map(lambda tf_ops: bool(wanted.intersection(tf_ops)))
        named += float(xla.loc[mine, "duration_us"].sum())
        total += float(xla["duration_us"].sum())
    return min(1.0, named / total) if total > 0 else 0.0


class _Context:
    """What a finding is held against (one trace)."""

    def __init__(self, trace, mapping, facts, results, has_gpu, framework_only, authors):
        self.rows = set(trace.ops["op"])
        self.types = dict(zip(trace.ops["op"], trace.ops["type"], strict=False))
        self.mapping, self.facts, self.results = mapping, facts, results
        self.has_gpu, self.framework_only, self.authors = has_gpu, framework_only, authors


_PRESENT_ON_GPU = re.compile(
    r"\b(sits?|runs?|computes?|is|are)\b[^.:;]{0,40}\bon (/device:)?GPU:\d"
)


def _finding_problems(finding: Any, ctx: _Context) -> list:
    message, ops = finding.message, list(finding.ops)
    facts = ctx.facts
    problems = []

    def fact_of(op: str) -> NodeFact | None:
        return facts.get(op)

    if re.search(r"\b(has|have) no GPU kernel", message):
        for op in ops:
            fact = fact_of(op)
            if fact is None or fact.node.op == "Const":
                continue
            kind = _resource_kind_of_reader(fact)
            if kind and kind not in message.lower():
                continue  # a resource's reader stays with its resource: not a kernel claim
            for op_type in [fact.node.op, *RESOURCE_MAKERS.get(kind, ())]:
                if _type_has_gpu_kernel(op_type, fact.node if op_type == fact.node.op else None):
                    problems.append(("false cause", f"{op_type} (of {op}) has a GPU kernel"))
    anchors = re.search(r"a resource with (.+?), which has none", message)
    if anchors:
        for anchor in re.split(r", | and ", anchors.group(1)):
            fact = fact_of(anchor.strip())
            if fact is None:
                continue
            if gpu_kernel_registered(fact.node):
                problems.append(("false cause", f"{anchor} ({fact.node.op}) has a GPU kernel"))
            elif "CPU" in fact.requested.upper():
                problems.append(("false cause", f"{anchor} is on the CPU by request"))
    if re.search(r"\b[Cc]ast to float", message):
        for op in ops:
            fact = fact_of(op)
            if fact is None or fact.node.op in ("Const", "Shape"):
                continue
            if DT_STRING in _dtypes(fact.node):
                problems.append(("fix impossible", f"cast of string op {op}"))
            elif ctx.framework_only or FRAMEWORK.search(op):
                problems.append(("fix impossible", f"cast inside framework op {op}"))
    largest = re.search(r"largest (\S+?):\d+\)", message)
    if "going back to the caller" in message and largest and not _returned(ctx, largest.group(1)):
        problems.append(("false cause", f"{largest.group(1)} feeds no _Retval in TF's graph"))
    if re.search(r"\breads? of variables", message) and largest:
        producer = ctx.types.get(largest.group(1), "")
        if producer and not VARIABLE_READS.match(producer):
            problems.append(
                ("false cause", f"{largest.group(1)} ({producer}) is no read of a variable")
            )
    named = re.search(r"variables that live on \S+ \(([^)]*)\)", message)
    for name in re.split(r", | and ", named.group(1)) if named else []:
        kind = _resource_kind(ctx, name.strip())
        if kind and kind != "variable":
            problems.append(("false cause", f"{name.strip()} is a {kind}, not a variable"))
    strings = [op for op in ops if fact_of(op) and DT_STRING in _dtypes(fact_of(op).node)]
    if finding.kind == "ping_pong" and "run on the GPU" in message and strings:
        problems.append(("fix impossible", f"string ops on the GPU: {strings[:3]}"))
    prediction = re.search(r"\bwould\b|on a machine with", message)
    if not ctx.has_gpu and _PRESENT_ON_GPU.search(message) and not prediction:
        problems.append(("present tense", "speaks of a GPU as there on a CPU-only run"))
    if _FIX.search(message) and ctx.authors is not None and ctx.authors.made_at:
        problems += _fix_names_framework(finding, ctx)
    return problems


RESOURCE_MAKERS = {  # the ops that make (and iterate) a resource of each kind
    "iterator": ("AnonymousIteratorV3", "IteratorV2", "IteratorGetNext"),
    "lookup table": ("HashTableV2", "MutableHashTableV2"),
    "variable": ("VarHandleOp",),
}
VARIABLE_READS = re.compile(r"^(ReadVariableOp|ResourceGather\w*|_Read\w*)$")
_KIND_OF_CONSUMER = (
    (re.compile(r"Iterator|^MakeIterator$|^DeleteIterator$"), "iterator"),
    (re.compile(r"^(LookupTable|InitializeTable)"), "lookup table"),
    (VARIABLE_CONSUMERS, "variable"),
)


def _type_has_gpu_kernel(op_type: str, node: Any | None) -> bool:
    from tensorflow.python.framework import kernels

    if node is not None:
        return gpu_kernel_registered(node)
    registered = kernels.get_registered_kernels_for_op(op_type).kernel
    return any(k.device_type in GPU_SERVING for k in registered)


def _resource_kind_of_reader(fact: NodeFact) -> str:
    if not _reads_resource(fact):
        return ""
    return next((kind for pattern, kind in _KIND_OF_CONSUMER if pattern.search(fact.node.op)), "")


def _resource_kind(ctx: _Context, name: str) -> str:
    """What a resource named in a finding is, by the ops that consume it in the tool's graph
    of the step (``iterator`` is read by ``IteratorGetNext``: an iterator)."""
    for tool, _ in {id(t): (t, n) for t, n in ctx.mapping.located.values()}.values():
        if tool.top is None:
            continue
        consumers = [
            n.op
            for n in tool.top.nodes.values()
            if any(i.lstrip("^").split(":")[0] == name for i in n.input)
        ]
        for pattern, kind in _KIND_OF_CONSUMER:
            if any(pattern.search(c) for c in consumers):
                return kind
    return ""


def _fix_names_framework(finding: Any, ctx: _Context) -> list:
    """A fix may ask to change only ops the user's own code made (``authorship``). Copies and
    other runtime-made rows a finding cites as evidence are judged by the tensor they carry
    (its ``largest X:N``) where it names one; rows with no node def are left unjudged."""
    if _INPUT_DTYPE_FIX.search(finding.message):
        # The fix asks for another dtype of the model's Input (the ops it names are the
        # evidence, made by Keras's layers for that input): the user's if they write the Input.
        if ctx.authors.writes_inputs:
            return []
        return [("fix not the user's", "the program makes no keras.Input of its own")]
    named = list(finding.ops) + [
        word for word in re.findall(r"[\w./-]+", finding.message) if word in ctx.rows
    ]
    largest = re.search(r"largest (\S+?):\d+\)", finding.message)
    if largest:
        named.append(largest.group(1))
    problems, done = [], set()
    for op in named:
        if op in done:
            continue
        done.add(op)
        facts = _facts_of(ctx, op)
        if not facts:
            continue
        writers = [ctx.authors.writer(f.key) for f in facts]
        if any((w or "").startswith("user:") for w in writers):
            continue
        writer = next((w for w in writers if w), None)
        if writer is not None:
            problems.append(("fix not the user's", f"{op} is made by {writer}"))
    return problems


_INPUT_DTYPE_FIX = re.compile(r"\bkeras\.Input\([^)]*\bdtype=")


def _facts_of(ctx: _Context, op: str) -> list[NodeFact]:
    found = ctx.mapping.mapped.get(op)
    facts = [f for f in (found.tool_fact, found.fact) if f is not None] if found else []
    if not facts:
        located = ctx.mapping.located.get(op)
        fact = located[0].fact(located[1]) if located else None
        facts = [fact] if fact is not None else []
    return facts


def _reads_resource(fact: NodeFact) -> bool:
    return any(produces_resource(i, fact.body) for i in fact.node.input if i[:1] != "^")


__all__ = ["DT_RESOURCE", "findings_check", "kernel_column_check", "prediction_check"]
