"""``python -m benchmarks.function_mode [--quick] [--length N] [--json PATH] [--cprofile N]``:
what a function-mode trace costs, next to a plain call and to the TF2 profiler alone.

Everything runs in one process with two logical CPUs, configured before TensorFlow's runtime
starts (which is also why ``python -m benchmarks`` runs this module in a process of its own).
The workload is one ``tf.function`` of about 2,000 ops (``make_function``): 8 towers, each a
chain of elementwise ops, a matmul with bias and ReLU, a layer norm and another elementwise
chain, every other tower under ``tf.device('/CPU:1')``, summed on CPU:0 (``--length 500``: about
19,000 ops). After it has been traced and instantiated once, each repeat times, in this order:

- ``trace_placement(f, x)`` end to end (defaults: ``warmup=1``, ``steps=1``), with its phases
  timed by wrappers put around ``tfplace_widget._tracing.function``'s helpers for this process only;
- the user's next plain call after it (until issue 25 the trace cleared the eager kernel cache,
  so this call instantiated the function again; now the trace runs copies of the function and
  this call runs the user's cached instantiation: ``benchmarks/next_call.py``);
- a batch of plain calls of the instantiated function (the baseline);
- the TF2 profiler alone: ``start`` + call + ``stop`` and the ``.xplane.pb`` read back;
- the first call after ``context.context().clear_kernel_cache()`` (re-instantiation with the
  user's settings, Grappler on), and the same with Grappler off, as the trace instantiates;
- the first call with Grappler back on after a call with it off, the cache not cleared (does
  leaving the settings alone spare the user's next call an instantiation?);
- TensorFlow alone doing the trace's TensorFlow work (``bare_traced_call``): cache cleared,
  Grappler off, run metadata on, one warm-up call, one call under the profiler, the placed
  graphs exported, settings restored, cache cleared again.

TensorFlow keeps storing the placed graph of every instantiation after ``enable_run_metadata()``,
even once ``disable_run_metadata()`` ran: graph collection stays on until
``disable_graph_collection()``. The timed repeats call that after each trace (untimed), so every
repeat starts alike; the checks at the end show what ``trace_placement`` leaves behind: how many
placed graphs later instantiations pile up in the context, and what a second trace reports.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import datetime
import gc
import glob
import io
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .graphs import quiet_fds
from .measure import Timing, fmt_bytes, fmt_ms, time_cpu_once

CPUS = 2
CHAINS = 8  # towers; every other one under tf.device('/CPU:1')
LENGTH = 50  # elementwise ops per chain (two chains per tower)
SIZE = 128  # x is SIZE x SIZE float32

# (label, key) rows of the side-by-side table, baseline first.
ROWS = [
    ("plain call of the instantiated function (baseline)", "plain"),
    ("TF2 profiler alone: start + call + stop, .xplane.pb read back", "profiler"),
    ("first call after clear_kernel_cache() (re-instantiation, Grappler on)", "reinstantiate"),
    (
        "first call after clear_kernel_cache() with Grappler off (the trace's setting), "
        "no run metadata",
        "reinstantiate_off",
    ),
    (
        "first call after Grappler is switched back on, no clear_kernel_cache() (as after a "
        "call with Grappler off)",
        "switch_back",
    ),
    (
        "TF alone doing the trace's TF work: clear cache, Grappler off, run metadata on, "
        "warm-up call, profiled call, export, clear cache",
        "bare",
    ),
    ("**trace_placement(f, x)**, end to end (warmup=1, steps=1)", "trace"),
    ("the user's next call after trace_placement", "after_trace"),
]

# Phases of trace_placement, in the order they happen.
PHASES = [
    ("capture", "redirect native output (enter + exit)"),
    ("settings_enter", "settings + clear_kernel_cache() on entry"),
    ("warmup_call", "warm-up call: instantiate (Grappler off, placed graphs recorded) + run"),
    ("profiler_start", "tf.profiler.experimental.start"),
    ("traced_call", "traced call (profiler and run metadata on)"),
    ("profiler_stop", "tf.profiler.experimental.stop (collect, write .xplane.pb)"),
    ("export", "context.export_run_metadata() (placed graphs)"),
    ("unique_graphs", "_unique_graphs (serialize each graph to de-duplicate)"),
    ("settings_exit", "settings restored + clear_kernel_cache() on exit"),
    ("xspace", "records_from_xspace (parse XSpace, op events)"),
    ("graphs_that_ran", "_graphs_that_ran"),
    ("function_names", "_function_names (FunctionDefs of the context)"),
    ("read_graphs", "read_function_graphs (names, requests, facts)"),
    ("place_records", "_place_records"),
    ("frames", "frames_from_records (frames + reasons)"),
]
TF_PHASES = {
    "settings_enter",
    "warmup_call",
    "profiler_start",
    "traced_call",
    "profiler_stop",
    "export",
    "settings_exit",
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# The workload
# ---------------------------------------------------------------------------------------------
def start_tensorflow(cpus: int = CPUS) -> Any:
    """Import TensorFlow and split the CPU into ``cpus`` logical devices (before it starts)."""
    with quiet_fds():
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(cpus)]
        )
        tf.config.list_logical_devices()  # start the runtime now, not in the first timed call
    return tf


def make_function(
    tf: Any, chains: int = CHAINS, length: int = LENGTH, size: int = SIZE
) -> tuple[Any, Any]:
    """``(f, x)``: a ``tf.function`` of towers over the logical CPUs, and its argument."""
    devices = len(tf.config.list_logical_devices("CPU"))
    weights = [
        tf.Variable(
            tf.random.stateless_normal((size, size), seed=(k, 0)) * (1 / size**0.5), name=f"w{k}"
        )
        for k in range(chains // 2)
    ]
    biases = [tf.Variable(tf.zeros((size,)), name=f"b{k}") for k in range(chains // 2)]

    def elementwise(y: Any, n: int, tower: int) -> Any:
        for j in range(n):
            kind = (j + tower) % 6
            if kind == 0:
                y = y * 0.99
            elif kind == 1:
                y = y + 0.01
            elif kind == 2:
                y = tf.tanh(y)
            elif kind == 3:
                y = tf.maximum(y, -2.0)
            elif kind == 4:
                y = tf.sigmoid(y) - 0.5
            else:
                y = tf.abs(y) * 0.5 + y
        return y

    @tf.function
    def towers(x: Any) -> Any:
        outs = []
        for c in range(chains):
            k = c // 2
            with tf.device(f"/CPU:{c % devices}"):
                y = elementwise(x + float(c), length, c)
                y = tf.nn.relu(tf.matmul(y, weights[k]) + biases[k])
                mean = tf.reduce_mean(y, axis=-1, keepdims=True)
                centered = y - mean
                variance = tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True)
                y = centered * tf.math.rsqrt(variance + 1e-5)
                y = elementwise(y, length, c + 3)
            outs.append(y)
        return tf.add_n(outs)

    x = tf.random.stateless_uniform((size, size), seed=(1, 2))
    return towers, x


def graph_nodes(tf: Any, f: Any, x: Any) -> tuple[int, dict[str, int]]:
    """Nodes of the function's graph (what the user wrote), and how many of each type."""
    graph_def = f.get_concrete_function(x).graph.as_graph_def()
    types: dict[str, int] = {}
    for node in graph_def.node:
        types[node.op] = types.get(node.op, 0) + 1
    return len(graph_def.node), dict(sorted(types.items(), key=lambda kv: -kv[1]))


