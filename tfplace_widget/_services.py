"""The implementation of :class:`tfplace_widget._model.services.TraceServices`: what
``PlacementTrace``'s methods do, each a call into the layer that owns it.

This module sits at the entry layer, beside ``cli`` and ``magics``, so it may import every
layer; it imports each on first call, so that ``import tfplace_widget`` (which installs it)
stays instant. The module itself is the implementation: its functions are the protocol's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ._analyses.fix_effect import FixEffect
    from ._model.trace import PlacementTrace
    from ._tfplace_format.reader import SavedTrace


def find_findings(trace: PlacementTrace, immaterial: bool = False) -> pd.DataFrame:
    """:func:`tfplace_widget._analyses.findings.find_findings` (``immaterial`` passed only when
    asked for)."""
    from ._analyses.findings import find_findings as find

    return find(trace, immaterial=True) if immaterial else find(trace)


def memory_peaks(trace: PlacementTrace) -> pd.DataFrame:
    """:func:`tfplace_widget._analyses.memory.memory_peaks`."""
    from ._analyses.memory import memory_peaks as peaks

    return peaks(trace)


def fits_on(trace: PlacementTrace, gib: float) -> Any:
    """:func:`tfplace_widget._analyses.predict.memory.fits_on`."""
    from ._analyses.predict.memory import fits_on as fits

    return fits(trace, gib)


def save(
    trace: PlacementTrace,
    path: str | os.PathLike,
    *,
    overwrite: bool,
    findings: pd.DataFrame | None,
) -> str:
    """:func:`tfplace_widget._tfplace_format.writer.save`, writing the file atomically."""
    from ._export.output import write_atomically
    from ._tfplace_format.writer import save as write

    return write(trace, path, write_file=write_atomically, overwrite=overwrite, findings=findings)


def read(path: str | os.PathLike) -> SavedTrace:
    """:func:`tfplace_widget._tfplace_format.reader.read`."""
    from ._tfplace_format.reader import read as read_file

    return read_file(path)


def to_chrome_trace(trace: PlacementTrace, path: str | os.PathLike, *, overwrite: bool) -> str:
    """:func:`tfplace_widget._export.chrome_trace.write_chrome_trace`."""
    from ._export.chrome_trace import write_chrome_trace

    return write_chrome_trace(trace, path, overwrite=overwrite)


def to_html(trace: PlacementTrace, path: str | os.PathLike, *, search: str, overwrite: bool) -> str:
    """:func:`tfplace_widget._export.html.write_html`, its path as a string."""
    from ._export.html import write_html

    return str(write_html(trace, path, search=search, overwrite=overwrite))


def to_frames(trace: PlacementTrace) -> dict[str, pd.DataFrame]:
    """:func:`tfplace_widget._export.tables.to_frames`."""
    from ._export.tables import to_frames as frames

    return frames(trace)


def to_csv(trace: PlacementTrace, folder: str | os.PathLike, *, overwrite: bool) -> dict[str, str]:
    """:func:`tfplace_widget._export.tables.to_csv`."""
    from ._export.tables import to_csv as write

    return write(trace, folder, overwrite=overwrite)


def to_parquet(
    trace: PlacementTrace, folder: str | os.PathLike, *, overwrite: bool
) -> dict[str, str]:
    """:func:`tfplace_widget._export.tables.to_parquet`."""
    from ._export.tables import to_parquet as write

    return write(trace, folder, overwrite=overwrite)


def from_run_metadata(
    run_metadata: Any, graph: Any = None, *, devices: Sequence[str] = ()
) -> PlacementTrace:
    """:func:`tfplace_widget._sources.run_metadata.trace_from_run_metadata`."""
    from ._sources.run_metadata import trace_from_run_metadata

    return trace_from_run_metadata(run_metadata, graph, devices=devices)


def from_chrome_trace(path: str | os.PathLike) -> PlacementTrace:
    """:func:`tfplace_widget._sources.chrome.trace_from_chrome`."""
    from ._sources.chrome import trace_from_chrome

    return trace_from_chrome(path)


def from_xspace(path: str | os.PathLike) -> PlacementTrace:
    """:func:`tfplace_widget._sources.xspace.trace_from_xspace`."""
    from ._sources.xspace import trace_from_xspace

    return trace_from_xspace(path)


def try_fix(trace: PlacementTrace, finding: Any) -> FixEffect:
    """:func:`tfplace_widget._tracing.fixes.try_fix`."""
    from ._tracing.fixes import try_fix as run_with_the_fix

    return run_with_the_fix(trace, finding)


def suggest_placement(trace: PlacementTrace) -> FixEffect:
    """:func:`tfplace_widget._tracing.fixes.suggest_placement`."""
    from ._tracing.fixes import suggest_placement as run_with_the_fixes

    return run_with_the_fixes(trace)
