"""Two placements side by side: which ops moved, which transfers came or went, what it cost.

``compare(a, b)`` matches ops by name; a name whose op type changed (a variable that became
the ``Identity`` joining its partitions, an op Grappler folded into a ``Const``) is ``replaced``,
not moved: it is another op. Names the runtime makes with counters when it partitions a graph (``A/_0`` for the
``_Send`` of ``A``, ``A/_4`` in another run; ``A/ctrl/_5`` and ``A/_6`` for the ``Const`` and
``Identity`` that carry a control edge) are matched by what they connect instead: their type,
the op they serve and their device, so a renumbering is not reported as one op removed and
another added, nor as an op moved; those left over (their op moved, and they with it) are
paired in order by type and op, and are ``moved``. Transfers are matched by tensor, source and destination; one
in both runs whose size or number of copies differs is ``changed``. Pure pandas: no widgets,
no TensorFlow.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._model.devices import short_device
from .._model.trace import PlacementTrace
from .summary import device_summaries, format_bytes, format_us, transfer_bytes_text

STATUS_VALUES = ("same", "moved", "replaced", "only_a", "only_b")
OPS_COLUMNS = [
    "op",
    "type",
    "device_a",
    "device_b",
    "how_a",
    "how_b",
    "status",
    "duration_a_us",
    "duration_b_us",
    "delta_us",
    "type_a",  # "type" is b's (a's for an op only in a): they differ for a replaced op
]
TRANSFER_STATUS_VALUES = ("changed", "same", "only_a", "only_b")
TRANSFERS_COLUMNS = [
    "tensor",
    "src_device",
    "dst_device",
    "status",
    "bytes_a",
    "bytes_b",
    "count_a",  # how many times the run copied it (0: not in that run)
    "count_b",
]
DEVICES_COLUMNS = ["device", "ops_a", "ops_b", "busy_a_us", "busy_b_us", "delta_busy_us"]

_RUNTIME_COUNTER = re.compile(r"^(?P<base>.+)/_\d+$")
# the types graph partitioning adds under counted names (graph_partition.cc: AddSend, AddRecv,
# and a control edge's AddDummyConst and the Identity after its _Recv)
_COUNTED_TYPES = {"_Send", "_Recv", "_HostSend", "_HostRecv", "Const", "Identity"}
# oneDNN's rewrite of an op (_MklMatMul, _MklNativeConv2D) runs the same op: a trace records the
# rewritten type, a prediction the graph's.
_ONEDNN_PREFIX = re.compile(r"^_Mkl(Native)?")


@dataclass(eq=False)
class PlacementDiff:
    """What changed from trace ``a`` to trace ``b`` (see :func:`compare`)."""

    ops: pd.DataFrame
    transfers: pd.DataFrame
    devices: pd.DataFrame
    summary: str
    a: PlacementTrace = field(repr=False)
    b: PlacementTrace = field(repr=False)

    def __repr__(self) -> str:
        counts = self.ops["status"].value_counts()
        parts = ", ".join(f"{counts.get(s, 0)} {s}" for s in STATUS_VALUES)
        changed = int((self.transfers["status"] == "changed").sum())
        return (
            f"PlacementDiff({parts}; {len(self.transfers)} transfers, "
            f"{changed} changed transfer{'s' * (changed != 1)})"
        )

    @property
    def moved(self) -> pd.DataFrame:
        """The rows of ``ops`` whose device changed."""
        return self.ops[self.ops["status"] == "moved"]


def compare(
    a: Any, b: Any, *, trace: Callable[[Any], PlacementTrace] | None = None
) -> PlacementDiff:
    """Compare two placements: ``a`` and ``b`` are ``PlacementTrace``s, or anything ``trace``
    turns into one (the package's ``compare`` passes what ``show_placement`` accepts)."""
    a, b = (_as_trace(x, trace, name) for x, name in ((a, "a"), (b, "b")))
    ops = _ops_diff(a, b)
    transfers = _transfers_diff(a, b)
    devices = _devices_diff(a, b)
    return PlacementDiff(ops, transfers, devices, _summary(a, b, ops, transfers), a, b)


def _as_trace(value: Any, trace: Callable[[Any], PlacementTrace] | None, name: str) -> Any:
    if isinstance(value, PlacementTrace):
        return value
    if trace is None:
        raise TypeError(
            f"compare() takes two PlacementTrace objects; {name} is a {type(value).__name__}. "
            "Trace it first with trace_placement(...), or call tfplace_widget.compare, which "
            "traces functions and loads files itself."
        )
    return trace(value)


def _match_keys(a: pd.DataFrame, b: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """A key per row of ``a`` and of ``b`` that is the same for "the same op" in the other run
    of the same code, as a number shared by both sides: its name; for a name the runtime made
    with a counter (:data:`_COUNTED_TYPES`), its type, the op it serves, its device and which
    of those it is; for a name repeated in a run (``_SOURCE``: one per device), its name, device
    and which. Numbers, not names, are merged: pandas 3.0's string merge loses keys that
    differ after a NUL character. A runtime-made op whose key is in one run only takes the key
    of one of the other run of the same type and op, in order: the op it serves moved, and it
    with it. Array operations throughout: a trace has a million rows."""
    both = pd.DataFrame(
        {
            "op": pd.concat([a["op"], b["op"]], ignore_index=True).astype(object),
            "type": pd.concat([a["type"], b["type"]], ignore_index=True).astype(object),
            "device": pd.concat([a["device"], b["device"]], ignore_index=True).astype(object),
            "side": np.repeat([0, 1], [len(a), len(b)]),
        }
    ).fillna({"type": "", "device": ""})
    counted = both["type"].isin(_COUNTED_TYPES).to_numpy().copy()
    counted[counted] = both["op"][counted].str.contains(r"/_\d+$", na=False).to_numpy(bool)
    repeated = both.duplicated(["side", "op"], keep=False).to_numpy() & ~counted
    special = counted | repeated
    codes = np.empty(len(both), dtype=np.int64)
    plain_codes, plain = pd.factorize(both["op"].to_numpy()[~special])
    codes[~special] = plain_codes
    parts = both[special]
    served = parts["op"].where(
        ~counted[special], parts["op"].str.replace(r"/_\d+$", "", regex=True)
    )
    group = pd.DataFrame(
        {
            "side": parts["side"],
            "kind": parts["type"].where(counted[special], ""),  # a counted type is never ""
            "served": served,
            "device": parts["device"],
        }
    )
    group["nth"] = group.groupby(["side", "kind", "served", "device"], sort=False).cumcount()
    keys = group.groupby(["kind", "served", "device", "nth"], sort=False).ngroup()
    codes[special] = keys.to_numpy() + len(plain)
    _pair_leftovers(codes, counted, both["side"].to_numpy(), group, counted[special])
    return codes[: len(a)], codes[len(a) :]


def _pair_leftovers(
    codes: np.ndarray, counted: np.ndarray, side: np.ndarray, group: pd.DataFrame, kinds: np.ndarray
) -> None:
    """Give each runtime-made row of ``b`` whose key ``a`` lacks the key of a row of ``a`` of
    the same type and op whose key ``b`` lacks, pairing them in order (in place)."""
    in_a, in_b = codes[counted & (side == 0)], codes[counted & (side == 1)]
    left = counted & (((side == 0) & ~np.isin(codes, in_b)) | ((side == 1) & ~np.isin(codes, in_a)))
    if not left.any():
        return
    rows = group[kinds][["side", "kind", "served"]].assign(row=np.flatnonzero(counted))
    rows = rows[left[rows["row"].to_numpy()]]
    rows["rank"] = rows.groupby(["side", "kind", "served"], sort=False).cumcount()
    key = ["kind", "served", "rank"]
    pairs = rows[rows["side"] == 1].merge(rows[rows["side"] == 0], on=key, suffixes=("", "_a"))
    codes[pairs["row"].to_numpy()] = codes[pairs["row_a"].to_numpy()]


def _without_onednn_prefix(types: pd.Series) -> pd.Series:
    """``types`` as text ("" where missing) without oneDNN's ``_Mkl`` prefix, each distinct
    type rewritten once (a large trace has hundreds of thousands of rows, a few hundred types)."""
    codes, uniques = pd.factorize(types.fillna("").astype(str))
    stripped = np.array([_ONEDNN_PREFIX.sub("", u) for u in uniques], dtype=object)
    return pd.Series(stripped[codes], index=types.index, dtype=object)


def _ops_diff(a: PlacementTrace, b: PlacementTrace) -> pd.DataFrame:
    columns = ["op", "type", "device", "how", "duration_us"]
    keys_a, keys_b = _match_keys(a.ops, b.ops)
    left = a.ops[columns].assign(_key=keys_a)
    right = b.ops[columns].assign(_key=keys_b)
    merged = left.merge(right, on="_key", how="outer", suffixes=("_a", "_b"), sort=False)
    in_a, in_b = merged["op_a"].notna(), merged["op_b"].notna()
    type_a, type_b = (_without_onednn_prefix(merged[column]) for column in ("type_a", "type_b"))
    other_op = (type_a != type_b) & (type_a != "") & (type_b != "")
    status = np.select(
        [
            in_a & in_b & other_op,
            in_a & in_b & (merged["device_a"] == merged["device_b"]),
            in_a & in_b,
            in_a,
        ],
        ["replaced", "same", "moved", "only_a"],
        default="only_b",
    )
    duration_a = pd.to_numeric(merged["duration_us_a"], errors="coerce").astype("Float64")
    duration_b = pd.to_numeric(merged["duration_us_b"], errors="coerce").astype("Float64")
    out = pd.DataFrame(
        {
            # b's name when both ran: the newer run is the one the user looks at
            "op": merged["op_b"].where(in_b, merged["op_a"]),
            "type": merged["type_b"].where(in_b, merged["type_a"]),
            "device_a": merged["device_a"].fillna(""),
            "device_b": merged["device_b"].fillna(""),
            "how_a": merged["how_a"].astype(object).fillna(""),
            "how_b": merged["how_b"].astype(object).fillna(""),
            "status": pd.Categorical(status, categories=list(STATUS_VALUES)),
            "duration_a_us": duration_a,
            "duration_b_us": duration_b,
            "delta_us": duration_b - duration_a,
            "type_a": merged["type_a"].astype(object).fillna(""),
        }
    )
    order = {"moved": 0, "replaced": 1, "only_a": 2, "only_b": 3, "same": 4}
    rank = out["status"].astype(str).map(order)
    return (
        out.assign(_rank=rank)
        .sort_values(["_rank", "op"], kind="stable")
        .drop(columns="_rank")
        .reset_index(drop=True)[OPS_COLUMNS]
    )


def _transfers_diff(a: PlacementTrace, b: PlacementTrace) -> pd.DataFrame:
    """One row per (tensor, source, destination): its bytes (a copy's size) and its number of
    copies in each run; ``changed`` when both ran it with another known size or count."""
    key = ["tensor", "src_device", "dst_device"]
    left, right = (_transfer_sides(t.transfers, key) for t in (a, b))
    merged = left.merge(right, on=key, how="outer", suffixes=("_a", "_b"), indicator=True)
    bytes_a, bytes_b = merged["bytes_a"].astype("Int64"), merged["bytes_b"].astype("Int64")
    count_a = merged["count_a"].fillna(0).astype("int64")
    count_b = merged["count_b"].fillna(0).astype("int64")
    other_size = (bytes_a != bytes_b).fillna(False).to_numpy(dtype=bool)  # unknown: not a change
    both = (merged["_merge"] == "both").to_numpy()
    status = np.select(
        [
            both & (other_size | (count_a != count_b).to_numpy()),
            both,
            merged["_merge"] == "left_only",
        ],
        ["changed", "same", "only_a"],
        default="only_b",
    )
    out = merged[key].assign(
        status=pd.Categorical(status, categories=list(TRANSFER_STATUS_VALUES)),
        bytes_a=bytes_a,
        bytes_b=bytes_b,
        count_a=count_a,
        count_b=count_b,
    )
    return out.sort_values(["status", "tensor"], kind="stable").reset_index(drop=True)[
        TRANSFERS_COLUMNS
    ]


def _transfer_sides(transfers: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """Per key, the first copy's bytes and the number of copies."""
    grouped = transfers.groupby(key, sort=False, dropna=False)
    return grouped["bytes"].first().to_frame("bytes").assign(count=grouped.size()).reset_index()


def _devices_diff(a: PlacementTrace, b: PlacementTrace) -> pd.DataFrame:
    devices = list(dict.fromkeys([*a.devices, *b.devices]))
    side_a = {s.device: s for s in device_summaries(a.ops, a.events, devices)}
    side_b = {s.device: s for s in device_summaries(b.ops, b.events, devices)}
    rows = [
        (
            d,
            side_a[d].ops,
            side_b[d].ops,
            side_a[d].busy_us,
            side_b[d].busy_us,
            side_b[d].busy_us - side_a[d].busy_us,
        )
        for d in devices
    ]
    return pd.DataFrame(rows, columns=DEVICES_COLUMNS)


def step_time_us(trace: PlacementTrace) -> float | None:
    """From the first start to the last end of the trace's events (None without events)."""
    events = trace.events
    if events.empty:
        return None
    ends = events["start_us"] + events["duration_us"]
    return float(ends.max() - events["start_us"].min())


def _between_tasks(trace: PlacementTrace) -> pd.DataFrame:
    """The transfers between tasks of a cluster (``cross_task``), over the network."""
    transfers = trace.transfers
    if "cross_task" not in transfers:
        return transfers.iloc[:0]
    return transfers[transfers["cross_task"].fillna(False).astype(bool)]


def _summary(
    a: PlacementTrace, b: PlacementTrace, ops: pd.DataFrame, transfers: pd.DataFrame
) -> str:
    moved = ops[ops["status"] == "moved"]
    parts = []
    if len(moved):
        runtime = _runtime_made(moved)
        first = pd.concat([moved[~runtime], moved[runtime]]).head(3)  # the code's own ops first
        shown = ", ".join(
            f"{op} ({short_device(da)} -> {short_device(db)})"
            for op, da, db in zip(first["op"], first["device_a"], first["device_b"], strict=True)
        )
        more = f" and {len(moved) - 3} more" if len(moved) > 3 else ""
        if runtime.any():
            more += (
                f" ({int(runtime.sum())} of them the runtime's sends, receives and "
                "control-edge ops, moved with the ops they serve)"
            )
        parts.append(f"{len(moved)} op{'s' * (len(moved) != 1)} moved: {shown}{more}.")
    else:
        parts.append("No op moved.")
    replaced = ops[ops["status"] == "replaced"]
    if len(replaced):
        shown = ", ".join(
            f"{op} ({ta} on {short_device(da)} -> {tb} on {short_device(db)})"
            for op, ta, tb, da, db in zip(
                replaced["op"][:3],
                replaced["type_a"][:3],
                replaced["type"][:3],
                replaced["device_a"][:3],
                replaced["device_b"][:3],
                strict=True,
            )
        )
        more = f" and {len(replaced) - 3} more" if len(replaced) > 3 else ""
        parts.append(
            f"{len(replaced)} name{'s' * (len(replaced) != 1)} now another op: {shown}{more}."
        )
    only_a, only_b = (int((ops["status"] == s).sum()) for s in ("only_a", "only_b"))
    if only_a or only_b:
        parts.append(f"{only_a} ops only in a, {only_b} only in b.")
    for status, word in (("only_b", "added"), ("only_a", "removed")):
        rows = transfers[transfers["status"] == status]
        if len(rows):
            column = "bytes_b" if status == "only_b" else "bytes_a"
            parts.append(
                f"{len(rows)} transfer{'s' * (len(rows) != 1)} {word} "
                f"({transfer_bytes_text(rows[[column]].set_axis(['bytes'], axis=1))})."
            )
    changed = transfers[transfers["status"] == "changed"]
    if len(changed):
        parts.append(_changed_transfers_text(changed))
    crossing_a, crossing_b = (_between_tasks(t) for t in (a, b))
    if len(crossing_a) or len(crossing_b):
        parts.append(
            f"Sent between tasks: a {transfer_bytes_text(crossing_a) if len(crossing_a) else 'nothing'}"
            f", b {transfer_bytes_text(crossing_b) if len(crossing_b) else 'nothing'}."
        )
    step_a, step_b = step_time_us(a), step_time_us(b)
    if step_a is not None and step_b is not None:
        change = f" ({(step_b - step_a) / step_a:+.0%})" if step_a else ""
        parts.append(f"Step time: a {format_us(step_a)}, b {format_us(step_b)}{change}.")
    return " ".join(parts)


def _runtime_made(ops: pd.DataFrame) -> pd.Series:
    """Which rows are ops graph partitioning made under a counted name (:data:`_COUNTED_TYPES`)."""
    return ops["type"].isin(_COUNTED_TYPES) & ops["op"].str.contains(r"/_\d+$")


def _changed_transfers_text(changed: pd.DataFrame) -> str:
    """``2 transfers changed: A:0 (CPU:0 -> CPU:1) 4.0 kB -> 8.0 kB, ...``."""

    def side(size: Any, count: int) -> str:
        text = "size not recorded" if pd.isna(size) else format_bytes(float(size))
        return text if count == 1 else f"{count} x {text}"

    shown = ", ".join(
        f"{row.tensor} ({short_device(row.src_device)} -> {short_device(row.dst_device)}) "
        f"{side(row.bytes_a, row.count_a)} -> {side(row.bytes_b, row.count_b)}"
        for row in changed.head(3).itertuples()
    )
    more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
    return f"{len(changed)} transfer{'s' * (len(changed) != 1)} changed: {shown}{more}."
