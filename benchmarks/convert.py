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

``--memory`` times only what memory (issue 34) adds, side by side on one RunMetadata: the
protos with an allocator record on every node (the worst case), against the same protos with
every node's ``memory`` and ``memory_stats`` cleared (the baseline: nothing for the memory
reading to read, the outputs as they were), and the parts alone (reading the step_stats with
and without the records, the memory frame and columns); the target is under 10% added.
``benchmarks/memory_share.py`` measures the same share for a baseline version of the package
and this one, side by side in one process.

Checking that a change to the conversion keeps its result (the frames equal, not just similar):
``--protos DIR`` keeps the traced protos (``run_metadata_<n>.pb``, ``graph_def_<n>.pb``) and
reuses them when present, so two versions convert the very same trace; ``--save-frames DIR``
pickles ``ops``, ``events``, ``transfers`` and ``memory`` of that conversion (with ``devices``
and ``inputs``; and ``ops`` and ``memory`` of the same protos with a record on every node), and
``--compare-frames DIR`` asserts, with ``pandas.testing.assert_frame_equal``,
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
MEMORY_TARGET = 0.10  # what memory may add to the conversion (issue 34)
MEMORY_BASELINE = "PlacementTrace, memory fields cleared (baseline)"
MEMORY_EVERYWHERE = "PlacementTrace, an allocator record on every node"
MEMORY_STAGE = "  memory frame + columns"
DEVICES = 4


def stages(metadata: Any, graph: Any) -> dict[str, Any]:
    """The conversion's parts, each alone, on the protos of one traced run."""
    from tensorflow.python.client import timeline

    from tfplace_widget import PlacementTrace
    from tfplace_widget._model.records import Records
    from tfplace_widget._sources import frames, raw, run_metadata
    from tfplace_widget._tfadapter import graphfacts

    graph_def = graph.as_graph_def()
    facts = graphfacts.facts_from_graph(graph, graph_def=graph_def)
    records = Records()
    start = run_metadata.records_from_step_stats(metadata.step_stats, records)
    executed = run_metadata.executed_graph(metadata.partition_graphs)

    def fresh_records() -> Records:
        return run_metadata.records_from_step_stats(metadata.step_stats, Records())

    # The same run without its allocator records: the difference is what memory costs.
    memory_parts = memory_stages(metadata, graph)
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
        "PlacementTrace, allocator records stripped": memory_parts[MEMORY_BASELINE],
        "PlacementTrace, an allocator record on every node": memory_parts[MEMORY_EVERYWHERE],
        "  memory frame + columns": memory_parts[MEMORY_STAGE],
        "floor: read the fields": lambda: floor.read_fields_only(metadata, graph),
    }


def without_memory(metadata: Any) -> Any:
    """A copy of ``metadata`` with every node's allocator records (``memory``) and
    persistent memory (``memory_stats``) cleared: what the conversion reads for memory gone,
    everything else (the ops' outputs included) as it was."""
    copied = copy.deepcopy(metadata)
    for dev in copied.step_stats.dev_stats:
        for node in dev.node_stats:
            node.ClearField("memory")
            node.ClearField("memory_stats")
    return copied


