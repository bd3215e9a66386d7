"""``trace.memory``: each change of a device's live bytes that TensorFlow's allocators recorded.

Pure data code. :func:`empty_memory` is the frame of a trace without allocator records (Chrome
traces, TF2 profiles where no allocator reported, predictions, files saved before it);
:func:`memory_frame` makes it from the records of one or more traced steps.
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
    series: Sequence[int],
) -> pd.DataFrame:
    """``trace.memory`` from one row per allocation record (``delta`` > 0) or deallocation
    record (< 0), in the order TensorFlow recorded them (each op's own records in its order).

    ``series`` numbers each row's (``step``, device, allocator). Rows
    are sorted by step, then time (stably: an op's records at the same microsecond keep their
    order); ``live_bytes`` is the running sum of ``bytes`` per series: a traced step's records
    hold only what its own ops allocated (memory held from before the step, such as
    variables, is not in them), so each step starts at 0.
    """
    if not len(time_us):
        return empty_memory()
    time = np.asarray(time_us, dtype=np.int64)
    change = np.asarray(delta, dtype=np.int64)
    numbers = np.asarray(series, dtype=np.int64)
    order = np.lexsort((time, np.asarray(step)))  # stable: ties keep the recorded order
    device, allocator, op = (np.asarray(c, dtype=object)[order] for c in (device, allocator, op))
    time, change, numbers = time[order], change[order], numbers[order]
    return pd.DataFrame(
        {
            "device": device,
            "allocator": allocator,
            "time_us": time,
            "bytes": change,
            "live_bytes": _running_sums(change, numbers),
            "op": op,
        }
    )


def _running_sums(values: np.ndarray, series: np.ndarray) -> np.ndarray:
    """The running sum of ``values`` within each ``series`` (group numbers), in row order."""
    by_series = np.argsort(series, kind="stable")
    grouped = values[by_series]
    sums = np.cumsum(grouped)
    ordered = series[by_series]
    first = np.r_[True, ordered[1:] != ordered[:-1]]
    starts = np.maximum.accumulate(np.where(first, np.arange(len(sums)), 0))
    sums -= (sums - grouped)[starts]  # what the series before this one summed to
    running = np.empty_like(sums)
    running[by_series] = sums
    return running
