"""``assert_placement``: trace once, check the placement, raise with the offending ops' table.

The check is :func:`~tfplace_widget._analyses.checks.check_placement` (the command line's
``--expect-device`` too), its text :func:`~tfplace_widget._rendering.check_report.check_report`.
The code is traced once, by ``trace_placement``, which puts back every TensorFlow setting it
changes (soft placement, Grappler options, run-metadata collection, the profiler): a training
loop that calls this once before its first step pays nothing in its later steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._model.errors import PlacementAssertionError

if TYPE_CHECKING:  # pragma: no cover
    from .._analyses.checks import PlacementCheck
    from .._model.trace import PlacementTrace


def assert_placement(fn_or_trace: Any, *args: Any, **options: Any) -> PlacementTrace:
    """See :func:`tfplace_widget.assert_placement` (documented there, for the API reference)."""
    __tracebackhide__ = True  # pytest's report ends at the user's call
    return verdict(placement_check(fn_or_trace, *args, **options))


def verdict(check: PlacementCheck) -> PlacementTrace:
    """The placement checked, or :class:`PlacementAssertionError` with the check's table."""
    from .._rendering.check_report import check_report

    __tracebackhide__ = True
    if not check.passed:
        raise PlacementAssertionError(check_report(check), check)
    return check.checked


def placement_check(fn_or_trace: Any, *args: Any, **options: Any) -> PlacementCheck:
    """Check the options (``expect``, ``max_copies``, ``allow_cpu_fallback``, the rest are the
    trace's), trace ``fn_or_trace`` once (or take it as traced), check it."""
    from .._analyses.checks import check_placement
    from .._analyses.expectations import expectations_from
    from .._tfadapter.registry import REGISTRY
    from .._tracing.dispatch import as_trace, is_traced

    expect: Mapping[str, str] | None = options.pop("expect", None)
    max_copies: int | None = options.pop("max_copies", None)
    allow_cpu_fallback: bool = options.pop("allow_cpu_fallback", True)
    trace_options = options
    expectations = expectations_from(expect) if expect is not None else []
    if max_copies is not None and (
        isinstance(max_copies, bool) or not isinstance(max_copies, int) or max_copies < 0
    ):
        raise ValueError(f"max_copies must be a whole number, 0 or more, not {max_copies!r}.")
    if not isinstance(allow_cpu_fallback, bool):
        raise TypeError(f"allow_cpu_fallback must be True or False, not {allow_cpu_fallback!r}.")
    if not expectations and max_copies is None and allow_cpu_fallback:
        raise ValueError(
            "assert_placement checks nothing: pass expect={'*dense*': 'GPU'} (op-name globs to "
            "devices), max_copies=N or allow_cpu_fallback=False."
        )
    soft = trace_options.get("soft_placement", True)
    if is_traced(fn_or_trace):  # soft_placement= is then the prediction's only
        soft = trace_options.pop("soft_placement", True)
    if not isinstance(soft, bool):
        raise TypeError(f"soft_placement must be True or False, not {soft!r}.")
    trace = as_trace(fn_or_trace, *args, **trace_options)
    return check_placement(
        trace,
        expectations,
        max_copies=max_copies,
        allow_cpu_fallback=allow_cpu_fallback,
        soft_placement=soft,
        registry=REGISTRY,
    )
