"""``trace_placement(setup, cluster="local:worker=2,ps=1", mode="function")``: TF2 code under
``ParameterServerStrategy`` with a ``ClusterCoordinator``, traced on a local cluster.

As in TensorFlow's "Parameter server training" guide, the coordinator process runs the setup
(the strategy, the variables in ``strategy.scope()``, sharded over the ps tasks by its
``variable_partitioner``, the per-worker dataset) and schedules the step it returns on the
workers; worker and ps tasks run servers only (``ps_task``). tfplace adds the coordinator,
``/job:chief/task:0``, to the cluster asked for. The trace is made of what TensorFlow did on
the workers: the graphs each worker placed and partitioned when the coordinator sent it the
step (over its own CPU and the ps tasks'), read by the RunMetadata reader as a graph-mode
trace's partition graphs are; the reasons name the strategy's rules (which worker the
coordinator scheduled the step on; which ps task holds each variable and shard, and why); each
cross-task transfer has the bytes of the tensor's static shape in the step's graph.
"""

from __future__ import annotations

import contextlib
import json
import pickle
import re
from typing import Any

import pandas as pd

from .._explain.rules import ps_variable, scheduled_there
from .._model.columns import EVENTS_COLUMNS
from .._model.devices import task_of
from .._model.errors import TraceError
from .._model.trace import STRATEGY_TASKS_RAW, PlacementTrace
from .cluster import ClusterPlan
from .local_cluster import TaskRun
from .ps_task import _DUMPED, STRATEGY

COORDINATOR = ("chief", 0)
SERVING_JOBS = ("worker", "ps")
PS_JOBS = ("chief", "worker", "ps")
TIMED = (
    "Times: of the traced calls (scheduled once the warm-up calls had ended), from each worker "
    "and ps task's TensorFlow profiler, which ran in its process while it served (one clock: "
    "the tasks ran on this machine); they count from the first op of those calls on any task, "
    "and an op's runs are its executions in all of them (a ps task's, for every worker)."
)
NOT_TIMED = (
    "Not timed: the tasks' profilers recorded none of the step's ops; the ops have no start or "
    "duration and the timeline is empty. "
    "Placement, reasons, variable shards and transfers (with their bytes) are TensorFlow's own: "
    "the graphs each worker placed and partitioned."
)


def with_coordinator(plan: ClusterPlan) -> ClusterPlan:
    """``plan`` with the coordinator task (``chief``) the strategy needs, first."""
    return ClusterPlan(jobs={"chief": 1, **{j: n for j, n in plan.jobs.items() if j != "chief"}})


