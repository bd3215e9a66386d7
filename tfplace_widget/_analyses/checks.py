"""One placement check: expected devices, a limit on copies, no CPU fallback, on one placement.

What ``assert_placement`` and ``tfplace show/run --expect-device`` check, with one answer to
"against what?": the trace itself, or, when the trace has no device of a type the check is
about (a GPU on a laptop or a CI runner: an expectation naming ``GPU``, or
``allow_cpu_fallback=False``, a question about a GPU machine), its prediction for this
machine plus N GPUs (N = 1, or more when ``GPU:1``... is named). Every part of the check is
made on that one placement, since an op on the CPU here may go to the GPU there. Pure: the
prediction is :func:`~tfplace_widget._analyses.predict.result.predict_trace`'s, what
``predict_placement(trace, gpus)`` returns; what to print is the caller's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .expectations import (
    Expectation,
    ExpectationError,
    Outcome,
    device_types,
    evaluate_expectations,
    gpus_named,
    missing_device_types,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .._model.kernel_registry import KernelRegistry
    from .._model.trace import PlacementTrace

OFFENDING_COLUMNS = ["op", "type", "device", "expected", "reason"]
FALLBACK = "cpu_fallback"


@dataclass(frozen=True)
class PlacementCheck:
    """What one check found. ``checked`` is the placement checked: ``trace`` itself, or its
    prediction (``predicted``, named by ``basis``, e.g. ``predict_placement(trace, gpus=1)``).

    ``outcomes``: one per expectation; ``copies``: the copies between devices of ``checked``
    (:func:`~tfplace_widget._analyses.copies.explain_copies`, with their cause), when
    ``max_copies`` is set; ``fallbacks``: its ``cpu_fallback`` findings, immaterial ones too
    (a limit does not move with the machine's load), when ``allow_cpu_fallback`` is False.
    """

    trace: PlacementTrace
    checked: PlacementTrace
    basis: str
    gpus: int = 0
    outcomes: list[Outcome] = field(default_factory=list)
    max_copies: int | None = None
    copies: pd.DataFrame | None = None
    allow_cpu_fallback: bool = True
    fallbacks: pd.DataFrame | None = None

    @property
    def predicted(self) -> bool:
        """Checked against a prediction for a machine with GPUs, not against what ran."""
        return self.checked is not self.trace

    @property
    def note(self) -> str:
        """One sentence on what was checked when it was a prediction (else "")."""
        if not self.predicted:
            return ""
        plural = "s" if self.gpus > 1 else ""
        return (
            f"No GPU in this trace: checking against {self.basis}, where TensorFlow would place "
            f"each op on this machine plus {self.gpus} GPU{plural} (predicted, not run)."
        )

    @property
    def too_many_copies(self) -> bool:
        return self.copies is not None and len(self.copies) > (self.max_copies or 0)

    @property
    def failed_expectations(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.wrong.empty]

    @property
    def passed(self) -> bool:
        return not (self.failed_expectations or self.too_many_copies or self.fallback_count)

    @property
    def fallback_count(self) -> int:
        return 0 if self.fallbacks is None else len(self.fallbacks)

    def offending(self) -> pd.DataFrame:
        """One row per op not where the check wants it: ``op``, ``type``, ``device`` (as
        ``checked`` has it), ``expected`` (the expectation's device, or ``GPU`` for a CPU
        fallback) and ``reason`` (why it is there); ``source`` too when the trace has it."""
        import pandas as pd

        parts = [o.wrong.assign(expected=o.expectation.device) for o in self.failed_expectations]
        if self.fallbacks is not None and not self.fallbacks.empty:
            names = list(dict.fromkeys(op for ops in self.fallbacks["ops"] for op in ops))
            ops = self.checked.ops
            rows = ops[ops["op"].isin(names)].drop_duplicates("op").set_index("op")
            parts.append(
                rows.reindex([n for n in names if n in rows.index])
                .reset_index()
                .assign(expected="GPU")
            )
        columns = OFFENDING_COLUMNS + (["source"] if self.has_source else [])
        if not parts:
            return pd.DataFrame(columns=columns)
        found = pd.concat(parts, ignore_index=True)
        if self.has_source and "source" not in found:
            sources = self.trace.ops.drop_duplicates("op").set_index("op")["source"]
            found["source"] = found["op"].map(sources)
        return found[columns]

    @property
    def has_source(self) -> bool:
        return "source" in self.checked.ops or "source" in self.trace.ops


def check_placement(
    trace: PlacementTrace,
    expectations: Sequence[Expectation] = (),
    *,
    max_copies: int | None = None,
    allow_cpu_fallback: bool = True,
    soft_placement: bool = True,
    registry: KernelRegistry | None = None,
) -> PlacementCheck:
    """Check ``trace`` (or its prediction, see the module) against ``expectations``,
    ``max_copies`` (copies between devices in the step, ``trace.transfers``) and
    ``allow_cpu_fallback``; ``soft_placement`` is the prediction's. ``registry``: what
    TensorFlow registered, for the prediction and the copies' causes, handed in by the caller
    (by default the one the trace's facts were read with; a loaded trace has none).

    Raises:
        ExpectationError: An expectation names a device type other than GPU the trace lacks,
            a device the placement checked has none of, or a glob no op matches.
        ValueError: A prediction is needed and the trace has no graph facts.
    """
    missing = missing_device_types(trace, expectations)
    if not allow_cpu_fallback and "GPU" not in device_types(trace.devices) | set(missing):
        missing.append("GPU")  # a fallback is the CPU on a machine with a GPU
    checked, basis, gpus = trace, "the trace", 0
    if missing:
        others = [t for t in missing if t != "GPU"]
        if others:
            which = next(e for e in expectations if e.spec.type in others)
            raise ExpectationError(
                f"{which.shown}: this trace has no {' or '.join(others)} device, and only GPUs "
                "can be predicted (predict_placement); record the trace on such a machine."
            )
        from .predict.result import predict_trace

        gpus = gpus_named(expectations)
        checked = predict_trace(trace, gpus, soft_placement, registry=registry)
        basis = f"predict_placement(trace, gpus={gpus})"
    outcomes = evaluate_expectations(checked, expectations, basis)
    copies = fallbacks = None
    if max_copies is not None:
        from .copies import explain_copies

        copies = explain_copies(checked, registry)
    if not allow_cpu_fallback:
        findings = checked.all_findings
        fallbacks = findings[findings["kind"] == FALLBACK].reset_index(drop=True)
    return PlacementCheck(
        trace, checked, basis, gpus, outcomes, max_copies, copies, allow_cpu_fallback, fallbacks
    )
