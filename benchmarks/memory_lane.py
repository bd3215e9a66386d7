"""What the memory lane and the memory peaks (issue 34) add to the panel and the HTML report.

``python -m benchmarks.memory_lane [--ops 100000] [--repeats 5] [--browser] [--protos DIR]``
traces a generated graph (``benchmarks/graphs.py``, four CPUs) once with TensorFlow (with
``--protos``, the traced protos of ``benchmarks.convert --protos DIR`` are reused: no
tracing), gives every node an allocator
record (``benchmarks.convert.with_memory_everywhere``: an allocation of its output's bytes and
its free, the worst case: 2 records per node, hundreds of thousands for the lane to draw), and
converts it. The same trace with its ``memory`` emptied is the baseline; side by side in this
one process, interleaved repeat by repeat:

- the panel's cost in the kernel: ``PlacementPanel(trace)`` (header, chips, findings, timeline
  figure and its message, memory list, table), its findings found once beforehand for both,
  the memory peaks and series (kept once found) found again by each build;
- the timeline's figure alone (``TimelineFigure``) and its size as sent (``encode``d, bytes);
- with ``--browser``: the HTML report written for each and opened in Debian's headless
  Chromium (``benchmarks.html_report.open_times``): until the table and the timeline (with
  the lane) are drawn.

Each build is timed on the wall clock and in this process's CPU time (``time.process_time``):
on a machine shared with other work the wall times wander by tens of percent between repeats,
the CPU times much less. Target (issue 34): the lane adds under 10% to the panel at 100k ops
(checked on the CPU times). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.convert import traced_protos, with_memory_everywhere
from benchmarks.graphs import bare_traced_run, make_graph_def, session_config

DEVICES = 4
TARGET_RATIO = 1.10


def traces(n_ops: int, protos: str | None = None) -> tuple[Any, Any]:
    """The trace with an allocator record on every node, and the same without ``memory``."""
    from tfplace_widget import PlacementTrace
    from tfplace_widget._model.memory import empty_memory

    if protos:
        metadata, graph = traced_protos(n_ops, protos)
    else:
        run = bare_traced_run(make_graph_def(n_ops, devices=DEVICES), session_config(DEVICES))
        metadata, graph = run.run_metadata, run.graph
    with_memory = PlacementTrace.from_run_metadata(with_memory_everywhere(metadata), graph=graph)
    without = dataclasses.replace(with_memory, memory=empty_memory())
    # The same findings for both (found once: they do not read the memory frame); the panel
    # reads them from the trace's cache, as it does for a trace whose findings were asked for.
    without.__dict__["_findings_cache"] = with_memory.findings
    return with_memory, without


def sent_bytes(figure: Any) -> int:
    """The figure's size as the widget sends it: JSON with the numeric arrays as buffers."""
    from tfplace_widget._rendering.arrays import encode

    total = 0

    def typed(values: Any) -> dict:
        nonlocal total
        total += values.nbytes
        return {"dtype": str(values.dtype)}

    text = json.dumps(encode({"data": figure.data, "layout": figure.layout}, typed))
    return total + len(text.encode("utf-8"))


def kernel_times(cases: dict[str, Any], repeats: int) -> dict[str, dict[str, list[float]]]:
    """Per case: seconds to build the panel and the timeline figure, interleaved; wall
    (``panel``, ``figure``) and CPU (``panel_cpu``, ``figure_cpu``), each after a full
    garbage collection."""
    from tfplace_widget._analyses.memory import _SERIES
    from tfplace_widget._rendering.figure import TimelineFigure
    from tfplace_widget._widgets.panel import PlacementPanel

    times: dict[str, dict[str, list[float]]] = {
        name: {"panel": [], "figure": [], "panel_cpu": [], "figure_cpu": []} for name in cases
    }
    for repeat in range(repeats):
        for name, trace in cases.items():
            # Each build finds the memory peaks and series again, as a trace's first panel does.
            trace.__dict__.pop("_memory_peaks_cache", None)
            _SERIES.pop(id(trace.memory), None)
            gc.collect()
            cpu, start = time.process_time(), time.perf_counter()
            panel = PlacementPanel(trace)
            times[name]["panel"].append(time.perf_counter() - start)
            times[name]["panel_cpu"].append(time.process_time() - cpu)
            print(
                f"repeat {repeat}, {name}: panel {times[name]['panel'][-1]:.3f} s",
                file=sys.stderr,
                flush=True,
            )
            panel.close()
            _SERIES.pop(id(trace.memory), None)
            gc.collect()
            cpu, start = time.process_time(), time.perf_counter()
            TimelineFigure(
                trace.events, trace.devices, trace.transfers, trace.inputs, memory=trace.memory
            )
            times[name]["figure"].append(time.perf_counter() - start)
            times[name]["figure_cpu"].append(time.process_time() - cpu)
    return times


