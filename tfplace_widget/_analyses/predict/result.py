"""The prediction's results: :func:`predict_devices`' frame and the predicted trace.

:func:`predict_devices` runs the placer (:mod:`.placer`) and explains each node
(:mod:`.reasons`); :func:`predict_trace` turns a traced :class:`PlacementTrace` with its graph
facts into a predicted one (ops, predicted copies, notes), the pure part of
:func:`~tfplace_widget._tracing.predict.predict_placement`, which traces a function first.
With GPUs, its notes say what XLA would do there (issues 23, 30): a Keras step Keras 3 would
compile with XLA (:func:`.keras_xla.apply_keras_xla`: one cluster on one GPU, or a step XLA
cannot compile) or the traced run's XLA clusters (:func:`xla_clusters_note`) run whole on one
GPU, not op by op.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..._model.devices import device_sort_key, parse_device, short_device, task_of
from ..._model.graphfacts import GraphFacts, NodeDetail
from ..._model.kernel_registry import KernelRegistry, require_registry
from ..resources import Pinned, pinned_arguments
from .cache import _facts_cache, _FactsCache, _in_order, _TraceColumns
from .devices import gpu_devices, master_task, predicted_devices
from .keras_xla import KerasXla, apply_keras_xla
from .memory import MEMORY_NOTE, predict_memory
from .placer import _Placer
from .reasons import _Reasons
from .tasks import gpu_words
from .transfers import _copies_between, _edge_tensors

if TYPE_CHECKING:  # pragma: no cover
    from ..._model.trace import PlacementTrace

PREDICTED_COLUMNS = ["op", "predicted_device", "how", "reason"]


def predict_devices(
    facts: GraphFacts,
    devices: Sequence[str],
    *,
    soft_placement: bool,
    details: Mapping[str, NodeDetail] | None = None,
    pinned: Mapping[str, str] | None = None,
    local_task: str = "",
    pinned_reasons: Mapping[str, str] | None = None,
    registry: KernelRegistry | None = None,
) -> pd.DataFrame:
    """Where TensorFlow's placer would put each node of ``facts`` given ``devices``.

    One row per node of the graph as built (graph order): ``op``, ``predicted_device``
    (canonical; ``""`` when the placer would refuse the node), ``how`` (``explicit``,
    ``implicit``, ``colocated``, ``soft``, ``runtime``, or ``error``) and ``reason`` (one
    sentence). ``frame.attrs["errors"]`` lists what TensorFlow would refuse (its first entry is
    the error a real run raises; empty when the graph places). ``details`` (from
    :func:`node_details`) adds control edges, output counts and dtypes; without it control
    edges are unknown, which only matters for the Identity and generator heuristics.
    ``pinned`` maps nodes the runtime placed before the placer runs (a function's ``_Arg``,
    which lives where the caller's tensor or variable is) to their device. ``local_task``
    (e.g. ``/job:worker/task:0``) is, in a cluster, the task the session runs on (its master):
    its devices go before the other tasks' among equally good ones (:func:`master_task`);
    ``""`` when every device is local (one process). ``pinned_reasons``: the reason of each
    pinned node (by default, that it is a function argument where the caller's value is).
    ``registry``: what TensorFlow registered (kernels, outputs, its placer's Identity step),
    by default the one ``facts`` were read with (``facts.registry``); facts loaded from a file
    have none, and then :class:`~tfplace_widget._model.kernel_registry.MissingRegistryError`.
    """
    found = require_registry(registry, facts, "predict_devices")
    columns, placer = _predict(
        facts, devices, soft_placement, details, pinned, local_task, pinned_reasons, registry=found
    )
    frame = pd.DataFrame(columns, columns=PREDICTED_COLUMNS)
    frame.attrs["errors"] = [message for _, message in placer.errors]
    return frame


def predicted_columns(
    facts: GraphFacts,
    devices: Sequence[str],
    *,
    soft_placement: bool,
    local_task: str = "",
    registry: KernelRegistry | None = None,
) -> dict[str, Any]:
    """:func:`predict_devices`' columns (without details) as the placer leaves them, no frame
    made: the findings' view reads them back as lists (at a million nodes, the frame's four
    string columns made and read back cost about 0.15 s)."""
    found = require_registry(registry, facts, "predict_devices")
    columns, _ = _predict(facts, devices, soft_placement, None, None, local_task, registry=found)
    return columns


def _predict(
    facts: GraphFacts,
    devices: Sequence[str],
    soft_placement: bool,
    details: Mapping[str, NodeDetail] | None,
    pinned: Mapping[str, str] | None,
    local_task: str = "",
    pinned_reasons: Mapping[str, str] | None = None,
    pinned_assumed: Mapping[str, str] | None = None,
    *,
    registry: KernelRegistry,
) -> tuple[dict[str, Any], _Placer]:
    """:func:`predict_devices`'s columns (arrays), and the placer (its errors, codes and edge
    table, which the predicted trace reuses). ``pinned_assumed``: per pinned node whose device
    is an assumption, what the nodes placed with it add to their reasons."""
    if not devices:
        raise ValueError("devices is empty: the placer needs at least one device (a CPU).")
    placer = _Placer(
        facts, registry, devices, soft_placement, details, pinned, local_task, pinned_reasons
    )
    placer.run()
    explain = _Reasons(placer, pinned_assumed)
    codes = placer.code_array
    device_names = np.array([*placer.devices, ""], dtype=object)
    placer.assigned_array = np.asarray(placer.assigned, dtype=np.int64)
    predicted = device_names[placer.assigned_array]
    own = sorted(placer.special | set(placer.failed) | explain.assumed_nodes)  # one by one
    representative = placer.representative
    if details:  # the reason may name the node's dtypes: per (code, dtypes)
        how, reason = [], []
        shared: dict[tuple, tuple[str, str]] = {}
        own_set = set(own)
        details_get = details.get
        for i, (name, code) in enumerate(zip(placer.names, placer.codes, strict=True)):
            if i in own_set:
                h, r = explain(i)
            else:
                detail = details_get(name)
                key = (code, detail.dtypes if detail is not None else "")
                found = shared.get(key)
                if found is None:
                    found = shared[key] = explain(i)
                h, r = found
            how.append(h)
            reason.append(r)
    else:
        by_code = [
            explain(representative[c]) if c in representative else ("", "")
            for c in range(len(placer.statics))
        ]
        how = np.array([h for h, _ in by_code] + [""], dtype=object)[codes]
        reason = np.array([r for _, r in by_code] + [""], dtype=object)[codes]
        explained = [explain(i) for i in own]
        for i, (h, r) in zip(own, explained, strict=True):
            how[i], reason[i] = h, r
        # For the predicted trace's columns, without reading each node's strings again: each
        # node's entry in (the codes' explanations + those of the nodes explained one by one).
        table = by_code + explained
        pick = codes.copy()
        pick[np.asarray(own, dtype=np.int64)] = np.arange(len(by_code), len(table))
        category = {value: k for k, value in enumerate(_how_categories())}
        placer.how_codes = np.array([category.get(h, -1) for h, _ in table], dtype=np.int8)[pick]
        placer.reasons = ([r for _, r in table], pick)
    columns = {"op": placer.names, "predicted_device": predicted, "how": how, "reason": reason}
    return columns, placer


def predict_trace(
    trace: Any,
    gpus: int,
    soft: bool,
    details: Mapping[str, NodeDetail] | None = None,
    keras: KerasXla | None = None,
    registry: KernelRegistry | None = None,
    pins: Mapping[str, tuple[str, str]] | None = None,
    devices: Sequence[str] | None = None,
    local_task: str | None = None,
) -> PlacementTrace:
    """The prediction of ``trace`` (traced with its graph facts) with ``gpus`` GPUs added to its
    devices, soft placement ``soft``: what :func:`~tfplace_widget._tracing.predict.predict_placement`
    returns once it has a trace (``details``:
    :func:`~tfplace_widget._tfadapter.graphfacts.node_details` of its graph).

    With GPUs, a note after the first says what XLA would do there: for ``keras`` (the traced
    callable was a Keras step XLA would compile on a GPU; by default what the trace recorded
    of it, ``trace.raw``) :func:`.keras_xla.apply_keras_xla`, which also marks the step's ops,
    otherwise, when the traced run had XLA clusters (ops with ``how == "xla"``),
    :func:`xla_clusters_note`. ``registry``: what TensorFlow registered, handed in by the
    caller that runs TensorFlow (by default the one the trace's facts were read with; a trace
    loaded from a file has none:
    :class:`~tfplace_widget._model.kernel_registry.MissingRegistryError`). ``pins``: function
    arguments whose device the caller knows, argument -> (device, reason), over what
    :func:`~tfplace_widget._analyses.resources.pinned_arguments` would say. ``devices``: the
    device set to place on, when the caller knows it (by default the trace's, plus ``gpus``
    GPUs on each task: :func:`.devices.predicted_devices`); ``local_task``: the task whose
    devices are local to the placer (by default :func:`.devices.master_task`).
    """
    predicted = _predict_trace(trace, gpus, soft, details, registry, pins, devices, local_task)
    unlisted = _unlisted(trace, predicted)
    if keras is None:
        keras = KerasXla.from_raw(getattr(trace, "raw", None))
    if keras is not None:
        note = apply_keras_xla(predicted, trace, keras, gpus)
        note += _unlisted_note(unlisted) if note else ""
    else:
        note = xla_clusters_note(trace, gpus, unlisted)
    if note:
        predicted.notes.insert(1, note)
    if len(getattr(trace, "memory", ())) or _has_sizes(trace):
        predicted.notes[0] += " " + MEMORY_NOTE
        _keep_sources(trace, predicted)
        predicted.defer_memory(lambda: predict_memory(trace, predicted))
    return predicted


def _predict_trace(
    trace: Any,
    gpus: int,
    soft: bool,
    details: Mapping[str, NodeDetail] | None,
    registry: KernelRegistry | None,
    pins: Mapping[str, tuple[str, str]] | None = None,
    devices: Sequence[str] | None = None,
    local_task: str | None = None,
) -> PlacementTrace:
    """:func:`predict_trace` without the XLA note."""
    facts = getattr(trace, "facts", None)
    if facts is None:
        raise ValueError(
            "This trace has no graph facts (it was loaded from a Chrome trace, or from a "
            "RunMetadata without graph=), so the placer cannot be replayed. Pass the function "
            "itself to predict_placement, or load the trace with "
            "PlacementTrace.from_run_metadata(run_metadata, graph=graph)."
        )
    if getattr(trace, "predicted", False):
        raise ValueError(
            "This trace is already a prediction; pass the traced trace or the function."
        )
    registry = require_registry(registry, facts, "predict_placement")
    devices = list(devices) if devices is not None else predicted_devices(trace.devices, gpus)
    arguments = _pinned_arguments(trace, facts, gpus)
    pinned = {name: argument.device for name, argument in arguments.items()}
    reasons = {name: argument.reason for name, argument in arguments.items()}
    for name, (device, reason) in _input_pipeline_pins(trace, devices).items():
        pinned.setdefault(name, device)
        reasons.setdefault(name, reason)
    assumed = {name: argument.assumed for name, argument in arguments.items() if argument.assumed}
    for name, (device, reason) in (pins or {}).items():
        pinned[name], reasons[name] = device, reason
        assumed.pop(name, None)
    _facts_cache(facts).edge_table(facts)  # the copies need it: the placer reads it too
    columns, placer = _predict(
        facts,
        devices,
        soft,
        details,
        pinned,
        master_task(trace) if local_task is None else local_task,
        reasons,
        assumed,
        registry=registry,
    )
    return _predicted_trace(trace, facts, columns, devices, gpus, soft, details, placer)


def _input_pipeline_pins(trace: Any, devices: list[str]) -> dict[str, tuple[str, str]]:
    """The input pipeline's ops (``input_stage`` set) without a device request of their own:
    tf.data runs its functions on the iterator's device (``default_device_to_target``), which
    GPUs do not change, so they stay where they ran. Op -> (device, reason)."""
    ops = trace.ops
    if "input_stage" not in ops or not ops["input_stage"].notna().any():
        return {}
    rows = ops[ops["input_stage"].notna() & ops["device"].isin(devices)]
    pins = {}
    for op, device, requested, stage in zip(
        rows["op"], rows["device"], rows["requested_device"], rows["input_stage"], strict=True
    ):
        if _device_type(requested):
            continue  # a device of its own asked for: the placer decides
        pins[op] = (
            device,
            f"Input pipeline (stage {stage}): tf.data runs its functions on the iterator's "
            f"device, GPUs or not, and an op without a tf.device of its own runs there: "
            f"{short_device(device)}.",
        )
    return pins


def _device_type(requested: str) -> str | None:
    try:
        return parse_device(requested).type
    except ValueError:
        return None


def _pinned_arguments(trace: Any, facts: GraphFacts, gpus: int) -> dict[str, Pinned]:
    """Where a function's ``_Arg`` nodes live before the placer runs, and why: the caller's
    value where it was here; a resource where it would be made with ``gpus`` GPUs
    (:func:`~tfplace_widget._analyses.resources.pinned_arguments`)."""
    cache = _facts_cache(facts)
    if cache.args is None:
        cache.args = [name for name, op_type in facts.types.items() if op_type == "_Arg"]
    return pinned_arguments(trace, facts, cache.args, gpus, gpu_devices(1)[0])


def _predicted_trace(
    trace: Any,
    facts: GraphFacts,
    frame: Mapping[str, Any],
    devices: list[str],
    gpus: int,
    soft: bool,
    details: Mapping[str, NodeDetail] | None,
    placer: _Placer,
) -> Any:
    """The predicted :class:`PlacementTrace` from :func:`_predict`'s columns."""
    from ..._model.columns import OPS_COLUMNS
    from ..._model.trace import PlacementTrace

    from_trace = _from_trace(trace, placer.cache)
    shared = _facts_columns(placer, facts)
    assigned = placer.assigned_array  # per node: index into placer.devices, -1 refused
    # The devices the nodes are on, sorted and distinct, and each node's index into them.
    counts = np.bincount(assigned[assigned >= 0], minlength=len(placer.devices))
    used = [placer.devices[k] for k in np.flatnonzero(counts).tolist()]
    placed_on = sorted(set(used))
    position = {device: k for k, device in enumerate(placed_on)}
    node_device = np.array([*(position.get(d, -1) for d in placer.devices), -1])[assigned]
    # Text columns taken from their few distinct strings (pandas need not check each one).
    device_texts = pd.array(_text([*placer.devices, ""]), dtype="str")
    device = pd.Series(device_texts.take(assigned), copy=False)  # -1 (refused): ""
    if placer.reasons is None:
        reason = pd.Series(_text(frame["reason"]), copy=False)
    else:
        texts, pick = placer.reasons
        reason = pd.Series(pd.array(_text(texts), dtype="str").take(pick), copy=False)
    columns = {
        **shared,
        "device": device,
        "how": (
            pd.Categorical(frame["how"], categories=_how_categories())
            if placer.how_codes is None
            else pd.Categorical.from_codes(placer.how_codes, categories=_how_categories())
        ),
        "reason": reason,
    }
    if from_trace.function is not None:
        columns["function"] = from_trace.function
    order = [c for c in OPS_COLUMNS if c in columns]
    ops = pd.DataFrame(
        {
            **{c: columns[c] for c in order},
            "predicted_device": device,
            "traced_device": from_trace.traced,
        },
        copy=False,
    )
    cache = placer.cache
    tensors = tensor_codes = None
    if not details:  # each edge's tensor is its producer's output 0: the same every time
        if cache.edge_tensors is None:
            edges = placer.edges()
            cache.edge_tensors = _edge_tensors(edges.producers, edges.consumers, edges.lists, None)
            # One tensor per producer: its node, or past the nodes, a code per other name.
            codes = edges.producer_node.copy()
            unknown = np.flatnonzero(codes < 0)
            if len(unknown):
                codes[unknown] = (
                    len(placer.names)
                    + pd.factorize(edges.producers[unknown], use_na_sentinel=False)[0]
                )
            cache.tensor_codes = codes
        tensors, tensor_codes = cache.edge_tensors, cache.tensor_codes
    transfers = _copies_between(
        facts,
        placer.edges(),
        placed_on,
        node_device,
        details,
        placer.host_args(),
        from_trace.in_step,
        tensors,
        tensor_codes,
    )
    errors = [message for _, message in placer.errors]
    tasks = len({task_of(d) for d in devices} - {""})
    where = f"each of the cluster's {tasks} tasks" if tasks > 1 else "this machine's devices"
    notes = [
        f"Predicted, not run: where TensorFlow's placer would put each op with {gpu_words(gpus)} "
        f"added to {where} (soft placement {'on' if soft else 'off'})."
    ]
    if errors:
        notes.append(
            f"TensorFlow would refuse to place this graph ({len(errors)} problem"
            f"{'' if len(errors) == 1 else 's'}); the first: {errors[0]}"
        )
    result = PlacementTrace(
        ops=ops,
        events=_no_events(),
        transfers=transfers,
        devices=sorted(set(placed_on) | set(devices), key=device_sort_key),
        inputs=dict(facts.inputs),
        source=f"{trace.source or 'graph'} (predicted, {gpu_words(gpus)})",
        mode=trace.mode,
        notes=notes,
    )
    result.facts = facts
    result.predicted = True
    result.measured = _measured_calls(trace)
    return result


def _has_sizes(trace: Any) -> bool:
    """Whether ``trace`` recorded its ops' output sizes (what memory is predicted from
    without allocator records)."""
    ops = trace.ops
    return "output_bytes" in ops and bool(ops["output_bytes"].notna().any())


def _keep_sources(trace: Any, predicted: Any) -> None:
    """The traced ops' ``source`` (file:line) on the prediction's ops, for its memory findings."""
    ops = trace.ops
    if "source" not in ops:
        return
    column = ops["source"]
    known = (column.notna() & (column.astype(str) != "")).to_numpy(dtype=bool)
    source = column.to_numpy(dtype=object)
    if not known.any():
        return
    names = pd.Index(ops["op"].to_numpy(dtype=object)[known])
    found = names.get_indexer(predicted.ops["op"].to_numpy(dtype=object))
    picked = np.append(source[known], None)[found]  # -1 (no source): the None appended
    predicted.ops["source"] = pd.array(picked, dtype="string")


def _measured_calls(trace: Any) -> pd.DataFrame | None:
    """The op-level runs of ``trace``'s calls (its input pipeline's own rows left out), or
    those it was itself predicted from: how much of the step each op took, for the predicted
    findings' materiality."""
    if getattr(trace, "predicted", False):
        return getattr(trace, "measured", None)
    events, ops = trace.events, trace.ops
    if events is None or events.empty:
        return None
    if "input_stage" in ops and ops["input_stage"].notna().any():
        pipeline = set(ops.loc[ops["input_stage"].notna(), "op"])
        events = events[~events["op"].isin(pipeline)].reset_index(drop=True)
    return events


def xla_clusters_note(trace: Any, gpus: int, unlisted: int = 0) -> str:
    """What a prediction with ``gpus`` GPUs says when the traced run had XLA clusters (its ops
    with ``how == "xla"``, their cluster in ``function``): each cluster runs whole on one GPU,
    so the per-op placement predicted for its ops is what runs without XLA; ``unlisted``: ops
    XLA compiled in the traced run that the prediction has no row for (:func:`_unlisted_note`). ``""`` without GPUs or clusters."""
    xla = _xla_ops(trace)
    if gpus <= 0 or xla is None:
        return ""
    names = list(dict.fromkeys(xla["function"].astype(str))) if "function" in xla else []
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    what = f"{len(names)} XLA cluster" + ("" if len(names) == 1 else "s")
    return (
        f"The traced run compiled {what} ({shown}) with XLA: on a GPU each runs whole on one "
        "device (GPU:0 unless it is called under tf.device), its ops fused into XLA "
        "instructions, not placed one by one: a per-op placement of their "
        f"{len(xla):,} ops is what runs only without XLA (jit_compile=False)."
        + _unlisted_note(unlisted)
    )


def _xla_ops(trace: Any) -> pd.DataFrame | None:
    """The traced run's ops XLA compiled (``how == "xla"``), ``None`` when there are none."""
    ops = getattr(trace, "ops", None)
    if ops is None or "how" not in ops or not len(ops):
        return None
    how = ops["how"]
    if isinstance(how.dtype, pd.CategoricalDtype):  # on its codes: no text per row made
        if "xla" not in how.cat.categories:
            return None
        chosen = (how == "xla").to_numpy(dtype=bool)
    else:
        chosen = (how.astype(str) == "xla").to_numpy(dtype=bool)
    xla = ops[chosen]
    return None if xla.empty else xla


def _unlisted(trace: Any, predicted: Any) -> int:
    """How many of the traced run's XLA-compiled ops the prediction has no row for."""
    xla = _xla_ops(trace)
    if xla is None:
        return 0
    return int((~xla["op"].isin(set(predicted.ops["op"]))).sum())


def _unlisted_note(unlisted: int) -> str:
    """Why a prediction lacks the ops of an XLA cluster, and how to get them."""
    if unlisted <= 0:
        return ""
    return (
        f" This prediction has no row for {unlisted:,} of them: the graph it replays holds "
        "the compiled cluster, not its ops; trace and predict the step with jit_compile=False "
        "to see where each op would go."
    )


def _text(values: Any) -> np.ndarray:
    """An object array of ``values`` (pandas makes a text column of it)."""
    if isinstance(values, np.ndarray) and values.dtype == object:
        return values
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _from_trace(trace: Any, cache: _FactsCache) -> _TraceColumns:
    """:class:`_TraceColumns` of ``trace`` (kept on ``cache`` for its ops frame)."""
    ops = trace.ops
    found = cache.trace
    if found is not None and found.ops is ops and found.mode == trace.mode:
        return found
    n = len(cache.names)
    # Each node's first row in the trace (-1: none), from the trace's rows' nodes.
    node_of_row = np.fromiter(map(cache.index.get, ops["op"].tolist(), repeat(-1)), np.int64)
    rows = np.flatnonzero(node_of_row >= 0)
    position = np.full(n, len(node_of_row), dtype=np.int64)
    np.minimum.at(position, node_of_row[rows], rows)  # no sort of the rows' nodes
    hit = position < len(node_of_row)
    position[~hit] = -1

    def aligned(column: str) -> pd.Series:
        values = ops[column].to_numpy(dtype=object)
        out = np.full(n, "", dtype=object)
        out[hit] = values[position[hit]]
        return pd.Series(out, copy=False)

    function = None
    if "function" in ops and trace.mode == "function" and len(ops):
        function = aligned("function")
    found = cache.trace = _TraceColumns(
        ops, trace.mode, aligned("device"), function, hit if len(ops) else None
    )
    return found


def _facts_columns(placer: _Placer, facts: GraphFacts) -> dict[str, Any]:
    """The predicted ops frame's columns that do not depend on the devices (the same Series
    for every prediction of these facts; pandas copies one on write)."""
    from ..._model.kernels import GPU_KERNEL_VALUES, UNKNOWN

    cache = placer.cache
    shared = placer.classified is cache.classified
    if shared and cache.columns:
        return cache.columns
    names = placer.names
    n = len(names)
    codes = placer.code_array  # per code: type, kernels (placer.statics)
    by_code = [k if k is not None else UNKNOWN for k in placer.code_kernels]
    gpu_values = list(GPU_KERNEL_VALUES)
    gpu_codes = np.array([gpu_values.index(k.gpu_kernel) for k in by_code], dtype=np.int8)
    types = np.array([st.op_type for st in placer.statics], dtype=object)
    missing = np.ones(n, bool)
    columns = {
        "op": pd.Series(_text(names), copy=False),
        "type": pd.Series(types[codes], copy=False),
        "requested_device": pd.Series(_text(_in_order(facts.requested, names, "")), copy=False),
        "start_us": pd.Series(np.full(n, np.nan), copy=False),
        "duration_us": pd.Series(np.full(n, np.nan), copy=False),
        "runs": pd.Series(pd.arrays.IntegerArray(np.zeros(n, np.int64), missing), copy=False),
        "output_bytes": pd.Series(
            pd.arrays.IntegerArray(np.zeros(n, np.int64), missing.copy()), copy=False
        ),
        "function": pd.Series(np.full(n, "", dtype=object), copy=False),
        "kernels": pd.Series(
            np.array([k.kernels for k in by_code], dtype=object)[codes], copy=False
        ),
        "gpu_kernel": pd.Series(
            pd.Categorical.from_codes(gpu_codes[codes], categories=gpu_values), copy=False
        ),
    }
    if shared:
        cache.columns = columns
    return columns


@lru_cache(maxsize=1)
def _how_categories() -> list[str]:
    """The predicted ops frame's ``how`` categories."""
    from ..._explain import HOW_VALUES

    return [*HOW_VALUES, "error"]


_EMPTY_EVENTS: list[pd.DataFrame] = []


def _no_events() -> pd.DataFrame:
    """A new empty events frame (a copy of one made once)."""
    if not _EMPTY_EVENTS:
        from ..._model.columns import EVENTS_COLUMNS

        _EMPTY_EVENTS.append(pd.DataFrame({c: [] for c in EVENTS_COLUMNS}))
    return _EMPTY_EVENTS[0].copy()
