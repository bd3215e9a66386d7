"""DataFrames as plain JSON documents that come back with the same values *and* dtypes.

Column-wise: ``{"rows": n, "index": {...}, "columns": [{"name", "dtype", "values", ...}]}``.
Strict JSON (no ``NaN``/``Infinity`` tokens): a missing float is ``null`` and an infinite one
the string ``"Infinity"``/``"-Infinity"``. The dtypes a trace uses are supported: numpy
``int*``/``uint*``/``float*``/``bool``, pandas' nullable ``Int64``/``Float64``/``boolean``,
``str``/``string`` (their storage and missing value kept), ``category`` (categories, their
dtype, order) and ``object`` columns of JSON values (strings, numbers, lists, dicts; ``None``,
``NaN`` and ``pd.NA`` kept apart). Anything else is a ``TypeError`` naming the column, so a
new column type cannot be saved silently wrong.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from .._model.errors import FrameFormatError
from .._sources.limits import shown

_INFINITY = {"Infinity": math.inf, "-Infinity": -math.inf}


# -- writing ----------------------------------------------------------------------------------
def frame_to_json(frame: pd.DataFrame, what: str) -> dict[str, Any]:
    """``frame`` as a JSON-ready dict (see the module docstring); ``what`` names it in errors."""
    if not all(isinstance(name, str) for name in frame.columns) or frame.columns.has_duplicates:
        raise TypeError(f"{what}: column names must be distinct strings to be saved.")
    return {
        "rows": len(frame),
        "index": index_to_json(frame.index, what),
        "columns": [
            column_to_json(frame[name], f"{what} column {name!r}") for name in frame.columns
        ],
    }


def index_to_json(index: pd.Index, what: str) -> dict[str, Any]:
    if isinstance(index, pd.RangeIndex):
        return {"range": [index.start, index.stop, index.step]}
    return {"values": column_to_json(pd.Series(index), f"{what} index")}


def column_to_json(series: pd.Series, what: str) -> dict[str, Any]:
    dtype = series.dtype
    out: dict[str, Any] = {"name": series.name}
    if isinstance(dtype, pd.CategoricalDtype):
        categories = dtype.categories
        out.update(
            dtype="category",
            ordered=bool(dtype.ordered),
            categories=column_to_json(pd.Series(categories), f"{what} categories"),
            values=series.cat.codes.astype(np.int64).tolist(),  # -1: missing
        )
    elif isinstance(dtype, pd.StringDtype):
        na = "nan" if _is_nan(dtype.na_value) else "NA"
        values = [None if _missing(v) else v for v in series.tolist()]
        out.update(dtype="string", storage=dtype.storage, na=na, values=values)
    elif isinstance(dtype, np.dtype) and dtype.kind in "iub":
        out.update(dtype=dtype.name, values=series.tolist())
    elif isinstance(dtype, np.dtype) and dtype.kind == "f":
        out.update(dtype=dtype.name, values=[_float(v) for v in series.tolist()])
    elif isinstance(dtype, (pd.Int64Dtype, pd.BooleanDtype, pd.Float64Dtype)) or (
        isinstance(dtype, pd.api.extensions.ExtensionDtype) and dtype.name in NULLABLE
    ):
        mask = series.isna().to_numpy()
        raw = series.to_numpy(dtype=object, na_value=None)
        values = [
            None if m else _float(v) if dtype.kind == "f" else _plain(v)
            for v, m in zip(raw, mask, strict=True)
        ]
        out.update(dtype=dtype.name, values=values)
    elif isinstance(dtype, np.dtype) and dtype.kind == "O":
        values, missing = [], {"nan": [], "NA": []}
        for row, value in enumerate(series.tolist()):
            if value is pd.NA:
                missing["NA"].append(row)
                values.append(None)
            elif isinstance(value, float) and math.isnan(value):
                missing["nan"].append(row)
                values.append(None)
            else:
                values.append(_json_value(value, what, row))
        out.update(dtype="object", values=values)
        if missing["nan"] or missing["NA"]:
            out["missing"] = missing
    else:
        raise TypeError(
            f"{what} has dtype {dtype}, which a trace file cannot keep. Convert it to "
            "strings, numbers or a category first."
        )
    return out


NULLABLE = {"Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64"}
NULLABLE |= {"Float32", "Float64", "boolean"}


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or _is_nan(value)


def _float(value: Any) -> Any:
    value = float(value)
    if math.isnan(value):
        return None
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _json_value(value: Any, what: str, row: int) -> Any:
    """``value`` as JSON (numpy scalars as Python ones); ``TypeError`` for anything else."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"{what}, row {row}: {value} inside an object column cannot be kept.")
        return value
    if isinstance(value, np.generic):
        return _json_value(value.item(), what, row)
    if isinstance(value, (list, tuple)):
        return [_json_value(v, what, row) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _json_value(v, what, row) for k, v in value.items()}
    raise TypeError(
        f"{what}, row {row} holds a {type(value).__name__}, which a trace file cannot keep "
        "(only strings, numbers, lists and dicts of them)."
    )