def merged_ps(runs: list[TaskRun], name: str, reason: str, note: str = "") -> PlacementTrace:
    """One trace of what the workers placed when the coordinator sent them the step."""
    coordinator = next(r for r in runs if (r.job, r.task) == COORDINATOR)
    record = coordinator.header
    functions = list(record.get("functions", []))
    scheduled = scheduled_on(runs, functions)
    served = {(r.job, r.task): pickle.loads(r.trace) for r in runs if r.job in SERVING_JOBS}
    traces = _worker_traces(runs, served, functions)
    if not traces:
        raise TraceError(
            f"No worker instantiated the step {name}() returned: the coordinator scheduled "
            f"{len(scheduled)} call(s), and no worker's TensorFlow placed a function of it. "
            "Return the tf.function the coordinator should schedule (e.g. "
            "`return train_step, (per_worker_iterator,)`)."
        )
    ops_frames, transfer_frames = [], []
    for _, function, trace, constants in traces:
        ops = trace.ops.copy()
        reads = _variable_reads(trace, record.get("variables", {}).get(function, {}))
        scopes = record.get("requests", {}).get(function, {})
        ops["reason"] = [
            _reason(op, strategy_asked(str(why), scopes.get(op)), device, scheduled, reads, record)
            for op, why, device in zip(ops["op"], ops["reason"], ops["device"], strict=True)
        ]
        ops_frames.append(ops)
        sizes = {**constants, **record.get("tensor_bytes", {}).get(function, {})}
        transfer_frames.append(_with_bytes(trace.transfers, sizes))
    first = traces[0][2]
    ops = pd.concat(ops_frames, ignore_index=True)
    # Each worker's instantiation runs its own copy of the ps tasks' part: the same ops, on the
    # same ps devices; one row each.
    ops = ops.drop_duplicates(subset=["op", "device"], ignore_index=True)
    transfers = pd.concat(transfer_frames, ignore_index=True).drop_duplicates(
        subset=["tensor", "src_device", "dst_device"], ignore_index=True
    )
    devices = sorted({d for _, _, t, _ in traces for d in t.devices})
    inputs: dict[str, list[str]] = {}
    for _, _, trace, _ in traces:
        for op, producers in trace.inputs.items():
            inputs[op] = list(dict.fromkeys([*inputs.get(op, []), *producers]))
    raw: dict[str, bytes] = dict(first.raw)
    for number, (_, _, trace, _) in enumerate(traces[1:], start=1):
        raw.update({f"instantiation{number}_{key}": data for key, data in trace.raw.items()})
    tasks: dict[str, dict[str, Any]] = {f"/job:{r.job}/task:{r.task}": {} for r in runs}
    for task, function, _, _ in traces:  # a worker's: the step's requests on a GPU worker
        tasks[task].setdefault("function", function)
        tasks[task].setdefault("gpu_requests", record.get("gpu_requests", {}).get(function, {}))
        tasks[task].setdefault("inputs_to_device", record.get("inputs_to_device", {}).get(function))
    raw[STRATEGY_TASKS_RAW] = json.dumps(
        {
            "strategy": STRATEGY,
            "tasks": tasks,
            "coordinator": "/job:chief/task:0",
            "scheduled": [f"/job:worker/task:{w}" for w in scheduled],
            "warmup": record.get("warmup", 0),
            "calls": record.get("calls", 0),
            "variables": record.get("variables", {}),
            "partitioner": record.get("partitioner", ""),
            "asked": record.get("asked", {}),
            **({"gpus_build": record["gpus_build"]} if "gpus_build" in record else {}),
        }
    ).encode()
    log = note + "".join(
        f"tfplace: /job:{run.job}/task:{run.task} ran "
        f"{name if (run.job, run.task) == COORDINATOR else 'tf.distribute.Server'}(); "
        f"its process printed:\n{run.log}"
        for run in runs
    )
    events = _events(served, ops, int(record.get("traced_from_us", 0)))
    if not events.empty:
        _add_times(ops, events)
    result = PlacementTrace(
        ops=ops,
        events=events if not events.empty else first.events.iloc[0:0],
        transfers=transfers,
        devices=devices,
        inputs=inputs,
        log=f"tfplace: {reason}\n{log}",
        source=name,
        mode="function",
        notes=[],
        facts=first.facts,
        raw=raw,
        mode_reason=reason,
        xla=first.xla.iloc[0:0],
    )
    result.notes = [
        _scheduling_note(scheduled, record),
        *_variable_notes(record),
        TIMED if not events.empty else NOT_TIMED,
    ]
    return result


def _worker_traces(
    runs: list[TaskRun], served: dict[tuple[str, int], Any], functions: list[str]
) -> list[tuple[str, str, PlacementTrace, dict[str, int]]]:
    """Per instantiation of the step on a worker: the worker (``/job:worker/task:1``), its
    function, the trace of its partition graphs (read as a RunMetadata's) and the bytes of
    the partitions' constants."""
    from .._sources.run_metadata import trace_from_run_metadata

    found = []
    for run in runs:
        if run.job == "worker":
            for function in functions:
                graphs = served[(run.job, run.task)].get("graphs", {})
                metadata, before = _instantiation(graphs, function)
                if metadata is not None:
                    trace = trace_from_run_metadata(metadata, before)
                    task = f"/job:{run.job}/task:{run.task}"
                    found.append((task, function, trace, _constant_bytes(metadata)))
    return found


def _with_bytes(transfers: pd.DataFrame, sizes: dict[str, int]) -> pd.DataFrame:
    """``transfers`` with the bytes ``sizes`` gives each tensor whose size is missing."""
    transfers = transfers.copy()
    transfers["bytes"] = pd.array(
        [
            sizes.get(tensor, pd.NA) if pd.isna(size) else size
            for tensor, size in zip(transfers["tensor"], transfers["bytes"], strict=True)
        ],
        dtype="Int64",
    )
    return transfers


