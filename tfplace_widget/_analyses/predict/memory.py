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
  (``gpu_host_bfc``); two CPUs share the host's memory and copy nothing;
- what the traced devices held persistently (``trace.memory``'s persistent rows: variables,
  constants), each on its holder's predicted device, for the whole step (``kind``
  "persistent", a series of its own: :func:`fits_on` adds it to the step's peak); a trace
  without them (a Chrome trace, a file saved before them): each variable the step read, the
  size of its largest read.

On a GPU each size is rounded up to 256 bytes, as TensorFlow's BFC allocator rounds. The
schedule is the traced run's order (its first step's, when it traced several), one kernel at a
time on a GPU. An XLA cluster's traced buffers (``trace.memory`` rows under its name) go to
the device its ops are predicted on, as traced; to none when the prediction has no row of its
ops. Not modelled: XLA's buffer reuse (a cluster's buffers are XLA's), the BFC allocator's
fragmentation, cuDNN/cuBLAS workspaces beyond what the traced kernels allocated, the CUDA
context.
:data:`MEMORY_NOTE` says so in the prediction's notes.

:func:`fits_on` reads the predicted peaks against a GPU's size.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..._model.devices import parse_device, short_device
from ..._model.memory import (
    PERSISTENT,
    PINNED_HOST,
    TEMPORARY,
    VARIABLE_OPS,
    empty_memory,
    memory_frame,
    step_rows,
)
from ..summary import format_bytes

BFC_ROUNDING = 256  # bytes: a BFC allocator's chunks are multiples of this (kMinAllocationSize)
GIB = 2**30
COPY_SUFFIX = " (copy to {device})"  # the op name a copy's buffer is listed under
# Op types whose output is a variable (its value lives on the device for the whole run).
VARIABLE_TYPES = frozenset({"VarHandleOp", "VariableV2", "Variable", "_VarHandlesOp"})
MEMORY_NOTE = (
    "Memory predicted per device (prediction.memory_peaks(), fits_on(gib=16)): the traced "
    "step's allocations moved to the predicted devices at their traced times, plus a buffer for "
    "each tensor copied onto another device; the variables and constants the traced devices "
    "held (persistent_bytes) are counted apart and added to the peak by fits_on; "
    "on a GPU each size rounded up to 256 bytes as TensorFlow's BFC allocator does. "
    "Assumed: the traced run's op order, no XLA buffer reuse, no allocator fragmentation, no "
    "CUDA context or cuDNN workspace beyond what the traced kernels allocated."
)


def predict_memory(traced: Any, predicted: Any) -> pd.DataFrame:
    """``predicted.memory``: the memory of ``traced``'s step (see the module doc) on the devices
    of ``predicted`` (a prediction of ``traced``), as ``trace.memory`` rows (MEMORY_COLUMNS)
    on ``traced``'s clock; empty when the trace recorded neither allocations nor sizes."""
    if not len(traced.ops) or "start_us" not in traced.ops:
        return empty_memory()
    table = _Ops(traced, predicted)
    events = _timed_events(traced)
    memory = traced.memory
    step = step_rows(memory)
    persistent, memory = memory[~step], memory[step]
    bounds = _step_bounds(traced, events)
    if len(bounds):  # the first traced step (the ops' times are their first run's)
        events = events[events["start_us"].to_numpy(dtype=float) < bounds[0]]
        memory = memory[memory["time_us"].to_numpy(dtype=float) < bounds[0]]
    rows = _Rows(np.zeros(0), events, table.device_of)
    if len(memory):
        _add_traced(rows, table, memory, TEMPORARY)
    else:
        _add_outputs(rows, table)
    _add_copies(rows, table)
    if len(persistent):
        _add_traced(rows, table, persistent, PERSISTENT)
    else:
        _add_variables(rows, table, _host_allocator(memory))
    return rows.frame()


