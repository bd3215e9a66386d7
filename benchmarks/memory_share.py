"""What memory (issue 34) adds to the conversion, for a baseline version of the package and
this one, side by side in one process.

``python -m benchmarks.memory_share --baseline DIR --protos P [--sizes 100000] [--repeats 11]
[--check]``

``DIR`` holds the baseline's package under its own name (``git archive main tfplace_widget |
tar -x -C DIR``); it is imported as ``tfplace_baseline`` (``benchmarks.findings_side``: the
package imports itself relatively). The same traced protos (``benchmarks.convert --protos P``:
kept and reused) are converted by ``PlacementTrace.from_run_metadata`` of each version, once
with every node's allocator records cleared (``convert.without_memory``: the baseline of the
share) and once with a record on every node (``convert.with_memory_everywhere``: the worst
case), the four conversions interleaved, their order reversed every other repeat, each after
a full garbage collection. On a shared machine both versions then see the same load, which
separate runs do not. Prints CPU-time medians [min-max], what the records add per version
(the ratio of the medians, and the median of each repeat's own ratio) and the 1-minute load
average over the run; the issue's target is under 10% added at 100k ops.

``--stages``: then the same for the stage this share is mostly in, reading the step's records
(``run_metadata.records_from_step_stats``, given the step's serialized bytes as the
conversion gives them), which is short enough for many more repeats.

``--check`` first asserts, with ``pandas.testing.assert_frame_equal`` (dtypes included), that
both versions make the same ``ops``, ``events``, ``transfers`` and ``memory`` of the traced
protos, of those with a record on every node and of those cleared.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.convert import MEMORY_TARGET, traced_protos, with_memory_everywhere, without_memory
from benchmarks.findings_side import BASELINE, _load

FRAMES = ("ops", "events", "transfers", "memory")
CLEARED, EVERY = "memory cleared", "a record on every node"


def check_equal(baseline: Any, this: Any, inputs: dict[str, Any], graph: Any) -> None:
    """Assert both versions' frames of each of ``inputs`` equal (AssertionError names which)."""
    import pandas.testing as pdt

    for label, metadata in inputs.items():
        old = baseline.from_run_metadata(metadata, graph)
        new = this.from_run_metadata(metadata, graph)
        for name in FRAMES:
            pdt.assert_frame_equal(getattr(new, name), getattr(old, name), obj=f"{label}: {name}")
        assert new.devices == old.devices and new.inputs == old.inputs, label
        assert sorted(new.raw) == sorted(old.raw), label


def cpu_times(
    fns: dict[tuple[str, str], Any], repeats: int
) -> tuple[dict[tuple[str, str], list[float]], list[float]]:
    """Each function's CPU seconds, ``repeats`` times, interleaved, the order reversed every
    other repeat; and the 1-minute load average before the first and after each repeat."""
    times: dict[tuple[str, str], list[float]] = {key: [] for key in fns}
    loads = [os.getloadavg()[0]]
    for repeat in range(repeats):
        order = list(fns.items())
        if repeat % 2:
            order.reverse()
        for key, fn in order:
            gc.collect()
            start = time.process_time()
            fn()
            times[key].append(time.process_time() - start)
        loads.append(os.getloadavg()[0])
    return times, loads


def render(n_ops: int, times: dict[tuple[str, str], list[float]], loads: list[float]) -> str:
    repeats = len(next(iter(times.values())))
    lines = [
        f"{n_ops:,} ops, {repeats} interleaved repeats, CPU medians [min-max], "
        f"load (1-min) {min(loads):.1f}-{max(loads):.1f}",
        "",
        f"| | baseline ({BASELINE}) | this tree |",
        "|---|---:|---:|",
    ]
    versions = ("baseline", "this")
    for case in (CLEARED, EVERY):
        cells = []
        for version in versions:
            t = times[version, case]
            cells.append(
                f"{statistics.median(t) * 1e3:,.0f} ms [{min(t) * 1e3:,.0f}-{max(t) * 1e3:,.0f}]"
            )
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    added, per_repeat, spent = [], [], []
    for version in versions:
        every, cleared = times[version, EVERY], times[version, CLEARED]
        added.append(f"**{statistics.median(every) / statistics.median(cleared) - 1:+.1%}**")
        pairs = list(zip(every, cleared, strict=True))
        per_repeat.append(f"{statistics.median([e / c - 1 for e, c in pairs]):+.1%}")
        spent.append(f"{statistics.median([e - c for e, c in pairs]) * 1e3:+,.0f} ms")
    lines.append(
        f"| what memory adds (medians; target < {MEMORY_TARGET:.0%}) | " + " | ".join(added) + " |"
    )
    lines.append("| median of each repeat's own ratio | " + " | ".join(per_repeat) + " |")
    lines.append("| median of each repeat's own difference | " + " | ".join(spent) + " |")
    return "\n".join(lines) + "\n"


def stage_fns(packages: dict[str, str], inputs: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """Each version's ``records_from_step_stats`` of each of ``inputs``, from its bytes."""
    serialized = {case: metadata.SerializeToString() for case, metadata in inputs.items()}
    fns = {}
    for version, name in packages.items():
        reader = importlib.import_module(f"{name}._sources.run_metadata").records_from_step_stats
        records = importlib.import_module(f"{name}._model.records").Records
        for case, metadata in inputs.items():
            fns[version, case] = lambda r=reader, n=records, m=metadata, b=serialized[case]: r(
                m.step_stats, n(), b
            )
    return fns


def timed(n_ops: int, fns: dict[tuple[str, str], Any], repeats: int, what: str) -> str:
    """``fns`` warmed, timed (:func:`cpu_times`) and rendered under the title ``what``."""
    for fn in fns.values():  # warm caches (kernel registry, imports) before timing
        fn()
    times, loads = cpu_times(fns, repeats)
    return f"{what}\n\n" + render(n_ops, times, loads)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, type=Path, help="DIR/tfplace_widget")
    parser.add_argument("--protos", required=True, help="keep/reuse the traced protos here")
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[100_000])
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--check", action="store_true", help="assert the frames equal first")
    parser.add_argument(
        "--stages", type=int, default=0, help="then time reading the records, this many repeats"
    )
    args = parser.parse_args(argv)
    if BASELINE not in sys.modules:
        _load(args.baseline / "tfplace_widget")
    baseline = importlib.import_module(BASELINE).PlacementTrace
    this = importlib.import_module("tfplace_widget").PlacementTrace
    for n_ops in args.sizes:
        metadata, graph = traced_protos(n_ops, args.protos)
        cleared = without_memory(metadata)
        inputs = {CLEARED: cleared, EVERY: with_memory_everywhere(cleared)}
        if args.check:
            check_equal(baseline, this, {"traced": metadata, **inputs}, graph)
            print(f"{n_ops:,} ops: frames equal (traced, {CLEARED}, {EVERY})", flush=True)
        fns = {
            (version, case): (lambda p=package, m=protos, g=graph: p.from_run_metadata(m, g))
            for version, package in (("baseline", baseline), ("this", this))
            for case, protos in inputs.items()
        }
        print(timed(n_ops, fns, args.repeats, "The conversion"), flush=True)
        if args.stages:
            packages = {"baseline": BASELINE, "this": "tfplace_widget"}
            stages = stage_fns(packages, inputs)
            print(timed(n_ops, stages, args.stages, "Reading the step's records"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