def executed_nodes_user_settings(f: Any, x: Any) -> int:
    """Nodes the runtime executes with the user's settings (Grappler on): placed graphs of one
    re-instantiation, read through run metadata (graph collection turned off again after)."""
    from tensorflow.python.eager import context

    ctx = context.context()
    ctx.clear_kernel_cache()
    ctx.enable_run_metadata()
    try:
        f(x)
        metadata = ctx.export_run_metadata()
    finally:
        ctx.disable_run_metadata()
        ctx.disable_graph_collection()
    return sum(len(p.node) for g in metadata.function_graphs for p in g.partition_graphs)


# ---------------------------------------------------------------------------------------------
# What each row times
# ---------------------------------------------------------------------------------------------
def xplane_bytes(logdir: str) -> bytes:
    files = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    if not files:
        raise RuntimeError(f"the profiler wrote no .xplane.pb under {logdir}")
    with open(files[0], "rb") as handle:
        return handle.read()


def profiled_call(tf: Any, f: Any, x: Any, logdir: str) -> bytes:
    """What a user pays to profile the call: start, call, stop, read the XSpace back."""
    tf.profiler.experimental.start(logdir)
    try:
        f(x)
    finally:
        tf.profiler.experimental.stop()
    return xplane_bytes(logdir)


def reinstantiated_call(f: Any, x: Any) -> Any:
    from tensorflow.python.eager import context

    context.context().clear_kernel_cache()
    return f(x)


