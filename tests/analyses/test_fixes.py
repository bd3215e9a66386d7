"""Fixes as data and tried for real (issue 33): the seed experiment's ``inputs_cpu`` copies A
and B from CPU:0 to CPU:1 for C; its costly_transfer finding carries the overrides that put A
and B on CPU:1, and ``try_fix`` runs the builder again with them, in a real Session on two
CPUs, and measures the copies gone, the outputs equal and TensorFlow's own log agreeing."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from helpers import CPU0, CPU1, SEED_N, TWO_CPUS

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


# -- fixes of the other finding kinds: each tried, or said why it cannot be ------------------


def _line_of(op: str) -> str:
    """``tests/analyses/test_fixes.py:N``: the line of this file that makes the op named
    ``op``, as the ``source`` column writes it (relative to the working directory)."""
    here = Path(__file__)
    made = f'name="{op}"'
    line = next(i for i, text in enumerate(here.read_text().splitlines(), 1) if made in text)
    cwd = Path.cwd()
    return f"{here.relative_to(cwd) if here.is_relative_to(cwd) else here.name}:{line}"


def strings_in_the_step(tf):
    def build():
        x = tf.ones((SEED_N,), name="x")
        text = tf.strings.as_string(x, name="as_str")
        numbers = tf.strings.to_number(text, name="to_num")
        return tf.reduce_sum(numbers * 2.0, name="out")

    return build


def variable_away_from_its_reader(tf):
    def build():
        with tf.device("/cpu:0"):
            v = tf.Variable(tf.ones((200, 200)), name="v")
        with tf.device("/cpu:1"):
            x = tf.ones((200, 200), name="x")
            return tf.matmul(x, v, name="mm")

    return build


def cpu_part_asked_for(tf, cpu="/cpu:0"):
    """a and c ask for nothing (CPU:0 here, GPU:0 on a GPU machine), b between them for
    ``cpu``."""

    def build():
        x = tf.ones((300, 300), name="x")
        a = tf.matmul(x, x, name="a")
        with tf.device(cpu):
            b = tf.multiply(a, 2.0, name="b")
        return tf.matmul(b, b, name="c")

    return build


def int_arithmetic_on_cast_floats(tf):
    def build():
        x = tf.ones((SEED_N,), name="x") * 100.0
        i = tf.cast(x, tf.int32, name="i")
        j = tf.add(i, 3, name="j")
        return tf.reduce_sum(tf.cast(j, tf.float32) * x, name="out")

    return build


def one_of(trace: PlacementTrace, kind: str) -> pd.Series:
    """The one finding of ``kind``, material or not: these tests are about its fix, and
    whether it takes 1% of a step of a few milliseconds depends on the machine's load."""
    every = trace.all_findings
    rows = every[every["kind"] == kind]
    assert len(rows) == 1, every[["kind", "ops"]]
    return rows.iloc[0]


def test_a_string_op_in_the_step_gets_the_edit_at_its_line_untried(tf, trace_placement, tmp_path):
    """Predicted: AsString and StringToNumber have no GPU kernel. The fix is the edit at the
    lines that make them (dataset.map), said to be untried (no device request simulates it);
    the ping_pong they make points at it, and try_fix refuses with the reason."""
    trace = trace_placement(strings_in_the_step(tf), device_count=TWO_CPUS)
    fallback = one_of(trace, "cpu_fallback")
    fix = fallback["fix"]
    assert fallback["predicted"] and fix["overrides"] is None and fix["no_fix"] == ""
    where = f"{_line_of('as_str')} in build, {_line_of('to_num')} in build"
    assert fix["edit"] == (
        f"move the calls that make as_str, to_num ({where}) into the input pipeline "
        "(dataset.map), before the step, so that the step gets numbers."
    )
    assert fix["not_simulable"].startswith("the edit takes these ops out of the step")
    with pytest.raises(ValueError, match="cpu_fallback finding's fix cannot be tried: the edit"):
        trace.try_fix(fallback)
    pong = one_of(trace, "ping_pong")["fix"]
    assert pong["overrides"] is None and pong["no_fix"].startswith("as_str, to_num cannot run on")
    with pytest.raises(ValueError, match="has no fix to try: as_str, to_num cannot run"):
        trace.try_fix(one_of(trace, "ping_pong"))
    with pytest.raises(ValueError, match="none of this trace's findings has a placement fix"):
        trace.suggest_placement()
    loaded = PlacementTrace.load(trace.save(tmp_path / "strings.tfplace"))
    assert loaded.findings["fix"].tolist() == trace.findings["fix"].tolist()


