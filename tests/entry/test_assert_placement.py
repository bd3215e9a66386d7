"""Issue 33, item 5: placement checks where teams test and train. ``assert_placement`` traces
once and checks expected devices, a limit on copies and CPU fallbacks, raising a
``PlacementAssertionError`` (an ``AssertionError``) whose message lists the offending ops; on a
machine without the named device it checks the prediction and says so. The ``tfplace`` pytest
plugin prints the same table in a failed test's report; ``--expect-device`` runs the same check
(tests/entry/test_cli.py).

Graph builders run here on two real CPUs (``device_count``); TF2 code on two logical CPUs runs
in a process of its own (logical devices are set before the runtime starts).
"""

from __future__ import annotations

import inspect
import re
import textwrap
from typing import Any

import pytest
from helpers import CPU0, CPU1, GPU_TRACES, REPO, TWO_CPUS, needs_source_tree, run_python

from tfplace_widget import PlacementAssertionError, PlacementTrace, assert_placement
from tfplace_widget._analyses.expectations import ExpectationError

pytest_plugins = ["pytester"]


def table(message: str, heading: str) -> list[list[str]]:
    """The rows of the table under ``heading`` in a check's text, split on 2+ spaces (the
    header row first)."""
    lines = message.splitlines()
    start = lines.index(heading) + 1
    rows = []
    for line in lines[start:]:
        if not line.startswith("  ") or line.startswith("  - "):
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows


def offending_header(trace: PlacementTrace) -> list[str]:
    """The columns of the offending ops' table: ``source`` too when the trace has it."""
    return (
        ["op", "type", "device", "expected"]
        + (["source"] if "source" in trace.ops else [])
        + ["reason"]
    )


def int32_matmul(tf: Any) -> Any:
    """Graph builder: a float32 MatMul (GPU kernel) and an int32 one (none)."""

    def build() -> Any:
        x = tf.ones((4, 4), name="x")
        y = tf.matmul(x, x, name="y")
        i = tf.ones((4, 4), tf.int32, name="i")
        n = tf.matmul(i, i, name="n")  # the int32 MatMul: no GPU kernel
        return tf.add(tf.cast(n, tf.float32, name="f"), y, name="z")

    return build


def gpu_kernel_dtypes(tf: Any, op: str) -> set[str]:
    """The ``T`` dtypes TensorFlow's kernel registry has a GPU kernel of ``op`` for."""
    from tensorflow.python.framework import kernels

    found = set()
    for kernel in kernels.get_registered_kernels_for_op(op).kernel:
        if kernel.device_type != "GPU":
            continue
        for constraint in kernel.constraint:
            if constraint.name == "T":
                found |= {tf.dtypes.as_dtype(t).name for t in constraint.allowed_values.list.type}
    return found


# -- expectations ----------------------------------------------------------------------------------
def test_an_expectation_that_holds_returns_the_trace(seed_builders):
    """The seed's inputs_cpu, traced here (device_count passed through): C on CPU:1, its
    inputs on CPU:0, as TensorFlow's step stats put them."""
    trace = assert_placement(
        seed_builders["inputs_cpu"],
        expect={"C": "CPU:1", "[AB]": "/device:CPU:0", "A/*": "CPU"},
        device_count=TWO_CPUS,
    )
    assert isinstance(trace, PlacementTrace) and not trace.predicted
    assert trace.mode == "graph"
    assert (trace.device_of("C"), trace.device_of("A")) == (CPU1, CPU0)


