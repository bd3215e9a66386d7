"""How Keras 3 would compile a traced Keras step on a machine with a GPU, read off Keras's objects.

:func:`keras_xla` is asked before the step runs (reading a model's ``jit_compile`` may settle
it); :func:`~tfplace_widget._tracing.tracer.trace_placement` records its answer in the trace
(``trace.raw["keras_xla.json"]``) so that ``predict_placement(trace, gpus=1)`` knows it too,
with the step's nodes XLA could not compile for a GPU (:func:`step_record`, asked of XLA's
kernels here); what XLA would then do with the step's ops is
:func:`~tfplace_widget._analyses.predict.keras_xla.apply_keras_xla`'s.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .._analyses.predict.keras_xla import RAW_NAME, STEP_FUNCTION, KerasXla
from .._tfadapter.kernels import has_xla_kernel
from .._tfadapter.protos import dtype_name, run_metadata_type

_CALLS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
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


def keras_record(fn: Any) -> dict[str, bytes]:
    """``{RAW_NAME: ...}`` for a trace of ``fn`` when it is a Keras step XLA would compile on
    a GPU (:func:`keras_xla`), else ``{}``. A Keras that cannot be read says nothing."""
    try:
        found = keras_xla(fn)
    except Exception:  # another Keras's objects: no record rather than a failed trace
        return {}
    return {RAW_NAME: found.to_json()} if found is not None else {}


def step_record(trace: Any) -> bytes | None:
    """The trace's Keras record (``trace.raw[RAW_NAME]``) with the step XLA would compile, read
    from the function graphs this process just recorded (``function_graphs.pb``: the tracer's
    own, never a file's): its graph's name and the nodes without an ``XLA_GPU_JIT`` kernel.
    ``None`` when the trace has no record or no Keras step function."""
    raw = getattr(trace, "raw", None) or {}
    record, data = raw.get(RAW_NAME), raw.get("function_graphs.pb")
    if not record or not data or getattr(trace, "mode", "") != "function":
        return None
    step = _read_step(trace, raw, data)
    if step is None:
        return None
    graph, unsupported = step
    document = json.loads(bytes(record))
    document["compiled"] = {"graph": graph, "unsupported": [list(u) for u in unsupported]}
    return json.dumps(document).encode()


def _read_step(trace: Any, raw: Any, data: bytes) -> tuple[str, tuple] | None:
    """The step's graph name and its nodes without an ``XLA_GPU_JIT`` kernel (what
    :func:`~tfplace_widget._analyses.predict.keras_xla.keras_step` reads back), from the function
    graphs ``data``; None without a Keras step function among the trace's."""
    holder = run_metadata_type()()
    try:
        holder.ParseFromString(bytes(data))
        names = json.loads(raw.get("functions.json", b"{}")).get("names", [])
    except Exception:  # a damaged or foreign file: no evidence
        return None
    shown = set(trace.ops["function"].astype(str)) if "function" in trace.ops else set()
    steps = frozenset(name for name in shown if STEP_FUNCTION.match(name))
    for index, graph in enumerate(holder.function_graphs):
        display = names[index] if index < len(names) else ""
        built = graph.pre_optimization_graph
        library = {f.signature.name: f for f in built.library.function}
        if STEP_FUNCTION.match(display):
            body, graph_name = list(built.node), display
        else:
            compiled = [f for name, f in library.items() if STEP_FUNCTION.match(name)]
            if not compiled:
                continue
            body, graph_name = list(compiled[0].node_def), compiled[0].signature.name
        if not steps:
            continue
        return graph_name, tuple(_unsupported(body, library))
    return None


def _unsupported(body: list, library: dict) -> Iterable[tuple[str, str, str]]:
    """The nodes of ``body`` and of the library functions it calls that XLA has no
    ``XLA_GPU_JIT`` kernel for: ``(name, op type, attrs)`` (attrs: their type attrs)."""
    seen: set[str] = set()
    pending = [body]
    while pending:
        nodes = pending.pop()
        for node in nodes:
            called = _called(node, library)
            for name in called:
                if name not in seen:
                    seen.add(name)
                    pending.append(list(library[name].node_def))
            if node.op in library or node.op in _CALLS:
                continue  # XLA compiles the function it calls (checked above)
            if not has_xla_kernel(node):
                yield node.name, node.op, _type_attrs(node)


def _called(node: Any, library: dict) -> list[str]:
    """The library functions ``node`` calls (as its op, or in a function attr: a call's ``f``,
    a While's ``cond`` and ``body``, an If's branches, a Case's ``branches``)."""
    found = [node.op] if node.op in library else []
    attrs = node.attr
    for name in _FUNCTION_ATTRS:
        if name in attrs and attrs[name].func.name in library:
            found.append(attrs[name].func.name)
    if "branches" in attrs:
        found += [f.name for f in attrs["branches"].list.func if f.name in library]
    return found


_FUNCTION_ATTRS = ("f", "cond", "body", "then_branch", "else_branch")


def _type_attrs(node: Any) -> str:
    """``T=string``: the node's type attrs, as TensorFlow's XLA error names them."""
    parts = []
    for name in sorted(node.attr):
        value = node.attr[name]
        if value.WhichOneof("value") == "type":
            try:
                parts.append(f"{name}={dtype_name(value.type)}")
            except TypeError:
                continue
    return ", ".join(parts)
