"""compare(a, b): two real traces of the same code under different settings (issue 13)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from helpers import CPU0, CPU1, op_row

from tfplace_widget._analyses.compare import OPS_COLUMNS, PlacementDiff, compare

CPU2 = CPU0.replace("CPU:0", "CPU:2")


def _row(diff: PlacementDiff, op: str) -> pd.Series:
    rows = diff.ops[diff.ops["op"] == op]
    assert len(rows) == 1, rows
    return rows.iloc[0]


@pytest.fixture(scope="module")
def asks_for_cpu2(tf: Any) -> Any:
    def build() -> Any:
        a = tf.ones((1000,), name="A")
        with tf.device("/cpu:2"):
            c = tf.add(a, a, name="C")
        return tf.identity(c, name="out")

    return build


def test_two_device_counts_the_soft_moved_op_is_moved(trace_placement, asks_for_cpu2):
    two = trace_placement(asks_for_cpu2, device_count={"CPU": 2}, soft_placement=True)
    three = trace_placement(asks_for_cpu2, device_count={"CPU": 3})
    diff = compare(two, three)
    assert list(diff.ops.columns) == OPS_COLUMNS
    c = _row(diff, "C")
    assert (c.status, c.device_a, c.device_b, c.how_a, c.how_b) == (
        "moved",
        CPU0,
        CPU2,
        "soft",
        "explicit",
    )
    assert list(diff.moved["op"]) == ["C"]  # nothing else changed device
    # CPU:2 exists only in b, with C on it; the transfers to and from it are new.
    devices = diff.devices.set_index("device")
    assert devices.loc[CPU2, "ops_a"] == 0 and devices.loc[CPU2, "ops_b"] >= 1
    added = diff.transfers[diff.transfers["status"] == "only_b"]
    assert {("A:0", CPU0, CPU2), ("C:0", CPU2, CPU0)} <= set(
        zip(added["tensor"], added["src_device"], added["dst_device"], strict=True)
    )
    assert (added["bytes_b"] == 4000).all() and added["bytes_a"].isna().all()
    assert "1 op moved: C (CPU:0 -> CPU:2)." in diff.summary
    assert "transfers added (8.0 kB)" in diff.summary and "Step time: a " in diff.summary


def test_optimize_on_removes_the_folded_ops(trace_placement, seed_builders):
    plain = trace_placement(seed_builders["inputs_none"], device_count={"CPU": 2})
    folded = trace_placement(seed_builders["inputs_none"], device_count={"CPU": 2}, optimize=True)
    diff = compare(plain, folded)
    only_a = set(diff.ops["op"][diff.ops["status"] == "only_a"])
    # Grappler folds the Fill ops and their shape constants into constants of its own.
    assert {"A", "B", "A/Const", "B/Const"} <= only_a
    c = _row(diff, "C")  # A + B of constants: folded into a Const named C, another op
    assert (c.status, c.type_a, c.type, c.device_b) == ("replaced", "AddV2", "Const", CPU1)
    assert not len(diff.moved)
    assert f"{len(only_a)} ops only in a" in diff.summary


def test_send_recv_renumbering_is_not_a_change(tf, trace_placement, seed_builders):
    """An extra cross-device edge built first shifts every _Send/_Recv counter of the rest."""

    def with_an_extra_edge() -> Any:
        with tf.device("/cpu:1"):
            early = tf.ones((4,), name="early")
        back = tf.identity(early, name="early_back")  # CPU:0 by default: one more transfer pair
        return seed_builders["inputs_none"](), back

    a = trace_placement(seed_builders["inputs_none"], device_count={"CPU": 2})
    b = trace_placement(with_an_extra_edge, device_count={"CPU": 2})
    diff = compare(a, b)
    sends_a = set(a.ops["op"][a.ops["type"] == "_Send"])
    sends_b = set(b.ops["op"][b.ops["type"] == "_Send"])
    assert sends_a - sends_b, "the extra edge was meant to renumber the seed's transfers"
    runtime = diff.ops[diff.ops["type"].isin(["_Send", "_Recv"])]
    changed = runtime[runtime["status"] != "same"]
    # Only the extra edge's own pair is new; the seed's renumbered pairs match by endpoints.
    assert set(changed["status"]) == {"only_b"}
    assert {op.rsplit("/_", 1)[0] for op in changed["op"]} == {"early"}
    assert set(diff.transfers["status"][diff.transfers["tensor"] != "early:0"]) == {"same"}
    assert _row(diff, "C").status == "same" and _row(diff, "C").device_b == CPU1


def test_compare_takes_traces_only_unless_told_how_to_trace():
    with pytest.raises(TypeError, match="two PlacementTrace objects; a is a function"):
        compare(lambda: None, lambda: None)


def test_the_package_compare_traces_functions_and_takes_traces(tf, asks_for_cpu2):
    import tfplace_widget
    from tfplace_widget import PlacementDiff as Exported

    a = tfplace_widget.trace_placement(asks_for_cpu2, device_count={"CPU": 3})

    def same_but_cpu0() -> Any:
        x = tf.ones((1000,), name="A")
        with tf.device("/cpu:0"):
            c = tf.add(x, x, name="C")
        return tf.identity(c, name="out")

    diff = tfplace_widget.compare(a, same_but_cpu0)  # a function: traced with the defaults
    assert isinstance(diff, Exported)
    assert list(diff.moved["op"]) == ["C"] and _row(diff, "C").device_b == CPU0
    with pytest.raises(TypeError, match="not int"):
        tfplace_widget.compare(a, 42)


def test_a_soft_moved_op_against_its_prediction_on_a_gpu_machine(tf, trace_placement):
    """Soft placement moved the GPU request here; with a GPU it would be honoured: moved."""
    from tfplace_widget import predict_placement

    def build() -> Any:
        a = tf.ones((1000,), name="A")
        with tf.device("/gpu:0"):
            c = tf.multiply(a, 2.0, name="C")
        return c

    here = trace_placement(build, soft_placement=True)
    there = predict_placement(here, gpus=1)
    diff = compare(here, there)
    c = _row(diff, "C")
    assert (c.status, c.how_a, c.how_b) == ("moved", "soft", "explicit")
    assert c.device_b.endswith("GPU:0") and c.device_a == CPU0
    assert "1 op moved" in diff.summary or "ops moved" in diff.summary


def test_a_name_that_became_another_op_is_replaced_not_moved(tf, trace_placement):
    """Grappler folds ``ones + 1`` into a Const of the same name: another op, not a move."""

    def build() -> Any:
        x = tf.ones((4, 4), name="x")
        y = tf.matmul(x, x, name="mm")  # where oneDNN rewrites it, it runs as _MklMatMul
        return tf.add(tf.ones((8,), name="eight"), 1.0, name="folded"), y

    plain = trace_placement(build)
    optimized = trace_placement(build, optimize=True)
    diff = compare(plain, optimized)
    folded = _row(diff, "folded")
    assert (folded.status, folded.type_a, folded.type) == ("replaced", "AddV2", "Const")
    assert "folded" not in set(diff.moved["op"])
    assert "now another op: folded (AddV2 on CPU:0 -> Const on CPU:0)" in diff.summary
    # A prediction records the graph's MatMul; the run, what this CPU ran (_MklMatMul where
    # oneDNN rewrote it, MatMul where it did not, e.g. TF_ENABLE_ONEDNN_OPTS=0): the same op.
    from tfplace_widget import predict_placement

    ran = op_row(plain, "mm")["type"]
    assert ran in ("_MklMatMul", "MatMul")
    predicted = compare(plain, predict_placement(plain, gpus=0))
    mm = _row(predicted, "mm")
    assert (mm.type_a, mm.type, mm.status) == (ran, "MatMul", "same")
    assert not (predicted.ops["status"] == "replaced").any()


def test_transfers_without_sizes_say_so_not_zero_bytes(seed_cpu):
    """TF2 traces record no tensor sizes: the seed's copies, their sizes set to NA as a TF2
    trace has them (constructed from the real trace), are "sizes not recorded", not "0 B"."""
    import copy

    a = copy.copy(seed_cpu)
    a.transfers = seed_cpu.transfers.assign(bytes=pd.NA)
    b = copy.copy(seed_cpu)
    b.transfers = seed_cpu.transfers.iloc[0:0]
    summary = compare(a, b).summary
    removed = len(seed_cpu.transfers)
    assert removed
    assert f"transfer{'s' * (removed != 1)} removed (sizes not recorded)." in summary
    assert "(0 B)" not in summary


def test_a_transfer_whose_size_changed_is_changed_not_same(tf, trace_placement):
    """The same cross-device tensor (A:0, CPU:0 -> CPU:1) of 1000 and of 2000 floats: TF's own
    partition graphs copy it in both runs; the diff says its bytes changed, with both sizes."""

    def sized(n: int) -> Any:
        def build() -> Any:
            with tf.device("/cpu:0"):
                a = tf.ones((n,), name="A")
            with tf.device("/cpu:1"):
                return tf.identity(a, name="C")

        return build

    small = trace_placement(sized(1000), device_count={"CPU": 2})
    large = trace_placement(sized(2000), device_count={"CPU": 2})
    diff = compare(small, large)
    rows = diff.transfers[diff.transfers["tensor"] == "A:0"]
    assert len(rows) == 1, diff.transfers
    row = rows.iloc[0]
    assert (row.src_device, row.dst_device) == (CPU0, CPU1)
    assert (row.status, row.bytes_a, row.bytes_b) == ("changed", 4000, 8000)
    assert (row.count_a, row.count_b) == (1, 1)
    # C's result goes back to the client on CPU:0: that copy doubled too
    assert set(diff.transfers["status"]) == {"changed"}
    assert (
        "2 transfers changed: A:0 (CPU:0 -> CPU:1) 4.0 kB -> 8.0 kB, "
        "C:0 (CPU:1 -> CPU:0) 4.0 kB -> 8.0 kB." in diff.summary
    )
    assert "2 changed transfers" in repr(diff)
    # the same run twice: nothing changed
    again = compare(small, trace_placement(sized(1000), device_count={"CPU": 2}))
    assert set(again.transfers["status"]) == {"same"}
    assert "changed" not in again.summary