def test_a_failed_expectation_lists_exactly_the_offending_ops(seed_cpu):
    with pytest.raises(PlacementAssertionError) as info:
        assert_placement(seed_cpu, expect={"C": "CPU:1", "[AB]": "CPU:1"})
    error = info.value
    assert isinstance(error, AssertionError)
    assert not error.check.predicted and error.check.basis == "the trace"
    message = str(error)
    assert message.splitlines()[0] == "2 ops not on CPU:1 ([AB]=CPU:1); checked against the trace."
    header, *rows = table(message, "Ops not where expected")
    assert header == offending_header(seed_cpu)
    # Exactly A and B, where TensorFlow ran them (its step stats), with the placer's reason.
    assert sorted(r[:4] for r in rows) == [
        ["A", "Fill", "CPU:0", "CPU:1"],
        ["B", "Fill", "CPU:0", "CPU:1"],
    ]
    assert {seed_cpu.device_of("A"), seed_cpu.device_of("B")} == {CPU0}
    for row in rows:
        assert row[-1] == "Requested /device:CPU:0 with tf.device; placed exactly there (CPU:0)."
    checks = table(message, "")  # the ok/FAIL rows under the headline's blank line
    assert checks[1:] == [["ok", "C=CPU:1", "1 op"], ["FAIL", "[AB]=CPU:1", "2 of 2 ops elsewhere"]]


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({}, ValueError, "assert_placement checks nothing"),
        (
            {"expect": {"nothing_*": "CPU"}},
            ExpectationError,
            "expect={'nothing_*': 'CPU'}: no op matches",
        ),
        ({"expect": {"C": "CPU:7"}}, ExpectationError, "no device 'CPU:7' in the trace"),
        (
            {"expect": {"C": "TPU"}},
            ExpectationError,
            "no TPU device, and only GPUs can be predicted",
        ),
        ({"expect": {"C": "/replica:0"}}, ExpectationError, "names no device type or task"),
        ({"expect": "C=CPU:1"}, TypeError, "expect must map op-name globs to devices"),
        ({"max_copies": -1}, ValueError, "max_copies must be a whole number"),
        ({"allow_cpu_fallback": "no"}, TypeError, "allow_cpu_fallback must be True or False"),
        ({"max_copies": 1, "steps": 2}, ValueError, "Options (steps) only apply when tracing"),
    ],
)
def test_a_check_that_cannot_be_made_is_bad_input(seed_cpu, options, error, words):
    with pytest.raises(error) as info:
        assert_placement(seed_cpu, **options)
    assert words in str(info.value)
    assert not isinstance(info.value, AssertionError)


# -- copies --------------------------------------------------------------------------------------
def test_more_copies_than_max_copies_lists_them(seed_cpu):
    """inputs_cpu copies A and B from CPU:0 to CPU:1, and the result C back to CPU:0 where the
    session fetches it: three _Send/_Recv pairs in TensorFlow's partition graphs."""
    sends = seed_cpu.ops[seed_cpu.ops["type"] == "_Send"]
    assert len(sends) == 3
    assert assert_placement(seed_cpu, max_copies=3) is seed_cpu
    with pytest.raises(PlacementAssertionError) as info:
        assert_placement(seed_cpu, max_copies=2, expect={"C": "CPU:1"})
    message = str(info.value)
    assert message.splitlines()[0] == (
        "3 copies, more than max_copies=2; checked against the trace."
    )
    header, *rows = table(message, "Copies between devices (3, max_copies=2)")
    assert header == ["tensor", "from", "to", "bytes", "reason"]
    assert sorted(r[:4] for r in rows) == [
        ["A:0", "CPU:0", "CPU:1", "4,000"],
        ["B:0", "CPU:0", "CPU:1", "4,000"],
        ["C:0", "CPU:1", "CPU:0", "4,000"],
    ]
    assert "Ops not where expected" not in message
    assert ["FAIL", "max_copies=2", "3 copies"] in table(message, "")


# -- CPU fallbacks, on a machine without a GPU: the prediction ------------------------------------
def test_no_cpu_fallback_is_checked_against_the_prediction_and_says_so(tf, trace_placement):
    assert "int32" not in gpu_kernel_dtypes(tf, "MatMul")  # TensorFlow's own registry
    assert "float32" in gpu_kernel_dtypes(tf, "MatMul")
    trace = trace_placement(int32_matmul(tf), device_count=TWO_CPUS)
    assert not any("GPU" in d for d in trace.devices)
    # Expecting the float32 MatMul on the GPU holds on the prediction, and the result says so.
    predicted = assert_placement(trace, expect={"y": "GPU"})
    assert predicted.predicted and predicted.device_of("y").endswith("GPU:0")
    with pytest.raises(PlacementAssertionError) as info:
        assert_placement(trace, expect={"y": "GPU"}, allow_cpu_fallback=False)
    check = info.value.check
    assert check.predicted and check.basis == "predict_placement(trace, gpus=1)"
    message = str(info.value)
    lines = message.splitlines()
    assert lines[0] == (
        "1 CPU fallback (allow_cpu_fallback=False); checked against "
        "predict_placement(trace, gpus=1)."
    )
    assert lines[1].startswith(
        "No GPU in this trace: checking against predict_placement(trace, gpus=1)"
    )
    assert "(predicted, not run)" in lines[1]
    header, *rows = table(message, "Ops not where expected")
    by_op = {r[0]: r for r in rows}
    assert by_op["n"][1:4] == ["MatMul", "CPU:0", "GPU"]
    assert header == offending_header(trace)
    assert "MatMul has no GPU kernel" in by_op["n"][-1]
    assert set(by_op) == {"n", "i"}  # i, its constant input, goes where n goes
    assert "y" not in by_op and "z" not in by_op
    assert "- Cast to float32 before the MatMul (n)" in message
    assert ["ok", "y=GPU", "1 op"] in table(message, "")


