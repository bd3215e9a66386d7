"""Turn recorded executions into pandas DataFrames: ``ops``, ``events``, ``transfers``.

Pure data code: no widget, plotly or session import. Every source (``_sources/``: RunMetadata,
Chrome trace, profiler XSpace, function graphs) is first reduced to flat :class:`Records` and
an :class:`Executed` graph; this module turns those into frames by one shared path.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from itertools import compress, repeat
from typing import Any

import numpy as np
import pandas as pd

from .._explain import HOW_VALUES, Explainer
from .._model.columns import EVENTS_COLUMNS, OPS_COLUMNS, TRANSFERS_COLUMNS
from .._model.devices import (
    canonical_device,
    crosses_tasks,
    device_sort_key,
    lane_kind,
    lane_owner,
    short_device,
)
from .._model.graphfacts import GraphFacts
from .._model.kernels import GPU_KERNEL_VALUES, UNKNOWN
from .._model.records import Executed, Records, producer
from .._model.trace import PlacementTrace
from .._tfadapter.registry import REGISTRY
from .memory import RecordIndex, memory_of_records
from .origins import source_columns

# Step-stats collection stops at 2**20 nodes (step_stats_collector.cc).
STEP_STATS_CAP = 1 << 20

_LABEL_PREFIX = re.compile(r"^\[[^\]]*\]\s*")
# Lanes sharing a record: keep the memcpy lane for copies, the stream lane for kernels.
_LANE_PRIORITY = {"device": 0, "memcpy": 1, "stream": 2, "sync": 3, "stream:all": 4}


# ---------------------------------------------------------------------------------------------
# Records -> frames
# ---------------------------------------------------------------------------------------------
def frames_from_records(
    records: Records,
    step_starts: list[int],
    executed: Executed,
    facts: GraphFacts | None,
    available_devices: Sequence[str] = (),
    source: str = "",
) -> PlacementTrace:
    events, types, out_bytes, lanes = _events_frame(records, step_starts, executed)
    op_level = events["lane_kind"].to_numpy() == "device"
    has_memory = bool(records.memory.row)  # the op rows of the records: for their memory
    ops, op_rows = _ops_frame(events, op_level, types, out_bytes, executed, has_memory)
    # Plain lists: iterating pandas string columns element by element is slow on 100k rows.
    names, op_devices = ops["op"].tolist(), ops["device"].tolist()
    devices = sorted(
        set(op_devices)
        | set(events["device"].unique())
        | {canonical_device(d) for d in available_devices} - {""},
        key=device_sort_key,
    )
    placed = dict(zip(names, op_devices, strict=True))
    explainer = Explainer(
        facts,
        placed,
        devices,
        executed.inputs,
        kernel_types=REGISTRY.registered_device_types,  # this process's: the reader's
        client=executed.client,
    )
    op_types = ops["type"].tolist()
    requested, how, reason = explainer.explain_columns(names, op_types, op_devices)
    columns: dict[str, Any] = dict(ops.items())
    columns["requested_device"] = requested
    columns["how"] = pd.Categorical.from_codes(np.asarray(how, np.int8), list(HOW_VALUES))
    if executed.fused:
        _name_fused_ops(reason, names, op_types, executed.fused)
    if executed.merged:
        _name_merged_ops(reason, ops, executed.merged)
    if executed.replicated:
        _name_replicated_constants(reason, names, op_devices, executed.replicated)
    columns["reason"] = reason
    if executed.function:
        function_of = executed.function.get
        columns["function"] = [function_of(name, "") for name in names]
    else:
        columns["function"] = [""] * len(names)
    columns["kernels"], columns["gpu_kernel"] = _kernel_columns(names, facts)
    columns["xla_op"] = _missing_text(len(names))  # set by tracing.xla
    columns["input_stage"] = _missing_text(len(names))  # set by tracing.input_pipeline
    columns["source"], columns["source_path"] = source_columns(names, op_types, executed)
    ran = ops["runs"].notna().to_numpy()
    origin = _origin(records, step_starts)
    index = RecordIndex(*lanes, _row_of_record(len(records.op), op_rows))
    memory_rows, memory = memory_of_records(
        records, origin, names, op_devices, ran, executed, index=index
    )
    if memory is None:  # no allocator records (Chrome traces, TF2 profiles without oneDNN)
        memory = {
            "allocated_bytes": _missing_int(len(names)),
            "peak_bytes": _missing_int(len(names)),
            "allocator": _missing_text(len(names)),
        }
    columns.update(memory)
    ops = pd.DataFrame({name: columns[name] for name in OPS_COLUMNS}, index=ops.index)
    if ops.empty:  # e.g. XLA ran the whole call: text columns stay text, for .str and filters
        text = ["op", "type", "device", "requested_device", "reason", "function", "kernels"]
        ops = ops.astype(dict.fromkeys(text, object))
    transfers = _transfers_frame(executed, events, out_bytes)
    truncated = len(records.op) >= STEP_STATS_CAP * max(1, len(step_starts))
    return PlacementTrace(
        memory=memory_rows,
        ops=ops.reset_index(drop=True),
        events=events[EVENTS_COLUMNS].reset_index(drop=True),
        transfers=transfers,
        devices=devices,
        inputs=executed.inputs or _inputs_from_labels(events),
        source=source,
        truncated=truncated,
        facts=facts,
    )


def _missing_text(n: int) -> Any:
    """``pd.array([pd.NA] * n, dtype="string")``, made by taking an empty array's missing value
    ``n`` times (0.3 ms against 11 ms at 17k rows: no list of NA to check element by element)."""
    return pd.array([], dtype="string").take(np.full(n, -1, dtype=np.intp), allow_fill=True)


def _origin(records: Records, step_starts: list[int]) -> int:
    """The zero of the trace's time axis: its first step's start (µs since the epoch)."""
    return min(step_starts) if step_starts else (min(records.start) if records.start else 0)


def _row_of_record(n: int, op_rows: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """Each of ``n`` execution records' row in ``trace.ops`` where ``_ops_frame`` found it
    (``op_rows``: record rows and their op rows), else -1."""
    row = np.full(n, -1, dtype=np.int64)
    if op_rows is not None:
        row[op_rows[0]] = op_rows[1]
    return row


def _missing_int(n: int) -> Any:
    """An Int64 array of ``n`` missing values."""
    return pd.arrays.IntegerArray(np.zeros(n, np.int64), np.ones(n, dtype=bool))


def _kernel_columns(names: list[str], facts: GraphFacts | None) -> tuple[np.ndarray, Any]:
    """The ``kernels`` (text) and ``gpu_kernel`` (categorical) columns: one lookup per op, the
    text once per distinct ``KernelFacts`` (a trace has a few hundred; they are shared)."""
    kernels_of = facts.kernels.get if facts is not None else {}.get
    known = [kernels_of(name, UNKNOWN) for name in names]
    codes, _ = pd.factorize(np.fromiter(map(id, known), np.uint64, len(known)))
    _, first = np.unique(codes, return_index=True)
    distinct = [known[i] for i in first.tolist()]
    kernels = np.array([k.kernels for k in distinct] + [""], dtype=object)[codes]
    gpu_codes = {value: code for code, value in enumerate(GPU_KERNEL_VALUES)}
    gpu = np.array([gpu_codes.get(k.gpu_kernel, -1) for k in distinct] + [-1], np.int8)[codes]
    return kernels, pd.Categorical.from_codes(gpu, list(GPU_KERNEL_VALUES))


_FUSED_PREFIX = re.compile(r"^_(?:Mkl)?(?:Native)?Fused")


def _name_fused_ops(
    reasons: list[str], names: list[str], types: list[str], fused: dict[str, list[str]]
) -> None:
    """Say which ops a fused kernel replaced (its ``fused_ops``), in place."""
    for index, name in enumerate(names):
        parts = fused.get(name)
        if parts:
            base = _FUSED_PREFIX.sub("", types[index]) or types[index]
            reasons[index] += (
                f" It is {' + '.join([base, *parts])} fused into one {types[index]} kernel by "
                "Grappler's remapper (optimize=True)."
            )


_ONEDNN_OFF = " TF_ENABLE_ONEDNN_OPTS=0 turns the rewrite off."


def _name_merged_ops(reasons: list[str], ops: pd.DataFrame, merged: dict[str, str]) -> None:
    """Say which placed ops oneDNN fused into a kernel after placement (``Executed.merged``),
    on their rows and on the kernel's, in place."""
    names = ops["op"].tolist()
    row_of = {name: i for i, name in enumerate(names)}
    parts: dict[str, list[str]] = {}
    for op, kernel in merged.items():
        parts.setdefault(kernel, []).append(op)
    types, devices = ops["type"].tolist(), ops["device"].tolist()
    durations, runs = ops["duration_us"].tolist(), ops["runs"].tolist()
    for op, kernel in merged.items():
        index, at = row_of.get(op), row_of.get(kernel)
        if index is None or at is None:
            continue
        ran = f"which ran on {short_device(devices[at]) or 'its device'}"
        if not pd.isna(durations[at]):
            ran += f" for {int(durations[at])} µs"
            if not pd.isna(runs[at]) and runs[at] > 1:
                ran += f" over {int(runs[at])} runs"
        reasons[index] += (
            f" After placement, oneDNN's graph rewrite fused it into the {types[at]} kernel "
            f"{kernel} (a row of its own), {ran}: this op has no time of its own." + _ONEDNN_OFF
        )
    for kernel, ops_in in parts.items():
        at = row_of.get(kernel)
        if at is not None:
            shown = [f"{op} ({types[row_of[op]]})" for op in ops_in if op in row_of]
            keeps = "it keeps" if len(shown) == 1 else "each keeps"
            reasons[at] += (
                f" The rewrite, after placement, also fused {' and '.join(shown)} into this "
                f"kernel; {keeps} a row of its own, with no time." + _ONEDNN_OFF
            )


