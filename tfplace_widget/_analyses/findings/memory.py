"""Findings about memory, read off ``trace.memory`` (TensorFlow's allocator records, or a
prediction's memory, :mod:`..predict.memory`):

- ``gpu_memory`` (a prediction's): the step would need about as much as a GPU of
  ``GPU_MEMORY_GIB`` GiB holds, or more (at least ``GPU_MEMORY_NEAR`` of it): the GPU, the
  bytes, the op whose allocation reached the peak and what is live there;
- ``memory_peak``: one op holds more than half a device's peak, and at least
  ``PEAK_OP_BYTES``: the op (its source line where the trace has it) and its bytes;
- ``pinned_host_memory``: a device's pinned host memory (``gpu_host_bfc``; ``cuda_host_bfc``
  in TF 1.x: page-locked host memory TensorFlow takes for a GPU's tensors that go to or through the host) peaks at
  ``PEAK_OP_BYTES`` or more: the ops holding it, and, for a prediction's copies off the GPU,
  the CPU ops that read them (moving those to the GPU, where the user's tf.device put them on
  a CPU and they have a GPU kernel, is the fix; none where they have no GPU kernel);
- ``input_memory``: the input pipeline's batch (``IteratorGetNext``'s outputs, which tf.data
  allocated in its own threads, so no record of the step holds them; or a prediction's copy of
  them onto the GPU) is live at a device's peak, at least ``PEAK_OP_BYTES``, and more than the
  step's own tensors there: the batch size in the user's dataset code sets it;
- ``replicated_variables``: a distribution strategy's replicas (``replica_N`` scopes of one
  task's step: MirroredStrategy's in one process, or a worker's several GPUs) each hold their
  own copy of the same variables (model, optimizer state, metrics), ``PEAK_OP_BYTES`` or more
  on each device and at least ``REPLICATED_SHARE`` of what each needs at its peak: adding
  devices adds copies and never shrinks it. No fix (the strategy's design): ``user_fix`` 0,
  ``info``. A MultiWorkerMirroredStrategy worker with one device holds one copy in its own
  memory (findings of a trace across tasks are found per task: ``tasks.py``): no finding.

Their materiality is their own (a size, not a share of the step's time): ``judge`` keeps it.
The size rule is one for all five: ``PEAK_OP_BYTES`` (256 MiB) is large in any device's terms
(a few percent of a 16 GiB GPU or of a host's RAM: what one tensor-sized change can win), and
"more than half" is where one cause makes most of what is held; variables that are a quarter
of a device's need are a part no batch size changes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd

from ..._model.devices import short_device
from ..._model.memory import PINNED_HOST_ALLOCATORS
from ..._model.trace import strategy_of
from ..summary import format_bytes
from .base import REPLICA, Finding, listed_ops, owner_of
from .fixes import no_fix

GPU_MEMORY_GIB = 16.0  # the GPU a prediction's step is held against (a common card's size)
GPU_MEMORY_NEAR = 0.9  # material from this share of it: the CUDA context and fragmentation
PEAK_OP_BYTES = 256 * 2**20  # one op's bytes at a peak that are large in any device's terms
PEAK_OP_SHARE = 0.5  # ... and more than this share of the peak
_GIB = 2**30
_COPY = " (copy to "
INPUT_TYPES = frozenset({"IteratorGetNext", "IteratorGetNextSync", "IteratorGetNextAsOptional"})
REPLICATED_SHARE = 0.25  # each replica's copy of the variables: this share of its need or more
_CONSTANTS = frozenset({"Const", "HostConst"})  # held through the step, but no variable
_OPTIMIZER = "the optimizer "  # owner_of's name of an optimizer's ops


def find_gpu_memory(trace: Any, gib: float | None = None) -> list[Finding]:
    """A ``gpu_memory`` finding when a prediction's step needs at least ``GPU_MEMORY_NEAR`` of
    a ``gib`` GiB GPU (default ``GPU_MEMORY_GIB``); none for a traced run or a small step."""
    from ..predict.memory import fits_on

    if not getattr(trace, "predicted", False) or not len(trace.memory):
        return []
    size = GPU_MEMORY_GIB if gib is None else gib
    fit = fits_on(trace, size)
    if not fit.device or fit.need_bytes < GPU_MEMORY_NEAR * size * _GIB:
        return []
    peaks = _peaks(trace)
    row = peaks[peaks["device"] == fit.device].iloc[0]
    at = _op_of(fit.at_op)
    held = [(_op_of(op), b) for op, b in zip(row["ops"], row["ops_bytes"], strict=True)]
    persistent = fit.persistent_bytes
    largest = "; ".join(f"{op} {format_bytes(b)}" for op, b in held[:3])
    verdict = "more than it has" if not fit.fits else "close to all of it"
    of_variables = (
        f"{format_bytes(persistent)} of variables and constants held through the step, the rest "
        if persistent
        else ""
    )
    message = (
        f"On a {size:g} GiB GPU this step would need about {fit.need_bytes / _GIB:.2f} GiB on "
        f"{short_device(fit.device)} at op {at}{_source(trace, at)} ({verdict}): "
        f"{of_variables}the step's tensors live at that moment; the largest: {largest}. "
        "Predicted from the traced step's allocations "
        "(see the prediction's notes for what is assumed): a smaller batch, or moving the "
        "largest of these ops off the GPU (tf.device), lowers it."
    )
    evidence = {
        "need_bytes": int(fit.need_bytes),
        "gpu_bytes": int(size * _GIB),
        "variables_bytes": int(persistent),
        "material": 1,
    }
    ops = list(dict.fromkeys([at, *(op for op, _ in held)]))
    severity = "high" if not fit.fits else "medium"
    return [
        Finding(
            "gpu_memory",
            severity,
            ops,
            message,
            evidence,
            (0.0, float(fit.need_bytes), 1.0),
            predicted=True,
        )
    ]


def find_memory_peaks(trace: Any, min_bytes: int | None = None) -> list[Finding]:
    """A ``memory_peak`` finding per device whose peak is held mostly (over
    ``PEAK_OP_SHARE``) by one op's allocations of at least ``min_bytes`` (default
    ``PEAK_OP_BYTES``)."""
    if not len(trace.memory):
        return []
    least = PEAK_OP_BYTES if min_bytes is None else min_bytes
    predicted = bool(getattr(trace, "predicted", False))
    found = []
    for row in _peaks(trace).itertuples(index=False):
        if not row.ops or not row.peak_bytes:
            continue
        op, held = _op_of(row.ops[0]), int(row.ops_bytes[0])
        if held < least or held <= PEAK_OP_SHARE * row.peak_bytes:
            continue
        if op in _input_ops(trace) or row.allocator in PINNED_HOST_ALLOCATORS:
            continue  # input_memory and pinned_host_memory say it, with its cause
        if op in _clusters(trace):
            continue  # an XLA cluster's buffers: no op of it, nor an output, holds them
        what = "would hold" if predicted else "held"
        copy = " (the copy of its output there)" if _COPY in row.ops[0] else ""
        others = [(_op_of(o), b) for o, b in zip(row.ops[1:], row.ops_bytes[1:], strict=True)]
        rest = f"; the others: {listed_ops([o for o, _ in others])}" if others else ": nothing else"
        message = (
            f"One op makes {short_device(row.device)}'s memory peak: {op}"
            f"{_source(trace, op)}{copy} {what} {format_bytes(held)} of the "
            f"{format_bytes(row.peak_bytes)} live there at the peak ({row.allocator}){rest}. "
            "Its output's size (shape and dtype) is what to change to lower the peak."
        )
        evidence = {
            "peak_bytes": int(row.peak_bytes),
            "op_bytes": held,
            "share": round(held / row.peak_bytes, 4),
            "material": 1,
        }
        found.append(
            Finding(
                "memory_peak",
                "medium",
                [op],
                message,
                evidence,
                (0.0, float(held), 1.0),
                predicted=predicted,
            )
        )
    return found


def _peaks(trace: Any) -> pd.DataFrame:
    from ..memory import memory_peaks

    return memory_peaks(trace)


def _clusters(trace: Any) -> set[str]:
    """The XLA clusters of ``trace``: ``trace.memory`` names them for their buffers."""
    xla = getattr(trace, "xla", None)
    return set(xla["cluster"]) if xla is not None and len(xla) else set()


def _op_of(name: str) -> str:
    """The op a memory row's name is about (a copy's buffer: the op it copies)."""
    return name.split(_COPY, 1)[0]


def _source(trace: Any, op: str) -> str:
    """`` (train.py:42)`` where the trace has the op's source line, else ``""``."""
    ops = trace.ops
    if "source" not in ops:
        return ""
    found = ops.loc[ops["op"] == op, "source"].dropna()
    found = found[found.astype(str) != ""]
    return f" ({found.iloc[0]})" if len(found) else ""


