"""One encoder of numpy arrays for plotly.js: the timeline widget sends numbers as binary buffers
(``{"dtype", "bdata"}``), the HTML report embeds them in base64 (``{"dtype", "b64"}``); both
turn other arrays into lists, NaN and None into null, numpy scalars into numbers."""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

# The typed arrays plotly.js reads (its dtype codes).
DTYPES = {np.dtype(np.float32): "f4", np.dtype(np.float64): "f8", np.dtype(np.int32): "i4"}


def little_endian(values: np.ndarray) -> np.ndarray:
    """``values`` contiguous, in little-endian byte order (what a browser's typed arrays read)."""
    data = np.ascontiguousarray(values)
    if sys.byteorder != "little":  # pragma: no cover
        data = data.byteswap()
    return data


def as_buffer(values: np.ndarray) -> dict[str, Any]:
    """A numeric array as a binary buffer, as anywidget sends bytes."""
    return {"dtype": DTYPES[values.dtype], "bdata": little_endian(values).tobytes()}


def as_base64(values: np.ndarray) -> dict[str, str]:
    """A numeric array as its little-endian bytes in base64, for a page with no kernel."""
    data = base64.b64encode(little_endian(values).tobytes()).decode("ascii")
    return {"dtype": DTYPES[values.dtype], "b64": data}


def encode(value: Any, typed: Callable[[np.ndarray], dict] = as_buffer) -> Any:
    """``value`` with its numpy arrays (nested in dicts and lists) as plotly.js data: numeric
    arrays through ``typed``, other arrays as lists (NaN and None as null)."""
    if isinstance(value, dict):
        return {key: encode(item, typed) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(item, typed) for item in value]
    if isinstance(value, np.ndarray):
        if value.dtype in DTYPES:
            return typed(value)
        return [None if item is None or item != item else item for item in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and value != value:
        return None
    return value
