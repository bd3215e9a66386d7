"""TF2 code as a first-class input: tf.functions, Keras models and training steps, traced for
real in the eager runtime.

Scenarios that need two logical CPUs run once, in a process of their own
(``tests/tracing/tf2_scenarios.py``: logical devices must be set before the runtime starts); the
tests here assert on the traces it saved. Scenarios that one CPU can show run in this process.
Zero-argument TF2 code is compared with TensorFlow's own placement log of the same code, called
as a user calls it (the ``placement_log`` scenarios, in another process of their own).
"""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from helpers import instantiations

from tfplace_widget import PlacementPanel, TraceError, show_placement, trace_placement
from tfplace_widget._sources.frames import OPS_COLUMNS

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"
SCRIPT = Path(__file__).with_name("tf2_scenarios.py")


def _run_scenarios(tmp_path_factory: pytest.TempPathFactory, *group: str) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("tf2") / "scenarios.pickle"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), str(out), *group],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    with open(out, "rb") as handle:
        return pickle.load(handle)


@pytest.fixture(scope="session")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every scenario of ``tf2_scenarios.py``, run once on two logical CPUs."""
    return _run_scenarios(tmp_path_factory)


@pytest.fixture(scope="session")
def logged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The ``placement_log`` scenarios: each with TensorFlow's own placement log of the call."""
    return _run_scenarios(tmp_path_factory, "placement_log")


def result(scenarios: dict[str, Any], name: str) -> Any:
    entry = scenarios[name]
    assert "result" in entry, entry.get("traceback")
    return entry["result"]


def error(scenarios: dict[str, Any], name: str) -> str:
    entry = scenarios[name]
    assert "error" in entry, f"{name} did not fail"
    assert entry["error"] == "TraceError", entry["traceback"]
    return entry["message"]


def row(trace: Any, op: str) -> Any:
    ops = trace.ops.set_index("op")
    assert op in ops.index, f"{op} not in {sorted(ops.index)}"
    return ops.loc[op]


# -- placement and how/reason -----------------------------------------------------------------
def test_tf_device_inside_a_function(scenarios):
    trace = result(scenarios, "device_inside")
    assert trace.mode == "function" and list(trace.ops.columns) == OPS_COLUMNS
    assert trace.device_of("C") == CPU1
    c, a = row(trace, "C"), row(trace, "A")
    assert (c["how"], c["requested_device"], c["function"]) == ("explicit", "/device:CPU:1", "f")
    assert c["runs"] == 1
    assert a["device"] == CPU0 and a["how"] == "implicit" and a["requested_device"] == ""
    # A's value crosses from CPU:0 to C on CPU:1: a transfer from the partition graphs
    moves = trace.transfers.set_index("tensor")
    assert (moves.loc["A:0", "src_device"], moves.loc["A:0", "dst_device"]) == (CPU0, CPU1)
    assert (row(trace, "x")["how"], row(trace, "x")["type"]) == ("runtime", "_Arg")


def test_arguments_and_fn_kwargs_reach_the_function(scenarios):
    trace = result(scenarios, "arguments")
    assert row(trace, "Sum")["type"] == "AddV2" and row(trace, "Sum")["runs"] == 1
    # scale=2.0 came through fn_kwargs: the traced body multiplies by it
    assert "mul" in set(trace.ops["op"])


def test_nested_functions_keep_their_names_and_owner(scenarios):
    trace = result(scenarios, "nested")
    double = row(trace, "PartitionedCall/double")
    assert double["function"] == "inner" and double["how"] == "implicit"
    assert row(trace, "before")["function"] == "outer"
    assert not any(name.startswith("__inference") for name in trace.ops["function"])


def test_a_failed_trace_leaves_nothing_in_the_next_one(scenarios):
    trace = result(scenarios, "after_a_failed_trace")
    assert "G" not in set(trace.ops["op"])
    assert row(trace, "before")["function"] == "outer"
    assert row(trace, "PartitionedCall/double")["function"] == "inner"


def test_tf_device_around_a_call_applies_to_the_body(scenarios):
    trace = result(scenarios, "call_under_device")
    double = row(trace, "PartitionedCall/double")
    assert double["device"] == CPU1 and double["how"] == "explicit"
    assert "around the call PartitionedCall (of inner)" in double["reason"]


def test_device_scope_option_applies_to_every_op_without_a_request(scenarios):
    h = row(result(scenarios, "device_scope_option"), "H")
    assert h["device"] == CPU1 and h["how"] == "explicit"
    assert "device_scope /cpu:1 around the whole call" in h["reason"]


def test_while_loop_body_runs_once_per_iteration(scenarios):
    trace = result(scenarios, "while_loop")
    step = row(trace, "while/body/while/step")  # no run-dependent _N in the name
    assert step["runs"] == 5 and step["how"] == "implicit"
    user_ops = trace.ops[trace.ops["how"] != "runtime"]
    assert not user_ops["op"].str.contains(r"body/_\d+/").any()


def test_unmet_gpu_request_is_soft(scenarios):
    g = row(result(scenarios, "gpu_request_soft"), "G")
    assert (g["device"], g["how"], g["requested_device"]) == (CPU0, "soft", "/device:GPU:0")
    assert "does not exist here" in g["reason"]


def test_unmet_gpu_request_without_soft_placement_says_how_to_fix(scenarios):
    message = error(scenarios, "gpu_request_no_soft")
    assert "/device:GPU:0" in message and "soft_placement=True" in message
    assert "CPU:0, CPU:1" in message


