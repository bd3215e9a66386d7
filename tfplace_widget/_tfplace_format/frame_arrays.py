"""DataFrames as a JSON document plus one typed array per column (format version 2).

The document is ``frame_json``'s (``{"rows", "index", "columns"}``, each column with its
``name`` and ``dtype``), but a column's values are, instead of a JSON list, ``"data"``: the
members that hold them, each named ``frames/<frame>/<position>.<part>``:

- numbers and flags (numpy ``int*``/``uint*``/``float*``/``bool``): ``{"array": member,
  "type": "<f8"}`` (numpy's name of the type), the values as little-endian bytes (flags one byte each, 0 or 1);
- pandas' nullable ``Int*``/``UInt*``/``Float*``/``boolean``: the same, plus ``"missing"``:
  a member of one bit per row (``numpy.packbits``, little bit order), set where missing;
- ``category``: ``"array"`` holds the codes (-1: missing), the categories stay in the document;
- text (``str``/``string``, and ``object`` columns of strings and missing values):
  ``"array"`` holds codes into ``"strings"``, a member holding a JSON list of the column's
  distinct strings; a negative code is missing (``string`` dtype: its missing value;
  ``object``: -1 ``None``, -2 ``NaN``, -3 ``pd.NA``); a column whose rows each have a
  string of their own (op names) has no ``"array"``: its strings are its rows, in order.

Other ``object`` columns (a finding's ``evidence`` and ``fix``, lists of op names) keep their
JSON ``"values"``, as in version 1, which :func:`frame_from_members` also reads.

Reading trusts nothing: each member's length must be that of the document's rows in the type
the column's dtype has (the type is checked too), a code must index the strings or categories,
a flag must be 0 or 1, and what is decoded counts against the archive's ``MAX_CELLS`` (a cell
decoded takes at most 8 bytes, plus the strings of a dictionary). Nothing is unpickled: arrays
are read with ``numpy.frombuffer`` from bytes already bounded by the archive's limits.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from .._model.errors import FrameFormatError
from .._sources.limits import json_values, shown
from .frame_json import (
    NULLABLE,
    NUMPY,
    column_from_json,
    column_to_json,
    frame_from_json,
    index_to_json,
)

# How the reader gets a member's bytes (bounded) and a dictionary's strings (counted), and
# counts the cells it decodes.
ReadBytes = Callable[[str], bytes]
ReadStrings = Callable[[str], Any]
TakeCells = Callable[[int, str], None]

# Codes of missing text in an ``object`` column (a ``string`` column uses -1 only).
_MISSING_OBJECTS = (None, math.nan, pd.NA)  # codes -1, -2, -3
CODE_TYPES = ("|i1", "<i2", "<i4", "<i8")  # as numpy writes them: one byte has no order
# A text column of at least this many rows whose sampled rows are all distinct is written a
# string per row (``_name_per_row``).
_PER_ROW_ROWS = 1 << 16
_PER_ROW_SAMPLE = 1 << 10
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")


def member_prefix(frame: str) -> str:
    """Where the arrays of ``trace.<frame>`` are: ``frames/<frame>/``."""
    return f"frames/{frame}/"


# -- writing ----------------------------------------------------------------------------------
def frame_to_members(
    frame: pd.DataFrame, name: str, what: str
) -> tuple[dict[str, Any], dict[str, bytes], int]:
    """``frame`` as its document, the members holding its columns (see the module docstring)
    and the cells they hold (as the reader counts them: ``limits.MAX_CELLS``), for
    ``frames/<name>.json``; ``what`` names it in errors."""
    if not all(isinstance(c, str) for c in frame.columns) or frame.columns.has_duplicates:
        raise TypeError(f"{what}: column names must be distinct strings to be saved.")
    members: dict[str, bytes] = {}
    columns, cells = [], 0
    for position, column in enumerate(frame.columns):
        series = frame[column]
        where = f"{member_prefix(name)}{position}"
        spec, strings = _column_to_arrays(series, where, members)
        if spec is None:  # objects that are not text: JSON, as in version 1
            spec = column_to_json(series, f"{what} column {column!r}")
        else:
            cells += len(frame) + strings
        columns.append(spec)
    document = {"rows": len(frame), "index": index_to_json(frame.index, what), "columns": columns}
    return document, members, cells


def to_planes(values: np.ndarray) -> bytes:
    """``values`` as an array member holds them: little-endian, split into byte planes."""
    little = values.astype(values.dtype.newbyteorder("<"), copy=False)
    return little.view(np.uint8).reshape(len(little), little.dtype.itemsize).T.tobytes()


def from_planes(raw: bytes, kind: str, rows: int) -> np.ndarray:
    """The ``rows`` values of type ``kind`` that :func:`to_planes` wrote as ``raw`` (of the
    right length), in native byte order (a writable copy)."""
    planes = np.frombuffer(raw, dtype=np.uint8).reshape(np.dtype(kind).itemsize, rows)
    values = planes.T.copy().view(np.dtype(kind)).reshape(rows)  # C order, writable
    return values.astype(values.dtype.newbyteorder("="), copy=False)


def _column_to_arrays(
    series: pd.Series, where: str, members: dict[str, bytes]
) -> tuple[dict[str, Any] | None, int]:
    """The spec of ``series`` with its arrays put in ``members``, and the number of distinct
    strings it keeps; None for a column of other objects than text."""
    dtype = series.dtype
    spec: dict[str, Any] = {"name": series.name, "dtype": dtype.name}

    def array(part: str, values: np.ndarray) -> dict[str, Any]:
        members[f"{where}.{part}"] = to_planes(values)
        return {"array": f"{where}.{part}", "type": _little(values.dtype)}

    if isinstance(dtype, pd.CategoricalDtype):
        categories = column_to_json(pd.Series(dtype.categories), "categories")
        spec.update(dtype="category", ordered=bool(dtype.ordered), categories=categories)
        spec["data"] = array("codes", series.cat.codes.to_numpy())
    elif isinstance(dtype, np.dtype) and dtype.kind in "iufb":
        spec["data"] = array("values", series.to_numpy())
    elif dtype.name in NULLABLE:
        missing = series.isna().to_numpy()
        values = series.to_numpy(dtype=dtype.numpy_dtype, na_value=dtype.numpy_dtype.type(0))
        spec["data"] = array("values", values)
        members[f"{where}.missing"] = np.packbits(missing, bitorder="little").tobytes()
        spec["data"]["missing"] = f"{where}.missing"
    elif isinstance(dtype, pd.StringDtype):
        na = "nan" if _is_nan(dtype.na_value) else "NA"
        spec.update(dtype="string", storage=dtype.storage, na=na)
        spec["data"], strings = _text(series.to_numpy(dtype=object), None, where, members, array)
        return spec, strings
    elif isinstance(dtype, np.dtype) and dtype.kind == "O":
        values = series.to_numpy()
        if pd.api.types.infer_dtype(values, skipna=True) not in ("string", "empty"):
            return None, 0
        spec["data"], strings = _text(values, _missing_kinds(values), where, members, array)
        return spec, strings
    else:
        return None, 0  # frame_json refuses it, naming the column
    return spec, 0


def _text(
    values: np.ndarray,
    kinds: np.ndarray | None,
    where: str,
    members: dict[str, bytes],
    array: Callable[[str, np.ndarray], dict[str, Any]],
) -> tuple[dict[str, Any], int]:
    """Dictionary-encode text: codes (the narrowest type) and the distinct strings (and how
    many there are); a large column of a name per row (op names) is written row by row, with
    no codes."""
    if _name_per_row(values):
        text, spec = strings_to_member(values.tolist())
        members[f"{where}.strings"] = text
        return {**spec, "strings": f"{where}.strings"}, strings_cells(text, spec)
    codes, strings = pd.factorize(values, use_na_sentinel=True)
    data: dict[str, Any] = {}
    if len(strings) < len(values) or (kinds is not None and len(values) and codes.min() < 0):
        if kinds is not None:  # which missing value each missing row holds: -1, -2 or -3
            codes = np.where(codes < 0, kinds, codes)
        narrowest = next(t for t in CODE_TYPES if len(strings) < np.iinfo(np.dtype(t)).max)
        data = array("codes", codes.astype(narrowest))
    # else every row has a string of its own, in order (op names): they need no codes
    text, spec = strings_to_member(list(strings))
    members[f"{where}.strings"] = text
    data.update(spec, strings=f"{where}.strings")
    return data, strings_cells(text, spec)


def _name_per_row(values: np.ndarray) -> bool:
    """Whether ``values`` is better written row by row than as codes into its distinct strings:
    a column of ``_PER_ROW_ROWS`` rows or more, none missing, whose rows sampled at
    ``_PER_ROW_SAMPLE`` evenly spaced places are all distinct (op names: hashing every row to
    find the few repeated takes several times as long as deflating their text, and the
    dictionary would hold almost every row all the same). The reader reads both the same way."""
    if len(values) < _PER_ROW_ROWS:
        return False
    sample = values[:: len(values) // _PER_ROW_SAMPLE].tolist()
    return len(set(sample)) == len(sample) and not pd.isna(values).any()


def strings_cells(text: bytes, spec: dict[str, Any]) -> int:
    """The cells a reader counts for the strings member ``text`` (``limits.MAX_CELLS``)."""
    return text.count(b"\0") + 1 if "split" in spec else json_values(text)


def strings_to_member(strings: list[str]) -> tuple[bytes, dict[str, Any]]:
    """A dictionary's distinct ``strings`` as a member's bytes, and what its spec says of them:
    UTF-8 joined by NUL with their ``count`` (``"split": "nul"``: split at C speed on load),
    or a JSON list (as format version 2 wrote them) when a string holds a NUL."""
    joined = "\0".join(strings)
    if joined.count("\0") == max(len(strings) - 1, 0):
        return joined.encode("utf-8"), {"split": "nul", "count": len(strings)}
    return json.dumps(strings, ensure_ascii=False).encode("utf-8"), {}


def _missing_kinds(values: np.ndarray) -> np.ndarray:
    """-1 for ``None``, -2 for ``NaN``, -3 for ``pd.NA`` (rows of text: any; unused)."""
    kinds = np.full(len(values), -1, dtype=np.int64)
    missing = pd.isna(values)
    for row in np.flatnonzero(missing):
        value = values[row]
        kinds[row] = -3 if value is pd.NA else -2 if _is_nan(value) else -1
    return kinds


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


# -- reading ----------------------------------------------------------------------------------
class ArrayReader:
    """Reads the ``data`` of a frame document's columns from the members of one file."""

    def __init__(
        self,
        frame: str,
        read: ReadBytes,
        strings: ReadStrings,
        take_cells: TakeCells,
        prefix: str | None = None,
    ) -> None:
        self.prefix = prefix or member_prefix(frame)  # where its members must be
        self._read, self._strings, self._take_cells = read, strings, take_cells

    def take_cells(self, rows: int, what: str) -> None:
        """Count the ``rows`` cells of a column against ``limits.MAX_CELLS``."""
        self._take_cells(rows, f"{self.prefix[:-1]}.json {what}")

    def member(self, data: dict, part: str) -> str:
        name = data[part]
        if not isinstance(name, str) or not (
            name.startswith(self.prefix) and _NAME.match(name[len(self.prefix) :])
        ):
            raise FrameFormatError(f"its {part} member is {shown(name)}, not one of {self.prefix}")
        return name

    def array(self, data: dict, rows: int, types: tuple[str, ...], what: str) -> np.ndarray:
        """The array ``data["array"]`` names: ``rows`` values of one of ``types``."""
        kind = data["type"]
        if kind not in types:
            raise FrameFormatError(
                f"{what} is stored as {shown(kind)}, not as {' or '.join(types)}"
            )
        name = self.member(data, "array")
        raw = self._read(name)
        size = np.dtype(kind).itemsize
        if len(raw) != rows * size:
            raise FrameFormatError(
                f"{name} holds {len(raw):,} bytes, not the {rows * size:,} of {rows:,} rows "
                f"of {kind}"
            )
        return from_planes(raw, kind, rows)

    def missing(self, data: dict, rows: int) -> np.ndarray:
        name = self.member(data, "missing")
        raw = self._read(name)
        if len(raw) != (rows + 7) // 8:
            raise FrameFormatError(
                f"{name} holds {len(raw):,} bytes, not the {(rows + 7) // 8:,} of a bit per row"
            )
        bits = np.frombuffer(raw, dtype=np.uint8)
        return np.unpackbits(bits, count=rows, bitorder="little").astype(bool)

    def strings(self, data: dict, what: str) -> list[str]:
        """The distinct strings ``data["strings"]`` names (each a cell, ``limits.MAX_CELLS``):
        joined by NUL (``"split": "nul"``, with their ``count``) or a JSON list."""
        name = self.member(data, "strings")
        if "split" in data:
            return self._split(data, name)
        strings = self._strings(name)
        if not isinstance(strings, list) or not all(isinstance(s, str) for s in strings):
            raise FrameFormatError(f"{name} is not a list of strings")
        return strings

    def _split(self, data: dict, name: str) -> list[str]:
        count = data.get("count")
        if data["split"] != "nul" or type(count) is not int or count < 0:
            raise FrameFormatError(f"{name} has strings {shown(data)}, not split at NUL")
        raw = self._read(name)
        self._take_cells(raw.count(b"\0") + 1, name)
        try:
            strings = raw.decode("utf-8").split("\0") if count else []
        except UnicodeDecodeError as exc:
            raise FrameFormatError(f"{name} is not UTF-8 text ({exc.reason})") from None
        if len(strings) != count or (not count and raw):
            raise FrameFormatError(f"{name} holds {len(strings):,} strings, not {count:,}")
        return strings


