"""RunMetadata -> PlacementTrace next to timeline.py, with where the conversion's time goes (issue 25).

``python -m benchmarks.convert [--sizes 10000,100000] [--repeats 5]`` builds the benchmark graph
(``benchmarks/graphs.py``: chains of AddV2 over 4 CPUs) for each size, traces it once, and
times in this one process, interleaved, repeat by repeat:

- ``timeline.Timeline(step_stats, graph).generate_chrome_trace_format()`` (TensorFlow's own);
- ``PlacementTrace.from_run_metadata(run_metadata, graph)`` (everything the trace has: all
  columns, reasons, kernels, raw protos);
- ``PlacementTrace.from_run_metadata`` on the same RunMetadata with its allocator records
  (``NodeExecStats.memory``) cleared, and with every node given one (an allocation of its
  output's bytes and its free: the chains of AddV2 forward their buffers, so the traced run
  has almost none): the differences are what memory (issue 34) costs;
- the conversion's stages alone, on the same protos: the built graph's GraphDef
  (``as_graph_def``), the graph facts (``facts_from_graph``, kernel facts included), the
  step_stats records, the executed (partition) graph, the frames with reasons, and ``trace.raw``
  (serializing the protos), ``trace.memory`` and the ops' memory columns (of the run with a
  record on every node); and the floor of reading the needed fields from Python
  (``benchmarks/floor.py``).

Prints medians (wall and process CPU time) and the ratio timeline.py / PlacementTrace, the
issue's target being at least 3x at 10k and 100k ops.

Checking that a change to the conversion keeps its result (the frames equal, not just similar):
``--protos DIR`` keeps the traced protos (``run_metadata_<n>.pb``, ``graph_def_<n>.pb``) and
reuses them when present, so two versions convert the very same trace; ``--save-frames DIR``
pickles ``ops``, ``events`` and ``transfers`` of that conversion (with ``devices`` and
``inputs``), and ``--compare-frames DIR`` asserts, with ``pandas.testing.assert_frame_equal``,
that this version's frames equal the saved ones. E.g. the old version's package exported with
``git archive <commit> tfplace_widget | tar -x -C /tmp/old`` and run with
``PYTHONPATH=/tmp/old:$PWD ... --protos P --save-frames F``, then this one with
``--protos P --compare-frames F``.
"""

from __future__ import annotations

import argparse
import copy
import os
import pickle
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
    from tfplace_widget._model.records import Records
    from tfplace_widget._sources import frames, memory, raw, run_metadata
    from tfplace_widget._tfadapter import graphfacts

    graph_def = graph.as_graph_def()
    facts = graphfacts.facts_from_graph(graph, graph_def=graph_def)
    records = Records()
    start = run_metadata.records_from_step_stats(metadata.step_stats, records)
    executed = run_metadata.executed_graph(metadata.partition_graphs)

    def fresh_records() -> Records:
        return run_metadata.records_from_step_stats(metadata.step_stats, Records())

    # The same run without its allocator records: the difference is what memory costs.
    stripped = copy.deepcopy(metadata)
    for dev in stripped.step_stats.dev_stats:
        for node in dev.node_stats:
            node.ClearField("memory")
    everywhere = with_memory_everywhere(stripped)
    full = Records()
    full_start = run_metadata.records_from_step_stats(everywhere.step_stats, full)
    names, devices, ran = full.op, ["device"] * len(full.op), [True] * len(full.op)

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
        "PlacementTrace, allocator records stripped": lambda: PlacementTrace.from_run_metadata(
            stripped, graph
        ),
        "PlacementTrace, an allocator record on every node": lambda: (
            PlacementTrace.from_run_metadata(everywhere, graph)
        ),
        "  memory frame + columns": lambda: memory.memory_of_records(
            full, full_start, names, devices, ran
        ),
        "floor: read the fields": lambda: floor.read_fields_only(metadata, graph),
    }


def with_memory_everywhere(metadata: Any) -> Any:
    """A copy of ``metadata`` where each node allocated its output's bytes when it started and
    freed them when it ended, as TensorFlow records it (``AllocatorMemoryUsed``): a benchmark
    input for the worst case, every node with allocator records."""
    copied = copy.deepcopy(metadata)
    for dev in copied.step_stats.dev_stats:
        for node in dev.node_stats:
            size = (
                sum(
                    o.tensor_description.allocation_description.requested_bytes for o in node.output
                )
                or 4
            )
            used = node.memory.add(allocator_name="cpu", total_bytes=size, peak_bytes=size)
            start = node.all_start_micros
            used.allocation_records.add(alloc_micros=start, alloc_bytes=size)
            used.allocation_records.add(
                alloc_micros=start + node.all_end_rel_micros, alloc_bytes=-size
            )
    return copied


