"""``python -m benchmarks.xla [--repeats N] [--json PATH] [--cprofile N]``: what a trace of an
XLA function costs next to the same function without XLA (issue 23).

One process, TensorFlow's default devices (XLA:CPU). The workload (``make_function``) is one
Python body of about 300 TF ops: 6 chains, each ``LENGTH`` rounds of matmul, add, relu and a
reduction on 32x32 float32 tensors, summed. It is wrapped twice, as
``tf.function(jit_compile=True)`` and ``tf.function(jit_compile=False)``; each is called by the
user (and so compiled/instantiated and cached) and traced once untimed before anything is timed.
Then each repeat runs, interleaved, ``trace_placement(f, x)`` (defaults: ``warmup=1``,
``steps=1``) of the XLA function and of the plain one, with its phases timed by wrappers put
around ``tfplace_widget._tracing.function``'s helpers (this process only, as
``benchmarks/function_mode.py`` does).

The XLA trace is checked before its time counts: its ops are listed with ``how="xla"`` and
``trace.xla`` has executed instructions (else it would be timing an empty trace).

A trace runs a copy of the user's plain function under another name
(``_tracing/function_copies``), which TensorFlow instantiates afresh in the trace's warm-up call;
the XLA function it calls as it is, with the user's settings, so XLA finds its program compiled
(before 2026-12-02 it ran a copy too, and XLA compiled that copy again: 0.5 s here). The row
"the user's first call" (Python tracing + XLA compile, or + instantiation) says what the
compile costs the user.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .function_mode import PhaseTimer, installed, machine
from .graphs import quiet_fds
from .measure import Timing, fmt_ms, time_cpu_once

TARGET = 2.0  # the XLA trace at most this times the trace without XLA
CHAINS, LENGTH, SIZE = 6, 7, 32  # 6 chains x 7 rounds x (matmul, add, relu, mean, sub): ~300 ops

# Phases of trace_placement, in order; who pays: "TF" (TensorFlow running the calls, the
# profiler, XLA compiling) or "ours" (reading the profile and graphs, building the trace).
PHASES = [
    ("settings", "TF", "redirect native output, settings on entry and exit"),
    ("warmup_call", "TF", "warm-up call (instantiates the copy; with XLA: the user's program)"),
    ("profiler_start", "TF", "tf.profiler.experimental.start"),
    ("traced_call", "TF", "traced call (profiler on)"),
    ("profiler_stop", "TF", "tf.profiler.experimental.stop (collect, write .xplane.pb)"),
    ("export", "TF", "context.export_run_metadata() (placed graphs)"),
    ("xspace", "ours", "records_from_xspace (op events)"),
    ("xla_profile", "ours", "xla_from_xspace (HLO protos, instruction events)"),
    ("graphs", "ours", "_unique_graphs + _graphs_that_ran + _function_names"),
    ("read_graphs", "ours", "read_function_graphs"),
    ("frames", "ours", "frames_from_records"),
    ("xla_clusters", "ours", "add_xla_clusters (cluster ops, trace.xla, events)"),
    ("protos", "ours", "function_protos (trace.raw)"),
]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def make_functions(tf: Any) -> tuple[Any, Any, Any]:
    """``(f_xla, f_plain, x)``: one body of about 300 ops, with and without jit_compile."""
    weights = [
        tf.constant(tf.random.stateless_normal((SIZE, SIZE), seed=(k, 0)) / SIZE**0.5)
        for k in range(CHAINS)
    ]

    def body(x: Any) -> Any:
        outs = []
        for c in range(CHAINS):
            y = x + float(c)
            for _ in range(LENGTH):
                y = tf.nn.relu(tf.matmul(y, weights[c]) + 0.01)
                y = y - tf.reduce_mean(y, axis=-1, keepdims=True)
            outs.append(y)
        return tf.add_n(outs)

    x = tf.random.stateless_uniform((SIZE, SIZE), seed=(1, 2))
    return tf.function(body, jit_compile=True), tf.function(body, jit_compile=False), x


def graph_ops(f: Any, x: Any) -> int:
    return len(f.get_concrete_function(x).graph.as_graph_def().node)


@contextlib.contextmanager
def timing_phases(tf: Any) -> Iterator[PhaseTimer]:
    """Wrap ``tracing.function``'s helpers (and the profiler/export calls) in timers."""

    from tfplace_widget._tracing import function as ft

    timer = PhaseTimer()

    def user_call(*args: Any, **kwargs: Any) -> Any:
        timer.calls += 1
        key = "warmup_call" if timer.calls == 1 else "traced_call"  # warmup=1, steps=1
        return timer.timed(key, original["_user_call"])(*args, **kwargs)

    replacements = {
        "capture_native_output": timer.timed_context(
            "settings", "settings", ft.capture_native_output
        ),
        "_tf_settings": timer.timed_context("settings", "settings", ft._tf_settings),
        "_user_call": user_call,
        "records_from_xspace": timer.timed("xspace", ft.records_from_xspace),
        "xla_from_xspace": timer.timed("xla_profile", ft.xla_from_xspace),
        "_unique_graphs": timer.timed("graphs", ft._unique_graphs),
        "_graphs_that_ran": timer.timed("graphs", ft._graphs_that_ran),
        "_function_names": timer.timed("graphs", ft._function_names),
        "read_function_graphs": timer.timed("read_graphs", ft.read_function_graphs),
        "frames_from_records": timer.timed("frames", ft.frames_from_records),
        "add_xla_clusters": timer.timed("xla_clusters", ft.add_xla_clusters),
        "function_protos": timer.timed("protos", ft.function_protos),
    }
    with installed(tf, ft, timer, replacements) as original:  # user_call calls the original
        yield timer


