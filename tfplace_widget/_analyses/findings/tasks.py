"""The findings of a step a ``tf.distribute`` strategy ran on every task of a cluster
(``MultiWorkerMirroredStrategy``), found task by task.

Every worker runs its own copy of the step, under the same op names: one set of lookups over
all tasks would mix the copies (task 1's request read as task 0's, a copy between two devices
of one task taken for one between tasks). So each task's rows form a trace of their own, the
rules run on each, and a finding every task has is told once, naming the tasks it holds on;
the copies between tasks (the network) are found over the whole trace.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ..._model.devices import task_of
from ..._model.trace import STRATEGY_TASKS_RAW, strategy_of
from .base import Finding

# The attribute a task's part of a strategy trace carries: its task (``/job:worker/task:1``).
PART_TASK = "strategy_task"


def is_split(trace: Any) -> bool:
    """Whether ``trace``'s findings are found per task: a strategy's trace across tasks, not
    one task's part of it."""
    return bool(strategy_of(trace)) and not getattr(trace, PART_TASK, "")


def task_parts(trace: Any) -> list[tuple[str, Any]]:
    """Per task of ``trace`` (in the order of its devices): the task and a shallow copy of the
    trace holding only that task's ops, events, copies, memory and devices."""
    tasks = list(dict.fromkeys(task_of(device) for device in trace.devices))
    parts = []
    for task in tasks:
        devices = [d for d in trace.devices if task_of(d) == task]
        part = copy.copy(trace)
        part.__dict__.pop("_findings_cache", None)
        part.devices = devices
        part.ops = _rows_on(trace.ops, "device", devices)
        part.events = _rows_on(trace.events, "device", devices)
        transfers = trace.transfers
        if transfers is not None:
            within = transfers["src_device"].isin(devices) & transfers["dst_device"].isin(devices)
            part.transfers = transfers[within].reset_index(drop=True)
        part.memory = _rows_on(trace.memory, "device", devices)
        setattr(part, PART_TASK, task)
        parts.append((task, part))
    return parts


def users_requests(trace: Any) -> set[str] | None:
    """In one task's part of a strategy trace, the ops the user's own ``tf.device`` asked a
    device for (as the task recorded them): the strategy puts every other op of its step on
    its replica device, a request the user did not write. None for any other trace."""
    task = getattr(trace, PART_TASK, "")
    if not task:
        return None
    tasks = json.loads(trace.raw[STRATEGY_TASKS_RAW]).get("tasks", {})
    return set(tasks.get(task, {}).get("gpu_requests", {}))


def merged(per_task: list[tuple[str, list[Finding]]], strategy: str) -> list[Finding]:
    """The tasks' findings, one per (kind, predicted, ops): the first task's, naming the other
    tasks that have it (``evidence["tasks"]``: how many), material when it is on any task."""
    kept: dict[tuple, tuple[Finding, list[str]]] = {}
    for task, found in per_task:
        for finding in found:
            key = (finding.kind, finding.predicted, frozenset(finding.ops))
            if key not in kept:
                kept[key] = (finding, [task])
                continue
            first, tasks = kept[key]
            tasks.append(task)
            material = max(first.evidence.get("material", 0), finding.evidence.get("material", 0))
            first.evidence["material"] = material
    why = (
        f"{strategy} runs this step on every worker"
        if strategy != "ParameterServerStrategy"
        else "the coordinator scheduled the step there too"
    )
    findings = []
    for finding, tasks in kept.values():
        finding.evidence["tasks"] = len(tasks)
        if len(tasks) > 1:
            finding.message = f"{finding.message} The same on {', '.join(tasks[1:])}: {why}."
        findings.append(finding)
    return findings


def _rows_on(frame: Any, column: str, devices: list[str]) -> Any:
    if frame is None or column not in frame:
        return frame
    return frame[frame[column].isin(devices)].reset_index(drop=True)