class _Ops:
    """The ops of a traced step and its prediction as integer codes (one per name), with
    per-code arrays: predicted device, traced start and end, output bytes per run, type; and
    the data edges whose consumer ran (``producer``, ``consumer`` codes)."""

    def __init__(self, traced: Any, predicted: Any) -> None:
        ops = traced.ops.drop_duplicates("op")
        placed = predicted.ops.drop_duplicates("op")
        inputs = predicted.inputs or {}
        consumers = np.asarray(list(inputs), dtype=object)
        lists = list(inputs.values())
        counts = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        producers = np.fromiter(
            itertools.chain.from_iterable(lists), dtype=object, count=int(counts.sum())
        )
        traced_names = ops["op"].to_numpy(dtype=object)
        placed_names = placed["op"].to_numpy(dtype=object)
        self.names = pd.Index(
            pd.unique(np.concatenate([placed_names, traced_names, consumers, producers]))
        )
        n = len(self.names)
        self.device = np.full(n + 1, "", dtype=object)  # the last: names not listed
        self.device[self.code(placed_names)] = placed["device"].astype(str).to_numpy(object)
        here = self.code(traced_names)
        self.start = np.full(n + 1, np.nan)
        self.start[here] = ops["start_us"].to_numpy(dtype=float)
        self.end = self.start.copy()
        self.end[here] += ops["duration_us"].astype(float).fillna(0).to_numpy()
        self.size = np.zeros(n + 1, dtype=np.int64)
        if "output_bytes" in ops:  # a run's outputs (the same in every run)
            known = ops["output_bytes"].notna().to_numpy(dtype=bool)
            self.size[here[known]] = ops["output_bytes"][known].astype(np.int64).to_numpy()
        self.type = np.full(n + 1, "", dtype=object)
        self.type[here] = ops["type"].astype(str).to_numpy(dtype=object)
        self.ran = ~np.isnan(self.start)
        consumer = np.repeat(self.code(consumers), counts)
        producer = self.code(producers)
        keep = self.ran[consumer]
        self.producer, self.consumer = producer[keep], consumer[keep]
        devices = pd.unique(self.device)
        gpu = {d: _is_gpu(d) for d in devices}
        self.on_gpu = np.fromiter(map(gpu.__getitem__, self.device), dtype=bool, count=n + 1)
        self.variable = np.isin(self.type, list(VARIABLE_TYPES))
        self.device_of = pd.Series(self.device[:n], index=self.names)
        self.clusters = _cluster_devices(traced, placed)

    def code(self, names: Any) -> np.ndarray:
        """Each name's code (names not listed: the last, whose arrays hold nothing)."""
        found = self.names.get_indexer(np.asarray(names, dtype=object))
        return np.where(found < 0, len(self.names), found)


def _cluster_devices(traced: Any, placed: pd.DataFrame) -> dict[str, str]:
    """Each XLA cluster of ``traced`` (``trace.memory`` holds its buffers under its name) ->
    the device the prediction puts most of its ops on (XLA runs a cluster on one device),
    ``""`` when it has no row of them (a Keras step XLA compiles whole: its graph is not
    replayed)."""
    xla = getattr(traced, "xla", None)
    if xla is None or not len(xla):
        return {}
    found = {}
    for cluster in pd.unique(xla["cluster"]):
        where = pd.Series([], dtype=object)
        if "function" in placed:
            where = placed.loc[placed["function"] == cluster, "device"].astype(str)
        found[str(cluster)] = str(where.mode().iloc[0]) if len(where) else ""
    return found


def _add_outputs(rows: _Rows, table: _Ops) -> None:
    """Without allocator records: each op's output bytes, live from its start until its last
    reader on its device ends (to the step's end when none there reads it)."""
    made = np.flatnonzero((table.size > 0) & table.ran & (table.device != ""))
    if not len(made):
        return
    where = table.device[made]
    host = _allocators(where, np.full(len(where), "cpu", dtype=object))
    names = table.names.to_numpy(dtype=object)
    rows.extend(where, host, table.start[made], table.size[made], names[made])
    p, c = table.producer, table.consumer
    same = (table.size[p] > 0) & (table.device[p] == table.device[c]) & (table.device[p] != "")
    last = pd.Series(table.end[c[same]]).groupby(p[same]).max()
    freed = last.index.to_numpy()
    where = table.device[freed]
    rows.extend(
        where,
        _allocators(where, np.full(len(where), "cpu", dtype=object)),
        last.to_numpy(),
        -table.size[freed],
        names[freed],
    )