def check_xla_trace(trace: Any) -> dict[str, int]:
    """The XLA trace really shows XLA: its ops with how="xla", executed instructions."""
    xla_ops = int((trace.ops["how"] == "xla").sum())
    assert xla_ops > 0, "the XLA trace lists no op with how='xla': the comparison is void"
    assert not trace.xla.empty, "the XLA trace has an empty trace.xla: the comparison is void"
    assert trace.ops["xla_op"].notna().any(), "no op of the XLA trace names its instruction"
    return {"ops": len(trace.ops), "xla_ops": xla_ops, "instructions": len(trace.xla)}


def traced(fn: Any, x: Any, trace_placement: Any, phases: list) -> Callable[[], Any]:
    import tensorflow as tf

    def run() -> Any:
        with timing_phases(tf) as timer, quiet_fds():
            trace = trace_placement(fn, x)
        phases.append(timer.seconds)
        return trace

    return run


def cprofile_trace(fn: Any, x: Any, top: int) -> str:
    """One more trace of ``fn`` under cProfile: the ``top`` functions by cumulative time."""
    from tfplace_widget import trace_placement

    profile = cProfile.Profile()
    with quiet_fds():
        profile.enable()
        trace_placement(fn, x)
        profile.disable()
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def measure(repeats: int, cprofile_top: int) -> dict[str, Any]:
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    with quiet_fds():
        import tensorflow as tf

        tf.config.list_logical_devices()
    from tfplace_widget import trace_placement

    f_xla, f_plain, x = make_functions(tf)
    results: dict[str, Any] = {"repeats": repeats, "graph_ops": graph_ops(f_plain, x)}
    log(f"xla: the function has {results['graph_ops']} ops in its graph")
    with quiet_fds():  # the trace's own paths (imports, profiler, XLA reading) warmed once
        for jit in (True, False):
            small = tf.function(lambda v: tf.reduce_sum(tf.nn.relu(v @ v)), jit_compile=jit)
            small(x)
            trace_placement(small, x)
    first: dict[str, float] = {}
    first_trace: dict[str, float] = {}
    for key, fn in (("xla", f_xla), ("plain", f_plain)):
        with quiet_fds():
            first[key], _, _ = time_cpu_once(lambda fn=fn: fn(x))  # Python tracing + compile
            for _ in range(3):
                fn(x)
        warm: list = []
        first_trace[key], _, check = time_cpu_once(traced(fn, x, trace_placement, warm))
        results[f"{key}_first_trace_warmup_call_s"] = warm[0].get("warmup_call", 0.0)
        if key == "xla":
            results["xla_check"] = check_xla_trace(check)
        results[f"{key}_trace_ops"] = len(check.ops)
    results["first_call_s"] = first
    results["first_trace_s"] = first_trace
    phases: dict[str, list] = {"xla": [], "plain": []}
    timings = {"xla": Timing(), "plain": Timing()}
    for repeat in range(repeats):
        for key, fn in (("xla", f_xla), ("plain", f_plain)):
            wall, cpu, trace = time_cpu_once(traced(fn, x, trace_placement, phases[key]))
            timings[key].seconds.append(wall)
            timings[key].cpu.append(cpu)
            if key == "xla":
                check_xla_trace(trace)
        log(
            f"xla: repeat {repeat + 1}/{repeats}: XLA {fmt_ms(timings['xla'].seconds[-1])}, "
            f"plain {fmt_ms(timings['plain'].seconds[-1])}"
        )
    results["timings"] = {k: {"seconds": t.seconds, "cpu": t.cpu} for k, t in timings.items()}
    results["phases"] = phases
    if cprofile_top:
        results["cprofile"] = cprofile_trace(f_xla, x, cprofile_top)
    results["machine"] = machine(tf, load)
    return results


