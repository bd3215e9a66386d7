"""Predicted placement of a step ``ParameterServerStrategy`` ran on its workers (issue 36).

The coordinator sends the step to a worker under ``tf.device("/job:worker/replica:0/task:N")``
(``cluster_coordinator.py``, ``Closure.execute_on``); the worker places it over its own
devices and the ps tasks' (its device filters hide the other workers). The strategy counts
the workers' GPUs (``_set_num_gpus``) and makes them its ``worker_devices``: ``/device:CPU:0``
without one, ``/device:GPU:0`` with one, and ``strategy.run`` builds the replica under
``tf.device`` of it (``mirrored_run``). Its variables are made under
``tf.device("/job:ps/task:K/device:CPU:0")`` whatever the workers have
(``_create_variable_round_robin``), so they, and the reads and updates that use them, stay on
the ps tasks' CPU:0. So each worker's step with one GPU is the traced step with the replica's
``/device:CPU:0`` made ``/device:GPU:0`` (the user's own ``tf.device`` requests inside it, which
the coordinator recorded, ``gpu_requests``, kept), placed by the predictor
(:func:`.result.predict_trace`) on that worker's ``CPU:0`` and ``GPU:0`` and the ps tasks' CPUs,
the worker's devices local (an op asking for nothing, or for ``/device:CPU:0``, stays on it):
the shards' values then travel from the ps tasks to the worker's GPU. More GPUs per worker
make more replicas (the step's ops once per GPU), a graph the trace does not hold: refused,
naming the call that predicts it from the setup (:mod:`.pss_gpus`, the coordinator's build).
"""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..._explain.rules import instantiating_worker, ps_variable, scheduled_there, session_task
from ..._model.devices import device_sort_key, short_device, task_of
from ..._model.kernel_registry import KernelRegistry
from ..._model.trace import STRATEGY_TASKS_RAW, PlacementTrace
from .devices import gpu_devices
from .result import predict_trace
from .tasks import assembled, gpu_words, more_gpus_refused, older_trace, task_prefix

PSS = "ParameterServerStrategy"
# The replica device the strategy gives strategy.run on a worker without a GPU, and with one.
_REPLICA_CPU, _REPLICA_GPU = "/device:CPU:0", "/device:GPU:0"
# The ops that read a tf.data iterator inside the step.
_ITERATOR_READS = frozenset({"IteratorGetNext", "IteratorGetNextAsOptional", "IteratorGetNextSync"})


def predict_ps_trace(
    trace: Any, data: Mapping[str, Any], gpus: int, soft: bool, registry: KernelRegistry | None
) -> PlacementTrace:
    """The prediction of a ``ParameterServerStrategy`` trace (``data``: its strategy record)
    with ``gpus`` GPUs (0 or 1) on each worker: each worker's step placed on its devices and
    the ps tasks'; a ``TraceError`` for more GPUs or a trace without the requests."""
    if gpus > 1:
        raise more_gpus_refused(
            PSS,
            gpus,
            f"the strategy makes {gpus} replicas on it (its worker_devices /device:GPU:0 to "
            f"/device:GPU:{gpus - 1}, counted from the workers' GPUs when it starts) and "
            "strategy.run builds the step function once per replica under tf.device of its "
            "GPU; the variables stay on the ps tasks, wrapped to aggregate the replicas' "
            "updates (AggregatingVariable), and what the replicas reduce is reduced on the "
            "worker's /device:CPU:0 (ReductionToOneDevice).",
            f"its coordinator builds it only when the workers it connects to have {gpus} GPUs each",
            f"Pass the setup instead, predict_placement(setup, gpus={gpus}, "
            f"cluster='local:{_cluster(data)}', mode='function'): the coordinator of the "
            f"local cluster then has TensorFlow build (not run) the step for {gpus} GPUs per "
            "worker, and that graph is predicted; or predict_placement(trace, gpus=1) for one "
            "GPU per worker.",
        )
    tasks = data.get("tasks", {})
    workers = [
        task
        for task in tasks
        if task.startswith("/job:worker/")
        and any(task_of(d) == task for d in trace.devices)  # it ran the step
    ]
    if gpus and any("gpu_requests" not in tasks[w] for w in workers):
        raise older_trace(PSS)
    ps = [d for d in trace.devices if task_of(d).startswith("/job:ps/")]
    facts_worker = _facts_worker(trace, workers)
    parts = [
        _predict_worker(trace, data, w, facts_worker, ps, gpus, soft, registry) for w in workers
    ]
    # Each worker's instantiation places the ps tasks' part too: the same ops, one row each.
    ops = pd.concat([p.ops for p in parts], ignore_index=True)
    ops = ops.drop_duplicates(subset=["op", "device"], ignore_index=True)
    transfers = pd.concat([p.transfers for p in parts], ignore_index=True)
    transfers = transfers.drop_duplicates(
        subset=["tensor", "src_device", "dst_device"], ignore_index=True
    )
    notes = [
        f"Predicted, not run: where TensorFlow would put each op of the step {PSS}'s "
        f"coordinator scheduled on {len(parts)} worker(s) ({', '.join(workers)}) with "
        f"{gpu_words(gpus)} on each worker (soft placement {'on' if soft else 'off'})"
        + (
            ": the strategy's replica on each worker's GPU:0 in place of its CPU:0 (its "
            "worker_devices are the workers' GPUs), the user's own tf.device requests kept, "
            "the variables and their shards on the ps tasks' CPU:0 as traced (the strategy "
            "makes them under tf.device('/job:ps/task:K/device:CPU:0') whatever the workers "
            "have), each worker's step placed on its own devices and the ps tasks'."
            if gpus
            else ": the strategy's replica on each worker's CPU:0, as traced."
        ),
    ]
    if gpus:
        fetched = any(tasks[w].get("inputs_to_device") for w in workers)
        notes.append(
            "Assumed: the ps tasks have the devices traced (their CPU:0: the variables and "
            "the ops that read or update them are pinned there, GPUs or not); "
            + (
                "the step reads a distributed dataset that fetches its batches to the replica "
                "device (InputOptions.experimental_fetch_to_device, on by default), so its "
                "per-replica iterator is on each worker's GPU:0. "
                if fetched
                else "the step's per-worker tf.data iterator stays on each worker's CPU:0 (its "
                "kernels prefer the CPU) and each batch is copied to the GPU in the step. "
            )
            + "Not predicted: the coordinator's side (scheduling, the per-worker dataset's "
            "creation) and the times."
        )
    return assembled(trace, parts, ops, transfers, notes, gpus)