def test_the_default_checks_only_what_is_asked(tf, trace_placement):
    """allow_cpu_fallback defaults to True: the int32 MatMul's fallback fails nothing unless
    asked, and a CPU expectation is checked against the trace itself."""
    trace = trace_placement(int32_matmul(tf), device_count=TWO_CPUS)
    assert assert_placement(trace, expect={"n": "CPU:0"}) is trace


def test_a_trace_recorded_on_a_gpu_machine_is_checked_itself():
    """A GPU trace file (recorded by someone else): its own placement is checked, not a
    prediction; its one copy (GPU:0 to host memory) breaks max_copies=0."""
    path = GPU_TRACES / "ikhlestov-tensorflow-profiling" / "GPU_timeline_01.json"
    trace = assert_placement(path, expect={"MatMul": "GPU:0"}, allow_cpu_fallback=False)
    assert not trace.predicted and trace.device_of("MatMul").endswith("GPU:0")
    with pytest.raises(PlacementAssertionError) as info:
        assert_placement(trace, max_copies=0)
    assert not info.value.check.predicted
    header, *rows = table(str(info.value), "Copies between devices (1, max_copies=0)")
    assert [r[1:3] for r in rows] == [["GPU:0", "CPU:0"]]


@needs_source_tree
def test_the_offending_ops_show_their_source_line(tf, trace_placement):
    """With the ``source`` column (issue 33, item 1), each offending op's row names the line of
    this file that made it."""
    trace = trace_placement(int32_matmul(tf), device_count=TWO_CPUS)
    if "source" not in trace.ops:
        pytest.skip("trace.ops has no source column on this branch (issue 33, item 1)")
    with pytest.raises(PlacementAssertionError) as info:
        assert_placement(trace, allow_cpu_fallback=False)
    header, *rows = table(str(info.value), "Ops not where expected")
    assert header == ["op", "type", "device", "expected", "source", "reason"]
    lines, start = inspect.getsourcelines(int32_matmul)
    line = start + next(k for k, text in enumerate(lines) if 'name="n"' in text)
    (n,) = [r for r in rows if r[0] == "n"]
    assert f"test_assert_placement.py:{line}" in n[4]


# -- TF2 code, two logical CPUs, and nothing left behind ------------------------------------------
TF2_CHILD = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf

    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2
    )
    sys.path.insert(0, {tests!r})
    from helpers import instantiations
    from tensorflow.python.eager import context
    from tfplace_widget import PlacementAssertionError, assert_placement

    def settings():
        return {{
            "soft": tf.config.get_soft_device_placement(),
            "log_device_placement": tf.debugging.get_log_device_placement(),
            "optimizer": tf.config.optimizer.get_experimental_options(),
            "eager": tf.executing_eagerly(),
        }}

    weights = tf.Variable(tf.ones((8,)))

    @tf.function
    def step(v):
        with tf.device("/CPU:1"):
            c = tf.multiply(v, weights, name="C")
        weights.assign_add(tf.ones((8,)) * 0.0)
        return tf.add(c, 1.0, name="A")

    x = tf.ones((8,))
    found = {{"before": settings()}}
    trace = assert_placement(step, x, expect={{"C": "CPU:1", "A": "CPU:0"}}, steps=2)
    found["mode"] = trace.mode
    found["devices"] = [trace.device_of("C"), trace.device_of("A")]
    try:
        assert_placement(step, x, expect={{"C": "CPU:0"}}, warmup=0)
    except PlacementAssertionError as exc:
        found["failed"] = str(exc)
    found["after"] = settings()
    # The training loop's later steps: nothing collected, nothing instantiated or traced again.
    traced = step.experimental_get_tracing_count()

    @tf.function
    def fresh(v):
        return v * 3.0

    fresh(x)
    step(x)
    found["collected"] = len(context.context().export_run_metadata().function_graphs)
    found["instantiated"] = [instantiations(lambda: step(x)) for _ in range(3)]
    found["retraced"] = step.experimental_get_tracing_count() - traced
    tf.profiler.experimental.start("/tmp/tfplace-assert-profile")  # free for the user's own
    tf.profiler.experimental.stop(save=False)
    print("RESULT " + json.dumps(found))
    """
)


@pytest.fixture(scope="module")
def tf2_child() -> dict[str, Any]:
    import json

    done = run_python(TF2_CHILD.format(tests=str(REPO / "tests")), timeout=300)
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def test_tf2_code_on_two_logical_cpus_holds_and_fails_as_traced(tf2_child):
    assert tf2_child["mode"] == "function"
    assert tf2_child["devices"] == [CPU1, CPU0]
    message = tf2_child["failed"]
    assert message.splitlines()[0] == "1 op not on CPU:0 (C=CPU:0); checked against the trace."
    header, *rows = table(message, "Ops not where expected")
    assert [r[:4] for r in rows] == [["C", "Mul", "CPU:1", "CPU:0"]]
    assert "CPU:1" in rows[0][-1]


def test_a_checked_training_step_pays_nothing_later(tf2_child):
    """After the checks, TensorFlow's settings are as the user left them, nothing is being
    collected, and the loop's later steps neither instantiate nor trace the step again."""
    assert tf2_child["after"] == tf2_child["before"]
    assert tf2_child["collected"] == 0
    assert tf2_child["instantiated"] == [0, 0, 0]
    assert tf2_child["retraced"] == 0