_REPLICATED_BY = "TensorFlow's ReplicateConstantsPass"


def _name_replicated_constants(
    reasons: list[str], names: list[str], devices: list[str], replicated: dict[str, list[str]]
) -> None:
    """Say which constants ReplicateConstantsPass replaced by per-device copies after placement
    (``Executed.replicated``), on the constant's row (if it has one) and its copies', in place.
    Only those names' rows are looked up (the last row of a name, as a dict of all would)."""
    wanted = set(replicated).union(*replicated.values())
    row_of = {name: i for i, name in enumerate(names) if name in wanted}
    for original, copies in replicated.items():
        at = row_of.get(original)
        shown = [c for c in copies if c in row_of]
        where = ", ".join(f"{c} on {short_device(devices[row_of[c]])}" for c in shown)
        if at is not None:
            reasons[at] += (
                f" After placement, {_REPLICATED_BY} replaced this constant (at most 16 "
                f"elements, read on {len(copies)} devices) with one copy per device that reads "
                f"it ({where}: rows of their own); it did not run and has no time of its own."
            )
            origin = f"{original} (placed on {short_device(devices[at])}, a row of its own)"
        else:
            origin = (
                f"{original} (no row: only TensorFlow's placement log has its device, and this "
                "trace has none; in TF2 code, tf.debugging.set_log_device_placement(True) "
                "before TensorFlow starts lets the trace read it)"
            )
        for copy in shown:
            reasons[row_of[copy]] = (
                f"Not in the graph as built: a copy of the constant {origin} that "
                f"{_REPLICATED_BY} made after placement for its readers on "
                f"{short_device(devices[row_of[copy]])}: each device that reads a constant of "
                "at most 16 elements placed on a CPU gets a copy of its own."
            )


