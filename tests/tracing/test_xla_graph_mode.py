"""Graph-mode XLA auto-clustering traced for real on XLA:CPU (issue 23).

A ``tf.compat.v1`` Session with ``global_jit_level = ON_1`` clusters CPU ops only when
``TF_XLA_FLAGS=--tf_xla_cpu_global_jit`` is in the environment before TensorFlow starts, so each
run is a process of its own. The child traces a graph builder (a matmul, an add, a relu and a
reduce_sum: TensorFlow's default ``--tf_xla_min_cluster_size`` is 4 compute ops; matmul, add
and reduce_sum alone stay unclustered on TF 2.21), saves the trace, and writes what TensorFlow
put in the partition graphs; the tests assert the trace against that, not against hard-coded
cluster numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tfplace_widget import PlacementTrace

CHILD = textwrap.dedent(
    """
    import dataclasses, json, sys
    import numpy as np
    import tensorflow as tf
    from tensorflow.core.protobuf import config_pb2
    from tfplace_widget import PlacementTrace, trace_placement
    from tfplace_widget._analyses.findings import find_findings

    v1 = tf.compat.v1
    out = sys.argv[1]

    def build():
        x = v1.placeholder(tf.float32, (8, 8), name="x")
        w = tf.constant(np.arange(64, dtype=np.float32).reshape(8, 8), name="w")
        product = tf.matmul(x, w, name="product")
        shifted = tf.add(product, 1.0, name="shifted")
        positive = tf.nn.relu(shifted, name="positive")
        return tf.reduce_sum(positive, name="total")

    config = v1.ConfigProto()
    config.graph_options.optimizer_options.global_jit_level = v1.OptimizerOptions.ON_1
    trace = trace_placement(
        build, mode="graph", config=config, feed_dict={"x:0": np.ones((8, 8), np.float32)}
    )
    trace.save(out + "/auto.tfplace")

    def drained():  # exactly the warm-up's and the traced step's elements: none for more
        data = tf.data.Dataset.from_tensors(np.ones((8, 8), np.float32)).repeat(2)
        x = v1.data.make_one_shot_iterator(data).get_next()
        w = tf.constant(np.arange(64, dtype=np.float32).reshape(8, 8), name="w")
        positive = tf.nn.relu(tf.add(tf.matmul(x, w, name="product"), 1.0), name="positive")
        return tf.reduce_sum(positive, name="total")

    trace_placement(drained, mode="graph", config=config).save(out + "/drained.tfplace")
    metadata = config_pb2.RunMetadata()
    metadata.ParseFromString(trace.raw["run_metadata_0.pb"])
    partition = [
        {
            "name": n.name,
            "op": n.op,
            "function": n.attr["function"].func.name if "function" in n.attr else "",
        }
        for g in metadata.partition_graphs
        for n in g.node
    ]
    graph = v1.GraphDef()
    graph.ParseFromString(trace.raw["graph_def.pb"])
    built = {n.name: [n.op, [i.split(":")[0] for i in n.input]] for n in graph.node}
    # The same RunMetadata loaded without the graph as built: the cluster's ops are unknown.
    alone = PlacementTrace.from_run_metadata(trace.raw["run_metadata_0.pb"])
    # The same ops in a tf.function, auto-clustered by tf.config.optimizer.set_jit (function
    # mode: the TF2 profiler records the HLO instructions).
    tf.config.optimizer.set_jit(True)

    @tf.function
    def step(x):
        w = tf.constant(np.arange(64, dtype=np.float32).reshape(8, 8), name="w")
        product = tf.matmul(x, w, name="product")
        shifted = tf.add(product, 1.0, name="shifted")
        positive = tf.nn.relu(shifted, name="positive")
        return tf.reduce_sum(positive, name="total")

    trace_placement(step, tf.ones((8, 8))).save(out + "/set_jit.tfplace")
    json.dump(
        {
            "partition": partition,
            "built": built,
            "alone_ops": alone.ops["op"].tolist(),
            "alone_how": alone.ops["how"].astype(str).tolist(),
            "alone_findings": alone.findings[["kind", "message"]].values.tolist(),
            # the same launch ops as a TF2 call whose profile named no HLO instruction shows them
            "as_call_findings": find_findings(dataclasses.replace(alone, mode="function"))[
                ["kind", "message"]
            ].values.tolist(),
        },
        open(out + "/facts.json", "w"),
    )
    """
)


def _child(tmp_path: Path, flags: str) -> tuple[PlacementTrace, dict[str, Any], PlacementTrace]:
    env = {**os.environ, "TF_XLA_FLAGS": flags}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    facts = json.loads((tmp_path / "facts.json").read_text())
    load = PlacementTrace.load
    return load(tmp_path / "auto.tfplace"), facts, load(tmp_path / "set_jit.tfplace")


@pytest.fixture(scope="module")
def clustered_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("autoclust")
    return out


@pytest.fixture(scope="module")
def clustered(clustered_dir: Path) -> tuple[PlacementTrace, dict, Any]:
    return _child(clustered_dir, "--tf_xla_cpu_global_jit")


@pytest.fixture(scope="module")
def drained(clustered: Any, clustered_dir: Path) -> PlacementTrace:
    """The child's trace of a step whose input has no element left after the traced step."""
    return PlacementTrace.load(clustered_dir / "drained.tfplace")


