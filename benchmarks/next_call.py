"""``python -m benchmarks.next_call [--quick] [--repeats N] [--json PATH]``: what a trace costs
the user's own next call (issue 25), side by side with a steady call, in one process.

Two workloads, each called by the user and cached before anything is timed:

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


def measure(repeats: int) -> dict[str, Any]:
    with quiet_fds():
        import tensorflow as tf

        tf.config.list_logical_devices()
    from tfplace_widget import trace_placement

    results: dict[str, Any] = {"repeats": repeats, "steady_calls": STEADY_CALLS}
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    f, args = make_function(tf)
    log(f"next call: f has {graph_ops(tf, f, args)} ops in its graph")
    results["f"] = measure_workload("f", f, args, repeats, trace_placement)
    results["f"]["graph_ops"] = graph_ops(tf, f, args)
    step, data = make_train_step(tf)
    results["train_step"] = measure_workload("train step", step, data, repeats, trace_placement)
    results["machine"] = dict(machine(), **{"load average at start": load})
    return results


def render(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.next_call", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="5 repeats instead of 15")
    parser.add_argument("--repeats", type=int, help="repeats (default 15, quick 5)")
    parser.add_argument("--json", type=Path, help="save the raw numbers as JSON here")
    args = parser.parse_args(argv)
    results = measure(args.repeats or (5 if args.quick else 15))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
