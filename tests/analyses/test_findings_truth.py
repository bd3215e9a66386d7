"""Findings on real code name only causes the trace shows, and fixes the user can apply.

The Keras programs (keras-io's examples, shrunk) run once in a process of their own with two
logical CPUs (``tests/analyses/findings_tf2_scenarios.py``); graph builders run here, in a Session with two
CPUs. Each is checked as traced (a CPU-only machine: what a GPU machine would do is a
prediction) and as ``predict_placement(trace, gpus=1)`` predicts it.
"""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from helpers import TWO_CPUS

SCRIPT = Path(__file__).with_name("findings_tf2_scenarios.py")
KERAS = ["mnist_convnet", "text_end_to_end", "lstm", "gru", "mixed_precision"]
# What a finding may tell a user to do only where the user wrote the op it is about.
CAST = "Cast to float32"


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every program of ``findings_tf2_scenarios.py``: its trace and its prediction."""
    out = tmp_path_factory.mktemp("findings") / "scenarios.pickle"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), str(out)], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-4000:]
    with open(out, "rb") as handle:
        results = pickle.load(handle)
    for name, entry in results.items():
        assert "trace" in entry, f"{name}: {entry.get('traceback')}"
    return results


def findings_of(scenarios: dict[str, Any], name: str, which: str) -> pd.DataFrame:
    """Every finding, the immaterial ones too: what they say must be true as well."""
    return scenarios[name][which].all_findings


def _kind(findings: pd.DataFrame, kind: str) -> pd.DataFrame:
    return findings[findings["kind"] == kind]


def _table(findings: pd.DataFrame) -> str:
    return "\n".join(f"{r.kind}/{r.severity}: {r.message}" for r in findings.itertuples())


# -- cpu_fallback: a resource's anchor is named for its true cause -----------------------------
def variable_on_cpu1(tf: Any) -> Any:
    """Graph mode: a variable the user put on CPU:1, read by a MatMul that asks for nothing."""
    with tf.device("/cpu:1"):
        weights = tf.Variable(tf.ones((4, 4)), name="weights")
    x = tf.ones((2, 4), name="x")
    return tf.reduce_sum(tf.matmul(x, weights, name="dense"), name="loss")


def test_a_read_of_a_variable_the_user_put_on_the_cpu_is_no_fallback(tf, trace_placement):
    from tfplace_widget import predict_placement

    trace = trace_placement(lambda: variable_on_cpu1(tf), device_count=TWO_CPUS)
    ops = trace.ops.set_index("op")
    assert ops.loc["weights", "gpu_kernel"] == "host"  # VarHandleOp has a GPU kernel
    for findings in (trace.all_findings, predict_placement(trace, gpus=1).all_findings):
        assert not findings["message"].str.contains("which has none").any(), _table(findings)
        fallbacks = _kind(findings, "cpu_fallback")
        assert not {"weights", "dense/ReadVariableOp"} & {o for f in fallbacks["ops"] for o in f}


def test_keras_variables_made_on_cpu1_are_no_fallbacks(scenarios):
    for which in ("trace", "predicted"):
        findings = findings_of(scenarios, "variables_on_cpu1", which)
        assert _kind(findings, "cpu_fallback").empty, _table(findings)


# -- costly_transfer: variable reads across devices are what they are --------------------------
def test_variable_reads_from_cpu1_are_reads_not_results(scenarios):
    trace = scenarios["variables_on_cpu1"]["trace"]
    findings = trace.all_findings
    assert not findings["message"].str.contains("going back to the caller").any(), _table(findings)
    costly = _kind(findings, "costly_transfer")
    reads = costly[costly["message"].str.startswith("47 reads of variables that live on CPU:1")]
    assert len(reads) == 1, _table(findings)
    read = reads.iloc[0]
    assert read["severity"] in ("high", "medium")
    assert "copied every step to CPU:0, where the ops that use them run" in read["message"]
    assert "68 control signals" in read["message"]
    assert read["evidence"]["copies"] == 47 and read["evidence"]["control_signals"] == 68
    assert "create the variables on the device that computes with them" in read["message"]
    # the updates back: computed on CPU:0, written into the variables on CPU:1
    updates = costly[costly["message"].str.startswith("21 updates of variables that live on CPU:1")]
    assert len(updates) == 1, _table(findings)
    assert "computed on CPU:0 and copied there every step" in updates.iloc[0]["message"]


def test_predicted_variable_reads_say_where_the_variables_live(scenarios):
    findings = findings_of(scenarios, "variables_on_cpu1", "predicted")
    costly = _kind(findings, "costly_transfer")
    reads = costly[costly["message"].str.contains("reads of variables that live on CPU:1")]
    assert len(reads) == 1, _table(findings)
    assert "copied every step to GPU:0" in reads.iloc[0]["message"]
    assert reads.iloc[0]["severity"] in ("high", "medium")


# -- host memory and int32: no cast advice for what the framework made -------------------------
@pytest.mark.parametrize("name", KERAS)
def test_keras_programs_get_no_cast_advice_for_keras_internals(scenarios, name):
    for which in ("trace", "predicted"):
        findings = findings_of(scenarios, name, which)
        assert not findings["message"].str.contains(CAST).any(), f"{which}:\n{_table(findings)}"
        assert _kind(findings, "host_memory_on_gpu").empty, f"{which}:\n{_table(findings)}"


def test_user_int32_arithmetic_still_gets_the_cast(tf, trace_placement):
    def int_arithmetic():
        x = tf.matmul(tf.ones((4, 4), name="a"), tf.ones((4, 4), name="b"), name="mm")
        i = tf.cast(x, tf.int32, name="to_int")
        j = tf.add(i, i, name="int_add")
        return tf.reduce_sum(tf.cast(j, tf.float32, name="to_float"), name="out")

    findings = trace_placement(int_arithmetic, device_count=TWO_CPUS).all_findings
    found = _kind(findings, "host_memory_on_gpu")
    assert len(found) == 1 and found.iloc[0]["ops"] == ["to_int", "int_add"], _table(findings)
    assert "come from to_int, which casts float32 values to int32" in found.iloc[0]["message"]


def test_string_ops_get_no_cast_and_one_finding_per_layer(scenarios):
    for which in ("trace", "predicted"):
        findings = findings_of(scenarios, "text_end_to_end", which)
        fallbacks = _kind(findings, "cpu_fallback")
        layer = fallbacks[fallbacks["message"].str.contains("text_vectorization")]
        assert len(layer) == 1, f"{which}:\n{_table(findings)}"
        message = layer.iloc[0]["message"]
        assert "functional_1_1/text_vectorization_1/" in message
        assert "string ops have no GPU kernel" in message
        assert "input pipeline" in message
        ops = set(layer.iloc[0]["ops"])
        prefix = "functional_1_1/text_vectorization_1/"
        for op in ("StringLower", "Equal", "Squeeze", "RaggedToTensor/RaggedTensorToTensor"):
            assert prefix + op in ops, op


def test_a_string_equal_is_never_told_to_cast(tf, trace_placement):
    def strings():
        words = tf.constant(["a", "b", "a"], name="words")
        same = tf.equal(words, tf.constant("a", name="a"), name="same")
        return tf.reduce_sum(tf.cast(same, tf.float32, name="as_float"), name="count")

    findings = trace_placement(strings, device_count=TWO_CPUS).all_findings
    found = _kind(findings, "cpu_fallback")
    assert len(found) == 1 and "same" in found.iloc[0]["ops"], _table(findings)
    assert "string ops have no GPU kernel" in found.iloc[0]["message"]
    assert not findings["message"].str.contains("Cast to").any()


def test_a_string_op_asked_onto_the_gpu_is_not_told_to_cast(tf, trace_placement):
    from tfplace_widget import predict_placement

    def on_gpu():
        x = tf.ones((4,), name="x")
        with tf.device("/gpu:0"):
            text = tf.strings.as_string(x, name="text")
            ints = tf.matmul(tf.ones((2, 2), tf.int32), tf.ones((2, 2), tf.int32), name="imm")
        return [text, ints]

    predicted = predict_placement(trace_placement(on_gpu, device_count=TWO_CPUS), gpus=1)
    moves = _kind(predicted.all_findings, "soft_move")
    assert len(moves) == 1, _table(predicted.all_findings)
    message = moves.iloc[0]["message"]
    assert "and would run on CPU:0" in message  # a prediction: nothing ran
    assert "text has no GPU kernel: pin it to the CPU on purpose" in message
    assert "imm has no GPU kernel for its dtype: cast its inputs to float32" in message


# -- ping_pong: only copies that leave host memory ---------------------------------------------
def string_chain(tf: Any) -> Any:
    """String ops between string Identity ops, whose GPU kernels keep strings in host memory
    (``kept`` has two readers, so the placer does not put it with its input)."""
    given = tf.identity(tf.constant(["A b", "c D"], name="text"), name="given")
    lower = tf.strings.lower(given, name="lower")
    kept = tf.identity(lower, name="kept")
    upper = tf.strings.upper(kept, name="upper")
    return [tf.strings.length(upper, name="length"), tf.strings.length(kept, name="size")]


def test_string_identities_make_no_ping_pong(tf, trace_placement):
    from tfplace_widget import predict_placement

    trace = trace_placement(lambda: string_chain(tf), device_count=TWO_CPUS)
    assert trace.ops.set_index("op").loc["kept", "gpu_kernel"] == "host"
    predicted = predict_placement(trace, gpus=1)
    assert predicted.device_of("kept").endswith("GPU:0")  # in host memory there
    for findings in (trace.findings, predicted.findings):
        assert _kind(findings, "ping_pong").empty, _table(findings)
        assert not findings["message"].str.contains("run on the GPU").any(), _table(findings)
        # the strings never leave host memory: no copy is worth a finding
        assert _kind(findings, "costly_transfer").empty, _table(findings)


def test_host_memory_inputs_make_no_ping_pong(scenarios):
    # ReadVariableOp -> ShapeN -> Conv2DBackpropInput: the sizes go to a host-memory input
    for which in ("trace", "predicted"):
        findings = findings_of(scenarios, "mnist_convnet", which)
        assert _kind(findings, "ping_pong").empty, f"{which}:\n{_table(findings)}"


# -- what is about a GPU machine reads as a prediction -----------------------------------------
def test_a_cpu_only_run_says_where_a_py_function_would_sit(scenarios):
    trace = scenarios["py_function"]["trace"]
    assert not any("GPU" in d for d in trace.devices)
    found = _kind(trace.all_findings, "ping_pong")
    assert len(found) == 1, _table(trace.all_findings)
    message = found.iloc[0]["message"]
    assert "sits on" not in message
    assert message.startswith("On a machine with a GPU, py (tf.py_function) would sit on GPU:0")


@pytest.mark.parametrize("name", ["mnist_convnet", "text_end_to_end", "py_function"])
def test_every_gpu_finding_of_a_cpu_only_run_reads_as_a_prediction(scenarios, name):
    findings = findings_of(scenarios, name, "trace")
    gpu_kinds = findings[findings["kind"].isin(["cpu_fallback", "ping_pong"])]
    for message in gpu_kinds["message"]:
        assert "on a machine with a gpu" in message.lower(), message


# -- model.fit: causes the trace shows, fixes in the user's code, once per step ------------------
FIT = ["fit_text", "fit_text_int64", "fit_prefetch_to_device", "fit_mirrored", "fit_lookup_table"]
BOTH = ("trace", "predicted")


def _about(findings: pd.DataFrame, op_type: str, trace: Any) -> pd.DataFrame:
    names = set(trace.ops.loc[trace.ops["type"] == op_type, "op"])
    return findings[[bool(names & set(ops)) for ops in findings["ops"]]]


@pytest.mark.parametrize("name", ["fit_text", "fit_lookup_table"])
def test_iterator_reads_have_gpu_kernels_and_one_lever(scenarios, name):
    """IteratorGetNext has GPU kernels (the registry, the trace's gpu_kernel column): it runs
    on the host with its iterator; the only lever is prefetching to the device."""
    for which in BOTH:
        trace = scenarios[name][which]
        kernels = set(trace.ops.loc[trace.ops["type"] == "IteratorGetNext", "gpu_kernel"])
        assert kernels == {"yes"}, kernels
        reads = _about(_kind(trace.all_findings, "cpu_fallback"), "IteratorGetNext", trace)
        assert len(reads) == 1, f"{which}:\n{_table(trace.all_findings)}"
        message = reads.iloc[0]["message"]
        assert "no GPU kernel" not in message and "outside the step" not in message, message
        assert "tf.data.experimental.prefetch_to_device" in message
        assert reads.iloc[0]["severity"] == "info"


def test_prefetch_to_device_moves_the_iterator_reads_under_fit(scenarios):
    """The lever, tried: under model.fit, prefetch_to_device puts the step's IteratorGetNext
    on the device named; the shapes Keras reads of the batch there are no one's to move."""
    trace = scenarios["fit_prefetch_to_device"]["trace"]
    reads = trace.ops[trace.ops["type"] == "IteratorGetNext"]
    assert set(reads["device"]) == {"/job:localhost/replica:0/task:0/device:CPU:1"}
    costly = _kind(trace.findings, "costly_transfer")
    assert not costly["message"].str.contains(r"\bput ").any(), _table(trace.findings)


def test_keras_embedding_cast_names_the_input_dtype_and_the_fix_works(scenarios):
    findings = findings_of(scenarios, "fit_text", "trace")
    found = _kind(findings, "host_memory_on_gpu")
    assert len(found) == 1, f"trace:\n{_table(findings)}"
    assert "keras.Input(..., dtype='int64')" in found.iloc[0]["message"]
    assert not any("gradient_tape/" in op for op in found.iloc[0]["ops"])
    # the fix, tried: the same model with an int64 Input has no host-memory arithmetic
    for which in BOTH:
        fixed = findings_of(scenarios, "fit_text_int64", which)
        assert _kind(fixed, "host_memory_on_gpu").empty, f"{which}:\n{_table(fixed)}"
    # predict_placement(trace, gpus=1) predicts what Keras's default does on a GPU (issue 30
    # item 4): the step compiled by XLA, one cluster with no host-memory kernels, so those ops
    # are how 'xla' there and no host-memory finding names them.
    predicted = scenarios["fit_text"]["predicted"]
    how = dict(zip(predicted.ops["op"], predicted.ops["how"].astype(str), strict=True))
    assert {how.get(op) for op in found.iloc[0]["ops"]} == {"xla"}
    assert _kind(predicted.findings, "host_memory_on_gpu").empty, _table(predicted.findings)
    # ... and the trace's own finding agrees: compiled on this CPU-only machine, Keras's
    # default reads as jit_compile=False, so it holds only for that and says so, as info.
    assert found.iloc[0]["severity"] == "info", _table(findings)
    assert "only if the step runs with jit_compile=False" in found.iloc[0]["message"]


def test_string_ops_the_user_put_on_the_cpu_are_no_fallback(scenarios):
    for which in BOTH:
        trace = scenarios["fit_lookup_table"][which]
        split = trace.ops[trace.ops["type"] == "StringSplitV2"].iloc[0]
        assert split["requested_device"].endswith("CPU:0")  # the user's tf.device
        found = _about(_kind(trace.all_findings, "cpu_fallback"), "StringSplitV2", trace)
        assert len(found) == 1, f"{which}:\n{_table(trace.all_findings)}"
        assert found.iloc[0]["severity"] == "info"
        assert "where a tf.device asks for them (no fallback)" in found.iloc[0]["message"]


def test_a_strategys_own_copies_ask_nothing_of_the_user(scenarios):
    for which in BOTH:
        findings = findings_of(scenarios, "fit_mirrored", which)
        costly = _kind(findings, "costly_transfer")
        assert not costly["message"].str.contains(r"\bput |create the variables").any(), (
            f"{which}:\n{_table(findings)}"
        )
        strategy = costly[costly["message"].str.contains("between the replicas")]
        assert len(strategy) >= 1, f"{which}:\n{_table(findings)}"
        assert {e["user_fix"] for e in strategy["evidence"]} == {0}
        pongs = _kind(findings, "ping_pong")
        assert not pongs["message"].str.contains("drop that request").any(), _table(findings)


@pytest.mark.parametrize("name", ["fit_text", "fit_lookup_table"])
def test_iterators_tables_and_returned_logs_are_no_variables(scenarios, name):
    findings = findings_of(scenarios, name, "predicted")
    costly = _kind(findings, "costly_transfer")
    assert not costly["message"].str.contains("variables").any(), _table(findings)
    if name == "fit_lookup_table":
        tables = costly[costly["message"].str.contains("lookups in tables that live on CPU:0")]
        assert len(tables) == 1, _table(findings)


@pytest.mark.parametrize("which", BOTH)
def test_fits_training_and_evaluation_copies_make_one_finding(scenarios, which):
    trace = scenarios["fit_text"][which]
    copies = trace.ops[trace.ops["op"].str.startswith("multi_step_on_iterator/")]
    assert len(copies) > 100  # the evaluation copy of the step, listed beside the training one
    findings = trace.findings
    assert not findings["message"].str.contains("multi_step_on_iterator/").any(), _table(findings)
    keys = [(r.kind, r.message) for r in findings.itertuples()]
    assert len(keys) == len(set(keys)), _table(findings)
    for row in findings.itertuples():  # each finding takes both copies' ops
        if row.kind in ("cpu_fallback", "host_memory_on_gpu"):
            assert any(op.startswith("multi_step_on_iterator/") for op in row.ops), row.message


def test_every_finding_kind_has_its_rule_and_fit_findings_audit(scenarios):
    from tfplace_widget._analyses.findings import KIND_RULES, audit, kind_table
    from tfplace_widget._model.columns import FINDING_KINDS

    assert set(KIND_RULES) == set(FINDING_KINDS)
    assert list(kind_table()["kind"]) == list(KIND_RULES)
    for name in FIT:
        for which in BOTH:
            findings = findings_of(scenarios, name, which)
            table = audit(findings)
            assert len(table) == len(findings)
            # what no user code places is never material advice
            assert not (table["material"] & ~table["user_fix"]).any(), _table(findings)


def test_idle_device_needs_a_step_long_enough_to_matter(tf, trace_placement):
    """A step of a few hundred microseconds, two matmuls on CPU:0 and one tiny add on CPU:1:
    which device ran a few microseconds is noise (before, an idle_device came in most runs
    and not in others). A run that a loaded machine stretched past 1 ms is not asserted on."""

    def toy():
        x = tf.ones((128, 128), name="x")
        product = tf.matmul(tf.matmul(x, x, name="mm0"), x, name="mm1")
        with tf.device("/cpu:1"):
            tiny = tf.add(tf.ones((2,), name="t"), 1.0, name="tiny")
        return [product, tiny]

    short = 0
    for _ in range(4):
        trace = trace_placement(toy, device_count=TWO_CPUS)
        events = trace.events
        span = (events["start_us"] + events["duration_us"]).max() - events["start_us"].min()
        if span < 1_000:
            short += 1
            assert _kind(trace.findings, "idle_device").empty, _table(trace.findings)
    assert short, "every run took 1 ms or more: the machine is too loaded for this test"


# -- what a finding lists: material, and framework ops under what made them -----------------
# An op path of Keras's or TensorFlow's own (a replica, the gradient code, an optimizer) as a
# message would spell it out; a tensor ("largest replica_1/Sum_1:0") is left out of the check.
_INTERNAL_PATH = re.compile(
    r"(?<![\w/])(gradient_tape|gradients|replica_\d+|(sgd|adam|rmsprop)(_\d+)*)/\w"
)


@pytest.mark.parametrize("name", [*KERAS, *FIT])
def test_messages_name_framework_ops_by_their_layer_optimizer_or_replica(scenarios, name):
    """Ops Keras, TensorFlow's gradient code or a strategy made are listed under the layer,
    optimizer or replica that made them (``the gradient of sequential/dense``, ``the optimizer
    sgd``), never by their internal paths; the finding's ops keep every name."""
    for which in BOTH:
        findings = scenarios[name][which].all_findings
        for row in findings.itertuples():
            message = re.sub(r"largest \S+", "", row.message)
            assert not _INTERNAL_PATH.search(message), f"{which}: {row.message}"
        if name == "fit_mirrored":  # the replicas' ops are listed under their replica
            assert any("/replica_1/" in op for ops in findings["ops"] for op in ops)


def _share_of_the_step(trace: Any, ops: list[str]) -> float:
    """The ops' share of the traced calls' op time, from the trace's own ``ops`` rows."""
    rows = trace.ops
    if "input_stage" in rows:
        rows = rows[rows["input_stage"].isna()]
    durations = rows["duration_us"].astype(float).fillna(0.0)
    return float(durations[rows["op"].isin(ops)].sum() / durations.sum())


@pytest.mark.parametrize("name", [*KERAS, *FIT])
def test_every_listed_finding_is_a_material_share_of_the_step(scenarios, name):
    """What ``trace.findings`` lists takes at least 1% of the step's op time (a prediction's
    findings: of the step it was predicted from); the rest stay in ``trace.all_findings``."""
    from tfplace_widget._analyses.findings import MATERIAL_SHARE

    traced = scenarios[name]["trace"]
    for which in BOTH:
        trace = scenarios[name][which]
        listed, every = trace.findings, trace.all_findings
        assert len(every) >= len(listed)
        for row in listed.itertuples():
            if row.message.endswith("click to see their ops."):  # the rest of a capped kind
                continue
            assert _share_of_the_step(traced, row.ops) >= MATERIAL_SHARE, f"{which}: {row.message}"
            assert row.evidence["material"] == 1
        for row in every.itertuples():
            evidence = row.evidence
            if evidence.get("material") == 0:  # under 1%, or in no more than half the steps
                steady = 2 * evidence["steady_steps"] > evidence["traced_steps"]
                assert evidence["step_share"] < MATERIAL_SHARE or not steady
                assert row.message not in set(listed["message"])


def test_fits_steps_are_the_traced_steps_a_finding_must_hold_in(scenarios):
    """model.fit over 8 samples in batches of 4 runs its step twice, both traced: what
    fit_text's findings list holds in both steps, and none claims to rest on one step."""
    findings = scenarios["fit_text"]["trace"].findings
    assert len(findings), _table(scenarios["fit_text"]["trace"].all_findings)
    for row in findings.itertuples():
        assert row.evidence["traced_steps"] == row.evidence["steady_steps"] == 2, row.message
        assert "rests on one traced step" not in row.message


@pytest.mark.parametrize("name", ["fit_text", "fit_text_int64"])
def test_a_findings_share_of_several_steps_is_its_ops_share(scenarios, name):
    """The CPU fallback of fit's text ops, over its two traced steps: the share the finding
    states is its ops' share of the traced op time, not more (their time in the first step
    and, again, half their total in the second)."""
    trace = scenarios[name]["trace"]
    fallbacks = _kind(trace.all_findings, "cpu_fallback")
    assert len(fallbacks), _table(trace.all_findings)
    for row in fallbacks.itertuples():
        assert row.evidence["traced_steps"] == 2
        assert row.evidence["step_share"] == pytest.approx(
            _share_of_the_step(trace, row.ops), abs=2e-4
        ), row.message


def test_an_idle_device_in_one_step_of_three_is_no_finding(tf, trace_placement):
    """CPU:0's Python sleeps 40 ms in the first traced step and 3 ms in the next two, CPU:1's
    3 ms in those two only: over the three steps CPU:1 is idle for most of the time, yet in
    two steps of three both devices are busy. Not steady: no idle_device. The same program
    traced for its first step alone has one, and says it rests on one step."""
    import time

    calls = [0]

    def work(seconds: list[float]) -> Any:
        def run(x: Any) -> Any:
            time.sleep(seconds[min(calls[0], len(seconds) - 1)])
            return x

        return run

    def tick(x: Any) -> Any:
        calls[0] += 1
        return x

    def uneven():
        x = tf.ones((2,), name="x")
        with tf.device("/cpu:0"):
            busy = tf.py_function(work([0.0, 0.04, 0.003]), [x], tf.float32, name="busy")
        with tf.device("/cpu:1"):
            other = tf.py_function(work([0.0, 0.0, 0.003]), [x], tf.float32, name="other")
        with tf.control_dependencies([busy, other]):
            return tf.py_function(tick, [x], tf.float32, name="tick")

    three = trace_placement(uneven, device_count=TWO_CPUS, steps=3)
    assert three.ops.set_index("op")["runs"]["busy"] == 3
    idle = _kind(three.all_findings, "idle_device")
    assert idle.empty, _table(three.all_findings)
    calls[0] = 0
    one = trace_placement(uneven, device_count=TWO_CPUS, steps=1)
    idle = _kind(one.findings, "idle_device")
    assert len(idle) == 1, _table(one.all_findings)
    assert "rests on one traced step" in idle.iloc[0]["message"]