def test_a_resource_argument_is_on_the_device_its_resource_was_made_on(scenarios):
    """A tf.function's argument that carries a variable's or an iterator's handle runs where
    TensorFlow made the resource (the device the user's object reports), and its reason says
    so, naming what the resource is and who uses it (was: "Inserted by the runtime to feed a
    placeholder's value or a function's argument", for every argument alike)."""
    outcome = result(scenarios, "resource_arguments")
    trace, made_on = outcome["trace"], outcome["made_on"]
    assert made_on == {"variable": CPU1, "iterator": CPU0}
    arguments = trace.ops[trace.ops["type"] == "_Arg"].set_index("op")
    variable = arguments.loc["product_readvariableop_resource"]
    iterator = arguments.loc["iterator"]
    assert (variable["device"], iterator["device"]) == (made_on["variable"], made_on["iterator"])
    assert variable["reason"].startswith(
        "A function's argument that carries a variable's handle (used by product/ReadVariableOp)"
    ), variable["reason"]
    assert variable["reason"].endswith("before the placer runs: CPU:1."), variable["reason"]
    assert "a tf.data iterator's handle (used by IteratorGetNext)" in iterator["reason"]
    assert iterator["reason"].endswith(": CPU:0."), iterator["reason"]


def test_a_tf2_steps_memory_is_what_tensorflows_allocator_saw(scenarios):
    """TF2 code's allocations come from the profile's allocator events (were not read: every
    memory column <NA>). Against TensorFlow's own accounting around the traced call
    (tf.config.experimental.get_memory_info): the bytes held before it plus the step's peak
    the tool reports are the allocator's peak; each op's allocated_bytes sum to the
    allocations in trace.memory. Where TensorFlow's CPU allocator keeps no stats (oneDNN
    off), it reports no allocation to the profiler either: no row, every op <NA>, never 0."""
    outcome = result(scenarios, "allocator_peak")
    trace, stats = outcome["trace"], outcome["stats"]
    ran = trace.ops[trace.ops["runs"].notna()]
    step = trace.memory[trace.memory["kind"] == "temporary"]  # not the variables held
    if stats is None:
        assert step.empty and ran["allocated_bytes"].isna().all()
        return
    before, after = stats
    peaks = trace.memory_peaks()
    assert list(peaks["device"]) == [CPU0] and list(peaks["allocator"]) == ["mklcpu"]
    assert before["current"] + int(peaks["peak_bytes"].iloc[0]) == after["peak"], (before, after)
    allocated = step.loc[step["bytes"] > 0, "bytes"].sum()
    assert ran["allocated_bytes"].sum() == allocated > 0
    # the largest allocation is the first Dense layer's activations: 256 x 1024 float32
    largest = trace.ops.loc[trace.ops["allocated_bytes"].idxmax()]
    assert largest["allocated_bytes"] >= 256 * 1024 * 4, largest
    assert set(ran["allocator"].dropna()) == {"mklcpu"}


# -- Keras -------------------------------------------------------------------------------------
def test_keras_model_forward_pass_leaves_the_weights_alone(scenarios):
    outcome = result(scenarios, "keras_forward")
    trace = outcome["trace"]
    assert outcome["weights_unchanged"]
    matmuls = trace.ops[trace.ops["op"].str.endswith("/MatMul")]
    assert len(matmuls) == 2 and (matmuls["runs"] == 1).all()
    reads = trace.ops[trace.ops["type"] == "ReadVariableOp"]
    assert len(reads) == 4 and set(reads["device"]) == {CPU0}
    assert trace.source.startswith("sequential")
    assert set(trace.ops["function"]) == {trace.source}  # named after the model, not <lambda>


def test_train_on_batch_runs_warmup_plus_steps_real_training_steps(scenarios):
    outcome = result(scenarios, "keras_train_on_batch")
    trace = outcome["trace"]
    assert outcome["iterations"] == 2  # warmup=1 + steps=1, documented
    types = set(trace.ops["type"])
    assert {"AssignSubVariableOp", "AssignAddVariableOp"} <= types  # Adam's updates
    assert trace.ops["op"].str.startswith("gradient_tape/").any()
    assert set(trace.ops["function"]) == {"one_step_on_data"}
    # trained once before the trace (Grappler fused its Dense layers then): optimize=False
    # shows the step as written
    assert not trace.ops["type"].str.contains("Fused").any()
    assert trace.ops["op"].str.endswith("/Relu").any()
    assert trace.source.startswith("sequential") and trace.source.endswith(".train_on_batch")


def test_warmup_zero_runs_the_step_once(scenarios):
    assert result(scenarios, "keras_train_warmup_zero")["iterations"] == 1


def test_gradient_tape_step_shows_gradients_and_updates(scenarios):
    trace = result(scenarios, "gradient_tape_step")
    ops = trace.ops
    assert ops["op"].str.startswith("gradient_tape/").any()
    assert (ops["type"] == "AssignSubVariableOp").sum() == 4  # SGD on 2 kernels + 2 biases
    grads = ops[ops["op"].str.startswith("gradient_tape/")]
    assert grads["runs"].notna().any()


def test_a_builder_using_an_eager_model_falls_back_to_function_mode(scenarios):
    trace = result(scenarios, "lambda_using_eager_model")
    assert trace.mode == "function"
    assert "traced it as TF2 code (mode='function') instead" in trace.log
    assert trace.ops["op"].str.endswith("/MatMul").sum() == 2


def test_a_builder_returning_an_eager_tensor_is_traced_as_tf2(scenarios):
    trace = result(scenarios, "builder_returning_eager_tensor")
    assert trace.mode == "function" and "eager tensor" in trace.log


def test_mirrored_strategy_puts_each_replica_on_its_device(scenarios):
    trace = result(scenarios, "mirrored_strategy")
    assert trace.device_of("S") == CPU0
    assert trace.device_of("replica_1/S") == CPU1
    assert row(trace, "replica_1/S")["how"] == "explicit"


# -- options, errors, state --------------------------------------------------------------------
def test_optimize_false_keeps_the_body_as_written_and_true_folds_it(scenarios):
    outcome = result(scenarios, "optimize_on_and_off")
    off, on = outcome["off"], outcome["on"]
    assert row(off, "folded")["type"] == "AddV2" and "ones" in set(off.ops["op"])
    folded = row(on, "folded")
    assert folded["type"] == "Const" and "ones" not in set(on.ops["op"])
    assert "Built as AddV2" in folded["reason"]


