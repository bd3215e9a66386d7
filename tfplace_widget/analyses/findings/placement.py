"""Findings about where ops went: ``cpu_fallback`` (ops on the CPU of a GPU machine, seen or
predicted), ``soft_move`` (a request the placer overrode), ``host_memory_on_gpu`` (GPU ops that
compute in host memory), ``xla_hidden`` and ``merged_runs``: each costs copies or GPU time."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd

from ...devices import parse_device, short_device
from .context import (
    _FOLLOWERS,
    _NO_GPU,
    _ON_GPU,
    _all_on_one_gpu,
    _Context,
    _copied_op,
    _device_type,
    _duration,
    _Finding,
    _names,
)

_GRADIENT_PREFIXES = ("gradients/", "gradient_tape/")
_XLA_TYPES = {"XlaLaunch", "XlaLaunchV2", "_XlaCompile", "_XlaRun", "_XlaMerge"}


def _merged_runs(context: _Context) -> list[_Finding]:
    duplicated = sorted(context.duplicated)
    if not duplicated:
        return []
    runs = _runs_of(context.ops, duplicated)
    return [
        _Finding(
            "merged_runs",
            "info",
            duplicated,
            (
                f"{len(duplicated)} ops are listed on the CPU and on {context.gpu_name()} "
                f"({_names(duplicated)}): this trace merges several runs whose device lanes "
                "were mixed up, so they are not CPU fallbacks; trace one run to see one "
                "placement."
            ),
            {"ops": len(duplicated), "records": runs},
            (0.0, 0.0, float(len(duplicated))),
        )
    ]


def _cpu_fallbacks(context: _Context) -> list[_Finding]:
    """Ops on the CPU of a GPU machine (seen, or predicted from the kernel registry): one
    finding per connected stretch of them with one cause, the input pipeline as one."""

    def falls_back(name: str) -> bool:
        cause = context.why_cpu.get(name, ("", ""))[0]
        if cause == "requested":  # asked for the CPU: not a fallback
            return False
        # With kernel facts, an op with a GPU kernel on the CPU for no reason of its own
        # follows its input or consumer there (Shape, Identity): that op's finding covers it.
        return bool(cause) or context.gpu_kernel.get(name, "NA") not in _ON_GPU

    fallbacks = [
        name
        for name, kind in context.view.items()
        if kind == "CPU"
        and name not in context.duplicated
        and context.type_of.get(name) not in _FOLLOWERS
        and falls_back(name)
    ]
    # A dataset or iterator op in the step runs on the host with its iterator, wherever a
    # prediction puts it (iterators have no GPU kernel: the resource lives on the CPU).
    pipeline = [
        n
        for n, t in context.type_of.items()
        if _is_pipeline(t) and n in context.view and n not in context.duplicated
    ]
    findings: list[_Finding] = []
    if pipeline:
        findings.append(_pipeline_finding(context, pipeline))
    rest = [n for n in fallbacks if n not in set(pipeline)]
    if not pipeline and not rest:
        return []
    cause_of = {n: context.why_cpu.get(n, ("", ""))[0] for n in rest}
    grouped: set[str] = set()
    for name in rest:
        if name in grouped:
            continue
        group = [name]
        grouped.add(name)
        todo = [name]
        while todo:  # neighbours that fall back for the same cause join this finding
            current = todo.pop()
            for other in context.inputs.get(current, []) + context.consumers.get(current, []):
                if other in cause_of and other not in grouped and cause_of[other] == cause_of[name]:
                    grouped.add(other)
                    group.append(other)
                    todo.append(other)
        findings.append(_fallback_finding(context, _in_order(context, group), cause_of[name]))
    return findings


def _fallback_finding(context: _Context, names: list[str], cause: str) -> _Finding:
    gpu = context.gpu_name()
    one = len(names) == 1
    where = "would run" if context.predicted_view else ("runs" if one else "run")
    typed = _names([f"{n} ({context.type_of.get(n, '') or '?'})" for n in names])
    subject = f"{typed} {where}"
    if cause == "no":
        types = {context.type_of.get(n, "") for n in names}
        if all("String" in t or t.startswith(("AsString", "Substr", "Regex")) for t in types):
            message = (
                f"{subject} on the CPU: string ops have no GPU kernel. Turn strings into "
                "numbers in the input pipeline (tf.data), before the step."
            )
        elif types <= {"PyFunc", "PyFuncStateless"}:
            message = (
                f"{subject} on the CPU: tf.numpy_function has no GPU kernel. Write its body "
                "with TensorFlow ops, or run it in the input pipeline (tf.data)."
            )
        else:
            message = (
                f"{subject} on the CPU: {_names(sorted(types))} "
                f"{'has' if len(types) == 1 else 'have'} no GPU kernel. Do it outside the "
                "step (in the input pipeline, or once before), or use ops that have one."
            )
    elif cause == "dtype":
        first = names[0]
        dtype = context.dtypes(first)
        op_type = context.type_of.get(first, "")
        what = f"{dtype} {op_type}" if dtype else f"{op_type} with this dtype"
        cast = "float32" if dtype != "float32" else "float16"
        message = (
            f"Cast to {cast} before the {op_type} ({_names(names)}): {what} has no GPU "
            f"kernel, so {'it' if one else 'they'} {where} on the CPU."
        )
    elif cause == "colocated":
        anchors = sorted({context.why_cpu[n][1] for n in names if context.why_cpu[n][1]})
        anchor = _names(anchors) or "a CPU-only op"
        message = (
            f"{subject} on the CPU although {'it has' if one else 'they have'} a GPU kernel: "
            f"{'it shares' if one else 'they share'} a resource with {anchor}, which has "
            "none. Move that resource (and its readers) out of the step, or use a resource "
            "type with a GPU kernel."
        )
    else:  # seen on the CPU of a GPU trace, why unknown (no graph)
        message = (
            f"{subject.replace(' runs', ' ran').replace(' would run', ' ran')} on "
            f"{context.short(names[0])} while {gpu} was there: the graph was not given, so "
            "whether a GPU kernel exists is unknown. Load the trace with its graph "
            "(PlacementTrace.from_run_metadata(..., graph=)) to see why."
        )
    members = set(names)
    neighbours = {
        n
        for name in names
        for n in context.inputs.get(name, []) + context.consumers.get(name, [])
        if n not in members and not _follower(context, n)
    }
    copies = sum(context.view.get(n) == "GPU" for n in neighbours)
    known = cause in ("no", "dtype", "colocated")
    severity = "high" if known and copies else ("medium" if known or copies else "info")
    ops = list(names)
    for name in names:  # the constants that feed it go with it
        ops += [n for n in context.inputs.get(name, []) if _follower(context, n)]
        if cause == "colocated" and context.why_cpu[name][1]:
            ops.append(context.why_cpu[name][1])
    duration = _duration(context, names)
    return _Finding(
        "cpu_fallback",
        severity,
        ops,
        message,
        {"ops": len(names), "gpu_neighbours": copies, "duration_us": duration},
        (duration, 0.0, float(copies)),
    )


def _pipeline_finding(context: _Context, pipeline: list[str]) -> _Finding:
    readers = [
        n
        for n in pipeline
        if context.why_cpu.get(n, ("", ""))[0] == "colocated"
        or context.type_of.get(n, "").startswith("IteratorGetNext")
    ]
    names = _names(pipeline)
    where = "would run" if context.predicted_view else "run"
    message = (
        f"The tf.data input pipeline is inside the step ({names}) and {where} on the CPU: "
        "iterators and datasets have no GPU kernel and their readers stay with them. Iterate "
        "the dataset outside the step and pass batches in, with "
        "dataset.prefetch(tf.data.AUTOTUNE) so the copy to the GPU overlaps the step."
    )
    duration = _duration(context, pipeline)
    consumers = {c for n in pipeline for c in context.consumers.get(n, [])} - set(pipeline)
    copies = sum(context.view.get(c) == "GPU" for c in consumers)
    return _Finding(
        "cpu_fallback",
        "high" if copies else "medium",
        pipeline,
        message,
        {"ops": len(pipeline), "readers": len(readers), "duration_us": duration},
        (duration, 0.0, float(len(pipeline))),
    )


def _soft_moves(context: _Context) -> list[_Finding]:
    ops = context.ops
    soft = ops[ops["how"].astype(str) == "soft"]
    if soft.empty:
        return []
    findings = []
    for (requested, device), group in soft.groupby(["requested_device", "device"], sort=True):
        names = group["op"].tolist()
        asked = _device_type(requested)
        got = _device_type(device)
        exists = any(_matches(requested, d) for d in context.trace.devices)
        if not exists:
            fix = (
                f"{requested} does not exist here: drop the tf.device or name a device "
                f"that exists ({', '.join(short_device(d) for d in context.trace.devices)})."
            )
            severity = "medium" if asked != "GPU" else ("info" if not context.gpus else "high")
        elif asked == "GPU" and any(context.gpu_kernel.get(n) in _NO_GPU for n in names):
            fix = (
                "it has no GPU kernel for its dtype: cast to one that has (float32), or pin "
                "it to the CPU on purpose so the move is explicit."
            )
            severity = "high" if got == "CPU" else "medium"
        else:
            fix = (
                "the placer could not honour the request (its reason column says why); "
                "move the request, or the op it is tied to, so that both agree."
            )
            severity = "high" if asked == "GPU" and got == "CPU" else "medium"
        count = f"{len(names)} ops ask" if len(names) > 1 else f"{names[0]} asks"
        message = (
            f"{count} for {requested} and ran on {short_device(device) or device} "
            f"({_names(names)}): {fix}"
        )
        duration = _duration(context, names)
        findings.append(
            _Finding(
                "soft_move",
                severity,
                names,
                message,
                {"ops": len(names), "duration_us": duration},
                (duration, 0.0, float(len(names))),
            )
        )
    return findings


def _host_memory_on_gpu(context: _Context) -> list[_Finding]:
    if not context.gpu_kernel:
        return _host_memory_seen(context)
    host = [
        name
        for name, kernel in context.gpu_kernel.items()
        if kernel == "host"
        and context.view.get(name) == "GPU"
        and context.type_of.get(name) not in _FOLLOWERS
        and not context.is_runtime(name)
    ]
    by_type: dict[str, list[str]] = {}
    for name in host:
        by_type.setdefault(context.type_of.get(name, ""), []).append(name)
    findings = []
    for op_type, names in sorted(by_type.items()):
        copies = _memory_crossings(context, names)
        if not copies:  # host ops among host ops (shape arithmetic) copy nothing: harmless
            continue
        generated = all(n.startswith(_GRADIENT_PREFIXES) for n in names)
        verb = "would compute" if context.predicted_view else "compute"
        dtype = context.dtypes(names[0])
        dtype = f"{dtype} " if dtype else ""
        fix = (
            "TensorFlow's gradient code made it; Grappler's constant folding usually removes "
            "such shape arithmetic (optimize=True shows what runs then)."
            if generated
            else "Cast to float32 for real GPU work, or keep this shape/index arithmetic "
            "away from the GPU's tensors."
        )
        message = (
            f"{len(names)} {op_type} op{'s' if len(names) > 1 else ''} ({_names(names)}) {verb} "
            f"in host memory on {context.gpu_name()}: the GPU kernel of {dtype}{op_type} keeps "
            f"its inputs and outputs on the host, so {copies} tensor"
            f"{'s cross' if copies > 1 else ' crosses'} between device and host memory. {fix}"
        )
        duration = _duration(context, names)
        findings.append(
            _Finding(
                "host_memory_on_gpu",
                "info" if generated else "medium",
                names,
                message,
                {"ops": len(names), "copies": copies, "duration_us": duration},
                (duration, 0.0, float(len(names))),
            )
        )
    return findings


def _memory_crossings(context: _Context, names: Sequence[str]) -> int:
    """Edges between ``names`` and GPU ops where the tensor changes memory (host <-> device):
    each is a copy. An input the consumer's GPU kernel takes in host memory anyway (a Sum's
    axes) is no crossing."""
    facts = getattr(context.trace, "facts", None)
    kernels = getattr(facts, "kernels", {}) if facts is not None else {}
    built_inputs = getattr(facts, "inputs", {}) if facts is not None else {}

    def host_out(op: str) -> bool:
        kernel = kernels.get(op)
        return context.gpu_kernel.get(op) == "host" or bool(
            kernel is not None and 0 in kernel.gpu_host_outputs
        )

    def host_in(op: str, producer: str) -> bool:
        if context.gpu_kernel.get(op) == "host":
            return True
        kernel = kernels.get(op)
        positions = [i for i, p in enumerate(built_inputs.get(op, [])) if p == producer]
        return bool(kernel is not None and positions and positions[0] in kernel.gpu_host_inputs)

    crossings: set[tuple[str, str]] = set()  # (producer, consumer): one copy per pair
    members = set(names)
    edges = [(p, n) for n in names for p in context.inputs.get(n, []) if p not in members]
    edges += [(n, c) for n in names for c in context.consumers.get(n, []) if c not in members]
    for producer, consumer in edges:
        other = consumer if producer in members else producer
        if context.view.get(other) == "GPU" and host_out(producer) != host_in(consumer, producer):
            crossings.add((producer, consumer))
    return len(crossings)


def _host_memory_seen(context: _Context) -> list[_Finding]:
    """Without kernel facts, a GPU trace still shows it: a copy to the host between two ops
    that both sit on the GPU means the reader computes in host memory (or the writer, for a
    copy to the device)."""
    transfers = context.trace.transfers
    if not context.gpus or transfers is None or transfers.empty:
        return []
    host: dict[str, int] = {}
    for tensor, dst in transfers[["tensor", "dst_device"]].itertuples(index=False):
        producer = _copied_op(context, tensor)
        consumers = [c for c in context.consumers.get(producer, []) if c in context.type_of]
        if not consumers or not _all_on_one_gpu(context, [producer, *consumers]):
            continue
        to_host = _device_type(dst) == "CPU"
        for name in consumers if to_host else [producer]:
            host[name] = host.get(name, 0) + 1
    names = _in_order(context, host)
    if not names:
        return []
    copies = sum(host.values())
    typed = _names([f"{n} ({context.type_of.get(n, '?')})" for n in names])
    return [
        _Finding(
            "host_memory_on_gpu",
            "medium" if copies >= 4 else "info",
            names,
            (
                f"{typed} sit on "
                f"{context.short(names[0])} but compute in host memory: {copies} copies "
                "between device and host memory feed them, though both ends are on the GPU. "
                "Usually int32 shape arithmetic: cast to float32, or compute it once outside "
                "the step."
            ),
            {"ops": len(names), "copies": copies},
            (0.0, 0.0, float(copies)),
        )
    ]


def _xla_hidden(context: _Context) -> list[_Finding]:
    trace = context.trace
    clusters = [n for n, t in context.type_of.items() if t in _XLA_TYPES]
    notes = [n for n in getattr(trace, "notes", []) if "XLA" in n]
    if not clusters and not notes:
        return []
    message = (
        "XLA compiled this step into clusters, so the ops inside are not placed one by one "
        "and their devices cannot be checked: trace it with jit_compile=False (Keras: "
        "model.compile(..., jit_compile=False)) to see them."
    )
    return [
        _Finding(
            "xla_hidden",
            "info",
            clusters,
            message,
            {"clusters": len(clusters)},
            (_duration(context, clusters), 0.0, float(len(clusters))),
        )
    ]


def _matches(requested: str, device: str) -> bool:
    try:
        return parse_device(requested).matches(parse_device(device))
    except ValueError:
        return False


def _in_order(context: _Context, names: Iterable[str]) -> list[str]:
    """``names`` in the trace's row order (first start first)."""
    if context.position is None:
        context.position = {name: i for i, name in enumerate(context.device_of)}
    position = context.position
    return sorted(set(names), key=lambda n: position.get(n, len(position)))


def _follower(context: _Context, name: str) -> bool:
    return context.type_of.get(name) in _FOLLOWERS


def _is_pipeline(op_type: str) -> bool:
    return (
        op_type.endswith(("Dataset", "DatasetV2", "DatasetV3"))
        or op_type.startswith(("Iterator", "OneShotIterator", "AnonymousIterator"))
        or op_type in ("MakeIterator", "DeleteIterator", "OptionalGetValue")
    )


def _runs_of(ops: pd.DataFrame, names: Sequence[str]) -> int:
    runs = ops.loc[ops["op"].isin(set(names)), "runs"]
    return int(runs.sum(skipna=True)) if len(runs) else 0
