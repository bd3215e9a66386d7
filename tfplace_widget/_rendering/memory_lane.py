"""The timeline's memory lane and the memory peaks' lines: what each device held over the step.

Pure functions of ``trace.memory`` (TensorFlow's allocator records) and of
:func:`~tfplace_widget._analyses.memory.memory_peaks`: no widget, no state. The lane is one step
curve of live bytes per device and allocator, in the device's colour, on a y axis of its own
under the ops' lanes, with its peak marked and labelled; the figure (``figure.TimelineFigure``)
draws it in the panel and the HTML report, the snapshot (``snapshot.timeline_svg``) as SVG.
A curve has at most ``MAX_MEMORY_POINTS`` points whatever the number of records: past that, the
records are cut into runs of consecutive ones and each run keeps its first, lowest, highest
and last point (the step shape and every local extreme survive; the peak is always one).
The peaks' lines (:func:`memory_items`) are what the panel's, the report's (both drawn by
``_static/memory.js``) and the snapshot's list say: per device, its peak, when, and the ops
that hold it with why they are on that device.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from .._analyses.memory import memory_peaks, memory_series, peak_holder_rows
from .._analyses.summary import format_bytes, format_us
from .._model.devices import short_device
from .._model.memory import name_codes
from .colors import device_color

MAX_MEMORY_POINTS = 2_000  # per device and allocator: what one curve of the lane draws
MAX_HELD_OPS = 8  # ops named per peak (the most bytes first); the rest are counted
MAX_MEMORY_ROWS = 8  # devices drawn in the lane, one row each (the largest peaks)
MEMORY_ROW_PX = 70  # a device's row in the lane
MEMORY_GAP_PX = 14


@dataclass(frozen=True)
class MemoryCurve:
    """One device's (and allocator's) live bytes as drawn: ``time_us`` and ``live_bytes`` of
    the points kept (float64), ``ops`` and ``delta`` of the records they are, ``records``
    how many records there were, and the peak (the first time the most bytes were live)."""

    device: str
    allocator: str
    time_us: np.ndarray
    live_bytes: np.ndarray
    ops: np.ndarray
    delta: np.ndarray
    records: int
    peak_bytes: int
    peak_time_us: float

    @property
    def peak_label(self) -> str:
        """The peak's words beside its marker, e.g. ``peak 1.2 MB at 3.4 ms``."""
        return f"peak {format_bytes(self.peak_bytes)} at {format_us(self.peak_time_us)}"


