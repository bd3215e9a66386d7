"""``show_placement(trace)`` of a large trace in a kernel, by parts, with its RSS growth and
what it sends to the browser (issue 35: a 1M-op trace on screen in under 5 s, under 1.5 GB).

``python -m benchmarks.panel_scale [--cache DIR] [--sizes 100000,1000000] [--repeats 3]
[--baseline DIR] [--versions this,baseline] [--findings] [--profile N]``

Reads the pickled trace of the generated graph that ``benchmarks/scale.py`` keeps in
``--cache`` (``trace_N.pkl``; traced there if missing). Per size and version (this checkout,
and ``--baseline``'s package if given, e.g. ``git archive main tfplace_widget | tar -x -C
DIR``), a child process of its own imports TensorFlow (as a kernel that traced has), reads the
trace, builds one untimed small panel (imports, plotly's bundle: the kernel's first panel
sends it once), then builds the panel ``--repeats`` times inside a running event loop, as
ipykernel runs a cell, each time with the trace's caches dropped:

- ``panel on screen``: ``show_placement(trace)`` until it returns (above 20,000 ops the panel
  finds its findings on the loop after the cell: they are not in it), wall and CPU (the
  process's: the findings' thread is not started but with ``--findings``, in the first build);
- ``display's bundle``: then the panel's ``_repr_mimebundle_`` (the widget view and the static
  snapshot), which IPython's ``display`` makes at the end of the cell, wall and CPU;
- the parts of that time, each method of the panel timed where it is called: the table state
  (``TableState.show``: the lower-cased names, each event's row), the device chips, the
  timeline (``Timeline``: the figure and its widget state), the header, the memory peaks, the
  type filter and the first filter (``_apply_filters``: sort order, the first page);
- ``findings shown`` (``--findings``, first build only): until the panel shows them;
- RSS: the kernel's resident set before the cell (after ``malloc_trim``: the memory that
  reading the trace freed does not hide the cell's), its peak during the cell (``VmHWM`` reset by
  ``/proc/self/clear_refs``) and what stays after it;
- one keystroke each (first build, median of 3), text, globs and regexes (``KEYSTROKES``),
  timed until the search box's setter returns (the table's rows and the outlines are set),
  with a hash of what it shows (status text, the table's page and count, the outlined ops):
  equal between versions when the answers are;
- bytes: every comm message the panel's widgets would send (comm_open is the full state),
  recorded by ``benchmarks.measure.recording_comms``, and the largest widgets' states.

``--profile N``: the N costliest functions (cumulative) of one more build, under cProfile.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.scale import QUERIES, REPO, _env, trace_file

# scale.py's queries, then a broad text (a third of the rows) and regexes without a text to
# look for first, anchored (issue 35: each keystroke under 100 ms at 1M ops)
KEYSTROKES = (*QUERIES, ("7", False), (r"\d{3}$", True), (r"^c[0-3]/", True))

_CHILD = r"""
import asyncio, cProfile, ctypes, gc, hashlib, io, json, pickle, pstats, sys, time
import tensorflow  # noqa: F401  (a kernel that traced has it)
path, repeats, findings, profile = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4])

def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024

def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")

with open(path, "rb") as f:
    trace = pickle.load(f)
import tfplace_widget
from ipywidgets.widgets.widget import Widget, _instances, _remove_buffers
from tfplace_widget._widgets import panel as P
from tfplace_widget._widgets.memory import MemoryPeaks
from tfplace_widget._widgets.panel_state import TableState
from tfplace_widget._widgets.timeline import Timeline
from benchmarks.measure import message_bytes, recording_comms
from benchmarks.__main__ import close_widgets, trace_subset

QUERIES = $QUERIES
parts = {}
def timed(owner, name, label):
    original = getattr(owner, name)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            parts[label] = parts.get(label, 0.0) + time.perf_counter() - start
    setattr(owner, name, wrapper)

