"""Predicted memory: what each device of a prediction would hold over the step, and whether the
step fits on a GPU of a given size.

A prediction runs nothing, so its memory is that of the traced step, moved to the predicted
devices (:func:`predict_memory`):

- every allocation and deallocation TensorFlow recorded in the traced step (``trace.memory``,
  graph mode's allocator records) at its traced time, on the device its op is predicted on;
  where the trace has no records (TF2 profiles), each op's ``output_bytes`` live from the op's
  start until the last of its consumers on that device ends (kept to the step's end when
  nothing there reads it: a fetched output);
- one buffer per tensor copied onto another device (the predicted edges between devices, the
  producer's ``output_bytes``), live from the producer's end until the last consumer there ends:
  on a GPU in its ``GPU_<n>_bfc`` memory, on a CPU fed from a GPU in pinned host memory
  (``cuda_host_bfc``); two CPUs share the host's memory and copy nothing;
- each variable's value (persistent, made before the step and in none of its records: the size
  of what the step read from it) for the whole step, on its predicted device.

On a GPU each size is rounded up to 256 bytes, as TensorFlow's BFC allocator rounds. The
schedule is the traced run's (op order and times): a GPU's streams overlap differently. Not
modelled: XLA's buffer reuse (a cluster's buffers are XLA's), the BFC allocator's fragmentation,
cuDNN/cuBLAS workspaces beyond what the traced kernels allocated, the CUDA context.
:data:`MEMORY_NOTE` says so in the prediction's notes.

:func:`fits_on` reads the predicted peaks against a GPU's size.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..._model.devices import parse_device, short_device
from ..._model.memory import empty_memory, memory_frame

BFC_ROUNDING = 256  # bytes: a BFC allocator's chunks are multiples of this (kMinAllocationSize)
GIB = 2**30
HOST_PINNED = "cuda_host_bfc"  # TensorFlow's pinned host allocator beside a GPU
COPY_SUFFIX = " (copy to {device})"  # the op name a copy's buffer is listed under
# Op types whose output is a variable (its value lives on the device for the whole run).
VARIABLE_TYPES = frozenset({"VarHandleOp", "VariableV2", "Variable", "_VarHandlesOp"})
MEMORY_NOTE = (
    "Memory predicted per device (prediction.memory_peaks(), fits_on(gib=16)): the traced "
    "step's allocations moved to the predicted devices at their traced times, plus a buffer for "
    "each tensor copied onto another device and the variables' values (what the step read of "
    "them); on a GPU each size rounded up to 256 bytes as TensorFlow's BFC allocator does. "
    "Assumed: the traced run's op order, no XLA buffer reuse, no allocator fragmentation, no "
    "CUDA context or cuDNN workspace beyond what the traced kernels allocated."
)


def predict_memory(traced: Any, predicted: Any) -> pd.DataFrame:
    """``predicted.memory``: the memory of ``traced``'s step (see the module doc) on the devices
    of ``predicted`` (a prediction of ``traced``), as ``trace.memory`` rows (MEMORY_COLUMNS)
    on ``traced``'s clock; empty when the trace recorded neither allocations nor sizes."""
    ops = traced.ops
    if not len(ops) or "start_us" not in ops:
        return empty_memory()
    device_of = _predicted_devices(predicted)
    ran = ops[ops["start_us"].notna()].drop_duplicates("op")
    start = dict(zip(ran["op"], ran["start_us"].astype(float), strict=True))
    end = dict(
        zip(
            ran["op"],
            (ran["start_us"] + ran["duration_us"].fillna(0)).astype(float),
            strict=True,
        )
    )
    sizes = _sizes(ops)
    events = _timed_events(traced)
    rows = _Rows(_step_bounds(traced, events), events, device_of)
    memory = traced.memory
    if len(memory):
        for device, allocator, time, size, op in zip(
            memory["device"],
            memory["allocator"],
            memory["time_us"],
            memory["bytes"],
            memory["op"],
            strict=True,
        ):
            to = device_of.get(op) or device
            rows.add(to, _allocator(to, allocator), time, size, op)
    else:
        consumers = _consumers(predicted.inputs, start)
        for op, size in sizes.items():
            to = device_of.get(op)
            if op not in start or not to or size <= 0:
                continue
            rows.add(to, _allocator(to, "cpu"), start[op], size, op)
            here = [end[c] for c in consumers.get(op, ()) if device_of.get(c) == to]
            if here:
                rows.add(to, _allocator(to, "cpu"), max(here), -size, op)
    _add_copies(rows, predicted, device_of, start, end, sizes, ops)
    _add_variables(rows, predicted, device_of, start, ops, _host_allocator(memory))
    return rows.frame()


