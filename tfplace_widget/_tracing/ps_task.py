"""One task of a ``ParameterServerStrategy`` trace across a local cluster (issue 36), in a
process of its own (started by ``cluster_child`` in the cluster's network namespace, with the
task's ``TF_CONFIG``), as on each machine of a real cluster:

- the coordinator (``/job:chief/task:0``) runs the user's setup, which makes the strategy (its
  variables on the ps tasks) and the ``ClusterCoordinator`` and returns the step; it schedules
  the step ``warmup`` times through the coordinator, waits for them, then ``steps`` times
  (the traced calls). Its ``log_device_placement`` is set first: the strategy passes it on to every task's
  eager context (``ServerDef.default_session_config``), so each task prints its placement log
  and a line for each function call it runs (which worker ran each scheduled call);
- worker and ps tasks run a ``tf.distribute.Server`` only. The worker the coordinator sends the
  step to instantiates it: places it and partitions it over its own device and the ps tasks'.
  With ``TF_DUMP_GRAPH_PREFIX`` set before TensorFlow starts, TensorFlow writes the graphs of
  each instantiation into the task's private folder (removed when the task ends; a killed
  task's by the next trace, ``profile_dir``); once the coordinator is done, the task sends back
  the graph before the placer and each device's partition of every function it instantiated.
"""

from __future__ import annotations

import glob
import os
import pickle
import re
import socket
import threading
import time
import traceback
from typing import Any

from .._model.errors import TraceError
from .profile_dir import profile_dir, start_profiler, written_xspace
from .ps_requests import is_library, scope_openers, users_requests

# The graphs of an instantiation that make the trace: TensorFlow's DebugDataDumper names its
# files <function>[_partition_<device>].<order>.<group>.<stage>.pbtxt.
DUMP_STAGES = ("before_placer", "after_partition_passes")
_DUMPED = re.compile(r"(?P<function>.+?)\.\d{4}\.main\.(?P<stage>\w+)\.pbtxt\Z")
SERVERS_TIMEOUT_S = 120.0  # for the worker and ps tasks' servers to listen
STRATEGY = "ParameterServerStrategy"


def run_ps_task(
    request: dict[str, Any], blobs: list[bytes], told: threading.Event
) -> tuple[dict[str, Any], list[bytes]]:
    """The task's answer: the coordinator's record, or a server's graphs and profile (pickled
    ``{"graphs": {file name: text}, "xspace": bytes, "marked_ns": int}``); ``({"error": ...},
    [])`` on failure."""
    try:
        if request["tf_config"]["task"]["type"] == "chief":
            return coordinate(request, blobs), [b""]
        graphs, space, marked_ns = serve(request, told)
        answer = {"graphs": graphs, "xspace": space, "marked_ns": marked_ns}
        return {}, [pickle.dumps(answer, pickle.HIGHEST_PROTOCOL)]
    except BaseException as exc:  # noqa: BLE001 (any failure is the answer)
        return {
            "error": str(exc) if isinstance(exc, TraceError) else f"{type(exc).__name__}: {exc}",
            "type": type(exc).__name__,
            "traceback": traceback.format_exc(),
        }, []