def reinstantiated_call_without_grappler(tf: Any, f: Any, x: Any) -> Any:
    """The first call after clearing the cache, with Grappler off (then turned back on)."""
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    try:
        return reinstantiated_call(f, x)
    finally:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": False})


def switched_back_call(tf: Any, f: Any, x: Any) -> None:
    """One call with Grappler off, then Grappler back on (the cache is not cleared): the
    caller times the next plain call, to see whether it instantiates again."""
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    try:
        f(x)
    finally:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": False})


def bare_traced_call(tf: Any, f: Any, x: Any, logdir: str) -> tuple[Any, bytes]:
    """TensorFlow alone, doing what ``trace_placement(f, x)`` asks TensorFlow to do.

    Soft placement on, Grappler off, kernel cache cleared, run metadata on, one warm-up call,
    one call under the profiler, the placed graphs exported, the XSpace read back, settings
    put back, kernel cache cleared again. No output capture, no frames.
    """
    from tensorflow.python.eager import context

    ctx = context.context()
    soft = tf.config.get_soft_device_placement()
    tf.config.set_soft_device_placement(True)
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    ctx.clear_kernel_cache()
    ctx.enable_run_metadata()
    try:
        f(x)
        tf.profiler.experimental.start(logdir)
        try:
            f(x)
        finally:
            tf.profiler.experimental.stop()
        metadata = ctx.export_run_metadata()
    finally:
        ctx.disable_run_metadata()
        ctx.disable_graph_collection()
        tf.config.set_soft_device_placement(soft)
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": False})
        ctx.clear_kernel_cache()
    return metadata, xplane_bytes(logdir)


@contextlib.contextmanager
def fresh_dir() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="tfplace-bench-profile-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Timing trace_placement's phases: wrappers around function_tracer's helpers, this process only
# ---------------------------------------------------------------------------------------------
class PhaseTimer:
    """Seconds per phase of one ``trace_placement`` call, and what the trace read."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls = 0
        self.sizes: dict[str, int] = {}

    def add(self, key: str, seconds: float) -> None:
        self.seconds[key] = self.seconds.get(key, 0.0) + seconds

    def timed(self, key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(key, time.perf_counter() - start)

        return wrapper

    def timed_context(self, enter: str, leave: str, manager: Callable[..., Any]) -> Any:
        @contextlib.contextmanager
        def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
            start = time.perf_counter()
            context_manager = manager(*args, **kwargs)
            value = context_manager.__enter__()
            self.add(enter, time.perf_counter() - start)
            try:
                yield value
            except BaseException:
                start = time.perf_counter()
                if not context_manager.__exit__(*sys.exc_info()):
                    raise
                self.add(leave, time.perf_counter() - start)
            else:
                start = time.perf_counter()
                context_manager.__exit__(None, None, None)
                self.add(leave, time.perf_counter() - start)

        return wrapper


@contextlib.contextmanager
def timing_phases(tf: Any) -> Iterator[PhaseTimer]:
    """Wrap ``function_tracer``'s helpers (and the profiler/export calls it makes) in timers."""

    from tfplace_widget._tracing import function as ft

    timer = PhaseTimer()

    def user_call(*args: Any, **kwargs: Any) -> Any:
        timer.calls += 1
        key = "warmup_call" if timer.calls == 1 else "traced_call"  # warmup=1, steps=1
        return timer.timed(key, original["_user_call"])(*args, **kwargs)

    # Signatures are passed through: only the first argument (or the result) is looked at.
    def unique_graphs(function_graphs: Any, *args: Any, **kwargs: Any) -> Any:
        timer.sizes["graphs_exported"] = len(function_graphs)
        timed = timer.timed("unique_graphs", original["_unique_graphs"])
        return timed(function_graphs, *args, **kwargs)

    def xspace(data: bytes, *args: Any, **kwargs: Any) -> Any:
        timer.sizes["xspace_bytes"] = len(data)
        return timer.timed("xspace", original["records_from_xspace"])(data, *args, **kwargs)

    def graphs_that_ran(*args: Any, **kwargs: Any) -> list:
        ran = timer.timed("graphs_that_ran", original["_graphs_that_ran"])(*args, **kwargs)
        timer.sizes["graphs_read"] = len(ran)
        timer.sizes["executed_nodes"] = sum(len(p.node) for g in ran for p in g.partition_graphs)
        timer.sizes["run_metadata_bytes"] = sum(g.ByteSize() for g in ran)
        return ran

    replacements = {
        "capture_native_output": timer.timed_context(
            "capture", "capture", ft.capture_native_output
        ),
        "_tf_settings": timer.timed_context("settings_enter", "settings_exit", ft._tf_settings),
        "_user_call": user_call,
        "_unique_graphs": unique_graphs,
        "records_from_xspace": xspace,
        "_graphs_that_ran": graphs_that_ran,
        "_function_names": timer.timed("function_names", ft._function_names),
        "read_function_graphs": timer.timed("read_graphs", ft.read_function_graphs),
        "_place_records": timer.timed("place_records", ft._place_records),
        "frames_from_records": timer.timed("frames", ft.frames_from_records),
    }
    with installed(tf, ft, timer, replacements) as original:  # the wrappers call the originals
        yield timer


