"""Trace options in one canonical form, shared by ``trace_placement`` and the panel.

Pure Python (no TensorFlow import).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

MAX_DEVICES_PER_TYPE = 64
# The one rule for a number of CPUs: trace_placement's device_count, `tfplace run --cpus` and
# `%%tfplace --cpus` all say it in these words.
CPU_COUNT_RULE = f"a whole number from 1 to {MAX_DEVICES_PER_TYPE} (TensorFlow needs a CPU device)"


def is_device_count(count: Any, kind: str) -> bool:
    """Whether ``count`` is a valid number of ``kind`` devices: 0 to 64, and at least 1 CPU."""
    low = 1 if kind.upper() == "CPU" else 0
    return (
        isinstance(count, int)
        and not isinstance(count, bool)
        and low <= count <= MAX_DEVICES_PER_TYPE
    )


def cpu_count_argument(text: str) -> int:
    """The argparse ``type`` of ``--cpus`` (the command line and ``%%tfplace``)."""
    try:
        count = int(text)
    except ValueError:
        count = None
    if count is None or not is_device_count(count, "CPU"):
        shown = text if count is not None else repr(text)
        raise argparse.ArgumentTypeError(f"expected {CPU_COUNT_RULE}, not {shown}")
    return count


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
