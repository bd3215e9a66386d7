"""The step ``MultiWorkerMirroredStrategy`` builds on a worker with N GPUs, built by TensorFlow
itself (not run) in a task of the local cluster, for ``predict_placement(fn, gpus=N,
cluster="local:worker=2")`` (issue 36).

After the task's traced run, its setup runs once more with the strategy seeing ``gpus`` GPUs:
``context.num_gpus`` (what ``CollectiveAllReduceExtended._initialize_local_devices`` reads for
a ``TFConfigClusterResolver``, the one the strategy makes from ``TF_CONFIG``) reports them, so
TensorFlow's own code makes the strategy's ``worker_devices`` (one per GPU), a copy of each
variable per replica, the step's ops once per replica and collectives in groups of GPUs x
workers. Nothing of it runs: the step's first call (the setup's own, or the one after it) only
traces its concrete function (a call would hang: the replicas' all-reduces fall back onto one
CPU and wait for each other), and the strategy starts no second server (its class says one is
started: this task's, from the traced run, serves). What the strategy makes eagerly under
``tf.device`` of a GPU (each variable copy, the collectives' ordering tokens, the per-replica
iterators) would be on that GPU on a GPU worker, and the ops TensorFlow builds beside such a
resource (``tf.device(var.device)``: the optimizer's slots and updates) would ask for it; soft
placement would make them all on ``CPU:0`` here, so eager requests for ``GPU:k`` are made on a
logical CPU of their own, ``CPU:k+1`` (the task has ``gpus + 1``: :func:`host_cpus`), which
stands in for ``GPU:k``: the predictor reads every request for ``CPU:k+1`` as ``GPU:k``
(``hosts``). The step's graph itself keeps the requests the strategy wrote.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

# The GPUs per worker to build the step with in each task (0: no such build), set by
# predict_placement around its trace of the cluster.
GPUS_BUILD: contextvars.ContextVar[int] = contextvars.ContextVar("tfplace_gpus_build", default=0)
# The ops that read a tf.data iterator inside the step.
_ITERATOR_READS = frozenset({"IteratorGetNext", "IteratorGetNextAsOptional", "IteratorGetNextSync"})


@contextlib.contextmanager
def building_with_gpus(gpus: int) -> Iterator[None]:
    """Within it, a TF2 trace across a local cluster also has each task build its step with
    ``gpus`` GPUs (:func:`build_with_gpus`)."""
    token = GPUS_BUILD.set(gpus)
    try:
        yield
    finally:
        GPUS_BUILD.reset(token)


def host_cpus(gpus: int) -> int:
    """The logical CPUs a task needs for the build: its ``CPU:0`` and one per GPU's copies."""
    return gpus + 1


class _BuiltNotRun(Exception):
    """The step's first call during the build: traced, not run."""


def build_with_gpus(
    setup: Callable[..., Any], args: tuple, kwargs: dict, gpus: int, step_of: Callable[..., Any]
) -> dict[str, Any]:
    """Run ``setup`` again with the strategy seeing ``gpus`` GPUs and build (not run) the step:
    what the built graph holds, as JSON (its ``GraphDef`` in base64, ``graph``; the strategy's
    ``worker_devices`` and replicas; ``hosts``: each stand-in CPU -> the GPU it stands for;
    ``pins``: each input of the step -> the device it has on a GPU worker and what it
    is; ``variables``: each copy, the device the strategy made it under; ``collectives``: each
    collective op's group size and input shape; ``batch``: what the step reads per replica)."""
    import tensorflow as tf
    from tensorflow.python.distribute import collective_all_reduce_strategy as cars
    from tensorflow.python.eager import context
    from tensorflow.python.eager.polymorphic_function import polymorphic_function as pf

    extended = cars.CollectiveAllReduceExtended
    made: list[tuple[str, str]] = []  # (name, stand-in host) of each variable copy
    handles: set[int] = set()
    strategies: list[Any] = []
    built: list[Any] = []

    def creator(next_creator: Any, **kw: Any) -> Any:
        variable = next_creator(**kw)
        made.append((str(kw.get("name") or ""), variable.device))
        handles.add(id(variable.handle))
        return variable

    def eager_device(self: Any, ctx: Any, name: Any) -> None:
        if name is not None and not callable(name):
            spec = tf.DeviceSpec.from_string(str(name))
            if spec.device_type == "GPU" and spec.device_index is not None:
                name = spec.replace(device_type="CPU", device_index=spec.device_index + 1)
                name = name.to_string()
        original_enter(self, ctx, name)

    def local_devices(self: Any, resolver: Any, worker_device: str) -> Any:
        found = original_local(self, resolver, worker_device)
        strategies.append(self)
        return found

    def call(self: Any, *a: Any, **kw: Any) -> Any:
        built.append((self.get_concrete_function(*a, **kw), (a, kw)))
        raise _BuiltNotRun

    original_local, original_call, original_gpus, original_enter = (
        extended._initialize_local_devices,
        pf.Function.__call__,
        context.num_gpus,
        context._EagerDeviceContext.__init__,
    )
    context._EagerDeviceContext.__init__ = eager_device
    extended._initialize_local_devices = local_devices
    extended._std_server_started = True  # this task's server, from the traced run, serves
    context.num_gpus = lambda: gpus
    pf.Function.__call__ = call
    try:
        with tf.variable_creator_scope(creator):
            try:
                step, step_args, step_kwargs = step_of(setup(*args, **kwargs), setup)
                built.append(
                    (
                        step.get_concrete_function(*step_args, **step_kwargs),
                        (step_args, step_kwargs),
                    )
                )
            except _BuiltNotRun:
                pass
    finally:
        extended._initialize_local_devices = original_local
        del extended._std_server_started
        context.num_gpus = original_gpus
        context._EagerDeviceContext.__init__ = original_enter
        pf.Function.__call__ = original_call
    if not strategies:
        raise RuntimeError("the setup made no MultiWorkerMirroredStrategy when run again")
    strategy = strategies[-1]
    devices = list(strategy.worker_devices)
    task = strategy._worker_device  # noqa: SLF001 ("/job:worker/task:K")
    function, called = built[0]
    graph = function.graph
    hosts = {}
    for k, device in enumerate(devices):
        spec = tf.DeviceSpec.from_string(device).replace(replica=0)
        host = spec.replace(device_type="CPU", device_index=k + 1)
        hosts[host.to_string()] = spec.to_string()
    return {
        "gpus": gpus,
        "task": task,
        "worker_devices": devices,
        "replicas": len(devices) * strategy._num_workers,  # noqa: SLF001
        "graph": base64.b64encode(_as_instantiated(graph).SerializeToString()).decode(),
        "hosts": hosts,
        "pins": _pins(graph, called, hosts, handles),
        "variables": [(name, hosts.get(host, host)) for name, host in made],
        "collectives": _collectives(graph, tf),
        "batch": {
            op.name: [t.shape.as_list() if t.shape.rank is not None else None for t in op.outputs]
            for op in graph.get_operations()
            if op.type in _ITERATOR_READS
        },
    }


