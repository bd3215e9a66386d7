"""Findings about where ops went: ``soft_move`` (a request the placer overrode),
``host_memory_on_gpu`` (GPU ops that compute in host memory) and ``merged_runs``: each costs
copies or GPU time. ``cpu_fallback`` is ``fallbacks``', ``xla_hidden`` ``xla``'s."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..._model.devices import parse_device, short_device
from .base import (
    FOLLOWERS,
    NO_GPU,
    Context,
    Finding,
    all_on_one_gpu,
    copied_op,
    device_type,
    in_order,
    is_gradient,
    listed_names,
    listed_ops,
    summed_duration,
)
from .fallbacks import gpu_cast, is_string_op
from .fixes import no_fix
from .tasks import users_requests

# host_memory_on_gpu's fix: its cure is a dtype, never a device.
_HOST_MEMORY_NO_FIX = (
    "no device request changes where a GPU kernel keeps its inputs and outputs: the GPU "
    "kernel of {types} keeps them in host memory (the kernel registry's host_memory_arg); the "
    "lever is the values' dtype (the message says which), an edit overrides= cannot simulate"
)

_FLOATS = {"float16", "bfloat16", "float32", "float64"}
_INTEGERS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"}


def find_merged_runs(context: Context) -> list[Finding]:
    duplicated = sorted(context.duplicated)
    if not duplicated:
        return []
    runs = _runs_of(context.ops, duplicated)
    return [
        Finding(
            "merged_runs",
            "info",
            duplicated,
            (
                f"{len(duplicated)} ops are listed on the CPU and on {context.gpu_name()} "
                f"({listed_names(duplicated)}): this trace merges several runs whose device lanes "
                "were mixed up, so they are not CPU fallbacks; trace one run to see one "
                "placement."
            ),
            {"ops": len(duplicated), "records": runs},
            (0.0, 0.0, float(len(duplicated))),
            predicted=context.predicted_trace,
        )
    ]


def find_soft_moves(context: Context) -> list[Finding]:
    ops = context.ops
    soft = ops[ops["how"].astype(str) == "soft"]
    users = users_requests(context.trace)
    if users is not None:  # the strategy's own replica device is no request the user made
        soft = soft[soft["op"].isin(users)]
    if soft.empty:
        return []
    findings = []
    for (requested, device), group in soft.groupby(["requested_device", "device"], sort=True):
        names = group["op"].tolist()
        asked = device_type(requested)
        got = device_type(device)
        exists = any(_matches(requested, d) for d in context.trace.devices)
        if not exists:
            fix = (
                f"{requested} does not exist here: drop the tf.device or name a device "
                f"that exists ({', '.join(short_device(d) for d in context.trace.devices)})."
            )
            severity = "medium" if asked != "GPU" else ("info" if not context.gpus else "high")
        elif asked == "GPU" and any(context.gpu_kernel.get(n) in NO_GPU for n in names):
            fix = _no_gpu_kernel_fix(context, names)
            severity = "high" if got == "CPU" else "medium"
        else:
            fix = (
                "the placer could not honour the request (its reason column says why); "
                "move the request, or the op it is tied to, so that both agree."
            )
            severity = "high" if asked == "GPU" and got == "CPU" else "medium"
        count = f"{len(names)} ops ask" if len(names) > 1 else f"{names[0]} asks"
        ran = "would run" if getattr(context.trace, "predicted", False) else "ran"
        message = (
            f"{count} for {requested} and {ran} on {short_device(device) or device} "
            f"({listed_names(names)}): {fix}"
        )
        duration = summed_duration(context, names)
        findings.append(
            Finding(
                "soft_move",
                severity,
                names,
                message,
                {"ops": len(names), "duration_us": duration},
                (duration, 0.0, float(len(names))),
                predicted=context.predicted_trace,
            )
        )
    return findings


def _no_gpu_kernel_fix(context: Context, names: Sequence[str]) -> str:
    """What to do about ops asked onto a GPU that has no kernel for them: a cast only where
    one dtype attr stands in the way (the registry's GPU kernels say which), else the CPU."""
    missing = [n for n in names if context.gpu_kernel.get(n) == "no" or is_string_op(context, n)]
    casts = {
        n: gpu_cast(context.registry, context.type_of.get(n, ""), context.attrs(n))
        for n in names
        if context.gpu_kernel.get(n) == "dtype" and n not in missing
    }
    parts = []
    if missing:
        one = len(missing) == 1
        parts.append(
            f"{listed_names(missing)} {'has' if one else 'have'} no GPU kernel: pin "
            f"{'it' if one else 'them'} to the CPU on purpose (tf.device('/cpu:0')) so the move "
            "is explicit, or do that work outside the step"
        )
    for cast in sorted(set(casts.values())):
        cast_ops = [n for n, c in casts.items() if c == cast]
        one = len(cast_ops) == 1
        what = f"cast {'its' if one else 'their'} inputs to {cast}" if cast else "use other dtypes"
        parts.append(
            f"{listed_names(cast_ops)} {'has' if one else 'have'} no GPU kernel for "
            f"{'its' if one else 'their'} dtype: {what}, or pin {'it' if one else 'them'} to the "
            "CPU on purpose"
        )
    return "; ".join(parts) + "."


def find_host_memory_on_gpu(context: Context) -> list[Finding]:
    """GPU ops that compute in host memory on integers the user's code made from float data
    (a tf.cast to int32 in the step): each crossing between them and device memory is a copy.
    Integers that come from elsewhere (shapes, constants, loop and step counters, random
    seeds, fed integer inputs, gradient code) are TensorFlow's and Keras's own plumbing, kept
    in host memory by design: no finding, since there is nothing in the user's code to change."""
    if not context.gpu_kernel:
        return _host_memory_seen(context)
    by_type: dict[str, list[str]] = {}
    casts: dict[str, str] = {}
    for name, kernel in context.gpu_kernel.items():
        if (
            kernel != "host"
            or context.view.get(name) != "GPU"
            or context.type_of.get(name) in FOLLOWERS
            or context.is_runtime(name)
            or is_gradient(name)
        ):
            continue
        cast = _float_cast_source(context, name)
        if cast:
            casts[name] = cast
            by_type.setdefault(context.type_of.get(name, ""), []).append(name)
    findings = _input_cast_findings(context, casts, by_type)
    for op_type, names in sorted(by_type.items()):
        copies = _memory_crossings(context, names)
        if not copies:  # host ops among host ops copy nothing: harmless
            continue
        names = in_order(context, names)
        sources = in_order(context, {casts[n] for n in names})
        one = len(names) == 1
        verb = (
            f"would sit on {context.gpu_name()} but compute"
            if context.predicted_view
            else f"{'sits' if one else 'sit'} on {context.gpu_name()} but "
            f"{'computes' if one else 'compute'}"
        )
        dtype = context.dtypes(names[0])
        dtype = f"{dtype} " if dtype else ""
        made = context.attrs(sources[0])
        typed = listed_ops(context.originals(names), types=context.type_of)
        message = (
            f"{context.on_a_gpu_machine()}{typed} {verb} in host memory: the GPU kernel of "
            f"{dtype}{op_type} keeps its inputs and outputs on the host, and "
            f"{'its' if one else 'their'} values come from {listed_ops(sources)}, which "
            f"{'casts' if len(sources) == 1 else 'cast'} {made.get('SrcT', 'float')} values to "
            f"{made.get('DstT', 'integers')}; so {copies} tensor"
            f"{'s cross' if copies > 1 else ' crosses'} between device and host memory every "
            "step. Where the values need not be integers, keep them float32 through this "
            "arithmetic (cast after it, or not at all)."
        )
        duration = summed_duration(context, names)
        findings.append(
            Finding(
                "host_memory_on_gpu",
                "medium",
                [*sources, *names],
                message,
                {"ops": len(names), "copies": copies, "duration_us": duration},
                (duration, 0.0, float(len(names))),
                predicted=context.predicted_view,
                fix=no_fix(_HOST_MEMORY_NO_FIX.format(types=f"{dtype}{op_type}")),
            )
        )
    return findings


# Where a step's data comes in: its arguments, feeds, and the batches of its tf.data iterator.
_STEP_INPUT_TYPES = {"_Arg", "Placeholder", "IteratorGetNext", "IteratorGetNextSync"}
_INPUT_VIEWS = {"Identity", "Cast", "Reshape", "ExpandDims", "Squeeze", "StridedSlice"}


def _input_cast_findings(
    context: Context, casts: dict[str, str], by_type: dict[str, list[str]]
) -> list[Finding]:
    """Integer arithmetic on ids the step's own input carried as floats: Keras's
    ``Embedding`` casts a float input to int32 (a ``keras.Input`` left at its default
    float32), and int32 arithmetic (its ``take``'s bounds) has GPU kernels in host memory
    only. Keras's code is not the user's: the lever is the input's dtype, ``int64``, whose GPU
    kernels compute in device memory (kernel registry) and which Keras's ``Embedding`` keeps.
    One finding per cast; those ops leave ``by_type``."""
    fed = {}
    for name, cast in casts.items():
        if _fed_by_step_input(context, cast):
            fed.setdefault(cast, []).append(name)
    findings = []
    for cast, names in fed.items():
        for op_type in list(by_type):
            by_type[op_type] = [n for n in by_type[op_type] if n not in names]
        copies = _memory_crossings(context, names)
        if not copies:
            continue
        names = in_order(context, names)
        made = context.attrs(cast)
        types = listed_names(sorted({context.type_of.get(n, "") for n in names}))
        verb = "would sit" if context.predicted_view else "sit"
        in_embedding = "embedding" in cast.rpartition("/")[0].lower()
        keras = " (a Keras Embedding casts float ids so)" if in_embedding else ""
        message = (
            f"{context.on_a_gpu_machine()}{len(names)} integer op{'s' * (len(names) != 1)} "
            f"({types}: {listed_ops(names, 2)}) {verb} on {context.gpu_name()} but compute in "
            f"host memory, {copies} tensor{'s cross' if copies > 1 else ' crosses'} between "
            f"device and host memory every step: {cast} casts the step's input from "
            f"{made.get('SrcT', 'float')} to {made.get('DstT', 'int32')}{keras}, and the GPU "
            "kernels of int32 arithmetic keep it on the host. "
            "Feed the ids as integers: keras.Input(..., dtype='int64') and int64 data (int64 "
            "arithmetic computes in GPU memory)."
        )
        duration = summed_duration(context, names)
        findings.append(
            Finding(
                "host_memory_on_gpu",
                "medium",
                [cast, *names],
                message,
                {"ops": len(names), "copies": copies, "duration_us": duration, "user_fix": 1},
                (duration, 0.0, float(len(names))),
                predicted=context.predicted_view,
                fix=no_fix(_HOST_MEMORY_NO_FIX.format(types=f"int32 {types}")),
            )
        )
    return findings


def _fed_by_step_input(context: Context, cast: str, hops: int = 6) -> bool:
    """Whether ``cast``'s input is the step's own input (an argument, a feed, an iterator's
    batch), through at most ``hops`` casts, reshapes and identities."""
    facts = getattr(context.trace, "facts", None)
    raw = context.trace.inputs or (facts.inputs if facts is not None else {})
    frontier = list(raw.get(cast, []))[:1]
    for _ in range(hops):
        following = []
        for op in frontier:
            if op not in context.type_of:  # an argument of a function, in the graph as built
                return True
            op_type = context.type_of[op]
            if op_type in _STEP_INPUT_TYPES:
                return True
            if op_type in _INPUT_VIEWS or context.is_runtime(op):
                following += list(raw.get(op, []))[:1]
        frontier = following
    return False


def _float_cast_source(context: Context, name: str, hops: int = 8) -> str:
    """The cast of float values to integers that ``name``'s integers come from (through at
    most ``hops`` integer ops), or ""."""
    seen, frontier = {name}, [name]
    for _ in range(hops):
        following = []
        for op in frontier:
            for producer in context.inputs.get(op, []):
                if producer in seen:
                    continue
                seen.add(producer)
                attrs = context.attrs(producer)
                if context.type_of.get(producer) == "Cast":
                    if (
                        attrs.get("SrcT") in _FLOATS
                        and attrs.get("DstT") not in _FLOATS
                        and not is_gradient(producer)
                    ):
                        return producer
                elif attrs and all(v in _INTEGERS for v in attrs.values()):
                    following.append(producer)
        frontier = following
    return ""


def _memory_crossings(context: Context, names: Sequence[str]) -> int:
    """Edges between ``names`` and other ops where the tensor changes memory (host <-> device):
    each is a copy. An input the consumer's GPU kernel takes in host memory anyway (a Sum's
    axes) is no crossing."""
    members = set(names)
    edges = {(p, n) for n in names for p in context.inputs.get(n, []) if p not in members}
    edges |= {(n, c) for n in names for c in context.consumers.get(n, []) if c not in members}
    return sum(context.crosses_memory(producer, consumer) for producer, consumer in edges)


def _host_memory_seen(context: Context) -> list[Finding]:
    """Without kernel facts, a GPU trace still shows it: a copy to the host between two ops
    that both sit on the GPU means the reader computes in host memory (or the writer, for a
    copy to the device)."""
    transfers = context.trace.transfers
    if not context.gpus or transfers is None or transfers.empty:
        return []
    host: dict[str, int] = {}
    for tensor, dst in transfers[["tensor", "dst_device"]].itertuples(index=False):
        producer = copied_op(context, tensor)
        consumers = [c for c in context.consumers.get(producer, []) if c in context.type_of]
        if not consumers or not all_on_one_gpu(context, [producer, *consumers]):
            continue
        to_host = device_type(dst) == "CPU"
        for name in consumers if to_host else [producer]:
            host[name] = host.get(name, 0) + 1
    names = in_order(context, host)
    if not names:
        return []
    copies = sum(host.values())
    typed = listed_ops(names, types=context.type_of)
    generated = all(is_gradient(n) for n in names)
    whose = (
        "TensorFlow's gradient code made them: nothing in your code asks for these copies."
        if generated
        else "Loaded without its graph, the trace cannot tell whether those values are yours "
        "(integer arithmetic that could stay float32) or shapes TensorFlow keeps on the host; "
        "traced with its graph, the findings say which."
    )
    return [
        Finding(
            "host_memory_on_gpu",
            "medium" if copies >= 4 and not generated else "info",
            names,
            (
                f"{typed} sit on {context.short(names[0])} but compute in host memory: "
                f"{copies} copies between device and host memory feed them, though both ends "
                "are on the GPU: their GPU kernels keep int32 or shape values in host memory. "
                f"{whose}"
            ),
            {"ops": len(names), "copies": copies, "user_fix": int(not generated)},
            (0.0, 0.0, float(copies)),
            predicted=context.predicted_trace,
        )
    ]


def _matches(requested: str, device: str) -> bool:
    try:
        return parse_device(requested).matches(parse_device(device))
    except ValueError:
        return False


def _runs_of(ops: pd.DataFrame, names: Sequence[str]) -> int:
    runs = ops.loc[ops["op"].isin(set(names)), "runs"]
    return int(runs.sum(skipna=True)) if len(runs) else 0