def thin(live: np.ndarray, max_points: int = MAX_MEMORY_POINTS) -> np.ndarray:
    """The positions of ``live`` (one device's records in order) that a curve of at most
    ``max_points`` points keeps: all of them when they fit, else per run of consecutive
    records its first, lowest, highest and last (ascending positions)."""
    n = len(live)
    if n <= max_points:
        return np.arange(n)
    runs = max(1, max_points // 4)
    run = np.arange(n) * runs // n
    starts = np.searchsorted(run, np.arange(runs))
    ends = np.append(starts[1:], n) - 1
    kept = [starts, ends]
    for extreme in (np.maximum, np.minimum):  # each run's first highest and first lowest point
        at = np.flatnonzero(live == extreme.reduceat(live, starts)[run])
        kept.append(at[np.concatenate([[True], run[at][1:] != run[at][:-1]])])
    marked = np.zeros(n, dtype=bool)  # ascending, once each: marked, not sorted
    marked[np.concatenate(kept)] = True
    return np.flatnonzero(marked)


def memory_curves(
    memory: pd.DataFrame, devices: list[str], max_points: int = MAX_MEMORY_POINTS
) -> list[MemoryCurve]:
    """The lane's curves, one per device and allocator of ``memory`` (``trace.memory``), in
    ``devices`` order; none without records."""
    if memory is None or not len(memory):
        return []
    live_all = memory["live_bytes"].to_numpy(dtype=np.float64)
    time_all = memory["time_us"].to_numpy(dtype=np.float64)
    ops_all = memory["op"].to_numpy(dtype=object)
    delta_all = memory["bytes"].to_numpy(dtype=np.int64)
    place = {device: i for i, device in enumerate(devices)}
    curves = []
    series = memory_series(memory)  # each (device, allocator)'s rows, found once per frame
    for device, allocator, rows in zip(series.devices, series.allocators, series.rows, strict=True):
        device, allocator = str(device), str(allocator)
        live = live_all[rows]
        at = int(np.argmax(live))
        kept = rows[thin(live, max_points)]
        curves.append(
            MemoryCurve(
                device=device,
                allocator=allocator,
                time_us=time_all[kept],
                live_bytes=live_all[kept],
                ops=ops_all[kept],
                delta=delta_all[kept],
                records=len(rows),
                peak_bytes=int(live[at]),
                peak_time_us=float(time_all[rows[at]]),
            )
        )
    return sorted(curves, key=lambda c: (place.get(c.device, len(place)), c.device, c.allocator))


def curve_labels(pairs: list[tuple[str, str]]) -> list[str]:
    """The label of each (device, allocator): the device (``CPU:1``), with the allocator where
    a device has several (``GPU:0 cuda_host_bfc``)."""
    per_device = pd.Series([device for device, _ in pairs], dtype=object).value_counts()
    return [
        f"{short_device(d) or d} {a}" if per_device.get(d, 0) > 1 else short_device(d) or d
        for d, a in pairs
    ]


def memory_rows(curves: list[MemoryCurve]) -> dict[str, str]:
    """The y axis of each device's row of the lane (``y2``, ``y3``...: the first device's row
    right under the lanes), for at most ``MAX_MEMORY_ROWS`` devices, those with the largest
    peaks (the others are left out, and the header says so)."""
    peak: dict[str, int] = {}
    for curve in curves:
        peak[curve.device] = max(peak.get(curve.device, 0), curve.peak_bytes)
    kept = set(sorted(peak, key=lambda d: -peak[d])[:MAX_MEMORY_ROWS])
    ordered = [d for d in dict.fromkeys(c.device for c in curves) if d in kept]
    return {device: f"y{i + 2}" for i, device in enumerate(ordered)}


NO_OP = "(no op recorded)"  # the hover of a record whose op the trace (a file) does not name


def memory_traces(curves: list[MemoryCurve], span: float) -> list[dict]:
    """The lane's plotly.js traces: per curve a step line (``line.shape: "hv"``, filled light
    below) on its device's row, whose hover gives the live bytes, the time and the op of the
    record, then a marker on its peak labelled with the bytes and the time."""
    rows = memory_rows(curves)
    labels = curve_labels([(c.device, c.allocator) for c in curves])
    traces = []
    for curve, label in zip(curves, labels, strict=True):
        axis = rows.get(curve.device)
        if axis is None:
            continue
        color = device_color(curve.device)
        start = min(0.0, float(curve.time_us[0])) if len(curve.time_us) else 0.0
        x = np.concatenate([[start], curve.time_us])
        y = np.concatenate([[0.0], curve.live_bytes])
        name = html.escape(f"{label} ({curve.allocator})")
        # The hover's words per point: the op (``text``, escaped once per name) and the
        # record's bytes (``customdata``, numbers sent as a binary buffer), formatted by
        # plotly.js: no string per point made here.
        codes, names = pd.factorize(curve.ops)  # -1 for a record that names no op
        escaped = np.array([*_escaped(names), NO_OP], dtype=object)
        ops = np.empty(len(codes) + 1, dtype=object)
        ops[0], ops[1:] = "step start", escaped[codes]
        delta = np.concatenate([[0.0], curve.delta.astype(np.float64)])
        traces.append(
            dict(
                type="scatter",
                x=x,
                y=y,
                yaxis=axis,
                mode="lines",
                name=f"{label} memory",
                line=dict(color=color, width=1.5, shape="hv"),
                fill="tozeroy",
                fillcolor=_translucent(color),
                text=ops,
                customdata=delta,
                hovertemplate=(
                    f"<b>{name}</b> live %{{y:.3s}}B at %{{x:,.0f}} µs<br>"
                    "%{text} %{customdata:+.3s}B<extra></extra>"
                ),
                meta=dict(memory=curve.device, allocator=curve.allocator),
            )
        )
        text = curve.peak_label
        right = curve.peak_time_us < 0.6 * (span or 1.0)
        traces.append(
            dict(
                type="scatter",
                x=[curve.peak_time_us],
                y=[float(curve.peak_bytes)],
                yaxis=axis,
                mode="markers+text",
                name=f"{label} memory peak",
                text=[html.escape(text)],
                textposition="middle right" if right else "middle left",
                textfont=dict(color=color, size=11),
                cliponaxis=False,
                marker=dict(symbol="diamond", size=10, color=color, line=dict(width=1)),
                hovertext=[f"<b>{name}</b> {html.escape(text)}"],
                hovertemplate="%{hovertext}<extra></extra>",
                meta=dict(
                    memory_peak=curve.device,
                    allocator=curve.allocator,
                    peak_bytes=curve.peak_bytes,
                    peak_time_us=curve.peak_time_us,
                ),
            )
        )
    return traces


def memory_layout(curves: list[MemoryCurve], height: int, margins: int) -> tuple[int, dict]:
    """The figure's height with the lane's rows under the lanes' ``height`` (px; ``margins``
    the layout's top and bottom margins), and the layout entries that draw them: ``yaxis``'s
    domain, one y axis per row (live bytes, ``12MB``, from 0 to 30% above the row's peak),
    the x axis at the bottom row."""
    rows = memory_rows(curves)
    peak = dict.fromkeys(rows, 0)
    for curve in curves:
        if curve.device in rows:
            peak[curve.device] = max(peak[curve.device], curve.peak_bytes)
    total = height + len(rows) * (MEMORY_ROW_PX + MEMORY_GAP_PX) + MEMORY_GAP_PX
    plot = total - margins
    layout: dict[str, Any] = {}
    for i, (device, axis) in enumerate(rows.items()):
        from_bottom = len(rows) - 1 - i
        bottom = from_bottom * (MEMORY_ROW_PX + MEMORY_GAP_PX) / plot
        layout["yaxis" + axis[1:]] = dict(
            domain=[bottom, bottom + MEMORY_ROW_PX / plot],
            anchor="x",
            title=dict(
                text=html.escape(f"{short_device(device) or device} memory"), font=dict(size=11)
            ),
            tickformat="~s",
            ticksuffix="B",
            nticks=3,
            range=[0, max(1, peak[device]) * 1.3],
            fixedrange=True,
            zeroline=False,
            gridcolor="rgba(128,128,128,0.2)",
            automargin=True,
        )
    top = len(rows) * (MEMORY_ROW_PX + MEMORY_GAP_PX) / plot
    layout["yaxis_domain"] = [min(0.9, top + MEMORY_GAP_PX / plot), 1.0]
    layout["xaxis_anchor"] = f"y{len(rows) + 1}"
    return total, layout


def memory_notes(curves: list[MemoryCurve]) -> list[str]:
    """What the header says of the lane: that it draws a sample of a device's records, and
    the devices it leaves out."""
    notes = []
    devices = {c.device for c in curves}
    if len(devices) > MAX_MEMORY_ROWS:
        notes.append(
            f"The memory lane draws the {MAX_MEMORY_ROWS} devices with the largest peaks of "
            f"the {len(devices):,} with allocator records."
        )
    thinned = [c for c in curves if c.records > len(c.time_us)]
    if not thinned:
        return notes
    records = sum(c.records for c in thinned)
    return notes + [
        f"The memory lane draws at most {MAX_MEMORY_POINTS:,} points per device "
        f"({sum(len(c.time_us) for c in thinned):,} of {records:,} allocator records: each "
        "run's first, lowest, highest and last, and every peak)."
    ]


def _escaped(names: Any) -> list[str]:
    """``html.escape`` of each of ``names``, escaped as one text (a newline between them)."""
    names = [str(name) for name in names]
    escaped = html.escape("\n".join(names)).split("\n")
    if len(escaped) != len(names):  # a name with a newline in it
        escaped = [html.escape(name) for name in names]
    return escaped


def _translucent(color: str) -> str:
    """``#rrggbb`` as ``rgba(r,g,b,0.15)``: the fill under a curve."""
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},0.15)"


