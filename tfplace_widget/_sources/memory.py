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

from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from .._model.devices import canonical_device, lane_owner, parse_device
from .._model.memory import (
    PERSISTENT,
    TEMPORARY,
    VARIABLE_OPS,
    NameCodes,
    empty_memory,
    keep_name_codes,
    ordered_memory_frame,
    steps_order,
)
from .._model.records import Executed, Records


class RecordIndex(NamedTuple):
    """What the frames already know of each execution record of a :class:`Records`, as
    integers: ``lane`` its lane's code in ``lanes`` (the distinct lanes), ``op_row`` its row in
    the ops frame (-1 where not known: found by its name and device)."""

    lane: np.ndarray
    lanes: list[str]
    op_row: np.ndarray


def memory_of_records(
    records: Records,
    origin: int,
    names: list[str],
    devices: list[str],
    ran: np.ndarray,
    executed: Executed | None = None,
    index: RecordIndex | None = None,
) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """``trace.memory`` of ``records`` (times on the trace's axis: µs since ``origin``), and
    the memory columns of the ops ``names`` on ``devices`` (``ran``: the op has a record of
    its own), None when the trace has no allocator records at all (every op is <NA>).
    ``index``: the records' lanes and op rows as the frames found them (else found here).

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
    items = _items(records, index) if memory.row else None
    if items is not None:
        items["op_row"] = _known_rows(items, names, devices)
    held = _persistent(records, executed, items, index)
    if items is None and held is None:
        return empty_memory(), None
    frame = _frame(records, origin, items, held)
    if items is None:
        return frame, None
    return frame, _memory_columns(items, names, devices, ran, memory.every_allocation)


_KINDS = np.array([TEMPORARY, PERSISTENT], dtype=object)


def _frame(
    records: Records,
    origin: int,
    items: dict[str, np.ndarray] | None,
    held: tuple[np.ndarray, ...] | None,
) -> pd.DataFrame:
    """``trace.memory`` of the items' records and the persistent rows ``held``: the rows
    ordered by (step, time) as ``memory_frame`` orders them, each name column taken once from
    the items' (and holders') names in that order."""
    memory = records.memory
    n_items = len(items["op"]) if items is not None else 0
    counts = items["count"] if items is not None else np.zeros(0, np.int64)
    n_held = len(held[0]) if held is not None else 0
    # per item, then per holder (a row each): the columns named once per item
    first = int(items["series"].max()) + 1 if n_items else 0
    no_names = np.full(n_items, None, dtype=object)
    per_item = [
        (items["device"], items["allocator"], items["op"], items["series"], no_names)
        if items is not None
        else (),
        (held[0], held[1], held[4], first + held[5], held[7]) if held is not None else (),
    ]
    device, allocator, op, series, variable = (
        np.concatenate(column) if len(column) > 1 else column[0]
        for column in zip(*(part for part in per_item if part), strict=True)
    )
    # per row: the item (or holder) it is of, its time, bytes and step
    source = np.concatenate([np.repeat(np.arange(n_items), counts), n_items + np.arange(n_held)])
    time = _array(memory.time, np.int64) - origin
    change = _array(memory.bytes, np.int64)
    step = np.repeat(items["step"], counts) if items is not None else np.zeros(0, np.int64)
    if held is not None:
        time = np.concatenate([time, held[2]])
        change = np.concatenate([change, held[3]])
        step = np.concatenate([step, np.full(n_held, -1, dtype=step.dtype)])
    if not len(source):
        return empty_memory()
    order = steps_order(step, time)
    source = source[order]
    held_rows = source >= n_items
    frame = ordered_memory_frame(
        device[source],
        allocator[source],
        time[order],
        change[order],
        op[source],
        series[source],
        _KINDS[held_rows.astype(np.intp)],
        variable[source],
    )
    if items is not None:  # the step rows' names as the items numbered them, for the lane
        none = np.full(n_held, -1, dtype=np.int64)
        device_code = np.concatenate([items["device_code"], none])[source]
        allocator_code = np.concatenate([items["allocator_code"], none])[source]
        held_rows_of = held[8] if held is not None else none
        op_row = np.concatenate([items["op_row"], held_rows_of])[source]
        keep_name_codes(
            frame,
            NameCodes(
                ~held_rows,
                device_code,
                list(items["devices"]),
                allocator_code,
                list(items["allocators"]),
                op_row,
            ),
        )
    return frame


def record_index(records: Records) -> RecordIndex:
    """:class:`RecordIndex` of ``records`` with no op row known."""
    lane, lanes = pd.factorize(np.array(records.lane, dtype=object))
    return RecordIndex(lane, lanes.tolist(), np.full(len(records.op), -1, dtype=np.int64))


def _persistent(
    records: Records,
    executed: Executed | None,
    items: dict[str, np.ndarray] | None,
    index: RecordIndex | None = None,
) -> tuple[np.ndarray, ...] | None:
    """The persistent rows' columns (device, allocator, time, bytes, op, series, kind,
    variable, op row: the holder's row in the ops frame where ``index`` knows its record's,
    else -1), one
    row per holder and device, or None when there is none. A resource variable's allocator:
    a GPU's own BFC allocator, else the one its device's records use most, else ``cpu``. A
    variable several holders hand out (``Executed.variable_of``) is one row per device, its
    first holder's (the first function's ``_Arg`` in ``read_function_graphs``' order, the largest
    function first: fit's training step before its evaluation step)."""
    held: dict[tuple[str, str], tuple[int, str]] = {}
    record: dict[tuple[str, str], int] = {}  # the holder's execution record, where kept
    for (op, lane), (size, allocator, at) in records.persistent.items():  # a device's lanes:
        key = (op, canonical_device(lane_owner(lane)))  # the largest
        if key not in held or held[key][0] < size:
            held[key], record[key] = (size, allocator), at
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
        _holder_rows(keys, record, index),
    )


