"""What Keras 3's XLA would do with a traced Keras step on a machine with a GPU (issue 30).

Keras 3 compiles its step function (``one_step_on_data``, made by the trainer's
``_make_function``) with ``tf.function(jit_compile=True)`` when ``jit_compile`` is True, which
its default ``"auto"`` picks on a machine with a GPU for a model whose layers all say
``supports_jit`` (keras/src/trainers/trainer.py, ``_resolve_auto_jit_compile`` and
``model_supports_jit``). Keras checks nothing else: an op XLA has no kernel for (a string op in
a custom layer) is found by XLA when the step is first called, and the call fails with
TensorFlow's ``InvalidArgumentError`` "Detected unsupported operations when trying to compile
graph ... on XLA_GPU_JIT". Keras's loop around the step (``multi_step_on_iterator``: the
iterator's ``IteratorGetNext``, ``OptionalFromValue``) is a plain ``tf.function``, placed op
by op.

So a prediction with GPUs of a Keras step (:func:`apply_keras_xla`) reads the step's
function graphs as the trace recorded them (``trace.raw``), checks every node of the compiled
function (and of the functions it calls) against XLA's ``XLA_GPU_JIT`` kernels (the tracer
did, :func:`tfplace_widget._tracing.keras.step_record`), and then either marks the step's ops
as one XLA cluster on the GPU (``how == "xla"``, no host-memory copies between them), or, when
some op has no such kernel, says that the step would fail and which ops make it fail.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..._model.devices import short_device
from ..._model.errors import TraceError
from ..._sources.limits import parse_json
from ..resources import ASSUMED_MADE, _resource_users

# trace.raw's member where trace_placement records how Keras would compile the traced step.
RAW_NAME = "keras_xla.json"
# Keras's step function (the one it compiles), as a function graph or a library function;
# ``_distributed``: make_predict_function's wrapper, which holds the step when not compiled.
STEP_FUNCTION = re.compile(r"^(?:__inference_)?one_step_on_data(?:_distributed)?(?:_\d+)*$")
_RUNTIME_TYPES = frozenset({"_Arg", "_Retval"})
_LOOP_PLUMBING = _RUNTIME_TYPES | {"NoOp", "Identity"}  # not named among the ops outside
SHOWN = 4  # ops named in a note


@dataclass(frozen=True)
class KerasXla:
    """A Keras step that Keras 3 would compile with XLA on a machine with a GPU (what
    :func:`~tfplace_widget._tracing.keras.keras_xla` found): the model's ``name``, the
    ``step`` traced (``train_on_batch``...) and its ``jit_compile`` as far as this machine can
    tell: ``True``, ``"auto"`` (Keras 3's default, not resolved yet), or ``"auto or False"``
    (a model compiled on a machine without a GPU, where the default resolves to ``False`` as
    ``jit_compile=False`` does)."""

    model: str
    step: str
    requested: Any  # True, "auto" or "auto or False"

    def to_json(self) -> bytes:
        """What ``trace.raw[RAW_NAME]`` holds."""
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_raw(cls, raw: Any) -> KerasXla | None:
        """The record a trace keeps (``trace.raw``), ``None`` when it has none or a bad one."""
        data = (raw or {}).get(RAW_NAME)
        if not data:
            return None
        try:
            found = json.loads(bytes(data))
            requested = found["requested"]
            if requested not in (True, "auto", "auto or False"):
                return None
            return cls(str(found["model"]), str(found["step"]), requested)
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class _Step:
    """The step XLA would compile, read from the trace's function graphs."""

    graph: str  # its graph's name (__inference_one_step_on_data_533) or the display name
    functions: frozenset  # the trace's function names whose ops it holds
    unsupported: tuple  # ((node name, op type, attrs), ...) without an XLA_GPU_JIT kernel


def keras_step(trace: Any) -> _Step | None:
    """The Keras step of a function-mode ``trace``, with the nodes XLA could not compile for a
    GPU, as :func:`~tfplace_widget._tracing.keras.step_record` wrote it into the trace's Keras
    record when it traced (``trace.raw[RAW_NAME]``, read under the JSON limits of every member:
    a file's raw protos are never parsed); ``None`` when the trace holds no Keras step function."""
    if getattr(trace, "mode", "") != "function":
        return None
    data = (getattr(trace, "raw", None) or {}).get(RAW_NAME)
    if not data:
        return None
    try:
        found = parse_json(bytes(data), f"raw/{RAW_NAME}", f"raw/{RAW_NAME}")["compiled"]
        graph = str(found["graph"])
        unsupported = tuple(
            (str(name), str(op), str(attrs)) for name, op, attrs in found["unsupported"]
        )
    except (TraceError, ValueError, KeyError, TypeError):  # none, or a damaged record
        return None
    shown = set(trace.ops["function"].astype(str)) if "function" in trace.ops else set()
    steps = frozenset(name for name in shown if STEP_FUNCTION.match(name))
    return _Step(graph, steps, unsupported) if steps else None


def apply_keras_xla(predicted: Any, trace: Any, keras: KerasXla, gpus: int) -> str:
    """Make ``predicted`` (the prediction of ``trace`` with ``gpus`` GPUs) say what Keras's XLA
    would do, and return the note for it (``""`` without GPUs: ``"auto"`` gives no XLA).

    When XLA can compile the step, the step's ops become one cluster on the first GPU: their
    ``how`` is ``"xla"``, their reason says so (and where each would go with
    ``jit_compile=False``), and the predicted copies between them are gone (XLA keeps a
    cluster's tensors in device memory). When it cannot, the placement stays per op (what
    runs with ``jit_compile=False``, the fix) and the ops XLA cannot compile say that the step
    would fail on them."""
    if gpus <= 0:
        return ""
    step = keras_step(trace)
    name = f"{keras.model}.{keras.step}"
    if step is None:  # no function graphs to read: what Keras decides, without the ops
        return _note(keras, name, _cluster_words(None, 0, []))
    ops = predicted.ops
    function = ops["function"].astype(str) if "function" in ops else pd.Series("", index=ops.index)
    types = ops["type"].astype(str)
    inside = function.isin(step.functions) & ~types.isin(_RUNTIME_TYPES)
    inside &= ops["how"].astype(str) != "runtime"
    if step.unsupported:
        _mark_unsupported(predicted, step, function)
        return _note(keras, name, _failure_words(step))
    gpu = next(d for d in predicted.devices if "device:GPU:" in d)
    variables = _step_variables(predicted, inside.to_numpy())
    elsewhere = {arg: device for arg, device in variables.items() if device != gpu}
    if elsewhere:
        _mark_elsewhere(predicted, elsewhere, gpu)
        return _note(keras, name, _elsewhere_words(elsewhere, gpu))
    reasons = dict(zip(ops["op"].astype(str), ops["reason"].astype(str), strict=True))
    assumed = [arg for arg in variables if ASSUMED_MADE in reasons.get(arg, "")]
    outside = ops.loc[
        ~inside & ~types.isin(_LOOP_PLUMBING) & (ops["how"].astype(str) != "runtime"), "op"
    ].tolist()
    _mark_cluster(predicted, inside.to_numpy(), gpu, name, keras)
    return _note(keras, name, _cluster_words(gpu, int(inside.sum()), outside) + _if_made(assumed))


def xla_cluster_ops(trace: Any) -> tuple[frozenset, frozenset, bool]:
    """What Keras's XLA would compile into one cluster of ``trace``'s ops on a machine with a
    GPU (as :func:`apply_keras_xla` predicts it): ``(ops, step_ops, certain)``. ``ops``: the
    step's ops XLA fuses, when the trace records a Keras step (``trace.raw[RAW_NAME]``) whose
    every op XLA can compile for a GPU, else empty; ``step_ops``: every row of the step's
    functions (its ``_Arg``s too); ``certain``: the model asked for XLA (``True``) or for
    Keras's default unresolved (``"auto"``), not ``"auto or False"`` (a model compiled on a
    machine without a GPU, where an explicit ``jit_compile=False`` reads the same)."""
    none: tuple[frozenset, frozenset, bool] = (frozenset(), frozenset(), False)
    keras = KerasXla.from_raw(getattr(trace, "raw", None))
    if keras is None or "function" not in trace.ops:
        return none
    step = keras_step(trace)
    if step is None or step.unsupported:  # per op: what runs with jit_compile=False
        return none
    ops = trace.ops
    of_step = ops["function"].astype(str).isin(step.functions)
    inside = of_step & ~ops["type"].astype(str).isin(_RUNTIME_TYPES)
    inside &= ops["how"].astype(str) != "runtime"
    names = ops["op"].astype(str)
    return frozenset(names[inside]), frozenset(names[of_step]), keras.requested != "auto or False"


def _if_made(assumed: list[str]) -> str:
    """What the cluster rests on when the step's variables are assumed made on the GPU."""
    if not assumed:
        return ""
    return (
        f" This assumes the variables of {_listed(assumed)} were made with no tf.device, so on "
        "the GPU (the trace cannot tell; see their rows): made under tf.device('/CPU:0') they "
        "would stay on the CPU, and the step would fail, since XLA cannot use a variable on "
        "another device."
    )


def _mark_cluster(predicted: Any, inside: np.ndarray, gpu: str, name: str, keras: KerasXla) -> None:
    """The step's ops as one XLA cluster on ``gpu``; the copies recomputed without theirs."""
    ops = predicted.ops
    if not inside.any():
        return
    short = short_device(gpu)
    unless = "" if keras.requested is True else " (unless it was compiled with jit_compile=False)"
    reasons = ops["reason"].astype(str).to_numpy(dtype=object, copy=True)
    devices = ops["device"].astype(str).to_numpy(dtype=object, copy=True)
    rows = np.flatnonzero(inside)
    count = len(rows)
    for row in rows:
        reasons[row] = (
            f"Compiled by XLA: Keras compiles {name} with XLA on a GPU{unless}, so this op is "
            f"one of the {count:,} ops of one XLA cluster on {short}, fused into XLA "
            "instructions, not placed one by one (its tensors stay in the GPU's memory). With "
            f"jit_compile=False it would go to {short_device(devices[row])}: {reasons[row]}"
        )
    how = ops["how"].astype(object).to_numpy(copy=True)
    how[rows] = "xla"
    devices[rows] = gpu
    ops["how"] = pd.Categorical(how, categories=ops["how"].cat.categories)
    ops["reason"] = pd.Series(reasons, index=ops.index, dtype=ops["reason"].dtype)
    ops["device"] = pd.Series(devices, index=ops.index, dtype=ops["device"].dtype)
    if "predicted_device" in ops:
        ops["predicted_device"] = ops["device"]
    predicted.transfers = _copies_without(predicted, inside)


def _copies_without(predicted: Any, cluster: np.ndarray) -> pd.DataFrame:
    """The predicted copies once the ``cluster`` rows' ops are on one GPU, computed again with
    no host-memory arguments for them (XLA keeps a cluster's tensors in device memory):
    copies into and out of the cluster stay, host-memory copies inside it are gone."""
    from .transfers import _copies

    facts = predicted.facts
    names = predicted.ops["op"].astype(str).tolist()
    devices = predicted.ops["device"].astype(str).tolist()
    kernels = [getattr(facts, "kernels", {}).get(name) for name in names]
    host_out = np.array([bool(k is not None and k.gpu_host_outputs) for k in kernels] + [0])
    host_in = np.array([bool(k is not None and k.gpu_host_inputs) for k in kernels] + [0])
    host_out[:-1][cluster] = False
    host_in[:-1][cluster] = False
    ran = set(predicted.ops.loc[predicted.ops["traced_device"].astype(str) != "", "op"])
    return _copies(facts, names, devices, None, host_args=(host_out, host_in), ran=ran or None)


def _step_variables(predicted: Any, inside: np.ndarray) -> dict[str, str]:
    """The resource arguments of the trace's functions that the step uses (its ops read them,
    or Keras's loop passes them on to the call of the step) and where they are predicted:
    ``{argument: device}``. A resource an op outside the step uses (the iterator) is not."""
    facts = predicted.facts
    ops = predicted.ops
    names = ops["op"].astype(str).tolist()
    in_cluster = {n for n, yes in zip(names, inside.tolist(), strict=True) if yes}
    device = dict(zip(names, ops["device"].astype(str).tolist(), strict=True))
    args = [n for n in names if facts.types.get(n) == "_Arg"]
    users, forwarded = _resource_users(facts, args)
    found = {}
    for arg in dict.fromkeys([*users, *forwarded]):
        used = users.get(arg, [])
        inside_only = all(user in in_cluster for user in used)
        if device.get(arg) and inside_only and (used or forwarded.get(arg)):
            found[arg] = device[arg]
    return found


def _mark_elsewhere(predicted: Any, elsewhere: dict[str, str], gpu: str) -> None:
    """The reason of each such argument says the step fails on it."""
    ops = predicted.ops
    reasons = ops["reason"].astype(str).to_numpy(dtype=object, copy=True)
    for row, name in enumerate(ops["op"].astype(str).tolist()):
        if name in elsewhere:
            reasons[row] = (
                f"{reasons[row]} On a GPU, Keras compiles the step that uses it with XLA on "
                f"{short_device(gpu)}, and XLA cannot use a variable on another device "
                f"({short_device(elsewhere[name])}): the step's first call fails; this "
                "placement is what runs with model.compile(..., jit_compile=False)."
            )
    ops["reason"] = pd.Series(reasons, index=ops.index, dtype=ops["reason"].dtype)


def _elsewhere_words(elsewhere: dict[str, str], gpu: str) -> str:
    where = sorted(set(elsewhere.values()))
    shown = _listed(list(elsewhere))
    return (
        f"the step fails: XLA runs it on {short_device(gpu)}, and {len(elsewhere):,} of the "
        f"variables it uses ({shown}) live on {', '.join(map(short_device, where))}, where "
        "they were made; XLA cannot use a variable on another device, so the first call fails "
        "with InvalidArgumentError: Trying to access resource ... located in device "
        f"{where[0]} from device {gpu} (https://www.tensorflow.org/xla/known_issues"
        "#tfvariable_on_a_different_device). Make the variables with no tf.device (on a GPU "
        "machine they are then made on the GPU), or compile the model with jit_compile=False: "
        "the per-op placement predicted here is what runs then."
    )


def _mark_unsupported(predicted: Any, step: _Step, function: pd.Series) -> None:
    """The reason of each op XLA cannot compile says the step fails on it."""
    ops = predicted.ops
    wanted = {name: (op_type, attrs) for name, op_type, attrs in step.unsupported}
    reasons = ops["reason"].astype(str).to_numpy(dtype=object, copy=True)
    names = ops["op"].astype(str).tolist()
    # A row's name may carry its call's prefix (StatefulPartitionedCall/...), and the trace's
    # run may have made the step again (Keras's layer names count up: hash_1 -> hash_1_1):
    # a node is found by its name, else by its name without the counters, and its type.
    loose = {(_uncounted(name), op_type): name for name, (op_type, _) in wanted.items()}
    types = ops["type"].astype(str).tolist()
    for row, (display, where) in enumerate(zip(names, function.tolist(), strict=True)):
        if where not in step.functions:
            continue
        parts = display.split("/")
        tails = ["/".join(parts[k:]) for k in range(len(parts))]
        node = next((t for t in tails if t in wanted), "") or next(
            (loose[key] for t in tails if (key := (_uncounted(t), types[row])) in loose), ""
        )
        if not node:
            continue
        op_type, attrs = wanted[node]
        typed = f" for {attrs}" if attrs else ""
        reasons[row] = (
            f"{reasons[row]} On a GPU, Keras compiles this step with XLA, and XLA has no "
            f"XLA_GPU_JIT kernel for {op_type}{typed}: the step's first call fails there; "
            "this placement is what runs with model.compile(..., jit_compile=False)."
        )
    ops["reason"] = pd.Series(reasons, index=ops.index, dtype=ops["reason"].dtype)


def _uncounted(name: str) -> str:
    """``sequential/hash/AsString`` for ``sequential_1_1/hash_1/AsString``."""
    return "/".join(re.sub(r"(?:_\d+)+$", "", part) for part in name.split("/"))


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN:,} more" if len(names) > SHOWN else "")


