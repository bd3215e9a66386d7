"""What a fix did, measured: ``FixEffect``, the comparison ``trace.try_fix`` and
``trace.suggest_placement`` return, built from the trace of the code as it is and the trace of
the same code with the fix's overrides (both run with the same steps, one after the other).

The measures: whether the finding is gone (no finding of its kind about the ops the fix moved,
the immaterial ones included), the copies between devices and their bytes, the step's time per
traced step (first op start to last op end) with its spread, the ops that moved, whether the
step's outputs stayed equal (floats within a tolerance), and whether TensorFlow's own placement
log agrees with the "after" trace. A difference in step time inside the noise (the two runs'
ranges overlap) is none. Pure pandas: the runs are made in ``_tracing/fixes.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._model.devices import canonical_device
from .._model.trace import PlacementTrace
from .._sources.replicated import placement_blocks
from .compare import PlacementDiff, compare
from .findings.material import step_of, timed_events, trace_steps
from .summary import format_bytes, format_us

# Outputs are equal when every float is within this (numpy.allclose's rtol, atol).
RTOL, ATOL = 1e-5, 1e-6
STEP_CHANGES = ("none", "faster", "slower", "unmeasured")


@dataclass(eq=False)
class FixEffect:
    """The measured effect of one fix (``try_fix``) or of several together
    (``suggest_placement``): ``verified`` says whether it is offered, ``why`` says why (not).
    ``frame`` is the table view; ``before``/``after`` the two traces, ``diff`` their
    :class:`~tfplace_widget.PlacementDiff`."""

    verified: bool
    why: str
    overrides: dict[str, str]
    edit: str
    finding_gone: bool
    copies: tuple[int, int]
    bytes: tuple[int | None, int | None]  # None: a copy's size was not recorded
    step_us: tuple[list[float], list[float]]
    step_change: str
    moved: list[str]
    outputs_equal: bool | None
    tf_log_agrees: bool | None
    predicted: bool = False
    kinds: list[str] = field(default_factory=list)  # the kinds of the findings it is about
    notes: list[str] = field(default_factory=list)
    # a predicted fix run here with a second CPU standing in for GPU:0: its step times
    # (without, with the fix) and whether TensorFlow's log agreed (outputs: ``outputs_equal``)
    stand_in: tuple[tuple[list[float], list[float]], bool | None] | None = None
    # suggest_placement's: each fix tried alone (verified or not)
    trials: list[FixEffect] = field(default_factory=list, repr=False)
    before: PlacementTrace | None = field(default=None, repr=False)
    after: PlacementTrace | None = field(default=None, repr=False)
    diff: PlacementDiff | None = field(default=None, repr=False)

    @property
    def frame(self) -> pd.DataFrame:
        """One row per measure: ``measure``, ``before``, ``after``."""
        (a, b), (ba, bb) = self.copies, self.bytes
        times = [_time_text(t) for t in self.step_us]
        rows = [
            ("finding", "present", "gone" if self.finding_gone else "still there"),
            ("copies", a, b),
            ("bytes copied", _bytes_text(ba), _bytes_text(bb)),
            ("step time", times[0], f"{times[1]} ({self.step_change})"),
            ("ops moved", "", ", ".join(self.moved) or "none"),
            ("outputs", "", _yes_no(self.outputs_equal, "equal", "different", "not compared")),
            (
                "TensorFlow's placement log",
                "",
                _yes_no(self.tf_log_agrees, "agrees", "disagrees", "not read"),
            ),
        ]
        return pd.DataFrame(rows, columns=["measure", "before", "after"])

    def __repr__(self) -> str:
        head = "verified" if self.verified else "not verified"
        lines = [f"FixEffect({head}: {self.why}"]
        if self.predicted:
            lines.append("  (predicted for a machine with a GPU: nothing ran with the fix)")
        lines += [f"  {r.measure}: {r.before} -> {r.after}" for r in self.frame.itertuples()]
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines) + ")"


def measure(
    before: PlacementTrace,
    after: PlacementTrace,
    *,
    kinds: Iterable[str],
    overrides: Mapping[str, str],
    edit: str = "",
    outputs_equal: bool | None = None,
    notes: Iterable[str] = (),
) -> FixEffect:
    """The effect of ``overrides`` on the findings of ``kinds`` about the ops they moved, from
    ``before`` (the code as it is) to ``after`` (with the overrides)."""
    subjects = set(overrides)
    kinds = set(kinds)
    gone = not any(
        kind in kinds and subjects & set(ops)
        for kind, ops in zip(after.all_findings["kind"], after.all_findings["ops"], strict=True)
    )
    diff = compare(before, after)
    runtime = diff.ops["how_a"].astype(str).eq("runtime") | diff.ops["how_b"].astype(str).eq(
        "runtime"
    )
    moved = diff.moved[~runtime.loc[diff.moved.index]]["op"].astype(str).tolist()
    times = (step_times(before), step_times(after))
    change = step_change(*times)
    agrees = log_agrees(after)
    predicted = bool(after.predicted)
    effect = FixEffect(
        verified=False,
        why="",
        overrides=dict(overrides),
        edit=edit,
        finding_gone=gone,
        copies=(len(before.transfers), len(after.transfers)),
        bytes=(_bytes(before), _bytes(after)),
        step_us=times,
        step_change=change,
        moved=moved,
        outputs_equal=outputs_equal,
        tf_log_agrees=agrees,
        predicted=predicted,
        kinds=sorted(kinds),
        notes=list(notes),
        before=before,
        after=after,
        diff=diff,
    )
    effect.verified, effect.why = verdict(effect)
    return effect


def verdict(effect: FixEffect) -> tuple[bool, str]:
    """``(verified, why)``: a fix is offered when it removes its finding, keeps the outputs
    equal, does not make the step slower, and TensorFlow placed what the trace says; a
    prediction (no run) only when the predicted finding is gone."""
    wrong = []
    if not effect.finding_gone:
        wrong.append("the finding is still there")
    if not effect.moved:
        wrong.append("no op moved")
    (bytes_before, bytes_after) = effect.bytes
    fewer = effect.copies[1] < effect.copies[0] or (
        bytes_before is not None and bytes_after is not None and bytes_after < bytes_before
    )
    if "costly_transfer" in effect.kinds and not fewer:
        wrong.append("the copies are not fewer (they moved to other tensors)")
    if effect.predicted:
        # Run on a CPU standing in for the GPU (``_tracing/fixes.py``), the fix must keep the
        # outputs and TensorFlow must accept it; its speed there says nothing of a GPU's.
        if effect.stand_in is not None and effect.outputs_equal is False:
            wrong.append("the step's outputs changed (run with a CPU standing in for the GPU)")
        if effect.stand_in is not None and effect.stand_in[1] is False:
            wrong.append("TensorFlow's placement log disagrees (a CPU standing in for the GPU)")
        if wrong:
            return False, "; ".join(wrong) + " (predicted)"
        why = "the predicted finding is gone on a machine with a GPU (predict_placement's)"
        if effect.stand_in is not None and effect.outputs_equal:
            why += "; run here with a CPU standing in for the GPU, the outputs are equal"
        return True, why
    if effect.outputs_equal is False:
        wrong.append("the step's outputs changed")
    elif effect.outputs_equal is None:
        wrong.append("the step's outputs could not be compared")
    if effect.step_change == "slower":
        wrong.append("the step is slower")
    if effect.tf_log_agrees is False:
        wrong.append("TensorFlow's placement log disagrees with the trace")
    if wrong:
        return False, "; ".join(wrong)
    a, b = effect.copies
    return True, (
        f"the finding is gone, copies {a} -> {b}, outputs equal, step time "
        f"{'unchanged (inside the noise)' if effect.step_change == 'none' else effect.step_change}"
    )


def step_times(trace: PlacementTrace) -> list[float]:
    """Each traced step's time in microseconds: from its first op's start to its last op's
    end (empty for a prediction, which ran nothing)."""
    events = timed_events(trace) if not trace.predicted else pd.DataFrame()
    if events is None or events.empty:
        return []
    step, count = step_of(events, trace_steps(trace))
    start = events["start_us"].astype(float).to_numpy()
    end = start + events["duration_us"].astype(float).fillna(0.0).to_numpy()
    times = []
    for i in range(count):
        mine = step == i
        if mine.any():
            times.append(float(end[mine].max() - start[mine].min()))
    return times


def step_change(before: list[float], after: list[float]) -> str:
    """``faster``/``slower`` when the two runs' step times do not overlap at all, ``none``
    when they do (inside the noise), ``unmeasured`` without times."""
    if not before or not after:
        return "unmeasured"
    if min(after) > max(before):
        return "slower"
    if max(after) < min(before):
        return "faster"
    return "none"


def log_agrees(trace: PlacementTrace) -> bool | None:
    """Whether TensorFlow's own placement log (``placer.cc`` lines, captured in ``trace.log``)
    puts every op it names where ``trace.ops`` does; None when the log names none of them."""
    logged: dict[str, str] = {}
    for block in placement_blocks(trace.log or ""):
        logged.update({name: device for name, (_, device) in block.items()})
    ops = trace.ops[trace.ops["how"].astype(str) != "runtime"]
    checked = [
        canonical_device(device) == logged[name]
        for name, device in zip(ops["op"].astype(str), ops["device"].astype(str), strict=True)
        if name in logged
    ]
    return all(checked) if checked else None


def outputs_equal(a: Any, b: Any) -> bool:
    """Two fetched results (arrays, numbers, bytes, or lists, tuples and dicts of them) equal,
    floats within ``RTOL``/``ATOL``."""
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and a.keys() == b.keys()
            and all(outputs_equal(a[k], b[k]) for k in a)
        )
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return (
            isinstance(a, (list, tuple))
            and isinstance(b, (list, tuple))
            and len(a) == len(b)
            and all(outputs_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    if a is None or b is None:
        return a is b
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    if x.dtype.kind in "fc":
        return bool(np.allclose(x, y, rtol=RTOL, atol=ATOL, equal_nan=True))
    return bool(np.array_equal(x, y))


def _bytes(trace: PlacementTrace) -> int | None:
    """The bytes the trace's copies moved; None when a copy's size was not recorded (TF2's
    CPU-to-CPU copies): a sum of the others would say fewer bytes than moved."""
    sizes = pd.to_numeric(trace.transfers["bytes"], errors="coerce")
    if sizes.isna().any():
        return None
    return int(sizes.sum())


def _bytes_text(count: int | None) -> str:
    return "not recorded" if count is None else format_bytes(count)


def _time_text(times: list[float]) -> str:
    if not times:
        return "not measured"
    middle = float(np.median(times))
    return f"{format_us(middle)} (median of {len(times)}, {format_us(min(times))}-{format_us(max(times))})"


def _yes_no(value: bool | None, yes: str, no: str, unknown: str) -> str:
    return unknown if value is None else yes if value else no
