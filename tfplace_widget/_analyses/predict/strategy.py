"""Predicted placement of a step ``MultiWorkerMirroredStrategy`` ran on every worker (issue 36).

On a worker without a GPU the strategy makes one replica on the task's ``CPU:0`` and builds the
replica's ops under ``tf.device`` of it; on a worker with GPUs its local devices are the GPUs,
one replica per GPU, each built under ``tf.device`` of its GPU, and its variables are made on
those devices (``collective_all_reduce_strategy.py``, ``_initialize_local_devices``; each task
sees only its own devices: ``device_filters``). So the traced requests do not say what a GPU
worker asks for, but they do once the strategy's own pin is made the GPU's: with one GPU per
worker, each task's step is the traced step with the replica device ``GPU:0`` in place of
``CPU:0`` (the ops the user's own ``tf.device`` reaches ask for what its scopes give with that
replica device, which each task recorded: ``gpu_requests``), placed by the predictor
(:func:`.result.predict_trace`) on that task's ``CPU:0`` and ``GPU:0``, and the tasks' predictions
are put side by side. More GPUs per worker make more replicas (the step's ops once per GPU and
a local all-reduce between them), a graph the trace does not hold: refused, saying what
TensorFlow builds then (:func:`_more_gpus`). Built without the GPUs (a cluster resolver
reporting them), TensorFlow puts each variable copy's optimizer slots and updates on the CPU
soft placement made the copy on, and cannot run it (its all-reduces hang): no trace on CPU-only
workers gives it. Given the setup with ``cluster=``, each task builds it with stand-in CPUs for
the copies, and :mod:`.mwms_gpus` predicts that build.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..._model.devices import canonical_device, short_device
from ..._model.errors import TraceError
from ..._model.kernel_registry import KernelRegistry
from ..._model.trace import STRATEGY_TASKS_RAW, PlacementTrace
from ..resources import pinned_arguments
from .parameter_servers import PSS, predict_ps_trace
from .result import predict_trace
from .tasks import assembled, gpu_words, more_gpus_refused, older_trace, task_prefix

MWMS = "MultiWorkerMirroredStrategy"


def predict_strategy_trace(
    trace: Any, gpus: int, soft: bool, registry: KernelRegistry | None = None
) -> PlacementTrace:
    """The prediction of a trace across tasks under ``MultiWorkerMirroredStrategy`` with
    ``gpus`` GPUs on each worker (0 or 1): each task's step as the strategy would build it
    there, placed on the task's devices; under ``ParameterServerStrategy``,
    :func:`.parameter_servers.predict_ps_trace`; a ``TraceError`` for another strategy or more
    GPUs."""
    data = json.loads(trace.raw[STRATEGY_TASKS_RAW])
    strategy = str(data.get("strategy", ""))
    if strategy == PSS:
        return predict_ps_trace(trace, data, gpus, soft, registry)
    if strategy != MWMS:
        raise TraceError(
            f"predict_placement cannot predict a trace of {strategy or 'this strategy'} across "
            f"tasks yet (only {MWMS}'s and {PSS}'s)."
        )
    tasks = data.get("tasks", {})
    if gpus > 1:
        raise _more_gpus(gpus, list(tasks))
    if gpus and any("gpu_requests" not in info for info in tasks.values()):
        raise older_trace(MWMS)
    facts_task = task_prefix(next(iter(tasks)))  # the merged trace's facts are its first task's
    parts = [
        _predict_task(trace, task_prefix(task), facts_task, info, gpus, soft, registry)
        for task, info in tasks.items()
    ]
    ops = pd.concat([p.ops for p in parts], ignore_index=True)
    notes = [
        f"Predicted, not run: where TensorFlow would put each op of the step {MWMS} ran on "
        f"{len(parts)} workers ({', '.join(tasks)}) with {gpu_words(gpus)} on each worker (soft "
        f"placement {'on' if soft else 'off'})"
        + (
            ": the strategy's replica on each worker's GPU:0 in place of its CPU:0, the "
            "user's own tf.device requests kept, each task's step placed on that task's "
            "devices."
            if gpus
            else ": the strategy's replica on each worker's CPU:0, as traced."
        ),
    ]
    if gpus:
        notes.append(
            "Not predicted: the strategy's input pipeline outside the step (with "
            "InputOptions.experimental_fetch_to_device, on by default, it copies each batch to "
            "the replica's device ahead of the step) and what the all-reduces would send "
            "between GPUs."
        )
    return assembled(
        trace, parts, ops, pd.concat([p.transfers for p in parts], ignore_index=True), notes, gpus
    )


def _more_gpus(gpus: int, tasks: list[str]) -> TraceError:
    """Why ``gpus`` GPUs per worker (2 or more) on the ``tasks`` are not predicted: what
    the strategy builds then (``collective_all_reduce_strategy.py``: ``worker_devices`` one per
    GPU, ``_create_variable`` a copy per device, ``CollectiveAllReduce`` over
    ``len(local_devices) * num_workers``; ``num_replicas_in_sync`` the same product), and
    the call that predicts it from the setup, on a local cluster of the same tasks."""
    workers = len(tasks)
    jobs = Counter(task.split("/")[1].removeprefix("job:") for task in tasks)
    cluster = ",".join(f"{job}={count}" for job, count in sorted(jobs.items()))
    return more_gpus_refused(
        MWMS,
        gpus,
        f"the strategy makes {gpus} replicas on it, one per GPU (its worker_devices "
        f"/job:worker/task:K/device:GPU:0 to GPU:{gpus - 1}): it builds the step's ops once "
        "per replica under tf.device of its GPU, makes each variable of its scope once per "
        "replica, and all-reduces with a CollectiveReduceV2 on each GPU in a group of "
        f"{gpus} GPUs x {workers} workers = {gpus * workers} (num_replicas_in_sync "
        f"{gpus * workers}, not {workers}: per-replica batches, and so the step's shapes, "
        "change too).",
        f"TensorFlow builds it only when the strategy sees {gpus} GPUs on each worker; a "
        "worker without them cannot run that step (its replicas fall back onto one CPU and "
        "their all-reduces never complete), and left to soft placement builds it with other "
        "devices wherever a device is read from a variable made there (each copy's "
        "optimizer slots and updates, made beside the copy, on the CPU)",
        f"Pass the setup instead, predict_placement(setup, gpus={gpus}, "
        f"cluster='local:{cluster}', mode='function'): each task of the local cluster "
        f"then has TensorFlow build (not run) the step with {gpus} GPUs, and that graph is "
        "predicted; or predict_placement(trace, gpus=1) for one GPU per worker.",
    )


def _predict_task(
    trace: Any,
    task: str,
    facts_task: str,
    info: Mapping[str, Any],
    gpus: int,
    soft: bool,
    registry: KernelRegistry | None,
) -> PlacementTrace:
    """One task's prediction: its rows of ``trace``, the step's requests as the strategy makes
    them on a worker with ``gpus`` GPUs, its own devices (``info``: what the task recorded)."""
    requests = info.get("gpu_requests", {})
    cpu, gpu = f"{task}/device:CPU:0", f"{task}/device:GPU:0"
    replica = gpu if gpus else cpu
    facts = trace.facts
    requested, whose = {}, {}
    for op, request in facts.requested.items():
        traced = request.replace(facts_task + "/", task + "/", 1) if request else request
        if op in requests:
            asked = canonical_device(requests[op]) if gpus else traced
            requested[op], whose[op] = asked, "user"
        elif traced == cpu:
            requested[op], whose[op] = replica, "strategy"
        else:
            requested[op] = traced
    part = copy.copy(trace)
    part.__dict__.pop("_findings_cache", None)
    part.ops = trace.ops[trace.ops["device"].astype(str).str.startswith(task + "/")]
    part.devices = [d for d in trace.devices if d.startswith(task + "/")]
    part.raw = {k: v for k, v in trace.raw.items() if k != STRATEGY_TASKS_RAW}
    part.facts = dataclasses.replace(facts, requested=requested)
    pins = _on_the_replica(part, replica, gpus, info.get("inputs_to_device")) if gpus else {}
    predicted = predict_trace(part, gpus, soft, registry=registry, pins=pins)
    copy_of = f"this is /job:{task.split('/job:')[1].replace('/replica:0', '')}'s copy"
    reasons = []
    for op, reason in zip(predicted.ops["op"], predicted.ops["reason"], strict=True):
        reason = str(reason).rstrip()
        kind = whose.get(str(op))
        if kind == "strategy" and gpus:
            reason += (
                f" Its request is {MWMS}'s replica on this worker's GPU:0: on a worker with a "
                f"GPU the strategy builds the replica under tf.device({short_device(gpu)}) "
                f"(traced here on {short_device(cpu)}, the worker having none); {copy_of}."
            )
        elif kind == "user" and gpus:
            reason += (
                f" Its request comes from the user's own tf.device inside {MWMS}'s replica, not "
                f"the strategy's: with the replica on this worker's GPU:0 it still asks for "
                f"{short_device(requested[op])}; {copy_of}."
            )
        else:
            reason += f" The step runs on every worker under {MWMS} ({copy_of})."
        reasons.append(reason)
    predicted.ops["reason"] = pd.array(reasons, dtype="str")
    return predicted


# The ops that read a tf.data iterator inside the step.
_ITERATOR_READS = frozenset({"IteratorGetNext", "IteratorGetNextAsOptional", "IteratorGetNextSync"})


def _on_the_replica(
    part: Any, replica: str, gpus: int, inputs_to_device: bool | None
) -> dict[str, tuple[str, str]]:
    """The step's resource arguments the strategy makes on the task's replica device: the
    variables of its scope (model, optimizer, metrics: the GPU on a worker with one, where a
    variable made outside it with no tf.device goes too) and, when its distributed iterator
    fetches to the device (``inputs_to_device``), the per-replica iterator the step reads
    (``OwnedMultiDeviceIterator`` makes it under ``tf.device`` of each replica device). The
    other resources (a multi-device iterator's own handle, tables) stay where they were."""
    facts = part.facts
    args = [name for name, op_type in facts.types.items() if op_type == "_Arg"]
    pinned = pinned_arguments(part, facts, args, gpus, replica)
    where = f"this worker's GPU:0 ({short_device(replica)})"
    found = {
        name: (
            replica,
            f"A variable's handle: {MWMS} makes the variables of its scope on its replica "
            f"device, {where}, where the runtime pins the argument before the placer runs.",
        )
        for name, argument in pinned.items()
        if argument.assumed
    }
    if inputs_to_device:
        read = {
            producer
            for op, producers in facts.resource_inputs.items()
            if facts.types.get(op) in _ITERATOR_READS
            for producer in producers
            if facts.types.get(producer) == "_Arg"
        }
        for name in read:
            found[name] = (
                replica,
                f"The per-replica tf.data iterator the step reads: {MWMS}'s distributed "
                "iterator makes it on the replica device (InputOptions."
                f"experimental_fetch_to_device, on by default), {where}, and prefetches each "
                "batch there; the runtime pins the argument there before the placer runs.",
            )
    return found