# -- the pytest plugin ---------------------------------------------------------------------------
PLUGIN = "tfplace_widget._testing.plugin"
PLUGIN_TESTS = textwrap.dedent(
    """
    import tensorflow as tf
    import tfplace_widget

    def inputs_cpu():
        with tf.device("/cpu:0"):
            a = tf.ones((1000,), name="A")
        with tf.device("/cpu:1"):
            return tf.add(a, a, name="C")

    def test_holds(tfplace):
        trace = tfplace.check(inputs_cpu, expect={"C": "CPU:1"}, device_count={"CPU": 2})
        assert trace.device_of("C").endswith("CPU:1")

    def test_fails_in_the_fixture(tfplace):
        tfplace.check(inputs_cpu, expect={"C": "CPU:0"}, device_count={"CPU": 2})

    def test_fails_without_the_fixture():
        tfplace_widget.assert_placement(inputs_cpu, max_copies=0, device_count={"CPU": 2})

    def test_fails_after_a_check_that_held(tfplace):
        trace = tfplace.check(inputs_cpu, expect={"C": "CPU:1"}, device_count={"CPU": 2})
        assert trace.device_of("A").endswith("CPU:1")
    """
)


def test_the_plugin_prints_the_table_in_the_report(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # installed or not: -p loads it
    monkeypatch.setenv("COLUMNS", "200")  # the short summary's lines whole
    pytester.makepyfile(test_placed=PLUGIN_TESTS)
    result = pytester.runpytest("-p", PLUGIN, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=3)
    out = result.stdout.str()
    sections = re.split(r"\n_{3,} (test_\w+) _{3,}\n", out)
    reports = dict(zip(sections[1::2], sections[2::2], strict=True))
    fixture = reports["test_fails_in_the_fixture"]
    # The traceback ends at the test's own line, with the error's public name.
    assert re.search(r"\nE +tfplace_widget.PlacementAssertionError: 1 op not on CPU:0", fixture)
    assert "_testing/plugin.py" not in fixture and "_testing/assertion.py" not in fixture
    section = fixture.split("- tfplace placement -", 1)[1]
    assert section.splitlines()[1] == "1 op not on CPU:0 (C=CPU:0); checked against the trace."
    header, *rows = table(section, "Ops not where expected")
    assert header[:4] == ["op", "type", "device", "expected"] and header[-1] == "reason"
    assert [r[:4] for r in rows] == [["C", "AddV2", "CPU:1", "CPU:0"]]
    direct = reports["test_fails_without_the_fixture"].split("- tfplace placement -", 1)[1]
    assert "Copies between devices (2, max_copies=0)" in direct
    after = reports["test_fails_after_a_check_that_held"].split("- tfplace placement -", 1)[1]
    assert after.splitlines()[1] == "Placement as expected, checked against the trace."
    assert "tfplace placement" not in reports.get("test_holds", "")
    assert re.search(
        r"FAILED test_placed.py::test_fails_in_the_fixture - .*PlacementAssertionError: 1 op not on CPU:0",
        out,
    )


@needs_source_tree
def test_the_plugin_is_registered_through_an_entry_point():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"tfplace": PLUGIN}


def test_the_plugin_imports_neither_pandas_nor_tensorflow():
    """pytest imports it in every run where the package is installed."""
    done = run_python(
        f"import sys, {PLUGIN}\n"
        "heavy = [m for m in ('pandas', 'tensorflow', 'numpy') if m in sys.modules]\n"
        "print(heavy)"
    )
    assert done.stdout.strip() == "[]"