def column_from_arrays(spec: dict, rows: int, arrays: ArrayReader) -> Any:
    """The values of a column whose spec has ``data`` (see the module docstring)."""
    dtype, data, what = spec["dtype"], spec["data"], f"column {spec.get('name')!r}"
    if not isinstance(data, dict):
        raise FrameFormatError(f"{what} has data {shown(data)}, not an object")
    arrays.take_cells(rows, what)
    if dtype == "category":
        categories = spec["categories"]
        if categories["dtype"] == "category":
            raise FrameFormatError(f"{what} has categories of categories")
        kind = pd.Index(column_from_json(categories, len(categories["values"])))
        codes = arrays.array(data, rows, CODE_TYPES, what)
        _check_codes(codes, -1, len(kind), what)
        return pd.Categorical.from_codes(
            codes, dtype=pd.CategoricalDtype(kind, ordered=bool(spec["ordered"]))
        )
    if dtype in ("string", "object"):
        return _text_from_arrays(spec, rows, arrays, what)
    if dtype in NULLABLE:
        numpy = pd.api.types.pandas_dtype(dtype).numpy_dtype
        values = _numbers(arrays.array(data, rows, (_little(numpy),), what), numpy, what)
        mask = arrays.missing(data, rows)
        if numpy.kind == "b":
            return pd.arrays.BooleanArray(values, mask)
        if numpy.kind == "f":
            return pd.arrays.FloatingArray(values, mask)
        return pd.arrays.IntegerArray(values, mask)
    if dtype not in NUMPY:
        raise FrameFormatError(f"{what} has an unknown dtype {shown(dtype)}")
    numpy = np.dtype(dtype)
    return _numbers(arrays.array(data, rows, (_little(numpy),), what), numpy, what)