def memory_stages(metadata: Any, graph: Any) -> dict[str, Any]:
    """What memory (issue 34) adds to the conversion, on one RunMetadata: the same protos
    converted with a record on every node and with those fields cleared (the baseline), and
    the memory stage alone (the frame and the ops' columns from the records read)."""
    from tfplace_widget import PlacementTrace
    from tfplace_widget._model.records import Records
    from tfplace_widget._sources import frames, memory, run_metadata

    stripped = without_memory(metadata)
    everywhere = with_memory_everywhere(stripped)
    full = Records()
    full_start = run_metadata.records_from_step_stats(everywhere.step_stats, full)
    # the ops and the records' lanes and op rows as the conversion finds them beforehand
    executed = run_metadata.executed_graph(everywhere.partition_graphs)
    events, types, out_bytes, lanes = frames._events_frame(full, [full_start], executed)
    op_level = events["lane_kind"].to_numpy() == "device"
    ops, op_rows = frames._ops_frame(events, op_level, types, out_bytes, executed, True)
    names, devices, ran = ops["op"].tolist(), ops["device"].tolist(), ops["runs"].notna()
    index = memory.RecordIndex(*lanes, frames._row_of_record(len(full.op), op_rows))
    return {
        MEMORY_BASELINE: lambda: PlacementTrace.from_run_metadata(stripped, graph),
        MEMORY_EVERYWHERE: lambda: PlacementTrace.from_run_metadata(everywhere, graph),
        "  step_stats records, memory fields cleared": lambda: run_metadata.records_from_step_stats(
            stripped.step_stats, Records()
        ),
        "  step_stats records, a record on every node": lambda: (
            run_metadata.records_from_step_stats(everywhere.step_stats, Records())
        ),
        MEMORY_STAGE: lambda: memory.memory_of_records(
            full, full_start, names, devices, ran.to_numpy(), executed, index=index
        ),
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
    everywhere = PlacementTrace.from_run_metadata(
        with_memory_everywhere(without_memory(metadata)), graph
    )
    return {
        "ops": trace.ops,
        "events": trace.events,
        "transfers": trace.transfers,
        "memory": trace.memory,
        "ops, a record on every node": everywhere.ops,
        "memory, a record on every node": everywhere.memory,
        "devices": trace.devices,
        "inputs": trace.inputs,
        "raw": sorted(trace.raw),
    }


def compare_frames(now: dict[str, Any], saved: dict[str, Any]) -> None:
    """Raise AssertionError unless ``now`` equals ``saved`` exactly (dtypes included)."""
    import pandas.testing as pdt

    for name in ("ops", "events", "transfers"):
        pdt.assert_frame_equal(now[name], saved[name], obj=name)
    for name in ("memory", "ops, a record on every node", "memory, a record on every node"):
        if name in saved:  # frames saved before memory was compared have none
            pdt.assert_frame_equal(now[name], saved[name], obj=name)
    for name in ("devices", "inputs", "raw"):
        assert now[name] == saved[name], f"{name} differ"


def run(
    n_ops: int,
    repeats: int,
    protos: str | None = None,
    save_frames: str | None = None,
    compare_with: str | None = None,
    memory_only: bool = False,
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
    fns = memory_stages(metadata, graph) if memory_only else stages(metadata, graph)
    for fn in fns.values():  # warm caches (kernel registry, imports) before timing
        fn()
    timings = interleaved(fns, repeats)
    return {
        "n_ops": n_ops,
        "repeats": repeats,
        "memory_only": memory_only,
        "checked": checked,
        "wall": {name: t.median for name, t in timings.items()},
        "cpu": {name: statistics.median(t.cpu) for name, t in timings.items()},
        "wall_all": {name: t.seconds for name, t in timings.items()},
    }


def render(results: list[dict[str, Any]]) -> str:
    lines = []
    for r in results:
        if r.get("memory_only"):
            lines += render_memory(r)
            continue
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


def render_memory(r: dict[str, Any]) -> list[str]:
    """``--memory``'s table: each part against the baseline (memory fields cleared)."""
    wall, cpu = r["wall"], r["cpu"]
    base = MEMORY_BASELINE
    added = cpu[MEMORY_EVERYWHERE] / cpu[base] - 1
    lines = [
        f"{r['n_ops']:,} ops, medians of {r['repeats']} interleaved repeats: an allocator "
        f"record on every node adds **{added:+.1%}** (CPU time; wall "
        f"{wall[MEMORY_EVERYWHERE] / wall[base] - 1:+.1%}) "
        f"to the conversion (target < {MEMORY_TARGET:.0%})",
        "",
    ]
    if r.get("checked"):
        lines += [f"Checked: {r['checked']}.", ""]
    lines += ["| | wall | CPU | share of the baseline (CPU) |", "|---|---:|---:|---:|"]
    for name in wall:
        lines.append(
            f"| {name.strip()}{' (stage)' if name.startswith('  ') else ''} "
            f"| {fmt_ms(wall[name])} | {fmt_ms(cpu[name])} | {cpu[name] / cpu[base]:.1%} |"
        )
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[10_000, 100_000]
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--protos", help="keep/reuse the traced protos in this folder")
    parser.add_argument("--save-frames", help="pickle the frames into this folder")
    parser.add_argument("--compare-frames", help="assert the frames equal those pickled here")
    parser.add_argument(
        "--memory",
        action="store_true",
        help="time only what memory adds: the same protos with and without allocator records",
    )
    args = parser.parse_args(argv)
    results = []
    for n_ops in args.sizes:
        print(f"{n_ops:,} ops: tracing, then timing", file=sys.stderr, flush=True)
        results.append(
            run(
                n_ops,
                args.repeats,
                args.protos,
                args.save_frames,
                args.compare_frames,
                memory_only=args.memory,
            )
        )
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
