"""Thousands of devices (issue 31): how long a trace of one op per device takes to show.

``python -m benchmarks.many_devices [--devices 4000] [--repeats 1]`` writes a Chrome trace of
``--devices`` device lanes with one op each (a crafted file: no TensorFlow), loads it, and times
``show_placement`` (the panel built, outside a kernel) and ``to_html`` (the report written), side
by side with the same number of ops on two devices (the baseline: what the ops alone cost), in
one process. Before issue 31 a trace past ~4,700 devices never finished (the colour sequence
looped), and 4,000 took 46 s to show. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def chrome_trace(path: Path, ops: int, devices: int) -> Path:
    """A Chrome trace of ``ops`` ops spread over ``devices`` device lanes."""
    events: list[dict] = [
        {
            "ph": "M",
            "name": "process_name",
            "pid": d,
            "args": {"name": f"/job:localhost/replica:0/task:0/device:CPU:{d} Compute"},
        }
        for d in range(devices)
    ]
    events += [
        {"ph": "X", "pid": i % devices, "tid": 0, "ts": i, "dur": 1, "name": "Add",
         "args": {"name": f"op_{i}", "op": "Add"}}
        for i in range(ops)
    ]  # fmt: skip
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def timed(path: Path, folder: Path, repeats: int) -> dict[str, float]:
    """Best seconds of ``show_placement`` and ``to_html`` over ``repeats`` fresh loads."""
    from tfplace_widget import PlacementTrace, show_placement

    best = {"show_placement": float("inf"), "to_html": float("inf")}
    for _ in range(repeats):
        trace = PlacementTrace.from_chrome_trace(path)
        start = time.perf_counter()
        show_placement(trace)
        best["show_placement"] = min(best["show_placement"], time.perf_counter() - start)
        trace = PlacementTrace.from_chrome_trace(path)
        start = time.perf_counter()
        trace.to_html(folder / "report.html", overwrite=True)
        best["to_html"] = min(best["to_html"], time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows = []
        for devices in (2, args.devices):
            path = chrome_trace(folder / f"d{devices}.json", args.devices, devices)
            rows.append((devices, timed(path, folder, args.repeats)))
    print(f"| {args.devices:,} ops on | show_placement (s) | to_html (s) |")
    print("| --- | --- | --- |")
    for devices, best in rows:
        print(f"| {devices:,} devices | {best['show_placement']:.2f} | {best['to_html']:.2f} |")


if __name__ == "__main__":
    main()
