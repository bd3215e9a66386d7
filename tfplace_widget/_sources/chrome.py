"""Chrome-trace JSON written by TensorFlow's ``timeline.py``, as records."""

from __future__ import annotations

import json
import math
import os
from typing import Any

from .._model.errors import TraceError
from .._model.gc_pause import paused_gc
from .._model.records import Executed, Records
from .._model.trace import PlacementTrace
from . import limits
from .files import read_trace_bytes
from .frames import frames_from_records

# Microseconds: 10^17 us is over 3,000 years; anything beyond is a broken field, not a time.
MAX_ABS_US = limits.MAX_ABS_US


def trace_from_chrome(path: str | os.PathLike) -> PlacementTrace:
    """:meth:`PlacementTrace.from_chrome_trace`: a trace of the ops in a Chrome-trace JSON."""
    with paused_gc():
        records = records_from_chrome(path)
        return frames_from_records(
            records, step_starts=[], executed=Executed(), facts=None, source=os.fspath(path)
        )


def records_from_chrome(path: str | os.PathLike) -> Records:
    """Op executions (``ph: "X"`` on ``<device> Compute`` lanes) of a Chrome trace, checked.

    Every field read is checked: a record with a bad one (a time that is not a finite number
    of microseconds, a negative duration, ``args`` that is not an object, a ``pid``/``tid``
    that is not a number) is a ``TraceError`` naming the file, the record and the field.
    """
    where = os.fspath(path)
    raw = read_trace_bytes(where)
    if not raw.strip():
        raise TraceError(f"{where!r} is empty, not a Chrome trace. Write one with timeline.py.")
    try:
        document = limits.parse_json(raw, where, "the Chrome trace")
    except ValueError as exc:
        raise TraceError(
            f"{where!r} is not a Chrome-trace JSON (it may be truncated): {exc}. Write one with "
            "timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format()."
        ) from exc
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        raise TraceError(
            f"{where!r} is JSON but has no 'traceEvents' list, so it is not a Chrome trace "
            "from TensorFlow's timeline.py."
        )
    lanes: dict[Any, str] = {}
    for index, event in enumerate(events):
        if (
            isinstance(event, dict)
            and event.get("ph") == "M"
            and event.get("name") == "process_name"
        ):
            name = _args(event, index, where).get("name", "")
            if isinstance(name, str) and name.endswith(" Compute"):
                lanes[_process_id(event, index, where)] = name[: -len(" Compute")]
    records = Records()
    for index, event in enumerate(events):
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        lane = lanes.get(_process_id(event, index, where))
        if lane is None:
            continue
        args = _args(event, index, where)
        # trace.to_chrome_trace puts a device's lanes (GPU streams, memcpy) on threads of one
        # process and names each event's lane in args; TensorFlow's timeline.py never does.
        if "lane" in args:
            lane = args["lane"]
            if not isinstance(lane, str):
                raise _bad(where, index, "args.lane", lane, "a string (the device lane)")
        node = _text(args, "name", event, index, where)
        op_type = _text(args, "op", event, index, where)
        inputs = [
            _text(args, k, event, index, where) for k in sorted(args) if k.startswith("input")
        ]
        records.op.append(node)
        records.type.append(op_type)
        records.lane.append(lane)
        if "thread" in args:  # the recorded thread, written by trace.to_chrome_trace
            thread = args["thread"]
            if isinstance(thread, bool) or not isinstance(thread, int) or thread.bit_length() > 63:
                raise _bad(where, index, "args.thread", thread, "a whole number (the thread id)")
            records.thread.append(thread)
        else:
            records.thread.append(_whole(event, index, where, "tid", default=0))
        records.start.append(_whole(event, index, where, "ts"))
        records.duration.append(_whole(event, index, where, "dur", default=0, negative=False))
        records.label.append(f"{node} = {op_type}({', '.join(inputs)})")
        records.output_bytes.append(())
    if not records.op:
        raise TraceError(
            f"{where!r} is a Chrome trace with no op events (no 'X' events on a '<device> "
            "Compute' lane), so there is nothing to show. Trace a run with FULL_TRACE first."
        )
    return records


def _bad(where: str, index: int, field: str, value: Any, expected: str) -> TraceError:
    try:
        written = json.dumps(value)[:40]
    except (RecursionError, ValueError):  # nested thousands deep
        written = limits.shown(value)
    return TraceError(
        f"{where!r}: record {index} of traceEvents has {field}={written}, but "
        f"{field} must be {expected}. Fix or drop that record (TensorFlow's timeline.py never "
        "writes such a value)."
    )


def _text(args: dict, key: str, event: dict, index: int, where: str) -> str:
    """An op's name, type or input from ``args`` (the event's ``name`` when missing): text, or
    a number written as text; a list or an object there is refused (it names no op)."""
    value = args.get(key, event.get("name", "")) if key in ("name", "op") else args[key]
    if isinstance(value, (list, dict)):
        field = f"args.{key}" if key in args else "name"
        raise _bad(where, index, field, value, "a string (an op's name, type or input)")
    return str(value)


def _whole(
    event: dict, index: int, where: str, field: str, default: int | None = None, negative=True
) -> int:
    """A time, duration or thread id in whole microseconds (floats are truncated)."""
    if field not in event and default is not None:
        return default
    value = event.get(field)
    expected = ("a number of microseconds" if field != "tid" else "a number (the thread id)") + (
        "" if negative else " that is not negative"
    )
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(where, index, field, value, expected)
    if not math.isfinite(value) or abs(value) >= MAX_ABS_US:
        raise _bad(where, index, field, value, f"{expected}, finite and below 1e17")
    if not negative and value < 0:
        raise _bad(where, index, field, value, expected)
    return int(value)


def _args(event: dict, index: int, where: str) -> dict:
    args = event.get("args")
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise _bad(where, index, "args", args, "an object of named values")
    return args


def _process_id(event: dict, index: int, where: str) -> Any:
    pid = event.get("pid")
    if pid is not None and (isinstance(pid, bool) or not isinstance(pid, (int, str))):
        raise _bad(where, index, "pid", pid, "a number (the process id)")
    return pid
