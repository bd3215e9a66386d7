"""``python -m benchmarks [--quick]``: measure tfplace_widget against TensorFlow's own tools.

Full run (about 4 minutes on 2 cores): generated graphs of 1k, 10k and 100k ops on four CPU
devices plus the largest real GPU trace, and a TF2 function-mode trace of a 2,000-op tf.function
(``benchmarks/function_mode.py``, in a process of its own); writes ``benchmarks/RESULTS.md``.
``--quick``: 1k and 10k only, few repeats, prints the tables and writes nothing unless
``--write`` is given.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from . import floor, function_mode, graphs
from .measure import (
    Timing,
    fmt_bytes,
    fmt_ms,
    interleaved,
    python_peak,
    recording_comms,
    rss_peak,
    time_once,
)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
GPU_TRACE = Path(
    os.environ.get(
        "TFPLACE_GPU_TRACE",
        HERE.parent / "tfplace_widget/examples/gpu_traces/kittibox/timeline_01.json",
    )
)
DEVICES = 4
OVERHEAD_SIZE = 10_000
TARGETS = {
    "ratio": 10.0,  # PlacementTrace at least 10x faster than timeline.py (10k, 100k)
    "overhead": 0.20,  # trace_placement overhead under 20% (10k)
    "panel_build": 1.0,  # s, 100k
    "keystroke": 0.050,  # s, 100k
    "state_bytes": 5 * 1024 * 1024,  # 100k
}
BEGIN, END = "<!-- generated:begin -->", "<!-- generated:end -->"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Stage 1: RunMetadata -> PlacementTrace vs timeline.py
# ---------------------------------------------------------------------------------------------
def bench_convert(n_ops: int, repeats: int, memory: bool) -> tuple[dict, Any]:
    from tensorflow.python.client import timeline

    from tfplace_widget import PlacementTrace

    log(f"{n_ops:,} ops: generating and tracing the graph")
    graph_def = graphs.make_graph_def(n_ops, devices=DEVICES)
    run = graphs.bare_traced_run(graph_def, graphs.session_config(DEVICES))
    metadata, graph = run.run_metadata, run.graph

    def ours() -> Any:
        return PlacementTrace.from_run_metadata(metadata, graph)

    def theirs() -> str:
        return timeline.Timeline(metadata.step_stats, graph).generate_chrome_trace_format()

    trace = ours()  # warm caches (kernel registry, imports) before timing
    raw = floor.serialized(metadata, graph)
    log(f"{n_ops:,} ops: timing timeline.py vs PlacementTrace, {repeats} repeats each")
    timings = interleaved(
        {
            "timeline": theirs,
            "ours": ours,
            "read_floor": lambda: floor.read_fields_only(metadata, graph),
            "bytes_floor": lambda: floor.serialize_only(metadata, graph),
            "parse_floor": lambda: floor.parse_only(raw),
        },
        repeats,
    )
    result: dict[str, Any] = {
        "n_ops": n_ops,
        "ops_built": len(graph_def.node),
        "executed_nodes": sum(len(g.node) for g in metadata.partition_graphs),
        "step_stats_records": sum(len(d.node_stats) for d in metadata.step_stats.dev_stats),
        "ops_rows": len(trace.ops),
        "events": len(trace.events),
        "transfers": len(trace.transfers),
        "how": {k: int(v) for k, v in trace.ops["how"].value_counts().items() if v},
        "timeline_s": timings["timeline"].seconds,
        "ours_s": timings["ours"].seconds,
        "timeline_cpu": timings["timeline"].cpu,
        "ours_cpu": timings["ours"].cpu,
        "read_floor_s": timings["read_floor"].seconds,
        "bytes_floor_s": timings["bytes_floor"].seconds,
        "parse_floor_s": timings["parse_floor"].seconds,
        "serialized_bytes": len(raw[0]) + len(raw[1]),
        "session_run_s": run.seconds,
    }
    if memory:
        log(f"{n_ops:,} ops: peak memory (tracemalloc, one run each)")
        result["timeline_peak"], _ = python_peak(theirs)
        result["ours_peak"], _ = python_peak(ours)
    result["rss_after"] = rss_peak()
    return result, trace


# ---------------------------------------------------------------------------------------------
# Stage 2: trace_placement overhead beyond TensorFlow's traced session.run
# ---------------------------------------------------------------------------------------------
_PHASES = {
    "build": "build (graph builder)",  # tracer.build, from builder.py
    "_run": "TF: session, init, warm-up, traced run",
    "facts_from_graph": "tool: graph facts",
    "build_trace": "tool: frames + reasons",
}


def bench_overhead(n_ops: int, repeats: int, memory: bool) -> dict:
    from tfplace_widget import trace_placement, tracer

    log(f"overhead at {n_ops:,} ops: trace_placement vs bare TF, {repeats} repeats each")
    graph_def = graphs.make_graph_def(n_ops, devices=DEVICES)
    config = graphs.session_config(DEVICES)
    build = graphs.builder(graph_def)
    phases: dict[str, list[float]] = {key: [] for key in _PHASES}
    bare_phases: dict[str, list[float]] = {}
    # Every phase must exist: a renamed function would silently move its time into "rest".
    originals = {key: getattr(tracer, key) for key in _PHASES}

    def timed(key: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                phases[key].append(time.perf_counter() - start)

        return wrapper

    def tool() -> Any:
        return trace_placement(build, device_count={"CPU": DEVICES})

    def bare() -> Any:
        run = graphs.bare_traced_run(graph_def, config)
        for key, value in run.seconds.items():
            bare_phases.setdefault(key, []).append(value)
        return run

    tool()  # warm-up both paths once (imports, kernel registry)
    bare()
    bare_phases.clear()
    for key, fn in originals.items():
        setattr(tracer, key, timed(key, fn))
    try:
        for values in phases.values():
            values.clear()
        timings = interleaved({"trace_placement": tool, "bare": bare}, repeats)
    finally:
        for key, fn in originals.items():
            setattr(tracer, key, fn)
    result = {
        "n_ops": n_ops,
        "tool_s": timings["trace_placement"].seconds,
        "bare_s": timings["bare"].seconds,
        "tool_cpu": timings["trace_placement"].cpu,
        "bare_cpu": timings["bare"].cpu,
        "tool_phases_s": {key: list(values) for key, values in phases.items() if values},
        "bare_phases_s": {key: list(values) for key, values in bare_phases.items()},
    }
    if memory:
        log(f"overhead at {n_ops:,} ops: peak memory (tracemalloc, one run each)")
        result["tool_peak"], _ = python_peak(tool)
        result["bare_peak"], _ = python_peak(bare)
    result["rss_after"] = rss_peak()
    return result


# ---------------------------------------------------------------------------------------------
# Stage 3: the panel
# ---------------------------------------------------------------------------------------------
_PANEL_WARM: list[bool] = []


def trace_subset(trace: Any) -> Any:
    """A small trace with the same columns, to warm the panel's imports up."""
    import dataclasses

    return dataclasses.replace(
        trace, ops=trace.ops.head(100), events=trace.events.head(100), inputs={}
    )