# -- the peaks' lines ----------------------------------------------------------------------------
def memory_items(trace: Any, max_ops: int = MAX_HELD_OPS) -> list[dict]:
    """One plain dict per device and allocator with allocator records: what the panel's,
    the report's and the snapshot's memory list show. ``label`` (``CPU:1``), ``allocator``,
    ``color``, ``peak`` and ``at`` (formatted), ``peak_bytes`` and ``peak_time_us``; ``ops``
    the ones holding the peak, most bytes first (at most ``max_ops``), each with its
    ``bytes`` (formatted), ``how`` and ``reason`` (``trace.ops``' row of that op on that
    device: why its tensor is on that device); ``more`` how many ops are left out;
    ``persistent_bytes`` and ``persistent`` (:func:`persistent_text`: what the device holds
    through the step, apart from the peak; "" when nothing); ``recorded``: whether the step's
    own allocations there are recorded (none where TF2 code's CPU allocator reported none: oneDNN off)."""
    peaks = memory_peaks(trace)
    if peaks.empty:
        return []
    named = {op for held in peaks["ops"] for op in held[:max_ops]}
    holders = {op for held in peaks["persistent_ops"] for op in held}
    kept = _kept_facts(trace, peaks, max_ops, holders)
    if kept is not None:
        facts, types = kept
    else:
        rows = _op_rows(trace.ops, named | holders)
        facts = {
            (op, device): (str(t), str(h), str(r))
            for op, device, t, h, r in zip(*rows, strict=True)
            if op in named
        }
        types = {
            (op, device): str(t) for op, device, t, _, _ in zip(*rows, strict=True) if op in holders
        }
    facts.update(_cluster_facts(trace, named))
    labels = curve_labels(list(zip(peaks["device"], peaks["allocator"], strict=True)))
    items = []
    for row, label in zip(_peak_rows(peaks), labels, strict=True):
        held = []
        for op, size in list(zip(row.ops, row.ops_bytes, strict=True))[:max_ops]:
            typ, how, reason = facts.get((op, row.device), ("", "", ""))
            held.append(
                {
                    "op": str(op),
                    "device": str(row.device),
                    "bytes": format_bytes(size),
                    "type": typ,
                    "how": how,
                    "reason": reason,
                }
            )
        items.append(
            {
                "device": str(row.device),
                "label": label,
                "allocator": str(row.allocator),
                "color": device_color(str(row.device)),
                "peak": format_bytes(row.peak_bytes),
                "at": format_us(row.peak_time_us),
                "peak_bytes": int(row.peak_bytes),
                "peak_time_us": int(row.peak_time_us),
                "ops": held,
                "more": max(0, len(row.ops) - max_ops),
                "recorded": bool(row.ops),
                "persistent_bytes": int(row.persistent_bytes),
                "persistent": persistent_text(
                    row.persistent_ops,
                    row.persistent_ops_bytes,
                    types,
                    str(row.device),
                    getattr(row, "persistent_variables", None),
                ),
            }
        )
    return items