def _add_copies(rows: _Rows, table: _Ops) -> None:
    """A buffer per tensor copied onto another device, received as its first reader there
    starts, freed when the last one ends (on a CPU fed by a GPU: pinned host memory)."""
    p, c = table.producer, table.consumer
    source, to = table.device[p], table.device[c]
    keep = (
        table.ran[p]
        & ~table.variable[p]
        & (table.size[p] > 0)
        & (source != "")
        & (to != "")
        & (source != to)
        & (table.on_gpu[p] | table.on_gpu[c])
    )
    if not keep.any():
        return
    p, c = p[keep], c[keep]
    copies = pd.DataFrame(
        {
            "producer": p,
            "to": table.device[c],
            "consumer": c,
            "first": table.start[c],
            "last": table.end[c],
        }
    )
    by = copies.groupby(["producer", "to"], sort=False)
    receiver = copies.loc[by["first"].idxmin()]
    reader = copies.loc[by["last"].idxmax()]
    made = receiver["producer"].to_numpy()
    where = receiver["to"].to_numpy(dtype=object)
    allocator = _allocators(where, np.full(len(where), PINNED_HOST, dtype=object))
    names = table.names.to_numpy(dtype=object)
    short = {d: short_device(d) for d in pd.unique(where)}
    label = names[made] + np.array([COPY_SUFFIX.format(device=short[d]) for d in where], object)
    first = receiver["first"].to_numpy()
    received = np.where(
        table.on_gpu[receiver["consumer"].to_numpy()], first, np.minimum(table.end[made], first)
    )
    size = table.size[made]
    rows.extend(where, allocator, received, size, label, names[receiver["consumer"].to_numpy()])
    rows.extend(
        where, allocator, reader["last"], -size, label, names[reader["consumer"].to_numpy()]
    )


def _add_variables(rows: _Rows, table: _Ops, host: str) -> None:
    """Each variable read in the step, held from each step's start on its predicted device:
    the size of the largest read of it (a ``VariableV2``: its own output)."""
    if not table.ran.any():
        return
    p, c = table.producer, table.consumer
    reads = table.variable[p] & (table.type[c] == "ReadVariableOp")
    held = pd.Series(table.size[c[reads]]).groupby(p[reads]).max()
    own = np.flatnonzero((table.type == "VariableV2") & table.ran)
    held = pd.concat([held, pd.Series(table.size[own], index=own)]).groupby(level=0).max()
    held = held[(held > 0) & (table.device[held.index.to_numpy()] != "")]
    if not len(held):
        return
    codes = held.index.to_numpy()
    where = table.device[codes]
    allocator = _allocators(where, np.full(len(where), host, dtype=object))
    names = table.names.to_numpy(dtype=object)[codes]
    owner = np.full(len(codes), " ", dtype=object)
    when = float(np.nanmin(table.start)) - 1  # before anything of the step
    own = np.isin(table.type[codes], list(VARIABLE_OPS))  # the op is the variable
    rows.extend(
        where,
        allocator,
        np.full(len(codes), when),
        held.to_numpy(),
        names,
        owner,
        PERSISTENT,
        np.where(own, names, None),
    )


def _add_traced(rows: _Rows, table: _Ops, memory: pd.DataFrame, kind: str) -> None:
    """Traced ``memory`` rows of one ``kind``, each on its op's predicted device (its traced
    one where the prediction has no such op), in that device's memory; a persistent row was
    made by no run of the step (owner " ")."""
    to = table.device[table.code(memory["op"])]
    if table.clusters:  # an XLA cluster's buffers: where its ops are predicted, if anywhere
        cluster = memory["op"].map(table.clusters).to_numpy(dtype=object)
        known = ~pd.isna(cluster)
        placed = known & (cluster != "")
        to = np.where(placed & (to == ""), cluster, to)
        keep = ~known | placed  # a cluster predicted on no device: its buffers on none
        memory, to = memory[keep], to[keep]
    to = np.where(to == "", memory["device"].to_numpy(dtype=object), to)
    owner = None if kind == TEMPORARY else np.full(len(to), " ", dtype=object)
    rows.extend(
        to,
        _allocators(to, memory["allocator"]),
        memory["time_us"],
        memory["bytes"],
        memory["op"],
        owner,
        kind,
        None if kind == TEMPORARY else memory["variable"].to_numpy(dtype=object),
    )