def test_tensorflow_clustered_the_ops_out_of_the_partition_graph(clustered):
    _, facts, _ = clustered
    types = {n["op"] for n in facts["partition"]}
    assert {"_XlaCompile", "_XlaRun", "_XlaMerge"} <= types
    kept = {n["name"] for n in facts["partition"]}
    # the compute ops as built are gone from the executed graph: XLA runs them
    assert not {"product", "shifted", "positive", "total"} & kept
    compiles = [n for n in facts["partition"] if n["op"] == "_XlaCompile"]
    assert len(compiles) == 1 and compiles[0]["function"].startswith("cluster_")


def test_the_cluster_ops_are_listed_with_how_xla_on_the_cluster_device(clustered):
    trace, facts, _ = clustered
    compile_node = next(n for n in facts["partition"] if n["op"] == "_XlaCompile")
    cluster = compile_node["function"]
    launch = trace.ops[trace.ops["op"] == compile_node["name"]].iloc[0]
    xla = trace.ops[trace.ops["how"].astype(str) == "xla"]
    ran = {n["name"] for n in facts["partition"]}
    # every op the fetch needs that did not run itself is the cluster's (x was fed: an _arg)
    needed, stack = set(), ["total"]
    while stack:
        name = stack.pop()
        if name not in needed and name != "x":
            needed.add(name)
            stack += facts["built"][name][1]
    expected = needed - ran
    assert {"product", "shifted", "positive", "total", "w"} <= expected
    assert set(xla["op"]) == expected
    assert dict(zip(xla["op"], xla["type"], strict=True)) == {
        name: facts["built"][name][0] for name in expected
    }
    assert set(xla["device"]) == {launch["device"]}
    assert set(xla["function"]) == {cluster}
    for reason in xla["reason"]:
        assert f"Compiled by XLA into the cluster {cluster} (auto-clustering, " in reason
        assert "global_jit_level ON_1" in reason
        assert "XLA places the whole cluster on one device" in reason


def test_graph_mode_clusters_have_their_instructions_from_one_more_profiled_run(clustered):
    """FULL_TRACE records no HLO instruction: one more run of the step under the TF2 profiler
    names each op's instruction (XLA's own HLO metadata), placed at the traced xla_run."""
    trace, facts, _ = clustered
    cluster = next(n for n in facts["partition"] if n["op"] == "_XlaCompile")["function"]
    run = trace.ops[trace.ops["type"] == "_XlaRun"].iloc[0]
    xla = trace.ops[trace.ops["how"].astype(str) == "xla"]
    assert len(trace.xla) and set(trace.xla["cluster"]) == {cluster}
    assert set(trace.xla["device"]) == {run["device"]}
    assert trace.xla["start_us"].min() == run["start_us"]
    named = {op for tf_ops in trace.xla["tf_ops"] for op in tf_ops}  # from the HLO metadata
    assert {"product", "shifted", "positive", "total"} <= named <= set(xla["op"])
    for op, instruction in zip(xla["op"], xla["xla_op"], strict=True):
        if op in named:  # the first executed instruction naming it
            ran = trace.xla[trace.xla["instruction"] == instruction]
            assert len(ran) and op in ran.iloc[0]["tf_ops"], (op, instruction)
            assert (
                f"inside the HLO instruction {instruction}"
                in xla[xla["op"] == op].iloc[0]["reason"]
            )
        else:  # e.g. the constant w, folded into the dot's operand
            assert pd.isna(instruction), (op, instruction)
    product = xla[xla["op"] == "product"].iloc[0]
    assert trace.xla[trace.xla["instruction"] == product["xla_op"]]["kind"].iloc[0] == "dot"
    events = trace.events[trace.events["op"].isin(set(trace.xla["instruction"]))]
    assert len(events) == len(trace.xla) and set(events["lane"]) == {run["device"]}
    assert "one more run of the step under the TF2 profiler" in trace.log
    # every finding: the toy cluster's share of the step is the machine's load
    assert "xla_time" in set(trace.all_findings["kind"])


