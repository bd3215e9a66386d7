"""The oracle's checks: the tool's trace, prediction and findings against TensorFlow's own facts.

Every expectation here is derived from TensorFlow (the placement log, the partition graphs,
the node defs of the graph as built, the kernel registry), never from the tool's output.
Each check returns plain data (counts and a list of disagreements) for the JSON report.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from ground_truth import GraphTruth, NodeFact, produces_resource

RUNTIME_TYPES = {
    "_Arg", "_Retval", "_DeviceArg", "_DeviceRetval", "_Send", "_Recv", "_HostSend",
    "_HostRecv", "_SOURCE", "_SINK",
}  # fmt: skip
# Ops TensorFlow does not colocate with their resource inputs (input_colocation_exemption
# registrations: calls and dataset ops that take functions).
COLOCATION_EXEMPT = {
    "PartitionedCall", "StatefulPartitionedCall", "MapDataset", "ParallelMapDataset",
    "ParallelMapDatasetV2", "FilterDataset", "FlatMapDataset", "InterleaveDataset",
    "ParallelInterleaveDatasetV4", "MapAndBatchDataset", "ReduceDataset", "ScanDataset",
    "GroupByWindowDataset", "While", "StatelessWhile", "If", "StatelessIf", "Case",
}  # fmt: skip
CPU_ONLY_CONSUMERS = re.compile(
    r"^(IteratorGetNext\w*|MakeIterator|DeleteIterator|\w*Iterator\w*|LookupTable\w+|"
    r"InitializeTable\w*)$"
)
VARIABLE_CONSUMERS = re.compile(
    r"^(ReadVariableOp|AssignVariableOp|Assign(Add|Sub)VariableOp|ResourceApply\w+|"
    r"ResourceGather\w*|ResourceScatter\w+|VarIsInitializedOp|DestroyResourceOp)$"
)
_TYPE_ALIASES = re.compile(r"^_Mkl(Native)?")


def norm_type(op_type: str) -> str:
    """oneDNN rewrites ``MatMul`` to ``_MklMatMul`` in some runs and not others."""
    return _TYPE_ALIASES.sub("", op_type)


def match_groups(ops: Any, truths: list[GraphTruth]) -> dict[str, GraphTruth | None]:
    """For each ``function`` of the trace, the TF graph sharing most of its op names."""
    graphs = [t for t in truths if not t.eager]
    chosen: dict[str, GraphTruth | None] = {}
    for function, group in ops.groupby("function", sort=False):
        names = set(group["op"])
        scored = [(len(names & (set(t.placed) | set(t.raw_placed))), t) for t in graphs]
        best = max(scored, key=lambda s: s[0], default=(0, None))
        chosen[function] = best[1] if best[0] else None
    return chosen


def lookup(truth: GraphTruth, name: str, function: str) -> str | None:
    """The display name under which ``truth`` knows the tool's op ``name`` (or ``None``)."""
    for candidate in (name, name.removeprefix(f"{function}/")):
        if candidate in truth.placed:
            return candidate
        if candidate in truth.raw_placed:
            return candidate
    return None


def device_check(trace: Any, truths: list[GraphTruth], eager_ops: list[tuple]) -> dict:
    """Per op: the trace's device against the placement log and the partition graphs."""
    result = {
        "log": [0, 0], "partition": [0, 0], "unmapped": Counter(), "disagreements": [],
        "unmapped_examples": {},
    }  # fmt: skip
    groups = match_groups(trace.ops, truths)
    eager_rows = []
    for row in trace.ops.itertuples(index=False):
        truth = groups.get(row.function)
        if row.function == "eager" or truth is None:
            if row.how == "runtime" or row.type in RUNTIME_TYPES:
                result["unmapped"]["runtime op outside any TF graph of the call"] += 1
            else:
                eager_rows.append(row)
            continue
        name = lookup(truth, row.op, row.function)
        if name is None:
            why = _why_unmapped(row)
            result["unmapped"][why] += 1
            result["unmapped_examples"].setdefault(why, []).append(row.op)
            continue
        placed = truth.placed.get(name) or truth.raw_placed.get(name)
        _tally(result, "partition", row, placed)
        if name in truth.logged:
            _tally(result, "log", row, truth.logged[name])
        elif row.type not in ("_Send", "_Recv"):
            why = "no placer line for it (made after placement)"
            result["unmapped"][why] += 1
            result["unmapped_examples"].setdefault(why, []).append(row.op)
    _eager_tally(result, eager_rows, eager_ops, truths)
    result["unmapped"] = dict(result["unmapped"])
    return result