def find_pinned_host_memory(trace: Any, min_bytes: int | None = None) -> list[Finding]:
    """A ``pinned_host_memory`` finding per device whose pinned host memory (``gpu_host_bfc``;
    ``cuda_host_bfc`` in TF 1.x) peaks at
    ``min_bytes`` (default ``PEAK_OP_BYTES``) or more."""
    if not len(trace.memory):
        return []
    least = PEAK_OP_BYTES if min_bytes is None else min_bytes
    predicted = bool(getattr(trace, "predicted", False))
    peaks = _peaks(trace)
    found = []
    for row in peaks[peaks["allocator"].isin(PINNED_HOST_ALLOCATORS)].itertuples(index=False):
        if row.peak_bytes < least or not row.ops:
            continue
        copied = [_op_of(op) for op in row.ops if _COPY in op]
        readers = _readers_on(trace, copied, row.device)
        held = "; ".join(
            f"{op} {format_bytes(b)}"
            for op, b in list(zip(row.ops, row.ops_bytes, strict=True))[:3]
        )
        what = "would pin" if predicted else "pinned"
        message = (
            f"{short_device(row.device)} {what} {format_bytes(row.peak_bytes)} of host memory "
            f"for GPU tensors at once ({row.allocator}: page-locked, taken from the host's RAM, "
            f"and kept by TensorFlow's allocator once grown): {held}."
        )
        fix = None
        if readers:
            movable = [
                r for r, (kernel, how) in readers.items() if kernel == "yes" and how == "explicit"
            ]
            stuck = [r for r, (kernel, _) in readers.items() if kernel != "yes"]
            message += f" The GPU's output{'s' * (len(copied) != 1)} come{'s' * (len(copied) == 1)} back for {listed_ops(list(readers))} on {short_device(row.device)}{_source(trace, next(iter(readers)))}."
            if stuck:
                fix = no_fix(
                    f"{listed_ops(stuck)} ha{'ve' if len(stuck) != 1 else 's'} no GPU kernel for "
                    "its inputs: the tensors must come back to the host"
                )
                message += " No placement change cures it: " + fix["no_fix"] + "."
            elif movable and len(movable) == len(readers):
                target = "/" + short_device(_gpu_of(trace, copied))
                edit = (
                    f"run {listed_ops(movable)} on {target[1:]}, where {'its input is' if len(copied) == 1 else 'their inputs are'}: "
                    f"drop the tf.device that puts {'it' if len(movable) == 1 else 'them'} on "
                    f"{short_device(row.device)}{_source(trace, movable[0])}, or make it "
                    f"tf.device({target!r})."
                )
                fix = {
                    "overrides": dict.fromkeys(movable, target),
                    "edit": edit,
                    "no_fix": "",
                    "not_simulable": "",
                }
                message += " Fix: " + edit
        evidence = {
            "pinned_bytes": int(row.peak_bytes),
            "material": 1,
            "user_fix": int(bool(fix and fix["overrides"])),
        }
        found.append(
            Finding(
                "pinned_host_memory",
                "medium",
                list(dict.fromkeys([*copied, *readers] or [_op_of(op) for op in row.ops])),
                message,
                evidence,
                (0.0, float(row.peak_bytes), 1.0),
                predicted=predicted,
                fix=fix,
            )
        )
    return found