@contextlib.contextmanager
def installed(tf: Any, module: Any, timer: PhaseTimer, replacements: dict) -> Iterator[dict]:
    """``module``'s functions replaced by ``replacements`` (by name), and the profiler's
    start/stop and ``export_run_metadata`` timed, while inside; all put back after. Yields the
    replaced functions by name."""
    from tensorflow.python.eager import context

    original = {name: getattr(module, name) for name in replacements}
    profiler = tf.profiler.experimental
    start, stop = profiler.start, profiler.stop
    export = context.Context.export_run_metadata
    try:
        for name, fn in replacements.items():
            setattr(module, name, fn)
        profiler.start = timer.timed("profiler_start", start)
        profiler.stop = timer.timed("profiler_stop", stop)
        context.Context.export_run_metadata = timer.timed("export", export)
        yield original
    finally:
        for name, fn in original.items():
            setattr(module, name, fn)
        profiler.start, profiler.stop = start, stop
        context.Context.export_run_metadata = export


def stop_graph_collection() -> None:
    """Turn off what ``enable_run_metadata()`` left on (see the module's docstring)."""
    from tensorflow.python.eager import context

    context.context().disable_graph_collection()


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------
def measure(
    repeats: int, plain_calls: int, cprofile_top: int = 0, length: int = LENGTH
) -> dict[str, Any]:
    started = time.perf_counter()
    load_at_start = load_average()
    log(f"function mode: TensorFlow with {CPUS} logical CPUs")
    tf = start_tensorflow()
    from tfplace_widget import trace_placement

    f, x = make_function(tf, length=length)
    first_s, _, _ = time_cpu_once(lambda: f(x))
    n_nodes, types = graph_nodes(tf, f, x)
    executed_user = executed_nodes_user_settings(f, x)
    log(
        f"function mode: f has {n_nodes:,} ops in its graph; first call (Python tracing + "
        f"instantiation) {fmt_ms(first_s)}; {repeats} repeats"
    )

    # Warm every path once (imports, the profiler's first start, pandas), untimed.
    trace = trace_placement(f, x)
    stop_graph_collection()
    with fresh_dir() as logdir, quiet_fds():
        profiled_call(tf, f, x, logdir)
    with fresh_dir() as logdir, quiet_fds():
        bare_traced_call(tf, f, x, logdir)
    f(x)

    timings = {key: Timing() for _, key in ROWS}
    phases: list[dict[str, float]] = []
    sizes: dict[str, Any] = {}
    for repeat in range(repeats):
        with timing_phases(tf) as timer:
            wall, cpu, trace = time_cpu_once(lambda: trace_placement(f, x))
        stop_graph_collection()
        timings["trace"].seconds.append(wall)
        timings["trace"].cpu.append(cpu)
        phases.append(dict(timer.seconds, total=wall))
        sizes = dict(
            timer.sizes,
            ops=len(trace.ops),
            events=len(trace.events),
            transfers=len(trace.transfers),
            ops_by_how={k: int(v) for k, v in trace.ops["how"].value_counts().items() if v},
            devices=list(trace.devices),
        )

        wall, cpu, _ = time_cpu_once(lambda: f(x))
        timings["after_trace"].seconds.append(wall)
        timings["after_trace"].cpu.append(cpu)

        gc.collect()
        for _ in range(plain_calls):
            cpu0, start = time.process_time(), time.perf_counter()
            f(x)
            timings["plain"].seconds.append(time.perf_counter() - start)
            timings["plain"].cpu.append(time.process_time() - cpu0)

        with fresh_dir() as logdir, quiet_fds():  # TF's profiler logs; not timed
            wall, cpu, space = time_cpu_once(lambda logdir=logdir: profiled_call(tf, f, x, logdir))
        timings["profiler"].seconds.append(wall)
        timings["profiler"].cpu.append(cpu)
        sizes["profiler_xspace_bytes"] = len(space)

        wall, cpu, _ = time_cpu_once(lambda: reinstantiated_call(f, x))
        timings["reinstantiate"].seconds.append(wall)
        timings["reinstantiate"].cpu.append(cpu)

        wall, cpu, _ = time_cpu_once(lambda: reinstantiated_call_without_grappler(tf, f, x))
        timings["reinstantiate_off"].seconds.append(wall)
        timings["reinstantiate_off"].cpu.append(cpu)

        switched_back_call(tf, f, x)  # instantiates with Grappler off: not timed
        wall, cpu, _ = time_cpu_once(lambda: f(x))
        timings["switch_back"].seconds.append(wall)
        timings["switch_back"].cpu.append(cpu)

        with fresh_dir() as logdir, quiet_fds():
            wall, cpu, _ = time_cpu_once(lambda logdir=logdir: bare_traced_call(tf, f, x, logdir))
        timings["bare"].seconds.append(wall)
        timings["bare"].cpu.append(cpu)
        f(x)  # instantiated with the user's settings again for the next repeat
        log(
            f"function mode: repeat {repeat + 1}/{repeats}: trace_placement "
            f"{fmt_ms(timings['trace'].seconds[-1])}, plain call "
            f"{fmt_ms(statistics.median(timings['plain'].seconds[-plain_calls:]))}"
        )

    stale = second_trace_check(f, x)
    profile_text = cprofile_trace(f, x, cprofile_top) if cprofile_top else ""
    return {
        "function": {
            "graph_nodes": n_nodes,
            "types": types,
            "executed_nodes_grappler_on": executed_user,
            "chains": CHAINS,
            "length": length,
            "size": SIZE,
            "first_call_s": first_s,
        },
        "timings": {key: {"seconds": t.seconds, "cpu": t.cpu} for key, t in timings.items()},
        "phases": phases,
        "sizes": sizes,
        "stale_check": stale,
        "cprofile": profile_text,
        "plain_calls": plain_calls,
        "repeats": repeats,
        "machine": machine(tf, load_at_start),
        "wall_s": time.perf_counter() - started,
    }


