"""Predicted placement of ``MultiWorkerMirroredStrategy`` with 2 or more GPUs per worker, from
the step TensorFlow itself built that way on each task (issue 36).

A CPU-only trace holds the one-replica step; with N GPUs the strategy builds another graph
(N replicas per worker, a copy of each variable per replica, collectives in groups of N x
workers, per-replica batches). ``predict_placement(fn, gpus=N, cluster="local:worker=2")``
has each task of the local cluster build that graph, not run
(:mod:`tfplace_widget._tracing.mwms_gpus`), and hands its facts here (``builds``): each task's
graph is placed by the predictor's own rules (:func:`.result.predict_trace`: the kernel
registry, soft placement, colocation and resource edges) on the task's ``CPU:0`` and its N
GPUs, its requests as TensorFlow built them, each stand-in CPU of a variable copy read as the
GPU it stands for (``hosts``), and its captured inputs pinned where a GPU worker has them
(``pins``: each variable copy on its replica's GPU, the per-replica iterator beside it).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..._model.devices import short_device
from ..._model.graphfacts import GraphFacts
from ..._model.kernel_registry import KernelRegistry
from ..._model.trace import STRATEGY_TASKS_RAW, PlacementTrace
from .devices import gpu_devices
from .result import predict_trace
from .tasks import assembled, gpu_words, task_prefix, unplaced

MWMS = "MultiWorkerMirroredStrategy"
NOT_MODELLED = (
    "Not modelled: times (nothing ran), the input pipeline outside the step, and how the "
    "all-reduces move data between GPUs and workers (NCCL or ring: the strategy's "
    "CommunicationOptions pick it at run time)."
)


def predict_built_mwms(
    trace: Any,
    builds: Mapping[str, tuple[GraphFacts, Mapping[str, Any]]],
    gpus: int,
    soft: bool,
    registry: KernelRegistry | None = None,
) -> PlacementTrace:
    """The prediction of ``trace`` (a ``MultiWorkerMirroredStrategy`` trace across tasks) with
    ``gpus`` GPUs on each worker: per task (``builds``: its ``/job:worker/task:K`` -> the facts
    of the step TensorFlow built with ``gpus`` GPUs there, and what the build recorded), every
    op of that graph placed on the task's devices, with why."""
    parts = [
        _predict_task(trace, task_prefix(task), facts, info, gpus, soft, registry)
        for task, (facts, info) in builds.items()
    ]
    first = next(iter(builds.values()))[1]
    replicas = first.get("replicas")
    notes = [
        f"Predicted, not run: where TensorFlow would put each op of the step {MWMS} builds on "
        f"{len(parts)} workers ({', '.join(builds)}) with {gpu_words(gpus)} on each worker "
        f"(soft placement {'on' if soft else 'off'}). TensorFlow built this graph on each "
        f"task of the local cluster with the strategy seeing {gpu_words(gpus)} ({gpus} "
        f"replicas per worker, num_replicas_in_sync {replicas}, a copy of each variable per "
        "replica), without running it (a worker without the GPUs cannot); each op is placed "
        "by the placer's rules on the task's CPU:0 and its GPUs.",
        NOT_MODELLED,
    ]
    result = assembled(
        trace,
        parts,
        pd.concat([p.ops for p in parts], ignore_index=True),
        pd.concat([p.transfers for p in parts], ignore_index=True),
        notes,
        gpus,
    )
    # the built graph's facts and edges (every task built the same names), not the traced
    # step's: the findings follow replica 2's tensors through them
    if parts:
        result.facts, result.inputs = parts[0].facts, dict(parts[0].inputs)
    return result


def built_tasks(trace: Any, data: Mapping[str, Any], gpus: int) -> dict[str, Mapping[str, Any]]:
    """Each task's record of its build with ``gpus`` GPUs in the trace's strategy record
    (``data``); ``{}`` unless every task has one. A record of a build that failed holds
    ``error`` (what TensorFlow raised), which the caller reports."""
    tasks = data.get("tasks", {})
    found = {task: info.get("gpus_build") for task, info in tasks.items()}
    if not found or any(b is None or b.get("gpus", gpus) != gpus for b in found.values()):
        return {}
    return found


