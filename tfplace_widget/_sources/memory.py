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
    if not records.memory:
        return empty_memory()
    device_of = _device_of_lane(records)
    names, lanes = records.op, records.lane
    device, allocator, time_us, delta, op, step = [], [], [], [], [], []
    for row, key, name, _, _, changes in records.memory:
        if not changes:
            continue
        n = len(changes)
        times, sizes = zip(*changes, strict=True)
        time_us.extend(times)
        delta.extend(sizes)
        device.extend([device_of[lanes[row]]] * n)
        allocator.extend([name] * n)
        op.extend([names[row]] * n)
        step.extend([key] * n)
    if not time_us:
        return empty_memory()
    frame = memory_frame(device, allocator, time_us, delta, op, step)
    frame["time_us"] -= origin
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
    n = len(names)
    device_of = _device_of_lane(records)
    op_names, lanes = records.op, records.lane
    totals: dict[tuple[str, str], list] = {}
    for row, _, allocator, peak, total, _ in records.memory:
        key = (op_names[row], device_of[lanes[row]])
        found = totals.get(key)
        if found is None:
            totals[key] = [total, peak, {allocator: total}]
        else:
            found[0] += total
            found[1] = max(found[1], peak)
            found[2][allocator] = found[2].get(allocator, 0) + total
    allocated = np.zeros(n, np.int64)
    peaks = np.zeros(n, np.int64)
    allocator_names: list[Any] = [None] * n
    get = totals.get
    for i, key in enumerate(zip(names, devices, strict=True)):
        found = get(key)
        if found is not None:
            allocated[i], peaks[i] = found[0], found[1]
            by_bytes = found[2]
            allocator_names[i] = (
                next(iter(by_bytes))
                if len(by_bytes) == 1
                else ", ".join(sorted(by_bytes, key=lambda a: (-by_bytes[a], a)))
            )
    missing = ~np.asarray(ran, dtype=bool)
    return {
        "allocated_bytes": pd.arrays.IntegerArray(np.where(missing, 0, allocated), missing),
        "peak_bytes": pd.arrays.IntegerArray(np.where(missing, 0, peaks), missing.copy()),
        "allocator": pd.array(allocator_names, dtype="string"),
    }


def _device_of_lane(records: Records) -> dict[str, str]:
    """The canonical device of each lane that has allocator records."""
    lanes = records.lane
    return {
        lane: canonical_device(lane_owner(lane)) for lane in {lanes[m[0]] for m in records.memory}
    }