def _cluster(data: Mapping[str, Any]) -> str:
    """The local cluster of the trace's worker and ps tasks (``worker=2,ps=2``; tfplace adds
    the coordinator)."""
    jobs = Counter(task.split("/")[1].removeprefix("job:") for task in data.get("tasks", {}))
    return ",".join(f"{job}={jobs[job]}" for job in ("worker", "ps") if jobs[job])


def _facts_worker(trace: Any, workers: list[str]) -> str:
    """The worker whose instantiation the trace's graph facts are (the first that placed the
    step: its ``_Arg`` of the per-worker iterator asks for that worker's device)."""
    for request in trace.facts.requested.values():
        task = task_of(request) if request and "/job:worker" in request else ""
        if task in workers:
            return task
    return workers[0] if workers else ""


def _predict_worker(
    trace: Any,
    data: Mapping[str, Any],
    worker: str,
    facts_worker: str,
    ps: list[str],
    gpus: int,
    soft: bool,
    registry: KernelRegistry | None,
) -> PlacementTrace:
    """One worker's prediction: its rows and the ps tasks' of ``trace``, the step's requests
    as the strategy makes them on a worker with ``gpus`` GPUs, its devices and the ps tasks'."""
    info = data["tasks"][worker]
    requests = info.get("gpu_requests", {})
    task, traced_task = task_prefix(worker), task_prefix(facts_worker)
    facts = trace.facts
    requested, whose = {}, {}
    for op, request in facts.requested.items():
        mine = request.replace(traced_task + "/", task + "/", 1) if request else request
        if op in requests:
            requested[op] = requests[op] if gpus else mine  # as the user's scopes merge
            whose[op] = "user"
        elif mine == _REPLICA_CPU:
            requested[op] = _REPLICA_GPU if gpus else mine
            whose[op] = "strategy"
        else:
            requested[op] = mine
    on_worker = [d for d in trace.devices if task_of(d) == worker]
    part = copy.copy(trace)
    part.__dict__.pop("_findings_cache", None)
    devices = [*on_worker, *ps]
    part.ops = trace.ops[trace.ops["device"].isin(devices)]
    part.devices = devices
    part.raw = {k: v for k, v in trace.raw.items() if k != STRATEGY_TASKS_RAW}
    part.facts = dataclasses.replace(facts, requested=requested)
    placed_on = sorted({*devices, *gpu_devices(gpus, task)}, key=device_sort_key)
    pins = _arguments(part, data, info, worker, gpus)
    predicted = predict_trace(
        part, gpus, soft, registry=registry, pins=pins, devices=placed_on, local_task=worker
    )
    scheduled = [str(w) for w in data.get("scheduled", [])]
    runs_here = scheduled_there(worker, scheduled, int(data.get("warmup", 0)))
    held = _variables_used(part.facts, data)
    partitioner = str(data.get("partitioner", ""))
    reasons = []
    for op, device, reason in zip(
        predicted.ops["op"], predicted.ops["device"], predicted.ops["reason"], strict=True
    ):
        reason = str(reason).rstrip().replace(session_task(worker), instantiating_worker(worker))
        kind = whose.get(str(op))
        if task_of(str(device)) != worker:
            variable = held.get(str(op))
            if variable is not None and str(op) not in pins:
                reason = f"{reason} {ps_variable(variable, partitioner)}"
            reasons.append(reason)
            continue
        if kind == "strategy" and gpus:
            reason += (
                f" Its request is {PSS}'s replica device, this worker's GPU:0: on workers "
                "with a GPU the strategy's worker_devices are their GPUs and strategy.run "
                f"builds the replica under tf.device('{_REPLICA_GPU}') (traced under "
                f"'{_REPLICA_CPU}', the worker having none)."
            )
        elif kind == "user" and gpus:
            reason += (
                f" Its request comes from the user's own tf.device inside {PSS}'s replica, "
                "not the strategy's: with the replica on this worker's GPU:0 it still asks "
                f"for {short_device(requested[str(op)]) or requested[str(op)]}."
            )
        reasons.append(f"{reason} {runs_here}")
    predicted.ops["reason"] = pd.array(reasons, dtype="str")
    predicted.transfers = _with_traced_bytes(predicted.transfers, trace.transfers)
    return predicted


