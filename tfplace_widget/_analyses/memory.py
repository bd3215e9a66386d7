"""Each device's memory peak in a traced step, and who holds the bytes at it.

Pure pandas/numpy, read from ``trace.memory`` (TensorFlow's allocator records, see
``_sources.memory``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

PEAK_COLUMNS = ["device", "allocator", "peak_bytes", "peak_time_us", "ops", "ops_bytes"]


def memory_peaks(trace: Any) -> pd.DataFrame:
    """One row per device and allocator of ``trace.memory``: the most bytes the traced step's
    ops held at once there, and when.

    ``peak_bytes`` is the largest ``live_bytes`` (the first time it is reached:
    ``peak_time_us``, on ``ops.start_us``'s axis); ``ops`` the ops whose allocations are live
    at that moment, most bytes first, and ``ops_bytes`` what each holds (they sum to
    ``peak_bytes``). Each deallocation record is in the tracking allocator of the op that made
    the allocation, so an op's own running sum is what it holds; as every op's is at least 0,
    where a device's live bytes are 0 every op's are, and the sum starts there. Memory held from
    before the step (variables, feeds) is in no record, hence not in the peak. Sorted by
    device, then peak (largest first); no row when the trace has no allocator records.
    """
    memory = trace.memory
    rows: list[dict[str, Any]] = []
    if not len(memory):
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in PEAK_COLUMNS})
    for (device, allocator), group in memory.groupby(["device", "allocator"], sort=True):
        live = group["live_bytes"].to_numpy()
        delta = group["bytes"].to_numpy()
        at = int(np.argmax(live))
        empty_before = np.flatnonzero(live[: at + 1] - delta[: at + 1] == 0)
        start = int(empty_before[-1]) if len(empty_before) else 0
        held = (
            pd.Series(delta[start : at + 1])
            .groupby(group["op"].to_numpy()[start : at + 1], sort=False)
            .sum()
        )
        held = held[held > 0].sort_values(ascending=False, kind="stable")
        rows.append(
            {
                "device": device,
                "allocator": allocator,
                "peak_bytes": int(live[at]),
                "peak_time_us": int(group["time_us"].iloc[at]),
                "ops": [str(op) for op in held.index],
                "ops_bytes": [int(b) for b in held.to_numpy()],
            }
        )
    peaks = pd.DataFrame(rows, columns=PEAK_COLUMNS)
    peaks["peak_bytes"] = peaks["peak_bytes"].astype(np.int64)
    peaks["peak_time_us"] = peaks["peak_time_us"].astype(np.int64)
    return peaks