def test_optimize_false_holds_for_a_function_called_before(scenarios):
    for trace in result(scenarios, "optimize_off_after_the_user_called_it"):
        assert row(trace, "folded")["type"] == "AddV2" and "ones" in set(trace.ops["op"])


def test_numpy_inside_a_plain_callable_says_what_to_write(scenarios):
    message = error(scenarios, "numpy_inside")
    assert "tf.function(plain)" in message and ".numpy()" in message
    assert "AttributeError: 'SymbolicTensor'" in message


def test_wrong_cpu_count_shows_the_line_to_put_first(scenarios):
    message = error(scenarios, "wrong_cpu_count")
    assert "already started with 2" in message
    assert "[tf.config.LogicalDeviceConfiguration()] * 3" in message


def test_jit_compiled_function_shows_the_ops_of_its_cluster(scenarios):
    trace = result(scenarios, "jit_compiled")
    [note] = trace.notes
    if trace.xla.empty:  # TensorFlow 2.16's profile has no XLA instruction events
        assert "recorded no XLA instruction" in note and trace.ops.empty
        pytest.skip("this TensorFlow's profile records no XLA instruction (2.16)")
    assert "XLA" in note and "xla_op" in note and note in trace.log
    op = trace.ops[trace.ops["op"] == "J"].iloc[0]  # XLA ran it inside the cluster
    assert op["how"] == "xla" and op["xla_op"] in set(trace.xla["instruction"])


def test_tf_settings_are_restored_and_the_profiler_is_free(scenarios):
    outcome = result(scenarios, "state_restored")
    assert outcome["before"] == outcome["after"]


def test_a_running_profiler_is_a_clear_error(scenarios):
    assert "Another TensorFlow profiler session" in error(scenarios, "profiler_busy")


# -- in this process (one CPU) -----------------------------------------------------------------
@pytest.fixture(scope="module")
def double(tf: Any) -> Any:
    @tf.function
    def double(v):
        return tf.multiply(v, 2.0, name="twice")

    return double


def test_show_placement_takes_a_tf_function_and_its_arguments(tf, double):
    x = tf.ones((8,))
    panel = show_placement(double, x)
    assert isinstance(panel, PlacementPanel) and panel.trace.mode == "function"
    assert panel.trace.device_of("twice").endswith("CPU:0")
    rerun = panel.run()  # the re-run calls it with the same arguments
    assert rerun is not None and "twice" in set(rerun.ops["op"])


@pytest.mark.parametrize(
    ("kwargs", "error", "needle"),
    [
        ({"mode": "tf2"}, ValueError, "mode must be one of"),
        ({"mode": "graph"}, ValueError, "mode='graph' calls the graph builder with no arguments"),
        ({"feed_dict": {"x": 1}}, ValueError, "feed_dict only apply to a TF1 graph builder"),
        ({"fn_kwargs": [1]}, TypeError, "fn_kwargs must be a dict"),
        ({"warmup": -1}, ValueError, "warmup must be a whole number from 0"),
    ],
)
def test_bad_function_mode_options_are_clear_errors(tf, double, kwargs, error, needle):
    with pytest.raises(error, match=needle):
        trace_placement(double, tf.ones((2,)), **kwargs)


def test_graph_mode_refuses_eager_objects_when_asked_for_explicitly(tf):
    x = tf.ones((2,))
    with pytest.raises(TraceError, match="mode='function'"):
        trace_placement(lambda: x + 1.0, mode="graph")


def test_old_graph_builders_still_run_in_graph_mode(tf):
    def build():
        return tf.add(tf.ones((3,), name="A"), 1.0, name="B")

    trace = trace_placement(build, device_count={"CPU": 2})
    assert trace.mode == "graph" and set(trace.ops["function"]) == {""}


def test_optimize_true_names_the_ops_a_fused_kernel_replaced(tf):
    kernel = tf.Variable(tf.ones((8, 4)))
    bias = tf.Variable(tf.ones((4,)))

    @tf.function
    def dense(v):
        return tf.nn.relu(tf.nn.bias_add(tf.matmul(v, kernel), bias), name="act")

    fused = row(trace_placement(dense, tf.ones((16, 8)), optimize=True), "act")
    assert "Fused" in fused["type"]
    assert "MatMul + BiasAdd + Relu fused into one" in fused["reason"]
    plain = trace_placement(dense, tf.ones((16, 8)), optimize=False)
    assert row(plain, "act")["type"] == "Relu" and "MatMul" in set(plain.ops["op"])


def test_keras_with_xla_shows_the_ops_of_the_step(tf):
    import keras

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    trace = trace_placement(model.train_on_batch, tf.ones((8, 4)), tf.ones((8, 2)))
    [note] = trace.notes
    if trace.xla.empty:  # TensorFlow 2.16's profile has no XLA instruction events
        assert "recorded no XLA instruction" in note
        pytest.skip("this TensorFlow's profile records no XLA instruction (2.16)")
    assert "XLA" in note and "xla_op" in note and note in trace.log
    matmuls = trace.ops[trace.ops["type"] == "MatMul"]  # inside the cluster, shown
    assert len(matmuls) and set(matmuls["how"]) == {"xla"}
    panel = show_placement(trace)
    assert "XLA cluster" in panel.header.value  # the panel header says it too
    panel.close()