HELD_AFTER = 5  # re-instantiations after a trace in the held-graphs check


def second_trace_check(f: Any, x: Any) -> dict[str, Any]:
    """What a trace leaves behind, graph collection left as the package leaves it.

    1. A trace, a plain call (it instantiates with Grappler on, and TF may store its placed
       graph), a second trace: do both report the same ops?
    2. A trace, then ``HELD_AFTER`` re-instantiations: how many placed graphs (and bytes) does
       the context hold afterwards, waiting for an export that may never come?
    """
    from tensorflow.python.eager import context

    from tfplace_widget import trace_placement

    ctx = context.context()
    first = trace_placement(f, x)
    f(x)
    second = trace_placement(f, x)
    stop_graph_collection()
    f(x)

    trace_placement(f, x)
    for _ in range(HELD_AFTER):
        reinstantiated_call(f, x)
    ctx.enable_run_metadata()
    try:
        held = ctx.export_run_metadata()
    finally:
        ctx.disable_run_metadata()
        stop_graph_collection()
    f(x)

    def consts(trace: Any) -> int:
        return int((trace.ops["type"] == "Const").sum())

    return {
        "first_ops": len(first.ops),
        "second_ops": len(second.ops),
        "first_consts": consts(first),
        "second_consts": consts(second),
        "reinstantiations": HELD_AFTER,
        "held_graphs": len(held.function_graphs),
        "held_bytes": held.ByteSize(),
    }


