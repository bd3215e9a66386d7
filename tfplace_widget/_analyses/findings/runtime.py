"""The ops TensorFlow's runtime inserted into a trace's graph (copies, feeds, fetches,
``_SOURCE``), found once per ``Context`` by C passes over its per-op columns: a million-op
trace has hundreds of thousands of them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from itertools import compress, filterfalse
from operator import not_
from typing import Any

import pandas as pd

RUNTIME_TYPES = {
    "_Send",
    "_Recv",
    "_HostSend",
    "_HostRecv",
    "_Arg",
    "_Retval",
    "_DeviceArg",
    "_DeviceRetval",
}

# The copies' sends and receives (``copy_nodes``), and of those the sends.
COPY_TYPES = frozenset({"_Send", "_Recv", "_HostSend", "_HostRecv"})
_SEND_TYPES = frozenset({"_Send", "_HostSend"})
_CLUSTER_COPY = re.compile(r"^(.+)_[SG]\d+$")  # a cluster's send/recv names (copy_key)


def runtime_names(
    type_of: Mapping[str, Any], how: pd.Series, names: list[str]
) -> tuple[set[str], set[str], set[str], list[str]]:
    """The ops TensorFlow inserted (``Context.is_runtime``), and of those the copies' sends,
    receives, and all of them in ``type_of``'s order: a name's last row decides (``type_of``
    holds its type; ``how`` and ``names`` are the frame's columns). By C passes over
    ``type_of``'s values and the ``how`` column: no dict of every op's ``how`` is made, and
    only the names the runtime placed that are no runtime type (``_SOURCE``) have their last
    row looked up when a name has several rows."""
    types = list(type_of.values())
    memcpy = {t for t in set(types) if isinstance(t, str) and t.upper().startswith("MEMCPY")}
    # the copies first (with their types: the sends among them need no look-up by name),
    # then the runtime's other types
    copied = list(map(COPY_TYPES.__contains__, types))
    copies = list(compress(type_of, copied))
    sent = list(map(_SEND_TYPES.__contains__, compress(types, copied)))
    sends = set(compress(copies, sent))
    receives = set(compress(copies, map(not_, sent)))  # no set of every copy made for it
    runtime = sends | receives
    runtime.update(
        compress(type_of, map(((RUNTIME_TYPES - COPY_TYPES) | memcpy).__contains__, types))
    )
    rows = how.eq("runtime").fillna(False).to_numpy(dtype=bool).tolist()
    placed = set(filterfalse(runtime.__contains__, compress(names, rows)))
    if placed and len(type_of) != len(names):  # several rows of a name: its last one decides
        mine = list(map(placed.__contains__, names))
        last = dict(zip(compress(names, mine), compress(rows, mine), strict=True))
        placed = set(compress(last, last.values()))
    runtime |= placed
    runtime.update(n for n in ("_SOURCE", "_SINK") if n in type_of)
    return runtime, sends, receives, copies


def sent_ops(
    raw: Mapping[str, Sequence[str]],
    sends: set[str],
    keys: Mapping[str, str],
    user: set[str],
) -> dict[str, str]:
    """Each copy's key (``"<producer>"`` of its ``"<producer>/_N"``, ``keys``) -> the op its
    send sent (the first of the send's producers in ``raw``), as ``.get(key, key)`` answers
    it. The sends in ``keys``' order (a pass over the copies, in ``type_of``'s order, not over
    every op) while no two sends of one key send different ops; else, as the order then
    decides, in the producer lists' order, a ``user`` op winning over another. Empty when
    each send sent the op its key names (the runtime names a copy after the tensor's op:
    nearly always), so that no dict of a key per copied tensor is made or read (hundreds of
    thousands of a million-op trace's)."""
    sending = list(compress(keys.items(), map(sends.__contains__, keys)))
    if all(producers[0] == key if (producers := raw.get(name)) else True for name, key in sending):
        return {}
    sent_by: dict[str, str] = {}
    for name, key in sending:
        producers = raw.get(name)
        if producers:
            sent = producers[0]
            if sent_by.setdefault(key, sent) != sent:
                break
    else:
        return sent_by
    sent_by = {}
    for name in compress(raw, map(sends.__contains__, raw)):
        producers = raw[name]
        if producers:
            # A control edge's copy shares the prefix (X/ctrl/_5 -> X/_6): the data
            # producer wins, so that X's readers on the other device stay X's consumers.
            key = keys[name]
            if key not in sent_by or sent_by[key] not in user:
                sent_by[key] = producers[0]
    return sent_by


def copy_key(name: str) -> str:
    """``A/_1`` -> ``A``: the runtime names a copy's send and recv after the tensor's op. In a
    cluster the master session names the copies between tasks ``A_S12``/``A_S13`` and each
    worker the copies between its own devices ``A_G1``/``A_G2`` (``PartitionOptions::new_name``
    in ``MasterSession::BuildAndRegisterPartitions``, master_session.cc: ``prefix + "_S" + n``;
    ``GraphMgr::InitItem``, graph_mgr.cc: ``prefix + "_G" + n``)."""
    head, sep, tail = name.rpartition("/_")
    if sep and tail.isdigit():
        return head
    match = _CLUSTER_COPY.match(name)
    return match.group(1) if match else name
