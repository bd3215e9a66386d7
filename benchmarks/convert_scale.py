"""Issue 35's conversion targets at 10k, 100k and 1M ops, each size in its own process.

``python -m benchmarks.convert_scale --sizes 10000,100000,1000000 --repeats 3 --protos DIR``
reads (or traces and keeps, as ``benchmarks.convert --protos`` does) the benchmark graph's protos
and, in a fresh process per size (a 1M-op RunMetadata is several GB: one at a time), measures:

- **the RunMetadata's own in-memory size**: the growth of resident memory (``VmRSS``) from
  parsing its serialized bytes into the ``RunMetadata`` object a session fills in (upb's
  arena), the bytes themselves already read;
- **the conversion's peak**: ``PlacementTrace.from_run_metadata`` after a first (warming)
  conversion was dropped and freed, the peak (``VmHWM``, reset through ``/proc/self/clear_refs``)
  less the resident memory before it; and what stays (the trace kept);
- **CPU and wall time**, interleaved repeat by repeat, medians: ``timeline.py``
  (``Timeline(step_stats, graph).generate_chrome_trace_format()``), the same with
  ``show_memory=True`` (its allocator counters: what ``trace.memory`` corresponds to; only up
  to ``SHOW_MEMORY_MAX_OPS``: at 1M ops it grew past 23 GB of resident memory and the kernel's
  OOM killer ended the process, 2026-12-07 18:30 UTC), the conversion, and the
  floor (``benchmarks/floor.py``: reading the fields the trace needs, allocator records
  included), and two steps above the floor that any conversion pays: the same reads kept in
  lists (``read_and_keep``), and then one dict by op name per source (``read_keep_and_key``),
  which joining the sources by name needs (a second table: each as a multiple of the floor).

The targets (issue 35): timeline.py / conversion >= 2 (CPU), conversion / floor <= ~1.5,
peak / RunMetadata size <= 2. Run it with another ``PYTHONPATH`` (e.g. main's package from
``git archive``) for the "before".
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import statistics
import subprocess
import sys
from typing import Any

from benchmarks.measure import fmt_bytes, fmt_ms, interleaved

# timeline.py with show_memory=True is not run above this many ops: at 1M it held over 23 GB
# (its allocator counters, one per allocation record) and was OOM-killed on a 24 GB machine.
SHOW_MEMORY_MAX_OPS = 100_000


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def _settled_rss() -> int:
    """Resident bytes after a full collection and freed heap given back to the system."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return _status("VmRSS")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def measure(n_ops: int, repeats: int, protos: str) -> dict[str, Any]:
    """One size's numbers, in this process (see the module's docstring)."""
    import tensorflow as tf
    from tensorflow.python.client import timeline

    from benchmarks import convert, floor
    from tfplace_widget import PlacementTrace

    convert.traced_protos(n_ops, protos)  # traced and kept when not there yet
    with open(os.path.join(protos, f"run_metadata_{n_ops}.pb"), "rb") as f:
        data = f.read()
    before = _settled_rss()
    metadata = tf.compat.v1.RunMetadata()
    metadata.ParseFromString(data)
    metadata_rss = _settled_rss() - before
    del data
    graph_def = tf.compat.v1.GraphDef()
    with open(os.path.join(protos, f"graph_def_{n_ops}.pb"), "rb") as f:
        graph_def.ParseFromString(f.read())
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    del graph_def

    trace = PlacementTrace.from_run_metadata(metadata, graph)  # warm: imports, caches
    del trace
    before = _settled_rss()
    _reset_peak()
    trace = PlacementTrace.from_run_metadata(metadata, graph)
    peak = _status("VmHWM") - before
    kept = _settled_rss() - before
    del trace
    gc.collect()

    runs = {
        "timeline.py": lambda: timeline.Timeline(
            metadata.step_stats, graph
        ).generate_chrome_trace_format(),
        "timeline.py, show_memory": lambda: timeline.Timeline(
            metadata.step_stats, graph
        ).generate_chrome_trace_format(show_memory=True),
        "PlacementTrace": lambda: PlacementTrace.from_run_metadata(metadata, graph),
        "floor": lambda: floor.read_fields_only(metadata, graph),
        "floor, kept": lambda: floor.read_and_keep(metadata, graph),
        "floor, kept and keyed": lambda: floor.read_keep_and_key(metadata, graph),
    }
    if n_ops > SHOW_MEMORY_MAX_OPS:
        del runs["timeline.py, show_memory"]
    timings = interleaved(runs, repeats)
    return {
        "n_ops": n_ops,
        "repeats": repeats,
        "serialized": os.path.getsize(os.path.join(protos, f"run_metadata_{n_ops}.pb")),
        "metadata_rss": metadata_rss,
        "peak": peak,
        "kept": kept,
        "cpu": {name: statistics.median(t.cpu) for name, t in timings.items()},
        "wall": {name: t.median for name, t in timings.items()},
        "load": os.getloadavg(),
    }