def browser_times(cases: dict[str, Any], repeats: int) -> dict[str, list[float]]:
    """Per case: seconds until the HTML report's table and timeline are drawn in Chromium."""
    from playwright.sync_api import sync_playwright

    from benchmarks.html_report import open_times
    from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
    from tfplace_widget._export.html import write_html

    folder = Path(tempfile.mkdtemp(prefix="tfplace-memory-bench-"))
    paths = {
        name: write_html(trace, folder / f"{i}.html")
        for i, (name, trace) in enumerate(cases.items())
    }
    ready: dict[str, list[float]] = {name: [] for name in cases}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            for _ in range(repeats):
                for name, path in paths.items():
                    ready[name] += open_times(browser, path, 1)["ready_s"]
        finally:
            browser.close()
    return ready


def _median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:,.0f} ms [{min(values) * 1000:,.0f}–{max(values) * 1000:,.0f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--browser", action="store_true", help="also open the HTML reports")
    parser.add_argument(
        "--protos", help="reuse the traced protos kept here (benchmarks.convert --protos DIR)"
    )
    args = parser.parse_args(argv)
    with_memory, without = traces(args.ops, args.protos)
    cases = {"memory lane (every node allocates)": with_memory, "no allocator records": without}
    print(
        f"{len(with_memory.ops):,} ops, {len(with_memory.events):,} events, "
        f"{len(with_memory.memory):,} allocator records on "
        f"{with_memory.memory['device'].nunique()} devices",
        file=sys.stderr,
    )
    kernel = kernel_times(cases, args.repeats)
    from tfplace_widget._rendering.figure import TimelineFigure

    sizes = {
        name: sent_bytes(
            TimelineFigure(t.events, t.devices, t.transfers, t.inputs, memory=t.memory)
        )
        for name, t in cases.items()
    }
    rows = [
        "| case | panel built (kernel, wall) | panel built (CPU) | timeline figure (wall) "
        "| timeline figure (CPU) | figure sent |",
        "|---|---|---|---|---|---|",
    ]
    for name in cases:
        k = kernel[name]
        rows.append(
            f"| {name} | {_median_ms(k['panel'])} | {_median_ms(k['panel_cpu'])} | "
            f"{_median_ms(k['figure'])} | {_median_ms(k['figure_cpu'])} | "
            f"{sizes[name] / 1e6:.2f} MB |"
        )
    names = list(cases)

    def ratio(key: str) -> float:
        return statistics.median(kernel[names[0]][key]) / statistics.median(kernel[names[1]][key])

    panel_ratio = ratio("panel_cpu")
    summary = [
        f"panel with / without the lane: {panel_ratio:.3f} CPU time, {ratio('panel'):.3f} wall "
        f"(target < {TARGET_RATIO}); the figure alone: {ratio('figure_cpu'):.3f} CPU time"
    ]
    if args.browser:
        ready = browser_times(cases, args.repeats)
        rows[0] += " HTML report drawn (Chromium) |"
        rows[1] += "---|"
        for i, name in enumerate(names):
            rows[2 + i] += f" {_median_ms(ready[name])} |"
        ratio = statistics.median(ready[names[0]]) / statistics.median(ready[names[1]])
        summary.append(f"HTML report drawn with / without the lane: {ratio:.3f}")
    print("\n".join(rows + [""] + summary))
    return 0 if panel_ratio < TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
