"""The oracle's checks: the tool's trace, prediction and findings against TensorFlow's own facts.

Every expectation here is derived from TensorFlow (the placement log, the partition graphs,
the node defs of the graph as built, the kernel registry), never from the tool's output.
Each check returns plain data (counts and a list of disagreements) for the JSON report.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np
from ground_truth import GraphTruth, NodeFact, produces_resource
from mapping import RUNTIME_TYPES, Mapping

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


def device_check(trace: Any, mapping: Mapping, eager_ops: list[tuple], truths: list) -> dict:
    """Per op: the trace's device against the placement log and the partition graphs."""
    mapped, eager_rows, unmapped = mapping.mapped, mapping.eager_rows, mapping.unmapped
    result = {
        "log": [0, 0], "partition": [0, 0], "unmapped": Counter(unmapped),
        "disagreements": [], "ambiguous": 0,
    }  # fmt: skip
    for row in trace.ops.itertuples(index=False):
        if row.op not in mapped:
            continue
        places = mapped[row.op].places
        placed = {p[0].placed.get(p[1]) or p[0].raw_placed.get(p[1]) for p in places}
        logged = {p[0].logged[p[1]] for p in places if p[1] in p[0].logged}
        result["ambiguous"] += len({_short(d) for d in placed}) > 1
        _tally(result, "partition", row, placed)
        if logged:
            _tally(result, "log", row, logged)
        elif row.type not in ("_Send", "_Recv"):
            result["unmapped"]["no placer line for it (made after placement)"] += 1
    _eager_tally(result, eager_rows, eager_ops, truths)
    result["unmapped"] = dict(result["unmapped"])
    return result


