"""``predict_placement(setup, gpus=2, cluster="local:worker=2")`` next to
``trace_placement(setup, cluster="local:worker=2")`` (issue 36), the tutorial's custom loop
(``tests/tracing/mwms_programs.custom_loop``, optimizer built in the scope).

``python -m benchmarks.mwms_gpus [--repeats 3]``: both whole calls, interleaved in one process
(each launches the local cluster: two task processes that import TensorFlow); the prediction
adds each task's 2-GPU build (its setup run again, the step traced not run) and the placement
of the two built graphs here. Wall time, this process's CPU time and the task processes' CPU
time (``RUSAGE_CHILDREN`` deltas: every child process ended within the call), medians, and the
load average before and after. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

CLUSTER = "local:worker=2"


def _timed(fn: Any) -> tuple[float, float, float]:
    """Wall, own CPU and children's CPU seconds of ``fn()``."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    start = time.perf_counter()
    fn()
    wall = time.perf_counter() - start
    own2, kids2 = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return (
        wall,
        own2.ru_utime + own2.ru_stime - own.ru_utime - own.ru_stime,
        kids2.ru_utime + kids2.ru_stime - kids.ru_utime - kids.ru_stime,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    repeats = parser.parse_args().repeats
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "tracing"))
    import mwms_programs

    from tfplace_widget import predict_placement, trace_placement

    options = {"cluster": CLUSTER, "mode": "function", "fn_kwargs": {"build_optimizer": True}}
    calls = {
        "trace_placement(setup, cluster=local:worker=2)": lambda: trace_placement(
            mwms_programs.custom_loop, **options
        ),
        "predict_placement(setup, gpus=2, cluster=local:worker=2)": lambda: predict_placement(
            mwms_programs.custom_loop, gpus=2, **options
        ),
    }
    before = os.getloadavg()
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            runs[name].append(_timed(call))
    after = os.getloadavg()
    print(
        f"load average before {before[0]:.2f} {before[1]:.2f}, after {after[0]:.2f} {after[1]:.2f}"
    )
    print("| call | wall s, median [min-max] | own CPU s | tasks' CPU s |")
    print("|---|---|---|---|")
    for name, rows in runs.items():
        wall, own, kids = zip(*rows, strict=True)
        print(
            f"| {name} | {statistics.median(wall):.1f} [{min(wall):.1f}-{max(wall):.1f}] n={len(wall)} "
            f"| {statistics.median(own):.1f} | {statistics.median(kids):.1f} |"
        )


if __name__ == "__main__":
    main()
