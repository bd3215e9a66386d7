"""Per-op lookups read off the op frame's columns through one shared table of each name's row,
not one dict of a million names per column: ``Context.device_of`` and ``Context.requested``
are read for a few hundred thousand ops of a million-op trace (``costly_transfer``, the fixes,
the CPU ops' causes), and each dict by name cost about 0.5 s to make."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
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


def last_row_values(rows: dict[str, int], names: Sequence[str], values: list) -> list:
    """``values`` (one per row) with each name's first row holding its last row's value: a
    name of several rows (``_SOURCE``, listed per device) then reads its last row's through
    ``rows``. The rows that are no name's first are found by numpy, not by name."""
    if len(rows) == len(names):
        return values
    later = np.ones(len(names), dtype=bool)
    later[np.fromiter(rows.values(), np.intp, len(rows))] = False
    values = list(values)
    for row in np.flatnonzero(later).tolist():  # in row order: the last one wins
        values[rows[names[row]]] = values[row]
    return values


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
