"""Fixes as data and tried for real (issue 33): the seed experiment's ``inputs_cpu`` copies A
and B from CPU:0 to CPU:1 for C; its costly_transfer finding carries the overrides that put A
and B on CPU:1, and ``try_fix`` runs the builder again with them, in a real Session on two
CPUs, and measures the copies gone, the outputs equal and TensorFlow's own log agreeing."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
from helpers import CPU0, CPU1, SEED_N

from tfplace_widget import PlacementTrace
from tfplace_widget._analyses.fix_effect import FixEffect, log_agrees, outputs_equal, step_change

MOVED = {"A", "B", "A/Const", "A/shape_as_tensor", "B/Const", "B/shape_as_tensor"}


def finding_about(trace: PlacementTrace, op: str) -> pd.Series:
    findings = trace.findings
    about = findings["ops"].map(lambda ops: op in ops).astype(bool)
    rows = findings[about & (findings["kind"] == "costly_transfer")]
    return rows.iloc[0]


def test_the_seed_copy_finding_carries_a_fix_that_puts_a_and_b_beside_c(seed_cpu):
    row = finding_about(seed_cpu, "A")
    fix = row["fix"]
    assert set(fix["overrides"]) == MOVED  # A, B and the constants their tf.ones made
    assert set(fix["overrides"].values()) == {"/CPU:1"}
    assert fix["no_fix"] == ""
    lines = ", ".join(seed_cpu.ops.set_index("op").loc[["A", "B"], "source"])  # conftest.py:N
    assert fix["edit"] == (
        "put A, B on CPU:1 with C: change the tf.device('/CPU:0') around the lines that make "
        f"them ({lines}) to tf.device('/CPU:1')."
    )
    # the message is the one it always was
    assert row["message"].endswith(
        "put A, B on CPU:1 with C, or those on CPU:0, so the tensors stay on one device."
    )


def test_the_fetch_makes_no_claim_and_try_fix_says_there_is_nothing_to_try(seed_cpu):
    fetch = seed_cpu.findings[seed_cpu.findings["ops"].map(lambda ops: "A" not in ops)]
    assert len(fetch) == 1 and fetch["fix"].iloc[0] is None
    with pytest.raises(ValueError, match="has no fix to try: it names no placement change"):
        seed_cpu.try_fix(fetch.iloc[0])


def test_the_fix_is_saved_and_loaded_with_the_findings(seed_cpu, tmp_path):
    seed_cpu.findings  # noqa: B018 (computed, so saved)
    loaded = PlacementTrace.load(seed_cpu.save(tmp_path / "seed.tfplace"))
    assert loaded.findings["fix"].tolist() == seed_cpu.findings["fix"].tolist()


def test_try_fix_removes_the_copies_keeps_the_outputs_and_tf_agrees(seed_cpu):
    effect = seed_cpu.try_fix(finding_about(seed_cpu, "A").name)
    assert isinstance(effect, FixEffect)
    assert effect.verified, effect.why
    assert effect.finding_gone
    # A:0 and B:0 (CPU:0 -> CPU:1) are gone; C:0, the fetch back to the client on CPU:0, stays
    assert effect.copies == (3, 1)
    assert effect.bytes == (3 * 4 * SEED_N, 4 * SEED_N)
    assert effect.after.transfers[["tensor", "src_device", "dst_device"]].values.tolist() == [
        ["C:0", CPU1, CPU0]
    ]
    assert set(effect.moved) == MOVED
    assert effect.after.device_of("A") == effect.after.device_of("B") == CPU1
    assert effect.before.device_of("A") == CPU0  # the code as it is, run again
    assert effect.outputs_equal is True and effect.tf_log_agrees is True
    assert len(effect.step_us[0]) == len(effect.step_us[1]) == 5
    assert effect.step_change in ("none", "faster")
    frame = effect.frame
    assert frame["measure"].tolist()[:2] == ["finding", "copies"]
    assert frame.set_index("measure").loc["copies"].tolist() == [3, 1]
    assert repr(effect).startswith("FixEffect(verified: the finding is gone, copies 3 -> 1")


def test_a_fix_that_moves_nothing_is_rejected(seed_cpu):
    row = finding_about(seed_cpu, "A").copy()
    row["fix"] = {"overrides": {"C": "/CPU:1"}, "edit": "", "no_fix": ""}  # C is there already
    effect = seed_cpu.try_fix(row)
    assert not effect.verified
    assert effect.why.startswith("the finding is still there; no op moved")
    assert effect.copies == (3, 3)


def test_suggest_placement_applies_the_verified_fixes_together(seed_cpu):
    effect = seed_cpu.suggest_placement()
    assert effect.verified, effect.why
    assert [trial.verified for trial in effect.trials] == [True]
    assert effect.copies == (3, 1) and set(effect.overrides) == MOVED
    assert effect.diff is not None and set(effect.diff.moved["op"]) >= {"A", "B"}


def test_a_loaded_trace_has_no_code_to_re_run(seed_cpu, tmp_path):
    loaded = PlacementTrace.load(seed_cpu.save(tmp_path / "seed.tfplace"))
    with pytest.raises(
        ValueError,
        match=r"not made by trace_placement in this process \(loaded from a \.tfplace file",
    ):
        loaded.try_fix(0)
    with pytest.raises(ValueError, match="suggest_placement runs the traced code again"):
        loaded.suggest_placement()


def test_the_placement_log_check_is_not_vacuous(seed_cpu):
    assert log_agrees(seed_cpu) is True
    wrong = copy.copy(seed_cpu)
    wrong.ops = seed_cpu.ops.copy()
    wrong.ops.loc[wrong.ops["op"] == "C", "device"] = CPU0  # TF's log says CPU:1
    assert log_agrees(wrong) is False


def test_step_change_is_none_inside_the_noise():
    assert step_change([100.0, 140.0, 120.0], [110.0, 150.0]) == "none"
    assert step_change([100.0, 140.0], [150.0, 160.0]) == "slower"
    assert step_change([100.0, 140.0], [50.0, 60.0]) == "faster"
    assert step_change([], [1.0]) == "unmeasured"


def test_outputs_equal_within_float_tolerance():
    import numpy as np

    a = np.ones(3, dtype=np.float32)
    assert outputs_equal([a, {"x": 1}], [a + 1e-8, {"x": 1}])
    assert not outputs_equal([a], [a + 1e-2])
    assert not outputs_equal(a, a.astype(np.float64))
    assert not outputs_equal([a], (a, a))


def test_a_fix_for_a_gpu_machine_is_checked_against_the_prediction_and_says_so(tf):
    """No GPU here: the seed's inputs_cpu with C on /gpu:0, predicted with one GPU, copies A
    and B to GPU:0; its fix (A, B on GPU:0) is checked with predict_placement, not run."""
    from tfplace_widget import predict_placement

    def inputs_cpu():
        with tf.device("/cpu:0"):
            a = tf.ones((SEED_N,), name="A")
            b = tf.ones((SEED_N,), name="B")
        with tf.device("/gpu:0"):
            return tf.add(a, b, name="C")

    predicted = predict_placement(inputs_cpu, gpus=1)
    row = finding_about(predicted, "A")
    assert row["predicted"] and set(row["fix"]["overrides"].values()) == {"/GPU:0"}
    effect = predicted.try_fix(row.name)
    assert effect.verified and effect.predicted, effect.why
    assert effect.copies == (2, 0) and set(effect.moved) == MOVED
    assert effect.outputs_equal is None and effect.step_change == "unmeasured"
    assert effect.notes == [
        "checked against predict_placement with and without the overrides: this machine has "
        "no GPU, so nothing ran with the fix"
    ]
    assert "(predicted for a machine with a GPU: nothing ran with the fix)" in repr(effect)