def find_input_memory(trace: Any, min_bytes: int | None = None) -> list[Finding]:
    """An ``input_memory`` finding per device where the input pipeline's batch is live at the
    step's peak, at least ``min_bytes`` (default ``PEAK_OP_BYTES``), and more than the step's
    own tensors there (a prediction's: its copy onto the device, more than half its peak)."""
    if not len(trace.memory):
        return []
    inputs = _input_ops(trace)
    if not inputs:
        return []
    least = PEAK_OP_BYTES if min_bytes is None else min_bytes
    predicted = bool(getattr(trace, "predicted", False))
    batches = _batches(trace, inputs)
    found = []
    for row in _peaks(trace).itertuples(index=False):
        if row.allocator in PINNED_HOST_ALLOCATORS:
            continue
        copies = {
            _op_of(op): int(b)
            for op, b in zip(row.ops, row.ops_bytes, strict=True)
            if _op_of(op) in inputs
        }
        # the batches tf.data handed over on this device: in no record of the step, live
        # from their op's start to their last reader's end; the step's own bytes then
        mine = {op: b for op, b in batches.items() if b[0] == row.device and op not in copies}
        outside = {op: size for op, (_, size, _, _) in mine.items()}
        if outside:
            start = min(b[2] for b in mine.values())
            end = max(b[3] for b in mine.values())
            own = _step_live_during(trace.memory, row.device, row.allocator, start, end)
        else:
            own = int(row.peak_bytes) - sum(copies.values())
        batch = sum(copies.values()) + sum(outside.values())
        if batch < least or batch <= own or (outside and batch + own < row.peak_bytes):
            continue
        ops = sorted({**copies, **outside}, key=lambda op: -{**copies, **outside}[op])
        what = "would be" if predicted else "is"
        how = (
            "its copy onto this device"
            if copies and not outside
            else "allocated by tf.data in its own threads, so no allocation record of the step holds it"
        )
        message = (
            f"The input pipeline's batch makes {short_device(row.device)}'s memory peak: "
            f"{listed_ops(ops)}{_source(trace, ops[0])} {what} {format_bytes(batch)} live at "
            f"the peak ({how}), beside at most {format_bytes(max(own, 0))} of the step's own "
            "tensors then. "
            "Fix: a smaller batch in your dataset code (dataset.batch(n): the batch's bytes "
            "are n times an element's); prefetch(k) holds k more batches on the host."
        )
        fix = {
            "overrides": None,
            "edit": "a smaller batch size in the dataset's batch() call",
            "no_fix": "",
            "not_simulable": "a batch size is no device request: trace again with the smaller batch",
        }
        evidence = {
            "batch_bytes": int(batch),
            "step_bytes": int(max(own, 0)),
            "material": 1,
        }
        found.append(
            Finding(
                "input_memory",
                "medium",
                ops,
                message,
                evidence,
                (0.0, float(batch), 1.0),
                predicted=predicted,
                fix=fix,
            )
        )
    return found


