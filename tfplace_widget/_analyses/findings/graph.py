"""The trace's data edges as integer arrays, for the rules that walk a million-op graph
(``ping_pong``'s CPU stretches): positions in an index of op names instead of per-op dicts and
sets, and connected components by numpy instead of one Python walk per stretch."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from itertools import chain, repeat

import numpy as np
import pandas as pd


def edge_positions(
    inputs: Mapping[str, Sequence[str]], index: pd.Index
) -> tuple[np.ndarray, np.ndarray]:
    """Every data edge of ``inputs`` (op -> its producers) whose reader is a name of ``index``
    (unique op names) as two arrays of positions in it: producers (-1 for a name not in it) and
    consumers. In the order of ``index``, each op's producers in theirs. Each reader's position
    is its place in ``index``, so only the producers are looked up (a million readers less at a
    million ops). The names go to pandas as object arrays, not lists, which it would copy into
    arrays itself, checking every element's type (a fifth of the time at a million ops)."""
    listed = list(map(inputs.get, index.to_numpy(), repeat(())))
    lengths = np.fromiter(map(len, listed), np.intp, len(listed))
    flat = chain.from_iterable(listed)
    producers = positions_in(index, np.fromiter(flat, object, int(lengths.sum())))
    consumers = np.repeat(np.arange(len(index)), lengths)
    return producers, consumers


def positions_in(index: pd.Index, names: np.ndarray) -> np.ndarray:
    """Each of ``names`` (an object array) as its position in ``index`` (unique names), -1 when
    not in it: ``index.get_indexer``'s answer, read off the index's own table (built once per
    index) with the names as they are. ``get_indexer`` first makes the names an index of their
    own, which pandas 3 infers to be ``str`` (a pass over every name, then a cast back to
    objects): a fifth of each look-up of a million names, and the rules make five."""
    engine = getattr(index, "_engine", None)
    if (
        index.dtype == object
        and names.dtype == object
        and callable(getattr(engine, "get_indexer", None))
        and index.is_unique
    ):
        return engine.get_indexer(names)
    return index.get_indexer(names)


def among(index: pd.Index, names: Collection[str]) -> np.ndarray:
    """Per name of ``index`` (unique), whether it is one of ``names``: what ``index.isin``
    answers, by a look-up of each of ``names`` in the index's own table (built once, for
    ``edge_positions``), not of each of the index's million names in a table of ``names``."""
    mask = np.zeros(len(index), dtype=bool)
    if len(names):
        found = positions_in(index, np.fromiter(names, object, len(names)))
        mask[found[found >= 0]] = True
    return mask


def rows_among(values: pd.Series, names: Collection[str]) -> np.ndarray:
    """Per row of ``values``, whether it is one of ``names`` (a set): what ``values.isin``
    answers, by a look-up of each row in ``names`` itself, not in a hash table of them built
    again (hundreds of thousands of a large trace's runtime names or copied tensors)."""
    if not isinstance(names, set | frozenset | dict):
        names = set(names)
    rows = values.tolist()
    return np.fromiter(map(names.__contains__, rows), bool, len(rows))


def components(count: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each of ``count`` nodes, the smallest node joined to it by the undirected edges
    ``a[i] -- b[i]``: a label per connected component. Each round hooks the larger root of an
    edge's two onto the smaller, then jumps every node to its root, until no edge joins two
    roots: a few rounds, however long the chains."""
    parent = np.arange(count)
    while True:
        left, right = parent[a], parent[b]
        differ = left != right
        if not differ.any():
            return parent
        low = np.minimum(left[differ], right[differ])
        high = np.maximum(left[differ], right[differ])
        parent[high] = low  # any of an edge's smaller roots will do: each points lower
        while True:
            jumped = parent[parent]
            if np.array_equal(jumped, parent):
                break
            parent = jumped


def exact_sums(index: pd.Index, names: Sequence[str], values: np.ndarray) -> np.ndarray | None:
    """``values`` (one per row of ``names``) summed per name of ``index`` (0 for a name without
    one; NaN counts 0), when the sums are the same floats in any order, as adding whole numbers
    under 2**53 is (microseconds, as the runtime records them): a group of names summed by
    positions then equals Python's ``sum`` over their names in any order. None otherwise."""
    # only the rows that add something are looked up (at a million ops, 1.07M of 1.75M do
    # not: the runtime's untimed rows and the ops that took no time)
    timed = np.flatnonzero(~np.isnan(values) & (values != 0))
    codes = positions_in(index, np.asarray(names, dtype=object)[timed])
    ok = codes >= 0
    kept = values[timed][ok]
    if not (np.array_equal(kept, np.round(kept)) and np.abs(kept).sum() < 2.0**53):
        return None
    return np.bincount(codes[ok], weights=kept, minlength=len(index))
