"""``predict_placement``: trace a function here, then predict its placement with GPUs.

The prediction itself is pure (:mod:`tfplace_widget._analyses.predict`, from a trace's graph
facts); given a function, the graph is first read from a real run on this machine, which is
the tracer's job, so this entry point lives in the tracing layer. A trace made with its graph
goes straight to :func:`~tfplace_widget._analyses.predict.result.predict_trace`. Users call it
as :func:`tfplace_widget.predict_placement`.

Given a Keras step (``model.train_on_batch``...), :func:`~.keras.keras_xla` reads how Keras 3
would compile it on a machine with a GPU (``jit_compile="auto"`` picks XLA there), before the
run, so that a prediction with GPUs can say what XLA would do with the step (issues 23, 30);
the trace also records it (``trace.raw``), for ``predict_placement(trace)``.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable
from typing import Any

from .._analyses.predict.mwms_gpus import built_tasks, predict_built_mwms, strategy_record
from .._analyses.predict.pss_gpus import predict_built_pss
from .._analyses.predict.result import predict_trace
from .._analyses.predict.strategy import predict_strategy_trace
from .._model.errors import TraceError
from .._model.trace import PlacementTrace, strategy_of
from .._tfadapter.graphfacts import facts_from_graph, node_details
from .._tfadapter.registry import REGISTRY
from . import recipe as recipes
from . import tracer
from .function import is_tf2_callable
from .keras import KERAS_STEPS, keras_xla
from .mwms_gpus import building_with_gpus

__all__ = ["KERAS_STEPS", "keras_xla", "predict_placement"]


def _check_gpus(gpus: Any) -> int:
    if isinstance(gpus, bool) or not isinstance(gpus, int):
        raise TypeError(
            f"gpus must be a whole number of GPUs (0, 1, 2...), not {type(gpus).__name__}: "
            "e.g. predict_placement(fn, gpus=1)."
        )
    if not 0 <= gpus <= 64:
        raise ValueError(f"gpus must be from 0 to 64, not {gpus}.")
    return gpus


def predict_placement(fn_or_trace: Any, gpus: int = 1, **trace_options: Any) -> PlacementTrace:
    """Predict where TensorFlow would place every op on this machine plus ``gpus`` GPUs.

    ``fn_or_trace`` is what :func:`~tfplace_widget.trace_placement` takes (a graph builder or
    TF2 code, with its positional arguments in ``args=`` and the options of trace_placement,
    e.g. ``device_count``, ``soft_placement``), which is traced here first for real to read
    the graph, or a :class:`PlacementTrace` made with its graph. The result is a
    ``PlacementTrace`` with ``predicted == True``: ``ops.device`` (and ``predicted_device``)
    is where the placer would put each node of the graph as built, ``how``/``reason`` say why,
    ``traced_device`` is where it ran here; ``events`` is empty (nothing ran) and
    ``transfers`` holds the predicted copies (``predicted`` True, ``copy`` HtoD/DtoH/...).
    What TensorFlow would refuse is in ``trace.notes`` and in the ops' ``how == "error"``.
    The device set is the trace's devices other than GPUs, plus ``GPU:0`` to ``GPU:gpus-1``
    (so ``gpus=0`` asks what happens without a GPU). On a cluster trace (``cluster=``) every
    task gets ``gpus`` GPUs of its own (``/job:ps/replica:0/task:1/device:GPU:0``...), since
    each task is a machine (or process) of its own, and the placer prefers the devices of the
    task the session ran on (:func:`~tfplace_widget._analyses.predict.devices.master_task`, usually the chief) among equally good ones,
    as TensorFlow's master does: so ``gpus=0`` gives the placement the cluster made. ``gpus``
    must be a whole number from 0 to 64 (``TypeError``/``ValueError`` otherwise). A trace of
    ``MultiWorkerMirroredStrategy`` across tasks (``trace_placement(setup, cluster=...)``) is
    predicted per worker with ``gpus`` 0 or 1 on each, the strategy's replica on the worker's
    ``GPU:0`` (:func:`~tfplace_widget._analyses.predict.strategy.predict_strategy_trace`);
    one of ``ParameterServerStrategy`` too, each worker that ran the step with its replica on
    its ``GPU:0`` and the variables on the ps tasks
    (:func:`~tfplace_widget._analyses.predict.parameter_servers.predict_ps_trace`);
    more GPUs per worker are a ``TraceError`` from a trace. Given the setup and ``cluster=``
    with ``gpus`` 2 or more, under ``MultiWorkerMirroredStrategy`` each task also has
    TensorFlow build (not run) the step with the strategy seeing ``gpus`` GPUs
    (:mod:`.mwms_gpus`), and that graph is predicted
    (:func:`~tfplace_widget._analyses.predict.mwms_gpus.predict_built_mwms`); under
    ``ParameterServerStrategy`` the coordinator builds (not runs) the step for ``gpus`` GPUs
    per worker (:mod:`.pss_gpus`), and that graph is predicted on each worker
    (:func:`~tfplace_widget._analyses.predict.pss_gpus.predict_built_pss`). The function
    is traced with soft placement on (a GPU request cannot be met here), and
    ``soft_placement`` only sets the prediction's.
    """
    gpus = _check_gpus(gpus)
    details = None
    keras = None
    if isinstance(fn_or_trace, PlacementTrace):
        soft = _check_soft(trace_options.pop("soft_placement", True))
        if trace_options:
            raise TypeError(
                "predict_placement(trace, gpus) takes only soft_placement= (the trace already "
                f"ran), not {', '.join(sorted(trace_options))}; pass the function instead to "
                "trace it with those options."
            )
        trace = fn_or_trace
        made = recipes.recipe_or_none(trace)
    else:
        keras = keras_xla(fn_or_trace)  # before the run: it may settle the model's jit_compile
        with building_with_gpus(gpus if trace_options.get("cluster") else 0):
            trace, details, soft = _trace_for_facts(fn_or_trace, trace_options)
        options = {k: v for k, v in trace_options.items() if k != "args"}
        handed = recipes.recipe_of(trace, "predict_placement").handed  # its variables
        made = recipes.Recipe(
            fn_or_trace, tuple(trace_options.get("args", ()) or ()), options, handed
        )
    if strategy_of(trace):  # a step the strategy ran on every task: predicted per task
        record = strategy_record(trace)
        built = record.get("gpus_build") or {}
        if gpus > 1 and built.get("gpus") == gpus:  # the PSS coordinator built it (pss_gpus)
            facts = _built_facts({str(record.get("coordinator", "")): built})
            return predict_built_pss(trace, record, facts.popitem()[1][0], gpus, soft, REGISTRY)
        builds = built_tasks(trace, record, gpus) if gpus > 1 else {}
        if builds:  # each task built the step with the GPUs (mwms_gpus): that graph is placed
            return predict_built_mwms(trace, _built_facts(builds), gpus, soft, REGISTRY)
        return predict_strategy_trace(trace, gpus, soft, registry=REGISTRY)
    predicted = predict_trace(trace, gpus, soft, details, keras, registry=REGISTRY)
    if made is not None:  # try_fix checks a predicted finding's fix against a prediction
        options = {**made.options, "gpus": gpus, "soft_placement": soft}
        recipes.remember(predicted, made.fn, made.args, options, made.handed)
    return predicted


def _built_facts(builds: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Each task's build with GPUs (:mod:`.mwms_gpus`): the facts of its graph, and its
    record; a ``TraceError`` saying what TensorFlow raised when a task could not build it."""
    found = {}
    for task, info in builds.items():
        if "error" in info:
            raise TraceError(
                f"TensorFlow could not build the step of {task} with the strategy seeing "
                f"{info.get('gpus', 'the')} GPUs, so it cannot be predicted: {info['error']}"
            )
        found[task] = (facts_from_graph(base64.b64decode(info["graph"])), info)
    return found


