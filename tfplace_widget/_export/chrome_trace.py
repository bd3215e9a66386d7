"""``trace.to_chrome_trace(path)``: the timeline as Chrome trace-event JSON.

Written to the Trace Event Format (the JSON object form, ``{"traceEvents": [...]}``) that
Perfetto UI (ui.perfetto.dev) and chrome://tracing open, using only:

- ``ph: "X"`` complete events, one per row of ``trace.events``: ``name`` the op, ``cat`` "op",
  ``ts``/``dur`` in microseconds on the trace's axis, and in ``args`` the op's ``name``, type
  (``op``), ``device``, ``requested_device``, ``how``, ``reason``, its ``lane`` and recorded
  ``thread``, and its inputs (``input0``...), as TensorFlow's ``timeline.py`` writes them;
- the HLO instructions an XLA cluster ran (``trace.xla``, issue 23) are ``X`` events too, on
  their device's lane as in ``trace.events``, with ``cat`` "xla": ``args.op`` is the
  instruction's ``kind`` (fusion kind or opcode), ``how`` "xla", and ``cluster``, ``kind``,
  ``tf_ops`` (the TF ops XLA put in it, a list) and ``source`` (the user's ``file:line``, ``""``
  when unknown) from ``trace.xla`` (read back by ``from_chrome_trace``, each is an op of
  that type on its lane);
- ``ph: "M"`` metadata events: ``process_name`` (one process per device, named
  ``<device> Compute`` as ``timeline.py`` names its lanes), ``process_sort_index`` (the panel's
  device order), ``thread_name`` and ``thread_sort_index`` (one thread per lane: ``ops``,
  ``stream:7``, ``memcpy``...; a lane whose events overlap without nesting gets a second
  thread, ``ops (2)``, since slices on one thread must nest);
- ``ph: "s"``/``"f"`` flow events (``bp: "e"``), one pair per transfer with a shared ``id``:
  from the producer's slice on the source device to the first slice of a consumer on the
  destination device (the copy itself when it was recorded on a ``memcpy`` lane, a ``_Recv``
  of the tensor, or an op reading it). A transfer whose
  producer or consumer was not timed (``_Send``/``_Recv`` never are in graph mode: their
  consumers are) has no arrow;
- ``ph: "C"`` counter events, one per row of ``trace.memory`` (TensorFlow's allocator records,
  issue 34), as ``timeline.py``'s ``show_memory`` writes them: ``name`` "Memory <allocator>"
  (``Memory mklcpu``, ``Memory GPU_0_bfc``) on the device's process, ``cat`` "memory",
  ``args`` ``{"live_bytes": n}``, the bytes the step's ops held there after the change; the
  persistent rows (variables, constants) as "Persistent memory <allocator>", at the step's start.

``PlacementTrace.from_chrome_trace`` reads the file back with the same ops, devices, lanes,
starts and durations (ops that never ran, e.g. ``_Send``, have no event and are not in it).
"""

from __future__ import annotations

import gzip
import heapq
import json
import os
import re
from typing import IO, TYPE_CHECKING, Any

import pandas as pd

from .._model.memory import TEMPORARY
from .._model.records import producer
from .output import write_atomically

if TYPE_CHECKING:  # pragma: no cover
    from .._model.trace import PlacementTrace

_EDGE = re.compile(r"^edge_\d+_(.+)$")
_LABEL = re.compile(r"^(?:\[[^\]]*\]\s*)?[^=]* = [^(]*\((.*)\)$", re.S)


def write_chrome_trace(
    trace: PlacementTrace, path: str | os.PathLike, *, overwrite: bool = True
) -> str:
    """Write :func:`chrome_trace` of ``trace`` to ``path`` (gzipped when it ends in ``.gz``,
    any case); return the path. A :class:`TraceWriteError` names the path if it cannot be
    written (a ``FileExistsError`` too when it exists and not ``overwrite``); ``ValueError``
    when the trace has no timed event (a prediction)."""
    where = os.fspath(path)
    document = chrome_trace(trace)
    data = json.dumps(document, allow_nan=False, separators=(",", ":")).encode()
    if where.lower().endswith(".gz"):
        data = gzip.compress(data, compresslevel=6, mtime=0)

    def write(stream: IO[bytes]) -> None:
        stream.write(data)

    write_atomically(where, "the Chrome trace", write, overwrite=overwrite)
    return where