def _events_frame(
    records: Records, step_starts: list[int], executed: Executed
) -> tuple[pd.DataFrame, dict[str, str], dict[str, Sequence[int]], tuple[np.ndarray, list[str]]]:
    """One row per execution record, deduplicated across GPU stream/memcpy lanes; and each
    record's lane as a code into the distinct lanes (for the allocator records)."""
    # Per-lane work once per distinct lane; per-record work on plain lists and numpy arrays
    # (iterating pandas string columns element by element is slow on 100k rows).
    codes, unique_lanes = pd.factorize(np.array(records.lane, dtype=object))
    unique_lanes = unique_lanes.tolist()
    kinds = np.array([lane_kind(lane) for lane in unique_lanes] + [""], dtype=object)[codes]
    owners = np.array(
        [canonical_device(lane_owner(lane)) for lane in unique_lanes] + [""], dtype=object
    )[codes]
    op_names = np.array(records.op, dtype=object)
    # GPU kernels in TF 2.x lanes are named "node:Type": keep the node name.
    not_device = kinds != "device"
    if not_device.any():
        op_names[not_device] = [_strip_kernel_suffix(n) for n in op_names[not_device]]
    origin = _origin(records, step_starts)
    start = np.asarray(records.start, dtype=np.int64) - origin
    frame = pd.DataFrame(
        {
            "op": op_names,
            "device": owners,
            "lane": np.array(unique_lanes + [""], dtype=object)[codes],
            "thread": np.asarray(records.thread, dtype=np.int64),
            "start_us": start,
            "duration_us": np.asarray(records.duration, dtype=np.int64),
            "label": [
                _LABEL_PREFIX.sub("", label) if label[:1] == "[" else label
                for label in records.label
            ],
            "lane_kind": kinds,
            "_row": np.arange(len(records.op)),
        }
    )
    if not_device.any():
        frame = _drop_duplicate_lane_records(frame)
        rows = frame["_row"].to_numpy()
        names = op_names[rows].tolist()
        rows = rows.tolist()
    else:
        names = op_names.tolist()
        rows = range(len(names))
    types, out_bytes = _first_types_and_sizes(rows, names, records, executed)
    events = frame.sort_values(["start_us", "_row"], kind="stable")
    return events, types, out_bytes, (codes, unique_lanes)