def _little(dtype: np.dtype) -> str:
    return dtype.newbyteorder("<").str


def _numbers(values: np.ndarray, dtype: np.dtype, what: str) -> np.ndarray:
    """``values`` as ``dtype``; flags are the bytes 0 and 1 only."""
    if dtype.kind == "b":
        as_bytes = values.view(np.uint8)
        if len(as_bytes) and as_bytes.max() > 1:
            raise FrameFormatError(f"{what} holds a flag that is neither 0 nor 1")
    return values


def _text_from_arrays(spec: dict, rows: int, arrays: ArrayReader, what: str) -> Any:
    data, dtype = spec["data"], spec["dtype"]
    strings = arrays.strings(data, what)
    if "array" not in data:  # a string of its own on each row
        if len(strings) != rows:
            raise FrameFormatError(f"{what} has {len(strings):,} strings for {rows:,} rows")
        codes = np.arange(rows)
    else:
        codes = arrays.array(data, rows, CODE_TYPES, what)
    if dtype == "object":
        _check_codes(codes, -len(_MISSING_OBJECTS), len(strings), what)
        table = np.array([*strings, *reversed(_MISSING_OBJECTS)], dtype=object)
        return table[codes]  # a negative code picks a missing value from the end
    na_value = np.nan if spec["na"] == "nan" else pd.NA
    _check_codes(codes, -1, len(strings), what)
    table = np.array([*strings, na_value], dtype=object)
    try:
        string = pd.StringDtype(spec["storage"], na_value=na_value)
        return pd.array(table[codes], dtype=string)
    except ImportError:  # saved with pyarrow-backed strings, read without pyarrow
        return pd.array(table[codes], dtype=pd.StringDtype("python", na_value=na_value))


def _check_codes(codes: np.ndarray, low: int, count: int, what: str) -> None:
    """Refuse a code outside ``[low, count)``: it would index nothing, or wrap around."""
    if len(codes) and (codes.min() < low or codes.max() >= count):
        bad = codes[(codes < low) | (codes >= count)][0]
        raise FrameFormatError(f"{what} has the code {int(bad)}, outside {low}..{count - 1}")


def frame_from_members(document: Any, arrays: ArrayReader) -> pd.DataFrame:
    """The DataFrame :func:`frame_to_members` wrote (or ``frame_json``: a column's values may
    be JSON); :class:`FrameFormatError` if malformed."""

    def column(spec: dict, rows: int) -> Any:
        if "data" in spec:
            return column_from_arrays(spec, rows, arrays)
        return column_from_json(spec, rows)

    return frame_from_json(document, column)
