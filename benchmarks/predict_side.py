"""The placer's prediction of a baseline version of the package and of this one, side by side in
one process, on the pickled traces ``benchmarks/scale.py`` keeps (issue 35: ``predict_placement``
and findings of a 1M-op trace in under 10 s each).

``python -m benchmarks.predict_side --baseline DIR [--cache /tmp/tfplace_scale]
[--sizes 10000,100000] [--repeats 3] [--parts]``

``DIR`` holds the baseline's package, e.g. ``git archive main tfplace_widget | tar -x -C DIR``,
imported as ``tfplace_baseline`` (as ``benchmarks/findings_side.py`` does). Two calls, each a
trace's first (the prediction's cache on the graph facts, ``predict/cache.py``, dropped before
it, outside the timing), both versions alternating, repeat by repeat, wall and CPU time (the
garbage collector runs before each call, outside the timing):

- ``devices``: ``predict_devices`` with one GPU added, soft placement, as ``find_findings``
  calls it (``findings/base.py``'s ``_predict_with_module``);
- ``placement``: ``predict_placement(trace, gpus=1)``: what it runs for a trace
  (``predict_trace`` with the facts' registry; the baseline's ``predict_placement`` takes only
  its own ``PlacementTrace`` class).

Answers checked equal with ``pandas.testing.assert_frame_equal``: ``predict_devices``' frame
and its errors; the predicted trace's ops and transfers frames and notes. ``--parts``: once per
version, a cProfile of ``devices``' call, its costliest functions (cumulative).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import pickle
import pstats
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.findings_side import BASELINE, import_baseline, same
from benchmarks.measure import Timing, fmt_ms, time_cpu_once


def calls(prefix: str, trace: Any) -> dict[str, Any]:
    """``devices`` and ``placement`` of the package imported as ``prefix``."""
    predict = importlib.import_module(f"{prefix}._analyses.predict.result")
    devices_of = importlib.import_module(f"{prefix}._analyses.predict.devices")
    facts = trace.facts
    devices = devices_of.predicted_devices(trace.devices, 1)
    task = devices_of.master_task(trace)

    def devices_call() -> Any:
        return predict.predict_devices(
            facts, devices, soft_placement=True, local_task=task, registry=facts.registry
        )

    def placement_call() -> Any:  # what predict_placement(trace, gpus=1) runs for a trace
        return predict.predict_trace(trace, 1, True, None, None, registry=facts.registry)

    return {"devices": devices_call, "placement": placement_call}


def check(new: dict[str, Any], old: dict[str, Any]) -> str:
    """Whether both versions' answers are equal (``same``'s words)."""
    out = []
    a, b = new["devices"], old["devices"]
    out.append(f"devices {same(a, b)}")
    if a.attrs.get("errors") != b.attrs.get("errors"):
        out.append("devices' errors DIFFERENT")
    a, b = new["placement"], old["placement"]
    out.append(f"ops {same(a.ops, b.ops)}")
    out.append(f"transfers {same(a.transfers, b.transfers)}")
    if a.notes != b.notes or a.devices != b.devices:
        out.append("notes or devices DIFFERENT")
    return ", ".join(out)


def profile(fn: Any, drop: Any, facts: Any, top: int = 12) -> str:
    """The ``top`` costliest functions (cumulative) of one call of ``fn``, cache dropped."""
    drop(facts)
    gc.collect()
    profiler = cProfile.Profile()
    profiler.enable()
    fn()
    profiler.disable()
    stats = pstats.Stats(profiler)
    rows = sorted(stats.stats.items(), key=lambda item: -item[1][3])  # type: ignore[attr-defined]
    lines = []
    for (file, line, name), (_, calls_, tottime, cumtime, _) in rows[:top]:
        where = f"{Path(file).name}:{line}" if line else file
        lines.append(f"    {cumtime:6.3f} s cum {tottime:6.3f} s own {calls_:>8} {where}({name})")
    return "\n".join(lines)


def measure(path: Path, baseline: Path, repeats: int, with_parts: bool) -> dict[str, Any]:
    import tensorflow  # noqa: F401  (a kernel that traced has it)

    from tfplace_widget._analyses.predict.cache import _drop_facts_cache

    import_baseline(baseline)
    with open(path, "rb") as f:
        trace = pickle.load(f)
    versions = {"baseline": calls(BASELINE, trace), "this": calls("tfplace_widget", trace)}
    answers = {}
    for version, fns in versions.items():  # a first call each, untimed
        answers[version] = {}
        for step, fn in fns.items():
            _drop_facts_cache(trace.facts)
            answers[version][step] = fn()
    verdict = check(answers["this"], answers["baseline"])
    del answers
    timings = {(v, s): Timing() for v, fns in versions.items() for s in fns}
    for _ in range(repeats):
        for step in ("devices", "placement"):
            for version, fns in versions.items():
                _drop_facts_cache(trace.facts)
                wall, cpu, _ = time_cpu_once(fns[step])
                timings[version, step].seconds.append(wall)
                timings[version, step].cpu.append(cpu)
    parts = {}
    if with_parts:
        for version, fns in versions.items():
            parts[version] = profile(fns["devices"], _drop_facts_cache, trace.facts)
    return {"ops": len(trace.facts.types), "answers": verdict, "timings": timings, "parts": parts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/tfplace_scale"))
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--parts", action="store_true", help="cProfile of devices, each version")
    args = parser.parse_args(argv)
    print(
        "| nodes | call | baseline CPU (median; min) | this CPU (median; min) "
        "| baseline wall | this wall | CPU baseline / this |"
    )
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for size in args.sizes.split(","):
        started = time.strftime("%H:%M:%S", time.gmtime())
        row = measure(
            args.cache / f"trace_{size}.pkl", args.baseline.resolve(), args.repeats, args.parts
        )
        t = row["timings"]
        for step in ("devices", "placement"):
            old, new = t["baseline", step], t["this", step]
            old_cpu, new_cpu = sorted(old.cpu), sorted(new.cpu)
            mid = len(old_cpu) // 2
            print(
                f"| {row['ops']:,} | {step} | {fmt_ms(old_cpu[mid])}; {fmt_ms(old_cpu[0])} "
                f"| {fmt_ms(new_cpu[mid])}; {fmt_ms(new_cpu[0])} | {old.ms()} | {new.ms()} "
                f"| {old_cpu[mid] / new_cpu[mid]:.2f}x |",
                flush=True,
            )
        print(f"  ({started} UTC) answers: {row['answers']}", flush=True)
        for version, text in row["parts"].items():
            print(f"  {version}, devices' cProfile:\n{text}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
