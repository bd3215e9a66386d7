"""``trace.xla``: the HLO instructions XLA ran, one row each, and how they join a trace.

Pure data code. :func:`empty_xla` is the frame of a trace without XLA (and of files saved
before it); :func:`add_xla` appends a traced run's XLA clusters to a trace: their TF ops to
``ops`` (``how="xla"``, the instruction each went into in ``xla_op``), their executed
instructions to ``xla`` and, on the cluster's device lane, to ``events`` (so the timeline shows
them). Times are microseconds on the trace's axis (``origin_us`` is its zero, in µs since the
epoch, as the records were).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import numpy as np
import pandas as pd

from .columns import EVENTS_COLUMNS, XLA_COLUMNS

# The op types that run an XLA cluster: TF2's launch ops and graph-mode auto-clustering's.
XLA_LAUNCH_TYPES = frozenset({"XlaLaunch", "XlaLaunchV2", "_XlaCompile", "_XlaRun", "_XlaMerge"})


def empty_xla() -> pd.DataFrame:
    """``trace.xla`` with no row, its columns typed: a copy of one made once (making it takes
    about 3 ms, a third of a 1k-op conversion; the copy 0.1 ms)."""
    return _empty_xla().copy()


@functools.cache
def _empty_xla() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "cluster": pd.Series([], dtype=object),
            "instruction": pd.Series([], dtype=object),
            "kind": pd.Series([], dtype=object),
            "device": pd.Series([], dtype=object),
            "start_us": pd.Series([], dtype=np.int64),
            "duration_us": pd.Series([], dtype=np.int64),
            "tf_ops": pd.Series([], dtype=object),
            "source": pd.Series([], dtype=object),
        }
    )[XLA_COLUMNS]


def xla_frame(rows: list[dict[str, Any]], origin_us: int) -> pd.DataFrame:
    """``trace.xla`` of ``rows`` (dicts of :data:`XLA_COLUMNS`, starts in µs since the epoch),
    by start."""
    if not rows:
        return empty_xla()
    frame = pd.DataFrame(rows, columns=XLA_COLUMNS)
    frame["start_us"] = frame["start_us"].astype(np.int64) - int(origin_us)
    frame["duration_us"] = frame["duration_us"].astype(np.int64)
    for column in ("cluster", "instruction", "kind", "device", "source"):
        frame[column] = frame[column].astype(object)
    frame["tf_ops"] = pd.Series([list(ops) for ops in frame["tf_ops"]], dtype=object)
    return frame.sort_values("start_us", kind="stable").reset_index(drop=True)


def add_xla(
    trace: Any, ops: pd.DataFrame, xla: pd.DataFrame, threads: list[int] | None = None
) -> None:
    """Append the XLA clusters' ``ops`` rows and instructions (``xla``) to ``trace``, in place.

    ``ops`` has the columns of ``trace.ops``; ``threads`` is the profiler line of each ``xla``
    row (0 when unknown), for the events.
    """
    if len(ops):
        base = trace.ops
        if len(base):
            joined = pd.concat([base, ops[list(base.columns)]], ignore_index=True)
            for column in base.columns:  # keep the traced dtypes (categories, Int64, str)
                if joined[column].dtype != base[column].dtype:
                    with contextlib.suppress(TypeError, ValueError):
                        joined[column] = joined[column].astype(base[column].dtype)
            trace.ops = joined
        else:  # an empty frame's dtypes say nothing: the XLA rows' are a fresh trace's
            trace.ops = ops[list(base.columns)].reset_index(drop=True)
        for device in ops["device"].unique().tolist():
            if device and device not in trace.devices:
                trace.devices.append(device)
    trace.xla = xla
    if not len(xla):
        return
    labels = [
        f"{name} = {kind}({', '.join(tf_ops)}) [XLA {cluster}]"
        for name, kind, tf_ops, cluster in zip(
            xla["instruction"], xla["kind"], xla["tf_ops"], xla["cluster"], strict=True
        )
    ]
    events = pd.DataFrame(
        {
            "op": xla["instruction"].to_numpy(dtype=object),
            "device": xla["device"].to_numpy(dtype=object),
            "lane": xla["device"].to_numpy(dtype=object),
            "thread": np.asarray(threads if threads is not None else [0] * len(xla), np.int64),
            "start_us": xla["start_us"].to_numpy(np.int64),
            "duration_us": xla["duration_us"].to_numpy(np.int64),
            "label": labels,
        }
    )
    base = trace.events
    joined = pd.concat([base, events], ignore_index=True) if len(base) else events
    joined = joined.sort_values("start_us", kind="stable").reset_index(drop=True)
    for column in EVENTS_COLUMNS:
        if len(base) and joined[column].dtype != base[column].dtype:
            joined[column] = joined[column].astype(base[column].dtype)
    trace.events = joined[EVENTS_COLUMNS]