def _step_live_during(
    memory: pd.DataFrame, device: str, allocator: str, start: float, end: float
) -> int:
    """The most bytes the step's own records of ``device`` and ``allocator`` hold at once
    between ``start`` and ``end`` (µs): live at ``start``, and every change up to ``end``."""
    from ..._model.memory import step_rows

    rows = memory[step_rows(memory)]
    rows = rows[(rows["device"] == device) & (rows["allocator"] == allocator)]
    times = rows["time_us"].to_numpy()
    live = rows["live_bytes"].to_numpy()
    before = live[times < start]
    during = live[(times >= start) & (times <= end)]
    return int(max([before[-1] if len(before) else 0, *during.tolist()]))


def _input_ops(trace: Any) -> set[str]:
    """The ops that hand the step the input pipeline's batch (``IteratorGetNext``...)."""
    ops = trace.ops
    return set(ops.loc[ops["type"].astype(str).isin(INPUT_TYPES), "op"])


def _batches(trace: Any, inputs: set[str]) -> dict[str, tuple[str, int, float, float]]:
    """Each input op of a traced run whose outputs no allocation record holds (its
    ``allocated_bytes`` 0: tf.data allocated them): its device, output bytes, and when the
    batch is live (from its start to its last reader's end)."""
    ops = trace.ops
    if "allocated_bytes" not in ops or "start_us" not in ops:
        return {}
    mine = ops[ops["op"].isin(inputs)].drop_duplicates("op")
    ends = (ops["start_us"] + ops["duration_us"].fillna(0)).groupby(ops["op"]).first()
    found = {}
    for row in mine.itertuples(index=False):
        size = row.output_bytes
        if pd.isna(size) or not size or pd.isna(row.allocated_bytes) or row.allocated_bytes:
            continue
        readers = [c for c, made in trace.inputs.items() if row.op in made and c in ends.index]
        end = max([float(ends[c]) for c in readers], default=float("nan"))
        if pd.isna(row.start_us) or pd.isna(end):
            continue
        found[row.op] = (str(row.device), int(size), float(row.start_us), end)
    return found