def test_function_mode_puts_gpu_kernels_on_stream_lanes_and_host_ops_on_their_device(tf):
    """The assembly of a GPU function-mode trace, on a CONSTRUCTED GPU profile (no GPU here):
    host launch events go to the op's placed device, kernels and copies stay on their streams,
    and every execution is named as the placed graph names it."""
    from test_xspace import constructed_gpu_xspace

    from tfplace_widget._model.records import Executed
    from tfplace_widget._sources.frames import frames_from_records
    from tfplace_widget._sources.xspace import records_from_xspace
    from tfplace_widget._tracing.function import _place_records

    gpu1 = "/job:localhost/replica:0/task:0/device:GPU:1"
    executed = Executed(
        device={"dense/MatMul": gpu1, "x": CPU0},
        type={"dense/MatMul": "MatMul", "x": "_Arg"},
        inputs={"dense/MatMul": ["x"], "x": []},
        function={"dense/MatMul": "step", "x": "step"},
    )
    records = records_from_xspace(constructed_gpu_xspace())
    _place_records(records, {}, executed.device)
    trace = frames_from_records(records, [], executed, None, available_devices=[CPU0, gpu1])
    matmul = trace.events[trace.events["op"] == "dense/MatMul"]
    assert set(matmul["lane"]) == {gpu1, "/device:GPU:1/stream:7"}
    assert row(trace, "dense/MatMul")["device"] == gpu1
    assert row(trace, "dense/MatMul")["runs"] == 1  # the launch, not its kernel
    assert row(trace, "dense/MatMul")["function"] == "step"
    assert (trace.events["lane"].str.contains("Memcpy")).any()


def test_after_a_trace_tensorflow_keeps_no_graphs_of_later_calls(tf, double):
    from tensorflow.python.eager import context

    trace_placement(double, tf.ones((2,)))

    @tf.function
    def later(v):
        return v - 1.0

    later(tf.ones((2,)))  # instantiated after the trace: nothing may record it
    assert len(context.context().export_run_metadata().function_graphs) == 0


@pytest.mark.parametrize(
    "options", [{}, {"optimize": True}, {"overrides": {"twice_*": "/cpu:0"}}], ids=str
)
def test_a_trace_leaves_the_users_instantiated_function_cached(tf, options):
    """Issue 25: the traced calls run copies of the user's FunctionDefs under other names, so
    the function the user instantiated stays in TensorFlow's kernel cache: their next call
    instantiates nothing, it is the same FunctionDef (not rewritten by overrides), and no copy
    is left in the eager context. (Was: the trace cleared the kernel cache, and the next call
    of a 300-op function took 445 ms instead of 3 ms.)"""
    from tensorflow.python.eager import context

    ctx = context.context()

    @tf.function
    def step(v):
        y = tf.multiply(v, 2.0, name="twice_a")
        return tf.tanh(tf.multiply(y, 3.0, name="twice_b"))

    x = tf.ones((4,))
    step(x)
    concrete = step.get_concrete_function(x)
    name = concrete.function_def.signature.name
    fdef = ctx.get_function_def(name).SerializeToString(deterministic=True)
    assert instantiations(lambda: step(x)) == 0  # the user's instantiation, cached
    for _ in range(2):  # a second trace records the copies again
        trace = trace_placement(step, x, **options)
        assert {"twice_a", "twice_b"} <= set(trace.ops["op"])
        assert set(trace.ops["function"]) == {"step"}
    assert instantiations(lambda: step(x)) == 0
    assert step.get_concrete_function(x).function_def.signature.name == name
    assert ctx.get_function_def(name).SerializeToString(deterministic=True) == fdef
    assert not [f for f in ctx.list_function_names() if "_tfplace_copy" in f]
    ctx.clear_kernel_cache()  # what the trace did before: the check sees an instantiation
    assert instantiations(lambda: step(x)) == 1


def test_the_next_call_after_a_first_call_trace_instantiates_nothing(scenarios):
    """Issue 30: when the trace is the function's first call, the user's next call finds the
    function instantiated with the user's settings (TensorFlow records no placed graph in it),
    for a tf.function with any options, one XLA compiles (whose cancelled call would run: it
    is not made again) and for Keras's train_on_batch, whose step function Keras makes during
    the trace. The trace moves the user's state only by its warmup + steps
    calls, and a second trace shows the same rows. (Was: one instantiation, e.g. 5 s for a
    MobileNetV2 training step.)

    With the defaults, optimize=True and for train_on_batch, the next call also builds no
    executor, counted by TensorFlow itself: the warm-up call ran the user's own function, so
    its executor was built and run once, as by the user's own first call, and the next call
    is the second run TensorFlow's own second call would be. (Was: one executor built, the
    graph optimized again and a kernel made per node: 1.5-1.6x a steady call for 300 ops.)
    Not with warmup=0 (no untraced call), device_scope (the traced calls are not the user's)
    or overrides (the warm-up's recorded instantiations name the bodies to rewrite)."""
    found = result(scenarios, "next_call_after_a_first_call_trace")
    for label, seen in found.items():
        calls = 1 if label == "warmup=0" else 2
        assert seen["next"] == 0, f"{label}: the next call instantiated {seen['next']}"
        assert seen["moved"] == (calls, 1), label
        assert seen["same_rows"], label
    if found["defaults"]["built"] is None:
        pytest.skip("this TensorFlow has no reader of its flr_executor counter (TestDelta)")
    for label in ("defaults", "optimize=True", "train_on_batch"):
        built = found[label]["built"]
        assert built == 0, f"{label}: the next call built {built} executor(s)"


def test_eager_ops_on_another_thread_leave_the_traced_function_its_rows(scenarios):
    """TensorFlow's eager context has one graph collector, and any thread's eager op empties
    it into a new record, also in the middle of a function's instantiation: the function's
    partition graphs then came in a record of their own, read as one op run eagerly (every
    row's function 'eager', how 'runtime'). A thread of the user's running eager ops during
    the trace of a tf.function of 300 ops, and model.fit on a tf.data map whose
    tf.py_function runs eager ops, each traced as the function's first call: the ops of the
    function are its own, under its name. (Was: every row 'eager', for the first always; for
    the second under the warm-up that runs the user's own function first, issue 30.)"""
    found = result(scenarios, "eager_ops_on_other_threads")
    chain = found["thread"]
    for kind in ("Sin", "Mul", "AddV2"):
        assert chain.get(kind) == {"chain"}, f"{kind}: {chain.get(kind)}; {chain}"
    fit = found["py_function"]
    for kind in ("IteratorGetNext", "StringLength", "AssignSubVariableOp"):
        assert fit.get(kind) and "eager" not in fit[kind], f"{kind}: {fit.get(kind)}; {fit}"
        assert fit[kind] <= {"multi_step_on_iterator", "one_step_on_data"}, fit