# -- reading ----------------------------------------------------------------------------------
def frame_from_json(
    document: Any, column: Callable[[dict, int], Any] | None = None
) -> pd.DataFrame:
    """The DataFrame :func:`frame_to_json` wrote; :class:`FrameFormatError` if malformed.
    ``column(spec, rows)`` reads each column's values (default: :func:`column_from_json`;
    ``frame_arrays`` passes its reader of typed arrays)."""
    read_column = column or column_from_json
    try:
        rows = document["rows"]
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
            raise FrameFormatError(f"its number of rows is {shown(rows)}, not a whole number")
        columns = {}
        index = _index_from_json(document["index"], rows)
        for spec in document["columns"]:
            if not isinstance(spec.get("name"), str):
                raise FrameFormatError(f"a column's name is {shown(spec.get('name'))}, not text")
            values = read_column(spec, rows)
            # As a Series of its own dtype: pandas would infer ``str`` for an object array.
            dtype = object if spec["dtype"] == "object" else None
            columns[spec["name"]] = pd.Series(values, index=index, dtype=dtype, copy=False)
        frame = pd.DataFrame(columns, index=index, copy=False)
        if not columns:
            frame = pd.DataFrame(index=index)
        return frame
    except FrameFormatError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError) as exc:
        raise FrameFormatError(f"a table is malformed ({type(exc).__name__}: {exc})") from exc
    except RecursionError:  # a value nested too deep to be turned into text
        raise FrameFormatError("a table holds values nested too deep to read") from None


def _index_from_json(spec: dict, rows: int) -> pd.Index:
    if "range" in spec:
        start, stop, step = spec["range"]
        index = pd.RangeIndex(start, stop, step)
    else:
        values = spec["values"]
        index = pd.Index(
            column_from_json(values, rows), dtype=object if values["dtype"] == "object" else None
        )
    if len(index) != rows:
        raise FrameFormatError(f"an index has {len(index)} entries for {rows} rows")
    return index


def column_from_json(spec: dict, rows: int) -> Any:
    dtype, values = spec["dtype"], spec["values"]
    if not isinstance(values, list) or len(values) != rows:
        raise FrameFormatError(f"column {spec.get('name')!r} does not have {rows} values")
    if dtype == "category":
        categories = spec["categories"]
        if categories["dtype"] == "category":
            raise FrameFormatError(f"column {spec.get('name')!r} has categories of categories")
        kind = pd.Index(column_from_json(categories, len(categories["values"])))
        return pd.Categorical.from_codes(
            np.asarray(values, dtype=np.int64),
            dtype=pd.CategoricalDtype(kind, ordered=bool(spec["ordered"])),
        )
    if dtype == "string":
        na_value = np.nan if spec["na"] == "nan" else pd.NA
        storage = spec["storage"]
        try:
            string = pd.StringDtype(storage, na_value=na_value)
            return pd.array([na_value if v is None else v for v in values], dtype=string)
        except ImportError:  # saved with pyarrow-backed strings, read without pyarrow
            string = pd.StringDtype("python", na_value=na_value)
            return pd.array([na_value if v is None else v for v in values], dtype=string)
    if dtype == "object":
        out = np.empty(rows, dtype=object)
        if any(isinstance(v, (list, dict)) for v in values):
            for row, value in enumerate(values):  # one element each, never broadcast
                out[row] = value
        else:
            out[:] = values
        missing = spec.get("missing", {})
        for row in missing.get("nan", []):
            out[row] = math.nan
        for row in missing.get("NA", []):
            out[row] = pd.NA
        return out
    if dtype in NULLABLE:
        return pd.array(
            [_INFINITY.get(v, v) if isinstance(v, str) else v for v in values], dtype=dtype
        )
    if dtype not in NUMPY:
        raise FrameFormatError(f"column {spec.get('name')!r} has an unknown dtype {shown(dtype)}")
    numpy = np.dtype(dtype)
    if numpy.kind == "f":
        return np.array(
            [
                math.nan if v is None else _INFINITY.get(v, v) if isinstance(v, str) else v
                for v in values
            ],
            dtype=numpy,
        )
    return np.array(values, dtype=numpy)


# The numpy dtypes a frame document may name (no others are ever parsed).
NUMPY = {f"{kind}{bits}" for kind in ("int", "uint") for bits in (8, 16, 32, 64)}
NUMPY |= {"float16", "float32", "float64", "bool"}
