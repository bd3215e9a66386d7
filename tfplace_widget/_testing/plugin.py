"""The ``tfplace`` pytest plugin: the ``tfplace`` fixture, and a failed check's table in the
report.

Registered through the ``pytest11`` entry point (``tfplace = "tfplace_widget._testing.plugin"``
in pyproject.toml), so it is active wherever the package is installed; ``-p
tfplace_widget._testing.plugin`` loads it by hand (with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``),
``-p no:tfplace`` turns it off. Importing it imports neither pandas nor TensorFlow.

A test that fails on a :class:`~tfplace_widget._testing.PlacementAssertionError`, raised by
``tfplace.check(...)`` or by ``tfplace_widget.assert_placement`` called directly, gets a
report section, "tfplace placement", with the table of the offending ops; a test that fails
for another reason after ``tfplace.check`` calls gets the checks those calls made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from .._model.trace import PlacementTrace

SECTION = "tfplace placement"
_CHECKS = pytest.StashKey[list]()


class PlacementChecks:
    """The ``tfplace`` fixture: ``tfplace.check(fn, *args, expect=..., max_copies=...,
    allow_cpu_fallback=..., **trace_options)`` is ``assert_placement``, whose texts the report
    shows if the test fails."""

    def __init__(self) -> None:
        self.reports: list[str] = []

    def check(self, fn_or_trace: Any, *args: Any, **options: Any) -> PlacementTrace:
        """``tfplace_widget.assert_placement(fn_or_trace, *args, **options)``, its text kept
        for the report: the placement checked, or ``PlacementAssertionError``."""
        from .._rendering.check_report import check_report
        from .assertion import placement_check, verdict

        __tracebackhide__ = True  # pytest's report ends at the user's call
        check = placement_check(fn_or_trace, *args, **options)
        self.reports.append(check_report(check))
        return verdict(check)

    assert_placement = check


@pytest.fixture
def tfplace(request: pytest.FixtureRequest) -> PlacementChecks:
    """Placement checks whose tables the report shows when the test fails:
    ``tfplace.check(step, x, expect={"*dense*": "GPU"}, max_copies=0)``."""
    checks = PlacementChecks()
    request.node.stash[_CHECKS] = checks.reports
    return checks


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    if report.when != "call" or not report.failed:
        return report
    texts = list(item.stash.get(_CHECKS, []))
    error = call.excinfo.value if call.excinfo is not None else None
    if type(error).__name__ == "PlacementAssertionError":
        from .._model.errors import PlacementAssertionError

        if isinstance(error, PlacementAssertionError) and error.table not in texts:
            texts.append(error.table)
    if texts:
        report.sections.append((SECTION, "\n\n".join(texts)))
    return report
