"""Findings about a ``ParameterServerStrategy`` trace's variables on the ps tasks:
``unbalanced_ps`` (one ps task serves much more than its share of the step's variable reads and
updates, so its network link bounds each step), ``overridden_request`` (a ``tf.device`` of the
user's around a variable's creation that the strategy's own scope overrode), and the names of the variables behind the
handles a step's graph reads them through (for ``cross_task_transfer``'s words).

What the strategy did is the coordinator's record (``trace.raw[STRATEGY_TASKS_RAW]``): per
argument of the step's function that is a variable's handle, the variable's name, device,
shape, bytes, and its shard and shard count when a ``variable_partitioner`` split it; the
partitioner's class; the ps tasks. The bytes each ps task serves a step are the trace's own:
the cross-task transfers of the partition graphs, with the bytes of their static shapes.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pandas as pd

from ..._model.devices import parse_device, task_of
from ..._model.trace import STRATEGY_TASKS_RAW, strategy_of
from ..summary import format_bytes
from .base import Context, Finding, listed_names
from .fixes import edit_fix

PS_STRATEGY = "ParameterServerStrategy"
# One ps task is unbalanced when it serves at least this many times the mean of the ps tasks'
# bytes a step (reads sent plus updates received, for one step on one worker)...
UNBALANCED_SHARE = 1.5
# ... and at least this many bytes a step: 1 MB is about a millisecond on a 10 Gb/s link (10 ms
# on 1 Gb/s), as cross_task_transfer's medium; below it the round trips, not the bytes, cost.
UNBALANCED_BYTES = 1_000_000
_PARTITIONERS = "tf.distribute.experimental.partitioners"


def ps_record(trace: Any) -> dict[str, Any]:
    """The coordinator's record of a ``ParameterServerStrategy`` trace; ``{}`` for any other."""
    if strategy_of(trace) != PS_STRATEGY:
        return {}
    return json.loads(trace.raw[STRATEGY_TASKS_RAW])


