"""TensorFlow's allocator records as ``trace.memory`` and the ops' memory columns.

Graph mode's step_stats (a ``FULL_TRACE`` run) carry, for each node that allocated, one
``AllocatorMemoryUsed`` per allocator it used: the ``TrackingAllocator`` that wrapped the
allocator for the op's kernel (``OpKernelContext::get_allocator``) counted every byte it handed
out (``total_bytes``), the op's own high-water mark (``peak_bytes``) and, read when the step was
finalized, one ``allocation_records`` entry per allocation (``alloc_bytes`` > 0) and per
deallocation (< 0) with its time (``alloc_micros``, the clock of ``all_start_micros``): frees that
came after the op finished (its output freed once its last reader ran) are in them too. Sizes are
what the allocator really took (``AllocatedSize``: a BFC allocator's rounded chunk) where the
allocator can say, else the requested size. The records hold only what the step's ops allocated:
a tensor freed after the step (a fetched output, a variable's new value) has no deallocation
record. ``_sources.run_metadata`` collects them into ``Records.memory``; this module makes frames.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._model.devices import canonical_device, lane_owner, parse_device
from .._model.memory import PERSISTENT, TEMPORARY, VARIABLE_OPS, empty_memory, memory_frame
from .._model.records import Executed, Records


def memory_of_records(
    records: Records,
    origin: int,
    names: list[str],
    devices: list[str],
    ran: np.ndarray,
    executed: Executed | None = None,
) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """``trace.memory`` of ``records`` (times on the trace's axis: µs since ``origin``), and
    the memory columns of the ops ``names`` on ``devices`` (``ran``: the op has a record of
    its own), None when the trace has no allocator records at all (every op is <NA>).

    Per (op, device) over its runs: ``allocated_bytes`` the ``total_bytes`` summed,
    ``peak_bytes`` the largest ``peak_bytes`` (of a run, of one allocator), ``allocator`` the
    allocators by their bytes, largest first. An op that ran without allocating (it forwarded
    an input's buffer, or read a variable) is 0 with no allocator; when the records hold only
    some allocators' allocations (a TF2 profile's), such an op is <NA>: unknown, not none.

    The persistent rows (``kind`` "persistent", at time 0: the first step's start) are what
    the kernels recorded as persistent (``records.persistent``) and the resource variables of
    ``executed`` (``sources.persistent``), on their devices; ``variable`` the name of the
    variable each holds (``Executed.variable_name``; a ``VariableV2``'s or ``VarHandleOp``'s
    own name), None for a constant.
    """
    memory = records.memory
    items = _items(records) if memory.row else None
    parts = []
    if items is not None:
        counts = items["count"]
        parts.append(
            (
                np.repeat(items["device"], counts),
                np.repeat(items["allocator"], counts),
                np.asarray(memory.time, dtype=np.int64) - origin,
                np.asarray(memory.bytes, dtype=np.int64),
                np.repeat(items["op"], counts),
                np.repeat(items["step"], counts),
                np.repeat(items["series"], counts),
                np.full(int(counts.sum()), TEMPORARY, dtype=object),
                np.full(int(counts.sum()), None, dtype=object),
            )
        )
    held = _persistent(records, executed, items)
    if held is not None:
        first = int(parts[0][6].max()) + 1 if parts else 0
        parts.append((*held[:5], np.full(len(held[0]), -1), first + held[5], *held[6:]))
    if not parts:
        return empty_memory(), None
    frame = memory_frame(*(np.concatenate(column) for column in zip(*parts, strict=True)))
    if items is None:
        return frame, None
    return frame, _memory_columns(items, names, devices, ran, memory.every_allocation)


def _persistent(
    records: Records, executed: Executed | None, items: dict[str, np.ndarray] | None
) -> tuple[np.ndarray, ...] | None:
    """The persistent rows' columns (device, allocator, time, bytes, op, series, kind,
    variable), one
    row per holder and device, or None when there is none. A resource variable's allocator:
    a GPU's own BFC allocator, else the one its device's records use most, else ``cpu``. A
    variable several holders hand out (``Executed.variable_of``) is one row per device, its
    first holder's (the first function's ``_Arg`` in ``read_function_graphs``' order, the largest
    function first: fit's training step before its evaluation step)."""
    held: dict[tuple[str, str], tuple[int, str]] = {}
    for (op, lane), value in records.persistent.items():  # a device's lanes: the largest
        key = (op, canonical_device(lane_owner(lane)))
        if key not in held or held[key][0] < value[0]:
            held[key] = value
    variables = executed.variables if executed is not None else {}
    if variables:
        usual = _usual_allocators(items)
        same = executed.variable_of
        seen: set[tuple[str, str]] = set()  # (variable, device): its first holder's row only
        for op, size in variables.items():
            device = executed.device.get(op, "")
            if not size or not device or (op, device) in held:
                continue
            variable = same.get(op)
            if variable is not None:
                if (variable, device) in seen:
                    continue
                seen.add((variable, device))
            held[op, device] = (size, usual.get(device) or _own_allocator(device))
    if not held:
        return None
    keys = list(held)
    device = np.array([d for _, d in keys], dtype=object)
    allocator = np.array([held[k][1] or _own_allocator(k[1]) for k in keys], dtype=object)
    series, _ = pd.factorize(pd.Series(list(zip(device, allocator, strict=True))))
    return (
        device,
        allocator,
        np.zeros(len(keys), dtype=np.int64),
        np.array([held[k][0] for k in keys], dtype=np.int64),
        np.array([op for op, _ in keys], dtype=object),
        series.astype(np.int64),
        np.full(len(keys), PERSISTENT, dtype=object),
        np.array([_variable_name(op, executed) for op, _ in keys], dtype=object),
    )


def _variable_name(op: str, executed: Executed | None) -> str | None:
    """The name of the variable ``op`` holds: the one its handle was made for
    (``Executed.variable_name``), else a graph's variable op's own; None for a constant."""
    if executed is None:
        return None
    name = executed.variable_name.get(op)
    if name:
        return name
    return op if executed.type.get(op) in VARIABLE_OPS else None


def _usual_allocators(items: dict[str, np.ndarray] | None) -> dict[str, str]:
    """Per device, the allocator its ops' records took the most bytes from."""
    if items is None or not len(items["device"]):
        return {}
    taken = pd.Series(items["total"]).groupby([items["device"], items["allocator"]]).sum()
    return {device: allocator for device, allocator in taken.groupby(level=0).idxmax().tolist()}


def _own_allocator(device: str) -> str:
    """A GPU's own BFC allocator (``GPU_0_bfc``), else ``cpu``."""
    try:
        spec = parse_device(device)
    except ValueError:
        return "cpu"
    return f"GPU_{spec.index}_bfc" if spec.type == "GPU" else "cpu"


def _memory_columns(
    items: dict[str, np.ndarray],
    names: list[str],
    devices: list[str],
    ran: np.ndarray,
    every_allocation: bool,
) -> dict[str, Any]:
    n = len(names)
    # (op, device) as one integer per op row and per item, from codes shared by both
    op_codes, _ = pd.factorize(np.concatenate([np.asarray(names, dtype=object), items["op"]]))
    device_codes, known = pd.factorize(
        np.concatenate([np.asarray(devices, dtype=object), items["device"]])
    )
    keys = op_codes.astype(np.int64) * max(1, len(known)) + device_codes
    group, group_keys = pd.factorize(keys[n:])
    total = np.zeros(len(group_keys), np.int64)
    np.add.at(total, group, items["total"])
    peak = np.zeros(len(group_keys), np.int64)
    np.maximum.at(peak, group, items["peak"])
    allocator = _allocator_names(group, len(group_keys), items)
    where = pd.Index(group_keys).get_indexer(keys[:n])
    found = where >= 0
    allocated, peaks = np.zeros(n, np.int64), np.zeros(n, np.int64)
    allocated[found], peaks[found] = total[where[found]], peak[where[found]]
    allocator_names = np.full(n, None, dtype=object)
    allocator_names[found] = allocator[where[found]]
    missing = ~np.asarray(ran, dtype=bool)
    if not every_allocation:  # only the profiler's allocators: no item is not "none"
        missing |= ~found
    return {
        "allocated_bytes": pd.arrays.IntegerArray(np.where(missing, 0, allocated), missing),
        "peak_bytes": pd.arrays.IntegerArray(np.where(missing, 0, peaks), missing.copy()),
        "allocator": pd.array(allocator_names, dtype="string"),
    }


def _allocator_names(group: np.ndarray, groups: int, items: dict[str, np.ndarray]) -> np.ndarray:
    """Each group's allocator; several (rare: a GPU op's host memory too) joined, by the
    bytes each took, largest first."""
    names = np.empty(groups, dtype=object)
    names[group] = items["allocator"]  # one per group, unless it has several
    codes, allocators = items["allocator_code"], items["allocators"]
    pairs = _sorted_unique(group.astype(np.int64) * len(allocators) + codes) // len(allocators)
    several = _sorted_unique(pairs[np.r_[pairs[1:] == pairs[:-1], False]])
    for g in several.tolist():
        mine = group == g
        taken: dict[str, int] = {}
        for name, size in zip(items["allocator"][mine], items["total"][mine].tolist(), strict=True):
            taken[name] = taken.get(name, 0) + size
        names[g] = ", ".join(sorted(taken, key=lambda a: (-taken[a], a)))
    return names


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique`` of integers, by a sort (numpy 2's hashing ``unique`` is ~20x slower)."""
    ordered = np.sort(values)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


def _items(records: Records) -> dict[str, np.ndarray]:
    """``Records.memory``'s items as arrays, with each one's op and device."""
    memory = records.memory
    lanes = records.lane
    lane_codes, distinct = pd.factorize(np.array([lanes[r] for r in memory.row], dtype=object))
    device_of = np.array([canonical_device(lane_owner(lane)) for lane in distinct], dtype=object)
    ops = records.op
    step_codes, _ = pd.factorize(np.asarray(memory.step, dtype=np.int64), sort=True)
    # numbered as ``pd.factorize(device_of[lane_codes])`` would: the lanes come in order
    device_codes, devices = pd.factorize(device_of)
    device_codes = device_codes[lane_codes]
    allocator_codes, allocators = pd.factorize(np.asarray(memory.allocator, dtype=object))
    # (step, device, allocator), numbered in the order of the steps: one live-bytes series each
    series = (step_codes * len(devices) + device_codes) * len(allocators) + allocator_codes
    named = allocator_codes >= 0  # always, from TensorFlow's records (a name, maybe "")
    return {
        "op": np.array([ops[r] for r in memory.row], dtype=object),
        "device": device_of[lane_codes],
        "step": step_codes,
        "series": series.astype(np.int64),
        "allocator": (  # one name object per allocator
            np.asarray(allocators, dtype=object)[allocator_codes]
            if named.all()
            else np.asarray(memory.allocator, dtype=object)
        ),
        "allocator_code": allocator_codes,
        "allocators": allocators,
        "peak": np.asarray(memory.peak, dtype=np.int64),
        "total": np.asarray(memory.total, dtype=np.int64),
        "count": np.asarray(memory.count, dtype=np.int64),
    }
