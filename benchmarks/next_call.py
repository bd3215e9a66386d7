"""``python -m benchmarks.next_call [--quick] [--repeats N] [--first-call-only] [--json PATH]``:
what a trace costs the user's own next call, side by side with a steady call.

**The trace as the function's first call** (issue 30; ``first_call``): in a fresh process per
run, the workload is made and, before anything else calls it, ``trace_placement`` runs it
(defaults); then the user's next call is timed, then steady calls (after 2 untimed ones). Two
workloads: ``f`` below, and a MobileNetV2 training step
(``keras.applications.MobileNetV2(input_shape=(96, 96, 3), weights=None, classes=10)``, SGD,
batch 8, ``model.train_on_batch``; no download). Each run is made with this commit's trace and
with the trace as before issue 30 (``instantiate_for_the_user`` and the warm-up as the user's
own call switched off in that process: the user's function was then never instantiated with the
user's settings), and, for reference,
without a trace: the user's own first call, then their second (what a next call costs anyway),
the three alternating. One more process per workload and variant counts the functions
TensorFlow instantiates in the next call (``RunMetadata.function_graphs``) and the executors
it builds there (its ``flr_executor`` counter: one at a function's first run), outside the
timed runs. This section takes 15-20 minutes on a loaded 2-core machine (each MobileNetV2 process
30-60 s; ``--first-call-repeats``, ``--quick``: 2).

**A function already called** (issue 25): two workloads, each called by the user and cached
before anything is timed, in one process:

- ``f``: one ``tf.function`` of about 300 ops (``make_function``: 6 chains of elementwise ops
  on a 128x128 matrix, each around a matmul, summed);
- a small Keras model's training step: ``model.train_on_batch(x, y)`` of a 3-layer MLP
  (784-128-64-10, SGD, batch 64), i.e. Keras's own ``tf.function`` for one step.

Each repeat times, in this order: ``trace_placement`` of the workload (defaults), the user's
next call right after it (the number this benchmark is about), a batch of steady calls (the
baseline), one call after sleeping as long as the trace took (what any pause costs the next
call: TensorFlow's thread pool goes to sleep), and the baseline's counterpart for what the trace did before this fix: the first
call after ``context.context().clear_kernel_cache()`` (the trace cleared the cache on entry, and
on exit whenever its settings were not the user's, i.e. always with the default
``optimize=False``; so the user's next call instantiated the function again). The target: the
next call after a trace within 1.5x of a steady call. Whether the next call instantiated anything is read from
TensorFlow itself once per workload (``RunMetadata.function_graphs``: one placed graph per
instantiation), outside the timed runs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .graphs import quiet_fds
from .measure import Timing, fmt_ms, time_cpu_once

TARGET = 1.5  # the next call after a trace, at most this times a steady call
CHAINS, LENGTH, SIZE = 6, 12, 128  # f: 6 chains of 2 x 12 elementwise ops around a matmul
STEADY_CALLS = 30
FIRST_CALL_STEADY = {"f": 20, "mobilenet": 8}  # steady calls per fresh process
FIRST_CALL_WORKLOADS = {
    "f": "`f`, a tf.function of about 300 ops",
    "mobilenet": "MobileNetV2 training step (96x96x3, 10 classes, batch 8, SGD, "
    "`model.train_on_batch`)",
}
VARIANTS = ("now", "before", "untraced")
FIRST_CALL_ROWS = [
    ("steady call (baseline)", "steady"),
    ("**the user's next call after a trace that was the first call (this commit)**", "next_now"),
    ("the same before issue 30 (the function left uninstantiated)", "next_before"),
    (
        "the user's second call, no trace (their own first call instantiated and ran it; "
        "reference)",
        "next_untraced",
    ),
    ("trace_placement as the first call (this commit)", "first_now"),
    ("trace_placement as the first call, before issue 30", "first_before"),
    (
        "the user's own first call, no trace (Python tracing + instantiation + run)",
        "first_untraced",
    ),
]
ROWS = [
    ("steady call (the user's function, instantiated and cached; baseline)", "steady"),
    ("**the user's next call after trace_placement (this commit)**", "after_trace"),
    (
        "the user's next call after clear_kernel_cache() (what a trace did before: the "
        "function instantiated again)",
        "after_clear",
    ),
    (
        "a call after an idle pause as long as the trace, no trace (TensorFlow's threads "
        "asleep, as after any pause)",
        "after_pause",
    ),
    ("trace_placement itself (defaults: warmup=1, steps=1)", "trace"),
]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def make_function(tf: Any) -> tuple[Any, tuple]:
    """``(f, (x,))``: a ``tf.function`` of about 300 ops and its argument."""
    weights = [
        tf.Variable(tf.random.stateless_normal((SIZE, SIZE), seed=(k, 0)) / SIZE**0.5)
        for k in range(CHAINS)
    ]

    def chain(y: Any, tower: int) -> Any:
        for j in range(LENGTH):
            kind = (j + tower) % 4
            if kind == 0:
                y = y * 0.99
            elif kind == 1:
                y = y + 0.01
            elif kind == 2:
                y = tf.tanh(y)
            else:
                y = tf.sigmoid(y) - 0.5
        return y

    @tf.function
    def f(x: Any) -> Any:
        outs = []
        for c in range(CHAINS):
            y = chain(x + float(c), c)
            y = tf.nn.relu(tf.matmul(y, weights[c]))
            outs.append(chain(y, c + 1))
        return tf.add_n(outs)

    return f, (tf.random.stateless_uniform((SIZE, SIZE), seed=(1, 2)),)


def make_train_step(tf: Any) -> tuple[Any, tuple]:
    """``(model.train_on_batch, (x, y))`` of a small Keras MLP."""
    keras = tf.keras
    model = keras.Sequential(
        [
            keras.layers.Input((784,)),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.SGD(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    x = tf.random.stateless_uniform((64, 784), seed=(3, 4))
    y = tf.random.stateless_uniform((64,), seed=(5, 6), maxval=10, dtype=tf.int32)
    return model.train_on_batch, (x, y)


def make_mobilenet_step(tf: Any) -> tuple[Any, tuple]:
    """``(model.train_on_batch, (x, y))`` of a MobileNetV2 (96x96x3, 10 classes, batch 8)."""
    keras = tf.keras
    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV2(input_shape=(96, 96, 3), weights=None, classes=10)
    model.compile(
        optimizer=keras.optimizers.SGD(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=False),
    )
    x = tf.random.stateless_uniform((8, 96, 96, 3), seed=(3, 4))
    y = tf.random.stateless_uniform((8,), seed=(5, 6), maxval=10, dtype=tf.int32)
    return model.train_on_batch, (x, y)


def first_call_child(workload: str, variant: str, count: bool) -> dict[str, Any]:
    """One fresh process's run: the trace as the workload's first call (``variant`` ``"now"``,
    or ``"before"`` issue 30), or the user's own first call (``"untraced"``); then the next
    call and steady calls (``count``: the instantiations in the next call instead of times)."""
    with quiet_fds():
        import tensorflow as tf

        tf.config.list_logical_devices()
    from tfplace_widget import trace_placement
    from tfplace_widget._tracing import function

    if variant == "before":  # the trace as it was before issue 30
        function.instantiate_for_the_user = lambda *args, **kwargs: None
        function._warms_up_as_the_user = lambda *args, **kwargs: False
    fn, args = (make_function if workload == "f" else make_mobilenet_step)(tf)
    with quiet_fds():
        first = (lambda: fn(*args)) if variant == "untraced" else lambda: trace_placement(fn, *args)
        first_wall, first_cpu, _ = time_cpu_once(first)
    if count:
        built, made = executors_built(lambda: instantiations(lambda: fn(*args)))
        return {"instantiations": made, "executors": built}
    next_wall, next_cpu, _ = time_cpu_once(lambda: fn(*args))
    for _ in range(2):
        fn(*args)
    steady: dict[str, list[float]] = {"seconds": [], "cpu": []}
    for _ in range(FIRST_CALL_STEADY[workload]):
        wall, cpu, _ = time_cpu_once(lambda: fn(*args))
        steady["seconds"].append(wall)
        steady["cpu"].append(cpu)
    return {
        "first": {"seconds": [first_wall], "cpu": [first_cpu]},
        "next": {"seconds": [next_wall], "cpu": [next_cpu]},
        "steady": steady,
    }


def run_child(workload: str, variant: str, count: bool = False) -> dict[str, Any]:
    """:func:`first_call_child` in a process of its own."""
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        command = [sys.executable, "-m", "benchmarks.next_call", "--child", workload]
        command += ["--variant", variant, "--out", out.name] + (["--count"] if count else [])
        run = subprocess.run(
            command, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent
        )
        if run.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{run.stderr[-3000:]}")
        return json.loads(Path(out.name).read_text())


def measure_first_call(repeats: int) -> dict[str, Any]:
    """Each workload ``repeats`` times per variant, the variants alternating."""
    results: dict[str, Any] = {}
    for workload in FIRST_CALL_WORKLOADS:
        timings = {key: Timing() for _, key in FIRST_CALL_ROWS}
        for repeat in range(repeats):
            for variant in VARIANTS:
                run = run_child(workload, variant)
                for key in ("first", "next"):
                    timings[f"{key}_{variant}"].seconds += run[key]["seconds"]
                    timings[f"{key}_{variant}"].cpu += run[key]["cpu"]
                if variant == "now":
                    timings["steady"].seconds += run["steady"]["seconds"]
                    timings["steady"].cpu += run["steady"]["cpu"]
                log(
                    f"{workload} repeat {repeat + 1}/{repeats} ({variant}): next call "
                    f"{fmt_ms(run['next']['seconds'][0])} (CPU {fmt_ms(run['next']['cpu'][0])}), "
                    f"steady {fmt_ms(statistics.median(run['steady']['seconds']))}"
                )
        counted = {variant: run_child(workload, variant, count=True) for variant in VARIANTS}
        results[workload] = {
            "timings": {k: {"seconds": t.seconds, "cpu": t.cpu} for k, t in timings.items()},
            "instantiations": {v: c["instantiations"] for v, c in counted.items()},
            "executors": {v: c["executors"] for v, c in counted.items()},
        }
    return results


def executors_built(call: Callable[[], Any]) -> tuple[int, Any]:
    """Executors TensorFlow's function runtime built during ``call()`` (its own test counter
    ``flr_executor``, one per function at its first run), and what ``call()`` returned."""
    from tensorflow.python.framework import test_util

    deltas = [test_util.TestDelta("flr_executor", k) for k in ("default", "single_threaded")]
    returned = call()
    return sum(delta.Get() for delta in deltas), returned


def graph_ops(tf: Any, f: Any, args: tuple) -> int:
    return len(f.get_concrete_function(*args).graph.as_graph_def().node)


def instantiations(call: Callable[[], Any]) -> int:
    """Placed graphs TensorFlow recorded during ``call()``: one per function it instantiated."""
    from tensorflow.python.eager import context

    ctx = context.context()
    ctx.enable_run_metadata()
    ctx.export_run_metadata()
    try:
        call()
        graphs = ctx.export_run_metadata().function_graphs
        return sum(1 for g in graphs if len(g.pre_optimization_graph.node) > 3)
    finally:
        ctx.disable_run_metadata()
        ctx.disable_graph_collection()


def measure_workload(
    name: str, fn: Any, args: tuple, repeats: int, trace_placement: Any
) -> dict[str, Any]:
    from tensorflow.python.eager import context

    ctx = context.context()
    first, _, _ = time_cpu_once(lambda: fn(*args))  # Python tracing + instantiation
    for _ in range(3):
        fn(*args)
    with quiet_fds():
        trace_placement(fn, *args)  # warm the trace's own paths (imports, profiler) once
    fn(*args)
    timings = {key: Timing() for _, key in ROWS}
    for repeat in range(repeats):
        with quiet_fds():
            wall, cpu, trace = time_cpu_once(lambda: trace_placement(fn, *args))
        timings["trace"].seconds.append(wall)
        timings["trace"].cpu.append(cpu)
        wall, cpu, _ = time_cpu_once(lambda: fn(*args))
        timings["after_trace"].seconds.append(wall)
        timings["after_trace"].cpu.append(cpu)
        for _ in range(STEADY_CALLS):
            cpu0, start = time.process_time(), time.perf_counter()
            fn(*args)
            timings["steady"].seconds.append(time.perf_counter() - start)
            timings["steady"].cpu.append(time.process_time() - cpu0)

        time.sleep(timings["trace"].seconds[-1])
        wall, cpu, _ = time_cpu_once(lambda: fn(*args))
        timings["after_pause"].seconds.append(wall)
        timings["after_pause"].cpu.append(cpu)

        def cleared() -> Any:
            ctx.clear_kernel_cache()
            return fn(*args)

        wall, cpu, _ = time_cpu_once(cleared)
        timings["after_clear"].seconds.append(wall)
        timings["after_clear"].cpu.append(cpu)
        for _ in range(3):  # steady again before the next repeat's trace
            fn(*args)
        log(
            f"{name}: repeat {repeat + 1}/{repeats}: next call after the trace "
            f"{fmt_ms(timings['after_trace'].seconds[-1])}, steady "
            f"{fmt_ms(statistics.median(timings['steady'].seconds[-STEADY_CALLS:]))}, after "
            f"clear_kernel_cache() {fmt_ms(timings['after_clear'].seconds[-1])}"
        )
    with quiet_fds():
        trace_placement(fn, *args)
    after_trace = instantiations(lambda: fn(*args))
    ctx.clear_kernel_cache()
    after_clear = instantiations(lambda: fn(*args))
    return {
        "name": name,
        "first_call_s": first,
        "trace_ops": len(trace.ops),
        "instantiations_after_trace": after_trace,
        "instantiations_after_clear": after_clear,
        "timings": {k: {"seconds": t.seconds, "cpu": t.cpu} for k, t in timings.items()},
    }


def machine() -> dict[str, str]:
    import tensorflow as tf

    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if "model name" in line)
    except (OSError, StopIteration):
        pass
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent,
    ).stdout.strip()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "nproc": str(os.cpu_count()),
        "tensorflow": tf.__version__,
        "python": platform.python_version(),
        "tfplace_widget": commit or "unknown",
        "load average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def measure(repeats: int, first_call_repeats: int, first_call_only: bool) -> dict[str, Any]:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    results: dict[str, Any] = {"first_call_repeats": first_call_repeats}
    results["first_call"] = measure_first_call(first_call_repeats)
    if not first_call_only:
        results.update(measure_cached(repeats))
    results["machine"] = dict(machine(), **{"load average at start": load})
    return results


def measure_cached(repeats: int) -> dict[str, Any]:
    with quiet_fds():
        import tensorflow as tf

        tf.config.list_logical_devices()
    from tfplace_widget import trace_placement

    results: dict[str, Any] = {"repeats": repeats, "steady_calls": STEADY_CALLS}
    f, args = make_function(tf)
    log(f"next call: f has {graph_ops(tf, f, args)} ops in its graph")
    results["f"] = measure_workload("f", f, args, repeats, trace_placement)
    results["f"]["graph_ops"] = graph_ops(tf, f, args)
    step, data = make_train_step(tf)
    results["train_step"] = measure_workload("train step", step, data, repeats, trace_placement)
    return results


def render(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = render_first_call(results)
    if "f" not in results:
        return "\n".join(lines)
    lines += [
        "### The user's next call after a trace (issue 25)",
        "",
        f"`python -m benchmarks.next_call` ({results['repeats']} repeats), measured {m['date']}"
        f" with tfplace_widget at {m['tfplace_widget']}, in one process, on {m['nproc']} cores "
        f"({m['cpu']}), TensorFlow {m['tensorflow']}, Python {m['python']}; load average "
        f"{m['load average at start']} at start, {m['load average']} at end. Times are wall "
        f"clock, median [min–max] over n runs (the steady call {results['steady_calls']} times "
        "per repeat).",
        "",
    ]
    for key, title in (
        ("f", f"`f`, a tf.function of {results['f'].get('graph_ops', '?')} ops"),
        ("train_step", "`model.train_on_batch(x, y)`, a 784-128-64-10 Keras MLP, batch 64"),
    ):
        w = results[key]
        t = {k: Timing(v["seconds"], v["cpu"]) for k, v in w["timings"].items()}
        steady = t["steady"].median
        lines += [
            f"{title} (its first call, Python tracing + instantiation: "
            f"{fmt_ms(w['first_call_s'])}; the trace shows {w['trace_ops']} ops):",
            "",
            "| what | wall | x steady call | CPU time (median) | x steady call, CPU |",
            "|---|---:|---:|---:|---:|",
        ]
        steady_cpu = statistics.median(t["steady"].cpu)
        for label, row in ROWS:
            cpu = statistics.median(t[row].cpu)
            lines.append(
                f"| {label} | {t[row].ms()} | {t[row].median / steady:.1f}x | {fmt_ms(cpu)} "
                f"| {cpu / steady_cpu:.1f}x |"
            )
        ratio = t["after_trace"].median / steady
        ratio_cpu = statistics.median(t["after_trace"].cpu) / steady_cpu
        paused = t["after_trace"].median / t["after_pause"].median
        verdict = "met" if ratio <= TARGET else "missed"
        lines += [
            "",
            f"Next call after a trace / steady call: **{ratio:.2f}x** (target <= {TARGET}x: "
            f"**{verdict}**; in CPU time {ratio_cpu:.2f}x); functions TensorFlow instantiated "
            "in that call: "
            f"**{w['instantiations_after_trace']}** (after clear_kernel_cache(): "
            f"{w['instantiations_after_clear']}). Against a call after the same pause "
            f"without a trace: **{paused:.2f}x**.",
            "",
        ]
    return "\n".join(lines)


def render_first_call(results: dict[str, Any]) -> list[str]:
    m = results["machine"]
    lines = [
        "### The user's next call after a trace that was the function's first call (issue 30)",
        "",
        f"`python -m benchmarks.next_call` ({results['first_call_repeats']} fresh processes per "
        f"workload and variant), measured {m['date']} with tfplace_widget at {m['tfplace_widget']}"
        f", on {m['nproc']} cores ({m['cpu']}), TensorFlow {m['tensorflow']}, Python "
        f"{m['python']}; load average {m['load average at start']} at start, "
        f"{m['load average']} at end. Median [min–max] over n runs; CPU time is the process's "
        "(all threads).",
        "",
    ]
    for workload, title in FIRST_CALL_WORKLOADS.items():
        w = results["first_call"][workload]
        t = {k: Timing(v["seconds"], v["cpu"]) for k, v in w["timings"].items()}
        steady, steady_cpu = t["steady"].median, statistics.median(t["steady"].cpu)
        lines += [
            f"{title}:",
            "",
            "| what | wall | x steady call | CPU time, median [min–max] | x steady call, CPU |",
            "|---|---:|---:|---:|---:|",
        ]
        for label, row in FIRST_CALL_ROWS:
            cpu = Timing(t[row].cpu)
            lines.append(
                f"| {label} | {t[row].ms()} | {t[row].median / steady:.2f}x | {cpu.ms()} "
                f"| {cpu.median / steady_cpu:.2f}x |"
            )
        cpu = {key: statistics.median(timing.cpu) for key, timing in t.items()}
        ratio_cpu = cpu["next_now"] / steady_cpu
        verdict = "met" if ratio_cpu <= TARGET else "missed"
        made = w["instantiations"]
        built = w.get("executors", {})
        lines += [
            "",
            f"Next call / steady call in CPU time: **{ratio_cpu:.2f}x** (target <= {TARGET}x: "
            f"**{verdict}**; wall {t['next_now'].median / steady:.2f}x), before issue 30 "
            f"{cpu['next_before'] / steady_cpu:.1f}x; against the user's second call without a "
            f"trace: **{cpu['next_now'] / cpu['next_untraced']:.2f}x** in CPU time. Functions "
            f"TensorFlow instantiated in that call: **{made['now']}** (before issue 30: "
            f"{made['before']}; the second call without a trace: {made['untraced']}); "
            f"executors it built: **{built.get('now', '?')}** (before issue 30: "
            f"{built.get('before', '?')}; the second call without a trace: "
            f"{built.get('untraced', '?')}). The trace "
            f"takes {cpu['first_now'] - cpu['first_before']:+.2f} s of CPU more than before "
            "(the user's instantiation and its executor, made ahead).",
            "",
        ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.next_call", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="5 repeats instead of 15")
    parser.add_argument("--repeats", type=int, help="repeats (default 15, quick 5)")
    parser.add_argument("--json", type=Path, help="save the raw numbers as JSON here")
    parser.add_argument(
        "--first-call-only", action="store_true", help="only the trace-as-first-call runs"
    )
    parser.add_argument(
        "--first-call-repeats",
        type=int,
        help="fresh processes per workload and variant (default 4, quick 2)",
    )
    parser.add_argument("--child", choices=sorted(FIRST_CALL_WORKLOADS), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--variant", choices=VARIANTS, default="now", help=argparse.SUPPRESS)
    parser.add_argument("--count", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        args.out.write_text(json.dumps(first_call_child(args.child, args.variant, args.count)))
        return 0
    results = measure(
        args.repeats or (5 if args.quick else 15),
        args.first_call_repeats or (2 if args.quick else 4),
        args.first_call_only,
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
