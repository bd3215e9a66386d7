"""PlacementTrace.from_run_metadata: a proto, its bytes, .pb and .pbtxt files, with or without graph.

The RunMetadata comes from a real ``tf.compat.v1.Session`` run with FULL_TRACE, made here the way
a user would make it, outside ``trace_placement``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from helpers import CPU0, CPU1, execute_in_kernel, op_row, stream_texts

from tfplace_widget import PlacementTrace

SOURCE = ["source", "source_path"]  # the user's lines: from a tf.Graph's stacks only


def _build_seed(tf: Any) -> tuple[Any, Any]:
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/cpu:0"):
            a = tf.ones((10,), name="A")
        b = tf.ones((10,), name="B")  # no request; small, so a Const (no inputs)
        with tf.device("/cpu:1"):
            c = tf.add(a, b, name="C")
    return graph, c


def _run(tf: Any, graph: Any, fetch: Any, partitions: bool = True, steps: int = 1) -> list:
    v1 = tf.compat.v1
    config = v1.ConfigProto(device_count={"CPU": 2})
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    options = v1.RunOptions(
        trace_level=v1.RunOptions.FULL_TRACE, output_partition_graphs=partitions
    )
    metadatas = []
    with v1.Session(graph=graph, config=config) as session:
        for _ in range(steps):
            metadata = v1.RunMetadata()
            session.run(fetch, options=options, run_metadata=metadata)
            metadatas.append(metadata)
    return metadatas


@pytest.fixture(scope="module")
def recorded(tf: Any) -> dict[str, Any]:
    graph, c = _build_seed(tf)
    two_steps = _run(tf, graph, c, steps=2)
    return {"graph": graph, "metadata": two_steps[0], "two_steps": two_steps}


@pytest.fixture(scope="module")
def reference(recorded: dict[str, Any]) -> PlacementTrace:
    return PlacementTrace.from_run_metadata(recorded["metadata"], graph=recorded["graph"])


@pytest.fixture(scope="module")
def files(recorded: dict[str, Any], tmp_path_factory: Any) -> dict[str, Path]:
    from google.protobuf import text_format

    folder = tmp_path_factory.mktemp("run_metadata")
    metadata = recorded["metadata"]
    pb = folder / "run.pb"
    pb.write_bytes(metadata.SerializeToString())
    pbtxt = folder / "run.pbtxt"
    pbtxt.write_text(text_format.MessageToString(metadata))
    return {"pb": pb, "pbtxt": pbtxt}


def test_from_proto_with_graph(reference):
    a, b, c = (op_row(reference, n) for n in ("A", "B", "C"))
    assert (a.device, a.requested_device, a.how) == (CPU0, "/device:CPU:0", "explicit")
    # tf.ones of 10 elements is a Const: with no inputs and no request, the placer moves it
    # to its only consumer's device (unlike the seed's n >= 1000, where tf.ones is a Fill).
    assert (b.type, b.device, b.requested_device, b.how) == ("Const", CPU1, "", "implicit")
    assert "no inputs" in b.reason and "(C)" in b.reason
    assert (c.device, c.requested_device, c.how) == (CPU1, "/device:CPU:1", "explicit")
    assert reference.transfers[["tensor", "src_device", "dst_device"]].values.tolist() == [
        ["A:0", CPU0, CPU1],
        ["C:0", CPU1, CPU0],
    ]
    assert reference.transfers["bytes"].tolist() == [40, 40]
    assert reference.devices == [CPU0, CPU1]
    assert reference.log == ""  # nothing was run here, so nothing was captured


@pytest.mark.parametrize(
    "form", ["bytes", "pb_str", "pb_path", "pbtxt_str", "pbtxt_path", "bytearray"]
)
def test_every_form_gives_the_same_trace(recorded, reference, files, form):
    metadata = recorded["metadata"]
    source = {
        "bytes": metadata.SerializeToString(),
        "bytearray": bytearray(metadata.SerializeToString()),
        "pb_str": str(files["pb"]),
        "pb_path": files["pb"],
        "pbtxt_str": str(files["pbtxt"]),
        "pbtxt_path": files["pbtxt"],
    }[form]
    trace = PlacementTrace.from_run_metadata(source, graph=recorded["graph"])
    pd.testing.assert_frame_equal(trace.ops, reference.ops)
    pd.testing.assert_frame_equal(trace.events, reference.events)
    pd.testing.assert_frame_equal(trace.transfers, reference.transfers)
    assert trace.devices == reference.devices


@pytest.mark.parametrize("graph_form", ["graph_def", "graph_def_bytes", "pb_path", "pbtxt_path"])
def test_graph_as_graph_def(recorded, reference, graph_form, tmp_path):
    from google.protobuf import text_format

    graph_def = recorded["graph"].as_graph_def()
    (tmp_path / "graph.pb").write_bytes(graph_def.SerializeToString())
    (tmp_path / "graph.pbtxt").write_text(text_format.MessageToString(graph_def))
    graph = {
        "graph_def": graph_def,
        "graph_def_bytes": graph_def.SerializeToString(),
        "pb_path": tmp_path / "graph.pb",
        "pbtxt_path": str(tmp_path / "graph.pbtxt"),
    }[graph_form]
    trace = PlacementTrace.from_run_metadata(recorded["metadata"], graph=graph)
    # A GraphDef keeps no Python stacks: the user's lines come only with the tf.Graph.
    assert trace.ops["source"].isna().all() and reference.ops["source"].notna().any()
    pd.testing.assert_frame_equal(
        trace.ops.drop(columns=SOURCE), reference.ops.drop(columns=SOURCE)
    )


def test_graph_file_errors_name_the_file(recorded, tmp_path):
    with pytest.raises(ValueError, match="Cannot read the graph file"):
        PlacementTrace.from_run_metadata(recorded["metadata"], graph=tmp_path / "missing.pb")
    (tmp_path / "bad.pbtxt").write_text("node { this is not a graph")
    with pytest.raises(ValueError, match="is not a text GraphDef"):
        PlacementTrace.from_run_metadata(recorded["metadata"], graph=tmp_path / "bad.pbtxt")


def test_without_graph_requests_are_unknown(recorded, reference, files):
    trace = PlacementTrace.from_run_metadata(files["pb"])
    for name in ("A", "B", "C"):
        row = op_row(trace, name)
        assert (row.requested_device, row.how) == ("", "unknown")
        assert "graph was not given" in row.reason and "graph=" in row.reason
    # Placement itself comes from the run, so it does not need the graph.
    assert trace.device_of("C") == CPU1 and trace.device_of("A") == CPU0
    runtime = trace.ops[trace.ops["type"].isin(["_Send", "_Recv", "_Retval"])]
    assert len(runtime) == 5 and set(runtime["how"]) == {"runtime"}  # 2 pairs + 1 _Retval
    pd.testing.assert_frame_equal(trace.transfers, reference.transfers)
    from_graph = ["requested_device", "how", "reason", "kernels", "gpu_kernel", *SOURCE]
    pd.testing.assert_frame_equal(
        trace.ops.drop(columns=from_graph), reference.ops.drop(columns=from_graph)
    )
    # Kernels are a fact of node defs: without the graph no guess is made.
    assert set(trace.ops["kernels"]) == {""} and set(trace.ops["gpu_kernel"]) == {"NA"}
    assert (
        op_row(reference, "C").kernels == "CPU GPU" and op_row(reference, "C").gpu_kernel == "yes"
    )


def test_a_list_of_steps(recorded):
    trace = PlacementTrace.from_run_metadata(recorded["two_steps"], graph=recorded["graph"])
    timed = trace.ops[trace.ops["runs"].notna()]
    assert (timed["runs"] == 2).all()
    assert op_row(trace, "C").runs == 2


def test_devices_argument_adds_idle_devices(recorded):
    extra = "/job:localhost/replica:0/task:0/device:CPU:2"
    trace = PlacementTrace.from_run_metadata(recorded["metadata"], devices=["/cpu:2"])
    assert trace.devices == [CPU0, CPU1, extra]


def test_without_partition_graphs_there_are_no_send_recv(tf):
    """TF lists _Send/_Recv only in partition graphs: without them, no transfers can be known."""
    graph, c = _build_seed(tf)
    (metadata,) = _run(tf, graph, c, partitions=False)
    assert not metadata.partition_graphs
    trace = PlacementTrace.from_run_metadata(metadata, graph=graph)
    assert not trace.ops["type"].isin(["_Send", "_Recv"]).any()
    assert trace.transfers.empty and list(trace.transfers.columns) == [
        "tensor",
        "src_device",
        "dst_device",
        "bytes",
        "cross_task",
    ]
    assert op_row(trace, "C").device == CPU1
    assert op_row(trace, "A").how == "explicit"


def test_matches_trace_placement(tf, trace_placement, reference):
    def build():
        return _build_seed_in_default_graph(tf)

    traced = trace_placement(build, device_count={"CPU": 2})
    for name in ("A", "B", "C"):
        assert traced.device_of(name) == reference.device_of(name)
        assert op_row(traced, name).how == op_row(reference, name).how


def _build_seed_in_default_graph(tf: Any) -> Any:
    with tf.device("/cpu:0"):
        a = tf.ones((10,), name="A")
    b = tf.ones((10,), name="B")
    with tf.device("/cpu:1"):
        return tf.add(a, b, name="C")


def test_loading_a_trace_file_in_a_fresh_kernel_leaves_the_cell_clean(files):
    """The load imports TensorFlow, which logs its start-up from C++: into trace.log, not the cell."""
    [outputs] = execute_in_kernel(
        "import sys\n"
        "from tfplace_widget import PlacementTrace\n"
        f"trace = PlacementTrace.from_run_metadata({str(files['pb'])!r})\n"
        "import os, time\n"
        "os.write(2, b'control: fd 2\\n')  # forwarded after anything the load wrote to fd 2\n"
        "time.sleep(1)  # ipykernel forwards what reaches fd 2 from a thread: let it arrive\n"
        "print('tensorflow' in sys.modules, len(trace.ops) > 0, bool(trace.log))"
    )
    texts = "".join(stream_texts(outputs))
    assert "control: fd 2" in texts, texts  # forwarding works: an absence below means something
    rest = [line for line in texts.splitlines() if line != "control: fd 2"]
    assert rest == ["True True True"]