def _why_unmapped(row: Any) -> str:
    if row.type in ("_SOURCE", "_SINK"):
        return "_SOURCE/_SINK (in step stats, not in partition graphs)"
    if row.type in ("_Send", "_Recv"):
        return "copy op the tool's run numbered differently"
    if row.how == "runtime":
        return "runtime plumbing (Func/..., loop frames) numbered differently"
    return "user op not found in TF's graph of the call"


def _tally(result: dict, source: str, row: Any, tf_device: str) -> None:
    result[source][1] += 1
    if _same_device(row.device, tf_device):
        result[source][0] += 1
    else:
        result["disagreements"].append(
            {
                "op": row.op,
                "type": row.type,
                "tool": row.device,
                "tf": tf_device,
                "source": source,
                "how": row.how,
            }  # fmt: skip
        )


def _eager_tally(result: dict, rows: list, eager_ops: list[tuple], truths: list) -> None:
    """Eager ops have no node names: compare devices per op type (counts of each device)."""
    seen: dict[str, Counter] = {}
    for op_type, device in eager_ops:
        seen.setdefault(norm_type(op_type), Counter())[_short(device)] += 1
    placed: dict[str, Counter] = {}
    for truth in truths:
        if truth.eager:  # one execution: its graph may hold the op and its oneDNN rewrite
            ran = {
                (norm_type(truth.types[name]), _short(device))
                for name, device in truth.placed.items()
                if truth.types[name] not in RUNTIME_TYPES
            }
            for op_type, device in ran:
                placed.setdefault(op_type, Counter())[device] += 1
    by_type: dict[str, list] = {}
    for row in rows:
        by_type.setdefault(norm_type(row.type), []).append(row)
    for op_type, group in by_type.items():
        for source, table in (("log", seen), ("partition", placed)):
            available = Counter(table.get(op_type, Counter()))
            if not available:
                if source == "log":
                    result["unmapped"][f"no eager {op_type} ran when the user called it"] += len(
                        group
                    )
                continue
            in_order = source == "log" and len(group) == sum(table[op_type].values())
            executions = [_short(d) for t, d in eager_ops if norm_type(t) == op_type]
            for index, row in enumerate(sorted(group, key=_creation_order)):
                result[source][1] += 1
                device = _short(row.device)
                if in_order:  # the k-th op of a type made is the k-th of it executed
                    available = Counter({device: int(executions[index] == device)})
                # The log has a line per execution; the eager runtime instantiates an op once
                # per (attrs, device), so its partition graphs say only which devices ran it.
                if available[device] > 0:
                    available[device] -= source == "log"
                    result[source][0] += 1
                else:
                    result["disagreements"].append(
                        {
                            "op": row.op,
                            "type": row.type,
                            "tool": row.device,
                            "tf": f"eager {op_type} ran on {dict(table[op_type])}",
                            "source": source,
                            "how": row.how,
                        }  # fmt: skip
                    )


def _creation_order(row: Any) -> tuple[str, int]:
    """``MatMul`` < ``MatMul_1`` < ``MatMul_10``: TensorFlow numbers same-named ops as made."""
    base, _, serial = row.op.rpartition("_")
    return (base, int(serial)) if serial.isdigit() else (row.op, -1)