def _predict_task(
    trace: Any,
    task: str,
    facts: GraphFacts,
    info: Mapping[str, Any],
    gpus: int,
    soft: bool,
    registry: KernelRegistry | None,
) -> PlacementTrace:
    """One task's built step placed on its ``CPU:0`` and ``gpus`` GPUs."""
    hosts = dict(info.get("hosts", {}))
    requested = {op: hosts.get(device, device) for op, device in facts.requested.items()}
    cpu = f"{task}/device:CPU:0"
    devices = [cpu, *gpu_devices(gpus, task)]
    part = unplaced(trace, dataclasses.replace(facts, requested=requested), [cpu])
    pins = {
        name: (device, _pin_reason(kind, device, info))
        for name, (device, kind) in info.get("pins", {}).items()
    }
    predicted = predict_trace(
        part, gpus, soft, registry=registry, pins=pins, devices=devices, local_task=""
    )
    replica_of = {_canonical(d, task): k for k, d in enumerate(info.get("worker_devices", []))}
    collectives = info.get("collectives", {})
    stand_ins = {gpu: host for host, gpu in hosts.items()}
    whose = task.replace("/replica:0", "")
    reasons = []
    for op, reason in zip(predicted.ops["op"], predicted.ops["reason"], strict=True):
        said = str(reason).rstrip()
        asked = requested.get(str(op), "")
        built = facts.requested.get(str(op), "")
        k = replica_of.get(asked)
        if k is not None and built in stand_ins.values():
            said += (
                f" Built beside replica {k + 1} of {gpus}'s copy of a variable (TensorFlow "
                f"builds it under tf.device of the copy, which the strategy makes on "
                f"{short_device(asked)}; built here on {short_device(built)}, standing in "
                "for it)."
            )
        elif k is not None:
            said += (
                f" Built for replica {k + 1} of {gpus}, on {asked} by the strategy's "
                f"worker_devices ({MWMS} builds each replica's ops under tf.device of its GPU)."
            )
        group = collectives.get(str(op))
        if group and "group_size" in group:
            said += (
                f" A {group['type']} in a group of {group['group_size']} ({gpus} GPUs x "
                f"{group['group_size'] // max(gpus, 1)} workers), exchanging a tensor of "
                f"shape {group.get('shape')}."
            )
        reasons.append(
            f"{said} Built by TensorFlow with {gpu_words(gpus)}, not run ({whose}'s copy)."
        )
    predicted.ops["reason"] = pd.array(reasons, dtype="str")
    return predicted


def _pin_reason(kind: str, device: str, info: Mapping[str, Any]) -> str:
    """Why a captured input of the built step is on ``device`` on a GPU worker."""
    where = short_device(device)
    if kind == "variable":
        return (
            f"A variable copy's handle: {MWMS} makes each variable once per replica, this copy "
            f"under tf.device({where}) (its replica's GPU, or beside the copy it is a slot "
            "of), where the runtime pins the argument before the placer runs."
        )
    if kind == "iterator":
        return (
            f"The per-replica tf.data iterator the step reads: {MWMS}'s distributed iterator "
            f"makes it on the replica's device, {where} (InputOptions."
            "experimental_fetch_to_device, on by default)."
        )
    if kind == "resource":
        return (
            f"A resource {MWMS} makes for this replica under tf.device({where}) (e.g. its "
            "collectives' ordering token), where the runtime pins the argument before the "
            "placer runs."
        )
    return f"An input of the step (an argument or a captured value), where it was made: {where}."


def _canonical(device: str, task: str) -> str:
    """``/job:worker/task:0/device:GPU:1`` -> ``/job:worker/replica:0/task:0/device:GPU:1``."""
    _, _, tail = device.partition("/device:")
    return f"{task}/device:{tail}" if tail else device


def strategy_record(trace: Any) -> Mapping[str, Any]:
    """The trace's strategy record (``raw[STRATEGY_TASKS_RAW]``), ``{}`` without one."""
    data = getattr(trace, "raw", {}).get(STRATEGY_TASKS_RAW)
    return json.loads(data) if data else {}