timed(TableState, "show", "table state (TableState.show)")
timed(P.PlacementPanel, "_render_chips", "device chips")
timed(P.PlacementPanel, "_draw_timeline", "timeline (figure + widget state)")
timed(P.PlacementPanel, "_render_header", "header")
timed(P.PlacementPanel, "_render_findings", "findings (deferred: scheduling)")
timed(MemoryPeaks, "show", "memory peaks")
timed(P.PlacementPanel, "_apply_filters", "first filter + table page")
timed(P.PlacementPanel, "_set_controls_from_options", "controls")

kept = set(vars(trace))
def drop_caches():
    for key in set(vars(trace)) - kept:
        del vars(trace)[key]

def widget_sizes(panel):
    sizes = {}
    for widget in list(_instances.values()):
        state, buffer_paths, buffers = _remove_buffers(widget.get_state())
        name = type(widget).__name__
        sizes[name] = sizes.get(name, 0) + message_bytes(state, buffers)
    return dict(sorted(sizes.items(), key=lambda kv: -kv[1])[:6])

find_beside = P.PlacementPanel._find_beside
def cell(with_findings):
    # without the findings, their thread is not started: it would share the interpreter
    # with the next builds and keystrokes (tens of seconds of CPU at a million ops)
    P.PlacementPanel._find_beside = find_beside if with_findings else lambda *args: None
    async def run():
        gc.collect()
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed memory back to the OS: RSS counts use
        before = status("VmRSS")
        reset_peak()
        start, cpu = time.perf_counter(), time.process_time()
        panel = P.show_placement(trace)
        shown, cpu = time.perf_counter() - start, time.process_time() - cpu
        peak, after = status("VmHWM"), status("VmRSS")
        result = {"panel on screen": shown, "panel on screen (CPU)": cpu, "rss before": before,
                  "rss peak growth": peak - before, "rss growth kept": after - before}
        start, cpu = time.perf_counter(), time.process_time()
        panel._repr_mimebundle_()  # what IPython's display asks for at the end of the cell
        result["display's bundle"] = time.perf_counter() - start
        result["display's bundle (CPU)"] = time.process_time() - cpu
        if with_findings:
            while panel._findings_frame is None and not panel._findings_error:
                await asyncio.sleep(0)
            result["findings shown"] = time.perf_counter() - start
            result["rss peak growth, findings shown"] = status("VmHWM") - before
        else:
            panel._findings_later = lambda _trace: None  # not this build's
        return result, panel
    return asyncio.run(run())

out = {"ops": len(trace.ops), "events": len(trace.events), "package": tfplace_widget.__file__,
       "builds": []}
with recording_comms() as comms:
    P.show_placement(trace_subset(trace))  # imports, plotly's bundle: the kernel's first panel
    for attempt in range(repeats):
        close_widgets(keep_bundle=True)
        drop_caches()
        gc.collect()
        comms.opened = comms.open_bytes = comms.code_bytes = 0
        comms.reset_messages()
        parts.clear()
        result, panel = cell(findings and attempt == 0)
        result["parts"] = dict(parts)
        result["state bytes"] = comms.open_bytes + comms.message_bytes - comms.code_bytes
        result["code bytes"] = comms.code_bytes
        result["widgets"] = comms.opened
        if attempt == 0:
            result["largest widget states"] = widget_sizes(panel)
            for text, regex in QUERIES:  # one keystroke each, as the panel filters it
                times = []
                for _ in range(3):
                    panel.search.value = ""
                    panel.regex.value = regex
                    start = time.perf_counter()
                    panel.search.value = text
                    times.append(time.perf_counter() - start)
                result[f"keystroke {text}"] = sorted(times)[1]
                result[f"rows kept {text}"] = len(panel.visible_ops)
                shown = [panel.status.value, panel.table.rows, panel.table.total,
                         sorted(panel._timeline.highlighted_ops())]
                result[f"answer {text}"] = hashlib.sha1(json.dumps(shown).encode()).hexdigest()[:12]
            panel.search.value, panel.regex.value = "", False
        out["builds"].append(result)
        print(json.dumps({k: v for k, v in result.items() if k != "parts"}), file=sys.stderr,
              flush=True)
        del panel
    if profile:
        close_widgets(keep_bundle=True)
        drop_caches()
        gc.collect()
        profiler = cProfile.Profile()
        profiler.enable()
        cell(False)
        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(profile)
        out["profile"] = text.getvalue()