def test_a_one_element_iterator_says_the_warm_up_call_took_it(tf):
    iterator = iter(tf.data.Dataset.range(1))

    @tf.function
    def take():
        return next(iterator) + 1

    with pytest.raises(TraceError) as info:
        trace_placement(take)
    message = str(info.value)
    assert "during the traced call" in message and "warmup=1" in message
    assert "pass warmup=0" in message
    fresh = iter(tf.data.Dataset.range(1))

    @tf.function
    def take_fresh():
        return next(fresh) + 1

    assert "add" in set(trace_placement(take_fresh, warmup=0).ops["op"])


# -- overrides= ----------------------------------------------------------------------------------
def test_overrides_move_an_op_of_a_function_for_the_trace_only(scenarios):
    from tfplace_widget._analyses.compare import compare

    runs = result(scenarios, "override_in_function")
    moved = row(runs["moved"], "scale")
    assert (moved.device, moved.how) == (CPU1, "explicit")
    assert "through overrides ('scale')" in moved.reason
    assert row(runs["plain"], "scale").device == CPU0
    assert row(runs["after"], "scale").device == CPU0  # the FunctionDef was put back
    assert "overrides" not in row(runs["after"], "scale").reason
    diff = compare(runs["plain"], runs["moved"])
    # scale moved; its constant and the return value followed it (the placer's heuristics).
    moved_ops = set(diff.moved["op"])
    assert "scale" in moved_ops and "A" not in moved_ops
    overridden = {op for op in moved_ops if "overrides" in row(runs["moved"], op).reason}
    assert overridden == {"scale"}
    added = diff.transfers[diff.transfers["status"] == "only_b"]
    assert ("A:0", CPU0, CPU1) in set(
        zip(added["tensor"], added["src_device"], added["dst_device"], strict=True)
    )


def test_overrides_reach_nested_functions_by_glob(scenarios):
    trace = result(scenarios, "override_nested_by_glob")
    double = trace.ops[trace.ops["op"].str.endswith("double")]
    assert len(double) == 1 and double.iloc[0].device == CPU1
    assert "through overrides ('doub*')" in double.iloc[0].reason
    assert row(trace, "before").device == CPU0


def test_an_override_moves_the_op_after_traces_of_other_functions(scenarios):
    """The warm-up's records began with what the trace before left collected (another
    function's instantiation), and the override rewrote that function's copy: the traced
    function's op stayed where it was asked to be, silently (3 of 4 here)."""
    assert result(scenarios, "override_after_other_traces") == [CPU0] * 4


def test_an_override_matching_nothing_names_the_closest_ops(scenarios):
    entry = scenarios["override_matching_nothing"]
    assert entry.get("error") == "ValueError", entry
    assert "overrides matched no op in the functions the call ran" in entry["message"]
    assert "'dubble' (closest: 'double'" in entry["message"]


def test_a_failed_call_before_leaves_no_ops_in_the_next_trace():
    """TF 2.21 can leave the nodes of a function whose call failed in the next recorded graph;
    the trace of the next function shows that function's ops, not the larger leftover's."""
    import tensorflow as tf

    @tf.function
    def checked(v):
        tf.print("printed inside the function:", v)
        for i in range(8):  # larger than the next function: the old rule took the largest
            v = tf.add(v, 1.0, name=f"step_{i}")
        tf.debugging.assert_positive(-v, message="checked wants a negative v")
        return v

    with pytest.raises(TraceError):
        trace_placement(checked, tf.ones((2,)))

    @tf.function
    def small(v):
        return tf.multiply(v, 2.0, name="twice")

    trace = trace_placement(small, tf.ones((2,)))
    ops = set(trace.ops["op"])
    assert "twice" in ops
    assert not {"step_0", "PrintV2"} & ops, sorted(ops)


# -- zero-argument TF2 code: the mode that gives the devices TensorFlow gives (issue 20) -------
_EXECUTED = re.compile(r"Executing op (\S+) in device (\S+)")
_PLACED = re.compile(r"placer\.cc:\d+\] (\S+): \((\w+)\): (\S+)$", re.MULTILINE)
_NOT_COMPARED = {"_Arg", "_Retval", "_DeviceArg", "_EagerConst"}


def _kernel_free(op_type: str) -> str:
    """The op type without oneDNN's rewrite (``_MklMatMul`` is TF's ``MatMul``)."""
    return op_type.removeprefix("_Mkl")


def assert_placed_as_tensorflow_places(trace: Any, log: str) -> int:
    """Every op TensorFlow's placement log names (``log``: the user's own call of the code) is
    on the same device in ``trace``, and its ``how`` is a placer rule, not ``soft``/``runtime``
    (every request here can be met). Ops run eagerly are named by type only: per type, the
    devices TF ran them on equal the trace's ops of that type outside any tf.function the code
    calls. Nodes of a tf.function are named: the trace's op of that name
    (``PartitionedCall/<name>`` when inlined) is on TF's device. ``_EagerConst`` (an eager
    constant's copy, a ``Const`` in a graph), ``_Arg`` and ``_Retval`` are left out. Returns
    how many ops were compared."""
    ops = trace.ops.assign(kernel=trace.ops["type"].map(_kernel_free))
    outside = ops[ops["function"].isin(["", trace.source])]  # the code's own ops
    executed = Counter(
        (_kernel_free(op_type), device)
        for op_type, device in _EXECUTED.findall(log)
        if op_type not in _NOT_COMPARED and not op_type.startswith("__inference_")
    )
    assert executed, "TensorFlow logged no eager op"
    for op_type in {op_type for op_type, _ in executed}:
        ours = outside[outside["kernel"] == op_type]
        assert Counter(zip(ours["kernel"], ours["device"], strict=True)) == Counter(
            {key: n for key, n in executed.items() if key[0] == op_type}
        ), (op_type, ours[["op", "device"]])
        assert not ours["how"].isin(["soft", "runtime"]).any(), ours[["op", "how", "reason"]]
    compared = sum(executed.values())
    for name, op_type, device in _PLACED.findall(log):
        if name == op_type or op_type in _NOT_COMPARED:
            continue  # an eager op's own one-node function (its node named as its type)
        rows = ops[(ops["op"] == name) | ops["op"].str.endswith(f"/{name}")]
        assert len(rows) == 1, f"{name} ({op_type}): {sorted(ops['op'])}"
        assert rows["device"].iloc[0] == device, (name, rows[["op", "device", "how"]])
        assert rows["how"].iloc[0] not in ("soft", "runtime"), rows[["op", "how", "reason"]]
        compared += 1
    print(f"{trace.source}: {compared} ops placed as TensorFlow placed them")
    return compared


