"""Per-op lookups read off the op frame's columns through one shared table of each name's row,
not one dict of a million names per column: ``Context.device_of`` and ``Context.requested``
are read for a few hundred thousand ops of a million-op trace (``costly_transfer``, the fixes,
the CPU ops' causes), and each dict by name cost about 0.5 s to make."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import compress
from typing import Any

import numpy as np


def first_rows(type_of: dict[str, Any], names: list[str]) -> dict[str, int]:
    """op -> its first row in ``names`` (the op column), in ``type_of``'s order (a name's first
    row's): ``type_of``'s table copied, its values replaced in place (no table grown)."""
    rows: dict[str, int] = type_of.copy()  # type: ignore[assignment]
    if len(type_of) == len(names):  # each name one row (nearly always)
        rows.update(zip(names, range(len(names)), strict=True))
    else:  # the last update of a name wins: its first row, read from the end
        rows.update(zip(reversed(names), range(len(names) - 1, -1, -1), strict=True))
    return rows


def later_rows(rows: dict[str, int], count: int) -> np.ndarray | None:
    """Per row of the ``count``, whether it is no name's first (``rows``: each name's first
    row), found by numpy, not by name; None when each name has one row (nearly always)."""
    if len(rows) == count:
        return None
    later = np.ones(count, dtype=bool)
    later[np.fromiter(rows.values(), np.intp, len(rows))] = False
    return later


def last_row_values(
    rows: dict[str, int], names: Sequence[str], values: list, later: np.ndarray | None
) -> list:
    """``values`` (one per row) with each name's first row holding its last row's value: a
    name of several rows (``_SOURCE``, listed per device) then reads its last row's through
    ``rows`` (``later``: ``later_rows``' answer)."""
    if later is None:
        return values
    values = list(values)
    for row in np.flatnonzero(later).tolist():  # in row order: the last one wins
        values[rows[names[row]]] = values[row]
    return values


class ListedValues(Mapping):
    """op -> value over a list of ops (each once) and one of their values: iterated as the
    lists are, its dict by name made when first looked up by name. ``Context.gpu_kernel`` of
    a million-op trace is iterated (the host-memory rules, the view's no-GPU ops), and looked
    up by name only for the few ops some finding is about, or not at all."""

    __slots__ = ("_names", "_values", "_by_name")

    def __init__(self, names: list[str], values: list) -> None:
        self._names, self._values = names, values
        self._by_name: dict[str, Any] | None = None

    def _table(self) -> dict[str, Any]:
        if self._by_name is None:
            self._by_name = dict(zip(self._names, self._values, strict=True))
        return self._by_name

    def __getitem__(self, name: str) -> Any:
        return self._table()[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self._table().get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._table()

    def values_among(self, names: Iterable[str], default: Any) -> list:
        """The values of ``names``, in no set order, and ``default`` once when one of them is
        not listed: by a pass over the lists with a set of ``names`` while no dict by name is
        made (a large ping_pong's causes: a few hundred thousand ops of a million), else by
        their look-ups."""
        if self._by_name is not None:
            return [self._by_name.get(name, default) for name in names]
        wanted = set(names)
        found = list(compress(self._values, map(wanted.__contains__, self._names)))
        return found if len(found) == len(wanted) else [*found, default]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def values(self) -> list:  # type: ignore[override]
        return self._values

    def items(self) -> Iterator[tuple[str, Any]]:  # type: ignore[override]
        return zip(self._names, self._values, strict=True)

    def __repr__(self) -> str:
        return f"ListedValues({len(self)} ops)"


class RowValues(Mapping):
    """op -> ``values[rows[op]]``: a read-only dict by op name over a per-row column, sharing
    ``rows`` (op -> its row) with the other columns read this way. Iterates in ``rows``' order."""

    __slots__ = ("_rows", "_values")

    def __init__(self, rows: dict[str, int], values: list) -> None:
        self._rows, self._values = rows, values

    def __getitem__(self, name: str) -> Any:
        return self._values[self._rows[name]]

    def get(self, name: str, default: Any = None) -> Any:
        row = self._rows.get(name)
        return default if row is None else self._values[row]

    def of(self, names: Iterable[str]) -> Iterator[Any]:
        """Each of ``names``' value (each must be an op of the table), by C passes."""
        return map(self._values.__getitem__, map(self._rows.__getitem__, names))

    def __contains__(self, name: object) -> bool:
        return name in self._rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def values(self) -> list:  # type: ignore[override]
        return list(map(self._values.__getitem__, self._rows.values()))

    def items(self) -> Iterator[tuple[str, Any]]:  # type: ignore[override]
        return zip(self._rows, self.values(), strict=True)

    def __repr__(self) -> str:
        return f"RowValues({len(self)} ops)"


def values_of(table: Mapping[str, Any], names: Sequence[str]) -> list:
    """Each of ``names``' value in ``table`` (None for a name it lacks): by C passes over a
    ``RowValues``' rows when each name has one (a large finding's hundreds of thousands of
    ops, a million-op trace's CPU ops), else a ``get`` per name."""
    if isinstance(table, RowValues):
        try:
            return list(table.of(names))
        except KeyError:  # a name without a row: each asked with its default
            pass
    return list(map(table.get, names))