def _events(
    served: dict[tuple[str, int], Any], ops: pd.DataFrame, traced_from_us: int
) -> pd.DataFrame:
    """The step's op executions each worker and ps task's profiler recorded in the traced
    calls (its host ops of the trace's ops on that task, from ``traced_from_us``, µs since the
    epoch, when the warm-up calls had ended), on one clock: µs from the first of any task."""
    from .._sources.xspace import HOST_PLANE, parse_xspace, profile_start_us, records_from_xspace

    on_task: dict[str, dict[str, str]] = {}
    for op, device in zip(ops["op"], ops["device"], strict=True):
        on_task.setdefault(task_of(device), {})[op] = device
    rows = []
    for (job, index), answer in served.items():
        space = answer.get("xspace")
        if not space:
            continue
        devices = on_task.get(f"/job:{job}/task:{index}", {})
        parsed = parse_xspace(space)  # read twice below, parsed once
        records = records_from_xspace(parsed)
        # TF 2.16: times from the profile's start, not the epoch (as function.trace_function)
        relative = min(records.start, default=traced_from_us) < traced_from_us // 2
        start_us = profile_start_us(parsed, answer["marked_ns"]) if relative else 0
        shift = start_us or 0
        for row, (op, lane) in enumerate(zip(records.op, records.lane, strict=True)):
            device, start = devices.get(op), records.start[row] + shift
            if device is not None and lane == HOST_PLANE and start >= traced_from_us:
                timing = (start, records.duration[row], records.label[row])
                rows.append((op, device, device, records.thread[row], *timing))
    events = pd.DataFrame(rows, columns=EVENTS_COLUMNS)
    if events.empty:
        return events
    events["start_us"] = (events["start_us"] - events["start_us"].min()).astype("int64")
    events["duration_us"] = events["duration_us"].astype("int64")
    events["thread"] = events["thread"].astype("int64")
    return events.sort_values("start_us", kind="stable", ignore_index=True)


def _add_times(ops: pd.DataFrame, events: pd.DataFrame) -> None:
    """Each op's first start, total duration and runs, from its events (in place)."""
    grouped = events.groupby(["op", "device"])
    times = pd.DataFrame(
        {
            "start_us": grouped["start_us"].min(),
            "duration_us": grouped["duration_us"].sum(),
            "runs": grouped.size(),
        }
    )
    keys = pd.MultiIndex.from_arrays([ops["op"], ops["device"]])
    found = times.reindex(keys)
    ops["start_us"] = found["start_us"].to_numpy(dtype=float)
    ops["duration_us"] = found["duration_us"].to_numpy(dtype=float)
    ops["runs"] = pd.array(found["runs"].to_numpy(dtype=float), dtype="Float64").astype("Int64")


# A task's log line of a function call its eager runtime ran (log_device_placement): absl's
# ("I0000 00:00:1796546864.843368  1695 execute.cc:1775] ...", TF 2.17 on) or TensorFlow's own
# ("2026-12-06 05:43:58.967647: I tensorflow/core/common_runtime/eager/execute.cc:1752] ...").
_EXECUTED = re.compile(
    r"(?P<hours>\d\d):(?P<minutes>\d\d):(?P<seconds>[\d.]+):? .*?execute\.cc:\d+\] "
    r"Executing op (?P<function>\S+) in device /job:worker/replica:\d+/task:(?P<task>\d+)/",
    re.MULTILINE,
)


def scheduled_on(runs: list[TaskRun], functions: list[str]) -> list[int]:
    """The worker that ran each call of the step the coordinator scheduled, in the order they
    started: each worker's TensorFlow logs a line per function call it runs."""
    calls = []
    for run in runs:
        if run.job != "worker":
            continue
        for found in _EXECUTED.finditer(run.log):
            if found["function"] in functions:
                clock = (
                    int(found["hours"]) * 3600
                    + int(found["minutes"]) * 60
                    + float(found["seconds"])
                )
                calls.append((clock, int(found["task"])))
    return [task for _, task in sorted(calls)]


def _instantiation(graphs: dict[str, str], function: str) -> tuple[Any, Any]:
    """The RunMetadata of ``function``'s partitions on a worker and its graph before the
    placer (TensorFlow's dumps, text protos); ``(None, None)`` if it did not instantiate it."""
    from google.protobuf import text_format
    from tensorflow.core.framework import graph_pb2
    from tensorflow.core.protobuf import config_pb2

    before, partitions = None, {}
    for file_name, text in sorted(graphs.items()):
        found = _DUMPED.match(file_name)
        if found is None:
            continue
        dumped, stage = found["function"], found["stage"]
        if stage == "before_placer" and dumped == function:
            before = text
        elif stage == "after_partition_passes" and dumped.startswith(f"{function}_partition_"):
            partitions[dumped] = text  # the last dump of each device's partition
    if not partitions:
        return None, None
    metadata = config_pb2.RunMetadata()
    for text in partitions.values():
        text_format.Parse(text, metadata.partition_graphs.add())
    graph = None
    if before is not None:
        graph = graph_pb2.GraphDef()
        text_format.Parse(before, graph)
    return metadata, graph


