"""The trace's data edges as integer arrays, for the rules that walk a million-op graph
(``ping_pong``'s CPU stretches): positions in an index of op names instead of per-op dicts and
sets, and connected components by numpy instead of one Python walk per stretch."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, compress

import numpy as np
import pandas as pd


def edge_positions(
    inputs: Mapping[str, Sequence[str]], index: pd.Index
) -> tuple[np.ndarray, np.ndarray]:
    """Every data edge of ``inputs`` (op -> its producers) as two arrays of positions in
    ``index`` (unique op names): producers and consumers, -1 for a name not in it. In the
    order of ``inputs``, each op's producers in theirs."""
    lengths = np.fromiter(map(len, inputs.values()), np.intp, len(inputs))
    producers = index.get_indexer(list(chain.from_iterable(inputs.values())))
    consumers = np.repeat(index.get_indexer(list(inputs)), lengths)
    return producers, consumers


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


@dataclass
class Edges:
    """The data edges between user ops, the runtime's copies looked through: ``inputs`` (op ->
    its producers, as the rules read them) and the same edges as positions in ``index`` (every
    op name of the trace once, in the order of ``Context.type_of``): ``producers[i]`` feeds
    ``consumers[i]``, in the order of ``inputs`` and each op's producers in theirs."""

    inputs: dict[str, list[str]]
    index: pd.Index
    producers: np.ndarray
    consumers: np.ndarray


def through_copies(
    raw: Mapping[str, Sequence[str]],
    names: Sequence[str],
    runtime: Collection[str],
    receiver_of: Mapping[str, str],
    copy_key: Callable[[str], str],
) -> Edges:
    """``raw`` (op -> its producers, as the graph lists them) between the ops of ``names``
    (every op name once) other than ``runtime``'s: a ``_Recv`` producer becomes the op its ``_Send``
    sent (``receiver_of``: each receive's name -> that op's name), a producer the trace did not
    record (``X/_5``) its ``copy_key``; producers that are no user ops are dropped. Each name
    looked up once in one index of the names (no Python loop over the million producers): a
    list with nothing to resolve is kept as it is, the others rebuilt from the positions."""
    index = pd.Index(names, dtype=object)
    user = np.ones(len(index), dtype=bool)
    user[index.get_indexer(list(runtime))] = False  # (each runtime name is one of names)
    keys, lists = list(raw), list(raw.values())
    at = index.get_indexer(keys)
    mine = at >= 0
    mine[mine] = user[at[mine]]
    lengths = np.fromiter(map(len, lists), np.intp, len(lists))
    codes = index.get_indexer(list(chain.from_iterable(lists)))
    # each position resolved: a receive's to the op its send sent, the others to themselves
    resolve = np.arange(len(index))
    received = index.get_indexer(list(receiver_of))
    resolve[received] = index.get_indexer(list(receiver_of.values()))
    known = codes >= 0
    resolved = np.full(len(codes), -1)
    resolved[known] = resolve[codes[known]]
    unknown = np.flatnonzero(~known)
    if len(unknown):  # a recv the trace did not record: X/_5 -> X
        flat = list(chain.from_iterable(lists))
        resolved[unknown] = index.get_indexer([copy_key(flat[i]) for i in unknown.tolist()])
    kept = resolved >= 0
    kept[kept] = user[resolved[kept]]
    owner = np.repeat(np.arange(len(lists)), lengths)
    # a list of user ops only (most): kept as it is (the rules only read them)
    ours = known.copy()
    ours[known] = user[codes[known]]
    plain = np.bincount(owner[~ours], minlength=len(lists)) == 0
    rebuilt = mine & ~plain
    own = compress(lists, mine.tolist())
    if not set(map(type, lists)) <= {list}:
        own = map(list, own)
    inputs = dict(zip(compress(keys, mine.tolist()), own, strict=True))
    chosen = kept & rebuilt[owner]
    values = index.to_numpy()[resolved[chosen]].tolist()
    ends = np.cumsum(np.bincount(owner[chosen], minlength=len(lists))[rebuilt]).tolist()
    starts = [0, *ends][: len(ends)]
    inputs.update(  # each in its place among the others
        zip(
            compress(keys, rebuilt.tolist()),
            (values[a:b] for a, b in zip(starts, ends, strict=True)),
            strict=True,
        )
    )
    edge = kept & mine[owner]
    return Edges(inputs, index, resolved[edge], np.repeat(at, lengths)[edge])


def exact_sums(index: pd.Index, names: Sequence[str], values: np.ndarray) -> np.ndarray | None:
    """``values`` (one per row of ``names``) summed per name of ``index`` (0 for a name without
    one; NaN counts 0), when the sums are the same floats in any order, as adding whole numbers
    under 2**53 is (microseconds, as the runtime records them): a group of names summed by
    positions then equals Python's ``sum`` over their names in any order. None otherwise."""
    codes = index.get_indexer(names)
    ok = (codes >= 0) & ~np.isnan(values)
    kept = values[ok]
    if not (np.array_equal(kept, np.round(kept)) and np.abs(kept).sum() < 2.0**53):
        return None
    return np.bincount(codes[ok], weights=kept, minlength=len(index))
