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


def memory_of_records(records: Records, origin: int) -> pd.DataFrame:
    """``trace.memory`` of ``records`` (times on the trace's axis: µs since ``origin``)."""
    if not records.memory_time:
        return empty_memory()
    items = _items(records)
    counts = items["count"]
    frame = memory_frame(
        np.repeat(items["device"], counts),
        np.repeat(items["allocator"], counts),
        np.asarray(records.memory_time, dtype=np.int64) - origin,
        records.memory_bytes,
        np.repeat(items["op"], counts),
        np.repeat(items["step"], counts),
    )
    return frame


def memory_columns(
    records: Records, names: list[str], devices: list[str], ran: np.ndarray
) -> dict[str, Any] | None:
    """The ops' ``allocated_bytes``, ``peak_bytes`` and ``allocator`` columns, for the ops
    ``names`` on ``devices`` (``ran``: the op has a record of its own).

    Per (op, device) over its runs: ``total_bytes`` summed, ``peak_bytes`` the largest (of a
    run, of one allocator), the allocators by their bytes, largest first. An op that ran
    without allocating (it forwarded an input, or read a variable) is 0 with no allocator;
    None when the trace has no allocator records at all (every op is <NA>).
    """
    if not records.memory:
        return None
    items = pd.DataFrame(_items(records))
    by_allocator = items.groupby(["op", "device", "allocator"], sort=False).agg(
        total=("total", "sum"), peak=("peak", "max")
    )
    per_op = by_allocator.groupby(level=[0, 1], sort=False).agg(
        total=("total", "sum"), peak=("peak", "max"), allocators=("total", "size")
    )
    allocator = by_allocator.reset_index(level=2)["allocator"]
    several = per_op.index[per_op["allocators"].to_numpy() > 1]
    if len(several):  # rare: the names, by bytes, largest first
        shared = by_allocator.reset_index(level=2).loc[several]
        shared = shared.sort_values(["total", "allocator"], ascending=[False, True])
        joined = shared.groupby(level=[0, 1], sort=False)["allocator"].agg(", ".join)
        allocator = allocator[~allocator.index.duplicated()]
        allocator.loc[joined.index] = joined
    keys = pd.MultiIndex.from_arrays(
        [pd.Index(names, dtype=object), pd.Index(devices, dtype=object)]
    )
    where = per_op.index.get_indexer(keys)
    found = where >= 0
    n = len(names)
    allocated = np.zeros(n, np.int64)
    peaks = np.zeros(n, np.int64)
    allocated[found] = per_op["total"].to_numpy()[where[found]]
    peaks[found] = per_op["peak"].to_numpy()[where[found]]
    allocator_names = np.full(n, None, dtype=object)
    allocator_names[found] = allocator.reindex(per_op.index).to_numpy()[where[found]]
    missing = ~np.asarray(ran, dtype=bool)
    return {
        "allocated_bytes": pd.arrays.IntegerArray(np.where(missing, 0, allocated), missing),
        "peak_bytes": pd.arrays.IntegerArray(np.where(missing, 0, peaks), missing.copy()),
        "allocator": pd.array(allocator_names, dtype="string"),
    }


def _items(records: Records) -> dict[str, np.ndarray]:
    """``Records.memory`` as columns: each item's op, device, step, allocator, peak and total
    bytes, and how many allocation records it has."""
    rows, steps, allocators, peaks, totals, counts = zip(*records.memory, strict=True)
    rows = np.asarray(rows, dtype=np.intp)
    lane_codes, lanes = pd.factorize(np.asarray(records.lane, dtype=object)[rows])
    device_of = np.array([canonical_device(lane_owner(lane)) for lane in lanes], dtype=object)
    return {
        "op": np.asarray(records.op, dtype=object)[rows],
        "device": device_of[lane_codes],
        "step": np.asarray(steps, dtype=np.int64),
        "allocator": np.asarray(allocators, dtype=object),
        "peak": np.asarray(peaks, dtype=np.int64),
        "total": np.asarray(totals, dtype=np.int64),
        "count": np.asarray(counts, dtype=np.int64),
    }