print(json.dumps(out))
"""


def run_child(tree: Path, trace: Path, repeats: int, findings: bool, profile: int) -> dict:
    """One version's builds of the panel of ``trace``, in a process of its own."""
    code = _CHILD.replace("$QUERIES", repr(KEYSTROKES))
    args = [sys.executable, "-P", "-c", code, str(trace), str(repeats), str(int(findings))]
    args.append(str(profile))
    done = subprocess.run(args, env=_env(tree), cwd=REPO, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"panel build failed in {tree}:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(result["package"]).is_relative_to(tree):
        raise RuntimeError(f"ran the package in {result['package']}, not the one in {tree}")
    return result


def _median(builds: list[dict], key: str) -> float:
    return statistics.median(b[key] for b in builds if key in b)


def summary(version: str, n_ops: int, result: dict) -> list[str]:
    """Markdown rows: the build, its parts, RSS and bytes, medians over the builds."""
    builds = result["builds"]
    rows = [
        f"| {version} | {n_ops:,} | panel on screen | {_median(builds, 'panel on screen'):.2f} s |"
    ]
    for key in ("panel on screen (CPU)", "display's bundle", "display's bundle (CPU)"):
        if key in builds[0]:
            rows.append(f"| {version} | {n_ops:,} | {key} | {_median(builds, key):.2f} s |")
    for part in builds[0]["parts"]:
        value = statistics.median(b["parts"].get(part, 0.0) for b in builds)
        rows.append(f"| {version} | {n_ops:,} | {part} | {value:.2f} s |")
    if "findings shown" in builds[0]:
        rows.append(
            f"| {version} | {n_ops:,} | findings shown (n=1) | {builds[0]['findings shown']:.1f} s |"
        )
    mb = 1 << 20
    rows.append(
        f"| {version} | {n_ops:,} | RSS peak growth | {_median(builds, 'rss peak growth') / mb:,.0f} MB |"
    )
    rows.append(
        f"| {version} | {n_ops:,} | RSS growth kept | {_median(builds, 'rss growth kept') / mb:,.0f} MB |"
    )
    rows.append(
        f"| {version} | {n_ops:,} | state sent (no code) | {_median(builds, 'state bytes') / mb:.2f} MB |"
    )
    for key in builds[0]:
        if key.startswith("keystroke"):
            kept = builds[0][key.replace("keystroke", "rows kept")]
            answer = builds[0].get(key.replace("keystroke", "answer"), "")
            rows.append(
                f"| {version} | {n_ops:,} | {key} (median of 3, {kept:,} rows kept, "
                f"answer {answer}) | {builds[0][key] * 1000:.0f} ms |"
            )
    largest = ", ".join(
        f"{k} {v / 1024:,.0f} KB" for k, v in builds[0]["largest widget states"].items()
    )
    rows.append(f"| {version} | {n_ops:,} | largest widget states | {largest} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/tfplace_scale"))
    parser.add_argument("--sizes", default="100000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="a baseline package's folder")
    parser.add_argument(
        "--versions", default="this,baseline", help="which of them (comma-separated)"
    )
    parser.add_argument("--findings", action="store_true", help="also wait for the findings")
    parser.add_argument("--profile", type=int, default=0, help="cProfile's N costliest functions")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    versions = {"this": REPO} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    versions = {k: v for k, v in versions.items() if k in args.versions.split(",")}
    lines = ["| version | ops | part | median |", "| --- | ---: | --- | ---: |"]
    for n_ops in (int(s) for s in args.sizes.split(",")):
        trace = trace_file(n_ops, args.cache)
        for version, tree in versions.items():
            result = run_child(tree, trace, args.repeats, args.findings, args.profile)
            if result.get("profile"):
                print(result.pop("profile"), file=sys.stderr)
            print(json.dumps({"version": version, "size": n_ops, **result}), flush=True)
            lines += summary(version, n_ops, result)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.exit(main())
