"""``trace.to_frames()``, ``to_csv(folder)`` and ``to_parquet(folder)``: the three tables.

- ``to_frames()``: deep copies of ``ops``, ``events`` and ``transfers``, by name;
- ``to_csv(folder)``: ``ops.csv``, ``events.csv``, ``transfers.csv`` (UTF-8, a header row, no
  index column; a missing value is an empty field). CSV has no types: read them back with
  ``pd.read_csv(path, keep_default_na=False, na_values=[""])``; for exact dtypes use
  ``to_parquet`` or ``trace.save``;
- ``to_parquet(folder)``: ``ops.parquet``, ``events.parquet``, ``transfers.parquet``, dtypes
  kept (categories, nullable integers), with pyarrow (``pip install 'tfplace_widget[parquet]'``);
  without it an ``ImportError`` says so.

The folder is made when missing; a file that cannot be written is a :class:`TraceWriteError`
naming it. Each file appears complete or not at all.
"""

from __future__ import annotations

import io
import os
from typing import IO, TYPE_CHECKING

import pandas as pd

from .output import make_folder, write_atomically

if TYPE_CHECKING:  # pragma: no cover
    from ..trace import PlacementTrace

TABLES = ("ops", "events", "transfers")
PARQUET_FIX = (
    "to_parquet needs pyarrow, which is not installed: pip install 'tfplace_widget[parquet]' "
    "(or pip install pyarrow). trace.to_csv(folder) and trace.save(path) work without it."
)


def to_frames(trace: PlacementTrace) -> dict[str, pd.DataFrame]:
    """Deep copies of the trace's three tables, by name, in the order ``ops``, ``events``,
    ``transfers``."""
    return {name: getattr(trace, name).copy(deep=True) for name in TABLES}


def to_csv(trace: PlacementTrace, folder: str | os.PathLike) -> dict[str, str]:
    """Write the three tables as CSV files into ``folder``; their paths by table name."""
    where = os.fspath(folder)
    make_folder(where, "CSV tables")
    paths = {}
    for name in TABLES:
        path = paths[name] = os.path.join(where, f"{name}.csv")
        text = io.StringIO()
        getattr(trace, name).to_csv(text, index=False, lineterminator="\n")
        data = text.getvalue().encode("utf-8")

        def write(stream: IO[bytes], data: bytes = data) -> None:
            stream.write(data)

        write_atomically(path, f"the {name} table", write)
    return paths


def to_parquet(trace: PlacementTrace, folder: str | os.PathLike) -> dict[str, str]:
    """Write the three tables as Parquet files into ``folder``; their paths by table name.
    ``ImportError`` (naming the extra to install) without pyarrow."""
    try:
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise ImportError(PARQUET_FIX, name="pyarrow") from exc
    where = os.fspath(folder)
    make_folder(where, "Parquet tables")
    paths = {}
    for name in TABLES:
        path = paths[name] = os.path.join(where, f"{name}.parquet")
        frame = getattr(trace, name)

        def write(stream: IO[bytes], frame: pd.DataFrame = frame) -> None:
            frame.to_parquet(stream, engine="pyarrow", index=False)

        write_atomically(path, f"the {name} table", write)
    return paths