def _short(device: str) -> str:
    return device.split("device:")[-1].upper()


def _same_device(a: str, b: str) -> bool:
    return _short(a) == _short(b)


# -- how -------------------------------------------------------------------------------------
def how_check(trace: Any, truths: list[GraphTruth]) -> dict:
    """Every ``how`` against the placer rule the node def shows (request, _class, resource)."""
    result = {"checked": 0, "agree": 0, "unchecked": Counter(), "disagreements": []}
    groups = match_groups(trace.ops, truths)
    members = {id(t): _group_members(t) for t in truths if t.top}
    for row in trace.ops.itertuples(index=False):
        truth = groups.get(row.function)
        if truth is None or row.function == "eager":
            result["unchecked"]["eager op (the eager runtime sets its device)"] += 1
            continue
        name = lookup(truth, row.op, row.function)
        fact = truth.fact(name) if name else None
        expected, rule = _expected_how(row, fact, members.get(id(truth), set()), name)
        if expected is None:
            result["unchecked"][rule] += 1
            continue
        result["checked"] += 1
        if row.how in expected:
            result["agree"] += 1
        else:
            result["disagreements"].append(
                {
                    "op": row.op,
                    "type": row.type,
                    "tool": row.how,
                    "tf": "/".join(sorted(expected)),
                    "rule": rule,
                }  # fmt: skip
            )
    result["unchecked"] = dict(result["unchecked"])
    return result


def _expected_how(row: Any, fact: NodeFact | None, members: set, name: str | None) -> tuple:
    if row.type in RUNTIME_TYPES:
        return {"runtime"}, "inserted by the runtime (feeds, fetches, copies)"
    if fact is None:
        if name is None:
            return None, "op not in TF's graph of the call"
        return {"runtime"}, "no node def in the graph as built (runtime-made)"
    node = fact.node
    requested = fact.requested
    colocated = [
        g for g in node.attr["_class"].list.s if g.startswith(b"loc:@") and g[5:] != node.name.encode()
    ] if "_class" in node.attr else []  # fmt: skip
    resource = node.op not in COLOCATION_EXEMPT and any(
        produces_resource(i, fact.body) for i in node.input if not i.startswith("^")
    )
    if requested:
        if _matches(requested, row.device):
            return {"explicit", "colocated"}, f"requested {requested}, runs there"
        return {"soft", "colocated"}, f"requested {requested}, runs elsewhere"
    if colocated:
        return {"colocated"}, "no request; _class colocation attr"
    if resource:
        return {"colocated"}, "no request; consumes a resource (colocated with it)"
    if name in members:
        return {"implicit", "colocated"}, "no request; a colocation group's anchor"
    return {"implicit"}, "no request, no colocation, no resource input"


def _group_members(truth: GraphTruth) -> set[str]:
    """Display names that other nodes are colocated with (``_class`` targets, resources)."""
    found: set[str] = set()
    for name in truth.placed:
        fact = truth.fact(name)
        if fact is None:
            continue
        node = fact.node
        if "_class" in node.attr:
            for g in node.attr["_class"].list.s:
                if g.startswith(b"loc:@"):
                    found.add(fact.prefix + g[5:].decode())
        for raw in node.input:
            if not raw.startswith("^") and produces_resource(raw, fact.body):
                found.add(fact.prefix + raw.split(":")[0])
    return found


def _matches(requested: str, device: str) -> bool:
    """Whether ``device`` meets the (possibly partial) request, as DeviceNameUtils would."""
    import tensorflow as tf

    try:
        spec = tf.DeviceSpec.from_string(requested)
        have = tf.DeviceSpec.from_string(device)
    except ValueError:
        return False
    for part in ("job", "replica", "task"):
        if getattr(spec, part) is not None and getattr(spec, part) != getattr(have, part):
            return False
    if spec.device_type and spec.device_type.upper() != (have.device_type or "").upper():
        return False
    return spec.device_index is None or spec.device_index == have.device_index
