"""What :class:`~tfplace_widget._model.trace.PlacementTrace`'s methods need from the layers above
the model (a port): findings, the ``.tfplace`` file, the exports and the readers.

The model imports nothing above it, not even inside a function; the package root installs the
implementation (:mod:`tfplace_widget._services`) when it is imported, which is always before any
of its submodules, so ``trace.save()``, ``PlacementTrace.load()``, ``trace.findings`` and the
others work wherever the trace came from. The trace is typed ``Any`` here: this module cannot
name ``PlacementTrace`` without importing the module that imports it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


class TraceServices(Protocol):
    """The operations ``PlacementTrace`` delegates, each the function of the layer that owns it."""

    def find_findings(self, trace: Any, immaterial: bool = False) -> pd.DataFrame:
        """The trace's findings (``analyses.findings``), the immaterial ones too if asked."""

    def memory_peaks(self, trace: Any) -> pd.DataFrame:
        """Each device's memory peak and the ops holding it."""

    def fits_on(self, trace: Any, gib: float) -> Any:
        """Whether a prediction's step fits on a GPU of ``gib`` GiB."""

    def save(
        self,
        trace: Any,
        path: str | os.PathLike,
        *,
        overwrite: bool,
        findings: pd.DataFrame | None,
    ) -> str:
        """Write ``trace`` (with its ``findings``, when computed) as a ``.tfplace`` file."""

    def read(self, path: str | os.PathLike) -> Any:
        """What a ``.tfplace`` file holds (a ``tfplace_format.reader.SavedTrace``)."""

    def to_chrome_trace(self, trace: Any, path: str | os.PathLike, *, overwrite: bool) -> str:
        """Write the timeline as Chrome trace-event JSON."""

    def to_html(self, trace: Any, path: str | os.PathLike, *, search: str, overwrite: bool) -> str:
        """Write the self-contained HTML report."""

    def to_frames(self, trace: Any) -> dict[str, pd.DataFrame]:
        """Copies of the trace's tables, by name."""

    def to_csv(self, trace: Any, folder: str | os.PathLike, *, overwrite: bool) -> dict[str, str]:
        """Write the tables as CSV files."""

    def to_parquet(
        self, trace: Any, folder: str | os.PathLike, *, overwrite: bool
    ) -> dict[str, str]:
        """Write the tables as Parquet files."""

    def from_run_metadata(
        self, run_metadata: Any, graph: Any = None, *, devices: Sequence[str] = ()
    ) -> Any:
        """A trace of a RunMetadata (and the graph that ran)."""

    def from_chrome_trace(self, path: str | os.PathLike) -> Any:
        """A trace of a Chrome-trace JSON file."""

    def try_fix(self, trace: Any, finding: Any) -> Any:
        """Run the traced code again with ``finding``'s fix; its measured effect."""

    def suggest_placement(self, trace: Any) -> Any:
        """The verified fixes applied together, measured against the code as it is."""


_installed: TraceServices | None = None


def install(services: TraceServices) -> None:
    """Make ``services`` what ``PlacementTrace``'s methods call (the package root does this)."""
    global _installed
    _installed = services


def services() -> TraceServices:
    """The installed services.

    Raises:
        RuntimeError: None is installed (the package root was not imported, or its import
            failed before installing them).
    """
    if _installed is None:
        raise RuntimeError(
            "PlacementTrace's findings, save, load, exports and readers are not installed: "
            "import tfplace_widget (its __init__ installs tfplace_widget._services) before "
            "calling them."
        )
    return _installed
