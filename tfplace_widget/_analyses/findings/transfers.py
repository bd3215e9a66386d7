"""Findings about copies: ``ping_pong`` (GPU -> CPU -> GPU chains, two copies a step) and
``cross_task_transfer`` (tensors sent over the network between tasks of a cluster): copies are
what a misplaced op costs. ``costly_transfer`` (copies between devices of one task) is
``costly``'s."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from functools import cache, partial
from itertools import chain, compress, repeat
from operator import itemgetter

import numpy as np
import pandas as pd

from ..._model.devices import crosses_tasks, short_device, task_of
from ..summary import format_bytes, format_us
from .base import (
    FOLLOWERS,
    Context,
    Finding,
    copied_op,
    copy_key,
    device_type,
    listed_groups,
    listed_names,
    listed_ops,
    op_groups,
    replicated,
    summed_duration,
)
from .byrow import ListedValues, values_of
from .fixes import asked_by_the_step, edit_fix, no_fix, placement_fix, sources
from .graph import among, components, edge_positions, exact_sums
from .material import maybe_material
from .ps import handle_variables, ps_record, ps_words
from .runtime import COPY_TYPES

# A cross-task transfer goes over the network (gRPC RecvTensor), not through memory. Severity
# by bytes per step: a 10 Gb/s link moves about 1 GB/s at best, so 10 MB a step is 10 ms or
# more on the wire (100 ms on 1 Gb/s), as long as a whole step of a mid-sized model: high;
# 1 MB a step is about a millisecond there (10 ms on 1 Gb/s), worth cutting: medium. Below,
# each transfer costs a round trip (about 0.2 ms per RecvTensor even on loopback) more than
# bandwidth, which the message's count shows: info.
NETWORK_HIGH_BYTES = 10_000_000
NETWORK_MEDIUM_BYTES = 1_000_000
# find_findings passes the package's values (``findings.NETWORK_HIGH_BYTES``...): set them there.
_RECV_TENSOR_EDGE = re.compile(r" from (\S+) to (\S+)$")  # RecvTensor labels
# Ops that write a variable (a parameter server's updates), by type prefix.
UPDATE_PREFIXES = (
    "Assign",
    "ResourceApply",
    "ApplyGradient",
    "Apply",
    "ResourceScatter",
    "ScatterAdd",
    "ScatterSub",
    "ScatterUpdate",
    "ResourceSparseApply",
    "SparseApply",
)
# tf.py_function: a DEFAULT kernel places it on the GPU, but its Python body runs on the host.
_PY_FUNCTION_TYPES = {"EagerPyFunc"}


def is_feed(context: Context, tensor: str, producer: str) -> bool:
    op_type = context.type_of.get(producer, "")
    return (
        op_type in ("_Arg", "Placeholder", "_Recv", "_HostRecv")
        or "_recv_" in tensor
        or "_arg_" in tensor
        or (producer.startswith("Func/") and "/input/_" in producer)  # an inlined call's input
    )


def cross_task_flags(transfers: pd.DataFrame) -> list[bool]:
    """Per transfer row: between two tasks of a cluster (the ``cross_task`` column; computed
    for frames without it, such as those of files saved before it)."""
    if "cross_task" in transfers:
        return [bool(v) for v in transfers["cross_task"].fillna(False).tolist()]
    return crosses_tasks(
        transfers["src_device"].tolist(), transfers["dst_device"].tolist()
    ).tolist()


def find_cross_task_transfers(
    context: Context,
    high_bytes: int = NETWORK_HIGH_BYTES,
    medium_bytes: int = NETWORK_MEDIUM_BYTES,
) -> list[Finding]:
    """Tensors sent between tasks of a cluster, over the network: one finding per (source
    task, destination task), with its transfers a step, bytes and largest tensors, and the
    fix that fits what crosses (variable reads, variable updates, or computed tensors)."""
    transfers = context.trace.transfers
    if transfers is None or transfers.empty:
        return []
    crossing = cross_task_flags(transfers)
    if not any(crossing):
        return []
    steps = max(1, step_count(context))
    pairs: dict[tuple[str, str], list[tuple]] = {}
    columns = transfers[["tensor", "src_device", "dst_device", "bytes"]]
    for (tensor, src, dst, size), network in zip(
        columns.itertuples(index=False), crossing, strict=True
    ):
        if network and not _feeds_collective(context, tensor):
            row = (tensor, src, dst, None if pd.isna(size) else int(size))
            pairs.setdefault((task_of(src) or src, task_of(dst) or dst), []).append(row)
    received = _receive_time(context)
    findings = []
    for (src_task, dst_task), group in pairs.items():
        findings.append(
            _cross_task_finding(
                context,
                src_task,
                dst_task,
                group,
                received.get((src_task, dst_task), 0.0),
                steps,
                high_bytes,
                medium_bytes,
            )
        )
    return findings


def _feeds_collective(context: Context, tensor: str) -> bool:
    """Whether ``tensor`` is the input of a collective op (an all-reduce's): its traffic is
    the strategy's data parallelism, which no placement of the user's avoids."""
    producer = tensor.rsplit(":", 1)[0]
    return any(
        context.type_of.get(consumer, "").startswith("Collective")
        for consumer in context.consumers.get(producer, [])
    )


def _relayed_updates(
    context: Context, starts: Sequence[str], task: str, hops: int = 4
) -> list[str]:
    """The variable updates on other tasks than ``task`` that ``starts`` (on ``task``) feed,
    through at most ``hops`` ops on ``task``; none when they feed anything else off ``task``.
    Gradients summed on the chief and sent on to the ps tasks make the chief a relay."""
    seen, frontier, found = set(starts), list(starts), []
    for _ in range(hops):
        following = []
        for op in frontier:
            for consumer in context.consumers.get(op, []):
                if consumer in seen or context.is_runtime(consumer):
                    continue
                seen.add(consumer)
                where = task_of(context.device_of.get(consumer, ""))
                if where == task:
                    following.append(consumer)
                elif where:
                    if not context.type_of.get(consumer, "").startswith(UPDATE_PREFIXES):
                        return []
                    found.append(consumer)
        frontier = following
    return found


def _receive_time(context: Context) -> dict[tuple[str, str], float]:
    """Time the workers spent in ``RecvTensor`` per (source task, destination task), over all
    traced steps, from the records' labels (``... from <device> to <device>``)."""
    events = context.trace.events
    if events is None or events.empty or "label" not in events:
        return {}
    recv = events[events["op"] == "RecvTensor"]
    out: dict[tuple[str, str], float] = {}
    for label, duration in zip(recv["label"].astype(str), recv["duration_us"], strict=True):
        match = _RECV_TENSOR_EDGE.search(label)
        if match and not pd.isna(duration):
            key = (task_of(match.group(1)), task_of(match.group(2)))
            out[key] = out.get(key, 0.0) + float(duration)
    return out


def _cross_task_finding(
    context: Context,
    src_task: str,
    dst_task: str,
    group: list[tuple],
    seconds: float,
    steps: int,
    high_bytes: int,
    medium_bytes: int,
) -> Finding:
    count = len(group)
    sizes = [r[3] for r in group if r[3] is not None]
    moved = sum(sizes)
    # Control edges (an update's "done" signal) cross as 0-byte tensors: counted, not named.
    named = sorted((r for r in group if r[3] != 0), key=lambda r: -(r[3] or 0))
    shown = ", ".join(
        f"{r[0]} ({format_bytes(r[3])})" if r[3] is not None else r[0] for r in named[:3]
    )
    if len(named) > 3:
        shown += f" and {len(named) - 3} more"
    if len(named) < count:
        signals = count - len(named)
        shown += f"{', ' if shown else ''}{signals} control signal{'s' * (signals != 1)} (0 B)"
    producers = list(dict.fromkeys(copied_op(context, r[0]) for r in group))
    user_producers = [p for p in producers if p in context.type_of and not context.is_runtime(p)]
    dst_devices = {r[2] for r in group}
    consumers = list(
        dict.fromkeys(
            c
            for p in producers
            for c in context.consumers.get(p, [])
            if context.device_of.get(c) in dst_devices and not context.is_runtime(c)
        )
    )
    facts = getattr(context.trace, "facts", None)
    resource_inputs = getattr(facts, "resource_inputs", {}) if facts is not None else {}
    reads = [p for p in user_producers if resource_inputs.get(p)]
    variables = sorted({v for p in reads for v in resource_inputs.get(p, ())})
    updates = [c for c in consumers if context.type_of.get(c, "").startswith(UPDATE_PREFIXES)]
    feeds = [p for p in producers if is_feed(context, f"{p}:0", p)]
    computed = [p for p in user_producers if p not in reads]
    user_fix = None
    record = ps_record(context.trace)
    if handle_variables(record) and (reads or updates):
        args = (
            variables if reads else sorted({v for u in updates for v in resource_inputs.get(u, ())})
        )
        fix, advised = ps_words(record, args, src_task if reads else dst_task, reads, medium_bytes)
        user_fix = int(advised)
    elif reads:
        fix = (
            f"reads of the variables on {src_task} ({listed_names(variables)}), sent every step. "
            "Partition large variables over the ps tasks (partitioner= in "
            "tf.compat.v1.variable_scope / get_variable) so no one task ships them all; read "
            "each variable once a step on the worker and reuse that read; or colocate the "
            "compute that shrinks it with the variable (tf.compat.v1.colocate_with(var)) so "
            "only the smaller result crosses"
        )
        if computed:
            fix += (
                f". Also crossing: {listed_names(computed)}, computed on {src_task} and read on "
                f"{dst_task}: put {'it' if len(computed) == 1 else 'them'} on one task with "
                "its readers"
            )
    elif updates:
        updated = {v for u in updates for v in resource_inputs.get(u, ())}
        once = bool(updated) and len(updated) == len(updates)
        fix = (
            f"updates of the variables on {dst_task} ({listed_names(updates)}), sent every step. "
            + (
                "Each variable already gets one update a step, so what crosses is its size: "
                "partition large variables so the updates spread over the ps tasks"
                if once
                else "Aggregate the gradients on the worker so each variable gets one update a "
                "step, and partition large variables so the updates spread over the ps tasks"
            )
        )
    elif feeds and len(feeds) == len(producers):
        fix = (
            f"fed values arriving on the session's task and sent on to {dst_task}: feed "
            f"them where they are used (read the input on {dst_task} with tf.data there)"
        )
    elif (
        user_producers and consumers and (updated := _relayed_updates(context, consumers, dst_task))
    ):
        targets = sorted({task_of(context.device_of.get(op, "")) for op in updated})
        fix = (
            f"{dst_task} passes them on: {listed_names(consumers)} there combine "
            f"{'them' if len(user_producers) > 1 else 'it'} and send the result on to "
            f"{', '.join(targets)}, to update variables ({listed_names(updated)}). Compute each "
            "gradient's mean (or sum) on its variable's ps task (tf.device(var.device) around "
            "it): every worker then sends straight there"
        )
    elif user_producers and consumers:
        fix = (
            f"{listed_names(consumers)} on {dst_task} read{'s' if len(consumers) == 1 else ''} "
            f"{listed_names(user_producers)} computed on {src_task}: put them on one task "
            f"(tf.device('{src_task}') around {listed_names(consumers)}, or the other way round), "
            "so only what must cross does"
        )
    else:
        fix = "keep the producers and consumers of these tensors on one task"
    predicted = bool(getattr(context.trace, "predicted", False))  # predict_placement's copies
    verb = "would cross" if predicted else "cross"
    plural = "transfers" if count > 1 else "transfer"
    unknown = "sizes unknown" if predicted else "sizes not recorded"
    size_text = f"{format_bytes(moved)} a step" if sizes else unknown
    if sizes and len(sizes) < count:
        size_text += f", {len(sizes)} of {count} sizes known"
    time_text = f", {format_us(seconds / steps)} a step in RecvTensor" if seconds else ""
    message = (
        f"{count} {plural} a step {verb} the network from {src_task} to {dst_task} "
        f"({size_text}{time_text}; largest: {shown}): {fix}."
    )
    if not sizes:
        severity = "info"
    elif moved >= high_bytes:
        severity = "high"
    elif moved >= medium_bytes:
        severity = "medium"
    else:
        severity = "info"
    ops = [o for p in user_producers for o in (p, *copy_nodes(context, p))] + consumers
    evidence = {
        "copies": count,
        "bytes": moved if sizes else -1,
        "steps": steps,
        "time_us": seconds,
    }
    if user_fix is not None:
        evidence["user_fix"] = user_fix
    return Finding(
        "cross_task_transfer",
        severity,
        ops or [r[0] for r in group],
        message,
        evidence,
        (seconds, float(moved), float(count)),
        predicted=predicted,
    )


def find_ping_pongs(context: Context) -> list[Finding]:
    """Chains GPU -> CPU -> GPU: each CPU stretch between GPU ops costs two copies a step,
    counted only where the tensor leaves device memory (a GPU kernel that keeps it in host
    memory, such as a string or int32 Identity, hands it over without a copy)."""
    view = context.view
    if not view or not any(kind == "GPU" for kind in view.values()):
        return []
    findings = [
        _ping_pong_finding(context, inside, before, after, duration)
        for inside, before, after, duration in _cpu_stretches(context)
    ]
    # tf.py_function: on the GPU, its Python on the host. Picked out by type off the frame's
    # column (a pass over the view's million names cost four times as much), in the view's order
    found = [n for n in context.names_of(_PY_FUNCTION_TYPES) if view.get(n) == "GPU"]
    if len(found) > 1:
        found = list(filter(set(found).__contains__, view))
    findings += (_py_function_finding(context, name) for name in found)
    return findings


def _py_function_finding(context: Context, name: str) -> Finding:
    before = context.inputs.get(name, [])
    after = context.consumers.get(name, [])
    gpu = context.gpu_name()
    if context.predicted_view:
        what = (
            f"{context.on_a_gpu_machine()}{name} (tf.py_function) would sit on {gpu} (its kernel "
            "serves every device) but its Python body runs on the host: it would copy its "
            "inputs GPU -> host and its result back every step."
        )
    else:
        what = (
            f"{name} (tf.py_function) sits on {gpu} but its Python body runs on the host: it "
            "copies its inputs GPU -> host and its result back every step."
        )
    duration = summed_duration(context, [name])
    return Finding(
        "ping_pong",
        "high",
        [*before, name, *after],
        f"{what} Write the body with TensorFlow ops, or move it into the input pipeline (tf.data).",
        {"copies": len(before) + max(1, len(after)), "duration_us": duration},
        (duration, 0.0, float(len(before) + len(after))),
        predicted=context.predicted_view,
        fix=edit_fix(
            f"write the body of the tf.py_function that makes {name}"
            f"{sources(context, [name])} with TensorFlow ops, or call it in the input pipeline "
            "(dataset.map).",
            "its Python body runs on the host wherever the op is placed (a device request "
            "only moves the copies), and overrides= cannot rewrite it or move it into the "
            "input pipeline",
        ),
    )


def _ping_pong_finding(
    context: Context,
    inside: list[str],
    before: list[str],
    after: list[str],
    duration: float | None = None,
) -> Finding:
    # the causes of a large stretch's ops read off the CPU ops' lists: no dict of them made
    why = context.why_cpu
    none = ("", "")
    found = (
        why.values_among(inside, none)
        if isinstance(why, ListedValues)
        else map(why.get, inside, repeat(none))
    )
    causes = set(map(itemgetter(0), found))
    one = len(inside) == 1
    # the GPU the stretch's first feeder on one is on (a replica's, with several), else the
    # first: each of the feeders' few devices asked once (a large stretch has 100k feeders)
    devices = devices_of(context, before)
    gpus = {d for d in set(devices) if d and device_type(d) == "GPU"}
    fed_from = next(compress(devices, map(gpus.__contains__, devices)), None) if gpus else None
    gpu_device = fed_from or (context.gpus[0] if context.gpus else "/device:GPU:0")
    gpu = short_device(gpu_device) if fed_from else context.gpu_name()
    # the ops (hundreds of thousands) are named by the message and by the fix: grouped once
    grouped, feeders, readers = (cache(partial(op_groups, ops)) for ops in (inside, before, after))
    if causes & {"no", "dtype", "colocated"}:
        fix = (
            f"its cpu_fallback finding says why {'it' if one else 'they'} would run on the CPU "
            "and what to do"
        )
        data = no_fix(
            f"{listed_ops(inside)} cannot run on the GPU (the cpu_fallback finding says why and "
            "what to do): no device request moves them there"
        )
    elif (
        "requested" in causes
        and replicated(context)
        and not any(asked_by_the_step(context, n) for n in inside)
    ):
        fix = (
            "a distribution strategy puts the CPU part there (its replicas run on the devices it "
            "was given; this is its own reduction of their results): nothing in your code "
            "places these ops"
        )
        data = no_fix("a distribution strategy places these ops itself")
    elif "requested" in causes:
        fix = (
            "the CPU part is asked for (a tf.device, or tied to an op that is): drop that "
            "request, or put the whole chain on one device"
        )
        data = _fix_of(context, inside, gpu_device, [*before, *after], grouped, feeders, readers)
    else:
        fix = (
            "move the CPU part onto the GPU, or the whole chain onto one device (its reason "
            "column says why it is on the CPU)"
        )
        data = _fix_of(context, inside, gpu_device, [*before, *after], grouped, feeders, readers)
    verb = "would go" if context.predicted_view else "goes"
    copies = len(before) + len(after)
    if duration is None:
        duration = summed_duration(context, inside)
    return Finding(
        "ping_pong",
        "high"
        if copies >= 2 and causes & {"no", "dtype", "colocated"}
        else "info"
        if "strategy" in fix
        else "medium",
        [*before, *inside, *after],
        lambda: (
            f"{context.on_a_gpu_machine()}{listed_groups(feeders(), 2)} -> "
            f"{listed_groups(grouped(), 2)} -> {listed_groups(readers(), 2)} {verb} {gpu} -> CPU "
            f"-> {gpu}, {copies} copies a step: {fix}."
        ),
        {
            "copies": copies,
            "cpu_ops": len(inside),
            "duration_us": duration,
            "user_fix": int("strategy" not in fix),
        },
        (duration, 0.0, float(copies)),
        predicted=context.predicted_view,
        fix=data,
    )


def _fix_of(
    context: Context,
    inside: list[str],
    gpu_device: str,
    partners: list[str],
    *grouped: Callable[[], dict[str, list[str] | None]],
) -> Callable[[], dict]:
    """A ping_pong's ``placement_fix``, made when read, naming its ops by the groups the
    message made (``grouped``: the CPU ops', the feeders', the readers')."""

    def listed() -> tuple[str, str]:
        inner, fed, read = (groups() for groups in grouped)
        if any(fed.values()) or any(read.values()):  # an owner's ops: grouped across both
            return listed_groups(inner), listed_ops(partners)
        # names alone: the partners' groups are the feeders' then the readers' new ones
        return listed_groups(inner), listed_groups(dict.fromkeys(chain(fed, read)))

    return partial(placement_fix, context, inside, gpu_device, partners, listed)


def _cpu_stretches(
    context: Context,
) -> Iterator[tuple[list[str], list[str], list[str], float | None]]:
    """Each stretch of CPU ops joined by data edges (a connected component of the view's CPU
    ops) that GPU ops feed and read where the tensor changes memory (``crosses_memory``): its
    ops other than constants, its GPU feeders and its GPU readers, each sorted by name, and its
    ops' summed time (``summed_duration``'s, by positions when that is exact, else None); the
    stretches in the order of their first op in the view. Over integer positions, for a
    million-op graph: one numpy pass over the edges, not a Python walk per stretch."""
    view = context.view
    index = pd.Index(np.fromiter(view, object, len(view)), dtype=object)
    kinds = np.array(list(view.values()), dtype=object)
    cpu, gpu = kinds == "CPU", kinds == "GPU"
    producers, consumers = edge_positions(context.inputs, index)
    ops = context.ops  # each view op's time, when adding it up by positions is exact
    durations = ops["duration_us"].to_numpy(dtype=float, na_value=np.nan)
    times = exact_sums(index, ops["op"].to_numpy(), durations)
    known = (producers >= 0) & (consumers >= 0)
    producers, consumers = producers[known], consumers[known]
    inner = cpu[producers] & cpu[consumers]
    label = components(len(index), producers[inner], consumers[inner])
    outputs, host_inputs = context.host_side_ops()
    # a GPU op feeding the CPU copies its output unless its kernel keeps it in host memory
    fed = gpu[producers] & cpu[consumers] & ~among(index, outputs)[producers]
    # a GPU op reading a CPU op's output copies it unless its kernel takes it in host memory
    read = cpu[producers] & gpu[consumers]
    names = index.to_numpy()
    for i in np.flatnonzero(read & among(index, host_inputs)[consumers]).tolist():
        read[i] = not context._host_input(names[consumers[i]], names[producers[i]])
    fed_by, read_by = label[consumers[fed]], label[producers[read]]
    # stretches with feeders and readers, as a mask over the labels (each a position)
    is_end = np.zeros(len(index), dtype=bool)
    is_end[fed_by] = True
    is_end &= np.bincount(read_by, minlength=len(index)) > 0
    ends = np.flatnonzero(is_end).tolist()
    if not ends:
        return
    members = cpu & ~among(index, context.names_of(FOLLOWERS)) & is_end[label]
    summed = (
        np.bincount(label[members], weights=times[members], minlength=len(index)).tolist()
        if times is not None
        else None
    )
    if context.material_only and summed is not None:  # only the stretches that may matter
        ops = (members, producers[fed], consumers[read])
        labels = (label[members], fed_by, read_by)
        ends = _maybe_material(context, index, ends, ops, labels, summed)
        is_end[:] = False
        is_end[ends] = True
        members &= is_end[label]  # the op lists of those alone
        fed &= is_end[label[consumers]]
        read &= is_end[label[producers]]
    before = _by_label(label[consumers[fed]], producers[fed], names)
    after = _by_label(label[producers[read]], consumers[read], names)
    inside = _by_label(label[members], np.flatnonzero(members), names)
    for stretch in ends:
        if stretch in inside:
            yield (
                sorted(inside[stretch]),
                sorted(set(before[stretch])),
                sorted(set(after[stretch])),
                summed[stretch] if summed is not None else None,
            )


def _maybe_material(
    context: Context,
    index: pd.Index,
    ends: list[int],
    ops: tuple[np.ndarray, np.ndarray, np.ndarray],
    labels: tuple[np.ndarray, np.ndarray, np.ndarray],
    summed: list[float],
) -> list[int]:
    """``ends`` (stretches) without those whose finding surely is not material: a stretch's
    finding names its ops (``ops[0]``, a mask over ``index``), its feeders and its readers
    (positions), each of the stretch ``labels`` says, and takes its ops' ``summed`` time."""
    positions = np.concatenate([np.flatnonzero(ops[0]), ops[1], ops[2]])
    keep = maybe_material(context, index, np.concatenate(labels), positions, np.asarray(summed))
    return [e for e in ends if keep[e]]


def _by_label(labels: np.ndarray, ids: np.ndarray, names: np.ndarray) -> dict[int, list[str]]:
    """``names[ids]`` grouped by ``labels`` (each group in the order of ``ids``)."""
    order = np.argsort(labels, kind="stable")
    labels, ids = labels[order], ids[order]
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]]) if len(labels) else labels
    bounds = [*starts.tolist(), len(ids)]
    listed = names[ids].tolist()
    return {
        int(key): listed[start:end]
        for key, start, end in zip(labels[starts].tolist(), bounds, bounds[1:], strict=False)
    }


def copy_nodes(context: Context, producer: str) -> list[str]:
    """The ``_Send``/``_Recv`` nodes that carry ``producer``'s output to another device."""
    if context.copies_by_producer is None:
        by_producer: dict[str, list[str]] = {}
        # the copies in the order of ``type_of``, with their keys: Context.of's
        keys = context.copy_keys
        if keys is None:
            of = context.type_of
            copies = compress(of, map(COPY_TYPES.__contains__, of.values()))
            keys = {name: copy_key(name) for name in copies}
        for name, key in keys.items():
            found = by_producer.get(key)
            if found is None:
                by_producer[key] = [name]
            else:
                found.append(name)
        context.copies_by_producer = by_producer
    return context.copies_by_producer.get(producer, [])


def devices_of(context: Context, names: Sequence[str]) -> list[str | None]:
    """Each of ``names``' device (``device_of``'s, None for a name it lacks)."""
    return values_of(context.device_of, names)


def step_count(context: Context) -> int:
    """How many times the step ran, read off the op runs (the most common count)."""
    runs = context.ops["runs"].dropna()
    return int(runs.mode().iloc[0]) if len(runs) else 1