def _cluster_words(gpu: str | None, count: int, outside: list[str]) -> str:
    where = short_device(gpu) if gpu else "one GPU"
    what = f" (its {count:,} ops, how 'xla')" if count else ""
    out = (
        f" Keras's loop around the step is not compiled: {_listed(outside)} "
        f"{'is' if len(outside) == 1 else 'are'} placed op by op as predicted."
        if outside
        else ""
    )
    return (
        f"the whole step{what} runs as one XLA cluster on one GPU ({where} unless it is called "
        "under tf.device), its ops fused into XLA instructions, not placed one by one: the "
        "per-op placement is what runs only with model.compile(..., jit_compile=False), and "
        f"each op's reason says where it would go then.{out}"
    )


def _failure_words(step: _Step) -> str:
    bad = [
        f"{name} ({op_type}{', ' + attrs if attrs else ''})"
        for name, op_type, attrs in step.unsupported
    ]
    first_name, first_type, _ = step.unsupported[0]
    return (
        f"the step fails, since XLA cannot compile {len(bad)} of its ops (no XLA_GPU_JIT "
        f"kernel): {_listed(bad)}. Keras "
        "checks only that each layer supports XLA (supports_jit), not its ops, so the step's "
        "first call fails with InvalidArgumentError: Detected unsupported operations when "
        f"trying to compile graph {step.graph}... on XLA_GPU_JIT: {first_type} (No registered "
        f"'{first_type}' OpKernel for XLA_GPU_JIT devices compatible with node {first_name}). "
        "Compile the model with jit_compile=False (or move those ops into the tf.data "
        "pipeline): the per-op placement predicted here is what runs then."
    )


def _note(keras: KerasXla, name: str, then: str) -> str:
    """The prediction's note about Keras's XLA for the step ``name``."""
    if keras.requested is True:
        return f"On a GPU, Keras compiles {name} with XLA (jit_compile=True): {then}"
    if keras.requested == "auto":
        return (
            f"On a machine with a GPU, Keras 3 would compile {name} with XLA (jit_compile="
            f"'auto', its default, picks XLA when a GPU is visible): {then}"
        )
    return (
        f"On a machine with a GPU, Keras 3 would compile {name} with XLA unless the model was "
        "compiled with jit_compile=False: the default, jit_compile='auto', picks XLA when a "
        "GPU is visible (here, without one, it reads False as jit_compile=False does, so this "
        f"machine cannot tell which was passed). With XLA, {then}"
    )
