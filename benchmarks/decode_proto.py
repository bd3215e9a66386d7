"""Columnar reading with ``tf.io.decode_proto`` against the Python readers (issue 25).

``python -m benchmarks.decode_proto [--sizes 10000,100000] [--repeats 5]`` reads, from the
benchmark trace of each size (``benchmarks/convert.py``'s ``--protos`` folder when given), the
fields the conversion takes from a RunMetadata in two ways, interleaved in one process:

- Python: ``records_from_step_stats`` and ``executed_graph`` (_sources/run_metadata.py), field by
  field from the upb message;
- TensorFlow's compiled decoder, level by level (RunMetadata -> StepStats -> DeviceStepStats ->
  NodeExecStats -> NodeOutput -> TensorDescription -> AllocationDescription, and
  RunMetadata -> GraphDef -> NodeDef), from the serialized bytes ``trace.raw`` keeps anyway (so
  serializing is not counted), each string column joined by ``tf.strings.reduce_join`` and split
  once in Python instead of one bytes object per element; ints as numpy arrays. It reads less
  than the Python readers (no ``_Send`` attrs, no dicts, no producers of the inputs).

Before timing, the decoded columns are checked equal to the Python readers' (names, types,
devices, starts, durations, threads, labels, output sizes, inputs). Prints medians (wall, CPU).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

from benchmarks.measure import fmt_ms, interleaved


def decode_columns(data: bytes) -> dict[str, Any]:
    """The step_stats and partition-graph columns of one serialized RunMetadata, decoded by
    ``tf.io.decode_proto`` (eager ops on the CPU)."""
    import tensorflow as tf

    decode = tf.io.decode_proto

    def flat(values: Any, sizes: Any) -> Any:  # a [batch, max] field's set entries, in order
        return tf.boolean_mask(values, tf.sequence_mask(sizes, tf.shape(values)[1]))

    def texts(strings: Any) -> list[str]:
        joined = tf.strings.reduce_join(strings, separator="\0").numpy().decode()
        return joined.split("\0") if int(tf.size(strings)) else []

    with tf.device("/CPU:0"):
        sizes, (steps, graphs) = decode(
            tf.constant([data]),
            "tensorflow.RunMetadata",
            ["step_stats", "partition_graphs"],
            [tf.string, tf.string],
        )
        s_dev, (devs,) = decode(steps[:, 0], "tensorflow.StepStats", ["dev_stats"], [tf.string])
        s_node, (lanes, nodes) = decode(
            flat(devs, s_dev[:, 0]),
            "tensorflow.DeviceStepStats",
            ["device", "node_stats"],
            [tf.string, tf.string],
        )
        s_rec, (name, start, duration, thread, label, output) = decode(
            flat(nodes, s_node[:, 1]),
            "tensorflow.NodeExecStats",
            [
                "node_name",
                "all_start_micros",
                "all_end_rel_micros",
                "thread_id",
                "timeline_label",
                "output",
            ],
            [tf.string, tf.int64, tf.int64, tf.uint32, tf.string, tf.string],
        )
        _, (tensor,) = decode(
            flat(output, s_rec[:, 5]), "tensorflow.NodeOutput", ["tensor_description"], [tf.string]
        )
        _, (allocation,) = decode(
            tensor[:, 0], "tensorflow.TensorDescription", ["allocation_description"], [tf.string]
        )
        _, (requested,) = decode(
            allocation[:, 0], "tensorflow.AllocationDescription", ["requested_bytes"], [tf.int64]
        )
        s_graph, (graph_nodes,) = decode(
            flat(graphs, sizes[:, 1]), "tensorflow.GraphDef", ["node"], [tf.string]
        )
        s_def, (node_name, op, inputs, device) = decode(
            flat(graph_nodes, s_graph[:, 0]),
            "tensorflow.NodeDef",
            ["name", "op", "input", "device"],
            [tf.string] * 4,
        )
        return {
            "lanes": texts(lanes[:, 0]),
            "records_per_lane": s_node[:, 1].numpy(),
            "op": texts(name[:, 0]),
            "start": start[:, 0].numpy(),
            "duration": duration[:, 0].numpy(),
            "thread": thread[:, 0].numpy(),
            "label": texts(label[:, 0]),
            "outputs": s_rec[:, 5].numpy(),
            "requested_bytes": requested[:, 0].numpy(),
            "node": texts(node_name[:, 0]),
            "type": texts(op[:, 0]),
            "device": texts(device[:, 0]),
            "inputs": texts(flat(inputs, s_def[:, 2])),
            "inputs_per_node": s_def[:, 2].numpy(),
        }


def python_columns(metadata: Any) -> tuple[Any, Any]:
    """What the conversion reads today: the step_stats records and the executed graph."""
    from tfplace_widget._model.records import Records
    from tfplace_widget._sources import run_metadata

    records = Records()
    run_metadata.records_from_step_stats(metadata.step_stats, records)
    return records, run_metadata.executed_graph(metadata.partition_graphs)


def check_equal(metadata: Any, decoded: dict[str, Any]) -> None:
    """Raise AssertionError unless the decoded columns hold what the Python readers read."""
    import numpy as np

    from tfplace_widget._model.devices import canonical_device

    records, executed = python_columns(metadata)
    lanes = np.repeat(np.array(decoded["lanes"], dtype=object), decoded["records_per_lane"])
    assert lanes.tolist() == records.lane
    for column in ("op", "label"):
        assert decoded[column] == getattr(records, column), column
    for column in ("start", "duration", "thread"):
        assert decoded[column].tolist() == getattr(records, column), column
    sizes = np.split(decoded["requested_bytes"], np.cumsum(decoded["outputs"])[:-1])
    assert [tuple(s.tolist()) for s in sizes] == records.output_bytes
    assert decoded["node"] == list(executed.device)
    assert decoded["type"] == list(executed.type.values())
    assert [canonical_device(d) for d in decoded["device"]] == list(executed.device.values())
    raw = [node.input[:] for graph in metadata.partition_graphs for node in graph.node]
    ends = np.cumsum(decoded["inputs_per_node"]).tolist()
    flat = decoded["inputs"]
    assert [flat[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)] == raw


def run(n_ops: int, repeats: int, protos: str | None) -> dict[str, Any]:
    from benchmarks.convert import traced_protos
    from tfplace_widget._model.gc_pause import paused_gc

    metadata, _ = traced_protos(n_ops, protos)
    data = metadata.SerializeToString()
    check_equal(metadata, decode_columns(data))

    def paused(fn: Any) -> Any:
        def call() -> Any:
            with paused_gc():  # as in the conversion
                return fn()

        return call

    fns = {
        "Python readers (records + executed graph)": paused(lambda: python_columns(metadata)),
        "tf.io.decode_proto columns (bytes given)": paused(lambda: decode_columns(data)),
        "serialize (trace.raw, for reference)": metadata.SerializeToString,
    }
    for fn in fns.values():
        fn()
    timings = interleaved(fns, repeats)
    return {
        "n_ops": n_ops,
        "wall": {k: t.median for k, t in timings.items()},
        "cpu": {k: statistics.median(t.cpu) for k, t in timings.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[10_000, 100_000]
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--protos", help="reuse/keep the traced protos in this folder")
    args = parser.parse_args(argv)
    for n_ops in args.sizes:
        result = run(n_ops, args.repeats, args.protos)
        print(f"{n_ops:,} ops, medians of {args.repeats} interleaved repeats (columns equal):")
        print("| | wall | CPU |\n|---|---:|---:|")
        for name, wall in result["wall"].items():
            print(f"| {name} | {fmt_ms(wall)} | {fmt_ms(result['cpu'][name])} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
