"""``cpu_fallback``: ops on the CPU of a GPU machine (seen, or predicted from the kernel
registry) for a cause of their own, one finding per stretch of host-side ops they share.

A finding names only the cause the trace shows (no GPU kernel, none for these dtypes, tied to a
resource that has none) and a fix the user can apply: strings are never told to cast, a cast is
advised only to a dtype the op's GPU kernels take, and a stretch that one layer or function made
(its ops share a name scope) is named after that scope, so the fix is about the user's own
code (where that layer runs), not about the ops inside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from operator import itemgetter
from typing import Any

from .base import (
    FOLLOWERS,
    NO_GPU,
    ON_GPU,
    Context,
    Finding,
    follower,
    in_order,
    listed_names,
    listed_ops,
    summed_duration,
)
from .fixes import edit_fix, sources

_STRING_PREFIXES = (
    "AsString",
    "Substr",
    "Regex",
    "StaticRegex",
    "Unicode",
    "ReduceJoin",
    "DecodeBase64",
    "EncodeBase64",
)
_PY_FUNC_TYPES = {"PyFunc", "PyFuncStateless"}
# Why moving work out of the step cannot be tried with overrides=.
_OUT_OF_THE_STEP = (
    "the edit takes these ops out of the step (into the input pipeline, or before it), and "
    "overrides= only sets the devices of the step's own ops: no device request gives them a "
    "GPU kernel"
)
# Casts worth advising, best first: the dtypes GPU kernels most often take.
_CAST_ORDER = ("float32", "int32", "float16", "bfloat16", "int64", "float64")


def find_cpu_fallbacks(context: Context) -> list[Finding]:
    """Ops on the CPU of a GPU machine: the input pipeline as one finding, then one per
    stretch of host-side ops (joined by data edges) that has fallbacks in it."""

    why, kernels, none = context.why_cpu, context.gpu_kernel, ("", "")

    def falls_back(name: str) -> bool:
        cause = why.get(name, none)[0]
        if cause == "requested":  # asked for the CPU, or tied to what was: not a fallback
            return False
        # With kernel facts, an op with a GPU kernel on the CPU for no reason of its own
        # follows its input or consumer there (Shape, Identity): that op's finding covers it.
        return bool(cause) or kernels.get(name, "NA") not in ON_GPU

    # A dataset or iterator op in the step runs with its iterator, whose resource a tf.data
    # pipeline makes on the host (IteratorGetNext and IteratorV2 have GPU kernels; only
    # prefetch_to_device makes an iterator on the GPU): one finding, with that lever.
    pipeline_types = {t for t in set(context.type_of.values()) if is_pipeline(t)}
    pipeline = [
        n
        for n in context.names_of(pipeline_types)
        if context.view.get(n) == "CPU" and n not in context.duplicated
    ]
    findings: list[Finding] = []
    if pipeline:
        findings.append(_pipeline_finding(context, pipeline))
    in_pipeline = set(pipeline)
    type_of, duplicated = context.type_of, context.duplicated
    fallbacks = {
        name
        for name in _not_requested(context)
        if name not in duplicated
        and name not in in_pipeline
        and type_of.get(name) not in FOLLOWERS  # (``follower``, inline: a million calls)
        and falls_back(name)
    }
    grouped: set[str] = set()
    for name in in_order(context, fallbacks):
        if name in grouped:
            continue
        stretch = _host_stretch(context, name)
        members = in_order(context, stretch & fallbacks)
        grouped |= set(members)
        findings.append(_fallback_finding(context, members, stretch))
    return findings


def _not_requested(context: Context) -> list[str]:
    """The view's CPU ops whose cause (``why_cpu``) is no request, in the view's order: most
    CPU ops of a large graph are asked for there (800,000 of a million). When ``why_cpu`` holds
    exactly the view's CPU ops in its order (as the placer's prediction makes it), its causes
    are read in one pass and no name is looked up, or, when they are a list of one cause (a
    million-op CPU trace's: every CPU op asked for), counted; otherwise each CPU op's cause is."""
    view, why = context.view, context.why_cpu
    cpu = list(compress(view, map("CPU".__eq__, view.values())))
    if len(cpu) == len(why) and cpu == list(why):  # the same names: compared by identity first
        listed = why.values()
        if type(listed) is list and listed and listed.count(listed[0]) == len(listed):
            return [] if listed[0][0] == "requested" else cpu
        causes = map(itemgetter(0), listed)
        return list(compress(cpu, map("requested".__ne__, causes)))
    none = ("", "")
    return [name for name in cpu if why.get(name, none)[0] != "requested"]


def _host_stretch(context: Context, start: str) -> set[str]:
    """``start`` and the ops joined to it by data edges through host-side ops: on the CPU, or
    on the GPU with a kernel that computes in host memory (a string Identity)."""

    def host_side(name: str) -> bool:
        kind = context.view.get(name)
        return kind == "CPU" or (kind == "GPU" and context.gpu_kernel.get(name) == "host")

    stretch, todo = {start}, [start]
    while todo:
        name = todo.pop()
        for other in context.inputs.get(name, []) + context.consumers.get(name, []):
            if other not in stretch and host_side(other) and other not in context.duplicated:
                stretch.add(other)
                todo.append(other)
    return stretch


def _fallback_finding(context: Context, names: list[str], stretch: set[str]) -> Finding:
    causes = {context.why_cpu.get(n, ("", ""))[0] for n in names}
    message = _fallback_message(context, names, causes)
    # The copies this stretch costs: GPU neighbours whose tensors change memory to reach it.
    neighbours = {
        other
        for name in stretch
        for other, edge in [(p, (p, name)) for p in context.inputs.get(name, [])]
        + [(c, (name, c)) for c in context.consumers.get(name, [])]
        if other not in stretch and context.crosses_memory(*edge)
    }
    copies = len(neighbours)
    known = bool(causes) and causes <= {"no", "dtype", "colocated"}
    severity = "high" if known and copies else ("medium" if known or copies else "info")
    if all(context.asked_cpu(n) for n in names):  # where the code asked: no fallback
        severity = "info"
    ops = list(names)
    for name in names:  # the constants that feed it go with it, and the anchors it follows
        ops += [n for n in context.inputs.get(name, []) if follower(context, n)]
        anchor = context.why_cpu.get(name, ("", ""))[1]
        if anchor:
            ops.append(anchor)
    duration = summed_duration(context, names)
    return Finding(
        "cpu_fallback",
        severity,
        ops,
        message,
        {
            "ops": len(names),
            "gpu_neighbours": copies,
            "duration_us": duration,
            "user_fix": int(known),
        },
        (duration, 0.0, float(copies)),
        predicted=context.predicted_view,
        fix=_fallback_fix(context, names, causes),
    )


def _fallback_fix(context: Context, names: list[str], causes: set[str]) -> dict[str, Any] | None:
    """The edit at the user's line that the message advises, untried: none of these is a
    device request (no request gives an op a GPU kernel it lacks). None when why the ops are
    on the CPU is unknown (no graph)."""
    if "" in causes or not causes:
        return None
    where = sources(context, names)
    types = {context.type_of.get(n, "") for n in names}
    ops = listed_ops(names)
    if any(is_string_op(context, n) for n in names):
        edit = (
            f"move the calls that make {ops}{where} into the input pipeline (dataset.map), "
            "before the step, so that the step gets numbers."
        )
        return edit_fix(edit, _OUT_OF_THE_STEP)
    if types <= _PY_FUNC_TYPES:
        edit = (
            f"write the body of the tf.numpy_function that makes {ops}{where} with TensorFlow "
            "ops, or call it in the input pipeline (dataset.map)."
        )
        return edit_fix(edit, _OUT_OF_THE_STEP)
    op_type = context.type_of.get(names[0], "")
    cast = gpu_cast(context.registry, op_type, context.attrs(names[0]))
    if causes == {"dtype"} and len(types) == 1 and cast:
        edit = f"cast the inputs of {ops}{where} to {cast} before the {op_type}."
        return edit_fix(
            edit, "a cast changes the step's dtypes, not where its ops run: no device request"
        )
    if causes == {"colocated"}:
        anchors = sorted({context.why_cpu[n][1] for n in names if context.why_cpu[n][1]})
        edit = (
            f"move {listed_ops(anchors) or 'the CPU-only resource'}"
            f"{sources(context, anchors)} and its readers out of the step, or use a resource "
            "type with a GPU kernel."
        )
        return edit_fix(edit, _OUT_OF_THE_STEP)
    edit = (
        f"do the work of {ops}{where} outside the step (in the input pipeline, or once "
        "before it), or use ops that have a GPU kernel."
    )
    return edit_fix(edit, _OUT_OF_THE_STEP)


def _fallback_message(context: Context, names: list[str], causes: set[str]) -> str:
    one = len(names) == 1
    where = "would run" if context.predicted_view else ("runs" if one else "run")
    prefix = context.on_a_gpu_machine()
    types = list(dict.fromkeys(context.type_of.get(n, "") or "?" for n in names))
    scope = _common_scope(names) if len(names) > 1 else ""
    if scope:
        ops = f"{len(names)} ops under {scope}/ ({listed_names(types)})"
    else:
        ops = listed_ops(names, types=context.type_of)
    subject = f"{ops} {where}"
    if "" in causes:  # seen on the CPU of a GPU trace, why unknown (no graph)
        return (
            f"{ops} ran on {context.short(names[0])} while {context.gpu_name()} was there: the "
            "graph was not given, so whether a GPU kernel exists is unknown. Load the trace "
            "with its graph (PlacementTrace.from_run_metadata(..., graph=)) to see why."
        )
    if all(context.asked_cpu(n) for n in names):
        # A tf.device (the user's, or a Keras preprocessing layer's) put them there: no
        # fallback, whatever their kernels; the step still waits on them.
        subject += f" on the CPU where a tf.device asks for {'it' if one else 'them'} (no fallback)"
    else:
        subject += " on the CPU"
    if any(is_string_op(context, n) for n in names):
        where_to = (
            f"Do the work of {scope.rsplit('/', 1)[-1]} in the input pipeline (dataset.map), "
            "before the step, so that the step gets numbers."
            if scope
            else "Turn strings into numbers in the input pipeline (tf.data), before the step."
        )
        return f"{prefix}{subject}: string ops have no GPU kernel. {where_to}"
    if set(types) <= _PY_FUNC_TYPES:
        return (
            f"{prefix}{subject}: tf.numpy_function has no GPU kernel. Write its "
            "body with TensorFlow ops, or run it in the input pipeline (tf.data)."
        )
    if causes == {"dtype"} and len(types) == 1:
        return _dtype_message(context, names, where)
    if causes == {"colocated"}:
        anchors = sorted({context.why_cpu[n][1] for n in names if context.why_cpu[n][1]})
        return (
            f"{prefix}{subject} although {'it has' if one else 'they have'} a GPU "
            f"kernel: {'it shares' if one else 'they share'} a resource with "
            f"{listed_ops(anchors) or 'a CPU-only op'}, which has no GPU kernel. Move that resource "
            "(and its readers) out of the step, or use a resource type with a GPU kernel."
        )
    missing = sorted({context.type_of.get(n, "") for n in names if context.why_cpu[n][0] == "no"})
    typed = sorted(
        {
            f"{context.dtypes(n)} {context.type_of.get(n, '')}".strip()
            for n in names
            if context.why_cpu[n][0] == "dtype"
        }
    )
    because = [
        f"{listed_names(missing)} {'has' if len(missing) == 1 else 'have'} no GPU kernel"
    ] * bool(missing) + [
        f"{listed_names(typed)} {'has' if len(typed) == 1 else 'have'} none for its dtype"
    ] * bool(typed)
    if "colocated" in causes:
        anchors = sorted({context.why_cpu[n][1] for n in names if context.why_cpu[n][1]})
        because.append(f"the rest share a resource with {listed_ops(anchors)}, which has none")
    return (
        f"{prefix}{subject}: {'; '.join(because)}. Do it outside the step (in the "
        "input pipeline, or once before), or use ops that have one."
    )


def _dtype_message(context: Context, names: list[str], where: str) -> str:
    """One op type without a GPU kernel for its dtypes: the cast that gives it one, when a
    single type attr stands in the way (the kernel registry says which dtypes its GPU kernels
    take); else what is known."""
    first = names[0]
    op_type = context.type_of.get(first, "")
    dtype = context.dtypes(first)
    what = f"{dtype} {op_type}" if dtype else f"{op_type} with this dtype"
    subject = "it" if len(names) == 1 else "they"
    tail = (
        f"so on a machine with a GPU {subject} would run on the CPU"
        if context.predicted_view
        else f"so {subject} {where} on the CPU"
    )
    cast = gpu_cast(context.registry, op_type, context.attrs(first))
    if cast:
        return f"Cast to {cast} before the {op_type} ({listed_ops(names)}): {what} has no GPU kernel, {tail}."
    return (
        f"{listed_ops(names)} ({op_type}): {what} has no GPU kernel, {tail}. Compute it in dtypes "
        "its GPU kernels take, or outside the step."
    )


def gpu_cast(registry: Any, op_type: str, attrs: dict[str, str]) -> str:
    """The dtype to cast to so that ``op_type`` with ``attrs`` gets a GPU kernel: the GPU
    kernels of ``registry`` (the one the trace's facts were read from, handed in) that differ
    from the node in one type attr only, their dtypes for it, the most common first; "" when
    no single cast does it, or there is no registry: facts loaded from a file (``tfplace
    show`` of a saved trace does not import TensorFlow, seconds, for this)."""
    if registry is None:
        return ""
    options = registry.gpu_cast_options(op_type, attrs)
    ranked = [d for d in _CAST_ORDER if d in options]
    return ranked[0] if ranked else ""


def _pipeline_finding(context: Context, pipeline: list[str]) -> Finding:
    """The step's reads of a ``tf.data`` iterator. ``IteratorGetNext`` has GPU kernels (the
    kernel registry's, the ``gpu_kernel`` column): it runs on the host because the iterator it
    reads lives there (a plain ``prefetch`` keeps batches in host memory), so each batch is
    copied to the GPU in the step. The one lever is in the user's pipeline:
    ``prefetch_to_device`` (or a strategy's ``experimental_distribute_dataset``); ``info``,
    with ``user_fix`` 1, since the copy is what every GPU step with host data pays."""
    names = listed_names(context.originals(pipeline))
    where = "would run" if context.predicted_view else "run"
    without = sorted(
        {context.type_of.get(n, "") for n in pipeline if context.gpu_kernel.get(n) in NO_GPU}
    )
    cause = "they read a tf.data iterator, which lives in host memory" + (
        f" ({listed_names(without)} {'has' if len(without) == 1 else 'have'} no GPU kernel)"
        if without
        else ""
    )
    message = (
        f"{context.on_a_gpu_machine()}the step's reads of its tf.data input ({names}) {where} "
        f"on the CPU: {cause}, so each batch is copied to the GPU inside the step. To have the "
        "copy made ahead of the step, end the dataset with "
        "tf.data.experimental.prefetch_to_device('/gpu:0') (or feed it through a "
        "distribution strategy's experimental_distribute_dataset, which prefetches to the "
        "device); otherwise there is nothing to change."
    )
    duration = summed_duration(context, pipeline)
    consumers = {c for n in pipeline for c in context.consumers.get(n, [])} - set(pipeline)
    copies = sum(context.view.get(c) == "GPU" for c in consumers)
    return Finding(
        "cpu_fallback",
        "info",
        pipeline,
        message[0].upper() + message[1:],
        {"ops": len(pipeline), "gpu_readers": copies, "duration_us": duration, "user_fix": 1},
        (duration, 0.0, float(len(pipeline))),
        predicted=context.predicted_view,
        fix=edit_fix(
            "end the dataset with tf.data.experimental.prefetch_to_device('/gpu:0') (or feed "
            "it through a distribution strategy's experimental_distribute_dataset).",
            "the edit is to the dataset, not to where the step's ops run (overrides= cannot "
            "make it), and it moves each batch's copy ahead of the step rather than removing it",
        ),
    )


def is_string_op(context: Context, name: str) -> bool:
    op_type = context.type_of.get(name, "")
    if "String" in op_type or op_type.startswith(_STRING_PREFIXES):
        return True
    return any("string" in value.split(",") for value in context.attrs(name).values())


def _common_scope(names: Sequence[str]) -> str:
    """The name scope all ``names`` share ("model/text_vectorization"), "" when none."""
    common: list[str] = []
    for level in zip(*(name.split("/")[:-1] for name in names), strict=False):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return "/".join(common)


def is_pipeline(op_type: str) -> bool:
    return (
        op_type.endswith(("Dataset", "DatasetV2", "DatasetV3"))
        or op_type.startswith(("Iterator", "OneShotIterator", "AnonymousIterator"))
        or op_type in ("MakeIterator", "DeleteIterator", "OptionalGetValue")
    )
