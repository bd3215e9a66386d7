"""The allocator records read as columns from a step's serialized bytes
(``run_metadata.allocator_columns``) against the same records read field by field.

A real FULL_TRACE RunMetadata: a small step on two CPUs (a matmul, a concat, a variable's
update) whose ops allocate through TensorFlow's tracking allocators and whose constant and
variable are persistent.
"""

from __future__ import annotations

import copy
from dataclasses import fields
from typing import Any

import pytest
from helpers import TWO_CPUS

from tfplace_widget import PlacementTrace
from tfplace_widget._model.records import Records
from tfplace_widget._sources import run_metadata


@pytest.fixture(scope="module")
def dense_net(tf, trace_placement):
    def step() -> Any:
        with tf.device("/cpu:0"):
            a = tf.random.uniform([64, 128], seed=1, name="a")
            weights = tf.compat.v1.get_variable("w", [128, 32])
            product = tf.matmul(a, weights, name="product")
        with tf.device("/cpu:1"):
            joined = tf.concat([product, product * 2.0], axis=1, name="joined")
            update = weights.assign_add(tf.ones([128, 32]) * tf.reduce_mean(joined))
        return update

    return trace_placement(step, device_count=TWO_CPUS)


def _metadata(tf: Any, trace: Any) -> Any:
    metadata = tf.compat.v1.RunMetadata()
    metadata.ParseFromString(trace.raw["run_metadata_0.pb"])
    return metadata


def _read(metadata: Any, serialized: bytes | None) -> Records:
    records = Records()
    run_metadata.records_from_step_stats(metadata.step_stats, records, serialized)
    return records


def _assert_same_records(a: Records, b: Records) -> None:
    for column in fields(Records):
        if column.name != "memory":
            assert getattr(a, column.name) == getattr(b, column.name), column.name
    for column in fields(a.memory):
        assert getattr(a.memory, column.name) == getattr(b.memory, column.name), column.name


def test_columns_equal_the_records_read_field_by_field(tf, dense_net):
    metadata = _metadata(tf, dense_net)
    by_field = _read(metadata, None)
    assert len(by_field.memory.row) >= 5 and len(by_field.memory.time) >= 10  # real records
    assert by_field.persistent  # and persistent memory (the constants)
    columns = run_metadata.allocator_columns(metadata.SerializeToString())
    assert len(columns.memory.total_bytes) == len(by_field.memory.row)  # no column short
    assert len(columns.memory.allocation_records.alloc_micros) == len(by_field.memory.time)
    assert columns.counts is not None  # each item's records counted from its bytes
    assert columns.counts.tolist() == by_field.memory.count
    _assert_same_records(_read(metadata, metadata.SerializeToString()), by_field)
    _assert_same_records(_read(metadata, dense_net.raw["run_metadata_0.pb"]), by_field)


def test_items_whose_records_cannot_be_counted_are_read_field_by_field(tf, dense_net):
    """A field numbered above 15 in an item (a tag of two bytes, none of
    ``AllocatorMemoryUsed``'s today): its records are not counted from the bytes."""
    metadata = copy.deepcopy(_metadata(tf, dense_net))
    nodes = [node for dev in metadata.step_stats.dev_stats for node in dev.node_stats]
    [node for node in nodes if node.memory][1].memory[0].MergeFromString(b"\x80\x01\x05")
    serialized = metadata.SerializeToString()
    assert run_metadata.allocator_columns(serialized).counts is None
    _assert_same_records(_read(metadata, serialized), _read(metadata, None))


def test_zero_fields_absent_from_the_bytes_are_read_field_by_field(tf, dense_net):
    """proto3 leaves a zero out of the bytes, so a column is shorter than the items: an
    item with no bytes, a record at time 0 and an item with every field zero."""
    metadata = copy.deepcopy(_metadata(tf, dense_net))
    nodes = [node for dev in metadata.step_stats.dev_stats for node in dev.node_stats]
    used = [node for node in nodes if node.memory]
    used[0].memory[0].total_bytes = 0
    used[1].memory[0].peak_bytes = 0
    used[2].memory[0].allocation_records.add(alloc_micros=0, alloc_bytes=8)
    used[3].memory.add()  # every field zero: the item is on the wire, empty
    by_field = _read(metadata, None)
    assert by_field.memory.total.count(0) >= 2
    _assert_same_records(_read(metadata, metadata.SerializeToString()), by_field)


def test_nothing_recorded_reads_no_node(tf, dense_net):
    metadata = copy.deepcopy(_metadata(tf, dense_net))
    for dev in metadata.step_stats.dev_stats:
        for node in dev.node_stats:
            node.ClearField("memory")
            node.ClearField("memory_stats")
    records = _read(metadata, metadata.SerializeToString())
    assert not records.memory.row and not records.persistent
    assert len(records.op) == len(_read(metadata, None).op)