def test_a_file_written_before_not_simulable_still_loads_its_fixes():
    from tfplace_widget._tfplace_format.schema import _fixes

    older = {"overrides": {"A": "/CPU:1"}, "edit": "put A on CPU:1", "no_fix": ""}
    assert _fixes(pd.Series([older, None], dtype=object)) is None
    assert _fixes(pd.Series([{**older, "not_simulable": 1}], dtype=object)) is not None


def test_a_variable_away_from_its_reader_is_created_beside_it_and_tf_agrees(tf, trace_placement):
    """v on CPU:0, read by mm on CPU:1: the fix asks for CPU:1 at v's creation line, simulated
    on v and the ops its resource ties to it; tried, the read's copy is gone, TF's log puts v
    on CPU:1, the outputs are equal."""
    trace = trace_placement(variable_away_from_its_reader(tf), device_count=TWO_CPUS)
    row = trace.findings[trace.findings["ops"].map(lambda ops: "mm/ReadVariableOp" in ops)]
    fix = row.iloc[0]["fix"]
    assert fix["overrides"]["v"] == "/CPU:1" and "mm/ReadVariableOp" in fix["overrides"]
    assert set(fix["overrides"].values()) == {"/CPU:1"}
    assert fix["edit"] == (
        "create v on CPU:1, where mm computes with it: wrap the line that creates it "
        f"({_line_of('v')} in build) in `with tf.device('/CPU:1'):`."
    )
    effect = trace.try_fix(row.index[0])
    assert effect.verified, effect.why
    assert effect.copies == (2, 1)  # the read's copy gone, the fetch of mm's result stays
    assert effect.after.device_of("v") == effect.after.device_of("mm/ReadVariableOp") == CPU1
    assert effect.outputs_equal is True and effect.tf_log_agrees is True
    assert {"v", "mm/ReadVariableOp"} <= set(effect.moved)


def test_a_ping_pong_the_code_asked_for_moves_the_cpu_part_and_is_predicted_gone(
    tf, trace_placement
):
    """Predicted for one GPU: a and c on GPU:0, b asked for the CPU between them. The fix puts
    b (and its constant) on GPU:0 at b's line; predict_placement with it has no ping_pong and
    no copy left; the two predicted placements, run here on two CPUs, give equal outputs."""
    trace = trace_placement(cpu_part_asked_for(tf), device_count=TWO_CPUS)
    row = one_of(trace, "ping_pong")
    fix = row["fix"]
    assert row["predicted"] and fix["overrides"] == {"b": "/GPU:0", "b/y": "/GPU:0"}
    assert fix["edit"] == (
        "put b on GPU:0 with a, c: change the tf.device('/CPU:0') around the lines that make "
        f"them ({_line_of('b')} in build) to tf.device('/GPU:0')."
    )
    effect = trace.try_fix(row)
    assert effect.verified and effect.predicted, effect.why
    assert effect.finding_gone and effect.copies == (2, 0)
    assert set(effect.moved) == {"b", "b/y"}
    # run for real with CPU:1 standing in for GPU:0: a and c there, b on CPU:0 asked for, then
    # b with them: TensorFlow accepts it, the copies go, the outputs stay equal
    assert effect.outputs_equal is True and effect.tf_log_agrees is True
    assert effect.stand_in is not None and len(effect.stand_in[0][1]) == 5
    assert effect.notes[1].startswith(
        "run on this machine with CPU:1 standing in for GPU:0 (every op predicted on the GPU "
        "asked for it): copies 3 -> 1, outputs equal, TensorFlow's placement log agrees"
    )
    assert effect.why.endswith("run here with a CPU standing in for the GPU, the outputs are equal")


def test_host_memory_on_gpu_says_no_device_request_cures_it(tf, trace_placement):
    trace = trace_placement(int_arithmetic_on_cast_floats(tf), device_count=TWO_CPUS)
    row = one_of(trace, "host_memory_on_gpu")
    assert row["fix"]["overrides"] is None and row["fix"]["edit"] == ""
    assert row["fix"]["no_fix"].startswith(
        "no device request changes where a GPU kernel keeps its inputs and outputs: the GPU "
        "kernel of int32 AddV2 keeps them in host memory"
    )


