"""``predict_placement``: trace a function here, then predict its placement with GPUs.

The prediction itself is pure (:mod:`tfplace_widget.analyses.predict`, from a trace's graph
facts); given a function, the graph is first read from a real run on this machine, which is
the tracer's job, so this entry point lives in the tracing layer. A trace made with its graph
goes straight to :func:`~tfplace_widget.analyses.predict.result.predict_trace`.
``tfplace_widget.analyses.predict.predict_placement`` still names this function (a lazy
attribute of that package).

Given a Keras step (``model.train_on_batch``...), :func:`keras_xla` reads how Keras 3 would
compile it on a machine with a GPU (``jit_compile="auto"`` picks XLA there), before the run,
so that a prediction with GPUs can say the whole step would be one XLA cluster on one GPU
(issue 23); that reads Keras objects, so it lives here too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..analyses.predict.details import node_details
from ..analyses.predict.result import KerasXla, predict_trace
from ..model.trace import PlacementTrace
from . import tracer
from .function import is_tf2_callable


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
    task the session ran on (:func:`~tfplace_widget.analyses.predict.devices.master_task`, usually the chief) among equally good ones,
    as TensorFlow's master does: so ``gpus=0`` gives the placement the cluster made. ``gpus``
    must be a whole number from 0 to 64 (``TypeError``/``ValueError`` otherwise); the function
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
    else:
        keras = keras_xla(fn_or_trace)  # before the run: it may settle the model's jit_compile
        trace, details, soft = _trace_for_facts(fn_or_trace, trace_options)
    return predict_trace(trace, gpus, soft, details, keras)


# -- Keras 3 and XLA on a GPU ------------------------------------------------------------------
# The Keras methods that run the model's train/test/predict function, which Keras compiles
# with XLA when jit_compile is True ("auto" resolves to True on a machine with a GPU).
KERAS_STEPS = frozenset(
    {"train_on_batch", "test_on_batch", "predict_on_batch", "fit", "evaluate", "predict"}
)
# The functions Keras makes for those steps (model.train_function, test_function,
# predict_function): closures over the model made by these methods of its trainer.
_KERAS_MAKERS = ("._make_function.", ".make_predict_function.")


def keras_xla(fn: Any, *, gpu_here: bool | None = None) -> KerasXla | None:
    """How Keras 3 would compile ``fn`` on a machine with a GPU, when ``fn`` is a Keras step
    (``model.train_on_batch`` and the other :data:`KERAS_STEPS`, or a function Keras made for
    them, ``model.train_function``...) that Keras would compile with XLA there; ``None``
    otherwise (anything else, a model called directly: Keras compiles only its steps; a model
    run eagerly, with a ``tf.distribute`` strategy, or with a layer XLA does not support:
    ``jit_compile="auto"`` leaves those alone).

    Keras resolves ``jit_compile="auto"`` when the model is compiled (keras/src/trainers/
    trainer.py, ``_resolve_auto_jit_compile``): ``True`` if a non-CPU device is visible, else
    ``False``. So on a machine without a GPU a model compiled with the default reads
    ``jit_compile == False`` just as one compiled with ``jit_compile=False``: ``requested`` is
    then ``"auto or False"``. On a machine with a GPU (``gpu_here``, by default whether
    TensorFlow sees a non-CPU device) ``False`` is the user's choice and gives ``None``. A model
    never compiled has not resolved it yet: ``"auto"``. Reads the model's settings without
    changing them.
    """
    model = _keras_model_of(fn)
    if model is None or getattr(model, "run_eagerly", False) is True:
        return None
    name = str(getattr(model, "name", "") or type(model).__name__)
    step = _step_name(fn)
    setting = getattr(model, "_jit_compile", _UNSET)
    if setting is _UNSET:  # a Keras without the private field: its public property
        setting = getattr(model, "jit_compile", None)
    if setting is True:
        return KerasXla(name, step, True)
    if setting not in (None, False, "auto") or not _auto_picks_xla(model):
        return None
    if setting is None or setting == "auto":
        return KerasXla(name, step, "auto")
    if gpu_here is None:
        gpu_here = _gpu_visible()
    return None if gpu_here else KerasXla(name, step, "auto or False")


_UNSET = object()


def _keras_model_of(fn: Any) -> Any:
    """The Keras model whose step ``fn`` is (see :func:`keras_xla`), or ``None``."""
    owner = getattr(fn, "__self__", None)
    if owner is not None and _is_keras_model(owner):
        return owner if getattr(fn, "__name__", "") in KERAS_STEPS else None
    function = getattr(fn, "python_function", fn)  # a tf.function: the Python function
    for _ in range(4):  # Keras wraps its step functions (functools.wraps) a few times
        qualname = getattr(function, "__qualname__", "")
        if any(maker in qualname for maker in _KERAS_MAKERS):
            for cell in getattr(function, "__closure__", None) or ():
                try:
                    value = cell.cell_contents
                except ValueError:  # an empty cell
                    continue
                if _is_keras_model(value):
                    return value
        function = getattr(function, "__wrapped__", None)
        if function is None:
            break
    return None


def _is_keras_model(value: Any) -> bool:
    """A Keras 3 model (anything with Keras's ``Trainer`` among its classes: what has
    train/test/predict steps and a ``jit_compile``)."""
    return any(
        cls.__name__ == "Trainer" and (cls.__module__ or "").startswith("keras")
        for cls in type(value).__mro__
    )


def _step_name(fn: Any) -> str:
    """``train_on_batch``, ``train_function``...: what the note calls the step."""
    name = getattr(fn, "__name__", "") or ""
    if getattr(fn, "__self__", None) is not None:
        return name
    qualname = getattr(getattr(fn, "python_function", fn), "__qualname__", "")
    return "predict_function" if "make_predict_function" in qualname else "step function"


def _auto_picks_xla(model: Any) -> bool:
    """Whether Keras 3's ``jit_compile="auto"`` gives XLA for ``model`` on a machine with a
    GPU: TensorFlow's backend, no ``tf.distribute`` strategy, and every layer supports XLA
    (Keras's ``model_supports_jit``, which also says no under op determinism)."""
    try:
        import keras

        if keras.backend.backend() != "tensorflow":
            return False
    except (ImportError, AttributeError):
        return False
    if getattr(model, "_distribute_strategy", None):
        return False
    try:
        from keras.src.trainers.trainer import model_supports_jit
    except ImportError:  # another Keras 3: its rule, as documented, without the helper
        layers = getattr(model, "_flatten_layers", None)
        return all(getattr(layer, "supports_jit", True) for layer in (layers() if layers else ()))
    return bool(model_supports_jit(model))


def _gpu_visible() -> bool:
    """Whether TensorFlow sees a device other than a CPU (what Keras's "auto" asks)."""
    import tensorflow as tf

    return any(d.device_type != "CPU" for d in tf.config.list_physical_devices())


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