def traced_protos(n_ops: int, protos: str | None) -> tuple[Any, Any]:
    """One traced run of the benchmark graph: ``(run_metadata, tf.Graph)``; read from
    ``protos`` when it holds this size's, else traced (and written there if given)."""
    import tensorflow as tf

    if protos:
        rm_path = os.path.join(protos, f"run_metadata_{n_ops}.pb")
        graph_path = os.path.join(protos, f"graph_def_{n_ops}.pb")
        if os.path.exists(rm_path) and os.path.exists(graph_path):
            metadata = tf.compat.v1.RunMetadata()
            with open(rm_path, "rb") as f:
                metadata.ParseFromString(f.read())
            graph_def = tf.compat.v1.GraphDef()
            with open(graph_path, "rb") as f:
                graph_def.ParseFromString(f.read())
            graph = tf.Graph()
            with graph.as_default():
                tf.graph_util.import_graph_def(graph_def, name="")
            return metadata, graph
    graph_def = graphs.make_graph_def(n_ops, devices=DEVICES)
    traced = graphs.bare_traced_run(graph_def, graphs.session_config(DEVICES))
    if protos:
        os.makedirs(protos, exist_ok=True)
        with open(os.path.join(protos, f"run_metadata_{n_ops}.pb"), "wb") as f:
            f.write(traced.run_metadata.SerializeToString())
        with open(os.path.join(protos, f"graph_def_{n_ops}.pb"), "wb") as f:
            f.write(traced.graph.as_graph_def().SerializeToString())
    return traced.run_metadata, traced.graph


def frames_of(metadata: Any, graph: Any) -> dict[str, Any]:
    """What the equality check compares: the three frames, the devices and the inputs."""
    from tfplace_widget import PlacementTrace

    trace = PlacementTrace.from_run_metadata(metadata, graph)
    return {
        "ops": trace.ops,
        "events": trace.events,
        "transfers": trace.transfers,
        "devices": trace.devices,
        "inputs": trace.inputs,
        "raw": sorted(trace.raw),
    }


def compare_frames(now: dict[str, Any], saved: dict[str, Any]) -> None:
    """Raise AssertionError unless ``now`` equals ``saved`` exactly (dtypes included)."""
    import pandas.testing as pdt

    for name in ("ops", "events", "transfers"):
        pdt.assert_frame_equal(now[name], saved[name], obj=name)
    for name in ("devices", "inputs", "raw"):
        assert now[name] == saved[name], f"{name} differ"


def run(
    n_ops: int,
    repeats: int,
    protos: str | None = None,
    save_frames: str | None = None,
    compare_with: str | None = None,
) -> dict[str, Any]:
    metadata, graph = traced_protos(n_ops, protos)
    checked = ""
    if save_frames or compare_with:
        frames = frames_of(metadata, graph)
        if save_frames:
            os.makedirs(save_frames, exist_ok=True)
            with open(os.path.join(save_frames, f"frames_{n_ops}.pkl"), "wb") as f:
                pickle.dump(frames, f)
        if compare_with:
            with open(os.path.join(compare_with, f"frames_{n_ops}.pkl"), "rb") as f:
                compare_frames(frames, pickle.load(f))
            checked = f"frames equal to those saved in {compare_with}"
    fns = stages(metadata, graph)
    for fn in fns.values():  # warm caches (kernel registry, imports) before timing
        fn()
    timings = interleaved(fns, repeats)
    return {
        "n_ops": n_ops,
        "repeats": repeats,
        "checked": checked,
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
        first = len(lines)
        lines += [
            f"{r['n_ops']:,} ops, medians of {r['repeats']} interleaved repeats: "
            f"ratio **{ratio:.2f}x** (CPU time {cpu_ratio:.2f}x; target {TARGET:.0f}x)",
            "",
            "| | wall | CPU | share of PlacementTrace (CPU) |",
            "|---|---:|---:|---:|",
        ]
        if r.get("checked"):
            lines[first + 1 : first + 1] = ["", f"Checked: {r['checked']}."]
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
    parser.add_argument("--protos", help="keep/reuse the traced protos in this folder")
    parser.add_argument("--save-frames", help="pickle the frames into this folder")
    parser.add_argument("--compare-frames", help="assert the frames equal those pickled here")
    args = parser.parse_args(argv)
    results = []
    for n_ops in args.sizes:
        print(f"{n_ops:,} ops: tracing, then timing", file=sys.stderr, flush=True)
        results.append(run(n_ops, args.repeats, args.protos, args.save_frames, args.compare_frames))
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