def _variables_used(facts: Any, data: Mapping[str, Any]) -> dict[str, Any]:
    """Op -> the variable (shard) whose handle it takes through a resource edge (the step's
    ``_Arg`` of it, as the coordinator recorded each)."""
    variables: dict[str, Any] = {}
    for found in data.get("variables", {}).values():
        variables.update(found)
    return {
        op: variables[producer]
        for op, producers in facts.resource_inputs.items()
        for producer in producers
        if producer in variables
    }


def _with_traced_bytes(predicted: pd.DataFrame, traced: pd.DataFrame) -> pd.DataFrame:
    """The predicted copies with the bytes the trace has for the same tensor (its static
    shape in the step's graph, which a GPU does not change) where they have none."""
    if traced is None or traced.empty or "bytes" not in traced:
        return predicted
    known = traced.dropna(subset=["bytes"]).drop_duplicates("tensor").set_index("tensor")
    sizes = predicted["tensor"].map(known["bytes"])
    predicted = predicted.copy()
    predicted["bytes"] = predicted["bytes"].fillna(sizes).astype("Int64")
    return predicted


def _arguments(
    part: Any, data: Mapping[str, Any], info: Mapping[str, Any], worker: str, gpus: int
) -> dict[str, tuple[str, str]]:
    """Where the step's ``_Arg`` nodes live on ``worker`` before the placer runs, and why:
    each variable (shard) on its ps task's CPU:0, where the strategy made it; the per-worker
    iterator where the trace has it (a ``tf.data`` iterator's kernels prefer the CPU), or on
    the replica's GPU when the step reads a distributed iterator that fetches to the device
    (``inputs_to_device``); any other argument where the trace has it."""
    facts = part.facts
    ops = part.ops
    rows = ops[ops["type"] == "_Arg"]
    traced = dict(zip(rows["op"], rows["device"], strict=True))
    variables: dict[str, Any] = {}
    for found in data.get("variables", {}).values():
        variables.update(found)
    iterators = {
        producer
        for op, producers in facts.resource_inputs.items()
        if facts.types.get(op) in _ITERATOR_READS
        for producer in producers
    }
    gpu = gpu_devices(1, task_prefix(worker))[0]
    pins = {}
    for name, op_type in facts.types.items():
        device = traced.get(name)
        if op_type != "_Arg" or device is None:
            continue
        if name in variables:
            pins[name] = (
                device,
                f"A variable's handle: {ps_variable(variables[name], data.get('partitioner', ''))} "
                f"{PSS} makes it under tf.device('{short_device(device)}') whatever devices "
                "the workers have; the runtime pins the argument there before the placer runs.",
            )
        elif name in iterators and gpus and info.get("inputs_to_device"):
            pins[name] = (
                gpu,
                f"The per-replica tf.data iterator the step reads: {PSS}'s distributed "
                "iterator makes it on the replica device (InputOptions."
                "experimental_fetch_to_device, on by default), this worker's GPU:0, and "
                "prefetches each batch there; the runtime pins the argument there before the "
                "placer runs.",
            )
        elif name in iterators:
            pins[name] = (
                device,
                "The per-worker tf.data iterator the step reads, made on this worker by "
                "ClusterCoordinator.create_per_worker_dataset: a tf.data iterator's kernels "
                "prefer the CPU (priority 2 over the GPU's 1), GPU or not, so it stays on "
                f"{short_device(device)}; the runtime pins the argument there before the "
                "placer runs.",
            )
        else:
            pins[name] = (
                device,
                f"A function argument, on {short_device(device)} where the traced call had "
                "it; the runtime pins the argument there before the placer runs.",
            )
    return pins