@dataclass(frozen=True)
class FitsOn:
    """Whether a prediction's step fits on a GPU of ``gib`` GiB (:func:`fits_on`)."""

    fits: bool
    need_bytes: int  # the most any predicted GPU holds at once in the step
    at_op: str  # the op whose allocation reached that peak
    device: str  # the GPU it is on ("" when no op is predicted on a GPU)
    gib: float

    def __str__(self) -> str:
        if not self.device:
            return "No op is predicted on a GPU: nothing to fit."
        verdict = "fits" if self.fits else "does not fit"
        return (
            f"On a {self.gib:g} GiB GPU this step {verdict}: {short_device(self.device)} would "
            f"need about {self.need_bytes / GIB:.2f} GiB at op {self.at_op}."
        )


def fits_on(predicted: Any, gib: float = 16) -> FitsOn:
    """Whether ``predicted``'s step fits on a GPU of ``gib`` GiB: the largest predicted GPU
    peak (``predicted.memory``), the op at it and its GPU. ``ValueError`` for a trace that is
    not a prediction or a size that is not a positive number."""
    if isinstance(gib, bool) or not isinstance(gib, int | float) or not gib > 0:
        raise ValueError(f"gib must be a GPU's memory in GiB (a positive number), not {gib!r}.")
    if not getattr(predicted, "predicted", False):
        raise ValueError(
            "fits_on reads a prediction's memory: call it on predict_placement(trace, gpus=1), "
            "not on a traced run (its own peaks are in trace.memory_peaks())."
        )
    peak = gpu_peak(predicted.memory)
    if peak is None:
        return FitsOn(True, 0, "", "", float(gib))
    need, op, device = peak
    return FitsOn(need <= gib * GIB, need, op, device, float(gib))


def gpu_peak(memory: pd.DataFrame) -> tuple[int, str, str] | None:
    """The largest live bytes any GPU's allocator reaches in ``memory``, the op whose row
    reached it first, and the GPU; None when no row is on a GPU."""
    on_gpu = memory[[_is_gpu(d) for d in memory["device"]]] if len(memory) else memory
    if not len(on_gpu):
        return None
    at = int(np.argmax(on_gpu["live_bytes"].to_numpy()))
    row = on_gpu.iloc[at]
    return int(row["live_bytes"]), str(row["op"]), str(row["device"])


_ROW_NAMES = ["device", "allocator", "time", "bytes", "op", "step", "owner"]