@dataclass(frozen=True)
class FitsOn:
    """Whether a prediction's step fits on a GPU of ``gib`` GiB (:func:`fits_on`)."""

    fits: bool
    need_bytes: int  # the most any predicted GPU holds at once in the step, persistent included
    at_op: str  # the op whose allocation reached that peak
    device: str  # the GPU it is on ("" when no op is predicted on a GPU)
    gib: float
    persistent_bytes: int = 0  # of need_bytes: variables and constants held through the step

    def __str__(self) -> str:
        if not self.device:
            return "No op is predicted on a GPU: nothing to fit."
        verdict = "fits" if self.fits else "does not fit"
        return (
            f"On a {self.gib:g} GiB GPU this step {verdict}: {short_device(self.device)} would "
            f"need about {self.need_bytes / GIB:.2f} GiB at op {self.at_op}, "
            f"{format_bytes(self.persistent_bytes)} of it variables and constants held "
            "through the step."
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
    need, op, device, persistent = peak
    return FitsOn(need <= gib * GIB, need, op, device, float(gib), persistent)


def gpu_peak(memory: pd.DataFrame) -> tuple[int, str, str, int] | None:
    """The most bytes any GPU's allocator holds at once in ``memory``: its step's peak live
    bytes plus what it holds persistently; the op whose row reached the peak first (the
    largest persistent holder where the step allocates nothing there), the GPU, and the
    persistent part. None when no row is on a GPU."""
    on_gpu = memory[[_is_gpu(d) for d in memory["device"]]] if len(memory) else memory
    if not len(on_gpu):
        return None
    best: tuple[int, str, str, int] | None = None
    for (device, _), rows in on_gpu.groupby(["device", "allocator"], sort=True):
        mine = step_rows(rows)
        held = rows.loc[~mine]
        persistent = int(held["bytes"].sum())
        temporary = rows.loc[mine]
        if len(temporary):
            at = int(np.argmax(temporary["live_bytes"].to_numpy()))
            peak, op = int(temporary["live_bytes"].iloc[at]), str(temporary["op"].iloc[at])
        else:
            peak, op = 0, str(held.sort_values("bytes", ascending=False)["op"].iloc[0])
        if best is None or peak + persistent > best[0]:
            best = (peak + persistent, op, str(device), persistent)
    return best


_ROW_NAMES = ["device", "allocator", "time", "bytes", "op", "step", "owner"]


class _Rows:
    """The predicted memory rows, each in its traced step (``bounds``: where steps 1.. start).

    A GPU runs its kernels one at a time (TensorFlow's executor runs a GPU kernel inline, never
    on the inter-op pool, and a stream is in order), where the traced CPU run may have run some
    side by side: :meth:`frame` puts a GPU's rows in that sequence (:func:`_in_sequence`)."""

    def __init__(self, bounds: np.ndarray, events: pd.DataFrame, device_of: pd.Series):
        self.bounds = bounds
        self.events = events
        self.device_of = device_of
        self.parts: list[pd.DataFrame] = []

    def extend(
        self,
        device: Any,
        allocator: Any,
        time: Any,
        size: Any,
        op: Any,
        owner: Any = None,
        kind: str = TEMPORARY,
        variable: Any = None,
    ) -> None:
        """Rows, one per item; ``owner``: the op whose run made each (its own op by default);
        ``kind``: the step's own (``TEMPORARY``) or held through it (``PERSISTENT``);
        ``variable``: the variable each holds (none by default)."""
        op = np.asarray(op, dtype=object)
        names = np.full(len(op), None, dtype=object) if variable is None else variable
        self.parts.append(
            pd.DataFrame(
                {
                    "device": np.asarray(device, dtype=object),
                    "allocator": np.asarray(allocator, dtype=object),
                    "time": np.asarray(time, dtype=float),
                    "bytes": np.asarray(size, dtype=np.int64),
                    "op": op,
                    "owner": op if owner is None else np.asarray(owner, dtype=object),
                    "kind": kind,
                    "variable": pd.Series(np.asarray(names, dtype=object), dtype=object),
                }
            )
        )

    def frame(self) -> pd.DataFrame:
        parts = [p for p in self.parts if len(p)]
        if not parts:
            return empty_memory()
        rows = pd.concat(parts, ignore_index=True)
        gpu = rows["device"].map(_is_gpu).to_numpy(dtype=bool)
        size = rows["bytes"].to_numpy()
        rounded = np.sign(size) * (-(-np.abs(size) // BFC_ROUNDING) * BFC_ROUNDING)
        rows["bytes"] = np.where(gpu, rounded, size)
        rows["step"] = np.searchsorted(self.bounds, rows["time"].to_numpy(), side="right")
        held = (rows["kind"] == PERSISTENT).to_numpy(dtype=bool)
        rows.loc[held, "step"] = -1  # a series of its own, before the steps
        parts = [rows[~gpu | held]]
        for device, mine in rows[gpu & ~held].groupby("device", sort=False):
            parts.append(_in_sequence(mine, self.events, self.device_of, device))
        rows = pd.concat(parts, ignore_index=True)
        series = rows.groupby(["step", "device", "allocator"], sort=False).ngroup()
        return memory_frame(
            rows["device"],
            rows["allocator"],
            rows["time"].astype(np.int64),
            rows["bytes"],
            rows["op"],
            rows["step"],
            series.to_numpy(),
            rows["kind"],
            rows["variable"].to_numpy(dtype=object),
        )


def _in_sequence(
    rows: pd.DataFrame, events: pd.DataFrame, device_of: pd.Series, device: str
) -> pd.DataFrame:
    """``rows`` of one GPU in the order its kernels would run one at a time (their traced
    starts'): a row made while its op ran goes with that run; a later one (a tensor freed when
    its last reader finished) with the run of this GPU under way then that ends first (the
    reader: TensorFlow frees an op's inputs as it finishes), else after the last one that
    ended. Each row's time becomes its run's traced start (so the times keep that order)."""
    runs = events[events["op"].map(device_of).eq(device).to_numpy(dtype=bool)]
    if not len(runs):
        return rows
    runs = runs.sort_values(["start_us", "op"], kind="stable")
    starts = runs["start_us"].to_numpy(dtype=float)
    ends = starts + runs["duration_us"].fillna(0).to_numpy(dtype=float)
    times = rows["time"].to_numpy(dtype=float)
    # the run under way that ends first, else the last one (by start) of those ended
    by_end = np.argsort(ends, kind="stable")
    sorted_ends = ends[by_end]
    latest = np.maximum.accumulate(by_end)
    at = np.searchsorted(sorted_ends, times, side="left")
    candidate = by_end[np.minimum(at, len(by_end) - 1)]
    under_way = (at < len(by_end)) & (starts[candidate] <= times)
    ended = np.where(at > 0, latest[np.maximum(at - 1, 0)], -1)
    rank = np.where(under_way, candidate, ended)
    phase = np.ones(len(rows), dtype=np.int64)
    # a row made while its own op ran goes with that run
    own = pd.DataFrame({"op": runs["op"].to_numpy(dtype=object), "run": np.arange(len(runs))})
    mine = pd.DataFrame({"op": rows["owner"].to_numpy(dtype=object), "row": np.arange(len(rows))})
    pairs = mine.merge(own, on="op")
    if len(pairs):
        r, k = pairs["row"].to_numpy(), pairs["run"].to_numpy()
        inside = (starts[k] <= times[r]) & (times[r] <= ends[k])
        first = pd.Series(k[inside]).groupby(r[inside]).min()
        rank[first.index.to_numpy()] = first.to_numpy()
        phase[first.index.to_numpy()] = 0
    rows = rows.assign(_rank=rank, _phase=phase)
    rows = rows.sort_values(["step", "_rank", "_phase", "time"], kind="stable")
    picked = rows["_rank"].to_numpy()
    rows["time"] = np.where(picked >= 0, starts[np.maximum(picked, 0)], rows["time"])
    return rows.drop(columns=["_rank", "_phase"])


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


def _host_allocator(memory: pd.DataFrame) -> str:
    """The traced run's CPU allocator (``mklcpu`` with oneDNN, else ``cpu``)."""
    cpu = memory.loc[~memory["device"].map(_is_gpu), "allocator"] if len(memory) else []
    return str(pd.Series(cpu).mode().iloc[0]) if len(cpu) else "cpu"


def _allocators(devices: Any, hosts: Any) -> np.ndarray:
    """Per row, the allocator on its device: a GPU's own BFC allocator, else its ``hosts``."""
    devices = np.asarray(devices, dtype=object)
    own = {d: _allocator(d, "") for d in pd.unique(devices)}
    mapped = np.fromiter(map(own.__getitem__, devices), dtype=object, count=len(devices))
    return np.where(mapped != "", mapped, np.asarray(hosts, dtype=object))


@functools.lru_cache(maxsize=256)
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