VARIABLE_HOLDERS = frozenset({"VarHandleOp", "VariableV2", "Variable", "_VarHandlesOp", "_Arg"})
MAX_PERSISTENT_NAMED = 3  # holders named in a persistent line, the largest first


def persistent_text(
    ops: list[str],
    sizes: list[int],
    types: dict[tuple[str, str], str],
    device: str,
    variables: list[str | None] | None = None,
) -> str:
    """One device's persistent memory as one line: its bytes, how many variables (a
    ``VarHandleOp``, ``VariableV2``, a function's resource ``_Arg``) and constants (the other
    holders: ``Const``) hold them, and the largest, each by the name of the variable it holds
    where ``variables`` (``memory_peaks``' ``persistent_variables``) has one (a TF2 function's
    ``_Arg`` is named by Keras or TensorFlow, ``unknown_7``: the variable is
    ``adam/dense_kernel_momentum``), else by its op; "" when it holds none."""
    if not ops:
        return ""
    names = list(variables) if variables is not None else [None] * len(ops)
    variables = sum(
        bool(name) or types.get((op, device), "") in VARIABLE_HOLDERS
        for op, name in zip(ops, names, strict=True)
    )
    parts = []
    if variables:
        parts.append(f"{variables:,} variable{'s' * (variables != 1)}")
    if len(ops) - variables:
        constants = len(ops) - variables
        parts.append(f"{constants:,} constant{'s' * (constants != 1)}")
    largest = ", ".join(
        f"{name or op} {format_bytes(b)}"
        for op, b, name in list(zip(ops, sizes, names, strict=True))[:MAX_PERSISTENT_NAMED]
    )
    more = f", +{len(ops) - MAX_PERSISTENT_NAMED:,} more" if len(ops) > MAX_PERSISTENT_NAMED else ""
    return (
        f"held through the step: {format_bytes(sum(sizes))} in {' and '.join(parts)} "
        f"({largest}{more})"
    )


