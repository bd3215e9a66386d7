"""``--expect-device``: the checks of ``tfplace show`` and ``tfplace run``, and their exit code.

The expectations themselves (parsing, which ops each matches, which are elsewhere) are pure
(:mod:`tfplace_widget.analyses.expectations`) and their table is the text report's; here is
what the command line decides: what to check against (the trace, or its prediction for a GPU
machine when the trace has none), the line on stderr, exit code 1 when an op is elsewhere.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..analyses.expectations import Expectation, ExpectationError
from ..rendering.text_report import printable
from .errors import EXIT_EXPECTATION, EXIT_OK, PROG, CliError, flush

if TYPE_CHECKING:  # pragma: no cover
    from ..model.trace import PlacementTrace
    from ..rendering.text_report import TextOutput


def parse_expectations(values: Sequence[str]) -> list[Expectation]:
    """The ``--expect-device`` values, checked before anything runs."""
    from ..analyses.expectations import parse_expectations as parse

    try:
        return parse(values)
    except ExpectationError as exc:
        raise CliError(str(exc)) from exc


def check_expectations(
    trace: PlacementTrace,
    expectations: Sequence[Expectation],
    out: TextOutput,
    *,
    soft_placement: bool,
) -> int:
    """Print each expectation's result; 1 when an op is elsewhere, else 0.

    On a machine without a device type some expectation names (a GPU on a laptop or a CI
    runner), every expectation is checked against ``predict_placement(trace, gpus=N)``, the
    placement on this machine plus N GPUs (N = 1, or more when ``GPU:1``... is named): one
    placement for all, since an op on the CPU here may go to the GPU there.
    """
    from ..analyses.expectations import evaluate_expectations, gpus_named, missing_device_types
    from ..analyses.summary import short_names
    from ..rendering.text_report import print_expectations

    missing = missing_device_types(trace, expectations)
    checked, basis = trace, "the trace"
    out.line("")
    if missing:
        if missing != ["GPU"]:
            raise CliError(
                f"--expect-device: this trace has no {' or '.join(missing)} device, and only "
                "GPUs can be predicted (predict_placement); record the trace on such a machine."
            )
        from ..tracing.predict import predict_placement

        gpus = gpus_named(expectations)
        checked = predict_placement(trace, gpus, soft_placement=soft_placement)
        basis = f"predict_placement(trace, gpus={gpus})"
        out.line(
            f"No GPU in this trace: checking against {basis}, where TensorFlow would place each "
            f"op on this machine plus {gpus} GPU{'s' if gpus > 1 else ''} (predicted, not run)."
        )
    out.heading(f"Expected devices (checked against {basis})")
    try:
        outcomes = evaluate_expectations(checked, expectations, basis)
    except ExpectationError as exc:
        raise CliError(str(exc)) from exc
    devices = checked.devices
    print_expectations(out, outcomes, devices)
    failures = [(o.expectation, o.wrong) for o in outcomes if not o.wrong.empty]
    if not failures:
        return EXIT_OK
    short = short_names(devices)
    count = sum(len(w) for _, w in failures)
    flush(out.stream)
    first_expectation, first_wrong = failures[0]
    example = first_wrong.iloc[0]
    line = (
        f"{PROG}: {count:,} op{'s are' if count != 1 else ' is'} not on the expected device "
        f"(checked against {basis}), e.g. {example['op']} on "
        f"{short.get(str(example['device']), example['device'])} "
        f"({first_expectation.text})"
    )
    print(printable(line), file=sys.stderr, flush=True)
    return EXIT_EXPECTATION