def cprofile_trace(f: Any, x: Any, top: int) -> str:
    """One more trace under cProfile: the ``top`` functions by cumulative time."""
    from tfplace_widget import trace_placement

    profile = cProfile.Profile()
    profile.enable()
    trace_placement(f, x)
    profile.disable()
    stop_graph_collection()
    f(x)
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def package_state() -> str:
    """``HEAD <commit>``, and whether ``tfplace_widget/`` has uncommitted changes."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "tfplace_widget"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    if not head:
        return "unknown"
    return f"HEAD {head}" + (" + uncommitted changes in tfplace_widget/" if dirty else "")


def load_average() -> str:
    with contextlib.suppress(OSError):
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return "unknown"


def machine(tf: Any, load_at_start: str) -> dict[str, str]:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "tensorflow": tf.__version__,
        "python": sys.version.split()[0],
        "tfplace_widget": package_state(),
        "load average at start": load_at_start,
        "load average at end": load_average(),
    }


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------
def _timing(results: dict, key: str) -> Timing:
    t = results["timings"][key]
    return Timing(list(t["seconds"]), list(t["cpu"]))


def render(results: dict, heading: str = "###") -> str:
    """The results as markdown: the side-by-side table, the phases, the stale-graph check."""
    lines: list[str] = []
    add = lines.append
    fn, sizes, m = results["function"], results["sizes"], results["machine"]
    plain = _timing(results, "plain")
    trace = _timing(results, "trace")
    bare = _timing(results, "bare")
    command = results.get("command", "python -m benchmarks.function_mode")
    add(f"{heading} TF2 function mode: the cost of tracing a {fn['graph_nodes']:,}-op tf.function")
    add("")
    add(
        f"Measured {m['date']} with `{command}`"
        f" in one process of its own (logical CPUs are set before TensorFlow starts): "
        f"{CPUS} logical CPUs ({m['nproc']} cores: {m['cpu']}; TensorFlow {m['tensorflow']}; "
        f"tfplace_widget at {m.get('tfplace_widget', 'unknown')}; load average "
        f"{m.get('load average at start', '?')} at start, {m['load average at end']} at end). "
        f"`f` ({fn['chains']} towers of elementwise chains around a matmul + layer norm, every "
        f"other tower under `tf.device('/CPU:1')`, x {fn['size']}x{fn['size']} float32) has "
        f"**{fn['graph_nodes']:,} ops** in its graph "
        f"({', '.join(f'{k} {v}' for k, v in list(fn['types'].items())[:8])}, ...); the runtime "
        f"executes {fn['executed_nodes_grappler_on']:,} nodes with Grappler on and "
        f"{sizes.get('executed_nodes', 0):,} with it off (the trace's setting). Its first call "
        f"ever (Python tracing + instantiation) took {fmt_ms(fn['first_call_s'])}. Times are "
        f"median [min–max] over n runs, wall clock ({results['repeats']} repeats; the plain "
        f"call {results['plain_calls']} times per repeat)."
    )
    add("")
    add("| what | wall | x plain call | CPU time (median) | x plain call, CPU |")
    add("|---|---:|---:|---:|---:|")
    plain_cpu = statistics.median(plain.cpu)

    def times(value: float, bold: bool) -> str:
        text = f"{value:.1f}x" if value < 10 else f"{value:,.0f}x"
        return f"**{text}**" if bold else text

    for label, key in ROWS:
        t = _timing(results, key)
        cpu = statistics.median(t.cpu)
        add(
            f"| {label} | {t.ms()} | {times(t.median / plain.median, key == 'trace')} "
            f"| {fmt_ms(cpu)} | {times(cpu / plain_cpu, key == 'trace')} |"
        )
    add("")
    phases = results["phases"]
    own = statistics.median(
        p["total"] - sum(p.get(k, 0.0) for k in TF_PHASES) for p in phases
    )  # per repeat: the call's wall time minus TensorFlow's phases
    add(
        f"trace_placement / TF alone doing the same TF work: **{trace.median / bare.median:.2f}x** "
        f"(medians; in CPU time "
        f"{statistics.median(trace.cpu) / statistics.median(bare.cpu):.2f}x); the tool's own work (the call minus TensorFlow's phases below) "
        f"{fmt_ms(own)}. The trace: "
        f"{sizes['ops']:,} op rows, {sizes['events']:,} events (the profiler times no `Const`), "
        f"{sizes['transfers']:,} transfers; {fmt_bytes(sizes.get('xspace_bytes', 0))} of XSpace "
        f"and {fmt_bytes(sizes.get('run_metadata_bytes', 0))} of placed graphs read "
        f"({sizes.get('graphs_exported', 0)} function graph(s) exported)."
    )
    add("")
    add(
        "Where trace_placement's time goes (medians over the repeats; phases timed by "
        "wrappers around `tfplace_widget._tracing.function`'s helpers, in the benchmark "
        "process only):"
    )
    add("")
    add("| phase | | median | share of the trace |")
    add("|---|---|---:|---:|")
    total = statistics.median(p["total"] for p in phases)
    tf_sum = tool_sum = 0.0
    for key, label in PHASES:
        values = [p.get(key, 0.0) for p in phases]
        value = statistics.median(values)
        who = "TensorFlow" if key in TF_PHASES else "tfplace_widget"
        if key in TF_PHASES:
            tf_sum += value
        else:
            tool_sum += value
        add(f"| {label} | {who} | {fmt_ms(value)} | {value / total:.0%} |")
    rests = [p["total"] - sum(p.get(k, 0.0) for k, _ in PHASES) for p in phases]
    rest = statistics.median(rests)
    add(
        f"| rest (option checks, temporary directory, glob + read of the .xplane.pb, "
        f"list_logical_devices) | tfplace_widget | {fmt_ms(rest)} | {rest / total:.0%} |"
    )
    add(
        f"| **sum: TensorFlow's phases / tfplace_widget's** | | {fmt_ms(tf_sum)} / "
        f"{fmt_ms(tool_sum + rest)} | {tf_sum / total:.0%} / {(tool_sum + rest) / total:.0%} |"
    )
    add("")
    stale = results.get("stale_check")
    if stale:
        add(
            "A second trace after a plain call (graph collection as trace_placement leaves it): "
            f"{stale['first_ops']:,} op rows ({stale['first_consts']:,} `Const`) in "
            f"the first trace, {stale['second_ops']:,} ({stale['second_consts']:,} `Const`) in "
            "the second"
            + (
                ": the second trace's rows come from the graph Grappler optimised in the "
                "user's call, not from the graph that was traced."
                if stale["second_ops"] != stale["first_ops"]
                else " (the same)."
            )
        )
        add("")
        if "held_graphs" in stale:
            add(
                f"Left behind: after a trace and {stale['reinstantiations']} re-instantiations of "
                f"`f` (the user's settings), the context held {stale['held_graphs']} placed "
                f"graph(s), {fmt_bytes(stale['held_bytes'])} serialized"
                + (
                    ": graph collection, which `enable_run_metadata()` turned on, is still on, "
                    "and every later instantiation adds its graph until the next export."
                    if stale["held_graphs"]
                    else "."
                )
            )
            add("")
    return "\n".join(lines)


def run_in_subprocess(quick: bool) -> dict | None:
    """Run this module in a fresh process (logical CPUs need a runtime that has not started);
    its log goes to stderr, its numbers come back as JSON."""
    import subprocess

    with tempfile.TemporaryDirectory(prefix="tfplace-bench-") as tmp:
        out = Path(tmp) / "function_mode.json"
        command = [sys.executable, "-m", "benchmarks.function_mode", "--json", str(out)]
        if quick:
            command.append("--quick")
        done = subprocess.run(
            command, cwd=Path(__file__).resolve().parent.parent, stdout=subprocess.DEVNULL
        )
        if done.returncode != 0 or not out.exists():
            print(f"NOTE: function-mode benchmark failed (exit {done.returncode}).")
            return None
        return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.function_mode", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 7")
    parser.add_argument("--repeats", type=int, help="repeats (default 7, quick 3)")
    parser.add_argument(
        "--length",
        type=int,
        default=LENGTH,
        help=f"elementwise ops per chain (default {LENGTH}: 2,015 ops; 500: 18,815)",
    )
    parser.add_argument("--json", type=Path, help="save the raw numbers as JSON here")
    parser.add_argument(
        "--cprofile", type=int, default=0, metavar="N", help="print the top N of one traced call"
    )
    args = parser.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 7)
    results = measure(repeats, plain_calls=50, cprofile_top=args.cprofile, length=args.length)
    flags = [
        "--quick" if args.quick else "",
        f"--repeats {args.repeats}" if args.repeats else "",
        f"--length {args.length}" if args.length != LENGTH else "",
    ]
    results["command"] = " ".join(["python -m benchmarks.function_mode", *filter(None, flags)])
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    print(render(results))
    if results["cprofile"]:
        print(results["cprofile"])
    log(f"function mode: {results['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