def _cluster_facts(trace: Any, named: set) -> dict[tuple[str, str], tuple[str, str, str]]:
    """(type, how, reason) of each XLA cluster among the holders ``named``: its buffers are
    the cluster's (``trace.memory`` names the cluster), no op of it has a row of its own."""
    xla = trace.xla
    if not len(xla):
        return {}
    clusters = set(zip(xla["cluster"], xla["device"], strict=True))
    return {
        (cluster, device): (
            "XLA cluster",
            "xla",
            f"the buffers XLA allocated for the cluster {cluster} on {short_device(device)}, "
            "one for all its instructions, not op by op (its ops: function == "
            f"{cluster!r} in trace.ops)",
        )
        for cluster, device in clusters
        if cluster in named
    }


def _kept_facts(
    trace: Any, peaks: pd.DataFrame, max_ops: int, holders: set[str]
) -> tuple[dict, dict] | None:
    """:func:`memory_items`' facts ((op, device) -> (type, how, reason) of the ops named at
    the peaks) and types ((op, device) -> type of the persistent holders that name no
    variable: :func:`persistent_text` reads no other), read at the op
    rows the conversion kept for ``trace.memory`` (``NameCodes.op_row``): the few rows named,
    not a scan of every op's name. None where they are not kept, or one is not known or does
    not hold that op on that device (``trace.ops`` replaced since): then the names are
    looked up in ``trace.ops``."""
    memory = trace.memory
    codes = name_codes(memory)
    if codes is None or codes.op_row is None:
        return None
    wanted: list[tuple[str, str]] = []
    at: list[int] = []
    for ops, device, records in zip(
        peaks["ops"], peaks["device"], peak_holder_rows(trace), strict=True
    ):
        wanted += [(op, str(device)) for op in ops[:max_ops]]
        at += codes.op_row[records[:max_ops]].tolist()
    n_named = len(wanted)
    if holders:  # a holder's type says whether it is a variable, where no name says so
        persistent = np.flatnonzero(~codes.step)
        columns = ("op", "device", "variable") if "variable" in memory else ("op", "device")
        names, devices, *variables = (memory[c].array[persistent].tolist() for c in columns)
        variables = variables[0] if variables else [None] * len(names)
        for op, device, variable, row in zip(
            names, devices, variables, codes.op_row[persistent].tolist(), strict=True
        ):
            if op in holders and not (isinstance(variable, str) and variable):
                wanted.append((op, str(device)))
                at.append(row)
    rows = np.asarray(at, dtype=np.int64)
    ops = trace.ops
    if len(rows) and (rows.min() < 0 or rows.max() >= len(ops)):
        return None
    op, device, typ, how, reason = (ops[column].array[rows].tolist() for column in _FACT_COLUMNS)
    if list(zip(op, device, strict=True)) != wanted:
        return None
    facts = {
        key: (str(t), str(h), str(r))
        for key, t, h, r in zip(
            wanted[:n_named], typ[:n_named], how[:n_named], reason[:n_named], strict=True
        )
    }
    types = {key: str(t) for key, t in zip(wanted[n_named:], typ[n_named:], strict=True)}
    return facts, types


def _op_rows(ops: pd.DataFrame, names: set[str]) -> list[list[Any]]:
    """The ``op``, ``device``, ``type``, ``how`` and ``reason`` of the rows of ``ops``
    (``trace.ops``) whose op is one of ``names``, in order: those columns only taken."""
    if not names:
        return [[] for _ in range(5)]
    at = np.flatnonzero(ops["op"].isin(names).to_numpy(dtype=bool))
    return [ops[column].array[at].tolist() for column in _FACT_COLUMNS]


_FACT_COLUMNS = ("op", "device", "type", "how", "reason")


def _peak_rows(peaks: pd.DataFrame) -> list[Any]:
    """``peaks``' rows as plain namespaces of its columns (no ``itertuples``)."""
    columns = {c: peaks[c].tolist() for c in peaks.columns}
    return [
        SimpleNamespace(**dict(zip(columns, values, strict=True)))
        for values in zip(*columns.values(), strict=True)
    ]