def close_widgets(keep_bundle: bool) -> None:
    """Close every widget; with ``keep_bundle``, all but the kernel's plotly-bundle holder.

    Closing everything makes the next panel the first of a process again (it re-sends plotly's
    bundle); keeping the holder makes it a later panel, as in a notebook with several panels.
    """
    from ipywidgets.widgets.widget import _instances

    keep: set[int] = set()
    if keep_bundle:
        from tfplace_widget._widgets.bundle_holder import holder

        keep = {id(holder()), id(holder().layout)}
    for widget in list(_instances.values()):
        if id(widget) not in keep:
            widget.close()


def _show_as_in_a_kernel(show_placement: Any, trace: Any) -> tuple[float, float, Any]:
    """``show_placement(trace)`` called inside a running event loop, as ipykernel runs a cell:
    seconds until it returns (the panel is on screen), and until its findings are shown (for
    a large trace the panel finds them on the loop right after the cell)."""
    import asyncio

    async def cell() -> tuple[float, float, Any]:
        gc.collect()
        start = time.perf_counter()
        panel = show_placement(trace)
        shown = time.perf_counter() - start
        while panel._findings_frame is None and not panel._findings_error:
            await asyncio.sleep(0)
        return shown, time.perf_counter() - start, panel

    return asyncio.run(cell())