def _trace_for_facts(fn: Any, options: dict[str, Any]) -> tuple[Any, Any, bool]:
    """Trace ``fn`` for real (this machine, the user's options) and read its graph's details."""
    options = dict(options)
    args = tuple(options.pop("args", ()) or ())
    tracer.check_option_names(options, "predict_placement")
    soft = _check_soft(options.get("soft_placement", True))
    # The graph is read from a run with soft placement on: a request for a GPU cannot be met
    # on this machine, and the placer's verdict with the user's setting is what is predicted.
    options["soft_placement"] = True
    mode = options.get("mode", "auto")
    graph_builder = not callable(fn) or (
        mode == "graph"
        or (mode == "auto" and not args and not options.get("fn_kwargs") and not _tf2(fn))
    )
    captured: dict[str, Any] = {}
    target: Callable[..., Any] = fn
    if graph_builder and callable(fn):
        target = _capturing(fn, captured)
        options.setdefault("mode", "graph" if mode == "graph" else "auto")
    trace = tracer.trace_placement(target, *args, **options)
    details = None
    graph = captured.get("graph")
    if graph is not None and trace.mode == "graph":
        details = node_details(graph.as_graph_def())
    return trace, details, soft


def _check_soft(soft: Any) -> bool:
    if not isinstance(soft, bool):
        raise TypeError(f"soft_placement must be True or False, not {soft!r}.")
    return soft


def _tf2(fn: Any) -> bool:
    return is_tf2_callable(fn)


def _capturing(fn: Callable[..., Any], captured: dict[str, Any]) -> Callable[..., Any]:
    """``fn`` that also records the graph it builds in (trace_placement's fresh graph)."""
    import tensorflow as tf

    @functools.wraps(fn)
    def build(*args: Any, **kwargs: Any) -> Any:
        captured["graph"] = tf.compat.v1.get_default_graph()
        return fn(*args, **kwargs)

    return build