def _first_types_and_sizes(
    rows: Sequence[int], names: list[str], records: Records, executed: Executed
) -> tuple[dict[str, str], dict[str, Sequence[int]]]:
    """Per op name (of the records ``rows``, named ``names``): the type of its first record
    (the record's own, else the executed graph's, else its label's) and its first recorded
    output sizes. By C-level passes over every record (the dicts built from the last record
    back, so that a name's first record is the one kept); only records the executed graph
    does not type (a lane's ``_SOURCE``) are typed one by one, from their labels."""
    raw_types, labels, out = records.type, records.label, records.output_bytes
    if isinstance(rows, range):  # every record, in order
        own, outs = raw_types, out
    else:
        own, outs = [raw_types[row] for row in rows], [out[row] for row in rows]
    values = list(map(executed.type.get, names))
    if any(own):
        values = [mine or graph for mine, graph in zip(own, values, strict=True)]
    for at in compress(range(len(values)), map(operator.not_, values)):
        values[at] = _type_from_label(labels[rows[at]])
    types = dict(zip(reversed(names), reversed(values), strict=True))
    out_bytes = dict(compress(zip(reversed(names), reversed(outs), strict=True), reversed(outs)))
    return types, out_bytes


def _drop_duplicate_lane_records(frame: pd.DataFrame) -> pd.DataFrame:
    """A kernel on ``stream:N`` and ``stream:all``, or a copy on ``memcpy`` and its stream,
    is one execution: keep it once, kernels on their ``stream:N``, copies on ``memcpy``.

    TF 2.x names a copy's stream ``stream:7<MemcpyH2D>`` (``lane_kind`` "memcpy" too); the
    plain ``/memcpy`` lane wins, as it does for TF 1.x traces, so all copies share one lane.
    """
    sub = frame["lane_kind"] != "device"
    gpu = frame[sub].copy()
    gpu["_priority"] = gpu["lane_kind"].map(_LANE_PRIORITY) * 2 + (
        (gpu["lane_kind"] == "memcpy") & ~gpu["lane"].str.endswith("/memcpy")
    ).astype(int)
    gpu = gpu.sort_values("_priority", kind="stable")
    duplicate = gpu.duplicated(["device", "op", "start_us", "duration_us"], keep="first")
    keep = gpu.index[~duplicate.to_numpy()]
    return pd.concat([frame[~sub], frame.loc[keep]]).sort_values("_row", kind="stable")


