"""``trace.memory``: each change of a device's live bytes that TensorFlow's allocators recorded.

Pure data code. :func:`empty_memory` is the frame of a trace without allocator records (Chrome
traces, TF2 profiles where no allocator reported, predictions, files saved before it);
:func:`memory_frame` makes it from the records of one or more traced steps, :func:`add_step_rows`
adds records to a TF2 trace's. :func:`step_rows`
keeps the step's own (``kind`` "temporary"), :func:`persistent_bytes` sums the rest per device
and allocator.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from .columns import MEMORY_COLUMNS, MEMORY_KINDS

TEMPORARY, PERSISTENT = MEMORY_KINDS
# TensorFlow's pinned (page-locked) host allocator beside its GPUs: ``gpu_host_bfc`` in TF2
# (``GPUProcessState::GetGpuHostAllocator``; the recorded TF2 GPU profile's name), and
# ``cuda_host_bfc`` in the step_stats of TF 1.x.
PINNED_HOST = "gpu_host_bfc"
PINNED_HOST_ALLOCATORS = frozenset({PINNED_HOST, "cuda_host_bfc"})
# A graph's ops that are the variable they hold: ``variable`` names it by the op's own name
VARIABLE_OPS = frozenset({"VarHandleOp", "VariableV2", "Variable"})


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
            "kind": pd.Series([], dtype=object),
            "variable": pd.Series([], dtype=object),
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
    kind: Sequence[str] | None = None,
    variable: Sequence[str | None] | None = None,
) -> pd.DataFrame:
    """``trace.memory`` from one row per allocation record (``delta`` > 0) or deallocation
    record (< 0), in the order TensorFlow recorded them (each op's own records in its order).

    ``series`` numbers each row's (``step``, device, allocator). Rows
    are sorted by step, then time (stably: an op's records at the same microsecond keep their
    order); ``live_bytes`` is the running sum of ``bytes`` per series: a traced step's records
    hold only what its own ops allocated (memory held from before the step, such as
    variables, is not in them), so each step starts at 0. ``kind`` per row: ``"temporary"``
    (the default: the step's own allocations) or ``"persistent"`` (held from before the step
    to after it, a series of its own: give those rows step -1, and they come first).
    ``variable`` per row: the name of the variable a persistent row holds, None elsewhere (the
    default: every row).
    """
    if not len(time_us):
        return empty_memory()
    kinds = (
        np.full(len(time_us), TEMPORARY, dtype=object)
        if kind is None
        else np.asarray(kind, dtype=object)
    )
    time = np.asarray(time_us, dtype=np.int64)
    change = np.asarray(delta, dtype=np.int64)
    numbers = np.asarray(series, dtype=np.int64)
    order = steps_order(np.asarray(step), time)
    device, allocator, op, kinds = (
        np.asarray(c, dtype=object)[order] for c in (device, allocator, op, kinds)
    )
    names = (
        np.full(len(time), None, dtype=object)
        if variable is None
        else np.asarray(variable, dtype=object)[order]
    )
    return ordered_memory_frame(
        device, allocator, time[order], change[order], op, numbers[order], kinds, names
    )


def steps_order(step: np.ndarray, time: np.ndarray) -> np.ndarray:
    """The rows' order in ``trace.memory``: by step, then time, stably (an op's records at the
    same microsecond keep their order)."""
    if len(step) and step.min() == step.max():  # one step: by time alone
        return np.argsort(time, kind="stable")
    return np.lexsort((time, step))


def ordered_memory_frame(
    device: np.ndarray,
    allocator: np.ndarray,
    time_us: np.ndarray,
    delta: np.ndarray,
    op: np.ndarray,
    series: np.ndarray,
    kind: np.ndarray,
    variable: np.ndarray,
) -> pd.DataFrame:
    """:func:`memory_frame` of rows already in its order (:func:`steps_order`): object arrays
    of names, int64 arrays of numbers."""
    return pd.DataFrame(
        {
            "device": device,
            "allocator": allocator,
            "time_us": time_us,
            "bytes": delta,
            "live_bytes": _running_sums(delta, series),
            "op": op,
            "kind": kind,
            # object, None where missing (never inferred as str: the same dtype in every frame)
            "variable": pd.Series(variable, dtype=object, copy=False),
        }
    )


def add_step_rows(
    memory: pd.DataFrame,
    device: Sequence[str],
    allocator: Sequence[str],
    time_us: Sequence[int],
    delta: Sequence[int],
    op: Sequence[str],
) -> pd.DataFrame:
    """``memory`` (a TF2 trace's ``trace.memory``: its steps' records share one series per
    device and allocator) with more of the step's own records (``kind`` "temporary"), in time
    order, ``live_bytes`` summed anew."""
    if not len(time_us):
        return memory
    kinds = np.concatenate(
        [memory["kind"].to_numpy(dtype=object), np.full(len(time_us), TEMPORARY, dtype=object)]
    )
    devices = np.concatenate([memory["device"].to_numpy(dtype=object), np.asarray(device, object)])
    allocators = np.concatenate(
        [memory["allocator"].to_numpy(dtype=object), np.asarray(allocator, dtype=object)]
    )
    series, _ = pd.factorize(pd.Series(list(zip(kinds, devices, allocators, strict=True))))
    return memory_frame(
        devices,
        allocators,
        np.concatenate([memory["time_us"].to_numpy(np.int64), np.asarray(time_us, np.int64)]),
        np.concatenate([memory["bytes"].to_numpy(np.int64), np.asarray(delta, np.int64)]),
        np.concatenate([memory["op"].to_numpy(dtype=object), np.asarray(op, dtype=object)]),
        np.where(kinds == PERSISTENT, -1, 0),
        series.astype(np.int64),
        kinds,
        np.concatenate(
            [memory["variable"].to_numpy(dtype=object), np.full(len(time_us), None, dtype=object)]
        ),
    )


def _running_sums(values: np.ndarray, series: np.ndarray) -> np.ndarray:
    """The running sum of ``values`` within each ``series`` (group numbers), in row order."""
    by_series = stable_order(series)
    grouped = values[by_series]
    sums = np.cumsum(grouped)
    ordered = series[by_series]
    first = np.r_[True, ordered[1:] != ordered[:-1]]
    starts = np.maximum.accumulate(np.where(first, np.arange(len(sums)), 0))
    sums -= (sums - grouped)[starts]  # what the series before this one summed to
    running = np.empty_like(sums)
    running[by_series] = sums
    return running


def stable_order(codes: np.ndarray) -> np.ndarray:
    """``np.argsort(codes, kind="stable")`` of integer codes; codes from 0 to 65,535 (nearly
    always: a few devices and allocators) sorted as ``uint16``, by numpy's radix sort (about
    3x faster than its merge sort of ``int64``, the same order)."""
    if len(codes) and codes.min() >= 0 and codes.max() <= np.iinfo(np.uint16).max:
        return np.argsort(codes.astype(np.uint16), kind="stable")
    return np.argsort(codes, kind="stable")


class NameCodes(NamedTuple):
    """A ``trace.memory`` frame's rows as its maker numbered them: ``step`` which are the
    step's own (:func:`step_rows`), ``device`` and ``allocator`` the step rows' names as codes
    into ``devices`` and ``allocators`` (-1 on the persistent rows); ``op_row`` each row's op
    as a row of the ``trace.ops`` made with the frame (-1 where not known; a reader checks a
    row's op and device before it trusts it: ``trace.ops`` may have been replaced since)."""

    step: np.ndarray
    device: np.ndarray
    devices: list[str]
    allocator: np.ndarray
    allocators: list[str]
    op_row: np.ndarray | None = None


_NAME_CODES: dict[int, tuple[weakref.ref, NameCodes]] = {}


def keep_name_codes(memory: pd.DataFrame, codes: NameCodes) -> None:
    """Keep ``codes`` for ``memory`` while the frame lives (:func:`name_codes` reads them):
    the frame's maker knows its names as integers, a reader would hash every row's again."""
    key = id(memory)
    _NAME_CODES[key] = (weakref.ref(memory, lambda _, key=key: _NAME_CODES.pop(key, None)), codes)


def name_codes(memory: pd.DataFrame) -> NameCodes | None:
    """The codes kept for ``memory`` by :func:`keep_name_codes`, None when none are (a frame
    made otherwise: loaded, filtered, copied) or when its names no longer read as kept."""
    kept = _NAME_CODES.get(id(memory))
    if kept is None or kept[0]() is not memory:
        return None
    codes = kept[1]
    if len(codes.step) != len(memory):
        return None
    for row in np.flatnonzero(codes.step)[[0, -1]] if codes.step.any() else ():
        if (
            memory["device"].iat[row] != codes.devices[codes.device[row]]
            or memory["allocator"].iat[row] != codes.allocators[codes.allocator[row]]
        ):
            return None
    return codes


def step_rows(memory: pd.DataFrame) -> np.ndarray:
    """Which rows of ``memory`` (``trace.memory``) are the step's own allocations (``kind``
    "temporary"; every row of a frame without the column, as saved before it)."""
    if "kind" not in memory.columns:
        return np.ones(len(memory), dtype=bool)
    return memory["kind"].to_numpy(dtype=object) != PERSISTENT


def persistent_bytes(
    memory: pd.DataFrame, step: np.ndarray | None = None
) -> dict[tuple[str, str], list[tuple[str, int]]]:
    """The persistent rows of ``memory`` per (device, allocator): each holder op and its
    bytes, most bytes first (ties by name). ``step``: :func:`step_rows` of ``memory`` when
    known (not found again)."""
    if "kind" not in memory.columns or not len(memory):
        return {}
    at = np.flatnonzero(~(step_rows(memory) if step is None else step))
    columns = [memory[c].array[at].tolist() for c in ("device", "allocator", "op", "bytes")]
    held: dict[tuple[str, str], dict[str, int]] = {}
    for device, allocator, op, size in zip(*columns, strict=True):
        mine = held.setdefault((str(device), str(allocator)), {})
        mine[str(op)] = mine.get(str(op), 0) + int(size)
    return {
        key: sorted(((op, b) for op, b in ops.items() if b > 0), key=lambda p: (-p[1], p[0]))
        for key, ops in held.items()
    }


def persistent_variables(
    memory: pd.DataFrame, step: np.ndarray | None = None
) -> dict[tuple[str, str], str]:
    """(device, holder op) -> the name of the variable its persistent row holds (``variable``),
    for the rows that name one; ``step`` as in :func:`persistent_bytes`."""
    if "variable" not in memory.columns or not len(memory):
        return {}
    at = np.flatnonzero(~(step_rows(memory) if step is None else step))
    columns = [memory[c].array[at].tolist() for c in ("device", "op", "variable")]
    return {
        (str(device), str(op)): str(name)
        for device, op, name in zip(*columns, strict=True)
        if isinstance(name, str) and name
    }