def serve(request: dict[str, Any], told: threading.Event) -> tuple[dict[str, str], bytes, int]:
    """Run this task's server until ``told``; the graphs TensorFlow dumped meanwhile, what
    its profiler recorded (XSpace bytes; ``b""`` if it wrote none) and the epoch's ns as its
    clock mark began (``start_profiler``)."""
    with profile_dir() as folder:
        os.environ["TF_DUMP_GRAPH_PREFIX"] = folder  # read by TensorFlow's dumper when it starts
        os.environ["TF_DUMP_GRAPH_NAME_FILTER"] = "*"
        import tensorflow as tf

        task = request["tf_config"]["task"]
        config = tf.compat.v1.ConfigProto()
        for kind, count in request.get("device_count", {}).items():
            config.device_count[kind] = count
        tf.distribute.Server(
            tf.train.ClusterSpec(request["tf_config"]["cluster"]),
            job_name=task["type"],
            task_index=task["index"],
            protocol="grpc",
            config=config,
            start=True,
        )
        logdir = os.path.join(folder, "profile")
        marked_ns = start_profiler(logdir)  # the ops the server runs, in this process
        told.wait()
        tf.profiler.experimental.stop()
        space = written_xspace(logdir) or b""
        graphs = {}
        for path in sorted(glob.glob(os.path.join(folder, "*.pbtxt"))):
            found = _DUMPED.match(os.path.basename(path))
            if found and found["stage"] in DUMP_STAGES:
                with open(path, encoding="utf-8") as handle:
                    graphs[os.path.basename(path)] = handle.read()
    return graphs, space, marked_ns


def coordinate(request: dict[str, Any], blobs: list[bytes]) -> dict[str, Any]:
    """Run the setup, schedule its step through the strategy's coordinator; what happened."""
    import tensorflow as tf

    from .cluster_worker import graph_gpu_requests, step_of

    tf.debugging.set_log_device_placement(True)  # before the strategy connects: every task's
    # As trace_placement runs TF2 code: the step's calls carry this process's ConfigProto to
    # the worker that instantiates the step (soft placement, Grappler off unless optimize=True).
    tf.config.set_soft_device_placement(bool(request["options"].get("soft_placement", True)))
    if not request["options"].get("optimize"):
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    _wait_for_servers(request["tf_config"]["cluster"])
    setup, args, kwargs = pickle.loads(blobs[0])
    options = request["options"]
    warmup, steps = int(options.get("warmup", 1)), int(options.get("steps", 1))
    # who opened each device scope (the step is traced at its first schedule), and the
    # user's tf.device around each variable the setup makes
    with scope_openers() as followed, users_requests() as asked:
        step, step_args, step_kwargs = step_of(setup(*args, **kwargs), setup)
        strategy = _the_strategy(setup)
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)  # the setup's own
        for _ in range(warmup):  # done before the traced calls start: they alone are timed
            coordinator.schedule(step, args=step_args, kwargs=step_kwargs)
        coordinator.join()
    traced_from_us = time.time_ns() // 1000
    for _ in range(steps):
        coordinator.schedule(step, args=step_args, kwargs=step_kwargs)
    coordinator.join()
    functions = _concrete_functions(step)
    partitioner = getattr(strategy.extended, "_variable_partitioner", None)
    built = _built_with_gpus(int(request.get("gpus_build") or 0), setup, args, kwargs)
    return {
        **({"gpus_build": built} if built is not None else {}),
        "strategy": STRATEGY,
        "calls": warmup + steps,
        "warmup": warmup,
        "traced_from_us": traced_from_us,
        "functions": [f.function_def.signature.name for f in functions],
        "variables": {f.function_def.signature.name: _variables(f) for f in functions},
        "tensor_bytes": {f.function_def.signature.name: _tensor_bytes(f) for f in functions},
        "requests": {
            f.function_def.signature.name: device_scopes(f, strategy, followed) for f in functions
        },
        "asked": asked,
        # what the step's own tf.device requests ask for on a worker with a GPU, and whether
        # its input is a distributed iterator fetching to the replica device (issue 36)
        "gpu_requests": {
            f.function_def.signature.name: graph_gpu_requests(f.graph, strategy, by_identity=True)
            for f in functions
        },
        "inputs_to_device": {f.function_def.signature.name: _to_device(f) for f in functions},
        "partitioner": type(partitioner).__name__ if partitioner is not None else "",
        "ps_tasks": len(request["tf_config"]["cluster"].get("ps", [])),
    }