def bench_panel(name: str, trace: Any, query: str, builds: int, memory: bool) -> dict | None:
    """Build the panel ``builds`` times: build 0 is the first panel of a process (it sends
    plotly's widget bundle), the others are later panels (the bundle is in the browser)."""
    try:
        from tfplace_widget._widgets.panel import show_placement
    except ImportError as exc:
        print(
            f"NOTE: panel benchmarks skipped: tfplace_widget._widgets.panel is not importable ({exc})."
        )
        return None
    from tfplace_widget._widgets import bundle_holder

    log(f"panel on {name}: {builds} builds, typing {query!r}")
    result: dict[str, Any] = {"name": name, "ops": len(trace.ops), "events": len(trace.events)}
    build_s, findings_s, state_bytes, code_bytes, widgets_opened = [], [], [], [], []
    keystrokes: list[dict] = []
    lowered = trace.ops["op"].str.lower()
    with recording_comms() as comms:
        if not _PANEL_WARM:  # the first panel of the process imports plotly & co: not timed
            if bundle_holder.bundle.cache_info().currsize == 0:
                # Once per process, in the first timeline's build: read, hash, gzip plotly.js.
                result["bundle_s"], code = time_once(bundle_holder.bundle)
                result["bundle_bytes"] = (code.size, len(code.gzipped))
            show_placement(trace if len(trace.ops) < 20_000 else trace_subset(trace))
            _PANEL_WARM.append(True)
        for attempt in range(builds):
            close_widgets(keep_bundle=attempt > 0)
            gc.collect()
            comms.opened = comms.open_bytes = comms.code_bytes = 0
            comms.reset_messages()
            trace.__dict__.pop("_findings_cache", None)  # every build finds them again
            seconds, findings_seconds, panel = _show_as_in_a_kernel(show_placement, trace)
            build_s.append(seconds)
            findings_s.append(findings_seconds)
            state_bytes.append(comms.open_bytes + comms.message_bytes)
            code_bytes.append(comms.code_bytes)
            widgets_opened.append(comms.opened)
            if attempt:
                continue
            # One user typing the query, one character per keystroke, then clearing it.
            typed = [query[: i + 1] for i in range(len(query))] + [""]
            for text in typed:
                comms.reset_messages()
                seconds, _ = time_once(
                    lambda text=text, panel=panel: setattr(panel.search, "value", text)
                )
                expected = int(lowered.str.contains(text, regex=False).sum()) if text else None
                shown = len(panel.visible_ops)
                keystrokes.append(
                    {
                        "text": text,
                        "s": seconds,
                        "visible": shown,
                        "ok": expected is None or shown == expected,
                        "messages": comms.messages,
                        "bytes": comms.message_bytes,
                    }
                )
        if memory:
            close_widgets(keep_bundle=True)
            result["build_peak"], _ = python_peak(lambda: show_placement(trace))
        close_widgets(keep_bundle=True)
    result.update(
        build_s=build_s,
        findings_s=findings_s,
        state_bytes=state_bytes[0],  # the first panel of a process: plotly's bundle included
        code_bytes=code_bytes[0],
        later_state_bytes=state_bytes[1] if len(state_bytes) > 1 else None,
        later_code_bytes=code_bytes[1] if len(code_bytes) > 1 else None,
        widgets=widgets_opened[0],
        keystrokes=keystrokes,
        rss_after=rss_peak(),
    )
    return result