def test_an_input_with_no_element_left_for_the_profiled_run_keeps_the_trace(drained):
    xla = drained.ops[drained.ops["how"].astype(str) == "xla"]
    assert {"product", "positive", "total"} <= set(xla["op"])
    assert drained.xla.empty and xla["xla_op"].isna().all()
    assert "one more run of the step, under the TF2 profiler, failed (OutOfRangeError" in (
        drained.log
    )
    assert xla["reason"].str.contains("graph mode's FULL_TRACE records none").all()


def test_the_launch_ops_are_present_with_a_reason_that_names_the_cluster(clustered):
    trace, facts, _ = clustered
    compile_node = next(n for n in facts["partition"] if n["op"] == "_XlaCompile")
    cluster = compile_node["function"]
    for op_type in ("_XlaCompile", "_XlaRun"):
        names = [n["name"] for n in facts["partition"] if n["op"] == op_type]
        rows = trace.ops[trace.ops["op"].isin(names)]
        assert len(rows) == 1, (op_type, trace.ops["op"].tolist())
        row = rows.iloc[0]
        assert row["type"] == op_type
        assert row["start_us"] >= 0 and row["duration_us"] >= 0  # timed by the step_stats
        assert row["reason"].startswith(f"Launches the XLA cluster {cluster} (auto-clustering")
        assert "TF ops (" in row["reason"] and "are listed with how 'xla'" in row["reason"]
        assert row["function"] == cluster
    run = trace.ops[trace.ops["type"] == "_XlaRun"].iloc[0]
    assert "its time is the whole cluster's" in run["reason"]


def test_no_finding_says_to_turn_xla_off(clustered):
    trace, _, _ = clustered
    assert "xla_hidden" not in set(trace.all_findings["kind"])
    assert not trace.all_findings["message"].str.contains("jit_compile=False").any()


def test_loaded_without_its_graph_the_trace_says_to_load_it_with_the_graph(clustered):
    _, facts, _ = clustered
    assert "xla" not in facts["alone_how"]  # the graph as built is what names the ops
    hidden = [message for kind, message in facts["alone_findings"] if kind == "xla_hidden"]
    assert len(hidden) == 1
    assert "from_run_metadata(run_metadata, graph)" in hidden[0]
    assert "jit_compile=False" not in hidden[0]
    as_call = [message for kind, message in facts["as_call_findings"] if kind == "xla_hidden"]
    assert len(as_call) == 1 and "profile named none of their HLO instructions" in as_call[0]


def test_without_the_cpu_flag_tensorflow_does_not_cluster_cpu_ops(tmp_path):
    trace, facts, set_jit = _child(tmp_path, "")
    assert not {n["op"] for n in facts["partition"]} & {"_XlaCompile", "_XlaRun"}
    for traced in (trace, set_jit):
        assert "xla" not in set(traced.ops["how"].astype(str))
        assert {"product", "shifted", "positive", "total"} <= set(traced.ops["op"])
        assert traced.xla.empty


def test_set_jit_clusters_list_their_ops_with_the_instruction_each_went_into(clustered):
    _, _, trace = clustered
    ops = trace.ops
    compiles = ops[ops["type"] == "_XlaCompile"]["op"].tolist()
    assert len(compiles) == 1, ops[["op", "type"]].values.tolist()
    prefix = compiles[0].rsplit("/", 1)[0]  # what TF named the launch: cluster_<n>_<k>
    cluster = prefix.rsplit("_", 1)[0]
    assert set(trace.xla["cluster"]) == {cluster}
    assert (trace.xla["duration_us"] >= 0).all() and (trace.xla["start_us"] >= 0).all()
    named = {op for tf_ops in trace.xla["tf_ops"] for op in tf_ops}  # from the HLO metadata
    xla = ops[ops["how"].astype(str) == "xla"]
    assert set(xla["op"]) == named
    assert {"product", "shifted", "positive", "total"} <= named
    assert dict(zip(xla["op"], xla["type"], strict=True))["product"] == "MatMul"
    assert set(xla["function"]) == {cluster}
    for op, instruction in zip(xla["op"], xla["xla_op"], strict=True):
        ran = trace.xla[trace.xla["instruction"] == instruction]
        assert len(ran) and op in ran.iloc[0]["tf_ops"]
    for reason in xla["reason"]:
        assert reason.startswith(
            f"Compiled by XLA into the cluster {cluster} (auto-clustering, "
            "tf.config.optimizer.set_jit)"
        )
    run = ops[ops["type"] == "_XlaRun"].iloc[0]
    assert run["reason"].startswith(f"Launches the XLA cluster {cluster} (auto-clustering")
    kinds = set(trace.all_findings["kind"])
    assert "xla_hidden" not in kinds and "xla_time" in kinds