def test_guide_manual_placement_reports_the_devices_tensorflow_uses(logged):
    """The guide's replication over logical devices: the matmul TF runs on CPU:1 is on CPU:1,
    as requested (was: soft on CPU:0, with a finding to drop the tf.device)."""
    outcome = result(logged, "guide_manual_placement")
    trace = outcome["trace"]
    assert assert_placed_as_tensorflow_places(trace, outcome["log"]) >= 3
    assert trace.devices == [CPU0, CPU1]
    assert "soft_move" not in set(trace.all_findings["kind"])
    assert trace.mode_reason.startswith("auto: graph mode because")
    assert f"tfplace: {trace.mode_reason}" in trace.log
    assert "2 CPUs" in trace.log  # the Session got the eager runtime's logical devices


def test_zero_arg_code_calling_tf_functions_runs_as_tf2(logged):
    """Body ops of a tf.function the code calls are placed and explained as TF places them
    (were: ``runtime``, "created by Grappler", all on CPU:0)."""
    outcome = result(logged, "zero_arg_calls_tf_functions")
    trace = outcome["trace"]
    assert assert_placed_as_tensorflow_places(trace, outcome["log"]) >= 5
    assert trace.mode == "function"
    assert trace.mode_reason.startswith("auto: function mode because step calls the tf.function")
    assert f"tfplace: {trace.mode_reason}" in trace.log
    assert row(trace, "PartitionedCall/scaled")["how"] == "explicit"  # tf.device around the call
    assert row(trace, "PartitionedCall_1/up")["how"] == "explicit"
    assert row(trace, "PartitionedCall_1/down")["how"] == "implicit"


def test_seed_builder_with_no_device_count_gets_the_processes_devices(logged):
    """A graph builder of the seed's kind stays graph mode; with no device_count its Session
    has the devices of the eager runtime, as ``tf.compat.v1.Session()`` would."""
    outcome = result(logged, "seed_builder_without_device_count")
    trace = outcome["trace"]
    assert trace.mode == "graph"
    assert assert_placed_as_tensorflow_places(trace, outcome["log"]) >= 1
    assert (row(trace, "C")["device"], row(trace, "C")["how"]) == (CPU1, "explicit")


# -- one naming rule for a loop body and its plumbing (issue 20, item 5) ------------------------
_INSTANCE_NUMBER = r"/(?:body|cond|then|else|branch\d+)/_\d+(?:/|$)"


def test_a_loop_body_and_its_plumbing_are_named_by_one_rule(tf):
    """A real while_loop with a tf.cond in its body: no name keeps an inlined body's or
    branch's ``_N``, neither the body's ops nor the runtime's ``Func/...`` plumbing around
    them, and every input the trace names is an op of the trace."""

    @tf.function
    def loop(v):
        def body(i, w):
            w = tf.cond(
                i > 2, lambda: tf.add(w, 1.0, name="late"), lambda: tf.add(w, 2.0, name="early")
            )
            return i + 1, w

        return tf.while_loop(lambda i, w: i < 5, body, [0, v])[1]

    trace = trace_placement(loop, tf.ones((4,)))
    names = trace.ops["op"]
    assert not names.str.contains(_INSTANCE_NUMBER).any(), sorted(
        names[names.str.contains(_INSTANCE_NUMBER)]
    )
    late = row(trace, "while/body/while/cond/then/while/cond/late")
    assert late["runs"] == 2 and late["how"] == "implicit"  # i = 3, 4
    plumbing = names[names.str.startswith("Func/while/body/input/")]
    assert len(plumbing) == 4  # one Identity per loop variable (counter, limit, i, w)
    assert set(trace.ops.set_index("op").loc[plumbing, "how"]) == {"runtime"}
    assert "lowering while" in row(trace, plumbing.iloc[0])["reason"]
    ops = set(names)
    assert all(name in ops for inputs in trace.inputs.values() for name in inputs)
    assert any(
        name.startswith("Func/while/body/input/") for name in trace.inputs["while/body/while/add"]
    )


# -- which mode auto picks, and why, in this process (one CPU) -----------------------------------
def test_a_tf_function_making_its_variables_is_traced_once_and_stays_usable(tf):
    """A zero-argument function calling a tf.function that makes its variable on its first call
    runs as TF2 code: the builder is stopped before the tf.function traces in a scratch graph
    (which would leave the module holding a variable of a dead graph)."""

    class Scale(tf.Module):
        def __init__(self) -> None:
            self.weight = None

        @tf.function
        def __call__(self, v):
            if self.weight is None:
                self.weight = tf.Variable(tf.fill(v.shape, 2.0), name="weight")
            return tf.multiply(v, self.weight, name="scaled")

    scale = Scale()

    def step():
        return scale(tf.constant([1.0, 3.0]))

    trace = trace_placement(step)
    assert trace.mode == "function"
    assert "step calls the tf.function __call__" in trace.mode_reason
    scaled = trace.ops[trace.ops["op"].str.endswith("/scaled")]
    assert len(scaled) == 1 and scaled["how"].iloc[0] == "implicit"
    assert scale(tf.constant([1.0, 3.0])).numpy().tolist() == [2.0, 6.0]  # still the user's


