"""Chrome-trace JSON written by TensorFlow's ``timeline.py``, as records."""

from __future__ import annotations

import json
import os
from typing import Any

from ..errors import TraceError, read_file
from .records import Records


def records_from_chrome(path: str | os.PathLike) -> Records:
    where = os.fspath(path)
    raw = read_file(where, "trace file")
    if not raw.strip():
        raise TraceError(f"{where!r} is empty, not a Chrome trace. Write one with timeline.py.")
    try:
        document = json.loads(raw)
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
    for event in events:
        if (
            isinstance(event, dict)
            and event.get("ph") == "M"
            and event.get("name") == "process_name"
        ):
            name = str((event.get("args") or {}).get("name", ""))
            if name.endswith(" Compute"):
                lanes[event.get("pid")] = name[: -len(" Compute")]
    records = Records()
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        lane = lanes.get(event.get("pid"))
        if lane is None:
            continue
        args = event.get("args") or {}
        node = str(args.get("name", event.get("name", "")))
        op_type = str(args.get("op", event.get("name", "")))
        inputs = [str(args[k]) for k in sorted(args) if k.startswith("input")]
        records.op.append(node)
        records.type.append(op_type)
        records.lane.append(lane)
        records.thread.append(int(event.get("tid", 0) or 0))
        records.start.append(int(event.get("ts", 0)))
        records.duration.append(int(event.get("dur", 0) or 0))
        records.label.append(f"{node} = {op_type}({', '.join(inputs)})")
        records.output_bytes.append(())
    if not records.op:
        raise TraceError(
            f"{where!r} is a Chrome trace with no op events (no 'X' events on a '<device> "
            "Compute' lane), so there is nothing to show. Trace a run with FULL_TRACE first."
        )
    return records
