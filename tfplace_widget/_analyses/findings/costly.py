"""``costly_transfer``: the copies between devices of one task, by direction, worst first.

Each finding says what crosses, as the trace shows it: the step's own feeds and fetches (only
``info``), reads of variables that live on another device than the ops that use them, updates
computed on another device than their variables, or tensors computed on one device and read on
another. Copies that never leave host memory (a CPU op and a GPU kernel that keeps that tensor
in host memory, such as a string Identity) cost no device copy and are left out; control
signals (0-byte tensors that carry a control edge) are counted, not named.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache, partial
from itertools import chain, compress, repeat
from operator import contains, eq, is_not, itemgetter, ne
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ..._model.devices import short_device
from ..._model.trace import strategy_of
from ..summary import format_bytes, format_us
from .base import (
    REPLICA,
    Context,
    Finding,
    copied_op,
    device_type,
    is_gradient,
    listed_names,
    listed_ops,
    replicated,
)
from .fallbacks import is_pipeline
from .fixes import asked_by_the_step, no_fix, placement_fix, variable_fix
from .graph import positions_in, rows_among
from .material import steps_of
from .tasks import PART_TASK
from .transfers import (
    UPDATE_PREFIXES,
    copy_nodes,
    cross_task_flags,
    devices_of,
    is_feed,
    step_count,
)

# A costly copy: this many bytes, or this much time, per traced run.
COSTLY_BYTES = 1_000_000
COSTLY_US = 1_000.0
TOP_TRANSFERS = 3  # directions reported under costly_transfer
# Ops that read only their input's shape; the placer puts them with their first input.
_METADATA_TYPES = {"Shape", "ShapeN", "Size", "Rank"}
# A control edge between devices: the partitioner sends a dummy "<op>/ctrl/_N" tensor.
_CONTROL = re.compile(r"^(?P<op>.+)/ctrl/_\d+(?::\d+)?$")
# Ops that hand a function's results back: its output identities, Keras's optional logs.
_RETURN_TYPES = {"Identity", "IdentityN", "OptionalFromValue"}
# Ops that read a variable's value (a resource input that is a variable, not a table or an
# iterator).
_VARIABLE_READS = ("ReadVariableOp", "ResourceGather", "ResourceGatherNd")
_KNOWN = partial(is_not, None)  # a recorded size
_SHAPE_RULE = (
    "the placer puts an op that reads only a shape on the device of its input: nothing in your "
    "code places these copies"
)


def find_costly_transfers(context: Context) -> list[Finding]:
    """The top copy directions by time, bytes and count; feeds and fetches apart (they are
    the step's own inputs and results, so only ``info``)."""
    transfers = context.trace.transfers
    if transfers is None or transfers.empty:
        return []
    copy_time = _copy_time(context, transfers)
    steps = max(1, step_count(context))
    signals: dict[tuple[str, str], int] = {}
    directions = _directions(context, transfers, copy_time, signals)
    # the directions by the best rank each can have, each made until the next one cannot
    # reach the ranks of the TOP_TRANSFERS made (a finding is costly to make: its op lists)
    best = {key: _best_rank(group, key[2]) for key, group in directions.items()}
    made: dict[tuple[str, str, str], Finding] = {}
    ops_of: dict[tuple[str, str, str], Callable[[], list[str]]] = {}
    for key in sorted(best, key=best.__getitem__):
        if len(made) >= TOP_TRANSFERS and not _may_reach(key, best[key], made, list(directions)):
            break
        src, dst, io = key
        signals_of = signals.get((src, dst), 0) if not io else 0
        made[key], ops_of[key] = _direction_finding(
            context, src, dst, io, directions[key], steps, signals_of
        )
    kept = [key for key in directions if key in made]  # in the directions' order
    kept.sort(key=lambda key: _rank(made[key]))  # stable: of equal ranks, the first first
    # the op lists (hundreds of thousands of names) of the directions kept alone
    for key in kept[:TOP_TRANSFERS]:
        made[key].ops = list(dict.fromkeys(ops_of[key]()))  # unique, as ``Finding`` makes them
    return [made[key] for key in kept[:TOP_TRANSFERS]]


def _may_reach(
    key: tuple[str, str, str],
    best: tuple,
    made: dict[tuple[str, str, str], Finding],
    order: list[tuple[str, str, str]],
) -> bool:
    """Whether the direction ``key``, whose finding ranks no better than ``best``, could be
    one of the ``TOP_TRANSFERS`` kept beside those ``made``: better than the last of them, or
    equal to it and before one of the equals in the directions' ``order`` (the kept ones'
    order of equal ranks). The directions come by their best ranks, in that order among equal
    ones: once one cannot reach, no later one can."""
    last = sorted(map(_rank, made.values()))[TOP_TRANSFERS - 1]
    if best != last:
        return best < last
    equal = [order.index(other) for other, finding in made.items() if _rank(finding) == last]
    return order.index(key) < max(equal)


def _copy_time(context: Context, transfers: pd.DataFrame) -> dict[str, float]:
    """Each copied tensor's measured time: memcpy records (GPU traces) are named after the
    copied edge, and their time is the copy's. The events of the copied tensors only: when
    ``Steps`` holds every event's name (``every_event``), the tensors are looked up in its
    index first (which ``judge`` reads anyway), and the events not at all when none ran (a
    CPU trace's hundreds of thousands of copies against a million events)."""
    events = context.trace.events
    if events is None or not len(events):
        return {}
    steps = steps_of(context)
    if steps.every_event:
        named = transfers["tensor"].to_numpy(dtype=object)
        if not (positions_in(steps.names, named) >= 0).any():
            return {}
    copies = events[rows_among(events["op"], set(transfers["tensor"].tolist()))]
    return copies.groupby("op")["duration_us"].sum().to_dict()


class _Copies(NamedTuple):
    """One direction's copies, in the transfers' order: each copy's tensor, the op whose
    output it is, its size (None: not recorded), its measured time, and that op's readers
    (``Context.consumers``'s list)."""

    tensors: list[str]
    producers: list[str]
    sizes: list[int | None]
    times: list[float]
    readers: list[Sequence[str]]


def _directions(
    context: Context,
    transfers: pd.DataFrame,
    copy_time: dict[str, float],
    signals: dict[tuple[str, str], int],
) -> dict[tuple[str, str, str], _Copies]:
    """The copies by ``(src, dst, io)``, in the order each direction first appears; the
    control signals counted into ``signals`` per pair of devices. By C passes over the
    copies (a million-op trace has hundreds of thousands) and numpy: what each copy is for
    (``_io_of``) is asked in Python only of the copies whose answer the columns leave open
    (a strategy's step, a reader that may hand the tensor back)."""
    tensors = transfers["tensor"].tolist()
    srcs, dsts = transfers["src_device"].tolist(), transfers["dst_device"].tolist()
    keep = np.fromiter(map(ne, srcs, dsts), bool, len(tensors))
    # a predicted host <-> device memory crossing (src == dst) is host_memory_on_gpu's, one
    # between tasks of a cluster cross_task_transfer's
    keep &= ~np.asarray(cross_task_flags(transfers), dtype=bool)
    sizes = _sizes(transfers)
    for i in np.flatnonzero(keep).tolist():  # control edges: counted, not named
        if "/ctrl/_" in tensors[i] and _CONTROL.match(tensors[i]):
            keep[i] = False
            signals[(srcs[i], dsts[i])] = signals.get((srcs[i], dsts[i]), 0) + 1
    if not keep.all():
        mask = keep.tolist()
        tensors, srcs, dsts = (list(compress(c, mask)) for c in (tensors, srcs, dsts))
        sizes = list(compress(sizes, mask))
    if not tensors:
        return {}
    pairs = _pair_codes(srcs, dsts)
    first = np.unique(pairs, return_index=True)[1]
    ends = [(srcs[i], dsts[i]) for i in first.tolist()]
    kinds = [(device_type(src), device_type(dst)) for src, dst in ends]
    producers = [t.rpartition(":")[0] if ":" in t else t for t in tensors]
    for i in compress(range(len(producers)), map(str.startswith, producers, repeat("edge_"))):
        producers[i] = copied_op(context, tensors[i])  # a TF 1.x memcpy record's edge
    gpu_pairs = [i for i, k in enumerate(kinds) if "GPU" in k]
    if gpu_pairs:  # a copy between a CPU and a GPU may stay in host memory
        kept = np.ones(len(tensors), dtype=bool)
        for i in np.flatnonzero(np.isin(pairs, gpu_pairs)).tolist():
            src, dst = ends[pairs[i]]
            kept[i] = not _stays_in_host_memory(context, producers[i], src, dst)
        if not kept.all():
            mask = kept.tolist()
            tensors, producers, sizes = (
                list(compress(c, mask)) for c in (tensors, producers, sizes)
            )
            pairs = pairs[kept]
    type_of = context.type_of
    readers = list(map(context.consumers.get, producers, repeat(())))
    if context.user is None:  # set with the consumers by Context.of, which are ops of the trace
        readers = [[c for c in r if c in type_of] for r in readers]
    from_cpu = np.array([k[0] == "CPU" for k in kinds], dtype=bool)[pairs]
    io = _io_codes(context, tensors, producers, readers, from_cpu)
    times = list(map(copy_time.get, tensors, repeat(0.0))) if copy_time else [0.0] * len(tensors)
    keys = pairs * len(_IO) + io
    order = np.argsort(keys, kind="stable")
    found, starts = np.unique(keys[order], return_index=True)
    bounds = [*starts.tolist(), len(order)]
    groups = {}
    for key, start, end in zip(found.tolist(), bounds, bounds[1:], strict=False):
        rows = order[start:end].tolist()  # in the transfers' order
        pick = itemgetter(*rows) if len(rows) > 1 else lambda c, r=rows[0]: (c[r],)
        groups[key] = (
            rows[0],
            _Copies(*(list(pick(c)) for c in (tensors, producers, sizes, times, readers))),
        )
    # in the order each direction first appears among the copies
    return {
        (*ends[key // len(_IO)], _IO[key % len(_IO)]): copies
        for key, (_, copies) in sorted(groups.items(), key=lambda g: g[1][0])
    }


def _pair_codes(srcs: list[str], dsts: list[str]) -> np.ndarray:
    """Each copy's (src, dst) as a code, in the order each pair first appears (what
    ``pd.factorize`` of the pairs gives): the few devices of each end factorized, then their
    codes' pairs as integers, not a string made per copy (hundreds of thousands)."""
    src = pd.factorize(np.asarray(srcs, dtype=object))[0]
    dst = pd.factorize(np.asarray(dsts, dtype=object))[0]
    return pd.factorize(src.astype(np.int64) * (int(dst.max(initial=0)) + 1) + dst)[0]


# What a copy is for (``_io_of``), as codes.
_IO = ("", "feed", "fetch", "replicas")
_FEED_TYPES = frozenset({"_Arg", "Placeholder", "_Recv", "_HostRecv"})  # ``is_feed``'s


def _io_codes(
    context: Context,
    tensors: list[str],
    producers: list[str],
    readers: list[Sequence[str]],
    from_cpu: np.ndarray,
) -> np.ndarray:
    """``_io_of`` of each copy as an index into ``_IO``: the feeds by their producers' types
    and names, the fetches by their readers (none, or only ops that may hand the tensor back,
    whose ``_returned`` is then asked), in C passes; a strategy's step copy by copy."""
    if replicated(context):
        return np.array(
            [
                _IO.index(_io_of(context, t, p, list(r), True, bool(c)))
                for t, p, r, c in zip(tensors, producers, readers, from_cpu.tolist(), strict=True)
            ],
            dtype=np.intp,
        )
    types = list(map(context.type_of.get, producers, repeat("")))
    fed_type = {t: t in _FEED_TYPES or is_pipeline(t) for t in set(types)}
    feed = np.fromiter(map(fed_type.__getitem__, types), bool, len(types))
    for text in ("_recv_", "_arg_"):
        feed |= np.fromiter(map(contains, tensors, repeat(text)), bool, len(tensors))
    inlined = np.fromiter(map(str.startswith, producers, repeat("Func/")), bool, len(tensors))
    for i in np.flatnonzero(inlined & ~feed).tolist():  # an inlined call's input
        feed[i] = "/input/_" in producers[i]
    io = np.where(feed & from_cpu, 1, 0)
    read = np.fromiter(map(len, readers), np.intp, len(readers)) > 0
    # no reader: a fetch (unless a copy record that names no tensor: unknown)
    unnamed = np.fromiter(map(eq, tensors, producers), bool, len(tensors))
    io[(io == 0) & ~read & ~unnamed] = 2
    returning = set(context.names_of(_RETURN_TYPES))
    if returning:  # read only by ops that may hand it back: whether they do
        maybe = np.fromiter(map(returning.issuperset, readers), bool, len(readers))
        for i in np.flatnonzero((io == 0) & read & maybe).tolist():
            if all(_returned(context, c) for c in readers[i]):
                io[i] = 2
    return io


def _rank(finding: Finding) -> tuple:
    """A costly_transfer finding's place, lowest first: those with a fix, then by cost."""
    return (finding.severity == "info", *(-c for c in finding.cost))


def _best_rank(group: _Copies, io: str) -> tuple:
    """The lowest ``_rank`` a direction's finding can have: its cost is read off its copies,
    and only a direction of the step's own compute (no ``io``) may be other than ``info``."""
    moved = sum(filter(_KNOWN, group.sizes))
    return (bool(io), -float(sum(group.times)), -float(moved), -float(len(group.tensors)))


def _sizes(transfers: pd.DataFrame) -> list[int | None]:
    """Each transfer's ``bytes`` as an int, None when not recorded: by column, not a
    ``pd.isna`` per row."""
    sizes = transfers["bytes"]
    if not pd.api.types.is_numeric_dtype(sizes):
        return [None if pd.isna(v) else int(v) for v in sizes.tolist()]
    missing = sizes.isna().to_numpy(dtype=bool)
    values = sizes.to_numpy(dtype=float, na_value=0.0)
    whole = values.astype(np.int64).tolist() if np.all(np.abs(values) < 2.0**62) else None
    if whole is None:  # beyond int64: Python's int of each float
        whole = [int(v) for v in values.tolist()]
    return [None if gone else v for v, gone in zip(whole, missing.tolist(), strict=True)]


def _io_of(
    context: Context,
    tensor: str,
    producer: str,
    consumers: list[str],
    strategy: bool,
    from_cpu: bool,
) -> str:
    """What a copy is for the user: ``feed`` (the step's inputs: arguments, feeds and its
    tf.data batches, on their way from host memory), ``fetch`` (its results: read by nothing, or only by the identities and
    optionals that return them, such as Keras's logs), ``replicas`` (between the replicas of
    a distribution strategy, which places them with its own device scopes: its reductions,
    variable reads and syncs), or
    ``""`` (the step's own compute)."""
    ends = (producer, *consumers)
    if (
        strategy
        and any(REPLICA.search(n) or context.how.get(n) == "explicit" for n in ends)
        and not any(asked_by_the_step(context, n) for n in ends)
    ):
        return "replicas"
    feed = is_feed(context, tensor, producer) or is_pipeline(context.type_of.get(producer, ""))
    if feed and from_cpu:  # off a GPU: no feed prefetch_to_device would help
        return "feed"
    if tensor == producer and not consumers:  # a copy record that names no tensor: unknown
        return ""
    if all(_returned(context, c) for c in consumers):
        return "fetch"
    return ""


def _returned(context: Context, name: str, hops: int = 4) -> bool:
    """Whether ``name`` only hands a tensor back to the caller: an identity or optional read
    by nothing but others of its kind (the function's outputs)."""
    if context.type_of.get(name) not in _RETURN_TYPES:
        return False
    readers = [c for c in context.consumers.get(name, []) if c in context.type_of]
    return hops > 0 and all(_returned(context, c, hops - 1) for c in readers)


def _stays_in_host_memory(context: Context, producer: str, src: str, dst: str) -> bool:
    """A copy between a CPU and a GPU whose every reader on ``dst`` takes the tensor in the
    memory it already is in (host memory on both ends): TensorFlow hands the buffer over."""
    if "GPU" not in (device_type(src), device_type(dst)) or producer not in context.view:
        return False
    readers = [c for c in context.consumers.get(producer, []) if context.device_of.get(c) == dst]
    return bool(readers) and not any(context.crosses_memory(producer, c) for c in readers)


def _direction_finding(
    context: Context,
    src: str,
    dst: str,
    io: str,
    group: _Copies,
    steps: int,
    signals: int,
) -> tuple[Finding, Callable[[], list[str]]]:
    """A direction's finding without its ops, and the function that lists them."""
    count = len(group.tensors)
    sizes = list(filter(_KNOWN, group.sizes))
    moved = sum(sizes)
    seconds = float(sum(group.times))
    type_of = context.type_of
    # each producer once (with its readers), then those that are ops of the trace
    readers_of = dict(zip(group.producers, group.readers, strict=True))
    producers = sorted(filter(type_of.__contains__, readers_of))
    read = list(chain.from_iterable(map(readers_of.__getitem__, producers)))
    consumers = sorted(set(compress(read, map(eq, devices_of(context, read), repeat(dst)))))
    # the largest copy by (size, time), the first of equals
    keys = list(zip([size or 0 for size in group.sizes], group.times, strict=True))
    largest = max(range(count), key=keys.__getitem__)
    biggest = (group.tensors[largest], group.producers[largest])
    heavy = moved / steps >= COSTLY_BYTES or seconds / steps >= COSTLY_US
    some = moved / steps >= COSTLY_BYTES / 100 or count >= 10
    severity = "info" if io else ("high" if heavy else "medium" if some else "info")
    unknown = "sizes unknown" if context.predicted_view else "sizes not recorded"
    size_text = format_bytes(moved) if sizes else unknown
    if len(sizes) < count and sizes:
        size_text += f", {len(sizes)} of {count} sizes known"
    time_text = f", {format_us(seconds)} copying" if seconds else ""
    signal_text = f", and {signals} control signal{'s' * (signals != 1)}" if signals else ""
    numbers = f"({size_text}{time_text}; largest {biggest[0]}{signal_text})"
    s_src, s_dst = short_device(src) or src, short_device(dst) or dst
    plural = "copies" if count > 1 else "copy"
    # predict_placement's copies between a CPU and a GPU: a prediction, and it reads as one
    predicted = bool(getattr(context.trace, "predicted", False)) and "GPU" in (
        device_type(src),
        device_type(dst),
    )
    lead = "On a machine with a GPU, there would be " if predicted else ""
    variables = _variables_read(context, producers)
    updated = _variables_updated(context, consumers)
    tables = _tables_read(context, producers)
    user_fix = 1
    fix = None  # fixes.py: a placement change (overrides and edit), no_fix, or no claim
    if io == "feed":
        message = (
            f"{lead}{count} {plural} from {s_src} to {s_dst} {numbers}: the step's inputs, copied in "
            "every step. From a tf.data pipeline, tf.data.experimental.prefetch_to_device makes "
            "that copy ahead of the step (a plain prefetch keeps batches in host memory)."
        )
    elif io == "fetch" and (consumers or _returned(context, biggest[1])):
        # handed back through the function's outputs (a tf.function's are identities)
        user_fix = 0
        fix = no_fix(
            "the step's results go back to the caller through the function's outputs: nothing "
            "in your code places these copies"
        )
        message = (
            f"{lead}{count} {plural} from {s_src} to {s_dst} {numbers}: the step's results, going "
            "back to the caller through the function's outputs (under Keras's fit, its logs): "
            "nothing in the step to change."
        )
    elif io == "fetch":
        message = (
            f"{lead}{count} {plural} from {s_src} to {s_dst} {numbers}: the step's results, going "
            "back to the caller: fetch only what you need."
        )
    elif io == "replicas":
        user_fix = 0
        fix = no_fix("a distribution strategy places its replicas and makes these copies itself")
        message = (
            f"{lead}{count} {plural} from {s_src} to {s_dst} {numbers} between the replicas of a "
            f"distribution strategy ({listed_ops(producers)}"
            f"{f' to {listed_ops(consumers)}' if consumers else ''}): "
            "the strategy places each replica and makes these copies itself (its reductions of "
            "the loss and gradients, its variable updates); nothing in your code places them."
        )
    elif tables:
        message = (
            f"{lead}{count} {plural} from {s_src} to {s_dst} {numbers}: lookups in tables that live "
            f"on {s_src} ({listed_names(tables)}), read on {s_dst}: a table stays where it was "
            "made. Doing the lookup in the input pipeline (dataset.map) makes its result part of "
            "the batch."
        )
    elif consumers and all(context.type_of.get(c) in _METADATA_TYPES for c in consumers):
        one = len(consumers) == 1
        user_fix = 0  # the placer's rule, or TensorFlow's gradient code
        fix = _shape_rule(context, consumers)
        made = (
            f" TensorFlow's gradient code made {'it' if one else 'them'}: nothing in your code "
            "asks for this copy."
            if all(is_gradient(c) for c in consumers)
            else ""
        )
        message = (
            f"{lead}{count} {plural} from {s_src} to {s_dst} {numbers}: "
            f"{listed_names([f'{c} ({context.type_of.get(c)})' for c in consumers])} on {s_dst} "
            f"read{'s' * one} only the shape of {listed_ops(producers)}, yet the whole tensor is "
            "copied: the placer puts an op that reads only shapes on the device of its first "
            f"input.{made}"
        )
    elif producers and all(context.type_of.get(p) in _METADATA_TYPES for p in producers):
        user_fix = 0
        fix = _shape_rule(context, producers)
        made = (
            "TensorFlow's gradient code and Keras's own shape checks make them"
            if any(is_gradient(o) for o in producers + consumers)
            else "a shape is a few int32 values"
        )
        message = (
            f"{lead}{count} {plural} from {s_src} to {s_dst} {numbers}: shapes "
            f"({listed_ops(producers)}) read on {s_dst}: the placer puts an op that reads only "
            f"a shape with its input, on {s_src}; {made}: nothing in your code to change."
        )
    elif variables:
        fix, cure = _variables_cure(context, variables, dst, consumers, src, producers)
        message = (
            f"{lead}{count} read{'s' * (count != 1)} of variables that live on {s_src} "
            f"({listed_names(variables)}), copied every step to {s_dst}, where the ops that use them "
            f"run {numbers}: the variables are on one device and the step's compute on "
            f"another: {cure.format(on_compute=s_dst, on_variables=s_src)}."
        )
    elif updated:
        fix, cure = _variables_cure(context, updated, src, producers, dst, consumers)
        message = (
            f"{lead}{count} update{'s' * (count != 1)} of variables that live on {s_dst} "
            f"({listed_names(updated)}), computed on {s_src} and copied there every step {numbers}: "
            f"the variables are on one device and the step's compute on another: "
            f"{cure.format(on_compute=s_src, on_variables=s_dst)}."
        )
    elif producers and consumers and _on_one_gpu(context, producers + consumers):
        user_fix = 0
        fix = no_fix(
            "GPU kernels that keep int32 or shape values in host memory make these copies: no "
            "device request changes where their kernels keep them"
        )
        message = (
            f"{lead}{count} {plural} from {s_src} to {s_dst} {numbers}: {listed_ops(producers)} and "
            f"{listed_ops(consumers)} all run on {context.short(producers[0])}, yet the tensors "
            "cross to host memory: GPU kernels that keep int32 or shape values in host memory "
            "sit among them. Traced with its graph, the findings tell which ops and whether "
            "those values are yours to change."
        )
    elif stuck := _fallbacks_among(context, producers, consumers, src, dst):
        other = [o for o in (producers if stuck[0] in consumers else consumers) if o not in stuck]
        user_fix = 0  # the cpu_fallback finding has the fix
        fix = no_fix(
            f"{listed_ops(stuck)} cannot run on the GPU (the cpu_fallback findings say why and "
            "what to do): no device request moves them there"
        )
        where = "would run" if context.predicted_view else "run"
        one = len(stuck) == 1
        message = (
            f"{lead}{count} {plural} from {s_src} to {s_dst} {numbers}, the cost of CPU fallbacks: "
            f"{listed_ops(stuck)} {where} on the CPU ({'its' if one else 'their'} cpu_fallback "
            f"finding{'' if one else 's'} {'says' if one else 'say'} why and what to do), and "
            f"{listed_ops(other)} on the GPU {'read' if stuck[0] in producers else 'feed'} "
            f"{'it' if one else 'them'}."
        )
    elif producers and consumers:
        # made when read, as a ping_pong's: a direction past TOP_TRANSFERS, or immaterial, is
        # dropped, and its op lists (a large trace's tens of thousands) are never spelled out
        # the message and the fix name the same ops: their lists are made once, for both
        listed = cache(partial(_listed_both, producers, consumers))
        fix = partial(placement_fix, context, producers, dst, consumers, listed)
        message = partial(
            _put_together,
            f"{lead}{count} {plural} from {s_src} to {s_dst} {numbers}",
            listed,
            s_src,
            s_dst,
        )
    elif getattr(context.trace, "facts", None) is None:
        user_fix = 0
        made = (
            f"; TensorFlow's gradient code made {listed_ops(producers)}"
            if producers and all(is_gradient(p) for p in producers)
            else ""
        )
        message = (
            f"{lead}{count} {plural} from {s_src} to {s_dst} {numbers}: loaded without its graph, "
            f"the trace does not say which ops read them{made}."
        )
    else:
        message = (
            f"{lead}{count} {plural} from {s_src} to {s_dst} {numbers}: keep the producers and "
            "consumers of these tensors on one device."
        )
    if not user_fix:  # what nothing in the user's code makes is said, never urged
        severity = "info"
    evidence = {"copies": count, "bytes": moved if sizes else -1, "time_us": seconds}
    evidence["user_fix"] = user_fix
    evidence["steps"] = steps
    if signals:
        evidence["control_signals"] = signals
    finding = Finding(
        "costly_transfer",
        severity,
        [],  # its ops: ``_direction_ops``, for a direction kept
        message,
        evidence,
        (seconds, float(moved), float(count)),
        # a prediction's copies were not measured: every one is predicted (``lead`` words
        # the CPU <-> GPU ones as such)
        predicted=context.predicted_trace,
        fix=fix,
    )
    return finding, partial(_direction_ops, context, group, producers, consumers)


def _direction_ops(
    context: Context, group: _Copies, producers: list[str], consumers: list[str]
) -> list[str]:
    """A direction's finding's ops: each producer and its copies' nodes, the consumers, and
    the memcpy records of its tensors (or the tensors, when none of these is an op)."""
    copy_nodes(context, "")  # builds copies_by_producer
    copies = context.copies_by_producer or {}
    ops = [o for p in producers for o in (p, *copies.get(p, ()))] + consumers
    ops += filter(context.type_of.__contains__, group.tensors)  # memcpy records
    return ops or group.tensors


def _on_one_gpu(context: Context, names: Sequence[str]) -> bool:
    """``all_on_one_gpu``'s answer, told by the first name's device when that is no GPU (a
    CPU-only trace's directions of tens of thousands of ops), else by comparing the others'."""
    device_of = context.device_of
    first = device_of.get(names[0], "")
    if device_type(first) != "GPU":
        return False
    return all(map(eq, map(device_of.get, names, repeat("")), repeat(first)))


def _listed_both(producers: list[str], consumers: list[str]) -> tuple[str, str]:
    return listed_ops(producers), listed_ops(consumers)


def _put_together(head: str, listed: Callable[[], tuple[str, str]], s_src: str, s_dst: str) -> str:
    named, beside = listed()
    return (
        f"{head}: put {named} on {s_dst} with {beside}, or those on {s_src}, so the tensors "
        "stay on one device."
    )


def _shape_rule(context: Context, shape_ops: list[str]) -> dict | None:
    """``no_fix`` for copies the placer's shape rule makes, unless the user asked for a device
    for one of those shape ops (then the fix is theirs, and no claim is made)."""
    if any(context.how.get(op) == "explicit" for op in shape_ops):
        return None
    return no_fix(_SHAPE_RULE)


def _fallbacks_among(
    context: Context, producers: list[str], consumers: list[str], src: str, dst: str
) -> list[str]:
    """The CPU side of a CPU <-> GPU copy when it is on the CPU for a cause of its own (no GPU
    kernel, none for its dtype, a CPU-only resource, the input pipeline): those cannot be put
    on the GPU, so "put them together" is no fix."""
    kinds = (device_type(src), device_type(dst))
    side = producers if kinds == ("CPU", "GPU") else consumers if kinds == ("GPU", "CPU") else []
    return [
        n
        for n in side
        if context.why_cpu.get(n, ("", ""))[0] in ("no", "dtype", "colocated")
        or is_pipeline(context.type_of.get(n, ""))
    ]


def _variables_cure(
    context: Context,
    variables: list[str],
    compute_device: str,
    compute: list[str],
    variables_device: str,
    beside: list[str],
) -> tuple[dict[str, Any], str]:
    """The fix of copies between ``variables`` (on ``variables_device``) and the ops that
    ``compute`` with them (on ``compute_device``), and its sentence, to format with the two
    devices as the message names them (``on_compute``, ``on_variables``). Either side may
    move; inside a strategy's step (one task's part of its trace) only the compute can:
    ``MirroredStrategy``'s variable creator makes the variables of its scope under
    ``tf.device`` of its replica device, whatever the user's code asks around them."""
    if getattr(context.trace, PART_TASK, ""):
        return placement_fix(context, compute, variables_device, beside), (
            f"{strategy_of(context.trace)} makes the variables of its scope on its replica "
            "device whatever tf.device asks around them, so run that compute where they live "
            "({on_variables})"
        )
    return variable_fix(context, variables, compute_device, compute), (
        "create the variables on the device that computes with them ({on_compute}), or run "
        "that compute where they live ({on_variables})"
    )


def _variables_read(context: Context, producers: list[str]) -> list[str]:
    """The variables ``producers`` read, when every one of them is a variable read (not an
    iterator's batch, a table's lookup or a call's results: resources that are no variable)."""
    facts = getattr(context.trace, "facts", None)
    resource_inputs = getattr(facts, "resource_inputs", {}) if facts is not None else {}
    if not producers or not all(
        resource_inputs.get(p) and context.type_of.get(p, "").startswith(_VARIABLE_READS)
        for p in producers
    ):
        return []
    return sorted({v for p in producers for v in resource_inputs[p]})


def _tables_read(context: Context, producers: list[str]) -> list[str]:
    """The lookup tables ``producers`` read, when every one of them is a table lookup."""
    facts = getattr(context.trace, "facts", None)
    resource_inputs = getattr(facts, "resource_inputs", {}) if facts is not None else {}
    if not producers or not all(
        context.type_of.get(p, "").startswith("LookupTable") for p in producers
    ):
        return []
    return sorted({v for p in producers for v in resource_inputs.get(p, ())}) or producers


def _variables_updated(context: Context, consumers: list[str]) -> list[str]:
    """The variables ``consumers`` write, when every one of them is a variable update."""
    facts = getattr(context.trace, "facts", None)
    resource_inputs = getattr(facts, "resource_inputs", {}) if facts is not None else {}
    if not consumers or not all(
        context.type_of.get(c, "").startswith(UPDATE_PREFIXES) for c in consumers
    ):
        return []
    return sorted({v for c in consumers for v in resource_inputs.get(c, ())}) or consumers