def _readers_on(trace: Any, producers: list[str], device: str) -> dict[str, tuple[str, str]]:
    """The ops on ``device`` that read any of ``producers``: each with its ``gpu_kernel`` and
    ``how``."""
    if not producers:
        return {}
    wanted = set(producers)
    ops = trace.ops.drop_duplicates("op").set_index("op")
    found = {}
    for consumer, made in trace.inputs.items():
        if wanted & set(made) and consumer in ops.index and ops.at[consumer, "device"] == device:
            kernel = ops.at[consumer, "gpu_kernel"] if "gpu_kernel" in ops else ""
            found[consumer] = (str(kernel), str(ops.at[consumer, "how"]))
    return found


def _gpu_of(trace: Any, producers: list[str]) -> str:
    ops = trace.ops.drop_duplicates("op").set_index("op")
    return str(ops.at[producers[0], "device"]) if producers and producers[0] in ops.index else ""


def find_replicated_variables(trace: Any, min_bytes: int | None = None) -> list[Finding]:
    """A ``replicated_variables`` finding when a distribution strategy's replicas (the
    ``replica_N`` scopes of one task's step) each hold their own copy of the same variables,
    at least ``min_bytes`` (default ``PEAK_OP_BYTES``) per device and at least
    ``REPLICATED_SHARE`` of what each of those devices needs at its peak (its step's peak and
    what it holds through the step). No fix: the strategy keeps a copy on every replica."""
    if not len(trace.memory):
        return []
    devices = _replica_devices(trace)
    if len(devices) < 2:
        return []
    held = _variables_held(trace, devices)
    shared = _shared_sizes([held.get(device, []) for device in devices])
    per_device = sum(size * count for size, count in shared.items())
    least = PEAK_OP_BYTES if min_bytes is None else min_bytes
    if not per_device or per_device < least:
        return []
    peaks = _peaks(trace)
    need = (peaks["peak_bytes"] + peaks["persistent_bytes"]).groupby(peaks["device"]).sum()
    share = min(per_device / max(int(need.get(device, 0)), per_device) for device in devices)
    if share < REPLICATED_SHARE:
        return []
    copies = {device: _the_copy(held[device], shared) for device in devices}
    first = copies[devices[0]]
    readers = _readers_of(trace, {op for op, _ in first})
    state = {op for op, _ in first if readers.get(op) and all(map(_by_optimizer, readers[op]))}
    optimizer = sum(size for op, size in first if op in state)
    # the model's variables before the optimizer's state of the same size
    shown = sorted(first, key=lambda held: (-held[1], held[0] in state))[:3]
    largest = "; ".join(
        f"{format_bytes(size)} read by {listed_ops(readers[op][:1])}{_source(trace, readers[op][0])}"
        if readers.get(op)
        else f"{format_bytes(size)} ({op})"
        for op, size in shown
    )
    predicted = bool(getattr(trace, "predicted", False))
    names = [short_device(device) for device in devices]
    who = strategy_of(trace) or "The distribution strategy"
    of_optimizer = (
        f"; {format_bytes(optimizer)} of them the optimizer's state, read only by it"
        if optimizer
        else ""
    )
    reason = "the strategy keeps a full copy of the variables on every replica by design"
    message = (
        f"{who} {'would keep' if predicted else 'keeps'} a copy of the variables on each of "
        f"its {len(devices)} replicas: {', '.join(names[:-1])} and {names[-1]} each hold "
        f"{format_bytes(per_device)} ({len(first)} variables{of_optimizer}), "
        f"{format_bytes(per_device * len(devices))} in all, at least {share:.0%} of what each "
        "device needs at its peak. Each device added gets a copy of its own: a smaller "
        "per-replica batch shrinks the step's tensors, not this. "
        f"The largest: {largest}. No placement change in your code cures it: {reason}; what "
        "lowers it is a smaller model or optimizer state, or ParameterServerStrategy, which "
        "keeps the variables on parameter servers (sharded by a variable_partitioner) rather "
        "than on every replica."
    )
    evidence = {
        "variables_bytes": int(per_device),
        "variables": len(first),
        "copies": len(devices),
        "optimizer_bytes": int(optimizer),
        "share": round(share, 4),
        "user_fix": 0,
        "material": 1,
    }
    ops = [op for device in devices for op, _ in copies[device]]
    return [
        Finding(
            "replicated_variables",
            "info",  # what nothing in the user's code makes is said, never urged
            ops,
            message,
            evidence,
            (0.0, float(per_device * len(devices)), float(len(devices))),
            predicted=predicted,
            fix=no_fix(reason),
        )
    ]