def test_a_builder_that_swallows_the_stop_or_calls_a_concrete_function_is_tf2(tf, double):
    concrete = double.get_concrete_function(tf.TensorSpec([2], tf.float32))

    def swallows():
        try:
            return double(tf.constant([1.0, 2.0]))
        except Exception:  # the user's own broad except: the stop is still seen
            return tf.constant(0.0)

    def calls_concrete():
        return concrete(tf.constant([1.0, 2.0]))

    for fn in (swallows, calls_concrete):
        trace = trace_placement(fn)
        assert trace.mode == "function", fn.__name__
        assert trace.mode_reason.endswith("traced it as TF2 code."), trace.mode_reason
        assert "calls the tf.function double" in trace.mode_reason
        assert row(trace, "PartitionedCall/twice")["how"] == "implicit"


def test_graph_options_keep_a_builder_calling_a_tf_function_in_graph_mode(tf, double):
    def fed():
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        return double(x)

    trace = trace_placement(fed, feed_dict={"x": [1.0, 2.0]})
    assert trace.mode == "graph"
    assert trace.mode_reason.startswith(
        "auto: graph mode because feed_dict is a graph-builder option"
    )


def test_the_panel_header_and_the_log_say_which_mode_ran_and_why(tf, double, tmp_path):
    def build():
        return tf.add(tf.ones((3,), name="A"), 1.0, name="B")

    graph = show_placement(build)
    reason = graph.trace.mode_reason
    assert reason.startswith("auto: graph mode because build takes no arguments")
    assert f"tfplace: {reason}" in graph.trace.log
    assert "mode=&#x27;function&#x27; traces it as TF2 code" in graph.header.value
    graph.close()
    function = show_placement(double, tf.ones((2,)))
    assert function.trace.mode_reason == "auto: function mode because double is a tf.function."
    assert function.trace.mode_reason in function.header.value
    function.close()
    explicit = trace_placement(build, mode="graph")
    assert (
        explicit.mode_reason == "mode='graph', as passed: run as a TF1 graph builder in a Session."
    )
    saved = tmp_path / "t.tfplace"
    explicit.save(saved)
    assert type(explicit).load(saved).mode_reason == explicit.mode_reason


def test_a_graph_builders_session_gets_the_runtimes_devices_and_keeps_allow_growth(tf):
    """The device part of the Session's config is what ``tf.compat.v1.Session()`` would get
    here (the eager context's), and the trace's own GPU setting (grow, not grab) stays."""
    from tfplace_widget._tracing import mode_choice
    from tfplace_widget._tracing.tracer import _session_config

    config = _session_config(None, None, soft_placement=True, optimize=False)
    assert config.gpu_options.allow_growth
    assert mode_choice.runtime_devices(config) == ""  # one device per physical one: no note
    logical = tf.config.list_logical_devices()
    assert dict(config.device_count) == {
        kind: sum(d.device_type == kind for d in logical) for kind in ("CPU", "GPU")
    }
    assert config.gpu_options.allow_growth and config.log_device_placement


def test_a_users_keras_model_subclass_is_traced_as_a_keras_model(tf):
    """A keras.Model subclass defined in the user's own module (a notebook's ``__main__``)
    is a Keras model too: its training method runs as Keras runs it (not as tf.function(fit),
    which fails), and a forward call is named after the model."""
    import keras

    class Regressor(keras.Model):
        def train_step(self, data):
            x, y = data[:2]  # train_on_batch hands (x, y, sample_weight)
            with tf.GradientTape() as tape:
                loss = self.compute_loss(y=y, y_pred=self(x, training=True))
            variables = self.trainable_variables
            self.optimizer.apply(tape.gradient(loss, variables), variables)
            return {"loss": loss}

    inputs = keras.Input(shape=(4,))
    model = Regressor(inputs, keras.layers.Dense(1)(inputs), name="regressor")
    model.compile(optimizer="sgd", loss="mse")
    x, y = tf.ones((8, 4)), tf.ones((8, 1))
    trained = trace_placement(model.train_on_batch, x, y)
    assert trained.mode == "function" and trained.source == "regressor.train_on_batch"
    assert trained.ops["op"].str.startswith("gradient_tape/").any()
    forward = trace_placement(model, x)
    assert forward.mode_reason == "auto: function mode because regressor is a Keras model or layer."
    assert set(forward.ops["function"]) == {"regressor"}


# -- try_fix on TF2 code (issue 33) -------------------------------------------------------------
def test_try_fix_on_tf2_code_is_verified_against_tensorflows_own_log(logged):
    """A and B copied from CPU:0 to C on CPU:1: with the fix only their input crosses, the
    outputs of the last traced calls are equal, and TensorFlow's placement log (on in that
    process) agrees with the trace with the fix."""
    step = result(logged, "try_fix_tf2")["step"]
    assert step["fixes"][0]["overrides"] == dict.fromkeys(["A", "B", "A/y", "B/y"], "/CPU:1")
    effect = step["effect"]
    assert effect["verified"], effect["why"]
    assert effect["copies"] == (4, 3) and effect["finding_gone"]
    assert set(effect["moved"]) == {"A", "B", "A/y", "B/y"}
    assert effect["outputs_equal"] is True and effect["tf_log_agrees"] is True


