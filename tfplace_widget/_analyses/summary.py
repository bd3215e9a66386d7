"""Numbers for the panel's header: per-device op counts and busy time, ``how`` counts, bytes moved.

Pure pandas/numpy, testable without a kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._model.devices import EventKeys, short_device, task_of


@dataclass(frozen=True)
class DeviceSummary:
    device: str
    ops: int
    busy_us: float


def busy_time_us(starts: np.ndarray, durations: np.ndarray) -> float:
    """Length of the union of intervals (overlapping work on several threads counts once)."""
    if len(starts) == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    begin = starts[order].astype(float)
    running_end = np.maximum.accumulate(begin + durations[order].astype(float))
    # A stretch of work starts where an interval begins after all before it ended; sorted by
    # start, it begins at its first interval and ends at the running end of its last one.
    first = np.flatnonzero(np.concatenate([[True], begin[1:] > running_end[:-1]]))
    last = np.concatenate([first[1:] - 1, [len(begin) - 1]])
    return float((running_end[last] - begin[first]).sum())


def device_summaries(
    ops: pd.DataFrame, events: pd.DataFrame, devices: list[str], keys: EventKeys | None = None
):
    """One :class:`DeviceSummary` per device, in ``devices`` order. ``keys``: ``events``'
    (:class:`EventKeys`), when the caller has them."""
    sums = _sums(ops, events, [[device] for device in devices], keys)
    return [DeviceSummary(d, count, busy) for d, (count, busy) in zip(devices, sums, strict=True)]


@dataclass(frozen=True)
class TaskSummary:
    """One task of a cluster (``/job:ps/task:0``): its devices, ops and busy time."""

    task: str
    devices: tuple[str, ...]
    ops: int
    busy_us: float


def task_summaries(
    ops: pd.DataFrame, events: pd.DataFrame, devices: list[str], keys: EventKeys | None = None
) -> list[TaskSummary]:
    """One :class:`TaskSummary` per task, in the order of ``devices`` (which lists a task's
    devices together); busy time is the union of its devices' work (one machine's wall time).
    ``keys``: as :func:`device_summaries`'."""
    members: dict[str, list[str]] = {}
    for device in devices:
        members.setdefault(task_of(device) or device, []).append(device)
    sums = _sums(ops, events, list(members.values()), keys)
    return [
        TaskSummary(task, tuple(mine), count, busy)
        for (task, mine), (count, busy) in zip(members.items(), sums, strict=True)
    ]


def _sums(
    ops: pd.DataFrame, events: pd.DataFrame, groups: list[list[str]], keys: EventKeys | None
) -> list[tuple[int, float]]:
    """Per group of devices: its ops, and the union of its op-level events' times."""
    counts = ops["device"].value_counts()
    keys = EventKeys.of(events) if keys is None else keys
    op_level = keys.lane_kinds() != "stream:all"
    starts, durations, rows_of = _by_device(events, (keys.device_codes, keys.devices), op_level)
    out = []
    for group in groups:
        rows = np.concatenate(
            [np.arange(*rows_of[d]) for d in group if d in rows_of] or [np.empty(0, np.intp)]
        )
        out.append(
            (
                int(sum(counts.get(d, 0) for d in group)),
                busy_time_us(starts[rows], durations[rows]),
            )
        )
    return out


def busy_per_device(events: pd.DataFrame) -> dict[str, float]:
    """Each device's busy time (:func:`busy_time_us`) over ``events``, by device."""
    starts, durations, rows_of = _by_device(events)
    return {d: busy_time_us(starts[a:b], durations[a:b]) for d, (a, b) in rows_of.items()}


def _by_device(
    events: pd.DataFrame,
    codes: tuple[np.ndarray, np.ndarray] | None = None,
    keep: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, dict[str, tuple[int, int]]]:
    """``events``' starts and durations grouped by device, and each device's ``(first, end)``
    rows in them, in one pass (thousands of devices: not a scan of all events each).
    ``codes``: the device column's ``(codes, distinct devices)`` when known; ``keep`` (a
    mask): only those events (no frame of them is made: a million rows of text columns)."""
    codes, uniques = (
        pd.factorize(events["device"].to_numpy(dtype=object)) if codes is None else codes
    )
    starts, durations = events["start_us"].to_numpy(), events["duration_us"].to_numpy()
    if keep is not None:
        codes, starts, durations = codes[keep], starts[keep], durations[keep]
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
    # a device none of the kept events is on has no rows, as when it was not in them
    rows_of = {d: (a, b) for d, a, b in zip(uniques, bounds[:-1], bounds[1:], strict=True) if b > a}
    return starts[order], durations[order], rows_of


def how_counts(ops: pd.DataFrame) -> dict[str, int]:
    """Ops per ``how`` value, every category present (zeros included)."""
    counts = ops["how"].value_counts()
    return {str(k): int(v) for k, v in counts.items()}


def transfer_totals(transfers: pd.DataFrame) -> tuple[int, int]:
    """(number of cross-device transfers, bytes moved where known)."""
    total = transfers["bytes"].sum(skipna=True) if len(transfers) else 0
    return len(transfers), int(total)


def transfer_bytes_text(transfers: pd.DataFrame) -> str:
    """The bytes the transfers moved, in words: ``"1.2 MB"``, ``"1.2 MB (2 of 3 sizes known)"``,
    or ``"sizes not recorded"`` (TF2 traces: the eager runtime records no tensor sizes)."""
    known = int(transfers["bytes"].notna().sum()) if len(transfers) else 0
    if len(transfers) and not known:
        return "sizes not recorded"
    _, moved = transfer_totals(transfers)
    text = format_bytes(moved)
    if known < len(transfers):
        text += f" ({known:,} of {len(transfers):,} sizes known)"
    return text


def format_us(us: float) -> str:
    """``850 µs``, ``12.3 ms``, ``1.25 s``."""
    if us != us:  # NaN
        return ""
    if us < 1000:
        return f"{us:.0f} µs"
    if us < 1_000_000:
        return f"{us / 1000:.1f} ms"
    return f"{us / 1_000_000:.2f} s"


def plural(noun: str, count: int) -> str:
    """``noun`` as a count of ``count`` reads it: ``op`` for one, ``ops`` for any other."""
    return noun if count == 1 else f"{noun}s"


def format_bytes(count: float) -> str:
    """``512 B``, ``3.8 MB``."""
    if count != count:
        return ""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{int(count)} B"


def short_names(devices: Sequence[str]) -> dict[str, str]:
    """``GPU:0`` for each device, unless two devices share a short name (several tasks)."""
    short = {d: short_device(d) or d for d in devices}
    if len(set(short.values())) < len(short):
        return {d: d for d in devices}
    return short