_OP_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _strip_kernel_suffix(name: str) -> str:
    """``"MatMul:MatMul"`` -> ``"MatMul"``; raw kernel names (``"void Eigen::f<...>(...)"``) stay."""
    head, sep, tail = name.rpartition(":")
    if sep and head and not head.endswith(":") and _OP_TYPE.fullmatch(tail):
        return head
    return name


def _type_from_label(label: str) -> str:
    text = _LABEL_PREFIX.sub("", label)
    _, sep, rest = text.partition(" = ")
    return rest.split("(", 1)[0].strip() if sep else ""


def _ops_frame(
    events: pd.DataFrame,
    op_level: np.ndarray,
    types: dict[str, str],
    out_bytes: dict[str, Sequence[int]],
    executed: Executed,
    record_rows: bool = False,
) -> tuple[pd.DataFrame, tuple[np.ndarray, np.ndarray] | None]:
    """One row per placed op: executed-graph nodes plus any op seen only in the records; and,
    when ``record_rows``, the op-level records' rows (``events["_row"]``) with the row of the
    op each is a run of (None otherwise, and without an executed graph).

    Records-only ops are keyed by (name, device): every device partition has its own _SOURCE.
    """
    if op_level.all():  # CPU-only traces: every record is op-level
        timed = events
    else:
        level = events[op_level]
        # An op only seen on stream/memcpy lanes (a copy, a kernel without its launch) still
        # counts; ``/sync`` records (cuStreamSynchronize calls) are host waits, not ops.
        seen_elsewhere = events[
            ~op_level
            & ~events["op"].isin(level["op"].unique())
            & (events["lane_kind"].to_numpy() != "sync")
        ]
        timed = pd.concat([level, seen_elsewhere]) if len(seen_elsewhere) else level
    if not executed.device:
        return _ops_frame_from_records(timed, types, out_bytes, executed), None
    # Graph nodes plus record stats, as plain arrays: one DataFrame at the end.
    stat_ops, stat_devices, stats, group = _record_stats(timed)
    columns, joined = _outer_join_graph_nodes(executed.device, stat_ops, stat_devices, stats)
    op, device = columns["op"], columns["device"]
    if pd.isna(device).any():
        device[pd.isna(device)] = ""
    names = op.tolist()
    op_types = _op_types(names, types, executed)
    runs = columns["runs"]
    if runs.dtype.kind == "f":  # some node has no record: <NA> runs
        missing_runs = np.isnan(runs)
        runs = pd.arrays.IntegerArray(
            np.where(missing_runs, 0, runs).astype(np.int64), missing_runs
        )
    else:
        runs = pd.arrays.IntegerArray(runs.astype(np.int64, copy=False), np.zeros(len(runs), bool))
    output_bytes = _output_bytes(names, out_bytes)
    start = columns["start_us"]
    # By first start (never-run ops last), then name, then device.
    order = _start_name_order(
        np.where(np.isnan(start), np.inf, start) if start.dtype.kind == "f" else start, op, device
    )
    frame = pd.DataFrame(
        {
            "op": pd.Series(op[order], dtype=object, copy=False),
            "device": pd.Series(device[order], dtype=object, copy=False),
            "start_us": start[order],
            "duration_us": columns["duration_us"][order],
            "runs": runs[order],
            "type": [op_types[i] for i in order.tolist()],
            "output_bytes": output_bytes[order],
        }
    )
    if not record_rows:
        return frame, None
    # Each op-level record's op row: its group's joined row, moved by ``order``. A record of
    # another lane is named without its kernel suffix here, so not surely by its own name.
    sorted_row = np.empty(len(order), dtype=np.int64)
    sorted_row[order] = np.arange(len(order))
    mine = (group >= 0) & (timed["lane_kind"].to_numpy(dtype=object) == "device")
    record_rows = timed["_row"].to_numpy(dtype=np.int64)[mine]
    return frame, (record_rows, sorted_row[joined[group[mine]]])