class _Rows:
    """The predicted memory rows, each in its traced step (``bounds``: where steps 1.. start).

    A GPU runs its kernels one at a time (TensorFlow's executor runs a GPU kernel inline, never
    on the inter-op pool, and a stream is in order), where the traced CPU run may have run some
    side by side: :meth:`frame` puts a GPU's rows in that sequence (:func:`_in_sequence`)."""

    def __init__(self, bounds: np.ndarray, events: pd.DataFrame, device_of: dict[str, str]):
        self.bounds = bounds
        self.events = events
        self.device_of = device_of
        self.columns: tuple[list, ...] = ([], [], [], [], [], [], [])

    def add(
        self, device: str, allocator: str, time: float, size: int, op: str, owner: str = ""
    ) -> None:
        """A row; ``owner``: the op whose run made it (its own op by default)."""
        if _is_gpu(device):
            size = int(np.sign(size)) * (-(-abs(int(size)) // BFC_ROUNDING) * BFC_ROUNDING)
        step = int(np.searchsorted(self.bounds, time, side="right"))
        values = (device, allocator, int(time), int(size), op, step, owner or op)
        for column, value in zip(self.columns, values, strict=True):
            column.append(value)

    def frame(self) -> pd.DataFrame:
        if not self.columns[0]:
            return empty_memory()
        rows = pd.DataFrame(dict(zip(_ROW_NAMES, self.columns, strict=True)))
        parts = [rows[~rows["device"].map(_is_gpu)]]
        for device, mine in rows[rows["device"].map(_is_gpu)].groupby("device", sort=False):
            parts.append(_in_sequence(mine, self.events, self.device_of, device))
        rows = pd.concat(parts, ignore_index=True)
        series = rows.groupby(["step", "device", "allocator"], sort=False).ngroup()
        return memory_frame(
            rows["device"],
            rows["allocator"],
            rows["time"],
            rows["bytes"],
            rows["op"],
            rows["step"],
            series.to_numpy(),
        )


def _in_sequence(
    rows: pd.DataFrame, events: pd.DataFrame, device_of: dict[str, str], device: str
) -> pd.DataFrame:
    """``rows`` of one GPU in the order its kernels would run one at a time (their traced
    starts'): a row made while its op ran goes with that run; a later one (a tensor freed when
    its last reader finished) with the run of this GPU under way then that ends first (the
    reader: TensorFlow frees an op's inputs as it finishes), else after the last one that
    ended. Each row's time becomes its run's traced start (so the times keep that order)."""
    runs = events[events["op"].map(device_of).eq(device)] if len(events) else events
    if not len(runs):
        return rows
    runs = runs.sort_values(["start_us", "op"], kind="stable")
    starts = runs["start_us"].to_numpy(dtype=float)
    ends = starts + runs["duration_us"].fillna(0).to_numpy(dtype=float)
    own: dict[str, list[int]] = {}
    for k, op in enumerate(runs["op"]):
        own.setdefault(op, []).append(k)
    times = rows["time"].to_numpy(dtype=float)
    owners = rows["owner"].tolist()
    rank = np.full(len(rows), -1, dtype=np.int64)
    phase = np.ones(len(rows), dtype=np.int64)
    active: list[tuple[float, int]] = []  # (end, run) of the runs under way, soonest end first
    pushed, ended = 0, -1
    for i in np.argsort(times, kind="stable"):
        time = times[i]
        while pushed < len(starts) and starts[pushed] <= time:
            heapq.heappush(active, (ends[pushed], pushed))
            pushed += 1
        while active and active[0][0] < time:
            ended = max(ended, heapq.heappop(active)[1])
        inside = [k for k in own.get(owners[i], ()) if starts[k] <= time <= ends[k]]
        if inside:
            rank[i], phase[i] = inside[0], 0
        elif active:
            rank[i] = active[0][1]
        else:
            rank[i] = ended
    rows = rows.assign(_rank=rank, _phase=phase)
    rows = rows.sort_values(["step", "_rank", "_phase", "time"], kind="stable")
    picked = rows["_rank"].to_numpy()
    rows["time"] = np.where(picked >= 0, starts[np.maximum(picked, 0)], rows["time"]).astype(
        np.int64
    )
    return rows.drop(columns=["_rank", "_phase"])


def _predicted_devices(predicted: Any) -> dict[str, str]:
    ops = predicted.ops
    return dict(zip(ops["op"].astype(str), ops["device"].astype(str), strict=True))


def _sizes(ops: pd.DataFrame) -> dict[str, int]:
    """Each op's output bytes in one run (the traced ``output_bytes`` over its runs)."""
    if "output_bytes" not in ops:
        return {}
    known = ops[ops["output_bytes"].notna()].drop_duplicates("op")
    runs = known["runs"].fillna(1).clip(lower=1).astype(int) if "runs" in known else 1
    per_run = (known["output_bytes"].astype(np.int64) // runs).astype(np.int64)
    return dict(zip(known["op"], per_run.tolist(), strict=True))


def _timed_events(traced: Any) -> pd.DataFrame:
    """The traced ops' runs, without the aggregate ``stream:all`` lanes."""
    events = traced.events
    if events is None or events.empty:
        return pd.DataFrame(columns=["op", "start_us", "duration_us"])
    return events[~events["lane"].astype(str).str.endswith("/stream:all")]


def _step_bounds(traced: Any, events: pd.DataFrame) -> np.ndarray:
    """Where the traced steps after the first begin (µs on the trace's clock): the earliest
    k-th run of the ops that ran once a step (``runs`` of most ops)."""
    runs = traced.ops["runs"].dropna() if "runs" in traced.ops else pd.Series(dtype=float)
    steps = int(runs.mode().iloc[0]) if len(runs) else 1
    if steps <= 1 or events.empty:
        return np.zeros(0)
    every = events[events.groupby("op")["start_us"].transform("size") == steps]
    nth = every.sort_values("start_us", kind="stable").groupby("op")["start_us"].cumcount()
    firsts = every["start_us"].groupby(nth.reindex(every.index)).min()
    return firsts.reindex(range(1, steps)).dropna().to_numpy(dtype=float)


def _consumers(inputs: dict[str, list[str]], ran: Iterable[str]) -> dict[str, list[str]]:
    """Producer -> the ops reading it that ran in the traced step."""
    ran = set(ran)
    consumers: dict[str, list[str]] = {}
    for op, producers in (inputs or {}).items():
        if op in ran:
            for producer in producers:
                consumers.setdefault(producer, []).append(op)
    return consumers


def _add_copies(
    rows: _Rows,
    predicted: Any,
    device_of: dict[str, str],
    start: dict[str, float],
    end: dict[str, float],
    sizes: dict[str, int],
    ops: pd.DataFrame,
) -> None:
    """A buffer per tensor copied onto another device, live from its producer's end until the
    last consumer there ends (on a CPU fed by a GPU: pinned host memory)."""
    type_of = dict(zip(ops["op"], ops["type"].astype(str), strict=False))
    for producer, consumers in _consumers(predicted.inputs, start).items():
        source = device_of.get(producer)
        size = sizes.get(producer, 0)
        if (
            not source
            or producer not in end
            or size <= 0
            or type_of.get(producer) in VARIABLE_TYPES
        ):
            continue
        first: dict[str, tuple[float, str]] = {}
        last: dict[str, tuple[float, str]] = {}
        for consumer in consumers:
            to = device_of.get(consumer)
            if to and to != source and (_is_gpu(to) or _is_gpu(source)):
                first[to] = min(
                    first.get(to, (start[consumer], consumer)), (start[consumer], consumer)
                )
                last[to] = max(last.get(to, (end[consumer], consumer)), (end[consumer], consumer))
        for to, (until, reader) in last.items():
            allocator = _allocator(to, HOST_PINNED)
            name = producer + COPY_SUFFIX.format(device=short_device(to))
            # received just before its first reader there runs, freed when the last one ends
            when, receiver = first[to]
            received = when if _is_gpu(to) else min(end[producer], when)
            rows.add(to, allocator, received, size, name, owner=receiver)
            rows.add(to, allocator, until, -size, name, owner=reader)


def _add_variables(
    rows: _Rows,
    predicted: Any,
    device_of: dict[str, str],
    start: dict[str, float],
    ops: pd.DataFrame,
    host: str,
) -> None:
    """Each variable read in the step, held from each step's start on its predicted device:
    the size of the largest read of it (a ``VariableV2``: its own output)."""
    if not start:
        return
    type_of = dict(zip(ops["op"], ops["type"].astype(str), strict=False))
    sizes = _sizes(ops)
    held: dict[str, int] = {}
    for op, producers in (predicted.inputs or {}).items():
        if op in start and type_of.get(op) == "ReadVariableOp":
            for producer in producers:
                if type_of.get(producer) in VARIABLE_TYPES:
                    held[producer] = max(held.get(producer, 0), sizes.get(op, 0))
    for op, kind in type_of.items():
        if kind == "VariableV2" and op in start:
            held[op] = max(held.get(op, 0), sizes.get(op, 0))
    step_starts = [min(start.values()), *rows.bounds.tolist()]
    for variable, size in held.items():
        device = device_of.get(variable)
        if device and size > 0:
            for when in step_starts:  # before anything of the step: made before it
                rows.add(device, _allocator(device, host), when - 1, size, variable, owner=" ")


def _host_allocator(memory: pd.DataFrame) -> str:
    """The traced run's CPU allocator (``mklcpu`` with oneDNN, else ``cpu``)."""
    cpu = memory.loc[~memory["device"].map(_is_gpu), "allocator"] if len(memory) else []
    return str(pd.Series(cpu).mode().iloc[0]) if len(cpu) else "cpu"


def _allocator(device: str, host: str) -> str:
    """The allocator a tensor on ``device`` takes: a GPU's own BFC allocator, else ``host``."""
    spec = _spec(device)
    if spec is not None and spec.type == "GPU":
        return f"GPU_{spec.index}_bfc"
    return host


@functools.lru_cache(maxsize=256)
def _is_gpu(device: str) -> bool:
    spec = _spec(device)
    return spec is not None and spec.type == "GPU"


def _spec(device: str) -> Any:
    try:
        return parse_device(device) if device else None
    except ValueError:
        return None