def test_try_fix_runs_a_step_that_counts_its_calls_from_the_same_count_and_puts_it_back(logged):
    """A step that counts its calls in a variable returns something else each call: each run
    starts from the count as it was (put back before it), so the runs' calls are compared one
    by one and are equal; after try_fix the count is what it was before."""
    counting = result(logged, "try_fix_tf2")["counting"]
    effect = counting["effect"]
    assert effect["outputs_equal"] is True, effect["notes"]
    assert "the step's outputs" not in effect["why"]
    assert effect["notes"][0].startswith(
        "outputs compared call by call: the 5 traced calls of each run, the first of one with "
        "the first of the other and so on, and the 1 variables the calls reach"
    ), effect["notes"]
    before, after = counting["calls"]
    assert before == after == 2.0  # trace_placement's warm-up and traced call; none of try_fix's


def test_try_fix_verifies_a_keras_training_steps_fix_and_leaves_the_model_as_it_was(logged):
    """model.train_on_batch changes the weights, Adam's slots and counter and the dropout
    seed at every call: each run starts from the same values, the fix's calls return what the
    step's own do, and the model is bit for bit as it was before try_fix."""
    found = result(logged, "try_fix_keras_training")
    effect = found["effect"]
    assert effect["verified"], (effect["why"], effect["notes"])
    assert effect["outputs_equal"] is True and effect["finding_gone"]
    assert effect["copies"] == (3, 2) and effect["tf_log_agrees"] is True
    moved = {re.sub(r".*/split[_0-9]*/", "", op) for op in effect["moved"]}
    assert moved == {"A", "A/y", "B", "B/y"}
    assert "and the 17 variables the calls reach" in effect["notes"][0], effect["notes"]
    assert found["variables"] == 15  # the model's (weights, seed state) and Adam's, read here
    assert found["unchanged"] and found["iterations"] == (3, 3)
    # a copy whose size the profile did not record makes the run's bytes unknown, not 0
    for sizes, total, text in zip(
        effect["copy_sizes"], effect["bytes"], effect["bytes_row"], strict=True
    ):
        if any(pd.isna(size) for size in sizes):
            assert total is None and text == "not recorded", (sizes, total, text)
        else:
            assert total == sum(sizes) and text != "not recorded", (sizes, total, text)


def test_try_fix_rejects_a_fix_that_changes_a_training_steps_results(logged):
    """The same fix with the read of ``scale`` moved to CPU:1 too, where the variable of that
    shared name holds 2.0: the step's results change, the code as it is reproduces its own,
    and the fix is rejected; the model is still as it was."""
    found = result(logged, "try_fix_keras_training")
    rejected = found["rejected"]
    assert not rejected["verified"] and rejected["outputs_equal"] is False
    assert "the step's outputs changed" in rejected["why"]
    assert any(
        note.endswith(
            "different, while the code as it is, run again from the same state, returned the "
            "same results"
        )
        for note in rejected["notes"]
    ), rejected["notes"]
    assert found["unchanged_after_rejected"]


def test_suggest_placement_on_a_keras_training_step_compares_every_run_and_puts_it_back(logged):
    """suggest_placement tries each fix of the step, then the verified ones together: every
    run is compared from the same state, and the model is as it was after all of them."""
    found = result(logged, "try_fix_keras_training")
    suggested = found["suggested"]
    assert suggested["outputs_equal"] and all(suggested["outputs_equal"]), suggested
    assert found["unchanged_after_suggested"]


def test_try_fix_of_model_fit_compares_it_with_a_global_seed_and_says_why_not_without(logged):
    """model.fit makes a new iterator each call and shuffles with seeds drawn from the global
    seed: with one set, each run is the same fit and the fix verifies (its overrides name the
    ops inside Keras's step as the trace does, StatefulPartitionedCall/...); with none, two runs
    of the code as it is differ, and the note says why and what to do. The model is as it was
    either way."""
    fit = result(logged, "try_fix_keras_fit")
    seeded, unseeded = fit[True], fit[False]
    assert all(op.startswith("StatefulPartitionedCall/") for op in seeded["moved"])
    assert seeded["effect"]["verified"], (seeded["effect"]["why"], seeded["effect"]["notes"])
    assert seeded["effect"]["outputs_equal"] is True
    effect = unseeded["effect"]
    not_compared(
        effect,
        "the code as it is, run twice from the same variables, returned different results",
    )
    assert "it makes a tf.data iterator for each call (model.fit does)" in effect["notes"][0]
    assert seeded["unchanged"] and unseeded["unchanged"]
    # the tries' own fits do not replace model.history, the History of the user's last fit
    assert seeded["history_kept"] and unseeded["history_kept"]


def test_try_fix_says_a_tf_data_iterator_cannot_be_put_back(logged):
    """A step reading the user's iterator: its position moves with every call and cannot be
    put back, so the runs do not start from the same state: not compared, said."""
    not_compared(
        result(logged, "try_fix_reading_an_iterator"),
        "the code reads 1 resource(s) that are not variables and outlive a run (a tf.data "
        "iterator): their state moves with every call and cannot be put back",
    )


def not_compared(effect: dict[str, Any], why: str) -> None:
    """The fix is not verified because its outputs could not be compared, its note says ``why``
    first."""
    assert not effect["verified"] and effect["outputs_equal"] is None
    assert "the step's outputs could not be compared" in effect["why"]
    assert effect["notes"][0].startswith(f"outputs not compared: {why}"), effect["notes"]


def test_a_variable_made_outside_the_function_gets_the_edit_untried(scenarios):
    """The variable reaches the function as a resource argument: no override inside it can
    move the variable, so the fix is the edit where it is created, marked not simulable."""
    found = result(scenarios, "variable_made_outside_the_function")
    assert found["kinds"][0] == "costly_transfer"
    fix = found["fix"]
    assert fix["overrides"] is None and fix["no_fix"] == ""
    assert fix["edit"] == (
        "create the variable mm/ReadVariableOp uses on CPU:1, where mm computes with it: wrap "
        "the line that creates it (outside the traced function, which gets the variable as an "
        "argument) in `with tf.device('/CPU:1'):`."
    )
    assert found["refused"].startswith(
        "This costly_transfer finding's fix cannot be tried: the variables are made outside "
        "the traced function"
    )