def chrome_trace(trace: PlacementTrace) -> dict[str, Any]:
    """The trace-event JSON document of ``trace`` (see the module docstring)."""
    from .._model.version import __version__

    events = trace.events
    if events.empty:
        what = "a prediction (nothing ran)" if trace.predicted else "no timed op"
        raise ValueError(
            f"This trace has no events to draw ({what}), so a Chrome trace of it would be "
            "empty. trace.save(path) keeps it whole; trace.to_csv(folder) writes its tables."
        )
    ops = trace.ops
    info: dict[tuple[str, str], tuple[str, str, str, str, str]] = {}
    by_name: dict[str, tuple[str, str, str, str, str]] = {}
    for row in zip(
        ops["op"].tolist(),
        ops["device"].tolist(),
        ops["type"].tolist(),
        ops["requested_device"].astype(object).fillna("").tolist(),
        ops["how"].astype(str).tolist(),
        ops["reason"].astype(object).fillna("").tolist(),
        strict=True,
    ):
        value = (row[2], row[1], row[3], row[4], row[5])
        info.setdefault((row[0], row[1]), value)
        by_name.setdefault(row[0], value)

    names = events["op"].tolist()
    devices_of = events["device"].tolist()
    lanes = events["lane"].tolist()
    threads = events["thread"].tolist()
    starts = events["start_us"].tolist()
    durations = events["duration_us"].tolist()
    labels = events["label"].tolist()

    xla_args = _xla_args(trace)
    order = list(dict.fromkeys([*trace.devices, *devices_of]))
    pid_of = {device: index + 1 for index, device in enumerate(order)}
    out: list[dict[str, Any]] = []
    for device, pid in pid_of.items():
        name = f"{device or 'unknown device'} Compute"
        out.append(_meta("process_name", pid, 0, {"name": name}))
        out.append(_meta("process_sort_index", pid, 0, {"sort_index": pid}))

    # One thread per (device, lane, row): rows keep overlapping slices of one lane apart.
    tids: dict[tuple[str, str, int], int] = {}
    free: dict[tuple[str, str], list[tuple[int, int]]] = {}  # heap of (end, row) per lane
    rows_of: dict[tuple[str, str], int] = {}
    slices: list[dict[str, Any]] = []
    first_slice: dict[tuple[str, str], dict[str, Any]] = {}  # (op, device) -> its first slice
    for index, op in enumerate(names):
        device, lane, start, duration = (
            devices_of[index],
            lanes[index],
            starts[index],
            durations[index],
        )
        key = (device, lane)
        heap = free.setdefault(key, [])
        if heap and heap[0][0] <= start:
            _, row = heapq.heappop(heap)
        else:
            row = rows_of[key] = rows_of.get(key, 0) + 1
            row -= 1
        heapq.heappush(heap, (start + duration, row))
        tid = tids.get((device, lane, row))
        if tid is None:
            tid = tids[(device, lane, row)] = sum(1 for d, _, _ in tids if d == device) + 1
        op_type, _, requested, how, reason = (
            info.get((op, device)) or by_name.get(op) or ("", device, "", "", "")
        )
        args: dict[str, Any] = {
            "name": op,
            "op": op_type,
            "device": device,
            "requested_device": requested,
            "how": how,
            "reason": reason,
            "lane": lane,
            "thread": threads[index],
        }
        instruction = xla_args.get((op, device, start)) if xla_args else None
        if instruction is not None:  # an HLO instruction XLA ran: no inputs, its own args
            args.update(instruction)
        else:
            match = _LABEL.match(labels[index])
            inputs = match.group(1) if match else ""
            for number, value in enumerate(i.strip() for i in inputs.split(",") if i.strip()):
                args[f"input{number}"] = value
        event = {
            "name": op,
            "cat": "op" if instruction is None else "xla",
            "ph": "X",
            "ts": start,
            "dur": duration,
            "pid": pid_of[device],
            "tid": tid,
            "args": args,
        }
        slices.append(event)
        first_slice.setdefault((op, device), event)

    for (device, lane, row), tid in sorted(
        tids.items(), key=lambda item: (pid_of[item[0][0]], item[1])
    ):
        label = "ops" if lane == device or not lane else lane.rsplit("/", 1)[-1]
        if row:
            label += f" ({row + 1})"
        out.append(_meta("thread_name", pid_of[device], tid, {"name": label}))
        out.append(_meta("thread_sort_index", pid_of[device], tid, {"sort_index": tid}))
    out += slices
    out += _flows(trace, slices, first_slice)
    out += _memory_counters(trace, pid_of)
    return {
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "otherData": {
            "written_by": f"tfplace_widget {__version__}",
            "source": trace.source,
            "mode": trace.mode,
        },
    }


def _xla_args(trace: PlacementTrace) -> dict[tuple[str, str, int], dict[str, Any]]:
    """The args of each executed HLO instruction's event, by (instruction, device, start):
    how ``trace.events`` holds ``trace.xla``'s rows (:func:`~tfplace_widget._model.xla.add_xla`),
    so one run of an instruction finds its own row. Empty without XLA."""
    xla = getattr(trace, "xla", None)
    if xla is None or not len(xla):
        return {}
    found: dict[tuple[str, str, int], dict[str, Any]] = {}
    for cluster, name, kind, device, start, tf_ops, source in zip(
        xla["cluster"].tolist(),
        xla["instruction"].tolist(),
        xla["kind"].tolist(),
        xla["device"].tolist(),
        xla["start_us"].tolist(),
        xla["tf_ops"].tolist(),
        xla["source"].astype(object).fillna("").tolist(),
        strict=True,
    ):
        found.setdefault(
            (name, device, int(start)),
            {
                "op": kind,
                "how": "xla",
                "reason": f"HLO instruction of the XLA cluster {cluster} on {device}",
                "cluster": cluster,
                "kind": kind,
                "tf_ops": [str(op) for op in tf_ops],
                "source": source,
            },
        )
    return found


