"""Findings about memory, read off ``trace.memory`` (TensorFlow's allocator records, or a
prediction's memory, :mod:`..predict.memory`):

- ``gpu_memory`` (a prediction's): the step would need about as much as a GPU of
  ``GPU_MEMORY_GIB`` GiB holds, or more (at least ``GPU_MEMORY_NEAR`` of it): the GPU, the
  bytes, the op whose allocation reached the peak and what is live there;
- ``memory_peak``: one op holds more than half a device's peak, and at least
  ``PEAK_OP_BYTES``: the op (its source line where the trace has it) and its bytes.

Their materiality is their own (a size, not a share of the step's time): ``judge`` keeps it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..._model.devices import short_device
from ..summary import format_bytes
from .base import Finding, listed_ops

GPU_MEMORY_GIB = 16.0  # the GPU a prediction's step is held against (a common card's size)
GPU_MEMORY_NEAR = 0.9  # material from this share of it: the CUDA context and fragmentation
PEAK_OP_BYTES = 256 * 2**20  # one op's bytes at a peak that are large in any device's terms
PEAK_OP_SHARE = 0.5  # ... and more than this share of the peak
_GIB = 2**30
_COPY = " (copy to "


def find_gpu_memory(trace: Any, gib: float | None = None) -> list[Finding]:
    """A ``gpu_memory`` finding when a prediction's step needs at least ``GPU_MEMORY_NEAR`` of
    a ``gib`` GiB GPU (default ``GPU_MEMORY_GIB``); none for a traced run or a small step."""
    from ..predict.memory import fits_on

    if not getattr(trace, "predicted", False) or not len(trace.memory):
        return []
    size = GPU_MEMORY_GIB if gib is None else gib
    fit = fits_on(trace, size)
    if not fit.device or fit.need_bytes < GPU_MEMORY_NEAR * size * _GIB:
        return []
    peaks = _peaks(trace)
    row = peaks[peaks["device"] == fit.device].iloc[0]
    at = _op_of(fit.at_op)
    held = [(_op_of(op), b) for op, b in zip(row["ops"], row["ops_bytes"], strict=True)]
    persistent = fit.persistent_bytes
    largest = "; ".join(f"{op} {format_bytes(b)}" for op, b in held[:3])
    verdict = "more than it has" if not fit.fits else "close to all of it"
    of_variables = (
        f"{format_bytes(persistent)} of variables and constants held through the step, the rest "
        if persistent
        else ""
    )
    message = (
        f"On a {size:g} GiB GPU this step would need about {fit.need_bytes / _GIB:.2f} GiB on "
        f"{short_device(fit.device)} at op {at}{_source(trace, at)} ({verdict}): "
        f"{of_variables}the step's tensors live at that moment; the largest: {largest}. "
        "Predicted from the traced step's allocations "
        "(see the prediction's notes for what is assumed): a smaller batch, or moving the "
        "largest of these ops off the GPU (tf.device), lowers it."
    )
    evidence = {
        "need_bytes": int(fit.need_bytes),
        "gpu_bytes": int(size * _GIB),
        "variables_bytes": int(persistent),
        "material": 1,
    }
    ops = list(dict.fromkeys([at, *(op for op, _ in held)]))
    severity = "high" if not fit.fits else "medium"
    return [
        Finding(
            "gpu_memory",
            severity,
            ops,
            message,
            evidence,
            (0.0, float(fit.need_bytes), 1.0),
            predicted=True,
        )
    ]


def find_memory_peaks(trace: Any, min_bytes: int | None = None) -> list[Finding]:
    """A ``memory_peak`` finding per device whose peak is held mostly (over
    ``PEAK_OP_SHARE``) by one op's allocations of at least ``min_bytes`` (default
    ``PEAK_OP_BYTES``)."""
    if not len(trace.memory):
        return []
    least = PEAK_OP_BYTES if min_bytes is None else min_bytes
    predicted = bool(getattr(trace, "predicted", False))
    found = []
    for row in _peaks(trace).itertuples(index=False):
        if not row.ops or not row.peak_bytes:
            continue
        op, held = _op_of(row.ops[0]), int(row.ops_bytes[0])
        if held < least or held <= PEAK_OP_SHARE * row.peak_bytes:
            continue
        what = "would hold" if predicted else "held"
        copy = " (the copy of its output there)" if _COPY in row.ops[0] else ""
        others = [(_op_of(o), b) for o, b in zip(row.ops[1:], row.ops_bytes[1:], strict=True)]
        rest = f"; the others: {listed_ops([o for o, _ in others])}" if others else ": nothing else"
        message = (
            f"One op makes {short_device(row.device)}'s memory peak: {op}"
            f"{_source(trace, op)}{copy} {what} {format_bytes(held)} of the "
            f"{format_bytes(row.peak_bytes)} live there at the peak ({row.allocator}){rest}. "
            "Its output's size (shape and dtype) is what to change to lower the peak."
        )
        evidence = {
            "peak_bytes": int(row.peak_bytes),
            "op_bytes": held,
            "share": round(held / row.peak_bytes, 4),
            "material": 1,
        }
        found.append(
            Finding(
                "memory_peak",
                "medium",
                [op],
                message,
                evidence,
                (0.0, float(held), 1.0),
                predicted=predicted,
            )
        )
    return found


def _peaks(trace: Any) -> pd.DataFrame:
    from ..memory import memory_peaks

    return memory_peaks(trace)


def _op_of(name: str) -> str:
    """The op a memory row's name is about (a copy's buffer: the op it copies)."""
    return name.split(_COPY, 1)[0]


def _source(trace: Any, op: str) -> str:
    """`` (train.py:42)`` where the trace has the op's source line, else ``""``."""
    ops = trace.ops
    if "source" not in ops:
        return ""
    found = ops.loc[ops["op"] == op, "source"].dropna()
    found = found[found.astype(str) != ""]
    return f" ({found.iloc[0]})" if len(found) else ""