def _as_instantiated(graph: Any) -> Any:
    """The step's ``GraphDef`` with its inputs as the runtime instantiates them: each input's
    ``Placeholder`` an ``_Arg`` (its ``T``, its ``index``), as in the traced step's function
    graphs, so that the placer's rules for a function's arguments apply (an argument is where
    its value is; a resource handle's ``_Arg`` kernel keeps it in host memory)."""
    graph_def = graph.as_graph_def()
    inputs = {t.op.name: (i, t.dtype) for i, t in enumerate(graph.inputs)}
    for node in graph_def.node:
        if node.name not in inputs or node.op != "Placeholder":
            continue
        index, dtype = inputs[node.name]
        kept = {k: node.attr[k] for k in ("_handle_dtypes", "_handle_shapes") if k in node.attr}
        kept = {k: type(v).FromString(v.SerializeToString()) for k, v in kept.items()}
        node.op = "_Arg"
        node.ClearField("attr")
        node.attr["T"].type = dtype.as_datatype_enum
        node.attr["index"].i = index
        for key, value in kept.items():
            node.attr[key].CopyFrom(value)
    return graph_def


def _pins(
    graph: Any, called: tuple, hosts: dict[str, str], handles: set[int]
) -> dict[str, list[str]]:
    """Each input of the step's graph (a placeholder: an argument's tensor, as the call's
    ``called`` arguments flatten, or a captured one) -> [the device it has on a GPU worker,
    what it is]: what was made on a stand-in CPU (a variable copy's handle, a per-replica
    iterator, another resource such as a collective's ordering token) on the GPU it stands
    for; another value where it is."""
    import tensorflow as tf

    captured = list(graph.captures)
    values = [
        v for v in tf.nest.flatten(called, expand_composites=True) if isinstance(v, tf.Tensor)
    ]
    arguments = graph.inputs[: len(values)]  # the arguments' placeholders come first
    inner = {id(t) for _, t in captured}
    if not any(id(t) in inner for t in arguments):
        captured += list(zip(values, arguments, strict=True))
    found = {}
    for outer, placeholder in captured:
        device = getattr(outer, "device", "") or ""
        if not device:
            continue
        device = tf.DeviceSpec.from_string(device).to_string()
        if device not in hosts:
            found[placeholder.op.name] = [device, "capture"]
            continue
        if id(outer) in handles:
            kind = "variable"
        elif any(c.type in _ITERATOR_READS for c in placeholder.consumers()):
            kind = "iterator"
        else:
            kind = "resource"
        found[placeholder.op.name] = [hosts[device], kind]
    return found


def _collectives(graph: Any, tf: Any) -> dict[str, dict[str, Any]]:
    """Each collective op of the step: its group size (the constant it reads) and the shape of
    the tensor it exchanges."""
    found = {}
    for op in graph.get_operations():
        if not op.type.startswith("Collective") or len(op.inputs) < 2:
            continue
        size = op.inputs[1].op
        shape = op.inputs[0].shape
        row: dict[str, Any] = {
            "type": op.type,
            "shape": shape.as_list() if shape.rank else shape.rank,
        }
        if size.type == "Const":
            row["group_size"] = int(tf.make_ndarray(size.get_attr("value")).ravel()[0])
        found[op.name] = row
    return found
