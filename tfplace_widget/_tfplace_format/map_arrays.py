"""Maps keyed by op name as typed arrays (format version 3): ``trace.inputs`` and the large
fields of the graph facts, which format version 2 wrote as JSON objects.

``maps.json`` holds ``{"strings": ..., "maps": {name: spec}}``: ``strings`` names the member
holding every distinct name of all maps once (a dictionary, as a text column's:
``frame_arrays.strings_to_member``), and each map's spec its ``kind``, its ``rows`` and the
members ``maps/<i>.<part>`` holding them (``frame_arrays.to_planes``):

- ``"keys"``: codes into the strings, one per entry, in the map's order (a map with the same
  keys as one before it, in the same order, names that one's member);
- ``"text"`` (op -> text): ``"values"``, codes into the strings;
- ``"names"`` (op -> list of names): ``"lengths"`` (each list's length) and ``"values"``
  (the codes of all lists, one after the other);
- ``"number"`` (op -> a number 0 or more): ``"values"``, the numbers as ``<i8``.

Reading trusts nothing: each member's length must be that of the spec's rows (the lists'
lengths summed for ``"names"``), a code must index the strings, a key must not repeat, and
the entries and list items count against ``MAX_JSON_VALUES`` as the JSON objects they replace
would (one value per entry and per list item), before their arrays are read.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from typing import Any

import numpy as np
import pandas as pd

from .._model.errors import FrameFormatError
from .._sources.limits import shown
from .frame_arrays import CODE_TYPES, ArrayReader, strings_cells, strings_to_member, to_planes

PREFIX = "maps/"
KINDS = ("text", "names", "number")
# How the reader counts what a map holds against ``MAX_JSON_VALUES``.
TakeValues = Callable[[int, str], None]


def maps_to_members(
    maps: dict[str, tuple[str, dict[str, Any]]],
) -> tuple[dict[str, Any], dict[str, bytes], int, int]:
    """``maps`` (name -> (kind, map)) as the document of ``maps.json``, the members holding
    them, the cells of their strings (``limits.MAX_CELLS``) and the JSON values they stand
    for (``MAX_JSON_VALUES``)."""
    parts: list[np.ndarray] = []
    keys_of: dict[str, list[str]] = {}  # the maps whose keys are written, by name
    same_keys: dict[str, str] = {}  # a map with the keys of one before it, in the same order
    for name, (kind, value) in maps.items():
        if kind not in KINDS:
            raise ValueError(f"unknown map kind {kind!r}")
        keys = list(value)
        same_keys[name] = next((n for n, k in keys_of.items() if k == keys), name)
        if same_keys[name] == name:  # the facts' maps of every node share them
            keys_of[name] = keys
            parts.append(_objects(keys, len(keys)))
        if kind == "text":
            parts.append(_objects(value.values(), len(value)))
        elif kind == "names":
            flat = list(chain.from_iterable(value.values()))
            parts.append(_objects(flat, len(flat)))
    every = np.concatenate(parts) if parts else np.empty(0, dtype=object)
    codes, strings = pd.factorize(every)
    if len(codes) and (codes.min() < 0 or not set(map(type, strings)) <= {str}):
        raise TypeError("the maps to save must hold text only (op names, op types)")
    kind_of = _narrowest(len(strings))
    members: dict[str, bytes] = {}

    def array(name: str, values: np.ndarray) -> dict[str, Any]:
        members[f"{PREFIX}{name}"] = to_planes(values)
        return {"array": f"{PREFIX}{name}", "type": values.dtype.newbyteorder("<").str}

    text, string_spec = strings_to_member(list(strings))
    members[f"{PREFIX}strings"] = text
    specs: dict[str, Any] = {}
    start, values_count = 0, 0
    for position, (name, (kind, value)) in enumerate(maps.items()):
        rows = len(value)
        spec: dict[str, Any] = {"kind": kind, "rows": rows}
        if same_keys[name] == name:
            spec["keys"] = array(f"{position}.keys", codes[start : start + rows].astype(kind_of))
            start += rows
        else:  # the member of the map with the same keys
            spec["keys"] = specs[same_keys[name]]["keys"]
        values_count += rows
        if kind == "text":
            spec["values"] = array(
                f"{position}.values", codes[start : start + rows].astype(kind_of)
            )
            start += rows
        elif kind == "names":
            lengths = np.fromiter(map(len, value.values()), dtype=np.int64, count=rows)
            total = int(lengths.sum())
            spec["lengths"] = array(f"{position}.lengths", lengths.astype(_narrowest(total + 1)))
            spec["values"] = array(
                f"{position}.values", codes[start : start + total].astype(kind_of)
            )
            start += total
            values_count += total
        else:
            spec["values"] = array(
                f"{position}.values", np.fromiter(value.values(), np.int64, rows)
            )
        specs[name] = spec
    document = {"strings": {"strings": f"{PREFIX}strings", **string_spec}, "maps": specs}
    return document, members, strings_cells(text, string_spec), values_count


def maps_from_members(
    document: Any, kinds: dict[str, str], arrays: ArrayReader, take_values: TakeValues
) -> dict[str, dict[str, Any]]:
    """The maps :func:`maps_to_members` wrote, those named in ``kinds`` (name -> the kind it
    must have; others are ignored); :class:`FrameFormatError` naming what is malformed."""
    if not isinstance(document, dict) or not isinstance(document.get("maps"), dict):
        raise FrameFormatError("it is not an object of maps")
    if not isinstance(document.get("strings"), dict):
        raise FrameFormatError("it names no strings member")
    specs = {name: document["maps"][name] for name in kinds if name in document["maps"]}
    for name, spec in specs.items():  # count everything before reading any array
        _check_spec(name, spec, kinds[name])
        take_values(spec["rows"], f"maps.json map {name!r}")
    strings = arrays.strings(document["strings"], "the maps' names")
    table = _objects(strings, len(strings))
    out, keys_in = {}, {}  # keys_in: the keys read, by member (maps may share one)
    for name, spec in specs.items():
        rows, what = spec["rows"], f"map {name!r}"
        member = arrays.member(spec["keys"], "array")
        if member not in keys_in or len(keys_in[member]) != rows:
            codes = _codes(arrays, spec["keys"], rows, len(strings), f"{what} keys")
            keys_in[member] = table[codes].tolist()
        keys = keys_in[member]
        if spec["kind"] == "text":
            codes = _codes(arrays, spec["values"], rows, len(strings), f"{what} values")
            values: list[Any] = table[codes].tolist()
        elif spec["kind"] == "number":
            numbers = arrays.array(spec["values"], rows, ("<i8",), f"{what} values")
            if len(numbers) and numbers.min() < 0:
                raise FrameFormatError(f"{what} holds a negative number")
            values = numbers.tolist()
        else:
            lengths = arrays.array(spec["lengths"], rows, CODE_TYPES, f"{what} lengths")
            if len(lengths) and lengths.min() < 0:
                raise FrameFormatError(f"{what} has a negative length")
            ends = np.cumsum(lengths, dtype=np.int64)
            total = int(ends[-1]) if rows else 0
            take_values(total, f"maps.json map {name!r}")
            codes = _codes(arrays, spec["values"], total, len(strings), f"{what} values")
            flat = table[codes].tolist()
            ends_list = ends.tolist()
            values = [flat[a:b] for a, b in zip([0, *ends_list][:-1], ends_list, strict=True)]
        out[name] = dict(zip(keys, values, strict=True))
        if len(out[name]) != rows:
            raise FrameFormatError(f"{what} has an op more than once")
    return out


def _check_spec(name: str, spec: Any, kind: str) -> None:
    if not isinstance(spec, dict) or spec.get("kind") != kind:
        raise FrameFormatError(f"map {name!r} is {shown(spec)}, not of kind {kind!r}")
    rows = spec.get("rows")
    if type(rows) is not int or rows < 0:
        raise FrameFormatError(f"map {name!r} has {shown(rows)} rows")
    for part in ("keys", "values", *(["lengths"] if kind == "names" else [])):
        if not isinstance(spec.get(part), dict):
            raise FrameFormatError(f"map {name!r} has no {part} array")


def _codes(arrays: ArrayReader, data: dict, rows: int, count: int, what: str) -> np.ndarray:
    codes = arrays.array(data, rows, CODE_TYPES, what)
    if len(codes) and (codes.min() < 0 or codes.max() >= count):
        bad = codes[(codes < 0) | (codes >= count)][0]
        raise FrameFormatError(f"{what} have the code {int(bad)}, outside 0..{count - 1}")
    return codes


def _objects(values: Any, count: int) -> np.ndarray:
    """``values`` (strings) as a 1-d object array."""
    out = np.empty(count, dtype=object)
    out[:] = list(values)
    return out


def _narrowest(count: int) -> np.dtype:
    """The narrowest code type that holds ``0..count``."""
    return np.dtype(next(t for t in CODE_TYPES if count < np.iinfo(np.dtype(t)).max))
