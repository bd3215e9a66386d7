"""What a kernel's first use costs: ``%load_ext tfplace_widget`` and the first ``show_placement``.

``python -m benchmarks.startup`` starts fresh python3 kernels (jupyter_client, as JupyterLab
does) and times, from the execute request to the kernel's reply, in each kernel:

1. ``import IPython`` (baseline: a cell that does nearly nothing);
2. ``%load_ext tfplace_widget``;
3. the first ``show_placement`` of a loaded trace (riptide's real GPU trace), either at once
   after ``%load_ext`` (worst case: the background import of the panel is still running) or
   after a 3 s pause (the user writing the next cell);
4. a second ``show_placement`` of the same file (the baseline for the first one).

Targets (issue 11): ``%load_ext`` under 0.3 s; the first ``show_placement`` no more than
0.5 s beyond a later one. Before this work ``%load_ext`` took 1.8 s here (RESULTS.md).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from jupyter_client.manager import start_new_kernel

TRACE = (
    Path(__file__).resolve().parents[1]
    / "tfplace_widget"
    / "examples"
    / "gpu_traces"
    / "riptide"
    / "timeline.ctf.json"
)
TARGET_LOAD_S = 0.3
TARGET_FIRST_EXTRA_S = 0.5


def timed(client: object, code: str) -> float:
    """Seconds from the execute request to the reply; raise if the cell failed."""
    start = time.perf_counter()
    reply = client.execute(code, reply=True, timeout=300)  # type: ignore[attr-defined]
    elapsed = time.perf_counter() - start
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"{code!r} failed: {reply['content'].get('evalue')}")
    return elapsed


def one_kernel(pause_s: float) -> dict[str, float]:
    manager, client = start_new_kernel(kernel_name="python3")
    try:
        timings = {"baseline cell": timed(client, "import IPython")}
        timings["%load_ext"] = timed(client, "%load_ext tfplace_widget")
        if pause_s:
            time.sleep(pause_s)
        show = f"panel = show_placement({str(TRACE)!r}); panel.close()"
        timings["first show_placement"] = timed(client, show)
        timings["later show_placement"] = timed(client, show)
        return timings
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="fresh kernels per case")
    args = parser.parse_args()
    print(f"{'case':<34} {'median s':>9}  runs")
    for pause in (0.0, 3.0):
        runs = [one_kernel(pause) for _ in range(args.repeats)]
        label = "at once" if not pause else f"after {pause:.0f} s"
        for key in runs[0]:
            values = [run[key] for run in runs]
            print(
                f"{key + (' (' + label + ')' if 'first' in key else ''):<34} "
                f"{statistics.median(values):>9.3f}  {', '.join(f'{v:.3f}' for v in values)}"
            )
        extra = statistics.median(
            r["first show_placement"] - r["later show_placement"] for r in runs
        )
        load = statistics.median(r["%load_ext"] for r in runs)
        print(
            f"  -> %load_ext {load:.3f} s (target < {TARGET_LOAD_S} s); first show_placement "
            f"{label}: {extra:+.3f} s beyond a later one (target <= {TARGET_FIRST_EXTRA_S} s)"
        )


if __name__ == "__main__":
    main()