def _holder_rows(
    keys: list[tuple[str, str]], record: dict[tuple[str, str], int], index: RecordIndex | None
) -> np.ndarray:
    """Each holder's op row: its kept execution record's in ``index`` (-1 where none is)."""
    at = np.array([record.get(key, -1) for key in keys], dtype=np.int64)
    if index is None or not len(index.op_row):
        return np.full(len(keys), -1, dtype=np.int64)
    known = (at >= 0) & (at < len(index.op_row))
    return np.where(known, index.op_row[np.where(known, at, 0)], -1)


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
    row = items["op_row"]  # _known_rows': -1 where no op row is
    mine = row >= 0
    row, total_taken, peak_taken = row[mine], items["total"][mine], items["peak"][mine]
    allocated, peaks = np.zeros(n, np.int64), np.zeros(n, np.int64)
    np.add.at(allocated, row, total_taken)
    np.maximum.at(peaks, row, peak_taken)
    found = np.zeros(n, dtype=bool)
    found[row] = True
    allocator_names = _allocator_names(
        row,
        n,
        items["allocator"][mine],
        items["allocator_code"][mine],
        items["allocators"],
        total_taken,
    )
    missing = ~np.asarray(ran, dtype=bool)
    if not every_allocation:  # only the profiler's allocators: no item is not "none"
        missing |= ~found
    return {
        "allocated_bytes": pd.arrays.IntegerArray(np.where(missing, 0, allocated), missing),
        "peak_bytes": pd.arrays.IntegerArray(np.where(missing, 0, peaks), missing.copy()),
        "allocator": pd.array(allocator_names, dtype="string"),
    }


def _known_rows(items: dict[str, np.ndarray], names: list[str], devices: list[str]) -> np.ndarray:
    """Each item's op row: the frames', else found by (op, device) among the ops ``names``
    on ``devices`` (-1 where none)."""
    row = items["op_row"]
    unknown = row < 0  # not found by the frames: by (op, device)
    if unknown.any():
        row = row.copy()
        row[unknown] = _rows_by_name(names, devices, items["op"][unknown], items["device"][unknown])
    return row


