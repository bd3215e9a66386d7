"""One task of a TF2 trace across a local cluster, in a process of its own (started by
``cluster_child`` in the cluster's network namespace, with the task's ``TF_CONFIG`` set).

TensorFlow's placement log is turned on before its runtime starts, the user's setup runs (it
makes the strategy, the model, the data, as on each machine of a real cluster) and returns the
step; the step is traced here with the function-mode tracer, and the trace goes back pickled,
with the strategy's name and the group of each collective op.
"""

from __future__ import annotations

import gc
import pickle
import traceback
from collections.abc import Callable
from typing import Any

from .._model.errors import TraceError


def run_task(
    request: dict[str, Any], blobs: list[bytes], told: Any = None
) -> tuple[dict[str, Any], list[bytes]]:
    """Run the setup and trace its step: ``({"strategy", "collectives"}, [trace])``, or
    ``({"error": ...}, [])``. (``told``: for a serving task's; this one answers when done.)"""
    try:
        import tensorflow as tf

        from .function import ensure_devices

        ensure_devices(request.get("device_count"))  # before the strategy starts the runtime
        tf.debugging.set_log_device_placement(True)  # TF prints it only if set before
        setup, args, kwargs = pickle.loads(blobs[0])
        step, step_args, step_kwargs = step_of(setup(*args, **kwargs), setup)
        made = strategy_made()
        strategy = type(made).__name__ if made is not None else ""
        from .tf2_call import as_tf2

        options = dict(
            request["options"], device_count=None, outputs=None, wait_for_peers=wait_for_peers
        )
        reason = f"the step {setup.__name__}() returned, traced as TF2 code on this task."
        trace = as_tf2(step, step_args, step_kwargs, options, "", reason)
        collectives = collective_groups(trace)
        add_input_sizes(collectives, step, step_args, step_kwargs)
        on_gpu = gpu_requests(step, step_args, step_kwargs, made)
        to_device = inputs_to_device([*step_args, *step_kwargs.values()])
        with_gpus = _built_with_gpus(request.get("gpus_build") or 0, setup, args, kwargs)
        trace.__dict__.pop("_findings_cache", None)
        data = pickle.dumps(trace, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException as exc:  # noqa: BLE001 (any failure is the answer)
        return {
            "error": str(exc) if isinstance(exc, TraceError) else f"{type(exc).__name__}: {exc}",
            "type": type(exc).__name__,
            "traceback": traceback.format_exc(),
        }, []
    header = {"strategy": strategy, "collectives": collectives, "gpu_requests": on_gpu}
    if with_gpus is not None:
        header["gpus_build"] = with_gpus
    return {**header, "inputs_to_device": to_device}, [data]


def _built_with_gpus(gpus: int, setup: Any, args: tuple, kwargs: dict) -> dict[str, Any] | None:
    """The step as the strategy builds it with ``gpus`` GPUs on this worker
    (:func:`.mwms_gpus.build_with_gpus`), or ``{"error": ...}`` saying why TensorFlow could not
    build it; ``None`` when not asked for."""
    if gpus < 2:
        return None
    from .mwms_gpus import build_with_gpus

    try:
        return build_with_gpus(setup, args, kwargs, gpus, step_of)
    except Exception as exc:  # noqa: BLE001 (the trace stands; the prediction says why not)
        return {"error": f"{type(exc).__name__}: {exc}"[:2000]}


# A task waits this long for the others at a barrier; a task that fails ends them all sooner.
_BARRIER_TIMEOUT_MS = 30 * 60 * 1000


def wait_for_peers(phase: str) -> None:
    """Return when every task of the cluster has got to ``phase`` of its trace (TensorFlow's
    coordination service barrier, which the strategy configured); at once without one."""
    from tensorflow.python.eager import context

    ctx = context.context()
    if ctx.coordination_service:
        ctx.wait_at_barrier(f"tfplace_trace_{phase}", _BARRIER_TIMEOUT_MS)


def step_of(made: Any, setup: Callable[..., Any]) -> tuple[Callable[..., Any], tuple, dict]:
    """What the setup returned as ``(step, args, kwargs)``: a callable, or a tuple
    ``(step, args)`` or ``(step, args, kwargs)``."""
    if callable(made):
        return made, (), {}
    if isinstance(made, tuple) and made and callable(made[0]) and len(made) <= 3:
        args = made[1] if len(made) > 1 else ()
        kwargs = made[2] if len(made) > 2 else {}
        if isinstance(args, tuple) and isinstance(kwargs, dict):
            return made[0], args, kwargs
    name = getattr(setup, "__name__", "setup")
    raise TraceError(
        f"{name}() returned {type(made).__name__}, not the step to trace: return the step "
        "(a tf.function, or model.fit & co.), or (step, args) or (step, args, kwargs), e.g. "
        "`return train_step, (iterator,)`."
    )


def strategy_made() -> Any:
    """The ``tf.distribute`` strategy the setup made (the last one made, but the default one);
    ``None`` when it made none."""
    from tensorflow.python.distribute import distribute_lib

    found = [
        obj
        for obj in gc.get_objects()
        if isinstance(obj, distribute_lib.StrategyBase)
        and not isinstance(obj, distribute_lib._DefaultDistributionStrategy)  # noqa: SLF001
    ]
    return found[-1] if found else None


def gpu_requests(step: Any, args: tuple, kwargs: dict, strategy: Any) -> dict[str, str]:
    """:func:`graph_gpu_requests` of the step's graph (its concrete function for ``args``,
    ``kwargs``); ``{}`` without a strategy or when the step's graph cannot be read."""
    if strategy is None or not hasattr(step, "get_concrete_function"):
        return {}
    try:
        graph = step.get_concrete_function(*args, **kwargs).graph
    except Exception:  # noqa: BLE001 (the requests are an extra; the trace stands without)
        return {}
    return graph_gpu_requests(graph, strategy)


def graph_gpu_requests(graph: Any, strategy: Any, by_identity: bool = False) -> dict[str, str]:
    """The device each op of ``graph`` (a step's) that a ``tf.device`` of the user's own
    reaches would request on a worker with a GPU: the op's ``tf.device`` scopes
    (``_device_assignments``, innermost first) merged outermost first, field by field as
    TensorFlow merges them, with the strategy's replica device (its ``worker_devices``: this
    task's ``CPU:0`` without a GPU) made the task's ``GPU:0``, as the strategy makes it on a
    worker with one GPU. Ops that only the strategy's scopes reach are not listed (their
    request is the replica device's). The graph's own ops only (not the bodies of functions
    it calls).

    ``by_identity``: the strategy's replica scope is told from the user's by the very string
    the strategy pushed (``mirrored_run`` enters ``tf.device(worker_devices[i])``), not by
    its value: ``ParameterServerStrategy``'s replica device is ``/device:CPU:0``, which a
    user's ``tf.device("/cpu:0")`` inside ``strategy.run`` also asks for."""
    import tensorflow as tf

    extended = strategy.extended
    devices = tuple(getattr(extended, "worker_devices", ()))
    replicas = {_spec_key(d) for d in devices}
    own = replicas | {_spec_key(getattr(extended, "_default_device", None) or "")}
    pushed = {id(d) for d in devices}

    def replica(scope: Any) -> bool:
        return _spec_key(scope) in replicas and (not by_identity or id(scope) in pushed)

    def strategys(scope: Any) -> bool:
        key = _spec_key(scope)
        return replica(scope) or (key in own and key not in replicas)

    found = {}
    for op in graph.get_operations():
        scopes = [a.obj for a in reversed(op._device_assignments)]  # noqa: SLF001
        if not scopes or not any(isinstance(s, str) and not strategys(s) for s in scopes):
            continue
        if not all(isinstance(s, str | tf.DeviceSpec) for s in scopes):
            continue  # a device function: not replayed here
        merged = tf.DeviceSpec()
        for scope in scopes:
            spec = tf.DeviceSpec.from_string(str(scope))
            if replica(scope):
                spec = spec.replace(device_type="GPU", device_index=0)
            merged = merged.make_merged_spec(spec)
        found[op.name] = merged.to_string()
    return found


def inputs_to_device(args: list[Any]) -> bool | None:
    """Whether the step's distributed iterators make their per-replica iterators on the
    strategy's replica devices (``InputOptions.experimental_fetch_to_device``, on by default:
    ``input_lib._should_use_multi_device_iterator`` and ``_input_workers_with_options``), so
    that on a worker with a GPU the step reads its batches there; ``None`` without one."""
    from tensorflow.python.distribute import input_lib

    found = [a for a in args if isinstance(a, input_lib.DistributedIteratorBase)]
    if not found:
        return None
    options = [getattr(a, "_options", None) for a in found]
    return all(o is None or bool(o.experimental_fetch_to_device) for o in options)


def _spec_key(device: Any) -> str:
    """``device`` as a comparable string (``replica:0`` added when a job is named)."""
    import tensorflow as tf

    spec = tf.DeviceSpec.from_string(str(device))
    if spec.job is not None and spec.replica is None:
        spec = spec.replace(replica=0)
    return spec.to_string()


_COLLECTIVE_INPUTS = ("group_size", "group_key")  # instance_key: fed at each call


def collective_groups(trace: Any) -> dict[str, dict[str, Any]]:
    """Per collective op of the trace (``CollectiveReduceV2``, ``CollectiveGatherV2``...): its
    type, ``group_size`` and ``group_key`` (the constants it reads, as the placed graphs
    hold them; its ``instance_key`` is fed at each call), and its ``merge_op``/``final_op`` and ``communication_hint``."""
    import tensorflow as tf
    from tensorflow.core.framework import graph_pb2

    collective = trace.ops[trace.ops["type"].astype(str).str.startswith("Collective")]
    if collective.empty:
        return {}
    wanted = set(collective["op"])
    groups: dict[str, dict[str, Any]] = {}
    for graph in _function_graphs(trace):
        for part in [*graph.partition_graphs, graph.pre_optimization_graph]:
            if not isinstance(part, graph_pb2.GraphDef):
                continue
            consts = {n.name: n for n in part.node if n.op == "Const"}
            for node in part.node:
                if node.name not in wanted or node.name in groups:
                    continue
                row: dict[str, Any] = {"type": node.op}
                names = _input_names(node)
                for key in _COLLECTIVE_INPUTS:
                    const = consts.get(names.get(key, ""))
                    if const is not None:
                        row[key] = int(tf.make_ndarray(const.attr["value"].tensor).ravel()[0])
                for attr in ("merge_op", "final_op", "communication_hint"):
                    if attr in node.attr:
                        row[attr] = node.attr[attr].s.decode()
                groups[node.name] = row
    return groups


def add_input_sizes(
    collectives: dict[str, dict[str, Any]], step: Any, args: tuple, kwargs: dict
) -> None:
    """Add each collective's input tensor (``"input"``) and its size (``"bytes"``: what the
    op's output holds, the static shape of the traced function's graph times its dtype's
    size) where the step is a ``tf.function`` whose graph has the op with a known shape."""
    if not collectives or not hasattr(step, "get_concrete_function"):
        return
    try:
        graph = step.get_concrete_function(*args, **kwargs).graph
    except Exception:  # noqa: BLE001 (no graph, no sizes: the trace stands without them)
        return
    for name, row in collectives.items():
        try:
            op = graph.get_operation_by_name(name)
        except KeyError:
            continue
        tensor = op.inputs[0]
        row["input"] = tensor.name
        count = tensor.shape.num_elements()
        if count is not None:
            row["bytes"] = int(count * tensor.dtype.size)


def _input_names(node: Any) -> dict[str, str]:
    """The node each named input of a collective reads (its op's argument order)."""
    from tensorflow.python.framework import op_def_registry

    op_def = op_def_registry.get(node.op)
    if op_def is None:
        return {}
    data = [name for name in node.input if not name.startswith("^")]
    return {
        arg.name: data[i].split(":")[0]
        for i, arg in enumerate(op_def.input_arg)
        if i < len(data) and arg.name in _COLLECTIVE_INPUTS
    }


def _function_graphs(trace: Any) -> list[Any]:
    """The placed function graphs the trace keeps (``raw["function_graphs.pb"]``)."""
    from tensorflow.core.protobuf import config_pb2

    data = trace.raw.get("function_graphs.pb")
    if not data:
        return []
    metadata = config_pb2.RunMetadata.FromString(data)
    return list(metadata.function_graphs)
