"""``--expect-device``: the checks of ``tfplace show`` and ``tfplace run``, and their exit code.

The check itself (parsing, what to check against: the trace, or its prediction for a GPU
machine when the trace has none; which ops are elsewhere) is the analyses' and
``assert_placement``'s too (:mod:`tfplace_widget._analyses.checks`), and the table is the text
report's; here is what the command line decides: the line on stderr, exit code 1 when an op is
elsewhere.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._analyses.expectations import Expectation, ExpectationError
from .._rendering.text_report import printable
from .errors import EXIT_EXPECTATION, EXIT_OK, PROG, CliError, flush

if TYPE_CHECKING:  # pragma: no cover
    from .._model.trace import PlacementTrace
    from .._rendering.text_report import TextOutput


def parse_expectations(values: Sequence[str]) -> list[Expectation]:
    """The ``--expect-device`` values, checked before anything runs."""
    from .._analyses.expectations import parse_expectations as parse

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

    What is checked is :func:`~tfplace_widget._analyses.checks.check_placement`'s, as for
    ``assert_placement``: on a machine without a device type some expectation names (a GPU on
    a laptop or a CI runner), every expectation is checked against
    ``predict_placement(trace, gpus=N)``, the placement on this machine plus N GPUs (N = 1, or
    more when ``GPU:1``... is named): one placement for all, since an op on the CPU here may
    go to the GPU there.
    """
    from .._analyses.checks import check_placement
    from .._analyses.summary import short_names
    from .._rendering.text_report import print_expectations
    from .._tfadapter.registry import REGISTRY

    out.line("")
    try:
        check = check_placement(
            trace, expectations, soft_placement=soft_placement, registry=REGISTRY
        )
    except ExpectationError as exc:
        raise CliError(str(exc)) from exc
    if check.predicted:
        out.line(check.note)
    out.heading(f"Expected devices (checked against {check.basis})")
    devices = check.checked.devices
    print_expectations(out, check.outcomes, devices)
    failures = check.failed_expectations
    if not failures:
        return EXIT_OK
    short = short_names(devices)
    count = sum(len(o.wrong) for o in failures)
    flush(out.stream)
    example = failures[0].wrong.iloc[0]
    line = (
        f"{PROG}: {count:,} op{'s are' if count != 1 else ' is'} not on the expected device "
        f"(checked against {check.basis}), e.g. {example['op']} on "
        f"{short.get(str(example['device']), example['device'])} "
        f"({failures[0].expectation.text})"
    )
    print(printable(line), file=sys.stderr, flush=True)
    return EXIT_EXPECTATION