def render(results: dict[str, Any]) -> str:
    m = results["machine"]
    t = {k: Timing(v["seconds"], v["cpu"]) for k, v in results["timings"].items()}
    ratio = t["xla"].median / t["plain"].median
    ratio_cpu = statistics.median(t["xla"].cpu) / statistics.median(t["plain"].cpu)
    verdict = "met" if ratio <= TARGET else "missed"
    first_ratio = results["first_trace_s"]["xla"] / results["first_trace_s"]["plain"]
    check = results["xla_check"]
    first = results["first_call_s"]
    lines = [
        f"`python -m benchmarks.xla` ({results['repeats']} repeats, interleaved), measured "
        f"{m['date']} with tfplace_widget at {m['tfplace_widget']}, TensorFlow "
        f"{m['tensorflow']}, {m['nproc']} cores; load average {m['load average at start']} at "
        f"start, {m['load average at end']} at end. A tf.function of {results['graph_ops']} ops; the "
        f"XLA trace shows {check['ops']} ops ({check['xla_ops']} with how='xla') and "
        f"{check['instructions']} executed HLO instructions in trace.xla; the trace without "
        f"XLA shows {results['plain_trace_ops']} ops.",
        "",
        f"XLA trace / trace without XLA: **{ratio:.2f}x** (target <= {TARGET}x: **{verdict}**;"
        f" in CPU time {ratio_cpu:.2f}x). The first trace after the user's calls: "
        f"**{first_ratio:.2f}x** (one run each).",
        "",
        "| what | jit_compile=True | jit_compile=False |",
        "|---|---:|---:|",
        f"| **trace_placement(f, x)**, wall | {t['xla'].ms()} | {t['plain'].ms()} |",
        f"| trace_placement(f, x), CPU (median) | {fmt_ms(statistics.median(t['xla'].cpu))} | "
        f"{fmt_ms(statistics.median(t['plain'].cpu))} |",
        f"| the user's first call (Python tracing + XLA compile / instantiation) | "
        f"{fmt_ms(first['xla'])} | {fmt_ms(first['plain'])} |",
        f"| the first trace_placement(f, x) after the user's calls (not in the ratio) | "
        f"{fmt_ms(results['first_trace_s']['xla'])} | "
        f"{fmt_ms(results['first_trace_s']['plain'])} |",
        "| its warm-up call (without XLA: instantiates the trace's copy of f) | "
        f"{fmt_ms(results['xla_first_trace_warmup_call_s'])} | "
        f"{fmt_ms(results['plain_first_trace_warmup_call_s'])} |",
    ]
    med = {
        key: {p: statistics.median(run.get(p, 0.0) for run in runs) for p, _, _ in PHASES}
        for key, runs in results["phases"].items()
    }
    for key in ("xla", "plain"):
        med[key]["rest"] = t[key].median - sum(med[key].values())
    for phase, who, label in [*PHASES, ("rest", "ours", "the rest (unwrapped)")]:
        lines.append(
            f"| {label} ({who}) | {fmt_ms(med['xla'][phase])} | {fmt_ms(med['plain'][phase])} |"
        )
    for who in ("TF", "ours"):
        keys = [p for p, w, _ in PHASES if w == who] + (["rest"] if who == "ours" else [])
        lines.append(
            f"| **sum: {who}** | {fmt_ms(sum(med['xla'][k] for k in keys))} | "
            f"{fmt_ms(sum(med['plain'][k] for k in keys))} |"
        )
    lines.append("")
    lines.append("Phases are medians per phase (their sum need not be the total's median).")
    if results.get("cprofile"):
        lines += ["", "cProfile of one more XLA trace (cumulative):", "", "```"]
        lines += [line.rstrip() for line in results["cprofile"].strip().splitlines()]
        lines.append("```")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.xla", description=__doc__)
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats (5)")
    parser.add_argument("--json", type=Path, help="save the raw numbers as JSON here")
    parser.add_argument(
        "--cprofile", type=int, default=0, metavar="N", help="cProfile one XLA trace: top N"
    )
    args = parser.parse_args(argv)
    results = measure(args.repeats, args.cprofile)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
