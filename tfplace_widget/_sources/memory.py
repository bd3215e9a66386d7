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

from .._model.devices import canonical_device, lane_owner
from .._model.memory import empty_memory, memory_frame
from .._model.records import Records


def memory_of_records(
    records: Records, origin: int, names: list[str], devices: list[str], ran: np.ndarray
) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """``trace.memory`` of ``records`` (times on the trace's axis: µs since ``origin``), and
    the memory columns of the ops ``names`` on ``devices`` (``ran``: the op has a record of
    its own), None when the trace has no allocator records at all (every op is <NA>).

    Per (op, device) over its runs: ``allocated_bytes`` the ``total_bytes`` summed,
    ``peak_bytes`` the largest ``peak_bytes`` (of a run, of one allocator), ``allocator`` the
    allocators by their bytes, largest first. An op that ran without allocating (it forwarded
    an input's buffer, or read a variable) is 0 with no allocator; when the records hold only
    some allocators' allocations (a TF2 profile's), such an op is <NA>: unknown, not none.
    """
    memory = records.memory
    if not memory.row:
        return empty_memory(), None
    items = _items(records)
    counts = items["count"]
    frame = memory_frame(
        np.repeat(items["device"], counts),
        np.repeat(items["allocator"], counts),
        np.asarray(memory.time, dtype=np.int64) - origin,
        memory.bytes,
        np.repeat(items["op"], counts),
        np.repeat(items["step"], counts),
        np.repeat(items["series"], counts),
    )
    return frame, _memory_columns(items, names, devices, ran, memory.every_allocation)


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
    codes, allocators = pd.factorize(items["allocator"])
    pairs = np.unique(group.astype(np.int64) * len(allocators) + codes) // len(allocators)
    several = np.unique(pairs[np.r_[pairs[1:] == pairs[:-1], False]])
    for g in several.tolist():
        mine = group == g
        taken: dict[str, int] = {}
        for name, size in zip(items["allocator"][mine], items["total"][mine].tolist(), strict=True):
            taken[name] = taken.get(name, 0) + size
        names[g] = ", ".join(sorted(taken, key=lambda a: (-taken[a], a)))
    return names


def _items(records: Records) -> dict[str, np.ndarray]:
    """``Records.memory``'s items as arrays, with each one's op and device."""
    memory = records.memory
    lanes = records.lane
    lane_codes, distinct = pd.factorize(np.array([lanes[r] for r in memory.row], dtype=object))
    device_of = np.array([canonical_device(lane_owner(lane)) for lane in distinct], dtype=object)
    ops = records.op
    step_codes, _ = pd.factorize(np.asarray(memory.step, dtype=np.int64), sort=True)
    device_codes, devices = pd.factorize(device_of[lane_codes])
    allocator_codes, allocators = pd.factorize(np.asarray(memory.allocator, dtype=object))
    # (step, device, allocator), numbered in the order of the steps: one live-bytes series each
    series = (step_codes * len(devices) + device_codes) * len(allocators) + allocator_codes
    return {
        "op": np.array([ops[r] for r in memory.row], dtype=object),
        "device": device_of[lane_codes],
        "step": step_codes,
        "series": series.astype(np.int64),
        "allocator": np.asarray(memory.allocator, dtype=object),
        "peak": np.asarray(memory.peak, dtype=np.int64),
        "total": np.asarray(memory.total, dtype=np.int64),
        "count": np.asarray(memory.count, dtype=np.int64),
    }
