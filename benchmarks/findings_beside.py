"""Keystrokes while a large panel finds its findings: does the kernel answer them?

``python -m benchmarks.findings_beside [--trace PATH] [--baseline DIR] [--keys 12]``

Reads a pickled trace (default: ``benchmarks/scale.py``'s 1M-op ``trace_1000000.pkl`` in
``/tmp/tfplace_scale``) and, for this checkout and ``--baseline``'s package (e.g. ``git archive
REV tfplace_widget | tar -x -C DIR``), each in a child process of its own, one after the other,
builds ``PlacementPanel(trace)`` inside a running event loop, as ipykernel runs a cell. Above
20,000 ops the panel finds its findings after the cell. A keystroke (the search box set to a
text or a glob) is due every 2 s from the end of the cell; each one's lag (when the loop ran
it, after it was due) and time (the setter until it returns) is printed, with whether the
findings were still being found, and when the findings were shown. The lag is what the user
waits for the table to answer a keystroke; before the findings moved beside the loop, it was
the rest of the findings' time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KEYS = ["c7", "c7/add1", "c", "c7/add12*", "c1"]

_CHILD = r"""
import asyncio, json, pickle, sys, time
import tensorflow  # noqa: F401  (a kernel that traced has it)
import tfplace_widget  # noqa: F401
from tfplace_widget._widgets.panel import PlacementPanel

trace = pickle.load(open(sys.argv[1], "rb"))
count, keys = int(sys.argv[2]), json.loads(sys.argv[3])


async def cell():
    loop = asyncio.get_running_loop()
    began = time.perf_counter()
    panel = PlacementPanel(trace)
    built = time.perf_counter() - began
    rows = []

    def key(i, due):
        start = time.perf_counter()
        panel.search.value = keys[i % len(keys)]
        pending = bool(panel.findings_view.note)
        rows.append([start - due, time.perf_counter() - start, pending])

    base = time.perf_counter()
    for i in range(count):
        loop.call_at(loop.time() + 2.0 * (i + 1), key, i, base + 2.0 * (i + 1))
    shown = None
    while len(rows) < count or panel.findings_view.note:
        await asyncio.sleep(0.05)
        if shown is None and not panel.findings_view.note:
            shown = time.perf_counter() - began
        if time.perf_counter() - base > 600:
            break
    print(json.dumps({"panel_s": built, "findings_shown_s": shown, "keys": rows}))


asyncio.run(cell())
"""


def run(tree: Path, trace: Path, keys: int) -> dict:
    """One version's run, in a child process whose ``tfplace_widget`` is ``tree``'s."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(tree))
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(trace), str(keys), json.dumps(KEYS)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd="/tmp",
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=Path("/tmp/tfplace_scale/trace_1000000.pkl"))
    parser.add_argument("--baseline", type=Path, help="a baseline package's folder")
    parser.add_argument("--keys", type=int, default=12)
    args = parser.parse_args(argv)
    versions = {"this": REPO} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    print("| version | panel | findings shown | keystroke wait, median (max) | while finding |")
    print("|---|---:|---:|---:|---:|")
    for name, tree in versions.items():
        found = run(tree, args.trace, args.keys)
        waits = [lag + took for lag, took, _ in found["keys"]]
        during = sum(pending for _, _, pending in found["keys"])
        shown = found["findings_shown_s"]
        print(
            f"| {name} | {found['panel_s']:.2f} s | "
            f"{'-' if shown is None else f'{shown:.1f} s'} | "
            f"{statistics.median(waits):.2f} s ({max(waits):.2f} s) | "
            f"{during} of {len(waits)} |"
        )
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
