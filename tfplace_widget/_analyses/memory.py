"""Each device's memory peak in a traced step, and who holds the bytes at it.

Pure numpy (pandas only to factorize and to return the frame), read from ``trace.memory`` (TensorFlow's allocator records, see
``_sources.memory``).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .._model.memory import (
    name_codes,
    persistent_bytes,
    persistent_variables,
    stable_order,
    step_rows,
)

PEAK_COLUMNS = [
    "device",
    "allocator",
    "peak_bytes",
    "peak_time_us",
    "ops",
    "ops_bytes",
    "persistent_bytes",
    "persistent_ops",
    "persistent_ops_bytes",
    "persistent_variables",
]


def memory_peaks(trace: Any) -> pd.DataFrame:
    """One row per device and allocator of ``trace.memory``: the most bytes the traced step's
    ops held at once there, and when.

    ``peak_bytes`` is the largest ``live_bytes`` (the first time it is reached:
    ``peak_time_us``, on ``ops.start_us``'s axis); ``ops`` the ops whose allocations are live
    at that moment, most bytes first, and ``ops_bytes`` what each holds (they sum to
    ``peak_bytes``). Each deallocation record is in the tracking allocator of the op that made
    the allocation, so an op's own running sum is what it holds; as every op's is at least 0,
    where a device's live bytes are 0 every op's are, and the sum starts there. Memory held from
    before the step (variables, constants) is in no record, hence not in the peak: it is
    ``persistent_bytes`` (``trace.memory``'s persistent rows: held through the whole step,
    beside the peak), with its holders ``persistent_ops`` and their ``persistent_ops_bytes``,
    most bytes first, and ``persistent_variables`` the name of the variable each holds
    (``trace.memory``'s ``variable``; None for a constant); the device needs ``peak_bytes + persistent_bytes`` at the peak. A device
    and allocator with persistent rows only (TF2 code with oneDNN off: its CPU allocator reports nothing) has
    ``peak_bytes`` 0, ``peak_time_us`` 0 and no ``ops``. Sorted by
    device, then allocator; no row when the trace has no allocator records. Found once per
    ``trace.memory`` frame and kept on the trace (the panel, its list, the findings and the
    text report all read it): treat the frame returned as read-only.
    """
    return _kept_peaks(trace)[0]


def peak_holder_rows(trace: Any) -> list[np.ndarray]:
    """Per row of :func:`memory_peaks` (in its order), a ``trace.memory`` row of each of its
    ``ops`` (aligned with ``ops``: one of its records up to the peak): where a reader finds
    what the conversion knew of the op (``NameCodes.op_row``)."""
    return _kept_peaks(trace)[1]


def _kept_peaks(trace: Any) -> tuple[pd.DataFrame, list[np.ndarray]]:
    """:func:`memory_peaks` and :func:`peak_holder_rows`, found once per ``trace.memory``."""
    memory = trace.memory
    cache = getattr(trace, "__dict__", None)
    cached = cache.get("_memory_peaks_cache") if cache is not None else None
    # (a pair: kept in a trace pickled by a version without the holders' rows, found again)
    if cached is not None and len(cached) == 3 and cached[0] is memory:
        return cached[1], cached[2]
    peaks, holders = _peaks_and_holders(memory)
    if cache is not None:
        cache["_memory_peaks_cache"] = (memory, peaks, holders)
    return peaks, holders


@dataclass(frozen=True)
class MemorySeries:
    """``trace.memory``'s records per device and allocator: ``rows`` the row positions of
    each (in the frame's order), ``devices`` and ``allocators`` their names, sorted by device
    then allocator (records naming no device or allocator are in none); ``step`` which rows
    are the step's own (``step_rows``: the others are persistent, in no series)."""

    devices: list[str]
    allocators: list[str]
    rows: list[np.ndarray]
    step: np.ndarray


_SERIES: dict[int, tuple[weakref.ref, MemorySeries]] = {}


def memory_series(memory: pd.DataFrame) -> MemorySeries:
    """The records of ``memory`` (``trace.memory``) per device and allocator, found once per
    frame while it lives (the peaks and the timeline's memory lane both read them): treat the
    frame as read-only once asked."""
    key = id(memory)
    kept = _SERIES.get(key)
    if kept is not None and kept[0]() is memory:
        return kept[1]
    # The records come in runs of one (device, allocator): each column's own runs' names
    # hashed once (a device's runs are many, an allocator's few), the runs of the pair (not
    # the rows) sorted by (device, allocator), then each run's rows in order.
    codes = name_codes(memory)
    if codes is not None:  # numbered by the conversion: integers compared, no name hashed
        step = codes.step
        device, devices = _sorted_codes(codes.device, codes.devices)
        allocator, allocators = _sorted_codes(codes.allocator, codes.allocators)
        device_change, allocator_change = device[1:] != device[:-1], allocator[1:] != allocator[:-1]
    else:
        device = memory["device"].to_numpy(dtype=object)
        allocator = memory["allocator"].to_numpy(dtype=object)
        step = step_rows(memory)
        if not step.all():  # the persistent rows are in no series: named by no device
            device = np.where(step, device, None)
        device_change, allocator_change = _changes(device), _changes(allocator)
    n = len(device)
    starts = np.flatnonzero(np.concatenate([[n > 0], device_change | allocator_change]))
    if codes is not None:
        device_codes, allocator_codes = device[starts], allocator[starts]
    else:
        device_codes, devices = _run_codes(device, device_change, starts)
        allocator_codes, allocators = _run_codes(allocator, allocator_change, starts)
    pair = device_codes * len(allocators) + allocator_codes
    order = stable_order(pair)  # each (device, allocator)'s runs, in their order
    lengths = np.diff(np.append(starts, n))[order]
    ends = np.cumsum(lengths)
    rows = np.repeat(starts[order] - (ends - lengths), lengths) + np.arange(n)
    firsts = np.flatnonzero(np.diff(pair[order], prepend=-2 - len(allocators)))
    groups, heads = [], []
    for first, last in zip(firsts, np.append(firsts[1:], len(order))[: len(firsts)], strict=True):
        run = order[first]
        if device_codes[run] >= 0 and allocator_codes[run] >= 0:
            groups.append(rows[ends[first] - lengths[first] : ends[last - 1]])
            heads.append(run)
    series = MemorySeries(
        devices=[devices[device_codes[run]] for run in heads],
        allocators=[allocators[allocator_codes[run]] for run in heads],
        rows=groups,
        step=step,
    )
    _SERIES[key] = (weakref.ref(memory, lambda _, key=key: _SERIES.pop(key, None)), series)
    return series


def _sorted_codes(codes: np.ndarray, names: list[str]) -> tuple[np.ndarray, list[str]]:
    """``codes`` into ``names`` renumbered into the names sorted (as ``pd.factorize(...,
    sort=True)`` numbers them), -1 kept."""
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.empty(len(names) + 1, dtype=np.int64)
    rank[order] = np.arange(len(names))
    rank[-1] = -1  # code -1 reads the last
    return rank[codes], [names[i] for i in order]


def _run_codes(
    values: np.ndarray, change: np.ndarray, starts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The codes of ``values`` at rows ``starts`` (``pd.factorize(values[starts], sort=True)``
    of runs that start at each ``change`` of ``values`` and at each of ``starts``), with the
    names they number: only the first value of each of ``values``' own runs is hashed."""
    own = np.flatnonzero(np.concatenate([[len(values) > 0], change]))
    codes, names = pd.factorize(values[own], sort=True)
    run = np.searchsorted(own, starts, side="right") - 1  # the run of ``values`` each is in
    return codes[run].astype(np.int64), names


def _changes(values: np.ndarray) -> np.ndarray:
    """Where each value of ``values`` (after the first) differs from the one before: a run
    starts (every value where one cannot be compared, ``pd.NA``)."""
    try:
        changes = values[1:] != values[:-1]
    except TypeError:
        changes = None
    if not isinstance(changes, np.ndarray) or changes.dtype != np.bool_:
        return np.ones(max(0, len(values) - 1), dtype=bool)
    return changes


def _memory_peaks(memory: pd.DataFrame) -> pd.DataFrame:
    """:func:`memory_peaks` of one ``trace.memory`` frame, by codes: no group of rows made."""
    return _peaks_and_holders(memory)[0]


def _peaks_and_holders(memory: pd.DataFrame) -> tuple[pd.DataFrame, list[np.ndarray]]:
    """:func:`_memory_peaks` and, per its row, :func:`peak_holder_rows`."""
    if not len(memory):
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in PEAK_COLUMNS}), []
    ops_all = memory["op"].to_numpy(dtype=object)
    live_all = memory["live_bytes"].to_numpy(dtype=np.int64)
    delta_all = memory["bytes"].to_numpy(dtype=np.int64)
    time_all = memory["time_us"].to_numpy(dtype=np.int64)
    series = memory_series(memory)
    rows: list[dict[str, Any]] = []
    for device, allocator, group in zip(
        series.devices, series.allocators, series.rows, strict=True
    ):
        live, delta = live_all[group], delta_all[group]
        at = int(np.argmax(live))
        empty_before = np.flatnonzero(live[: at + 1] == delta[: at + 1])
        start = int(empty_before[-1]) if len(empty_before) else 0
        # The ops of the records up to the peak, numbered in order of appearance.
        codes, names = pd.factorize(ops_all[group[start : at + 1]])
        named = codes >= 0
        sums = np.zeros(len(names), dtype=np.int64)
        np.add.at(sums, codes[named], delta[start : at + 1][named])
        held = np.flatnonzero(sums > 0)
        held = held[np.lexsort((held, -sums[held]))]  # most bytes first, ties as they came
        first = np.zeros(len(names), dtype=np.int64)  # a record of each op in the window
        first[codes[named]] = np.flatnonzero(named)
        rows.append(
            {
                "device": device,
                "allocator": allocator,
                "peak_bytes": int(live[at]),
                "peak_time_us": int(time_all[group[at]]),
                "ops": [str(op) for op in names[held]],
                "ops_bytes": [int(b) for b in sums[held]],
                _HOLDER_ROWS: group[start + first[held]],
            }
        )
    held = persistent_bytes(memory, series.step)
    names = persistent_variables(memory, series.step)
    for row in rows:
        mine = held.pop((row["device"], row["allocator"]), [])
        row.update(_persistent_fields(mine, names, row["device"]))
    for (device, allocator), mine in held.items():
        rows.append(
            {
                "device": device,
                "allocator": allocator,
                "peak_bytes": 0,
                "peak_time_us": 0,
                "ops": [],
                "ops_bytes": [],
                **_persistent_fields(mine, names, device),
                _HOLDER_ROWS: np.zeros(0, dtype=np.int64),
            }
        )
    rows.sort(key=lambda r: (r["device"], r["allocator"]))
    holders = [row.pop(_HOLDER_ROWS) for row in rows]
    peaks = pd.DataFrame(rows, columns=PEAK_COLUMNS)
    peaks["peak_bytes"] = peaks["peak_bytes"].astype(np.int64)
    peaks["peak_time_us"] = peaks["peak_time_us"].astype(np.int64)
    peaks["persistent_bytes"] = peaks["persistent_bytes"].astype(np.int64)
    return peaks, holders


_HOLDER_ROWS = "_holder_rows"  # a row's peak_holder_rows while the rows are made


def _persistent_fields(
    held: list[tuple[str, int]], names: dict[tuple[str, str], str], device: str
) -> dict[str, Any]:
    return {
        "persistent_bytes": sum(b for _, b in held),
        "persistent_ops": [op for op, _ in held],
        "persistent_ops_bytes": [b for _, b in held],
        "persistent_variables": [names.get((device, op)) for op, _ in held],
    }