# ---------------------------------------------------------------------------------------------
# Stage 4: the real GPU trace (Chrome JSON: no RunMetadata, so no timeline.py to compare with)
# ---------------------------------------------------------------------------------------------
def bench_chrome(path: Path, repeats: int, memory: bool) -> tuple[dict | None, Any]:
    from tfplace_widget import PlacementTrace

    if not path.exists():
        print(f"NOTE: GPU trace benchmark skipped: {path} not found.")
        return None, None
    log(f"GPU trace {path.name}: {repeats} repeats")

    def ours() -> Any:
        return PlacementTrace.from_chrome_trace(path)

    def parse_only() -> Any:
        with open(path, "rb") as handle:
            return json.load(handle)

    trace = ours()
    timings = interleaved({"json.load": parse_only, "ours": ours}, repeats)
    result: dict[str, Any] = {
        "path": str(path),
        "file_bytes": path.stat().st_size,
        "ops_rows": len(trace.ops),
        "events": len(trace.events),
        "transfers": len(trace.transfers),
        "json_s": timings["json.load"].seconds,
        "ours_s": timings["ours"].seconds,
        "ours_cpu": timings["ours"].cpu,
    }
    if memory:
        result["ours_peak"], _ = python_peak(ours)
    result["rss_after"] = rss_peak()
    return result, trace


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------
def machine_info() -> dict[str, str]:
    import numpy
    import pandas

    cpu = "unknown"
    try:
        text = Path("/proc/cpuinfo").read_text()
        found = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
        cpu = found.group(1).strip() if found else cpu
    except OSError:
        pass
    ram = "unknown"
    try:
        found = re.search(r"^MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
        ram = f"{int(found.group(1)) / 1024**2:.1f} GiB" if found else ram
    except OSError:
        pass
    with graphs.quiet_fds():
        import tensorflow as tf
    try:
        from google.protobuf.internal import api_implementation

        protobuf = api_implementation.Type()
    except Exception:
        protobuf = "?"
    return {
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "ram": ram,
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "pandas": pandas.__version__,
        "numpy": numpy.__version__,
        "protobuf backend": protobuf,
        "platform": platform.platform(),
        "load average at start": _loadavg(),
    }


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def _t(values: list[float]) -> Timing:
    return Timing(list(values))


def _mark(ok: bool) -> str:
    return "met" if ok else "**missed**"


def render(results: dict) -> str:
    lines: list[str] = []
    add = lines.append
    machine = results["machine"]
    add(f"Measured {machine['date']} with `{results['command']}`.")
    add("")
    add("| machine | |")
    add("|---|---|")
    for key, value in machine.items():
        if key != "date":
            add(f"| {key} | {value} |")
    add("")
    add(
        "Times are median [min–max] over n repeats, in one process, wall clock. The machine is "
        "shared (see the load averages), so the conversion table also gives this process's CPU "
        "time for the same runs: for single-threaded Python it is the wall time the code would "
        "take on an idle core."
    )
    add("")

    add("### 1. RunMetadata -> PlacementTrace, next to timeline.py on the same RunMetadata")
    add("")
    add(
        "`PlacementTrace.from_run_metadata(run_metadata, graph)` (ops, events, transfers, "
        "how/reason) vs `timeline.Timeline(step_stats, graph).generate_chrome_trace_format()`. "
        "Graphs: chains of scalar ops over 4 CPU devices (`benchmarks/graphs.py`), traced "
        "with FULL_TRACE + partition graphs."
    )
    add("")
    add(
        "| graph | built ops | executed nodes | step_stats records | transfers "
        "| timeline.py | PlacementTrace | ratio | CPU time: timeline.py / PlacementTrace (ratio) "
        "| target >= 10x |"
    )
    add("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results["convert"]:
        theirs, ours = _t(r["timeline_s"]), _t(r["ours_s"])
        ratio = theirs.median / ours.median
        cpu_theirs = statistics.median(r["timeline_cpu"])
        cpu_ours = statistics.median(r["ours_cpu"])
        cpu = f"{fmt_ms(cpu_theirs)} / {fmt_ms(cpu_ours)} ({cpu_theirs / cpu_ours:.1f}x)"
        target = _mark(ratio >= TARGETS["ratio"]) if r["n_ops"] >= 10_000 else "(not set)"
        add(
            f"| {r['n_ops']:,} ops | {r['ops_built']:,} | {r['executed_nodes']:,} "
            f"| {r['step_stats_records']:,} | {r['transfers']:,} | {theirs.ms()} | {ours.ms()} "
            f"| **{ratio:.1f}x** | {cpu} | {target} |"
        )
    gpu = results.get("chrome")
    if gpu:
        parse, ours = _t(gpu["json_s"]), _t(gpu["ours_s"])
        add("")
        add(
            f"Real GPU trace `{Path(gpu['path']).parent.name}/{Path(gpu['path']).name}` "
            f"({fmt_bytes(gpu['file_bytes'])}, {gpu['events']:,} events after de-duplicating "
            f"stream lanes, {gpu['ops_rows']:,} ops): `PlacementTrace.from_chrome_trace` "
            f"{ours.ms()}; `json.load` of the same file alone {parse.ms()} "
            f"({ours.median / parse.median:.1f}x the bare JSON parse). It is a Chrome trace, not "
            "a RunMetadata, so there is no timeline.py run to compare with."
        )
    add("")
    _render_floor(results["convert"], add)

    over = results.get("overhead")
    if over:
        tool, bare = _t(over["tool_s"]), _t(over["bare_s"])
        overhead = tool.median / bare.median - 1
        add(f"### 2. trace_placement overhead at {over['n_ops']:,} ops")
        add("")
        add(
            "`trace_placement(build, device_count={'CPU': 4})` vs the same work without the tool: "
            "import the same GraphDef, `Session` with the same ConfigProto "
            "(log_device_placement, Grappler off, 4 CPUs), initialisers, one warm-up run, one "
            "FULL_TRACE run with partition graphs, close (`graphs.bare_traced_run`)."
        )
        add("")
        add("| | median [min–max] |")
        add("|---|---:|")
        add(f"| bare TensorFlow | {bare.ms()} |")
        add(f"| trace_placement | {tool.ms()} |")
        add(
            f"| **overhead** (trace_placement / bare - 1) | **{overhead:+.1%}** "
            f"(target < 20%: {_mark(overhead < TARGETS['overhead'])}) |"
        )
        add("")
        phases = over.get("tool_phases_s", {})
        if phases:
            add("Where trace_placement's time goes (medians of the same repeats):")
            add("")
            add("| phase | median |")
            add("|---|---:|")
            for key, label in _PHASES.items():
                if key in phases:
                    add(f"| {label} | {fmt_ms(statistics.median(phases[key]))} |")
            # Per repeat: the call's wall time minus its timed phases (medians do not add up).
            rests = [
                total - sum(phases[key][i] for key in _PHASES if key in phases)
                for i, total in enumerate(over["tool_s"])
                if all(len(phases[key]) > i for key in _PHASES if key in phases)
            ]
            rest = statistics.median(rests) if rests else 0.0
            add(f"| rest (output capture, config, checks) | {fmt_ms(rest)} |")
            tool_only = sum(
                statistics.median(phases[k])
                for k in ("facts_from_graph", "build_trace")
                if k in phases
            )
            tool_only += max(0.0, rest)
            bare_phases = over.get("bare_phases_s", {})
            traced = statistics.median(bare_phases.get("traced run", [float("nan")]))
            add("")
            add(
                f"The tool's own work (graph facts + frames + reasons + the rest) is "
                f"{fmt_ms(tool_only)}: {tool_only / tool.median:.1%} of trace_placement's wall "
                f"time. Measured against the single traced `session.run` call alone it is "
                f"{tool_only / traced:.0%} of it "
                f"({fmt_ms(traced)} in the bare run; its warm-up run "
                f"{fmt_ms(statistics.median(bare_phases.get('warm-up run', [float('nan')])))}, "
                f"build {fmt_ms(statistics.median(bare_phases.get('build', [float('nan')])))})."
            )
            add("")

    panels = results.get("panel")
    add("### 3. The panel: build, one search keystroke, widget state sent to the browser")
    add("")
    if panels is None:
        add("Skipped: `tfplace_widget._widgets.panel` did not exist or failed to import.")
    else:
        add(
            "`show_placement(trace)` on an already computed trace; keystrokes set "
            "`panel.search.value` one character at a time (then clear it), each timed until the "
            "setter returns (observers are synchronous: `visible_ops`, the table page and the "
            "figure are updated by then; `visible_ops` is checked against a pandas substring "
            "filter). Bytes: every comm message ipywidgets would send to the browser, recorded "
            "by replacing `comm.create_comm` (comm_open = full widget state; JSON + binary "
            "buffers). Build 0 is the first panel of a process: every widget closed before it, "
            "so it also opens the kernel's `PlotlyBundle`, which carries plotly.js; "
            "the later builds keep that one widget open, as a notebook with several panels does. "
            "Build times are over all builds, each called inside a running event loop as "
            "ipykernel runs a cell: 'build' until `show_placement` returns (the panel is on "
            "screen), 'findings shown' until its findings are (above 20,000 ops the panel finds "
            "them on the loop right after the cell)."
        )
        add("")
        add(
            "| trace | ops | build (panel on screen) | findings shown | keystroke median "
            "| keystroke worst | state sent, first panel "
            "(of which widget JS/CSS code) | state sent, a later panel (code) | widgets "
            "| bytes per keystroke (max) |"
        )
        add("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for p in panels:
            keys = [k["s"] for k in p["keystrokes"]]
            worst = max(p["keystrokes"], key=lambda k: k["s"])
            ok = all(k["ok"] for k in p["keystrokes"])
            is_big = p["ops"] >= 100_000
            marks = ""
            if is_big:
                marks = (
                    f" (build {_mark(statistics.median(p['build_s']) < TARGETS['panel_build'])}, "
                    f"keystroke {_mark(max(keys) < TARGETS['keystroke'])}, "
                    f"state {_mark(p['state_bytes'] < TARGETS['state_bytes'])})"
                )
            later = "n/a"
            if p.get("later_state_bytes") is not None:
                later = (
                    f"{fmt_bytes(p['later_state_bytes'])} "
                    f"({fmt_bytes(p.get('later_code_bytes') or 0)})"
                )
            add(
                f"| {p['name']}{marks} | {p['ops']:,} | {_t(p['build_s']).ms()} "
                f"| {_t(p['findings_s']).ms()} "
                f"| {fmt_ms(statistics.median(keys))} "
                f"| {fmt_ms(worst['s'])} ({worst['text']!r}) | {fmt_bytes(p['state_bytes'])} "
                f"({fmt_bytes(p.get('code_bytes', 0))}) | {later} "
                f"| {p['widgets']} "
                f"| {fmt_bytes(max(k['bytes'] for k in p['keystrokes']))} |"
                + ("" if ok else " visible_ops MISMATCH")
            )
        add("")
        add(
            "Targets at 100k ops: build < 1 s, keystroke < 50 ms, state < 5 MB (checked on the "
            "first panel of a process, the larger of the two)."
        )
        code = max((p.get("code_bytes", 0) for p in panels), default=0)
        if code:
            later_code = max((p.get("later_code_bytes") or 0 for p in panels), default=0)
            add("")
            text = (
                f"The JS/CSS code in the first panel's state ({fmt_bytes(code)}) is the same for "
                "every trace: almost all of it is plotly.js (`plotly.min.js`, which the timeline "
                "draws with), gzip-compressed in the binary buffer of the one `PlotlyBundle` "
                "widget a kernel opens (`tfplace_widget/bundle_holder.py`)."
                f" A later panel sends {fmt_bytes(later_code)} of code: the timeline's module, "
                "which waits in the browser for plotly.js, and the op table's module."
            )
            sizes = next((p["bundle_bytes"] for p in panels if "bundle_bytes" in p), None)
            seconds = next((p["bundle_s"] for p in panels if "bundle_s" in p), None)
            if sizes and seconds is not None:
                text += (
                    f" The bundle is {fmt_bytes(sizes[0])} uncompressed, {fmt_bytes(sizes[1])} "
                    f"gzipped; reading, hashing and compressing it took {fmt_ms(seconds)}, once "
                    "per process, in the first panel's build (the untimed warm-up here)."
                )
            add(
                text
                + " The trace-dependent part of the state is the rest: "
                + ", ".join(
                    f"{p['name']} {fmt_bytes(p['state_bytes'] - p.get('code_bytes', 0))}"
                    for p in panels
                )
                + "."
            )
    add("")

    add("### 4. Peak memory")
    add("")
    add(
        "Python-level peak (tracemalloc, numpy/pandas included; one separate run per stage, "
        "since tracemalloc slows code down) and the process RSS high-water mark after the "
        "stage (`getrusage`; cumulative over the process, includes TensorFlow's runtime and "
        "protobuf arenas)."
    )
    add("")
    add("| stage | tracemalloc peak | RSS high-water after |")
    add("|---|---:|---:|")
    for r in results["convert"]:
        if "timeline_peak" in r:
            add(f"| timeline.py, {r['n_ops']:,} ops | {fmt_bytes(r['timeline_peak'])} | |")
            add(
                f"| PlacementTrace.from_run_metadata, {r['n_ops']:,} ops "
                f"| {fmt_bytes(r['ours_peak'])} | {fmt_bytes(r['rss_after'])} |"
            )
    if over and "tool_peak" in over:
        add(f"| bare TF traced run, {over['n_ops']:,} ops | {fmt_bytes(over['bare_peak'])} | |")
        add(
            f"| trace_placement, {over['n_ops']:,} ops | {fmt_bytes(over['tool_peak'])} "
            f"| {fmt_bytes(over['rss_after'])} |"
        )
    if gpu and "ours_peak" in gpu:
        add(
            f"| from_chrome_trace, {Path(gpu['path']).name} | {fmt_bytes(gpu['ours_peak'])} "
            f"| {fmt_bytes(gpu['rss_after'])} |"
        )
    for p in panels or ():
        if "build_peak" in p:
            add(
                f"| show_placement, {p['name']} | {fmt_bytes(p['build_peak'])} "
                f"| {fmt_bytes(p['rss_after'])} |"
            )
    add("")
    function = results.get("function_mode")
    if function:
        add(function_mode.render(function, heading="### 5."))
    elif "function_mode" in results:
        add("### 5. TF2 function mode")
        add("")
        add("Failed: see the log (`python -m benchmarks.function_mode` runs it alone).")
        add("")
    add(f"Whole benchmark run: {results['wall_s']:.0f} s.")
    return "\n".join(lines)


def _render_floor(converts: list[dict], add: Any) -> None:
    """The least any conversion from a RunMetadata object must spend (benchmarks/floor.py)."""
    rows = [r for r in converts if r.get("read_floor_s") and r.get("bytes_floor_s")]
    if not rows:
        return
    add("#### The floor: the least any conversion from a RunMetadata object must spend")
    add("")
    add(
        "With the upb protobuf runtime a RunMetadata object can only be read field by field "
        "from Python, or serialized back to bytes for a reader outside Python (a compiled one, "
        "or `tf.io.decode_proto`), which must then parse them. Timed on the same protos, doing "
        "nothing with what they read (`benchmarks/floor.py`), next to timeline.py. The last "
        "column is timeline.py's time over the cheaper of reading in Python and serializing "
        "alone: the ratio a conversion that did no other work at all would reach."
    )
    add("")
    add(
        "| graph | timeline.py | 10x budget | read the needed fields in Python "
        "| serialize RunMetadata + graph to bytes | parse those bytes (upb, compiled) "
        "| best ratio any conversion could reach |"
    )
    add("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        theirs = _t(r["timeline_s"])
        read, raw = _t(r["read_floor_s"]), _t(r["bytes_floor_s"])
        parse = _t(r.get("parse_floor_s", []))
        best = min(read.median, raw.median)
        add(
            f"| {r['n_ops']:,} ops | {fmt_ms(theirs.median)} "
            f"| {fmt_ms(theirs.median / TARGETS['ratio'])} | {read.ms()} "
            f"| {raw.ms()} ({fmt_bytes(r['serialized_bytes'])}) | {parse.ms()} "
            f"| {theirs.median / best:.1f}x |"
        )
    add("")


def write_results(path: Path, body: str) -> None:
    block = f"{BEGIN}\n{body}\n{END}"
    if path.exists():
        text = path.read_text()
        if BEGIN in text and END in text:
            head, rest = text.split(BEGIN, 1)
            _, tail = rest.split(END, 1)
            path.write_text(head + block + tail)
            return
    header = (
        "# Benchmarks\n\n"
        "Regenerate with `python -m benchmarks` (full, about 4 minutes on 2 cores) or check "
        "quickly with `python -m benchmarks --quick` (1k/10k ops; prints only).\n\n"
        "## Latest results\n\n"
    )
    path.write_text(header + block + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1k and 10k ops, few repeats")
    parser.add_argument(
        "--write",
        action="store_true",
        help="write benchmarks/RESULTS.md (default for the full run, off for --quick)",
    )
    parser.add_argument("--no-write", action="store_true", help="do not write RESULTS.md")
    parser.add_argument("--output", type=Path, default=RESULTS, help="results markdown file")
    parser.add_argument("--json", type=Path, help="also save the raw numbers as JSON here")
    parser.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        help="comma-separated op counts (default 1000,10000,100000; quick 1000,10000)",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc runs")
    parser.add_argument(
        "--no-function-mode",
        action="store_true",
        help="skip the TF2 function-mode trace (benchmarks/function_mode.py)",
    )
    args = parser.parse_args(argv)

    started = time.perf_counter()
    quick = args.quick
    sizes = args.sizes or ([1_000, 10_000] if quick else [1_000, 10_000, 100_000])
    convert_repeats = (
        {1_000: 5, 10_000: 3, 100_000: 2} if quick else {1_000: 15, 10_000: 9, 100_000: 5}
    )
    memory = not args.no_memory
    command = "python -m benchmarks" + (" --quick" if quick else "")
    results: dict[str, Any] = {"command": command, "machine": machine_info()}
    log(f"machine: {results['machine']['cpu']}, {results['machine']['nproc']} CPUs")

    results["convert"] = []
    traces: dict[int, Any] = {}
    for n_ops in sizes:
        repeats = convert_repeats.get(n_ops, 3 if n_ops >= 100_000 else 7)
        result, trace = bench_convert(n_ops, repeats, memory)
        results["convert"].append(result)
        traces[n_ops] = trace
        gc.collect()

    if OVERHEAD_SIZE in sizes or args.sizes is None:
        results["overhead"] = bench_overhead(OVERHEAD_SIZE, 2 if quick else 7, memory)

    gpu, gpu_trace = bench_chrome(GPU_TRACE, 3 if quick else 7, memory)
    results["chrome"] = gpu

    panel_sizes = [n for n in sizes if n >= 10_000]
    panels: list[dict] | None = []
    for n_ops in panel_sizes:
        panel = bench_panel(f"{n_ops:,} ops", traces[n_ops], "c7/add12", 2 if quick else 3, memory)
        if panel is None:
            panels = None
            break
        panels.append(panel)
    if panels is not None and gpu_trace is not None:
        panel = bench_panel(
            GPU_TRACE.parent.name, gpu_trace, "decoder/mul", 2 if quick else 3, memory
        )
        if panel is not None:
            panels.append(panel)
    results["panel"] = panels
    if not args.no_function_mode:
        log("TF2 function mode: python -m benchmarks.function_mode, in a process of its own")
        results["function_mode"] = function_mode.run_in_subprocess(quick)
    results["wall_s"] = time.perf_counter() - started
    results["machine"]["load average at end"] = _loadavg()

    body = render(results)
    print()
    print(body)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    if (args.write or not quick) and not args.no_write:
        write_results(args.output, body)
        log(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
