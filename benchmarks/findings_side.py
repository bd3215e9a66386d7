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
first, as in a kernel that traced. A 1M-op trace takes about 10 GB of memory to load.
"""

from __future__ import annotations

import argparse
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


def measure(path: Path, baseline: Path, repeats: int, immaterial_up_to: int) -> dict[str, Any]:
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
    return {
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
    args = parser.parse_args(argv)
    paths = args.trace or [args.cache / f"trace_{n}.pkl" for n in args.sizes.split(",")]
    print(
        "| trace | op rows | baseline (wall; CPU) | this (wall; CPU) | baseline / this | answers |"
    )
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for path in paths:
        row = measure(path, args.baseline.resolve(), args.repeats, args.immaterial_up_to)
        old, new = row["baseline"], row["this"]
        cpu = {k: min(t.cpu) for k, t in (("old", old), ("new", new))}
        print(
            f"| {path.name} | {row['op rows']:,} | {old.ms()}; {fmt_ms(cpu['old'])} "
            f"| {new.ms()}; {fmt_ms(cpu['new'])} | {old.median / new.median:.1f}x "
            f"| {row['answers']} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