def _built_with_gpus(gpus: int, setup: Any, args: tuple, kwargs: dict) -> dict[str, Any] | None:
    """The step as the strategy builds it for workers with ``gpus`` GPUs
    (:func:`.pss_gpus.build_ps_with_gpus`, after the traced calls), or ``{"error": ...}``
    saying what TensorFlow raised; ``None`` when not asked for."""
    if gpus < 2:
        return None
    from .cluster_worker import step_of
    from .pss_gpus import build_ps_with_gpus

    try:
        return build_ps_with_gpus(
            setup, args, kwargs, gpus, step_of, lambda concrete: _records(concrete)
        )
    except Exception as exc:  # noqa: BLE001 (the trace stands; the prediction says why not)
        return {"gpus": gpus, "error": f"{type(exc).__name__}: {exc}"[:2000]}


def _records(concrete: Any) -> dict[str, Any]:
    """What the coordinator records of a concrete function of the step: its variables (per
    argument of its ``FunctionDef``) and the sizes of its tensors."""
    return {"variables": _variables(concrete), "tensor_bytes": _tensor_bytes(concrete)}


def _the_strategy(setup: Any) -> Any:
    """The ParameterServerStrategy the setup made; a TraceError naming the fix otherwise."""
    from .cluster_worker import strategy_made

    strategy = strategy_made()
    if strategy is None or STRATEGY not in type(strategy).__name__:
        made = type(strategy).__name__ if strategy is not None else "no tf.distribute strategy"
        raise TraceError(
            f"{getattr(setup, '__name__', 'setup')}() made {made} on the coordinator of a "
            "cluster with ps tasks: make tf.distribute.experimental.ParameterServerStrategy("
            "tf.distribute.cluster_resolver.TFConfigClusterResolver()) in it (tfplace sets "
            "TF_CONFIG), create the variables in strategy.scope() and return the step."
        )
    return strategy


def _wait_for_servers(cluster: dict[str, list[str]]) -> None:
    """Return once every worker and ps task's server accepts connections."""
    deadline = time.monotonic() + SERVERS_TIMEOUT_S
    for job in ("worker", "ps"):
        for address in cluster.get(job, []):
            host, _, port = address.rpartition(":")
            while True:
                try:
                    with socket.create_connection((host, int(port)), 1.0):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise TraceError(
                            f"The server of {job} at {address} did not start in "
                            f"{SERVERS_TIMEOUT_S:.0f} s."
                        ) from None
                    time.sleep(0.1)


def _concrete_functions(step: Any) -> list[Any]:
    """The step's concrete functions traced so far (a ``tf.function``'s)."""
    listed = getattr(step, "_list_all_concrete_functions", None)
    if listed is None:
        raise TraceError(
            "The step the setup returned is not a tf.function: ClusterCoordinator.schedule "
            "sends a tf.function to a worker. Return the @tf.function train_step."
        )
    return list(listed())


def _variables(concrete: Any) -> dict[str, dict[str, Any]]:
    """Per argument of the step's FunctionDef that is a captured variable's handle (the name
    of its ``_Arg`` node in the placed graphs): the variable's name, device, shape, dtype,
    bytes, when it was made (``created``: an index, ordering them) and its shard and shard
    count when it is a shard of a ``ShardedVariable``."""
    import gc

    from tensorflow.python.distribute import sharded_variable
    from tensorflow.python.ops import resource_variable_ops

    shards: dict[int, tuple[int, int]] = {}
    handles: dict[int, Any] = {}
    for obj in gc.get_objects():
        if isinstance(obj, sharded_variable.ShardedVariableMixin):
            for index, shard in enumerate(obj.variables):
                shards[id(shard.handle)] = (index, len(obj.variables))
        elif isinstance(obj, resource_variable_ops.BaseResourceVariable):
            handles[id(obj.handle)] = obj
    names = [arg.name for arg in concrete.function_def.signature.input_arg]
    position = {id(tensor): index for index, tensor in enumerate(concrete.graph.inputs)}
    found = {}
    for external, internal in concrete.graph.captures:
        variable = handles.get(id(external))
        index = position.get(id(internal))
        if variable is None or index is None or index >= len(names):
            continue
        name = variable.name.split(":")[0]
        info = {
            "variable": name.rsplit("/part_", 1)[0] if id(external) in shards else name,
            "name": name,
            "device": variable.device,
            "shape": [int(d) for d in variable.shape],
            "dtype": variable.dtype.name,
            "bytes": int(variable.shape.num_elements() * variable.dtype.size),
            "created": _creation_index(variable),
        }
        if id(external) in shards:
            info["shard"], info["shards"] = shards[id(external)]
        found[names[index]] = info
    return found


