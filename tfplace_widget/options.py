"""Trace options in one canonical form, shared by ``trace_placement`` and the panel.

Pure Python (no TensorFlow import).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def normalize_device_count(device_count: Mapping[str, Any]) -> dict[str, Any]:
    """``device_count`` with upper-case device-type keys: ``{"cpu": 3}`` -> ``{"CPU": 3}``.

    TensorFlow's device types are upper-case and ``trace_placement`` reads the keys without
    regard to case, so ``"cpu"`` and ``"CPU"`` name the same type. Two spellings of one type
    with different counts (``{"cpu": 3, "CPU": 1}``) raise ``ValueError`` instead of one of
    them winning by dictionary order; two spellings with the same count are one entry.
    Counts are passed through as they are (``trace_placement`` checks them).
    """
    if not isinstance(device_count, Mapping):
        raise TypeError(
            f"device_count must be a dict like {{'CPU': 2}}, not {type(device_count).__name__}."
        )
    normalized: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, count in device_count.items():
        if not isinstance(key, str):
            raise ValueError(f"device_count keys are device types like 'CPU', not {key!r}.")
        kind = key.upper()
        if kind in normalized and normalized[kind] != count:
            raise ValueError(
                f"device_count names {kind} twice with different counts: "
                f"{spelled[kind]!r}: {normalized[kind]!r} and {key!r}: {count!r}. Device types "
                f"are not case-sensitive; give one count, e.g. {{{kind!r}: {count!r}}}."
            )
        normalized[kind] = count
        spelled.setdefault(kind, key)
    return normalized
