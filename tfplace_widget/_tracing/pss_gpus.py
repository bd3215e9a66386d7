"""The step ``ParameterServerStrategy`` builds for workers with N GPUs each, built by TensorFlow
itself (not run) at the coordinator of the local cluster, for ``predict_placement(fn, gpus=N,
cluster="local:worker=2,ps=2")`` (issue 36).

The strategy counts the workers' GPUs once, at the coordinator, when it is made
(``ParameterServerStrategyV2Extended._set_num_gpus``: the logical GPUs of ``/job:worker``
it sees); its ``worker_devices`` (``/device:GPU:0`` to ``GPU:N-1``, each worker's own) and
``num_replicas_in_sync`` follow that count, ``strategy.run`` builds the replica function once
per GPU under ``tf.device`` of it, and with more than one replica each variable (shard) stays
on its ps task wrapped to aggregate the replicas' updates (``AggregatingVariable``).
``ClusterCoordinator.schedule`` traces the step's concrete function at the coordinator (for the
type specs of worker 0's arguments), then dispatches it. So after the traced run the
coordinator runs the setup once more with ``_set_num_gpus`` reporting N, and traces the step as
``schedule`` would, without dispatching it. The new strategy does not connect to the cluster
again (``remote.connect_to_cluster`` would reset the eager context the traced run made; the
connection stands); its variables are made on the ps tasks and its per-worker dataset on the
workers, as the setup asks, but the step never runs.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from .mwms_gpus import _ITERATOR_READS, _as_instantiated


def build_ps_with_gpus(
    setup: Callable[..., Any],
    args: tuple,
    kwargs: dict,
    gpus: int,
    step_of: Callable[..., Any],
    record: Callable[[Any], dict[str, Any]],
) -> dict[str, Any]:
    """Run ``setup`` again with the strategy seeing ``gpus`` GPUs on each worker and build (not
    run) the step as ``ClusterCoordinator.schedule`` traces it: as JSON, its ``GraphDef`` in
    base64 (``graph``, inputs as the runtime instantiates them), the strategy's
    ``worker_devices`` and ``replicas``, ``pins`` (each input of the step -> the device its
    value has, ``""`` for the scheduled worker's ``CPU:0``, and what it is), ``variables``
    (each variable handle's input -> the variable or shard) and ``tensor_bytes`` (each
    tensor's size from its static shape), as ``record``, the coordinator's record of a
    concrete function, gives them, ``aggregating`` (the variables the strategy wrapped to
    aggregate the replicas' updates, by name) and ``batch`` (what the step reads)."""
    import gc

    import tensorflow as tf
    from tensorflow.python.distribute import parameter_server_strategy_v2 as pss
    from tensorflow.python.distribute import ps_values
    from tensorflow.python.distribute.coordinator import cluster_coordinator as cc

    strategy_class, extended_class = (
        pss.ParameterServerStrategyV2,
        pss.ParameterServerStrategyV2Extended,
    )
    made: list[Any] = []

    def connect(self: Any, coordinator_name: str) -> None:  # the counts, not the connection
        jobs = self._cluster_resolver.cluster_spec().as_dict()
        self._num_workers, self._num_ps = len(jobs.get("worker", ())), len(jobs.get("ps", ()))

    def set_num_gpus(self: Any) -> None:
        self._num_gpus_per_worker = gpus
        made.append(self)

    original_connect, original_set = (
        strategy_class._connect_to_cluster,
        extended_class._set_num_gpus,
    )
    strategy_class._connect_to_cluster = connect
    extended_class._set_num_gpus = set_num_gpus
    try:
        step, step_args, step_kwargs = step_of(setup(*args, **kwargs), setup)
        if not made:
            raise RuntimeError("the setup made no ParameterServerStrategy when run again")
        extended = made[-1]
        # as ClusterCoordinator.schedule's Closure: worker 0's slice of the arguments, as specs
        specs = tf.nest.map_structure(
            cc._maybe_as_type_spec,  # noqa: SLF001 (TensorFlow's own step)
            cc._select_worker_slice(0, (tuple(step_args), dict(step_kwargs))),  # noqa: SLF001
        )
        extended._being_scheduled = True  # noqa: SLF001 (as schedule sets it)
        try:
            concrete = step.get_concrete_function(*specs[0], **specs[1])
        finally:
            extended._being_scheduled = False  # noqa: SLF001
    finally:
        strategy_class._connect_to_cluster = original_connect
        extended_class._set_num_gpus = original_set
    graph = concrete.graph
    names = [arg.name for arg in concrete.function_def.signature.input_arg]
    by_name = {
        name: graph.inputs[i].op.name for i, name in enumerate(names) if i < len(graph.inputs)
    }
    recorded = record(concrete)
    variables = {by_name[k]: v for k, v in recorded["variables"].items() if k in by_name}
    pins: dict[str, list[str]] = {}
    captured = {id(inner) for _, inner in graph.captures}
    for outer, inner in graph.captures:
        device = getattr(outer, "device", "") or ""
        if device:
            kind = "variable" if inner.op.name in variables else "capture"
            pins[inner.op.name] = [tf.DeviceSpec.from_string(device).to_string(), kind]
    for tensor in graph.inputs:
        if id(tensor) not in captured:  # an argument: made on the worker the call is sent to
            reads = any(c.type in _ITERATOR_READS for c in tensor.consumers())
            pins[tensor.op.name] = ["", "iterator" if reads else "argument"]
    devices = list(extended.worker_devices)
    strategy = extended._container_strategy()  # noqa: SLF001
    aggregating = [
        v.name
        for v in gc.get_objects()
        if isinstance(v, ps_values.AggregatingVariable) and v._distribute_strategy is strategy  # noqa: SLF001
    ]
    return {
        "gpus": gpus,
        "worker_devices": devices,
        "replicas": int(extended._num_replicas_in_sync),  # noqa: SLF001
        "graph": base64.b64encode(_as_instantiated(graph).SerializeToString()).decode(),
        "pins": pins,
        "variables": variables,
        "tensor_bytes": recorded["tensor_bytes"],
        "aggregating": sorted(aggregating),
        "batch": {
            op.name: [t.shape.as_list() if t.shape.rank is not None else None for t in op.outputs]
            for op in graph.get_operations()
            if op.type in _ITERATOR_READS
        },
    }
