"""``trace.memory``: each change of a device's live bytes that TensorFlow's allocators recorded.

Pure data code. :func:`empty_memory` is the frame of a trace without allocator records (TF2
profiles, Chrome traces, predictions, files saved before it); :func:`memory_frame` makes it
from the records of one or more traced steps.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .columns import MEMORY_COLUMNS


def empty_memory() -> pd.DataFrame:
    """``trace.memory`` with no row, its columns typed (a copy of one made once)."""
    return _empty_memory().copy()


@functools.cache
def _empty_memory() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "device": pd.Series([], dtype=object),
            "allocator": pd.Series([], dtype=object),
            "time_us": pd.Series([], dtype=np.int64),
            "bytes": pd.Series([], dtype=np.int64),
            "live_bytes": pd.Series([], dtype=np.int64),
            "op": pd.Series([], dtype=object),
        }
    )[MEMORY_COLUMNS]


def memory_frame(
    device: Sequence[str],
    allocator: Sequence[str],
    time_us: Sequence[int],
    delta: Sequence[int],
    op: Sequence[str],
    step: Sequence[int],
) -> pd.DataFrame:
    """``trace.memory`` from one row per allocation record (``delta`` > 0) or deallocation
    record (< 0), in the order TensorFlow recorded them (each op's own records in its order).

    Rows are sorted by step, then time (stably: an op's records at the same microsecond keep
    their order); ``live_bytes`` is the running sum of ``bytes`` per step, device and
    allocator: a traced step's records hold only what its own ops allocated (memory held
    from before the step, such as variables, is not in them), so each step starts at 0.
    """
    if not len(time_us):
        return empty_memory()
    frame = pd.DataFrame(
        {
            "device": np.asarray(device, dtype=object),
            "allocator": np.asarray(allocator, dtype=object),
            "time_us": np.asarray(time_us, dtype=np.int64),
            "bytes": np.asarray(delta, dtype=np.int64),
            "op": np.asarray(op, dtype=object),
            "_step": np.asarray(step, dtype=np.int64),
        }
    )
    frame = frame.sort_values(["_step", "time_us"], kind="stable")
    frame["live_bytes"] = frame.groupby(["_step", "device", "allocator"], sort=False)[
        "bytes"
    ].cumsum()
    return frame[MEMORY_COLUMNS].reset_index(drop=True)
