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

_COUNTER = re.compile(r"/_\d+$")
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


def _codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize`` of ``values``: a number per distinct value in order of first
    appearance (-1 for a missing one), and the distinct values."""
    codes, uniques = pd.factorize(values)
    return codes.astype(np.int64, copy=False), np.asarray(uniques, dtype=object)


def _first_seen(*columns: np.ndarray) -> np.ndarray:
    """A number per distinct tuple of the integer ``columns`` (each >= -1), in order of first
    appearance: what ``groupby(columns, sort=False).ngroup()`` gives, without a tuple per row."""
    key = np.zeros(len(columns[0]), dtype=np.int64)
    bound = 1
    for column in columns:
        span = int(column.max(initial=-1)) + 2
        if bound * span >= 2**62:  # renumber what is combined so far, to stay in int64
            key, bound = pd.factorize(key)[0].astype(np.int64, copy=False), len(key) + 1
        key, bound = key * span + column + 1, bound * span
    return pd.factorize(key)[0].astype(np.int64, copy=False)


def _nth(group: np.ndarray) -> np.ndarray:
    """Each row's position among the earlier rows of its ``group`` (``cumcount``)."""
    order = np.argsort(group, kind="stable")
    sorted_group = group[order]
    starts = np.flatnonzero(np.r_[True, sorted_group[1:] != sorted_group[:-1]])
    sizes = np.diff(np.r_[starts, len(group)])
    nth = np.empty(len(group), dtype=np.int64)
    nth[order] = np.arange(len(group)) - np.repeat(starts, sizes)
    return nth