def _memory_counters(trace: PlacementTrace, pid_of: dict[str, int]) -> list[dict[str, Any]]:
    """A ``C`` event per row of ``trace.memory`` on its device's process (none without it)."""
    memory = getattr(trace, "memory", None)
    if memory is None or not len(memory):
        return []
    kinds = memory["kind"].tolist() if "kind" in memory else [TEMPORARY] * len(memory)
    return [
        {
            "name": f"{'Memory' if kind == TEMPORARY else 'Persistent memory'} {allocator}",
            "cat": "memory",
            "ph": "C",
            "ts": time,
            "pid": pid_of.get(device, 0),
            "tid": 0,
            "args": {"live_bytes": live},
        }
        for device, allocator, time, live, kind in zip(
            memory["device"].tolist(),
            memory["allocator"].tolist(),
            memory["time_us"].tolist(),
            memory["live_bytes"].tolist(),
            kinds,
            strict=True,
        )
    ]


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}


def _flows(
    trace: PlacementTrace, slices: list[dict[str, Any]], first_slice: dict[tuple[str, str], dict]
) -> list[dict[str, Any]]:
    """An ``s``/``f`` pair per transfer whose producer and a reader on the destination were
    timed. One pass over the slices indexes who reads what (linear in events + transfers)."""
    readers = _readers(trace.inputs, slices)
    flows: list[dict[str, Any]] = []
    transfers = trace.transfers
    sizes = transfers["bytes"].astype(object).tolist()
    # over the network between tasks of a cluster (a prediction's frame has no such column)
    crosses = (
        transfers["cross_task"].tolist() if "cross_task" in transfers else [False] * len(transfers)
    )
    for number, (tensor, src, dst) in enumerate(
        zip(
            transfers["tensor"].tolist(),
            transfers["src_device"].tolist(),
            transfers["dst_device"].tolist(),
            strict=True,
        )
    ):
        made_by = producer(tensor)
        edge = _EDGE.match(tensor)  # a copy recorded on a memcpy lane: edge_<n>_<producer>
        if edge:
            made_by = next(
                (n for n in (edge.group(1), producer(edge.group(1))) if (n, src) in first_slice),
                made_by,
            )
        start = first_slice.get((made_by, src))
        if start is None:
            continue
        end = first_slice.get((tensor, dst))  # the copy itself, on a memcpy lane
        if end is None:
            end = next((e for e in readers.get((dst, made_by), ()) if e["ts"] >= start["ts"]), None)
        if end is None or end is start:
            continue
        size = sizes[number]
        common = {"name": tensor, "cat": "transfer", "id": number + 1}
        flows.append(
            {
                **common,
                "ph": "s",
                "ts": start["ts"] + start["dur"] / 2,
                "pid": start["pid"],
                "tid": start["tid"],
                "args": {
                    "src_device": src,
                    "dst_device": dst,
                    "bytes": None if pd.isna(size) else int(size),
                    "cross_task": bool(crosses[number]),
                },
            }
        )
        flows.append(
            {
                **common,
                "ph": "f",
                "bp": "e",
                "ts": end["ts"] + end["dur"] / 2,
                "pid": end["pid"],
                "tid": end["tid"],
            }
        )
    return flows


# A receive's name: ``<producer>/_N`` on one machine, ``<producer>_S<N>`` across a cluster.
_RECV_SUFFIX = re.compile(r"(?:/_|_S)\d+$")


def _readers(
    inputs: dict[str, list[str]], slices: list[dict[str, Any]]
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(device, producer) -> the slices on that device, in time order, of ops that read the
    producer's output: directly, or through a receive named ``<producer>/_N`` (graph mode's
    ``_Recv``, itself untimed), or that are such a receive."""
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for event in slices:
        args = event["args"]
        op, device = args["name"], args["device"]
        read = inputs.get(op)
        if read is None:
            read = [producer(v) for k, v in args.items() if k.startswith("input")]
        keys = {_RECV_SUFFIX.sub("", name) for name in read}
        keys.update(name for name in read if "_S" in name)  # a user's op may be named x_S1
        if _RECV_SUFFIX.search(op):
            keys.add(_RECV_SUFFIX.sub("", op))
        for key in keys:
            found.setdefault((device, key), []).append(event)
    return found