def _rows_by_name(
    names: list[str], devices: list[str], ops: np.ndarray, op_devices: np.ndarray
) -> np.ndarray:
    """The row of each of ``ops`` on ``op_devices`` among the ops ``names`` on ``devices``
    (the first where several), -1 where none."""
    n = len(names)
    op_codes, _ = pd.factorize(np.concatenate([np.asarray(names, dtype=object), ops]))
    device_codes, known = pd.factorize(
        np.concatenate([np.asarray(devices, dtype=object), op_devices])
    )
    keys = op_codes.astype(np.int64) * max(1, len(known)) + device_codes
    rows = pd.Index(keys[:n])
    if rows.is_unique:
        return rows.get_indexer(keys[n:])
    first: dict[int, int] = {}
    for row, key in enumerate(keys[:n].tolist()):
        first.setdefault(key, row)
    return np.array([first.get(key, -1) for key in keys[n:].tolist()], dtype=np.int64)


def _allocator_names(
    group: np.ndarray,
    groups: int,
    names_taken: np.ndarray,
    codes: np.ndarray,
    allocators: Any,
    total: np.ndarray,
) -> np.ndarray:
    """Each group's allocator (None for a group with no item): ``names_taken`` per item
    (``codes`` into ``allocators``) in ``group``, with its ``total`` bytes; several (rare: a
    GPU op's host memory too) joined, by the bytes each took, largest first."""
    names = np.full(groups, None, dtype=object)
    if not len(group):
        return names
    names[group] = names_taken  # one per group, unless it has several
    if len(allocators) < 2:  # one allocator in the whole trace: no group has several
        return names
    pairs = _sorted_unique(group.astype(np.int64) * len(allocators) + codes) // len(allocators)
    several = _sorted_unique(pairs[np.r_[pairs[1:] == pairs[:-1], False]])
    for g in several.tolist():
        mine = group == g
        taken: dict[str, int] = {}
        for name, size in zip(names_taken[mine], total[mine].tolist(), strict=True):
            taken[name] = taken.get(name, 0) + size
        names[g] = ", ".join(sorted(taken, key=lambda a: (-taken[a], a)))
    return names


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique`` of integers, by a sort (numpy 2's hashing ``unique`` is ~20x slower)."""
    ordered = np.sort(values)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


def _items(records: Records, index: RecordIndex | None) -> dict[str, np.ndarray]:
    """``Records.memory``'s items as arrays, with each one's op, device and op row."""
    memory = records.memory
    if index is None:
        index = record_index(records)
    rows = _array(memory.row, np.int64)
    device_of = [canonical_device(lane_owner(lane)) for lane in index.lanes]
    device_of_lane, devices = pd.factorize(np.array(device_of, dtype=object))
    device_codes = device_of_lane[index.lane[rows]]
    step_codes, _ = pd.factorize(np.asarray(memory.step, dtype=np.int64), sort=True)
    allocator_names = _array(memory.allocator, object)
    allocator_codes, allocators = pd.factorize(allocator_names)
    # (step, device, allocator), numbered in the order of the steps: one live-bytes series each
    series = (step_codes * len(devices) + device_codes) * len(allocators) + allocator_codes
    named = allocator_codes >= 0  # always, from TensorFlow's records (a name, maybe "")
    return {
        "op": _array(records.op, object)[rows],
        "op_row": index.op_row[rows],
        "device": np.asarray(devices, dtype=object)[device_codes],
        "device_code": device_codes.astype(np.int64),
        "devices": devices,
        "step": step_codes,
        "series": series.astype(np.int64),
        "allocator": (  # one name object per allocator
            np.asarray(allocators, dtype=object)[allocator_codes]
            if named.all()
            else allocator_names
        ),
        "allocator_code": allocator_codes,
        "allocators": allocators,
        "peak": np.asarray(memory.peak, dtype=np.int64),
        "total": np.asarray(memory.total, dtype=np.int64),
        "count": np.asarray(memory.count, dtype=np.int64),
    }


def _array(values: list, dtype: Any) -> np.ndarray:
    """``np.asarray(values, dtype)`` of a list of ints or of names, by ``np.fromiter`` (no
    look into each value for a nested sequence: a third faster on 100k)."""
    return np.fromiter(values, dtype=dtype, count=len(values))