def render(results: list[dict[str, Any]]) -> str:
    lines = [
        "| ops | timeline.py CPU (wall) | timeline.py show_memory CPU (wall) "
        "| conversion CPU (wall) | floor CPU (wall) "
        "| timeline / conversion (CPU) | timeline show_memory / conversion (CPU) "
        "| conversion / floor (CPU) | RunMetadata in memory "
        "(serialized) | conversion peak (kept) | peak / RunMetadata | load after |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        cpu, wall = r["cpu"], r["wall"]
        cells = [
            f"{fmt_ms(cpu[k])} ({fmt_ms(wall[k])})" if k in cpu else "not run"
            for k in ("timeline.py", "timeline.py, show_memory", "PlacementTrace", "floor")
        ]
        with_memory = (
            f"**{cpu['timeline.py, show_memory'] / cpu['PlacementTrace']:.2f}x**"
            if "timeline.py, show_memory" in cpu
            else f"not run above {SHOW_MEMORY_MAX_OPS:,} ops"
        )
        lines.append(
            f"| {r['n_ops']:,} | "
            + " | ".join(cells)
            + f" | **{cpu['timeline.py'] / cpu['PlacementTrace']:.2f}x** "
            f"| {with_memory} "
            f"| **{cpu['PlacementTrace'] / cpu['floor']:.2f}x** "
            f"| {fmt_bytes(r['metadata_rss'])} ({fmt_bytes(r['serialized'])}) "
            f"| {fmt_bytes(r['peak'])} ({fmt_bytes(r['kept'])}) "
            f"| **{r['peak'] / r['metadata_rss']:.2f}x** "
            f"| {' '.join(f'{x:.1f}' for x in r['load'])} |"
        )
    return "\n".join(lines)


def render_above_floor(results: list[dict[str, Any]]) -> str:
    """What keeping the floor's reads costs, next to the conversion, as multiples of the floor
    (CPU medians): the issue's ~1.5x set against what any Python conversion must do."""
    lines = [
        "| ops | floor CPU | kept in lists | kept, and a dict by name per source | conversion |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        cpu = r["cpu"]
        if "floor, kept" not in cpu:
            continue
        cells = [
            f"{fmt_ms(cpu[k])} ({cpu[k] / cpu['floor']:.2f}x)"
            for k in ("floor, kept", "floor, kept and keyed", "PlacementTrace")
        ]
        lines.append(f"| {r['n_ops']:,} | {fmt_ms(cpu['floor'])} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[10_000, 100_000]
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--protos", required=True, help="keep/reuse the traced protos here")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.repeats, args.protos)))
        return 0
    results = []
    for n_ops in args.sizes:
        print(f"{n_ops:,} ops", file=sys.stderr, flush=True)
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.convert_scale", "--child", str(n_ops)]
            + ["--repeats", str(args.repeats), "--protos", args.protos],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
        print(render(results[-1:]), file=sys.stderr, flush=True)
    print(render(results))
    print()
    print(render_above_floor(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
