"""``find_findings`` of a baseline version of the package and of this one, side by side in one
process, on the pickled traces ``benchmarks/scale.py`` keeps (issue 35: findings of a 1M-op
trace in under 10 s).

``python -m benchmarks.findings_side --baseline DIR [--cache /tmp/findfast_scale]
[--sizes 10000,100000] [--repeats 3] [--trace PATH ...]``

``DIR`` holds the baseline's package under its own name, e.g.
``git archive main tfplace_widget | tar -x -C DIR`` (``DIR/tfplace_widget``): it is imported
as ``tfplace_baseline`` (the package imports itself relatively), so both versions run in this
one process on the same unpickled trace, alternating, repeat by repeat (wall and CPU time;
the garbage collector runs before each call, outside the timing). Each call is a trace's first
(what ``trace.findings`` pays): the prediction's cache kept on the graph facts
(``predict/cache.py``) is dropped before it, outside the timing. The answers are checked
equal with ``pandas.testing.assert_frame_equal``: the findings frame and, up to
``--immaterial-up-to`` op rows, ``immaterial=True``'s (every finding). TensorFlow is imported
first, as in a kernel that traced. Loading the 1M-op trace takes about 30 s and 3 GB; each
version's findings about 4 GB at their peak.

``--parts``: then, once per version, the CPU seconds of each step of ``find_findings`` (the
``Context``, each rule, the per-copy merge, ``judge``, the cap and the frame), as it runs them.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import pickle
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.measure import Timing, fmt_ms, time_cpu_once

BASELINE = "tfplace_baseline"


def import_baseline(folder: Path) -> Any:
    """The baseline's ``find_findings``: ``folder/tfplace_widget`` imported as ``BASELINE``."""
    if BASELINE not in sys.modules:
        _load(folder / "tfplace_widget")
    return importlib.import_module(f"{BASELINE}._analyses.findings").find_findings


def _load(package: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        BASELINE, package / "__init__.py", submodule_search_locations=[str(package)]
    )
    if spec is None or spec.loader is None:
        raise SystemExit(
            f"no package in {package}: git archive main tfplace_widget | tar -x -C DIR"
        )
    module = importlib.util.module_from_spec(spec)
    sys.modules[BASELINE] = module
    spec.loader.exec_module(module)


def same(new: Any, old: Any) -> str:
    """``equal``, or the first difference ``assert_frame_equal`` reports."""
    import pandas as pd

    try:
        pd.testing.assert_frame_equal(new, old)
    except AssertionError as exc:
        return f"DIFFERENT: {str(exc)[:300]}"
    return "equal"


def parts(package: Any, trace: Any) -> dict[str, float]:
    """CPU seconds of each step of ``package``'s ``find_findings`` (its findings module)."""
    from tfplace_widget._analyses.predict.cache import _drop_facts_cache
    from tfplace_widget._model.gc_pause import paused_gc

    p, took, found = package, {}, []

    def step(name: str, fn: Any) -> Any:
        start = time.process_time()
        result = fn()
        took[name] = took.get(name, 0.0) + time.process_time() - start
        return result

    _drop_facts_cache(trace.facts)
    gc.collect()
    with paused_gc():
        context = step("Context.of", lambda: p.Context.of(p._the_calls_only(trace)))
        if hasattr(context, "material_only"):  # as find_findings' default sets it
            context.material_only = True
        for name in ("merged_runs", "cpu_fallbacks", "soft_moves", "costly_transfers"):
            found += step(name, lambda n=name: getattr(p, f"find_{n}")(context))
        network = (p.NETWORK_HIGH_BYTES, p.NETWORK_MEDIUM_BYTES)
        found += step("cross_task", lambda: p.find_cross_task_transfers(context, *network))
        for name in ("ping_pongs", "host_memory_on_gpu", "idle_devices"):
            found += step(name, lambda n=name: getattr(p, f"find_{n}")(context))
        for name in ("hidden", "time", "recompile", "outside"):
            found += step("xla", lambda n=name: getattr(p, f"find_xla_{n}")(context))
        found += step("input_waits", lambda: p.find_input_waits(trace))
        found += step("memory", lambda: p.find_gpu_memory(trace, p.GPU_MEMORY_GIB))
        found += step("memory", lambda: p.find_memory_peaks(trace, p.PEAK_OP_BYTES))
        merged = step(
            "one_per_copy", lambda: p._one_per_copy(context, p._as_keras_xla_would(trace, found))
        )
        judged = step("judge", lambda: p.judge(context, merged))
        step("capped+frame", lambda: p._frame(p._capped([f for f in judged if p.material(f)])))
    return took


def measure(
    path: Path, baseline: Path, repeats: int, immaterial_up_to: int, with_parts: bool = False
) -> dict[str, Any]:
    import tensorflow  # noqa: F401  (a kernel that traced has it)

    from tfplace_widget._analyses.findings import find_findings

    old_find = import_baseline(baseline)
    started = time.perf_counter()
    with open(path, "rb") as f:
        trace = pickle.load(f)
    loaded = time.perf_counter() - started
    fns = {"baseline": lambda: old_find(trace), "this": lambda: find_findings(trace)}
    answers = {name: fn() for name, fn in fns.items()}  # a first call each, untimed
    check = same(answers["this"], answers["baseline"])
    if len(trace.ops) <= immaterial_up_to:
        every = same(find_findings(trace, immaterial=True), old_find(trace, immaterial=True))
        check = f"{check}; immaterial=True: {every}"
    from tfplace_widget._analyses.predict.cache import _drop_facts_cache

    timings = {name: Timing() for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            _drop_facts_cache(trace.facts)
            wall, cpu, _ = time_cpu_once(fn)
            timings[name].seconds.append(wall)
            timings[name].cpu.append(cpu)
    split = {}
    if with_parts:
        split = {
            "baseline": parts(importlib.import_module(f"{BASELINE}._analyses.findings"), trace),
            "this": parts(importlib.import_module("tfplace_widget._analyses.findings"), trace),
        }
    return {
        "parts": split,
        "trace": str(path),
        "op rows": len(trace.ops),
        "load s": round(loaded, 1),
        "findings": len(answers["this"]),
        "answers": check,
        **{name: t for name, t in timings.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/findfast_scale"))
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--trace", type=Path, action="append", help="a pickled trace (repeatable)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--immaterial-up-to", type=int, default=200_000)
    parser.add_argument("--parts", action="store_true", help="CPU seconds per step, each version")
    args = parser.parse_args(argv)
    paths = args.trace or [args.cache / f"trace_{n}.pkl" for n in args.sizes.split(",")]
    print(
        "| trace | op rows | baseline (wall; CPU) | this (wall; CPU) | baseline / this | answers |"
    )
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for path in paths:
        row = measure(
            path, args.baseline.resolve(), args.repeats, args.immaterial_up_to, args.parts
        )
        old, new = row["baseline"], row["this"]
        cpu = {k: min(t.cpu) for k, t in (("old", old), ("new", new))}
        print(
            f"| {path.name} | {row['op rows']:,} | {old.ms()}; {fmt_ms(cpu['old'])} "
            f"| {new.ms()}; {fmt_ms(cpu['new'])} | {old.median / new.median:.1f}x "
            f"| {row['answers']} |",
            flush=True,
        )
        for name, took in row["parts"].items():
            split = ", ".join(f"{step} {seconds:.3f}" for step, seconds in took.items())
            print(f"  {name}: {split}; total {sum(took.values()):.2f} s CPU", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