def handle_variables(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per handle argument of the step's functions (``..._resource``): its variable or shard."""
    return {
        arg: info for found in record.get("variables", {}).values() for arg, info in found.items()
    }


def variable_label(info: dict[str, Any]) -> str:
    """``w1/part_0 (shard 1 of 2 of w1, 1.3 kB)`` or ``b1 (256 B)``."""
    size = format_bytes(int(info["bytes"]))
    if "shard" in info:
        return f"{info['name']} (shard {info['shard'] + 1} of {info['shards']} of {info['variable']}, {size})"
    return f"{info['name']} ({size})"


def find_unbalanced_ps(
    context: Context, share: float = UNBALANCED_SHARE, least: int = UNBALANCED_BYTES
) -> list[Finding]:
    """The ps task that serves ``share`` times the mean of the ps tasks' bytes a step or more,
    and ``least`` bytes a step or more: which ps task, its share, the variables and shards it
    holds, and why the strategy put them there."""
    record = ps_record(context.trace)
    tasks = [t for t in record.get("tasks", {}) if t.startswith("/job:ps/")]
    if len(tasks) < 2:
        return []
    served = _served_a_step(context, tasks)
    total = sum(served.values())
    if not total:
        return []
    mean = total / len(tasks)
    heavy = max(tasks, key=lambda t: served[t])
    moved = served[heavy]
    if moved < share * mean or moved < least:
        return []
    held = _held(record, tasks)
    partitioner = str(record.get("partitioner", ""))
    fix, user_fix = _fix(held[heavy], partitioner, len(tasks))
    others = "; ".join(
        f"{t} {format_bytes(served[t])}, holding {_labels(held[t])}" for t in tasks if t != heavy
    )
    message = (
        f"{heavy} serves {format_bytes(moved)} a step of the ps tasks' {format_bytes(total)} "
        f"of variable reads and updates ({moved / total:.0%}; the mean share of the "
        f"{len(tasks)} ps tasks is {1 / len(tasks):.0%}), so its network link bounds each step "
        f"(the others: {others}). It holds {_labels(held[heavy])}. Why: "
        f"{_why(held[heavy], partitioner, record)}. {fix}"
    )
    ops = [
        op
        for op, device, op_type in zip(
            context.ops["op"], context.ops["device"], context.ops["type"], strict=True
        )
        if task_of(device) == heavy and not context.is_runtime(op) and op_type != "_Arg"
    ]
    evidence = {
        "bytes": moved,
        "share": round(moved / total, 4),
        "mean_bytes": round(mean, 1),
        "ps_tasks": len(tasks),
        "held_bytes": sum(int(i["bytes"]) for i in held[heavy]),
        "user_fix": user_fix,
        "material": 1,
    }
    severity = "high" if moved >= 10 * least else "medium"
    data = edit_fix(
        f"make the strategy with variable_partitioner={_PARTITIONERS}.FixedShardsPartitioner("
        f"num_shards={len(tasks)}): each variable is split into {len(tasks)} shards, one per "
        "ps task",
        "a variable_partitioner is an argument of the strategy, made in your setup, not a "
        "device request",
    )
    return [
        Finding(
            "unbalanced_ps",
            severity,
            ops,
            message,
            evidence,
            (0.0, float(moved), float(len(ops))),
            fix=data if user_fix else None,
        )
    ]


def _served_a_step(context: Context, tasks: list[str]) -> dict[str, int]:
    """Bytes each ps task sends and receives in one step: over the transfers between it and
    one worker, the largest over the workers that ran the step (each ran all of it)."""
    transfers = context.trace.transfers
    per: dict[tuple[str, str], int] = {}
    if transfers is not None and not transfers.empty:
        for src, dst, size in zip(
            transfers["src_device"], transfers["dst_device"], transfers["bytes"], strict=True
        ):
            src_task, dst_task = task_of(src), task_of(dst)
            if pd.isna(size) or src_task == dst_task:  # a prediction's unknown size; a task's own
                continue
            ps, worker = (src_task, dst_task) if src_task in tasks else (dst_task, src_task)
            if ps in tasks and worker.startswith("/job:worker/"):
                per[(ps, worker)] = per.get((ps, worker), 0) + int(size)
    return {t: max((n for (ps, _), n in per.items() if ps == t), default=0) for t in tasks}


def _held(record: dict[str, Any], tasks: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The variables and shards each ps task holds, by name, once each."""
    held: dict[str, list[dict[str, Any]]] = {t: [] for t in tasks}
    seen = set()
    for info in handle_variables(record).values():
        task = task_of(info["device"])
        if info["name"] in seen or task not in held:
            continue
        seen.add(info["name"])
        held[task].append(info)
    return held


def _labels(infos: list[dict[str, Any]]) -> str:
    return listed_names([variable_label(i) for i in infos]) or "no variable of the step"


def _why(infos: list[dict[str, Any]], partitioner: str, record: dict[str, Any]) -> str:
    whole = [i["name"] for i in infos if "shard" not in i]
    rule = (
        f"{PS_STRATEGY} deals variables and shards out round-robin over the ps tasks in the "
        "order they are created"
    )
    if not partitioner:
        return (
            f"the strategy has no variable_partitioner, so each variable goes whole to one ps "
            f"task: {rule} (the creation order: {_order(record)})"
        )
    if whole:
        return (
            f"its {partitioner} left {listed_names(whole)} whole (one shard), and {rule} "
            f"(the creation order: {_order(record)})"
        )
    return (
        f"{partitioner} split the variables into shards of unequal sizes or counts, and {rule} "
        f"(the creation order: {_order(record)})"
    )


def _order(record: dict[str, Any]) -> str:
    """The step's variables and shards in the order the ps tasks got them, with their task."""
    infos = {i["name"]: i for i in handle_variables(record).values()}
    infos = dict(sorted(infos.items(), key=lambda item: item[1].get("created", -1)))
    return ", ".join(
        f"{name} -> {task_of(info['device']).removeprefix('/job:')}" for name, info in infos.items()
    )


def _fix(infos: list[dict[str, Any]], partitioner: str, count: int) -> tuple[str, int]:
    """The fix in words, and whether it is one that was tried (``user_fix``)."""
    if not partitioner:
        return (
            f"Fix: make the strategy with variable_partitioner={_PARTITIONERS}."
            f"FixedShardsPartitioner(num_shards={count}), which splits every variable into "
            f"{count} shards, one on each ps task (tried: tfplace's tests trace a program "
            "like this one with it, and the ps tasks then serve equal shares)."
        ), 1
    return (
        f"A partitioner that splits the large variables into {count} shards (a multiple of "
        f"the {count} ps tasks: {_PARTITIONERS}.FixedShardsPartitioner(num_shards={count}), "
        f"or MinSizePartitioner(max_shards={count}) with a min_shard_bytes under the "
        "variables' sizes) would spread them; untried on this program, so not offered as a fix."
    ), 0


def ps_words(
    record: dict[str, Any], args: list[str], task: str, reads: bool, large: int
) -> tuple[str, bool]:
    """What ``cross_task_transfer`` says of a ps task's variable reads (``reads``) or updates
    crossing to or from ``task``: the variables by name (``args``: the handles the step's
    graph takes them through), and the advice to partition only those not partitioned yet of
    ``large`` bytes or more when there are ps tasks to spread them over; whether it advised."""
    held = handle_variables(record)
    infos = list({held[a]["name"]: held[a] for a in args if a in held}.values())
    names = listed_names([variable_label(i) for i in infos]) or listed_names(args)
    what = (
        f"reads of the variables on {task} ({names}), sent every step: {PS_STRATEGY} keeps "
        "the variables on the ps tasks, and each step the coordinator schedules reads them"
        if reads
        else f"updates of the variables on {task} ({names}), sent every step: each step the "
        "coordinator schedules sends its updates to the ps tasks that hold the variables"
    )
    ps_tasks = sum(t.startswith("/job:ps/") for t in record.get("tasks", {}))
    whole = [i for i in infos if "shard" not in i and int(i["bytes"]) >= large]
    if whole and ps_tasks > 1:
        return (
            f"{what}. Partition {listed_names([variable_label(i) for i in whole])} over the "
            f"{ps_tasks} ps tasks (variable_partitioner={_PARTITIONERS}.FixedShardsPartitioner("
            f"num_shards={ps_tasks}) of {PS_STRATEGY}) so that no one ps task "
            f"{'sends' if reads else 'receives'} {'them' if len(whole) > 1 else 'it'} whole"
        ), True
    sharded = sorted({i["variable"] for i in infos if "shard" in i})
    said = []
    if sharded:
        partitioner = record.get("partitioner") or "the variable_partitioner"
        said.append(f"{listed_names(sharded)} already split over the ps tasks by {partitioner}")
    small = [i["name"] for i in infos if "shard" not in i]
    if small and ps_tasks > 1:
        each = " each" if len(small) > 1 else ""
        said.append(f"{listed_names(small)} whole, under {format_bytes(large)}{each}")
    elif small:
        said.append(f"one ps task holds {listed_names(small)}: no shard could go elsewhere")
    return (
        f"{what} ({'; '.join(said)}). This is the strategy's parameter traffic: no placement "
        "of yours removes it"
    ), False


def find_overridden_requests(context: Context) -> list[Finding]:
    """A ``tf.device`` of the user's around a variable's creation (the coordinator's record
    of it, ``asked``) that names another job, task or device than the one the variable is on:
    the strategy's own scope, inside the user's, decided. One finding per request (its
    device, file and line), naming the variables and shards it did not move."""
    record = ps_record(context.trace)
    asked = record.get("asked", {})
    if not asked:
        return []
    handles: dict[str, list[str]] = {}
    infos: dict[str, dict[str, Any]] = {}
    for arg, info in handle_variables(record).items():
        handles.setdefault(info["name"], []).append(arg)
        infos[info["name"]] = info
    by_request: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for name, request in asked.items():
        info = infos.get(name)
        if info is not None and not _lands_on(request["device"], info["device"]):
            key = (request["device"], request["file"], int(request["line"]))
            by_request.setdefault(key, []).append(info)
    present = set(context.type_of)
    findings = []
    for (device, path, line), moved in by_request.items():
        where = "; ".join(
            f"{variable_label(i)} on {task_of(i['device'])}" for i in sorted(moved, key=_created)
        )
        message = (
            f"Your tf.device({device!r}) around the creation of "
            f"{listed_names([i['name'] for i in moved])} ({os.path.basename(path)}:{line}) did "
            f"not place {'it' if len(moved) == 1 else 'them'}: {where}. {PS_STRATEGY}'s "
            "variable creator opens its own device scope, /job:ps/task:<creation index mod the "
            "number of ps tasks>/device:CPU:0, inside yours, so it deals every variable and "
            "shard out round-robin over the ps tasks in creation order whatever tf.device is "
            "around it (tensorflow#56416). Under this strategy a variable's ps task follows "
            "from the order the variables are created in (and the variable_partitioner's "
            "shards), not from tf.device: drop the request, or change the creation order"
        )
        ops = [a for i in moved for a in handles.get(i["name"], []) if a in present]
        evidence = {"variables": len(moved), "user_fix": 0, "material": 1}
        findings.append(
            Finding(
                "overridden_request",
                "medium",
                ops,
                message + " (untried here).",
                evidence,
                (0.0, float(sum(int(i["bytes"]) for i in moved)), float(len(moved))),
            )
        )
    return findings


def _created(info: dict[str, Any]) -> int:
    return int(info.get("created", -1))


def _lands_on(request: str, device: str) -> bool:
    """Whether ``device`` is one the request ``request`` names (every field it sets)."""
    try:
        return parse_device(request).matches(parse_device(device))
    except ValueError:  # a request TensorFlow took and this parser does not: no claim
        return True
