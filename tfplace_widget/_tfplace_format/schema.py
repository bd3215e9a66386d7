"""The columns and dtypes of a trace's frames, checked on load (issue 21).

A ``.tfplace`` file may come from anyone: a frame whose columns the panel, the findings or the
command line cannot work with (a missing ``device``, dicts where op names belong, strings in a
time column) is refused when the file is opened, naming the column, instead of failing later
deep inside pandas. The schema is what tracing makes: the columns of ``model.columns`` (text
unless a check below says otherwise; ``OPS_ADDED_LATER`` text or missing, and absent from older
files), a prediction's extra columns, the findings' columns; text columns may be ``object`` (of
``str``) or ``str`` dtype, as both occur; an empty frame's columns may have any dtype (a
prediction's empty ``events`` are ``float64``). Other columns, which a newer version may add,
are kept when they hold plain values (text, numbers, flags, categories).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from .._model.columns import (
    EVENTS_COLUMNS,
    FINDING_KINDS,
    FINDINGS_COLUMNS,
    MEMORY_COLUMNS,
    MEMORY_KINDS,
    OPS_ADDED_LATER,
    OPS_ADDED_LATER_BYTES,
    OPS_COLUMNS,
    SEVERITIES,
    TRANSFERS_COLUMNS,
    XLA_COLUMNS,
)
from .._sources.limits import MAX_ABS_US, shown

Check = Callable[[pd.Series], str | None]  # what is wrong with the column, or None


def _text(column: pd.Series) -> str | None:
    if isinstance(column.dtype, pd.StringDtype):
        return "has missing values where a trace has text" if column.isna().any() else None
    if _objects(column) and pd.api.types.infer_dtype(column, skipna=False) == "string":
        return None
    return f"must hold text (strings), not {_what_it_holds(column)}"


def _text_or_missing(column: pd.Series) -> str | None:
    """Text where there is some, missing elsewhere (``xla_op`` outside XLA)."""
    if isinstance(column.dtype, pd.StringDtype):
        return None
    present = column[column.notna()]
    if _objects(column) and (
        not len(present) or pd.api.types.infer_dtype(present, skipna=False) == "string"
    ):
        return None
    return f"must hold text (strings) or missing values, not {_what_it_holds(column)}"


def _number(column: pd.Series) -> str | None:
    dtype = column.dtype
    if not pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype):
        return f"must hold numbers, not {_what_it_holds(column)}"
    if dtype.kind == "f":
        values = column.to_numpy(dtype=float, na_value=math.nan)
        if np.isinf(values).any():
            return "holds an infinite number, which no trace has"
    return None


def _integer(nullable: bool) -> Check:
    def check(column: pd.Series) -> str | None:
        dtype = column.dtype
        whole = pd.api.types.is_integer_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)
        if whole and (nullable or isinstance(dtype, np.dtype)):
            return None
        kind = "whole numbers (missing allowed)" if nullable else "whole numbers"
        return f"must hold {kind}, not {_what_it_holds(column)}"

    return check


def _time(check: Check, duration: bool = False) -> Check:
    """``check`` (numbers, or whole numbers), and microseconds of a trace: below 1e17 in
    magnitude, and a duration not negative (as the Chrome trace reader checks them)."""

    def check_time(column: pd.Series) -> str | None:
        problem = check(column)
        if problem is not None:
            return problem
        values = column.to_numpy(dtype=float, na_value=math.nan)
        if (np.abs(values) >= MAX_ABS_US).any():
            return "holds a time of 1e17 microseconds or more (3,000 years), which no trace has"
        if duration and (values < 0).any():
            return "holds a negative duration, which no trace has"
        return None

    return check_time


def _thread_id(column: pd.Series) -> str | None:
    """Whole numbers that a Chrome trace can hold as ``args.thread`` (not -2**63)."""
    problem = _integer(False)(column)
    if problem is None and (column == np.iinfo(np.int64).min).any():
        return "holds -2**63, which is no thread id"
    return problem


def _flag(column: pd.Series) -> str | None:
    if column.dtype == bool:
        return None
    return f"must hold true/false flags, not {_what_it_holds(column)}"


def _categories(
    values: tuple[str, ...], *more: str, ordered: bool = False, missing: bool = True
) -> Check:
    """A category of exactly ``values`` (and then ``more``, as a prediction's ``how`` has);
    with ``missing`` False, every row has one."""
    allowed = [list(values), [*values, *more]]

    def check(column: pd.Series) -> str | None:
        dtype = column.dtype
        if (
            isinstance(dtype, pd.CategoricalDtype)
            and list(dtype.categories) in allowed
            and bool(dtype.ordered) == ordered
        ):
            if not missing and column.isna().any():
                return "has a missing value, where every op of a trace has one"
            return None
        return f"must be a category of {', '.join(values)}, not {_what_it_holds(column)}"

    return check


def _op_lists(column: pd.Series) -> str | None:
    if _objects(column) and all(
        isinstance(ops, list) and all(isinstance(op, str) for op in ops) for ops in column
    ):
        return None
    return f"must hold lists of op names, not {_what_it_holds(column)}"


def _evidence(column: pd.Series) -> str | None:
    def numbers(value: Any) -> bool:
        return isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
            for k, v in value.items()
        )

    if _objects(column) and all(numbers(value) for value in column):
        return None
    return f"must hold objects of named numbers, not {_what_it_holds(column)}"


# A fix's keys: today's, and those of files written before ``not_simulable``.
_FIX_KEY_SETS = (
    {"overrides", "edit", "no_fix", "not_simulable"},
    {"overrides", "edit", "no_fix"},
)


def _fixes(column: pd.Series) -> str | None:
    def fix(value: Any) -> bool:
        if value is None:
            return True
        overrides = value.get("overrides") if isinstance(value, dict) else None
        return (
            isinstance(value, dict)
            and set(value) in _FIX_KEY_SETS
            and isinstance(value["edit"], str)
            and isinstance(value["no_fix"], str)
            and isinstance(value.get("not_simulable", ""), str)
            and (
                overrides is None
                or (
                    isinstance(overrides, dict)
                    and all(isinstance(k, str) and isinstance(v, str) for k, v in overrides.items())
                )
            )
        )

    if _objects(column) and all(fix(value) for value in column):
        return None
    return f"must hold fixes (overrides, edit, no_fix, not_simulable) or nothing, not {_what_it_holds(column)}"


def _one_of(values: tuple[str, ...]) -> Check:
    def check(column: pd.Series) -> str | None:
        problem = _text(column)
        if problem is None and not column.isin(values).all():
            unknown = column[~column.isin(values)].iloc[0]
            return f"holds {unknown[:40]!r}, which is none of {', '.join(values)}"
        return problem

    return check


def _plain(column: pd.Series) -> str | None:
    """Another column: kept when its values are plain (text, numbers, flags, categories)."""
    if not _objects(column) or _text(column) is None:
        return None
    return f"holds {_what_it_holds(column)}; a trace's columns hold text, numbers or flags"


def _objects(column: pd.Series) -> bool:
    return pd.api.types.is_object_dtype(column.dtype)


def _what_it_holds(column: pd.Series) -> str:
    """The column's dtype, and for ``object`` the first value that is not a string."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return f"categories {shown(list(column.dtype.categories))}"
    if not _objects(column):
        return f"dtype {column.dtype}"
    for value in column:
        if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
            return "missing values"
        if not isinstance(value, str):
            return f"a {type(value).__name__} ({shown(value)})"
    return "strings"


@functools.cache
def schemas() -> dict[str, dict[str, Check]]:
    """Each frame's known columns and their checks: required ones first, then the optional ones
    (those of a prediction; ``cross_task`` is added on load to files written before it)."""
    from .._explain import HOW_VALUES
    from .._model.kernels import GPU_KERNEL_VALUES

    ops = dict.fromkeys(OPS_COLUMNS, _text)
    ops.update(dict.fromkeys(OPS_ADDED_LATER, _text_or_missing))
    ops.update(
        how=_categories(HOW_VALUES, "error", missing=False),  # a prediction's may be an error
        gpu_kernel=_categories(GPU_KERNEL_VALUES),
        start_us=_time(_number),
        duration_us=_time(_number, duration=True),
        runs=_integer(nullable=True),
        output_bytes=_integer(nullable=True),
        **dict.fromkeys(OPS_ADDED_LATER_BYTES, _integer(nullable=True)),
    )
    events = dict.fromkeys(EVENTS_COLUMNS, _text)
    events.update(
        thread=_thread_id,
        start_us=_time(_integer(False)),
        duration_us=_time(_integer(False), duration=True),
    )
    transfers = dict.fromkeys(TRANSFERS_COLUMNS, _text)
    transfers.update(bytes=_integer(nullable=True), cross_task=_flag)
    findings = {
        "kind": _one_of(FINDING_KINDS),
        "severity": _categories(SEVERITIES, ordered=True),
        "ops": _op_lists,
        "message": _text,
        "evidence": _evidence,
        "predicted": _flag,
        "fix": _fixes,
    }
    assert list(findings) == FINDINGS_COLUMNS
    xla = dict.fromkeys(XLA_COLUMNS, _text)
    xla.update(
        start_us=_time(_integer(False)),
        duration_us=_time(_integer(False), duration=True),
        tf_ops=_op_lists,
    )
    memory = dict.fromkeys(MEMORY_COLUMNS, _text)
    memory.update(
        time_us=_time(_integer(False)),
        bytes=_integer(False),
        live_bytes=_integer(False),
        kind=_one_of(MEMORY_KINDS),
        variable=_text_or_missing,
    )
    return {
        "ops": ops,
        "events": events,
        "transfers": transfers,
        "findings": findings,
        "measured": events,  # a prediction's: the events of the trace it was predicted from
        "xla": xla,
        "memory": memory,
    }


OPTIONAL = {
    # OPS_ADDED_LATER: added on load to files written before them (absent from predictions)
    "ops": {
        "predicted_device": _text,
        "traced_device": _text,
        **dict.fromkeys(OPS_ADDED_LATER, _text_or_missing),
        **dict.fromkeys(OPS_ADDED_LATER_BYTES, _integer(nullable=True)),
    },
    "transfers": {"cross_task": _flag, "predicted": _flag, "copy": _text},
    # predicted: absent from files written before it (their findings are found again)
    "findings": {"predicted": _flag, "fix": _fixes},
    # kind, variable: absent from files written before them (upgrades.py)
    "memory": {"kind": _one_of(MEMORY_KINDS), "variable": _text_or_missing},
}


def check_frame(frame: pd.DataFrame, name: str) -> str | None:
    """What makes ``frame`` unusable as ``trace.<name>`` (a column missing, or of the wrong
    kind, named), or None when it is fine."""
    schema = schemas()[name]
    optional = OPTIONAL.get(name, {})
    if not frame.columns.is_unique or not all(isinstance(c, str) for c in frame.columns):
        return "its column names are not distinct strings"
    index = frame.index
    if not (isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1):
        return "its rows are not numbered 0, 1, 2... as a trace's are"
    missing = [c for c in schema if c not in frame.columns and c not in optional]
    if missing:
        return f"it has no {missing[0]!r} column (a trace's {name} have {', '.join(schema)})"
    if not len(frame):
        return None
    for column in frame.columns:
        check = schema.get(column) or optional.get(column) or _plain
        problem = check(frame[column])
        if problem is not None:
            return f"column {column!r} {problem}"
    return None


def text_columns_of_empty(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """``frame``, its text columns made ``object`` when it has no rows (where any dtype
    passes :func:`check_frame`): an empty frame read from a file joins and compares with a
    traced one (a ``float64`` ``src_device`` made ``compare`` fail inside pandas). Only
    ``transfers``, which ``compare`` joins: a prediction's empty ``events`` are ``float64`` as
    made, and stay so."""
    if len(frame) or name != "transfers":
        return frame
    schema = {**schemas()[name], **OPTIONAL.get(name, {})}
    text = [c for c in frame.columns if schema.get(c) in (_text, _text_or_missing)]
    return frame.astype(dict.fromkeys(text, object)) if text else frame
