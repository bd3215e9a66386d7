"""What the memory lane adds to the panel, for two versions of the package in one process.

``python -m benchmarks.memory_lane_ab --baseline DIR [--ops 100000] [--repeats 11] --protos P``
imports this tree's ``tfplace_widget`` and a baseline's copy of the package renamed
``tfplace_old`` (``git archive main tfplace_widget | tar -x -C TMP`` then ``mv
TMP/tfplace_widget DIR/tfplace_old``: its modules import each other relatively), converts the
same protos (``benchmarks.convert --protos P``) with an allocator record on every node
(``with_memory_everywhere``, the worst case) with each, and builds ``PlacementPanel`` with
the lane and with ``memory`` emptied, the four builds interleaved repeat by repeat, each
after a full garbage collection and with the memory peaks and series found again (as a
trace's first panel does). On a shared machine the two versions' ratios then see the same
load, which separate runs of ``benchmarks.memory_lane`` do not. Prints CPU-time medians.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib
import statistics
import sys
import time

from benchmarks.convert import traced_protos, with_memory_everywhere
from benchmarks.memory_lane import TARGET_RATIO

PACKAGES = ("tfplace_widget", "tfplace_old")


def cases(n_ops: int, protos: str) -> dict[tuple[str, str], tuple]:
    """Per (package, "lane" / "none"): the trace, the package's panel and its series cache."""
    metadata, graph = traced_protos(n_ops, protos)
    every = with_memory_everywhere(metadata)
    found = {}
    for name in PACKAGES:
        package = importlib.import_module(name)
        empty = importlib.import_module(name + "._model.memory").empty_memory
        panel = importlib.import_module(name + "._widgets.panel").PlacementPanel
        series = importlib.import_module(name + "._analyses.memory")._SERIES
        lane = package.PlacementTrace.from_run_metadata(every, graph=graph)
        none = dataclasses.replace(lane, memory=empty())
        none.__dict__["_findings_cache"] = lane.findings  # found once, for both
        found[name, "lane"] = (lane, panel, series)
        found[name, "none"] = (none, panel, series)
    return found


def cpu_times(found: dict[tuple[str, str], tuple], repeats: int) -> dict[tuple, list[float]]:
    """CPU seconds of each case's panel build, interleaved, after one build each (warm)."""
    for trace, panel, _ in found.values():
        panel(trace).close()
    times: dict[tuple, list[float]] = {key: [] for key in found}
    for _ in range(repeats):
        for key, (trace, panel, series) in found.items():
            trace.__dict__.pop("_memory_peaks_cache", None)
            series.pop(id(trace.memory), None)
            gc.collect()
            start = time.process_time()
            built = panel(trace)
            times[key].append(time.process_time() - start)
            built.close()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the folder holding tfplace_old")
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--protos", required=True)
    args = parser.parse_args(argv)
    sys.path.insert(0, args.baseline)
    times = cpu_times(cases(args.ops, args.protos), args.repeats)
    print("| package | panel with the lane (CPU) | without | added | ratio |")
    print("|---|---|---|---|---|")
    for name in PACKAGES:
        lane, none = times[name, "lane"], times[name, "none"]
        a, b = statistics.median(lane) * 1000, statistics.median(none) * 1000
        print(
            f"| {name} | {a:.0f} ms [{min(lane) * 1000:.0f}-{max(lane) * 1000:.0f}] "
            f"| {b:.0f} ms [{min(none) * 1000:.0f}-{max(none) * 1000:.0f}] "
            f"| {a - b:+.0f} ms | {a / b:.3f} (target < {TARGET_RATIO}) |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