def test_suggest_placement_tries_each_fix_against_its_own_baseline_and_leaves_out_a_clash(
    tf, trace_placement
):
    """b asked for CPU:1 between a and c (CPU:0 here): measured copies, with fixes that move
    a or b; predicted for a GPU machine, a ping_pong whose fix puts b on GPU:0. Each fix is
    tried against the code as it is, run or predicted as its finding is; the ping_pong's also
    runs here with CPU:0 (the CPU nothing asked for) standing in for GPU:0. Together: b's two
    fixes ask for two devices, so the later one is left out, and said so."""
    trace = trace_placement(cpu_part_asked_for(tf, "/cpu:1"), device_count=TWO_CPUS)
    effect = trace.suggest_placement()
    trials = effect.trials
    assert [(t.kinds, t.predicted) for t in trials] == [
        (["costly_transfer"], False),
        (["costly_transfer"], False),
        (["ping_pong"], True),
    ]
    assert [bool(t.before.predicted) for t in trials] == [False, False, True]
    assert [t.verified for t in trials] == [False, True, True]  # a to CPU:1: copies only move
    assert (
        trials[2]
        .notes[1]
        .startswith(
            "run on this machine with CPU:0 standing in for GPU:0 (every op predicted on the GPU "
            "asked for it): copies 2 -> 0, outputs equal, TensorFlow's placement log agrees"
        )
    )
    assert effect.verified and not effect.predicted, effect.why
    assert effect.overrides == {"b": "/CPU:0", "b/y": "/CPU:0"} and effect.copies == (2, 0)
    assert effect.notes[-1].startswith(
        "left out, verified alone but asking for other devices for b, b/y than a fix before it"
    )


@pytest.mark.parametrize(
    ("device", "in_a_strategys_step", "written"),
    [
        ("/job:localhost/replica:0/task:0/device:CPU:1", False, "/CPU:1"),
        # a cluster's device keeps its task, with one slash (was '//job:ps/task:1/CPU:0')
        ("/job:ps/replica:0/task:1/device:CPU:0", False, "/job:ps/task:1/CPU:0"),
        # every worker runs a strategy's step: the code names the worker's own device
        ("/job:worker/replica:0/task:1/device:GPU:0", True, "/GPU:0"),
    ],
)
def test_a_fix_names_the_device_as_tf_device_takes_it(device, in_a_strategys_step, written):
    from types import SimpleNamespace

    from tfplace_widget._analyses.findings.fixes import as_written
    from tfplace_widget._analyses.findings.tasks import PART_TASK

    trace = SimpleNamespace(**{PART_TASK: "/job:worker/task:1" if in_a_strategys_step else ""})
    assert as_written(SimpleNamespace(trace=trace), device) == written


def test_a_fix_is_not_called_slower_by_load_rising_over_the_runs(tf, trace_placement):
    """Each run of the builder's step sleeps 100 ms longer than the one before, as a machine
    whose load keeps rising would: the fix's run, after the code's, is slower, and it would
    be in any second pair made in the same order. Made the other way round (the fix first),
    the second pair finds the fix faster: the first was noise, and the fix is verified. (At
    20 ms more per run, a CI machine's own load now and then hid the rise in a pair.)"""
    runs = []

    def rising_load() -> Any:
        runs.append(len(runs) + 1)
        delay = 0.1 * runs[-1]

        def wait() -> list:
            time.sleep(delay)
            return []

        with tf.device("/cpu:0"):
            a = tf.ones((SEED_N,), name="A")
            b = tf.ones((SEED_N,), name="B")
        with tf.device("/cpu:1"):
            waited = tf.py_function(wait, [], [], name="wait")
            with tf.control_dependencies([waited]):
                return tf.add(a, b, name="C")

    trace = trace_placement(rising_load, device_count=TWO_CPUS)
    effect = trace.try_fix(finding_about(trace, "A").name)
    assert len(runs) == 5  # the trace, a pair of runs, and the second pair
    assert effect.verified, (effect.why, effect.step_us)
    assert "slower in a first pair of runs, not in a second: noise" in effect.notes
    assert effect.copies == (3, 1)
