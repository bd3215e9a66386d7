"""Predicted transfers: the copies a placement implies, one row per tensor and destination.

Moved out of the former ``analyses/predict.py`` unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..._model.devices import crosses_tasks
from ..._model.graphfacts import GraphFacts, NodeDetail
from .cache import _Edges, _edges, _firsts, _in_order

TRANSFER_PREDICTED_COLUMNS = [
    "tensor",
    "src_device",
    "dst_device",
    "bytes",
    "predicted",
    "copy",
    "cross_task",  # between two tasks of a cluster, as in a trace's transfers
]


def predict_transfers(
    facts: GraphFacts, device_of: Mapping[str, str], details: Mapping[str, NodeDetail] | None
) -> pd.DataFrame:
    """Predicted copies: one row per (tensor, destination device) crossing devices, and per
    same-GPU edge whose producer and consumer keep the tensor in different memories (a GPU
    kernel's host-memory argument next to a device-memory one). ``copy`` says which memories:
    ``HtoD``, ``DtoH``, ``DtoD`` or ``HtoH`` (host memory on both sides: two CPUs, or a GPU
    op's host-memory tensor)."""
    names = list(device_of)
    return _copies(facts, names, [device_of[n] for n in names], details)


def _copies(
    facts: GraphFacts,
    names: list[str],
    placed_on: list[str],
    details: Mapping[str, NodeDetail] | None,
    edges: _Edges | None = None,
    host_args: tuple[np.ndarray, np.ndarray] | None = None,
    ran: set[str] | None = None,
) -> pd.DataFrame:
    """:func:`predict_transfers` with the devices as a list beside ``names`` ("" unplaced).
    ``host_args``: per node, whether its GPU kernel keeps some output / input in host memory.
    ``ran``: the ops the traced step ran; an edge between two ops that both did not (the
    variables' initializers, what Grappler folded away) copies nothing in a step."""
    if edges is None:
        edges = _edges(facts, names)
    if host_args is None:
        known_kernels = _in_order(getattr(facts, "kernels", {}), names, None)
        host_args = (
            np.array([bool(k is not None and k.gpu_host_outputs) for k in known_kernels] + [0]),
            np.array([bool(k is not None and k.gpu_host_inputs) for k in known_kernels] + [0]),
        )
    devices = sorted(set(placed_on) - {""})
    if not len(edges.producers) or not devices:
        return _transfers_frame([], [], [], [])
    known = pd.Index(devices, dtype=object)
    node_device = known.get_indexer(np.array(placed_on, dtype=object))
    in_step = np.fromiter((n in ran for n in names), bool, len(names)) if ran else None
    return _copies_between(facts, edges, devices, node_device, details, host_args, in_step)


def _copies_between(
    facts: GraphFacts,
    edges: _Edges,
    devices: list[str],
    node_device: np.ndarray,
    details: Mapping[str, NodeDetail] | None,
    host_args: tuple[np.ndarray, np.ndarray],
    in_step: np.ndarray | None,
    tensors: np.ndarray | _SlotZeroTensors | None = None,
    tensor_codes: np.ndarray | None = None,
) -> pd.DataFrame:
    """:func:`_copies` with each node's device as an index into ``devices`` (sorted, distinct;
    -1 unplaced). ``in_step``: per node, did the traced step run it (None: no filter).
    ``tensors``/``tensor_codes``: each edge's tensor and a code per distinct tensor, when the
    caller has them already (:func:`_edge_tensors`)."""
    host_out, host_in = host_args
    consumers, producers = edges.consumers, edges.producers
    edge_consumer, slots = edges.edge_consumer, edges.slots
    if not len(producers) or not devices:
        return _transfers_frame([], [], [], [])
    node_device = np.append(node_device, -1)
    dst = node_device[edges.consumer_node]  # "" and -1 (not a node) -> -1
    src = node_device[edges.producer_node]
    host = np.array(["device:CPU:" in d for d in devices] + [True])
    src_host, dst_host = host[src], host[dst]
    placed = (src >= 0) & (dst >= 0)
    if in_step is not None:
        in_step = np.append(in_step, False)
        placed &= in_step[edges.producer_node] | in_step[edges.consumer_node]
    if tensors is None:
        tensors = _edge_tensors(producers, consumers, edges.lists, details)
    # A GPU kernel's host-memory argument: its tensor is in host memory on the GPU device.
    kernels = getattr(facts, "kernels", {})
    gpu_out = np.flatnonzero(placed & ~src_host & host_out[edges.producer_node])
    for e, produced in zip(gpu_out, map(kernels.get, producers[gpu_out]), strict=True):
        out_slot = int(tensors[e].rpartition(":")[2] or 0)
        src_host[e] = out_slot in produced.gpu_host_outputs
    gpu_in = np.flatnonzero(placed & ~dst_host & host_in[edges.consumer_node])
    consumer_names = [consumers[c] for c in edge_consumer[gpu_in].tolist()]
    for e, consumed in zip(gpu_in, map(kernels.get, consumer_names), strict=True):
        dst_host[e] = int(slots[e]) in consumed.gpu_host_inputs
    moved = np.flatnonzero(placed & ((src != dst) | (src_host != dst_host)))
    if not len(moved):
        return _transfers_frame([], [], [], [])
    # One row per (tensor, destination, memory there): the runtime sends a tensor once.
    if tensor_codes is None:
        codes = pd.factorize(tensors[moved])[0].astype(np.int64)
    else:
        codes = tensor_codes[moved]
    key = (codes * (len(devices) + 1) + dst[moved]) * 2 + dst_host[moved]
    rows = moved[_firsts(pd.factorize(key)[0])]  # each key's first edge, in edge order
    names = np.array(devices, dtype=object)
    src_rows, dst_rows = src[rows], dst[rows]
    copy = _COPY_KINDS[src_host[rows] * 2 + dst_host[rows]]
    # Per pair of devices (few), then per row: do they cross tasks?
    pairs = [(a, b) for a in devices for b in devices]
    crossing = crosses_tasks([a for a, _ in pairs], [b for _, b in pairs])
    cross_task = crossing.reshape(len(devices), len(devices))[src_rows, dst_rows]
    return _transfers_frame(
        tensors[rows], names[src_rows], names[dst_rows], copy, cross_task=cross_task
    )


_COPY_KINDS = np.array(["DtoD", "DtoH", "HtoD", "HtoH"], dtype=object)  # by 2 * src_host + dst


class _SlotZeroTensors:
    """Each data edge's tensor ``"producer:0"`` (no node defs: every edge reads its producer's
    output 0), made for the edges asked for (``tensors[rows]``: the copies' few of the edges),
    not for every edge (about 0.25 s at two million edges)."""

    __slots__ = ("producers",)

    def __init__(self, producers: np.ndarray) -> None:
        self.producers = producers

    def __getitem__(self, k: Any) -> Any:
        return self.producers[k] + ":0"

    def __len__(self) -> int:
        return len(self.producers)


def _edge_tensors(
    producers: np.ndarray,
    consumers: list[str],
    lists: list[list[str]],
    details: Mapping[str, NodeDetail] | None,
) -> np.ndarray | _SlotZeroTensors:
    """Each data edge's tensor, ``"producer:slot"`` (slot 0 without the node defs)."""
    if not details:
        return _SlotZeroTensors(producers)
    named: list[str] = []
    for consumer, sources in zip(consumers, lists, strict=True):
        detail = details.get(consumer)
        if detail is not None and len(detail.input_tensors) == len(sources):
            named.extend(detail.input_tensors)
        else:
            named.extend(f"{p}:0" for p in sources)
    return np.array(named, dtype=object)


def _transfers_frame(
    tensors: Any, sources: Any, targets: Any, copies: Any, cross_task: np.ndarray | None = None
) -> pd.DataFrame:
    n = len(tensors)
    if cross_task is None:
        cross_task = crosses_tasks(list(sources), list(targets))
    return pd.DataFrame(
        {
            "tensor": pd.Series(tensors, dtype=object),
            "src_device": pd.Series(sources, dtype=object),
            "dst_device": pd.Series(targets, dtype=object),
            "bytes": pd.arrays.IntegerArray(np.zeros(n, np.int64), np.ones(n, bool)),
            "predicted": np.ones(n, dtype=bool),
            "copy": pd.Series(copies, dtype=object),
            "cross_task": cross_task,
        },
        columns=TRANSFER_PREDICTED_COLUMNS,
    )
