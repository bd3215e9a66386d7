"""``trace.to_frames()``, ``to_csv(folder)`` and ``to_parquet(folder)``: the trace's tables.

The tables are ``ops``, ``events`` and ``transfers``, and ``xla`` (one row per executed HLO
instruction, issue 23) when the trace has XLA instructions: a trace without XLA keeps the
three it always had.

- ``to_frames()``: deep copies of the tables, by name;
- ``to_csv(folder)``: ``ops.csv``, ``events.csv``, ``transfers.csv`` (and ``xla.csv``) (UTF-8,
  a header row, no index column; a missing value is an empty field). CSV has no types: read
  them back with ``pd.read_csv(path, keep_default_na=False, na_values=[""])``; for exact dtypes
  use ``to_parquet`` or ``trace.save``. ``xla.csv``'s ``tf_ops`` (a list per instruction) is
  written as the names separated by single spaces (a TF op name has no space):
  ``.str.split(" ")`` gives the lists back. A text a spreadsheet would take for a formula
  (starting with ``=``, ``+``, ``-``, ``@``, a tab or a CR) is written after a ``'``;
- ``to_parquet(folder)``: ``ops.parquet``, ``events.parquet``, ``transfers.parquet`` (and
  ``xla.parquet``, ``tf_ops`` a list column), dtypes kept (categories, nullable integers), with
  pyarrow (``pip install 'tfplace_widget[parquet]'``); without it an ``ImportError`` says so.

The folder is made when missing; a file that cannot be written is a :class:`TraceWriteError`
naming it. Each file appears complete or not at all. Existing files are replaced, unless
``overwrite=False``: then one that exists is a ``FileExistsError`` and none is written.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

import pandas as pd

from .output import exists_error, make_folder, write_atomically

if TYPE_CHECKING:  # pragma: no cover
    from .._model.trace import PlacementTrace

TABLES = ("ops", "events", "transfers")
XLA_TABLE = "xla"  # written too when the trace has XLA instructions
MEMORY_TABLE = "memory"  # and when it has allocator records
PARQUET_FIX = (
    "to_parquet needs pyarrow, which is not installed: pip install 'tfplace_widget[parquet]' "
    "(or pip install pyarrow). trace.to_csv(folder) and trace.save(path) work without it."
)


def table_names(trace: PlacementTrace) -> tuple[str, ...]:
    """The tables of ``trace`` the exports write: the three, then ``xla`` when it has rows
    (an XLA cluster ran) and ``memory`` when it has rows (TensorFlow's allocator records), so
    that a trace without them gives what it always gave."""
    extra = tuple(
        name
        for name in (XLA_TABLE, MEMORY_TABLE)
        if getattr(trace, name, None) is not None and len(getattr(trace, name))
    )
    return (*TABLES, *extra)


def to_frames(trace: PlacementTrace) -> dict[str, pd.DataFrame]:
    """Deep copies of the trace's tables, by name, in the order ``ops``, ``events``,
    ``transfers``, then ``xla`` and ``memory`` when the trace has rows in them (each instruction's
    ``tf_ops`` list copied too, so changing one leaves the trace's alone)."""
    frames = {name: getattr(trace, name).copy(deep=True) for name in table_names(trace)}
    if XLA_TABLE in frames:
        xla = frames[XLA_TABLE]
        xla["tf_ops"] = pd.Series(
            [list(ops) for ops in xla["tf_ops"]], index=xla.index, dtype=object
        )
    return frames


# A field a spreadsheet would run as a formula (CSV injection): text that starts with one of
# these is written with a ' in front, as OWASP advises, so it opens as the text it is.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_ready(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as CSV holds it: the ``xla`` table's ``tf_ops`` lists as space-separated
    names (one field each, readable by ``str.split``), and every text that a spreadsheet would
    take for a formula (``=cmd|' /C calc'!A0``, ``+``, ``-``, ``@``, a tab or CR first) behind
    a ``'``."""
    if name == XLA_TABLE:
        frame = frame.assign(tf_ops=[" ".join(map(str, ops)) for ops in frame["tf_ops"]])
    changed = {}
    for column, values in frame.items():
        if not (
            pd.api.types.is_object_dtype(values)
            or pd.api.types.is_string_dtype(values)
            or isinstance(values.dtype, pd.CategoricalDtype)
        ):
            continue
        text = values.astype(object)
        formula = text.str[:1].isin(_FORMULA_START)
        if formula.any():
            changed[column] = text.where(~formula, "'" + text[formula])
    return frame.assign(**changed) if changed else frame


def to_csv(
    trace: PlacementTrace, folder: str | os.PathLike, *, overwrite: bool = True
) -> dict[str, str]:
    """Write the tables (:func:`table_names`) as CSV files into ``folder``; their paths by
    table name."""

    def encode(frame: pd.DataFrame, stream: IO[bytes]) -> None:
        text = io.StringIO()
        # CRLF, as RFC 4180 has it: a field holding a CR is then quoted (with "\n" ends it
        # was not, and a spreadsheet started a row of its own there).
        frame.to_csv(text, index=False, lineterminator="\r\n")
        stream.write(text.getvalue().encode("utf-8"))

    return _write_tables(trace, folder, "CSV", ".csv", encode, overwrite, _csv_ready)


def to_parquet(
    trace: PlacementTrace, folder: str | os.PathLike, *, overwrite: bool = True
) -> dict[str, str]:
    """Write the tables (:func:`table_names`) as Parquet files into ``folder``; their paths by
    table name.
    ``ImportError`` (naming the extra to install) without pyarrow."""
    try:
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise ImportError(PARQUET_FIX, name="pyarrow") from exc

    def encode(frame: pd.DataFrame, stream: IO[bytes]) -> None:
        frame.to_parquet(stream, engine="pyarrow", index=False)

    return _write_tables(trace, folder, "Parquet", ".parquet", encode, overwrite)


def table_paths(
    folder: str | os.PathLike, suffix: str, names: tuple[str, ...] = TABLES
) -> dict[str, str]:
    """Where the tables ``names`` go in ``folder``, by name: ``ops`` -> ``folder/ops.csv``..."""
    return {name: os.path.join(os.fspath(folder), name + suffix) for name in names}


def _write_tables(
    trace: PlacementTrace,
    folder: str | os.PathLike,
    kind: str,
    suffix: str,
    encode: Callable[[pd.DataFrame, IO[bytes]], None],
    overwrite: bool,
    prepare: Callable[[str, pd.DataFrame], pd.DataFrame] | None = None,
) -> dict[str, str]:
    """Each table (``prepare(name, frame)`` when given) to its file, atomically. Without ``overwrite``, an existing one is refused
    before any is written, and the files this call made are removed if a later one fails."""
    paths = table_paths(folder, suffix, table_names(trace))
    make_folder(os.fspath(folder), f"{kind} tables")
    # an xla table of an earlier export, which this trace (no XLA) would leave beside its own
    stale = [p for n, p in table_paths(folder, suffix, (XLA_TABLE,)).items() if n not in paths]
    if not overwrite:
        for name, path in [*paths.items(), *((XLA_TABLE, p) for p in stale)]:
            if os.path.lexists(path):
                raise exists_error(f"the {name} table", path)
    for path in stale:  # replaced as a set: no table of another trace is left
        if os.path.isfile(path) and not os.path.islink(path):
            os.unlink(path)
    made: list[str] = []
    try:
        for name, path in paths.items():
            frame = getattr(trace, name)
            if prepare is not None:
                frame = prepare(name, frame)
            write_atomically(
                path,
                f"the {name} table",
                lambda stream, frame=frame: encode(frame, stream),
                overwrite=overwrite,
            )
            made.append(path)
    except BaseException:
        if not overwrite:  # all new: leave none of a set that is not whole
            for path in made:
                with contextlib.suppress(OSError):
                    os.unlink(path)
        raise
    return paths
