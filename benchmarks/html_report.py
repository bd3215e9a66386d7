"""The static HTML report (issue 14): file size, time to write it, and time to open it in Chromium.

``python -m benchmarks.html_report [--sizes 10000 100000] [--repeats 5]`` traces generated
graphs (``benchmarks/graphs.py``, four CPUs) once each with TensorFlow, converts them with
``PlacementTrace.from_run_metadata``, writes each report with ``export.html.write_html``
(timed), and opens it from disk (``file://``) in Debian's headless Chromium, a fresh page per
repeat (the first in a fresh browser), timing until the table and the timeline are drawn:

- in the page, from navigation start to the table (``data-table-ms``) and to the timeline
  drawn by plotly.js and one frame painted (``data-ready-ms``);
- on the wall clock, from ``page.goto`` to the page saying it is ready;
- one keystroke ("7": about a third of the ops match) from ``keydown`` to "showing N of M"
  changing (the table redrawn and the timeline's overlays handed to plotly.js).

Targets (issue 14): 100k ops under 15 MB and open (table and timeline drawn, median) in
under 3 s. For scale, the time a page holding only plotly.js takes to run it is measured too.
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.graphs import bare_traced_run, make_graph_def, session_config

TARGET_MB = 15.0
TARGET_OPEN_S = 3.0
SIZES = (10_000, 100_000)
DEVICES = 4
QUERY_KEY = "7"
MB = 1_000_000

_ARM_JS = """() => {
    const box = document.getElementById('tfplace-search');
    const status = document.getElementById('tfplace-status');
    window.__bench = {start: null, end: null};
    box.addEventListener('keydown', () => { window.__bench.start = performance.now(); },
                        {once: true});
    const observer = new MutationObserver(() => {
        if (window.__bench.start !== null && window.__bench.end === null) {
            window.__bench.end = performance.now();
            observer.disconnect();
        }
    });
    observer.observe(status, {childList: true, subtree: true, characterData: true});
}"""


def write_reports(folder: Path, sizes: tuple[int, ...]) -> dict[int, dict]:
    """Trace, convert and write each size's report; its path, size, ops and write time."""
    from tfplace_widget import PlacementTrace
    from tfplace_widget._export.html import plotly_path, write_html

    reports = {}
    for n in sizes:
        run = bare_traced_run(make_graph_def(n, devices=DEVICES), session_config(DEVICES))
        trace = PlacementTrace.from_run_metadata(run.run_metadata, graph=run.graph)
        path = folder / f"report_{n}.html"
        start = time.perf_counter()
        write_html(trace, path)
        seconds = time.perf_counter() - start
        reports[n] = {
            "path": path,
            "bytes": path.stat().st_size,
            "plotly_bytes": plotly_path().stat().st_size,
            "ops": len(trace.ops),
            "events": len(trace.events),
            "write_s": seconds,
        }
        print(f"{n:,}: {reports[n]}", file=sys.stderr)
    return reports


def open_times(browser, path: Path, repeats: int) -> dict[str, list[float]]:
    """Open ``path`` ``repeats`` times, each in a fresh page; the times of each."""
    times: dict[str, list[float]] = {"table_s": [], "ready_s": [], "wall_s": [], "key_s": []}
    for _ in range(repeats):
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, offline=True)
        page = context.new_page()
        start = time.perf_counter()
        page.goto(path.as_uri(), wait_until="commit")
        page.wait_for_function(
            "document.body && document.body.dataset.ready === 'true'", timeout=60_000, polling=10
        )
        times["wall_s"].append(time.perf_counter() - start)
        marks = page.evaluate("() => document.body.dataset")
        times["table_s"].append(float(marks["tableMs"]) / 1000)
        times["ready_s"].append(float(marks["readyMs"]) / 1000)
        page.evaluate(_ARM_JS)
        page.locator("#tfplace-search").press(QUERY_KEY)
        page.wait_for_function("() => window.__bench.end !== null", timeout=60_000, polling=10)
        timing = page.evaluate("() => window.__bench")
        times["key_s"].append((timing["end"] - timing["start"]) / 1000)
        context.close()
    return times


def plotly_alone(browser, folder: Path, repeats: int) -> list[float]:
    """The fixed cost: seconds from navigation start until a page holding only plotly.min.js
    (as the report embeds it) has run it."""
    from tfplace_widget._export.html import plotly_path

    path = folder / "plotly_alone.html"
    path.write_text(
        "<!DOCTYPE html><html><body><script>"
        + plotly_path().read_text(encoding="utf-8")
        + "</script><script>document.body.dataset.readyMs = performance.now();</script>"
        "</body></html>",
        encoding="utf-8",
    )
    seconds = []
    for _ in range(repeats):
        context = browser.new_context(offline=True)
        page = context.new_page()
        page.goto(path.as_uri(), wait_until="commit")
        page.wait_for_function("document.body && document.body.dataset.readyMs", polling=10)
        seconds.append(float(page.evaluate("() => document.body.dataset.readyMs")) / 1000)
        context.close()
    return seconds


def _spread(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    scaled = [v * scale for v in values]
    return (
        f"{statistics.median(scaled):.{digits}f} "
        f"({min(scaled):.{digits}f}-{max(scaled):.{digits}f})"
    )


def render_table(
    reports: dict[int, dict], times: dict[int, dict[str, list[float]]], baseline: list[float]
) -> str:
    lines = [
        "| graph (ops in the trace) | file | of which plotly.js | write_html | opened: table "
        "(s) | opened: table + timeline (s) | wall clock (s) | keystroke (ms) | targets |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |",
    ]
    for n, report in reports.items():
        t = times[n]
        size_ok = report["bytes"] / MB < TARGET_MB
        open_ok = statistics.median(t["ready_s"]) < TARGET_OPEN_S
        lines.append(
            f"| {n:,} ({report['ops']:,}) | {report['bytes'] / MB:.2f} MB | "
            f"{report['plotly_bytes'] / MB:.2f} MB | {report['write_s']:.2f} s | "
            f"{_spread(t['table_s'])} | {_spread(t['ready_s'])} | {_spread(t['wall_s'])} | "
            f"{_spread(t['key_s'], 1000, 0)} | "
            f"< {TARGET_MB:.0f} MB {'✓' if size_ok else '✗'}, < {TARGET_OPEN_S:.0f} s "
            f"{'✓' if open_ok else '✗'} |"
        )
    lines.append("")
    lines.append(
        f"plotly.js alone (a page holding only plotly.min.js, n={len(baseline)}): "
        f"{_spread(baseline)} s from navigation start until it has run."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.html_report", description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--keep", type=Path, help="copy the reports into this folder")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS

    sizes = tuple(args.sizes)
    with tempfile.TemporaryDirectory() as tmp:
        reports = write_reports(Path(tmp), sizes)
        times = {}
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                baseline = plotly_alone(browser, Path(tmp), args.repeats)
                for n in sizes:
                    times[n] = open_times(browser, reports[n]["path"], args.repeats)
                    print(f"{n:,}: {times[n]}", file=sys.stderr)
            finally:
                browser.close()
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            for report in reports.values():
                (args.keep / report["path"].name).write_bytes(report["path"].read_bytes())
    print(render_table(reports, times, baseline))
    return 0


if __name__ == "__main__":
    sys.exit(main())