def _match_keys(
    a: pd.DataFrame, b: pd.DataFrame
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A key per row of ``a`` and of ``b`` that is the same for "the same op" in the other run
    of the same code, as a number shared by both sides: its name; for a name the runtime made
    with a counter (:data:`_COUNTED_TYPES`), its type, the op it serves, its device and which
    of those it is; for a name repeated in a run (``_SOURCE``: one per device), its name, device
    and which. Numbers, not names, are matched: pandas 3.0's string merge loses keys that
    differ after a NUL character. A runtime-made op whose key is in one run only takes the key
    of one of the other run of the same type and op, in order: the op it serves moved, and it
    with it. Also each row's name, type ("" where missing) and device as numbers shared by
    both sides (-1: missing), and the distinct names and types. Integer arrays throughout,
    each name hashed once: a trace has a million rows."""
    n_a = len(a)
    names = np.concatenate([a["op"].to_numpy(dtype=object), b["op"].to_numpy(dtype=object)])
    types = pd.concat([a["type"], b["type"]], ignore_index=True).astype(object).fillna("")
    devices = pd.concat([a["device"], b["device"]], ignore_index=True).to_numpy(dtype=object)
    side = np.repeat(np.array([0, 1], dtype=np.int64), [n_a, len(b)])
    name_codes, name_list = _codes(names)
    type_codes, type_list = _codes(types.to_numpy())
    device_codes, device_list = _codes(devices)
    counted = np.isin(type_codes, [i for i, t in enumerate(type_list) if t in _COUNTED_TYPES])
    served = names.copy()
    rows = np.flatnonzero(counted)
    found, served[rows] = _served(names[rows].tolist())
    counted[rows[~found]] = False
    # a name twice or more on one side (missing names count as one name, as in ``duplicated``)
    named = np.where(name_codes < 0, len(name_list), name_codes)
    per_side = side * (len(name_list) + 1) + named
    repeated = (np.bincount(per_side)[per_side] > 1) & ~counted
    special = counted | repeated
    codes = np.empty(len(names), dtype=np.int64)
    plain = name_codes[~special]
    known = plain >= 0
    plain_codes = np.full(len(plain), -1, dtype=np.int64)
    plain_codes[known], plain_list = pd.factorize(plain[known])
    codes[~special] = plain_codes
    kind = np.where(counted, type_codes, -1)[special]  # the type only for a counted name
    served_codes = _codes(served[special])[0]
    # a missing device groups with "" (as the frame's ``fillna("")`` made them one)
    empty = np.flatnonzero(device_list == "")
    filled = np.where(device_codes < 0, empty[0] if len(empty) else len(device_list), device_codes)
    place = filled[special]
    nth = _nth(_first_seen(side[special], kind, served_codes, place))
    codes[special] = _first_seen(kind, served_codes, place, nth) + len(plain_list)
    _pair_leftovers(codes, counted, side, kind[counted[special]], served_codes[counted[special]])
    coded = {"op": name_codes, "type": type_codes, "device": device_codes}
    return codes[:n_a], codes[n_a:], coded, {"op": name_list, "type": type_list}


def _served(names: list[Any]) -> tuple[np.ndarray, list[Any]]:
    """Which ``names`` end in a runtime counter (:data:`_COUNTER`), and each name without it
    (the op it serves; the name itself where there is none). Without a newline (where
    ``$`` also matches) that is the text after the last ``/_`` being decimal digits (what
    ``\\d`` matches): no regex call per name."""
    try:
        plain = "\n" not in "".join(names)
    except TypeError:  # a missing name
        plain = False
    if plain:
        parts = [name.rpartition("/_") for name in names]
        hits = [bool(sep) and tail.isdecimal() for _, sep, tail in parts]
        served = [
            head if hit else name
            for (head, _, _), hit, name in zip(parts, hits, names, strict=True)
        ]
        return np.array(hits, dtype=bool), served
    matches = [_COUNTER.search(n) if isinstance(n, str) else None for n in names]
    served = [
        n[: m.start()] + n[m.end() :] if m else n for n, m in zip(names, matches, strict=True)
    ]
    return np.array([m is not None for m in matches], dtype=bool), served


def _pair_leftovers(
    codes: np.ndarray, counted: np.ndarray, side: np.ndarray, kind: np.ndarray, served: np.ndarray
) -> None:
    """Give each runtime-made row of ``b`` whose key ``a`` lacks the key of a row of ``a`` of
    the same type and op whose key ``b`` lacks, pairing them in order (in place). ``kind`` and
    ``served``: the counted rows' type and served op, as numbers."""
    in_a, in_b = codes[counted & (side == 0)], codes[counted & (side == 1)]
    left = counted & (((side == 0) & ~np.isin(codes, in_b)) | ((side == 1) & ~np.isin(codes, in_a)))
    if not left.any():
        return
    rows = np.flatnonzero(counted)
    keep = left[rows]
    rows, kind, served, row_side = rows[keep], kind[keep], served[keep], side[rows[keep]]
    rank = _nth(_first_seen(row_side, kind, served))
    pair = _first_seen(kind, served, rank)
    from_a = row_side == 0
    found = pd.Index(pair[from_a]).get_indexer(pair[~from_a])
    paired = found >= 0
    codes[rows[~from_a][paired]] = codes[rows[from_a][found[paired]]]


# numpy's variable-width string dtype (numpy 2.0 and later; TensorFlow 2.16 runs numpy 1.26)
_VARIABLE_WIDTH_STRINGS = getattr(getattr(np, "dtypes", None), "StringDType", None)


def _name_order(names: np.ndarray) -> np.ndarray:
    """Each of the distinct ``names``' place in Python's order of strings (code points), as
    ``sort_values`` would put them: sorted as numpy's variable-width strings (UTF-8, compared
    in C: the same order) when all are text without a NUL (numpy 2.4 sorts those after
    the rest), else by Python (also before numpy 2.0, which has no such strings)."""
    text = names
    if _VARIABLE_WIDTH_STRINGS is not None:
        try:
            joined = "".join(names)  # a TypeError unless all are text (numpy converts the rest)
            if "\0" not in joined:
                text = names.astype(_VARIABLE_WIDTH_STRINGS())
        except (TypeError, UnicodeError):  # not all text, or unpaired surrogates
            text = names
    order = np.argsort(text, kind="stable")
    place = np.empty(len(names), dtype=np.int64)
    place[order] = np.arange(len(names))
    return place


def _taken(column: pd.Series, rows: np.ndarray) -> pd.Series:
    """``column``'s values at positions ``rows``, missing where a row is -1, in the dtype a
    ``reindex`` gives (an object column stays one: a new Series would infer text)."""
    if column.dtype == object:
        return pd.Series(
            pd.api.extensions.take(column.to_numpy(), rows, allow_fill=True), dtype=object
        )
    return pd.Series(pd.api.extensions.take(column.array, rows, allow_fill=True), copy=False)


def _ops_diff(a: PlacementTrace, b: PlacementTrace) -> pd.DataFrame:
    columns = ["op", "type", "device", "how", "duration_us"]
    keys_a, keys_b, coded, distinct = _match_keys(a.ops, b.ops)
    # one row per key, in the key's order (as an outer merge on it gives): which row of each
    # side has it (-1: none; a key is on at most one row of a side)
    size = int(max(keys_a.max(initial=-1), keys_b.max(initial=-1))) + 1
    row_a, row_b = np.full(size, -1, dtype=np.int64), np.full(size, -1, dtype=np.int64)
    row_a[keys_a], row_b[keys_b] = np.arange(len(keys_a)), np.arange(len(keys_b))
    present = (row_a >= 0) | (row_b >= 0)
    row_a, row_b = row_a[present], row_b[present]
    n_a = len(keys_a)
    # each row's codes on either side (-1 where that side lacks the key)
    side_codes = {
        name: (
            np.where(row_a >= 0, codes[:n_a][row_a], -1),
            np.where(row_b >= 0, codes[n_a:][row_b], -1),
        )
        for name, codes in coded.items()
    }
    in_a, in_b = (codes >= 0 for codes in side_codes["op"])  # a named op on that side
    # each distinct type once without oneDNN's prefix; "" for a missing type or row
    stripped = [_ONEDNN_PREFIX.sub("", str(t)) for t in distinct["type"]] + [""]
    stripped_codes, stripped_list = pd.factorize(np.array(stripped, dtype=object))
    nothing = stripped_codes[-1]
    type_a, type_b = (stripped_codes[codes] for codes in side_codes["type"])
    other_op = (type_a != type_b) & (type_a != nothing) & (type_b != nothing)
    device_a, device_b = side_codes["device"]
    status = np.select(  # codes of STATUS_VALUES
        [
            in_a & in_b & other_op,
            in_a & in_b & (device_a == device_b) & (device_a >= 0),
            in_a & in_b,
            in_a,
        ],
        [STATUS_VALUES.index(s) for s in ("replaced", "same", "moved", "only_a")],
        default=STATUS_VALUES.index("only_b"),
    )
    # by status (moved first, same last), then by name (a missing one last), else kept in
    # key order: each distinct name placed once, not the rows' names sorted by Python compares
    order = ("moved", "replaced", "only_a", "only_b", "same")
    rank = np.array([order.index(s) for s in STATUS_VALUES])[status]
    names = distinct["op"]
    name_place = np.append(_name_order(names), len(names))  # [-1]: a missing name
    codes_a, codes_b = side_codes["op"]
    rows = np.lexsort((name_place[np.where(in_b, codes_b, codes_a)], rank))
    row_a, row_b, in_b, status = row_a[rows], row_b[rows], in_b[rows], status[rows]
    # each side's columns on those rows, missing values where it lacks the key (as the merge)
    merged = {
        f"{column}_{name}": _taken(frame[column], at)
        for name, frame, at in (("a", a.ops, row_a), ("b", b.ops, row_b))
        for column in columns
    }
    duration_a = pd.to_numeric(merged["duration_us_a"], errors="coerce").astype("Float64")
    duration_b = pd.to_numeric(merged["duration_us_b"], errors="coerce").astype("Float64")
    in_b = pd.Series(in_b)
    return pd.DataFrame(
        {
            # b's name when both ran: the newer run is the one the user looks at
            "op": merged["op_b"].where(in_b, merged["op_a"]),
            "type": merged["type_b"].where(in_b, merged["type_a"]),
            "device_a": merged["device_a"].fillna(""),
            "device_b": merged["device_b"].fillna(""),
            "how_a": merged["how_a"].astype(object).fillna(""),
            "how_b": merged["how_b"].astype(object).fillna(""),
            "status": pd.Categorical.from_codes(status, categories=list(STATUS_VALUES)),
            "duration_a_us": duration_a,
            "duration_b_us": duration_b,
            "delta_us": duration_b - duration_a,
            "type_a": merged["type_a"].astype(object).fillna(""),
        }
    )[OPS_COLUMNS]


def _transfers_diff(a: PlacementTrace, b: PlacementTrace) -> pd.DataFrame:
    """One row per (tensor, source, destination): its bytes (a copy's size) and its number of
    copies in each run; ``changed`` when both ran it with another known size or count."""
    key = ["tensor", "src_device", "dst_device"]
    text = _text_dtype(a.transfers, b.transfers, key)
    if text is None:  # keys of other types than text: pandas' groupby and merge decide
        return _transfers_diff_by_merge(a, b, key)
    n_a = len(a.transfers)
    columns = [
        pd.concat([a.transfers[c], b.transfers[c]], ignore_index=True).to_numpy(dtype=object)
        for c in key
    ]
    coded = [_codes(column) for column in columns]
    group = _first_seen(*(codes for codes, _ in coded))
    size = int(group.max(initial=-1)) + 1
    sides = []
    for rows, transfers in ((group[:n_a], a.transfers), (group[n_a:], b.transfers)):
        count = np.bincount(rows, minlength=size)
        first = np.full(size, -1, dtype=np.int64)  # the first row of each key with a size
        known = np.flatnonzero(transfers["bytes"].notna().to_numpy())[::-1]
        first[rows[known]] = known
        sizes = pd.api.extensions.take(transfers["bytes"].array, first, allow_fill=True)
        sides.append((pd.Series(sizes).astype("Int64"), count))
    (bytes_a, count_a), (bytes_b, count_b) = sides
    in_a, in_b = count_a > 0, count_b > 0
    both = in_a & in_b
    other_size = (bytes_a != bytes_b).fillna(False).to_numpy(dtype=bool)  # unknown: no change
    status = np.select(
        [both & (other_size | (count_a != count_b)), both, in_a],
        [0, 1, 2],  # TRANSFER_STATUS_VALUES: changed, same, only_a; else only_b
        default=3,
    )
    # by status, then by key (an outer merge's order: each part in Python's order of
    # strings, a missing one last)
    places = [np.append(_name_order(uniques), len(uniques))[codes] for codes, uniques in coded]
    first_row = np.full(size, -1, dtype=np.int64)
    first_row[group[::-1]] = np.arange(len(group))[::-1]
    rows = np.lexsort([place[first_row] for place in places[::-1]] + [status])
    out = pd.DataFrame(
        {
            name: pd.array(column[first_row[rows]], dtype=text)
            for name, column in zip(key, columns, strict=True)
        }
    )
    return out.assign(
        status=pd.Categorical.from_codes(status[rows], categories=list(TRANSFER_STATUS_VALUES)),
        bytes_a=bytes_a.take(rows).reset_index(drop=True),
        bytes_b=bytes_b.take(rows).reset_index(drop=True),
        count_a=count_a[rows],
        count_b=count_b[rows],
    )[TRANSFERS_COLUMNS]


def _text_dtype(a: pd.DataFrame, b: pd.DataFrame, key: list[str]) -> Any:
    """The dtype pandas gives the ``key`` columns of the diff of transfers ``a`` and ``b``
    when it is the same text dtype for all (a text column, or object columns of text, which
    a groupby infers as text); None otherwise."""
    found = set()
    for frame in (a, b):
        for name in key:
            column = frame[name]
            if column.dtype == object and pd.api.types.infer_dtype(column) == "string":
                found.add(pd.StringDtype(na_value=np.nan))
            else:
                found.add(column.dtype)
    text = found.pop() if len(found) == 1 else None
    return text if isinstance(text, pd.StringDtype) else None


def _transfers_diff_by_merge(a: PlacementTrace, b: PlacementTrace, key: list[str]) -> pd.DataFrame:
    """One row per (tensor, source, destination): its bytes (a copy's size) and its number of
    copies in each run; ``changed`` when both ran it with another known size or count."""
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