def _tally(result: dict, source: str, row: Any, tf_devices: set[str]) -> None:
    """One comparison; where TF ran the same body on several devices, any of them agrees."""
    result[source][1] += 1
    if any(_same_device(row.device, d) for d in tf_devices):
        result[source][0] += 1
    else:
        result["disagreements"].append(
            {
                "op": row.op,
                "type": row.type,
                "tool": row.device,
                "tf": ", ".join(sorted(tf_devices)),
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
def how_check(trace: Any, mapping: Mapping) -> dict:
    """Every ``how`` against the placer rule the node def shows (request, _class, resource)."""
    mapped = mapping.mapped
    result = {"checked": 0, "agree": 0, "unchecked": Counter(), "disagreements": []}
    members: dict[int, set[str]] = {}
    for row in trace.ops.itertuples(index=False):
        if row.op not in mapped:
            result["unchecked"]["no graph of it in the user's run (eager there, or unmapped)"] += 1
            continue
        truth, name = mapped[row.op].places[0]
        if id(truth) not in members:
            members[id(truth)] = _group_members(truth)
        expected, rule = _expected_how(row, mapped[row.op].fact, members[id(truth)], name)
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


def _expected_how(row: Any, fact: NodeFact | None, members: set, name: str) -> tuple:
    if row.type in RUNTIME_TYPES:
        return {"runtime"}, "inserted by the runtime (feeds, fetches, copies)"
    if fact is None:
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


# -- completeness: every op TensorFlow placed has a row ----------------------------------------
def completeness_check(trace: Any, mapping: Mapping, truths: list[GraphTruth]) -> dict:
    """Every op of the traced call's functions that TensorFlow's placer placed (its log's
    block for each graph the run metadata records: the step function, with the functions it
    calls inlined; for a Session graph, the nodes the step's fetches need) has a row of the
    trace that is that op, or that names it among the ops it replaced (a column
    ``replaces``/``fused_ops`` of op names, if the trace has one), or, for an op no partition
    graph holds (oneDNN's rewrite merged it into a ``_Mkl*`` kernel after placement), a row of
    its name and type on the logged device.

    Not covered here: the eager runtime's single ops (``Executing op``) around the step, which
    ``device_check`` compares per type; the functions of ``tf.data`` transformations
    (``pipeline_check``); and the plumbing of a call's boundary the runtime makes when it
    instantiates or inlines a function (``_Arg``, ``_Retval``, ``Func/.../input/_N``), which
    two runs number differently (the tool wraps a plain callable in a function of its own,
    into which the user's calls are inlined) and which no name pairs across them."""
    covered = {(id(t), name) for found in mapping.mapped.values() for t, name in found.places}
    replaced = _replaced_ops(trace)
    unplaced = _rows_in_no_partition_graph(trace, mapping)
    result: dict = {"placed": [0, 0], "missing": [], "missing_types": Counter()}
    for truth in truths:
        if truth.eager or not truth.logged or _outside_the_step(truth):
            continue
        for name in truth.logged:
            if truth.logged_types.get(name) in RUNTIME_TYPES or _CALL_PLUMBING.search(name):
                continue
            if truth.needed is not None and name not in truth.needed:
                continue  # a Session graph's node the traced step's fetches do not run
            result["placed"][1] += 1
            op_type = truth.logged_types.get(name, "?")
            if (
                (id(truth), name) in covered
                or name in replaced
                or _has_row_as_built(unplaced, name, op_type, truth.logged[name])
            ):
                result["placed"][0] += 1
                continue
            result["missing_types"][op_type] += 1
            result["missing"].append(
                {"op": name, "type": op_type, "function": truth.function or "(top)"}
            )
    result["missing_types"] = dict(result["missing_types"])
    return result


def _rows_in_no_partition_graph(trace: Any, mapping: Mapping) -> dict[tuple, list]:
    """Rows the tool's own partition graphs do not hold as nodes (an op oneDNN's rewrite
    merged into a ``_Mkl*`` kernel after placement keeps its row, named and typed as built),
    by (type, last name part): ``[(name, device)]``."""
    rows: dict[tuple, list] = {}
    columns = (trace.ops["op"], trace.ops["type"], trace.ops["device"])
    for op, op_type, device in zip(*columns, strict=True):
        if op not in mapping.mapped:
            rows.setdefault((norm_type(op_type), op.rsplit("/", 1)[-1]), []).append((op, device))
    return rows


def _has_row_as_built(rows: dict[tuple, list], name: str, op_type: str, device: str) -> bool:
    """A row of that type on the logged device whose name is ``name`` (the tool's name may add
    the call it traced in front)."""
    return any(
        (op == name or op.endswith(f"/{name}")) and _same_device(have, device)
        for op, have in rows.get((norm_type(op_type), name.rsplit("/", 1)[-1]), [])
    )


_CALL_PLUMBING = re.compile(r"(^|/)Func/.*/(input|output|output_control_node)/_\d+$")


def _outside_the_step(truth: GraphTruth) -> bool:
    """A graph the call ran besides its functions' bodies: the eager runtime's wrapper of one
    op (``__wrapped__MapDataset...``), or the one-time initializer a ``tf.function`` runs on its
    first call for the variables that call made (only ``AssignVariableOp`` and
    ``.../Initializer/...``): the oracle's run is that first call, the tool's trace need not be."""
    if truth.function.startswith("__wrapped__"):
        return True
    ops = [(name, t) for name, t in truth.logged_types.items() if t not in RUNTIME_TYPES]
    return bool(ops) and all(t == "AssignVariableOp" or "/Initializer/" in name for name, t in ops)


def _replaced_ops(trace: Any) -> set[str]:
    """Op names a fused row says it stands for (no such column on today's trace)."""
    names: set[str] = set()
    for column in ("replaces", "fused_ops", "fused"):
        if column in trace.ops.columns:
            for value in trace.ops[column].dropna():
                items = value if isinstance(value, list | tuple) else str(value).split(",")
                names.update(str(v).strip().split("/")[-1] for v in items if v)
    return names


_FAKE_SINK = re.compile(r"^FakeSink\d*$")


def pipeline_check(
    trace: Any, mapping: Mapping, blocks: list[dict], dataset_functions: dict[str, set]
) -> dict:
    """Every op of a ``tf.data`` function TensorFlow's placer placed during the call (a log
    block that no recorded graph claims and whose names are those of a ``Dataset_*`` function
    graph) has a row of that type named after it (``.../EagerPyFunc``), on the logged device;
    rows that are ops of the step (mapped to its graphs) do not count."""
    rows: dict[tuple[str, str], list[str]] = {}
    columns = (trace.ops["op"], trace.ops["type"], trace.ops["device"])
    for op, op_type, device in zip(*columns, strict=True):
        if op in mapping.mapped:
            continue
        rows.setdefault((op.rsplit("/", 1)[-1], norm_type(op_type)), []).append(device)
    result: dict = {"placed": [0, 0], "missing": [], "disagreements": [], "functions": []}
    for block in blocks:
        # The function whose ops the block places (the largest such: a block may also hold
        # an eager op's graph placed right after it by the same thread).
        matches = [
            (len(ops), f) for f, ops in dataset_functions.items() if ops and ops <= set(block)
        ]
        if not matches:
            continue
        function = max(matches)[1]
        names = {  # the placer's FakeSink Identity of a function's outputs is no op of its own
            n for n in dataset_functions[function] if not _FAKE_SINK.match(n)
        }
        result["functions"].append(function)
        for name in sorted(names):
            op_type, device = block[name]
            result["placed"][1] += 1
            devices = rows.get((name.rsplit("/", 1)[-1], norm_type(op_type)))
            if not devices:
                result["missing"].append({"op": name, "type": op_type, "function": function})
            elif any(_same_device(d, device) for d in devices):
                result["placed"][0] += 1
            else:
                result["disagreements"].append(
                    {"op": name, "type": op_type, "tool": devices, "tf": device}
                )
    return result


def _ran_in_parallel(trace: Any) -> bool:
    """Whether two of the step's op executions overlapped in time (any devices, threads)."""
    events = trace.events.sort_values("start_us", kind="stable")
    starts = events["start_us"].to_numpy(dtype=float)
    ends = starts + events["duration_us"].to_numpy(dtype=float)
    return bool(len(starts) > 1 and (starts[1:] < np.maximum.accumulate(ends)[:-1]).any())


def memory_check(
    trace: Any, before: dict | None, after: dict | None, xla: bool = False
) -> dict[str, Any]:
    """The trace's memory against TensorFlow's own count of the host allocator around the
    call that traced it (``get_memory_info("CPU:0")``; None where it keeps none). The logical
    CPUs share that allocator, so its rows of every device are summed in time order: the
    bytes in use before the call plus the step's peak so counted must be the allocator's peak
    (a TF2 trace: the calls before the traced one do the same work), or at most it when a
    tf.data pipeline allocates beside the step. Graph mode's allocator
    peak also holds the session's variables and set-up, made inside the call: not compared.
    An XLA cluster's buffers are the cluster's (``trace.memory`` rows under its name); for an
    XLA program (``xla``) whose trace has no instruction (TF 2.16's profile records none) the
    trace knows no cluster to hold them: not compared."""
    memory = trace.memory
    step = memory[memory["kind"] == "temporary"]  # not the variables held through the step
    rows = step[step["allocator"] == "mklcpu"].sort_values("time_us", kind="stable")
    step_peak = int(rows["bytes"].cumsum().max()) if len(rows) else 0
    compared = (
        before is not None
        and after is not None
        and trace.mode == "function"
        and not (xla and trace.xla.empty)
    )
    # A step that reads a tf.data iterator: the pipeline's threads allocate its next batches
    # beside the step, by no op of it, as fast as the machine lets them: the allocator's peak
    # holds them at times that change between runs, so the trace's can only be at most it.
    types = trace.ops["type"].astype(str)
    pipeline = bool(types.str.startswith("IteratorGetNext").any())
    # A step whose ops ran in parallel (the executor's inter-op threads) peaks at what the
    # order they ran in held at once, which changes from run to run: the allocator's peak is
    # the highest of every call since the reset, trace_placement's warm-up call too. Seen on
    # mnist_convnet: the traced step's own allocator events (TensorFlow's bytes_allocated
    # after each) peaked at 4,323,328 B, as the trace says, while their peak_bytes_in_use
    # stat, the warm-up's, was 4,818,944 B, in 2 of 8 runs; the other 6 runs peaked at
    # 4,818,944 B in the traced step too, and agreed exactly.
    parallel = _ran_in_parallel(trace)
    total = before["current"] + step_peak if compared else None
    return {
        "stats": before is not None,
        "rows": len(memory),
        "compared": compared,
        "xla": xla,
        "xla_unrecorded": xla and trace.xla.empty,
        "before": before["current"] if before else None,
        "step_peak": step_peak,
        "allocator_peak": after["peak"] if after else None,
        "pipeline": pipeline,
        "parallel": parallel,
        "exact": total == after["peak"] if compared else None,
        "agrees": (total <= after["peak"] if pipeline or parallel else total == after["peak"])
        if compared
        else None,
    }
