"""Predicted placement of ``ParameterServerStrategy`` with 2 or more GPUs per worker, from the
step TensorFlow itself built that way at the coordinator (issue 36).

With N GPUs per worker the strategy builds another graph than the traced one-replica step: N
replicas (the step function once per GPU, under ``tf.device`` of it), the variables still on
the ps tasks but wrapped to aggregate the replicas' updates, no collectives (what the replicas
reduce is reduced on the worker's ``/device:CPU:0``). ``predict_placement(fn, gpus=N,
cluster="local:worker=2,ps=2")`` has the coordinator build that graph, not run
(:mod:`tfplace_widget._tracing.pss_gpus`), and hands its record here: the one graph the
coordinator would send to whichever worker it schedules the step on is placed, for each worker,
by the predictor's own rules (:func:`.result.predict_trace`) on that worker's ``CPU:0`` and N
GPUs and the ps tasks' devices, the worker's own local, its inputs pinned where their values
are (each variable's handle on its ps task, the per-worker iterator on the worker's ``CPU:0``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..._explain.rules import instantiating_worker, ps_variable, scheduled_there, session_task
from ..._model.devices import device_sort_key, short_device, task_of
from ..._model.graphfacts import GraphFacts
from ..._model.kernel_registry import KernelRegistry
from ..._model.trace import STRATEGY_TASKS_RAW, PlacementTrace
from .devices import gpu_devices
from .parameter_servers import PSS
from .result import predict_trace
from .tasks import assembled, gpu_words, task_prefix, unplaced

NOT_MODELLED = (
    "Not modelled: times (nothing ran), the coordinator's scheduling (each worker is predicted "
    "as if the step were sent to it), the per-worker dataset's creation, and the ps tasks' "
    "devices other than those traced (their CPU:0)."
)


def predict_built_pss(
    trace: Any,
    data: Mapping[str, Any],
    facts: GraphFacts,
    gpus: int,
    soft: bool,
    registry: KernelRegistry | None = None,
) -> PlacementTrace:
    """The prediction of ``trace`` (a ``ParameterServerStrategy`` trace; ``data``: its strategy
    record, with the coordinator's build, ``gpus_build``) with ``gpus`` GPUs on each worker:
    ``facts``, those of the built graph, placed on each worker's devices and the ps tasks'."""
    info = data["gpus_build"]
    workers = [t for t in data.get("tasks", {}) if t.startswith("/job:worker/")]
    ps = sorted(
        {d for d in trace.devices if task_of(d).startswith("/job:ps/")}, key=device_sort_key
    )
    parts = [_predict_worker(trace, data, w, facts, ps, gpus, soft, registry) for w in workers]
    ops = pd.concat([p.ops for p in parts], ignore_index=True)
    # every worker's placement of the step places the ps tasks' part too: one row each
    ops = ops.drop_duplicates(subset=["op", "device"], ignore_index=True)
    transfers = pd.concat([p.transfers for p in parts], ignore_index=True).drop_duplicates(
        subset=["tensor", "src_device", "dst_device"], ignore_index=True
    )
    aggregating = info.get("aggregating", [])
    notes = [
        f"Predicted, not run: where TensorFlow would put each op of the step {PSS} builds for "
        f"{len(workers)} workers ({', '.join(workers)}) with {gpu_words(gpus)} on each worker "
        f"(soft placement {'on' if soft else 'off'}). The coordinator built this graph with "
        f"the strategy counting {gpu_words(gpus)} per worker (its worker_devices "
        f"{', '.join(info.get('worker_devices', []))}; num_replicas_in_sync "
        f"{info.get('replicas')}), traced as ClusterCoordinator.schedule traces it, without "
        "sending it to a worker (one without the GPUs cannot run it); each op is placed by the "
        "placer's rules on the worker's CPU:0 and GPUs and the ps tasks' CPU:0. The variables "
        f"stay on the ps tasks ({len(aggregating)} wrapped in AggregatingVariable, which "
        "aggregates the replicas' updates); no collectives: what the replicas reduce is reduced "
        "on the worker's CPU:0 (ReductionToOneDevice).",
        NOT_MODELLED,
    ]
    sizes = pd.Series(info.get("tensor_bytes", {}), dtype="Int64")
    transfers["bytes"] = transfers["bytes"].fillna(transfers["tensor"].map(sizes)).astype("Int64")
    result = assembled(trace, parts, ops, transfers, notes, gpus)
    if parts:  # the built graph's facts and edges, not the traced step's
        result.facts, result.inputs = parts[0].facts, dict(parts[0].inputs)
    # the findings name the variables the built step's handles are (its _Arg names)
    result.raw = {
        STRATEGY_TASKS_RAW: json.dumps({**data, "variables": {"built": info["variables"]}})
    }
    return result


def _predict_worker(
    trace: Any,
    data: Mapping[str, Any],
    worker: str,
    facts: GraphFacts,
    ps: list[str],
    gpus: int,
    soft: bool,
    registry: KernelRegistry | None,
) -> PlacementTrace:
    """The built step as ``worker`` would place it: its CPU:0 and ``gpus`` GPUs local, the ps
    tasks' devices remote."""
    info = data["gpus_build"]
    task = task_prefix(worker)
    cpu = f"{task}/device:CPU:0"
    devices = sorted({cpu, *gpu_devices(gpus, task), *ps}, key=device_sort_key)
    part = unplaced(trace, facts, [cpu, *ps])
    variables = info.get("variables", {})
    partitioner = str(data.get("partitioner", ""))
    pins = {
        name: _pin(name, device or cpu, kind, variables, partitioner)
        for name, (device, kind) in info.get("pins", {}).items()
    }
    predicted = predict_trace(
        part, gpus, soft, registry=registry, pins=pins, devices=devices, local_task=worker
    )
    replica_of = {short_device(d): k for k, d in enumerate(info.get("worker_devices", []))}
    held = {
        op: variables[producer]
        for op, producers in facts.resource_inputs.items()
        for producer in producers
        if producer in variables
    }
    scheduled = [str(w) for w in data.get("scheduled", [])]
    runs_here = scheduled_there(worker, scheduled, int(data.get("warmup", 0)))
    reasons = []
    for op, device, reason in zip(
        predicted.ops["op"], predicted.ops["device"], predicted.ops["reason"], strict=True
    ):
        said = str(reason).rstrip().replace(session_task(worker), instantiating_worker(worker))
        name = str(op)
        if task_of(str(device)) != worker:
            if name in held and name not in pins:
                said += f" {ps_variable(held[name], partitioner)}"
        else:
            k = replica_of.get(short_device(facts.requested.get(name, "")))
            if k is not None and gpus:
                said += (
                    f" Built for replica {k + 1} of {gpus}, on GPU:{k} by the strategy's "
                    f"worker_devices ({PSS}'s strategy.run builds each replica's ops under "
                    "tf.device of its GPU)."
                )
            said += (
                f" Placed as {worker} places the step when the coordinator sends it there "
                f"(in the traced run: {runs_here[0].lower()}{runs_here[1:]})"
            )
        reasons.append(
            f"{said} Built by TensorFlow at the coordinator for {gpu_words(gpus)} per worker, "
            "not run."
        )
    predicted.ops["reason"] = pd.array(reasons, dtype="str")
    return predicted


def _pin(
    name: str, device: str, kind: str, variables: Mapping[str, Any], partitioner: str
) -> tuple[str, str]:
    """Where an input of the built step is before the placer runs, and why."""
    where = short_device(device)
    if kind == "variable":
        return device, (
            f"A variable's handle: {ps_variable(variables[name], partitioner)} {PSS} makes it "
            f"under tf.device('{where}') whatever devices the workers have; the runtime pins "
            "the argument there before the placer runs."
        )
    if kind == "iterator":
        return device, (
            "The per-worker tf.data iterator the step reads, made on the worker by "
            "ClusterCoordinator.create_per_worker_dataset, on its CPU:0 (a tf.data iterator's "
            "kernels prefer the CPU); the runtime pins the argument there before the placer "
            "runs."
        )
    return device, (
        f"An input of the step ({kind}), where its value is: {where}; the runtime pins the "
        "argument there before the placer runs."
    )