def _constant_bytes(metadata: Any) -> dict[str, int]:
    """The size of each constant of the partitions (the partitioner's dummy tensor sent along
    a control edge between tasks, ``.../ctrl/_N``, is one: an empty float)."""
    import tensorflow as tf

    sizes = {}
    for graph in metadata.partition_graphs:
        for node in graph.node:
            if node.op == "Const" and "value" in node.attr:
                value = node.attr["value"].tensor
                count = 1
                for dim in value.tensor_shape.dim:
                    count *= dim.size
                with contextlib.suppress(TypeError, ValueError):
                    sizes[f"{node.name}:0"] = count * tf.as_dtype(value.dtype).size
    return sizes


def _variable_reads(trace: PlacementTrace, variables: dict[str, Any]) -> dict[str, Any]:
    """Op -> the variable (shard) it is or uses: its ``_Arg`` and the ops reading or writing
    it (resource edges)."""
    found = {arg: info for arg, info in variables.items()}
    facts = trace.facts
    for op, resources in (facts.resource_inputs if facts is not None else {}).items():
        for resource in resources:
            if resource in variables:
                found.setdefault(op, variables[resource])
    return found


def _reason(
    op: str,
    why: str,
    device: str,
    scheduled: list[int],
    reads: dict[str, Any],
    record: dict[str, Any],
) -> str:
    """The op's reason, then the strategy's rule that put it on its task."""
    said = why.rstrip().rstrip(".")
    task = task_of(device)
    if task.startswith("/job:worker/"):
        workers = [f"/job:worker/task:{w}" for w in scheduled]
        return f"{said}. {scheduled_there(task, workers, int(record.get('warmup', 0)))}"
    variable = reads.get(op)
    if variable is None or task != task_of(variable["device"]):
        return f"{said}." if said else said
    return f"{said}. {ps_variable(variable, record.get('partitioner', ''))}"


_ASKED = re.compile(r"\ARequested (?P<device>\S+) with tf\.device")


def strategy_asked(why: str, scopes: list[dict[str, Any]] | None) -> str:
    """``why`` with its request credited to the strategy when no ``tf.device`` of the user's
    reaches the op (``scopes``: the op's device scopes, as the coordinator's graph of the step
    recorded them, ``ps_task.device_scopes``)."""
    found = _ASKED.match(why)
    if found is None or not scopes or any(scope["user"] for scope in scopes):
        return why
    return (
        f"Requested {found['device']} by {STRATEGY}, not by a tf.device of yours (its replica "
        "device on the worker: strategy.run runs the replica function under it, "
        f"strategy.reduce reduces there){why[found.end() :]}"
    )


def _scheduling_note(scheduled: list[int], record: dict[str, Any]) -> str:
    warmup = int(record.get("warmup", 0))
    calls = ", ".join(
        f"{n + 1}{' (warm-up)' if n < warmup else ''} on /job:worker/task:{w}"
        for n, w in enumerate(scheduled)
    )
    return (
        f"{STRATEGY}: the coordinator (/job:chief/task:0) scheduled the step {len(scheduled)} "
        f"times with ClusterCoordinator.schedule: call {calls}. Each worker that ran it placed "
        "and partitioned it once, over its own CPU and the ps tasks holding its variables."
    )


def _variable_notes(record: dict[str, Any]) -> list[str]:
    by_variable: dict[str, list[str]] = {}
    seen = set()
    for variables in record.get("variables", {}).values():
        for info in variables.values():
            if info["name"] in seen:
                continue
            seen.add(info["name"])
            by_variable.setdefault(info["variable"], []).append(task_of(info["device"]))
    if not by_variable:
        return []
    partitioner = record.get("partitioner")
    held = "; ".join(
        f"{v} on {', '.join(tasks)}" + (f" ({len(tasks)} shards)" if len(tasks) > 1 else "")
        for v, tasks in by_variable.items()
    )
    return [
        f"The step's variables on the {record.get('ps_tasks', 0)} ps task(s)"
        + (f", sharded by {partitioner}" if partitioner else "")
        + f": {held}."
    ]