@pytest.mark.parametrize("given", ["bytes", "file"])
def test_a_trace_from_bytes_keeps_them(tf, dense_net, tmp_path, given):
    data = dense_net.raw["run_metadata_0.pb"]
    graph = dense_net.raw["graph_def.pb"]
    source: Any = data
    if given == "file":
        source = tmp_path / "run_metadata.pb"
        source.write_bytes(data)
    trace = PlacementTrace.from_run_metadata(source, graph)
    assert trace.raw["run_metadata_0.pb"] == data
    from_proto = PlacementTrace.from_run_metadata(_metadata(tf, dense_net), graph)
    for frame in ("ops", "events", "memory", "transfers"):
        assert getattr(trace, frame).equals(getattr(from_proto, frame)), frame


def test_a_later_change_to_the_proto_changes_nothing(tf, dense_net):
    metadata = _metadata(tf, dense_net)
    trace = PlacementTrace.from_run_metadata(metadata, dense_net.raw["graph_def.pb"])
    kept = trace.raw["run_metadata_0.pb"]
    metadata.step_stats.ClearField("dev_stats")
    assert trace.raw["run_metadata_0.pb"] == kept
    assert _metadata(tf, trace).step_stats.dev_stats


def test_a_step_too_large_to_keep_is_read_field_by_field_and_left_out(tf, dense_net, monkeypatch):
    """Bytes more than a ``.tfplace`` member may hold are not kept through the conversion:
    the records are read field by field, ``trace.raw`` leaves the step out and says so."""
    from tfplace_widget._sources import limits

    metadata, graph = _metadata(tf, dense_net), dense_net.raw["graph_def.pb"]
    whole = PlacementTrace.from_run_metadata(metadata, graph)
    monkeypatch.setattr(limits, "MAX_MEMBER_BYTES", len(dense_net.raw["run_metadata_0.pb"]) - 1)
    monkeypatch.setattr(
        run_metadata, "allocator_columns", lambda data: pytest.fail("the columns were parsed")
    )
    trace = PlacementTrace.from_run_metadata(metadata, graph)
    assert "run_metadata_0.pb" not in trace.raw and "graph_def.pb" in trace.raw
    assert "more than a .tfplace member may" in trace.log
    for frame in ("ops", "events", "memory", "transfers"):
        assert getattr(trace, frame).equals(getattr(whole, frame)), frame


def _outputs(metadata: Any) -> list[Any]:
    return [node.output for dev in metadata.step_stats.dev_stats for node in dev.node_stats]


def test_output_sizes_are_a_column_equal_to_the_field_by_field_read(tf, dense_net):
    metadata = _metadata(tf, dense_net)
    serialized = metadata.SerializeToString()
    sizes = run_metadata.allocator_columns(serialized).requested_bytes
    assert len(sizes) == sum(len(outputs) for outputs in _outputs(metadata))  # one per output
    by_field = _read(metadata, None)
    assert any(len(sizes) == 1 and sizes[0] > 0 for sizes in by_field.output_bytes)
    assert _read(metadata, serialized).output_bytes == by_field.output_bytes


def test_nodes_of_several_outputs_and_of_none_take_their_own_sizes(tf, dense_net):
    metadata = copy.deepcopy(_metadata(tf, dense_net))
    outputs = [o for o in _outputs(metadata) if len(o) == 1]
    for extra in (7, 9):  # a node of three outputs
        outputs[0].add().tensor_description.allocation_description.requested_bytes = extra
    del outputs[1][:]  # and one of none, between it and the others
    serialized = metadata.SerializeToString()
    assert len(run_metadata.allocator_columns(serialized).requested_bytes) == sum(
        len(o) for o in _outputs(metadata)
    )
    records = _read(metadata, serialized)
    assert records.output_bytes == _read(metadata, None).output_bytes
    assert (7, 9) in {sizes[1:] for sizes in records.output_bytes} and () in records.output_bytes


def test_an_output_of_zero_bytes_absent_from_the_bytes_is_read_field_by_field(tf, dense_net):
    """proto3 leaves a zero ``requested_bytes`` out of the bytes: the column is one short,
    so every node's sizes are read again from the message, zero included."""
    metadata = copy.deepcopy(_metadata(tf, dense_net))
    outputs = [o for o in _outputs(metadata) if len(o) == 1]
    outputs[2][0].tensor_description.allocation_description.requested_bytes = 0
    serialized = metadata.SerializeToString()
    column = run_metadata.allocator_columns(serialized).requested_bytes
    assert len(column) == sum(len(o) for o in _outputs(metadata)) - 1
    records = _read(metadata, serialized)
    assert records.output_bytes == _read(metadata, None).output_bytes
    assert (0,) in records.output_bytes