def _creation_index(variable: Any) -> int:
    """When TensorFlow made ``variable``: the process-wide counter its id ends with
    (``<handle name>_<ops.uid()>``), -1 when it has none."""
    tail = str(getattr(variable, "_unique_id", "")).rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def device_scopes(concrete: Any, strategy: Any, followed: bool) -> dict[str, list[dict[str, Any]]]:
    """Per op of the step's graph that a device scope reaches: each ``tf.device`` around it,
    innermost first, as its graph recorded it (``_device_assignments``), and whether it is the
    user's. ``followed``: the scopes carry the file that opened them (``scope_openers``): the
    user's is one outside TensorFlow, Keras and tfplace. Otherwise the strategy's scopes are
    told by their device: it sets one on an op, its replica device (``worker_devices``), under
    which ``strategy.run`` runs the replica function, or the CPU that ``strategy.reduce``
    reduces to; an op with more scopes, or another device, is reached by the user's."""
    import tensorflow as tf

    own = {_spec(d) for d in (*strategy.extended.worker_devices, "/device:CPU:0")}
    found = {}
    for op in concrete.graph.get_operations():
        scopes = [
            a
            for a in reversed(op._device_assignments)  # noqa: SLF001 (the graph's own record)
            if isinstance(a.obj, str | tf.DeviceSpec)
        ]
        if not scopes:
            continue
        if followed:
            users = [not is_library(a.filename or "") for a in scopes]
        else:
            guess = len(scopes) > 1 or _spec(str(scopes[0].obj)) not in own
            users = [guess] * len(scopes)
        found[op.name] = [
            {"device": str(a.obj), "user": user} for a, user in zip(scopes, users, strict=True)
        ]
    return found


def _spec(device: str) -> str:
    """``device`` as a comparable string (``/cpu:0`` and ``/device:CPU:0`` alike)."""
    import tensorflow as tf

    return tf.DeviceSpec.from_string(device).to_string()


def _to_device(concrete: Any) -> bool | None:
    """Whether the step reads a distributed iterator that fetches its batches to the replica
    device (``InputOptions.experimental_fetch_to_device``, on by default): a
    ``DistributedIteratorSpec`` among its arguments' specs (a per-worker dataset made with
    ``strategy.distribute_datasets_from_function``); ``None`` when it reads none (a plain
    ``tf.data`` iterator, which stays on the worker's CPU)."""
    import tensorflow as tf
    from tensorflow.python.distribute import input_lib

    specs = tf.nest.flatten(concrete.structured_input_signature, expand_composites=False)
    found = [s for s in specs if isinstance(s, input_lib.DistributedIteratorSpec)]
    if not found:
        return None
    options = [getattr(s, "_options", None) for s in found]
    return all(o is None or bool(o.experimental_fetch_to_device) for o in options)


def _tensor_bytes(concrete: Any) -> dict[str, int]:
    """The size of every tensor of the step's graph whose static shape is known."""
    import tensorflow as tf

    sizes = {}
    for op in concrete.graph.get_operations():
        for tensor in op.outputs:
            count = tensor.shape.num_elements()
            if count is not None and tensor.dtype not in (tf.resource, tf.variant, tf.string):
                sizes[tensor.name] = int(count * tensor.dtype.size)
    return sizes
