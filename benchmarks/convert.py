"""RunMetadata -> PlacementTrace next to timeline.py, with where the conversion's time goes (issue 25).

``python -m benchmarks.convert [--sizes 10000,100000] [--repeats 5]`` builds the benchmark graph
(``benchmarks/graphs.py``: chains of AddV2 over 4 CPUs) for each size, traces it once, and
times in this one process, interleaved, repeat by repeat:

- ``timeline.Timeline(step_stats, graph).generate_chrome_trace_format()`` (TensorFlow's own);
- ``PlacementTrace.from_run_metadata(run_metadata, graph)`` (everything the trace has: all
  columns, reasons, kernels, raw protos);
- the conversion's stages alone, on the same protos: the built graph's GraphDef
  (``as_graph_def``), the graph facts (``facts_from_graph``, kernel facts included), the
  step_stats records, the executed (partition) graph, the frames with reasons, and ``trace.raw``
  (serializing the protos); and the floor of reading the needed fields from Python
  (``benchmarks/floor.py``).

Prints medians (wall and process CPU time) and the ratio timeline.py / PlacementTrace, the
issue's target being at least 3x at 10k and 100k ops.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
from typing import Any

from benchmarks import floor, graphs
from benchmarks.measure import fmt_ms, interleaved

TARGET = 3.0
DEVICES = 4


def stages(metadata: Any, graph: Any) -> dict[str, Any]:
    """The conversion's parts, each alone, on the protos of one traced run."""
    from tensorflow.python.client import timeline

    from tfplace_widget import PlacementTrace
    from tfplace_widget.model import frames, graphfacts
    from tfplace_widget.model.records import Records
    from tfplace_widget.sources import raw, run_metadata

    graph_def = graph.as_graph_def()
    facts = graphfacts.facts_from_graph(graph, graph_def=graph_def)
    records = Records()
    start = run_metadata.records_from_step_stats(metadata.step_stats, records)
    executed = run_metadata.executed_graph(metadata.partition_graphs)

    def fresh_records() -> Records:
        return run_metadata.records_from_step_stats(metadata.step_stats, Records())

    return {
        "timeline.py": lambda: timeline.Timeline(
            metadata.step_stats, graph
        ).generate_chrome_trace_format(),
        "PlacementTrace": lambda: PlacementTrace.from_run_metadata(metadata, graph),
        "  as_graph_def": graph.as_graph_def,
        "  graph facts": lambda: graphfacts.facts_from_graph(graph, graph_def=graph_def),
        "  step_stats records": fresh_records,
        "  executed graph": lambda: run_metadata.executed_graph(metadata.partition_graphs),
        "  frames + reasons": lambda: frames.frames_from_records(
            copy.copy(records), [start], executed, facts
        ),
        "  trace.raw": lambda: raw.raw_protos([metadata], graph_def),
        "floor: read the fields": lambda: floor.read_fields_only(metadata, graph),
    }


def run(n_ops: int, repeats: int) -> dict[str, Any]:
    graph_def = graphs.make_graph_def(n_ops, devices=DEVICES)
    traced = graphs.bare_traced_run(graph_def, graphs.session_config(DEVICES))
    fns = stages(traced.run_metadata, traced.graph)
    for fn in fns.values():  # warm caches (kernel registry, imports) before timing
        fn()
    timings = interleaved(fns, repeats)
    return {
        "n_ops": n_ops,
        "repeats": repeats,
        "wall": {name: t.median for name, t in timings.items()},
        "cpu": {name: statistics.median(t.cpu) for name, t in timings.items()},
        "wall_all": {name: t.seconds for name, t in timings.items()},
    }


def render(results: list[dict[str, Any]]) -> str:
    lines = []
    for r in results:
        wall, cpu = r["wall"], r["cpu"]
        ratio = wall["timeline.py"] / wall["PlacementTrace"]
        cpu_ratio = cpu["timeline.py"] / cpu["PlacementTrace"]
        lines += [
            f"{r['n_ops']:,} ops, medians of {r['repeats']} interleaved repeats: "
            f"ratio **{ratio:.2f}x** (CPU time {cpu_ratio:.2f}x; target {TARGET:.0f}x)",
            "",
            "| | wall | CPU | share of PlacementTrace (CPU) |",
            "|---|---:|---:|---:|",
        ]
        for name in wall:
            share = cpu[name] / cpu["PlacementTrace"]
            lines.append(
                f"| {name.strip()}{' (stage)' if name.startswith('  ') else ''} "
                f"| {fmt_ms(wall[name])} | {fmt_ms(cpu[name])} | {share:.0%} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[10_000, 100_000]
    )
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    results = []
    for n_ops in args.sizes:
        print(f"{n_ops:,} ops: tracing, then timing", file=sys.stderr, flush=True)
        results.append(run(n_ops, args.repeats))
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