def _op_types(names: list[str], types: dict[str, str], executed: Executed) -> list[str]:
    """``executed.type[name] or types.get(name, "")`` per op; ``names`` start with the
    executed graph's nodes in its own order (``_outer_join_graph_nodes``), so their types are
    ``executed.type``'s values as they are, without a lookup per op."""
    n_nodes = len(executed.device)
    graph_types = list(executed.type.values())
    if len(graph_types) != n_nodes or list(executed.type) != names[:n_nodes]:
        executed_type = executed.type.get
        return [executed_type(n) or types.get(n, "") for n in names]
    if "" in graph_types:
        graph_types = [t or types.get(n, "") for n, t in zip(names, graph_types, strict=False)]
    executed_type = executed.type.get
    return graph_types + [executed_type(n) or types.get(n, "") for n in names[n_nodes:]]


def _record_stats(
    timed: pd.DataFrame,
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """``timed.groupby(["op", "device"], sort=False)``'s first start, summed duration and
    count, on factorized codes: groups in order of first appearance, int64 columns; and each
    row of ``timed``'s group (-1: a missing key, in no group)."""
    op_codes, op_values = pd.factorize(timed["op"].to_numpy(dtype=object))
    device_codes, device_values = pd.factorize(timed["device"].to_numpy(dtype=object))
    keep = (op_codes >= 0) & (device_codes >= 0)  # groupby drops missing keys
    if not keep.all():
        op_codes, device_codes = op_codes[keep], device_codes[keep]
    key = op_codes.astype(np.int64) * max(1, len(device_values)) + device_codes
    group, _ = pd.factorize(key)
    order = np.argsort(group, kind="stable")
    sorted_group = group[order]
    bounds = np.flatnonzero(np.r_[True, sorted_group[1:] != sorted_group[:-1]][: len(order)])
    first = order[bounds]  # each group's first record (groups are numbered by it)
    start = timed["start_us"].to_numpy()
    duration = timed["duration_us"].to_numpy()
    if not keep.all():
        start, duration = start[keep], duration[keep]
    stats = {
        "start_us": np.minimum.reduceat(start[order], bounds) if len(order) else start[:0],
        "duration_us": np.add.reduceat(duration[order], bounds) if len(order) else duration[:0],
        "runs": np.diff(np.r_[bounds, len(order)]).astype(np.int64),
    }
    ops = np.asarray(op_values, dtype=object)[op_codes[first]]
    devices = np.asarray(device_values, dtype=object)[device_codes[first]]
    group_of_row = np.full(len(keep), -1, dtype=np.int64)
    group_of_row[keep] = group
    return ops, devices, stats, group_of_row


def _output_bytes(names: list[str], out_bytes: dict[str, Sequence[int]]) -> Any:
    """Each op's summed output sizes, <NA> when none was recorded (an Int64 array)."""
    # One dict look-up per op (no index of 100k names); most ops have one output.
    sizes = map(out_bytes.get, names, repeat(None))
    totals = np.fromiter(
        (_NO_SIZE if s is None else s[0] if len(s) == 1 else sum(s) for s in sizes),
        np.int64,
        len(names),
    )
    missing = totals == _NO_SIZE
    totals[missing] = 0
    return pd.arrays.IntegerArray(totals, missing)


_NO_SIZE = np.iinfo(np.int64).min  # an op without recorded outputs, in ``_output_bytes``


def _ops_frame_from_records(
    timed: pd.DataFrame,
    types: dict[str, str],
    out_bytes: dict[str, Sequence[int]],
    executed: Executed,
) -> pd.DataFrame:
    """``_ops_frame`` without an executed graph (Chrome traces): pandas' groupby and merge."""
    grouped = timed.groupby(["op", "device"], sort=False)
    stats = pd.DataFrame(
        {
            "start_us": grouped["start_us"].min(),
            "duration_us": grouped["duration_us"].sum(),
            "runs": grouped.size(),
        }
    ).reset_index()
    graph_nodes = pd.DataFrame({"op": [], "device": []}, dtype=object)
    ops = graph_nodes.merge(stats, on=["op", "device"], how="outer", sort=False)
    ops["device"] = ops["device"].fillna("").astype(object)
    names = ops["op"].tolist()
    executed_type = executed.type.get
    ops["type"] = [executed_type(n) or types.get(n, "") for n in names]
    ops["runs"] = ops["runs"].astype("Int64")
    ops["output_bytes"] = _output_bytes(names, out_bytes)
    # By first start (never-run ops last), then name, then device.
    order = _start_name_order(
        ops["start_us"].fillna(np.inf).to_numpy(),
        ops["op"].to_numpy(dtype=object),
        ops["device"].to_numpy(dtype=object),
    )
    return ops.iloc[order].reset_index(drop=True)


def _start_name_order(start: np.ndarray, op: np.ndarray, device: np.ndarray) -> np.ndarray:
    """``np.lexsort((device, op, start))`` with the names compared as ``str``: the rows sorted
    by ``start`` (numbers, fast), and only the rows sharing a start (never-run ops, at inf, and
    ops that started in the same µs) sorted again with their names, which is the slow part
    (100k ops: 99k distinct starts, 77k rows in ties; 100 against 230 ms)."""
    order = np.argsort(start, kind="stable")
    ordered = start[order]
    same = ordered[1:] == ordered[:-1]
    tied = np.flatnonzero(np.r_[same, False] | np.r_[False, same])
    if len(tied):  # a tie group is a run of positions: sorted again in place
        rows = order[tied]
        order[tied] = rows[
            np.lexsort((device[rows].astype(str), op[rows].astype(str), start[rows]))
        ]
    return order


def _outer_join_graph_nodes(
    device_of: dict[str, str],
    stat_ops: np.ndarray,
    stat_devices: np.ndarray,
    stats: dict[str, np.ndarray],
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """``merge(how="outer")`` of the executed graph's (op, device) with the record stats, as
    columns; and each stats row's row in them.

    The same rows, columns and dtypes as pandas' merge (time columns become float64 only when
    some node has no record), without its cost on 100k ops: graph nodes are unique by name,
    so one hash lookup per stats row finds its node.
    """
    names = np.array(list(device_of), dtype=object)
    devices = np.array(list(device_of.values()), dtype=object)
    position = pd.Index(names, dtype=object).get_indexer(pd.Index(stat_ops, dtype=object))
    hit = position >= 0
    hit[hit] = devices[position[hit]] == stat_devices[hit]
    extra = ~hit
    n_nodes = len(names)
    columns: dict[str, Any] = {
        "op": np.concatenate([names, stat_ops[extra]]),
        "device": np.concatenate([devices, stat_devices[extra]]),
    }
    complete = int(hit.sum()) == n_nodes
    for column in ("start_us", "duration_us", "runs"):
        values = stats[column]
        joined = np.empty(n_nodes + int(extra.sum()), dtype=values.dtype if complete else float)
        if not complete:
            joined[:n_nodes] = np.nan
        joined[position[hit]] = values[hit]
        joined[n_nodes:] = values[extra]
        columns[column] = joined
    row = np.empty(len(stat_ops), dtype=np.int64)
    row[hit] = position[hit]
    row[extra] = n_nodes + np.arange(int(extra.sum()))
    return columns, row


def _transfers_frame(
    executed: Executed, events: pd.DataFrame, out_bytes: dict[str, Sequence[int]]
) -> pd.DataFrame:
    rows = list(executed.transfers)
    sizes = [_tensor_bytes(tensor, out_bytes) for tensor, _, _ in rows]
    if not rows:
        rows, sizes = _copies_from_memcpy(events)
    frame = pd.DataFrame(rows, columns=TRANSFERS_COLUMNS[:3])
    frame["bytes"] = pd.array(sizes, dtype="Int64")
    frame["cross_task"] = cross_task(frame)
    return frame


def cross_task(transfers: pd.DataFrame) -> np.ndarray:
    """Per transfer: do its source and destination sit on different tasks of a cluster
    (another job, replica or task: the tensor goes over the network, not through memory)?"""
    return crosses_tasks(transfers["src_device"].tolist(), transfers["dst_device"].tolist())


def _tensor_bytes(tensor: str, out_bytes: dict[str, Sequence[int]]) -> Any:
    op, _, slot = tensor.rpartition(":")
    sizes = out_bytes.get(op)
    index = int(slot) if slot.isdigit() else 0
    return sizes[index] if sizes and index < len(sizes) else pd.NA


_COPY_DIRECTIONS = {
    "htod": ("host", "gpu"),
    "h2d": ("host", "gpu"),
    "dtoh": ("gpu", "host"),
    "d2h": ("gpu", "host"),
}


def _copies_from_memcpy(events: pd.DataFrame) -> tuple[list, list]:
    """Host<->GPU copies recorded on memcpy lanes (traces without partition graphs).

    One row per copied edge, like the partition-graph path: a copy repeated by loops or by
    merged runs (same copy name, same direction) is listed once. ``tensor`` is the copy's
    record name, e.g. TF 1.x's ``edge_22_MatMul`` (the ``_Send``'s ``tensor_name``).
    """
    copies = events[events["lane_kind"] == "memcpy"]
    rows, sizes = [], []
    seen: set[tuple[str, str, str]] = set()
    for op, device, label in zip(copies["op"], copies["device"], copies["label"], strict=True):
        direction = _copy_direction(label + " " + op)
        if direction is None:
            continue
        host = re.sub(r"device:[A-Z_]+:\d+$", "device:CPU:0", device)
        src, dst = (host, device) if direction[0] == "host" else (device, host)
        if (op, src, dst) in seen:
            continue
        seen.add((op, src, dst))
        rows.append((op, src, dst))
        sizes.append(pd.NA)
    return rows, sizes


def _copy_direction(text: str) -> tuple[str, str] | None:
    low = text.lower()
    for key, direction in _COPY_DIRECTIONS.items():
        if key in low:
            return direction
    return None


def _inputs_from_labels(events: pd.DataFrame) -> dict[str, list[str]]:
    """Inputs read from ``name = Type(in1, in2)`` labels, for traces without graphs."""
    inputs: dict[str, list[str]] = {}
    for op, label in zip(events["op"], events["label"], strict=True):
        if op in inputs:
            continue
        _, _, rest = label.partition("(")
        inputs[op] = [
            producer(i.strip())
            for i in rest.rstrip(")").split(",")
            if i.strip() and not i.strip().startswith("^")
        ]
    return inputs