def _replica_devices(trace: Any) -> list[str]:
    """The devices of a strategy's replicas in ``trace``'s step, replica 0's first: replica
    N's (N > 0) is where most of its ``replica_N/`` ops ran, replica 0's where most of their
    twins (the same names without that scope, as MirroredStrategy names replica 0's) ran.
    Empty without ``replica_N`` scopes."""
    ops = trace.ops
    names = ops["op"].tolist()
    scoped = [i for i, name in enumerate(names) if "replica_" in name]  # most traces: none
    if not scoped:
        return []
    devices = ops["device"].astype(str).tolist()
    device_of = dict(zip(names, devices, strict=True))
    votes: dict[int, Counter] = {}
    for name, device in ((names[i], devices[i]) for i in scoped):
        match = REPLICA.search(name)
        if match is None:
            continue
        votes.setdefault(int(match.group(2)), Counter())[device] += 1
        twin = device_of.get(name[: match.start()] + match.group(1) + name[match.end() :])
        if twin is not None:
            votes.setdefault(0, Counter())[twin] += 1
    found = [votes[index].most_common(1)[0][0] for index in sorted(votes) if votes[index]]
    return list(dict.fromkeys(found)) if 0 in votes else []


def _variables_held(trace: Any, devices: list[str]) -> dict[str, list[tuple[str, int]]]:
    """What each of ``devices`` holds through the step, constants left out: each holder op and
    its bytes (over the device's allocators), most bytes first. A variable several functions
    capture (``model.fit``'s training and evaluation steps) is one row per device
    (``sources.memory``); a trace saved before that has a row per function, counted as it
    was saved."""
    from ..._model.memory import persistent_bytes

    ops = trace.ops.drop_duplicates("op")
    types = dict(zip(ops["op"].tolist(), ops["type"].astype(str).tolist(), strict=True))
    held: dict[str, dict[str, int]] = {}
    for (device, _), rows in persistent_bytes(trace.memory).items():
        if device not in devices:
            continue
        mine = held.setdefault(device, {})
        for op, size in rows:
            if types.get(op) not in _CONSTANTS:
                mine[op] = mine.get(op, 0) + size
    return {
        device: sorted(mine.items(), key=lambda p: (-p[1], p[0])) for device, mine in held.items()
    }


def _shared_sizes(held: list[list[tuple[str, int]]]) -> Counter:
    """The sizes every device's list of ``held`` has, as often as each has them (a copy on
    every replica: each holds a variable of that size)."""
    shared = Counter(size for _, size in held[0])
    for rows in held[1:]:
        shared &= Counter(size for _, size in rows)
    return shared


def _the_copy(held: list[tuple[str, int]], shared: Counter) -> list[tuple[str, int]]:
    """The holders of ``held`` (most bytes first) that make the shared copy's sizes."""
    left = Counter(shared)
    copy = []
    for op, size in held:
        if left[size]:
            left[size] -= 1
            copy.append((op, size))
    return copy


def _readers_of(trace: Any, holders: set[str]) -> dict[str, list[str]]:
    """The ops that read each of ``holders`` (a variable's handle), through the runtime's
    ``Identity`` nodes that hand it into an inlined call (``Func/.../input/_4``): the model's
    first, then the optimizer's, each in the trace's order."""
    consumers: dict[str, list[str]] = {}
    for consumer, made in trace.inputs.items():
        for producer in made:
            consumers.setdefault(producer, []).append(consumer)
    ops = trace.ops.drop_duplicates("op")
    passing = set(ops.loc[ops["type"].astype(str) == "Identity", "op"])
    found: dict[str, list[str]] = {}
    for holder in holders:
        readers, seen, stack = [], {holder}, list(consumers.get(holder, ()))
        while stack:
            op = stack.pop(0)
            if op in seen:
                continue
            seen.add(op)
            if op in passing and op.startswith("Func/"):
                stack += consumers.get(op, ())
            else:
                readers.append(op)
        if readers:
            found[holder] = sorted(readers, key=_by_optimizer)
    return found


def _by_optimizer(name: str) -> bool:
    """Op ``name`` is an optimizer's (``owner_of``: Keras's and TF1's optimizer scopes)."""
    return owner_of(name)[0].startswith(_OPTIMIZER)
