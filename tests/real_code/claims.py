"""The oracle's checks of what the tool claims beyond the run: predictions and findings.

Derived from TensorFlow's facts only: the node defs of the graph as built (their op types,
dtypes, requests and resource inputs), the partition graphs (what feeds a ``_Retval``) and
the kernel registry (``kernels.get_registered_kernels_for_op``).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

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


def gpu_kernel_registered(node: Any) -> bool:
    """Whether TensorFlow registers a GPU kernel matching this node def's attrs."""
    from tensorflow.python.framework import kernels

    for kernel in kernels.get_registered_kernels_for_op(node.op).kernel:
        if kernel.device_type == "GPU" and all(_meets(c, node) for c in kernel.constraint):
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


def findings_check(trace: Any, mapping: Mapping, framework_only: bool) -> dict:
    """Each finding's causes against TF's facts, and its fix against what the user can do."""
    findings = trace.findings
    facts = {op: found.fact for op, found in mapping.mapped.items() if found.fact is not None}
    has_gpu = any("GPU" in d.upper() for d in trace.devices)
    results = {  # ops whose output the traced run's partition graphs hand back to the caller
        op for op, (tool, name) in mapping.located.items() if name in tool.retval_fed
    }
    flagged = []
    for finding in findings.itertuples(index=False):
        problems = _finding_problems(finding, facts, results, has_gpu, framework_only)
        if not problems:
            continue
        details = [detail for _, detail in problems]
        more = f" (+{len(details) - 3} more)" if len(details) > 3 else ""
        flagged.append(  # one entry per finding, with its problems
            {
                "kind": finding.kind,
                "check": ", ".join(sorted({check for check, _ in problems})),
                "detail": "; ".join(details[:3]) + more,
                "message": finding.message,
            }
        )
    return {"by_kind": dict(Counter(findings["kind"])), "flagged": flagged}


_PRESENT_ON_GPU = re.compile(
    r"\b(sits?|runs?|computes?|is|are)\b[^.:;]{0,40}\bon (/device:)?GPU:\d"
)


def _finding_problems(
    finding: Any, facts: dict, results: set[str], has_gpu: bool, framework_only: bool
) -> list:
    message, ops = finding.message, list(finding.ops)
    problems = []

    def fact_of(op: str) -> NodeFact | None:
        return facts.get(op)

    if re.search(r"\b(has|have) no GPU kernel", message):
        for op in ops:
            fact = fact_of(op)
            if fact is None or fact.node.op == "Const" or _reads_resource(fact):
                continue  # a resource's reader stays with its resource: not a kernel claim
            if gpu_kernel_registered(fact.node):
                problems.append(("false cause", f"{op} ({fact.node.op}) has a GPU kernel"))
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
            elif framework_only or FRAMEWORK.search(op):
                problems.append(("fix impossible", f"cast inside framework op {op}"))
    largest = re.search(r"largest (\S+?):\d+\)", message)
    if "going back to the caller" in message and largest and largest.group(1) not in results:
        problems.append(("false cause", f"{largest.group(1)} feeds no _Retval in TF's graph"))
    strings = [op for op in ops if fact_of(op) and DT_STRING in _dtypes(fact_of(op).node)]
    if finding.kind == "ping_pong" and "run on the GPU" in message and strings:
        problems.append(("fix impossible", f"string ops on the GPU: {strings[:3]}"))
    prediction = re.search(r"\bwould\b|on a machine with", message)
    if not has_gpu and _PRESENT_ON_GPU.search(message) and not prediction:
        problems.append(("present tense", "speaks of a GPU as there on a CPU-only run"))
    return problems


def _reads_resource(fact: NodeFact) -> bool:
    return any(produces_resource(i, fact.body) for i in fact.node.input if i[:1] != "^")


__all__ = ["DT_RESOURCE", "findings_check", "prediction_check"]
