"""``predict_placement(setup, gpus=2, cluster="local:worker=2")`` next to
``trace_placement(setup, cluster="local:worker=2")`` (issue 36), the tutorial's custom loop
(``tests/tracing/mwms_programs.custom_loop``, optimizer built in the scope).

``python -m benchmarks.mwms_gpus [--repeats 3] [--ps]``: both whole calls, interleaved in one process
(each launches the local cluster: two task processes that import TensorFlow); the prediction
adds each task's 2-GPU build (its setup run again, the step traced not run) and the placement
of the two built graphs here. Wall time, this process's CPU time and the task processes' CPU
time (``RUSAGE_CHILDREN`` deltas: every child process ended within the call), medians, and the
load average before and after. Prints a Markdown table.

``--ps``: ``ParameterServerStrategy`` instead, on ``local:worker=2,ps=2``, the PSS tutorial's
custom loop (``tests/tracing/ps_programs.custom_loop``, its variables made with
``aggregation="MEAN"``): the prediction adds the coordinator's 2-GPU build
(``_tracing/pss_gpus``) and the placement of its graph on each worker.
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
PS_CLUSTER = "local:worker=2,ps=2"


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
    parser.add_argument("--ps", action="store_true", help="ParameterServerStrategy")
    parsed = parser.parse_args()
    repeats = parsed.repeats
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "tracing"))
    if parsed.ps:
        import ps_programs as programs

        cluster, kwargs = PS_CLUSTER, {"aggregation": "MEAN"}
    else:
        import mwms_programs as programs

        cluster, kwargs = CLUSTER, {"build_optimizer": True}

    from tfplace_widget import predict_placement, trace_placement

    options = {"cluster": cluster, "mode": "function", "fn_kwargs": kwargs}
    calls = {
        f"trace_placement(setup, cluster={cluster})": lambda: trace_placement(
            programs.custom_loop, **options
        ),
        f"predict_placement(setup, gpus=2, cluster={cluster})": lambda: predict_placement(
            programs.custom_loop, gpus=2, **options
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
