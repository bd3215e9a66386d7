"""Real TF2 code traced in function mode, on two logical CPUs, in a process of its own.

Logical devices can only be configured before TensorFlow's runtime starts, so the pytest
process (whose runtime already runs) cannot host these: ``tests/tracing/test_function_mode.py`` runs
this script once and asserts on what it saves. Each scenario's result is a
``PlacementTrace`` (or the error it raised) plus facts about the user's state around the call.

The ``placement_log`` group runs in a process of its own, with TensorFlow's placement log
(``tf.debugging.set_log_device_placement``) on from the start, as it must be for TF to print it:
its scenarios call the user's code as the user would, keep what TF printed, then trace it.

Usage: ``python tests/tracing/tf2_scenarios.py OUT.pickle [placement_log]``
"""

from __future__ import annotations

import contextlib
import pickle
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tensorflow as tf

GROUP = sys.argv[2] if len(sys.argv) > 2 else "default"

# Before anything starts the runtime: CPU:1 stands in for a GPU.
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2
)
if GROUP == "placement_log":  # TF prints placements only if this comes before the runtime starts
    tf.debugging.set_log_device_placement(True)

import keras  # noqa: E402
import numpy as np  # noqa: E402

from tfplace_widget import TraceError, trace_placement  # noqa: E402
from tfplace_widget._tfadapter.capture import capture_native_output  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for helpers
from helpers import executors_built, instantiations  # noqa: E402

RESULTS: dict[str, Any] = {}


def scenario(function: Callable[[], Any], group: str = "default") -> Callable[[], Any]:
    """Run a scenario of this process's group now; keep its result, or the error it raised,
    under its name."""
    if group != GROUP:
        return function
    try:
        RESULTS[function.__name__] = {"result": function()}
    except Exception as exc:  # kept for the test to assert on
        RESULTS[function.__name__] = {
            "error": type(exc).__name__,
            "message": str(exc),
            "traceback": traceback.format_exc(),
        }
    return function


x = tf.ones((1000,))
y = tf.ones((1000,))


@scenario
def device_inside():
    @tf.function
    def f(x):
        a = tf.add(x, 1.0, name="A")
        with tf.device("/cpu:1"):
            c = tf.multiply(a, a, name="C")
        return c

    return trace_placement(f, x, device_count={"CPU": 2})


@scenario
def arguments():
    @tf.function
    def f(x, y, scale=1.0):
        return tf.add(x * scale, y, name="Sum")

    return trace_placement(f, x, y, fn_kwargs={"scale": 2.0})


@tf.function
def inner(v):
    return tf.multiply(v, 2.0, name="double")


@scenario
def nested():
    @tf.function
    def outer(v):
        return inner(tf.add(v, 1.0, name="before")) + 1.0

    return trace_placement(outer, x)


@scenario
def call_under_device():
    @tf.function
    def outer(v):
        with tf.device("/cpu:1"):
            return inner(v)

    return trace_placement(outer, x)


@scenario
def device_scope_option():
    @tf.function
    def f(v):
        return tf.multiply(v, 3.0, name="H")

    return trace_placement(f, x, device_scope="/cpu:1")


@scenario
def while_loop():
    @tf.function
    def f(v):
        _, out = tf.while_loop(
            lambda i, w: i < 5, lambda i, w: (i + 1, tf.add(w, 1.0, name="step")), [0, v]
        )
        return out

    return trace_placement(f, x)


@scenario
def gpu_request_soft():
    @tf.function
    def f(v):
        with tf.device("/gpu:0"):
            return tf.add(v, 1.0, name="G")

    return trace_placement(f, x)


@scenario
def gpu_request_no_soft():
    @tf.function
    def f(v):
        with tf.device("/gpu:0"):
            return tf.add(v, 1.0, name="G")

    return trace_placement(f, x, soft_placement=False)


@scenario
def resource_arguments():
    """A variable made on CPU:1 and an iterator made on CPU:0, read by a tf.function: the
    devices the user's objects report, and the trace."""
    with tf.device("/CPU:1"):
        weights = tf.Variable(tf.ones([4, 4]), name="weights")
    batches = iter(tf.data.Dataset.from_tensors(tf.ones([4, 4])).repeat())

    @tf.function
    def step(iterator):
        return tf.matmul(next(iterator), weights, name="product")

    made_on = {"variable": weights.device, "iterator": batches._iterator_resource.device}
    return {"made_on": made_on, "trace": trace_placement(step, batches)}


def make_model() -> Any:
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer="adam", loss="mse")
    return model


features = tf.ones((16, 8))
labels = tf.ones((16, 1))


@scenario
def after_a_failed_trace():
    """TF leaves a failed instantiation's nodes in the next recorded graph: not in our frames."""

    @tf.function
    def failing(v):
        with tf.device("/gpu:0"):
            return tf.add(v, 1.0, name="G")

    @tf.function
    def outer(v):
        return inner(tf.add(v, 1.0, name="before")) + 1.0

    with contextlib.suppress(TraceError):
        trace_placement(failing, x, soft_placement=False)
    return trace_placement(outer, x)


@scenario
def keras_forward():
    model = make_model()
    before = [w.numpy().copy() for w in model.weights]
    trace = trace_placement(model, features)
    same = all(np.array_equal(a, w.numpy()) for a, w in zip(before, model.weights, strict=True))
    return {"trace": trace, "weights_unchanged": same}


@scenario
def keras_train_on_batch():
    model = make_model()
    model.train_on_batch(features, labels)  # the user trained once before
    before = int(model.optimizer.iterations.numpy())
    trace = trace_placement(model.train_on_batch, features, labels)
    after = int(model.optimizer.iterations.numpy())
    return {"trace": trace, "iterations": after - before}


@scenario
def allocator_peak():
    """A Keras train_on_batch large enough for TensorFlow's allocator to report to its
    profiler (oneDNN's mklcpu; TensorFlow's plain CPU allocator reports nothing and keeps no
    stats), traced between TensorFlow's own readings of the allocator's bytes. No warm-up call
    inside the trace (the one above built the step): the allocator's peak since the reset is
    then the traced call's own, whatever order its parallel ops ran in."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((1024,)),
            keras.layers.Dense(1024, activation="relu"),
            keras.layers.Dense(512, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    batch, classes = tf.random.normal((256, 1024)), tf.zeros((256,), tf.int32)
    model.train_on_batch(batch, classes)
    try:
        tf.config.experimental.reset_memory_stats("CPU:0")
        before = tf.config.experimental.get_memory_info("CPU:0")
    except ValueError:  # "Allocator stats not available for device 'CPU:0'"
        return {"trace": trace_placement(model.train_on_batch, batch, classes), "stats": None}
    trace = trace_placement(model.train_on_batch, batch, classes, warmup=0)
    after = tf.config.experimental.get_memory_info("CPU:0")
    return {"trace": trace, "stats": (before, after)}


@scenario
def keras_train_warmup_zero():
    model = make_model()
    before = int(model.optimizer.iterations.numpy())
    trace = trace_placement(model.train_on_batch, features, labels, warmup=0)
    return {"trace": trace, "iterations": int(model.optimizer.iterations.numpy()) - before}


@scenario
def next_call_after_a_first_call_trace():
    """Issue 30: traces that are the function's first call ever; for each, the instantiations
    TensorFlow makes in the user's next call and the executors it builds there, the user's
    state moved by the trace and by that call, and whether a second trace shows the same rows."""

    def next_call(call: Callable[[], Any]) -> dict[str, Any]:
        built, made = executors_built(lambda: instantiations(call))
        return {"next": made, "built": built}

    def rows(trace: Any) -> list:
        return sorted(map(tuple, trace.ops[["op", "type", "device", "how"]].to_numpy()))

    def fresh_function() -> tuple[Any, Any]:
        counter = tf.Variable(0.0)

        @tf.function
        def step(v):
            counter.assign_add(1.0)
            with tf.device("/cpu:1"):
                y = tf.tanh(tf.multiply(v, 2.0, name="twice"))
            return tf.add(y, 1.0, name="plus")

        return step, counter

    found = {}
    for label, options in (
        ("defaults", {}),
        ("warmup=0", {"warmup": 0}),
        ("optimize=True", {"optimize": True}),
        ("device_scope", {"device_scope": "/cpu:1"}),
        ("overrides", {"overrides": {"twice": "/cpu:0"}}),
    ):
        step, counter = fresh_function()
        first = trace_placement(step, x, **options)
        moved = counter.numpy()
        found[label] = {
            **next_call(lambda step=step: step(x)),
            "moved": (moved, counter.numpy() - moved),
            "same_rows": rows(first) == rows(trace_placement(step, x, **options)),
        }
    counter = tf.Variable(0.0)

    @tf.function(jit_compile=True)
    def compiled(v):
        counter.assign_add(1.0)
        return tf.tanh(v) * 2.0

    first = trace_placement(compiled, x)
    moved = counter.numpy()
    found["jit_compile"] = {
        **next_call(lambda: compiled(x)),
        "moved": (moved, counter.numpy() - moved),
        "same_rows": rows(first) == rows(trace_placement(compiled, x)),
    }
    model = make_model()
    first = trace_placement(model.train_on_batch, features, labels)
    moved = int(model.optimizer.iterations.numpy())
    found["train_on_batch"] = {
        **next_call(lambda: model.train_on_batch(features, labels)),
        "moved": (moved, int(model.optimizer.iterations.numpy()) - moved),
        "same_rows": rows(first) == rows(trace_placement(model.train_on_batch, features, labels)),
    }
    return found


@scenario
def eager_ops_on_other_threads():
    """Traces that are the function's first call while another thread runs eager ops, which
    empty TensorFlow's one graph collector (also while the traced function is instantiated):
    a tf.function of 300 ops and a thread of the user's; model.fit on a tf.data map whose
    tf.py_function runs eager ops (its prefetch runs while the step is instantiated). Each
    result: the traced function's rows, function by type."""
    import threading

    def functions_by_type(trace: Any) -> dict[str, set[str]]:
        return trace.ops.groupby("type")["function"].agg(set).to_dict()

    @tf.function
    def chain(v):
        for _ in range(100):
            v = tf.sin(v) * 1.01 + 0.5
        return v

    running, stop = threading.Event(), threading.Event()

    def user_thread() -> None:
        word = tf.constant("A")
        while not stop.is_set():
            tf.strings.lower(word)
            running.set()

    thread = threading.Thread(target=user_thread, daemon=True)
    thread.start()
    running.wait()
    try:
        found = {"thread": functions_by_type(trace_placement(chain, x))}
    finally:
        stop.set()
        thread.join()

    def busy_lower(text: Any) -> Any:
        for _ in range(2000):  # longer than the step's instantiation
            text = tf.strings.lower(text)
        return text

    def lower(text: Any) -> Any:
        out = tf.py_function(busy_lower, [text], tf.string)
        out.set_shape(())
        return out

    texts = tf.data.Dataset.from_tensor_slices((tf.constant(["A b"] * 8), np.zeros(8, "int64")))
    batches = texts.map(lambda t, y: (lower(t), y)).batch(2).prefetch(1)
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((), dtype="string"),
            keras.layers.Lambda(lambda t: tf.cast(tf.strings.length(t)[:, None], "float32")),
            keras.layers.Dense(2),
        ]
    )
    model.compile("sgd", "sparse_categorical_crossentropy")
    fit = {"epochs": 1, "verbose": 0, "steps_per_epoch": 2}
    found["py_function"] = functions_by_type(trace_placement(model.fit, batches, fn_kwargs=fit))
    return found


@scenario
def gradient_tape_step():
    model = make_model()
    optimizer = keras.optimizers.SGD(0.1)

    @tf.function
    def step(a, b):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(a) - b))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return trace_placement(step, features, labels)


@scenario
def lambda_using_eager_model():
    model = make_model()
    return trace_placement(lambda: model(features) + 1.0)


@scenario
def builder_returning_eager_tensor():
    return trace_placement(lambda: x)


@scenario
def mirrored_strategy():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        weights = tf.Variable(tf.ones((4,)), name="w")

    @tf.function
    def step():
        return strategy.run(lambda: tf.reduce_sum(weights * 2.0, name="S"))

    return trace_placement(step)


@scenario
def numpy_inside():
    def plain(v):
        return (v + 1.0).numpy()

    return trace_placement(plain, x)


@scenario
def wrong_cpu_count():
    @tf.function
    def f(v):
        return v + 1.0

    return trace_placement(f, x, device_count={"CPU": 3})


@scenario
def optimize_on_and_off():
    @tf.function
    def f(v):
        folded = tf.add(tf.ones((4,), name="ones"), 1.0, name="folded")
        return tf.add(v[:4], folded, name="out")

    return {
        "off": trace_placement(f, x, optimize=False),
        "on": trace_placement(f, x, optimize=True),
    }


@scenario
def optimize_off_after_the_user_called_it():
    @tf.function
    def folds(v):
        folded = tf.add(tf.ones((4,), name="ones"), 1.0, name="folded")
        return tf.multiply(v[:4], folded, name="out")

    folds(x)  # instantiated with TF's defaults (Grappler on) before the trace
    return [trace_placement(folds, x) for _ in range(3)]


@scenario
def jit_compiled():
    @tf.function(jit_compile=True)
    def f(v):
        return tf.add(v, 1.0, name="J") * 2.0

    return trace_placement(f, x)


@scenario
def state_restored():
    """TF's settings before and after traces that change them while they run."""

    def settings() -> dict:
        return {
            "soft": tf.config.get_soft_device_placement(),
            "optimizer": tf.config.optimizer.get_experimental_options(),
        }

    tf.config.set_soft_device_placement(True)
    tf.config.optimizer.set_experimental_options({"constant_folding": True})
    before = settings()

    @tf.function
    def f(v):
        return v * 2.0

    trace_placement(f, x, soft_placement=False, optimize=False)
    after = settings()
    # The profiler is free again: a user's own profile can start.
    tf.profiler.experimental.start("/tmp/tfplace-user-profile")
    tf.profiler.experimental.stop(save=False)
    return {"before": before, "after": after}


@scenario
def profiler_busy():
    tf.profiler.experimental.start("/tmp/tfplace-user-profile")
    try:
        return trace_placement(inner, x)
    finally:
        tf.profiler.experimental.stop(save=False)


# -- overrides= (issue 13): the function's requests rewritten for the traced calls only --------
@scenario
def override_in_function():
    @tf.function
    def f(v):
        a = tf.add(v, 1.0, name="A")
        return tf.multiply(a, 3.0, name="scale")

    plain = trace_placement(f, x)
    moved = trace_placement(f, x, overrides={"scale": "/cpu:1"})
    after = trace_placement(f, x)  # the user's function is as it was
    return {"plain": plain, "moved": moved, "after": after}


@scenario
def override_nested_by_glob():
    @tf.function
    def outer(v):
        return inner(tf.add(v, 1.0, name="before")) + 1.0

    return trace_placement(outer, x, overrides={"doub*": "/cpu:1"})


@scenario
def override_after_other_traces():
    """A fresh tf.function traced with overrides after traces of other functions (a notebook
    where a cell that defines the step is run again): each time, its own op moves."""

    def fresh() -> Any:
        @tf.function
        def step(v):
            with tf.device("/cpu:1"):
                y = tf.tanh(tf.multiply(v, 2.0, name="twice"))
            return tf.add(y, 1.0, name="plus")

        return step

    devices = []
    for _ in range(4):
        earlier = fresh()
        trace_placement(earlier, x)  # another function's trace just before
        moved = trace_placement(fresh(), x, overrides={"twice": "/cpu:0"})
        devices.append(moved.device_of("twice"))
    return devices


@scenario
def override_matching_nothing():
    return trace_placement(inner, x, overrides={"dubble": "/cpu:1"})


# -- zero-argument TF2 code, against TensorFlow's own placement log (issue 20) -----------------
def logged_scenario(function: Callable[[], Any]) -> Callable[[], Any]:
    """A scenario of the ``placement_log`` group."""
    return scenario(function, group="placement_log")


def as_the_user_calls_it(fn: Callable[[], Any]) -> str:
    """What TensorFlow's placement log printed while ``fn()`` ran, called as the user would
    (eagerly, outside any trace): the ground truth the trace is compared with."""
    with capture_native_output() as captured:
        fn()
    return captured.text


def logged_trace(fn: Callable[[], Any], **options: Any) -> dict:
    """TF's own placement log of a call of ``fn``, then ``trace_placement(fn)``."""
    log = as_the_user_calls_it(fn)
    return {"log": log, "trace": trace_placement(fn, **options)}


@logged_scenario
def guide_manual_placement():
    """The "Manual placement" pattern of TensorFlow's "Use a GPU" guide (tensorflow/docs,
    site/en/guide/gpu.ipynb): one matmul per logical device under ``tf.device(device.name)``,
    their sum on the CPU; here the two logical CPUs stand in for the guide's GPUs."""

    def replicated():
        parts = []
        for device in tf.config.list_logical_devices("CPU"):
            with tf.device(device.name):
                left = tf.constant([[1.0, 0.5], [2.0, 1.5], [3.0, 2.5]])
                right = tf.constant([[2.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
                parts.append(tf.matmul(left, right))
        with tf.device("/CPU:0"):
            return tf.add_n(parts)

    return logged_trace(replicated)


@logged_scenario
def zero_arg_calls_tf_functions():
    """Plain TF2 code: eager ops under tf.device, a tf.function called under tf.device and one
    with a tf.device inside."""

    @tf.function
    def scaled(v):
        return tf.multiply(v, 3.0, name="scaled")

    @tf.function
    def shifted(v):
        with tf.device("/cpu:1"):
            up = tf.add(v, 1.0, name="up")
        return tf.subtract(up, 0.5, name="down")

    def step():
        with tf.device("/cpu:1"):
            a = tf.constant([[1.0, 2.0], [3.0, 4.0]])
            product = tf.matmul(a, a)
            near = scaled(product)
        far = shifted(product)
        return tf.add(near, far)

    return logged_trace(step)


@logged_scenario
def seed_builder_without_device_count():
    """The seed question's builder (inputs with no device, the add on the "GPU" CPU:1) with
    no device_count: the process has two logical CPUs, and so does the Session."""

    def inputs_none():
        a = tf.ones((1000,), name="A")
        b = tf.ones((1000,), name="B")
        with tf.device("/cpu:1"):
            return tf.add(a, b, name="C")

    return logged_trace(inputs_none)


def _effect(effect: Any) -> dict[str, Any]:
    """What a test asserts on of a FixEffect (plain data: its traces stay here)."""
    keys = ("verified", "why", "finding_gone", "copies", "bytes", "moved", "outputs_equal")
    data = {key: getattr(effect, key) for key in (*keys, "tf_log_agrees", "notes")}
    data["bytes_row"] = effect.frame.set_index("measure").loc["bytes copied"].tolist()
    data["copy_sizes"] = [
        effect.before.transfers["bytes"].tolist(),
        effect.after.transfers["bytes"].tolist(),
    ]
    return data


@logged_scenario
def try_fix_tf2():
    """Issue 33, TF2 code: A and B (CPU:0) copied to C (CPU:1); the fix puts them on CPU:1, so
    only their input x crosses (once). The same step counting its calls in a variable returns
    something else each call: its outputs cannot be compared, and its fix is not verified."""

    @tf.function
    def step(v):
        with tf.device("/cpu:0"):
            a = tf.add(v, 1.0, name="A")
            b = tf.multiply(v, 2.0, name="B")
        with tf.device("/cpu:1"):
            return tf.add(a, b, name="C")

    calls = tf.Variable(0.0)

    @tf.function
    def counting(v):
        calls.assign_add(1.0)
        with tf.device("/cpu:0"):
            a = tf.add(v, calls, name="A")
            b = tf.multiply(v, 2.0, name="B")
        with tf.device("/cpu:1"):
            return tf.add(a, b, name="C")

    found = {}
    for name, fn in (("step", step), ("counting", counting)):
        trace = trace_placement(fn, x)
        fixes = [f for f in trace.findings["fix"] if f and f["overrides"]]
        before = float(calls.numpy())
        found[name] = {"fixes": fixes, "effect": _effect(trace.try_fix(0)) if fixes else None}
        found[name]["calls"] = (before, float(calls.numpy()))
    return found


class Split(keras.layers.Layer):
    """A and B asked for on CPU:0, their product C on CPU:1 (the fix: A and B there too); back
    on CPU:0, C scaled (D) by a variable looked up by its shared name, ``scale``, which each
    device's resource manager holds apart (1.0 on CPU:0, 2.0 on CPU:1): its read moved to CPU:1
    changes the step's results."""

    def call(self, v):
        with tf.device("/cpu:0"):
            a = tf.multiply(v, 2.0, name="A")
            b = tf.add(v, 3.0, name="B")
        with tf.device("/cpu:1"):
            c = tf.multiply(a, b, name="C")
        with tf.device("/cpu:0"):
            handle = tf.raw_ops.VarHandleOp(
                dtype=tf.float32, shape=[], shared_name="scale", name="scale"
            )
            scale = tf.raw_ops.ReadVariableOp(resource=handle, dtype=tf.float32, name="read")
            return tf.multiply(c, scale, name="D")


def split_model() -> Any:
    """Split, then a dense layer, dropout (its seed generator's state a variable) and another
    dense layer, trained with Adam (slots, iteration counter)."""
    for device, value in (("/cpu:0", 1.0), ("/cpu:1", 2.0)):
        with tf.device(device):
            handle = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[], shared_name="scale")
            tf.raw_ops.AssignVariableOp(resource=handle, value=tf.constant(value))
    model = keras.Sequential(
        [
            keras.Input((256,)),
            Split(name="split"),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dropout(0.3),
            keras.layers.Dense(1),
        ],
        name="regressor",
    )
    model.compile(optimizer="adam", loss="mse")
    return model


def keras_state(model: Any) -> list[Any]:
    """The values of a model's variables (weights, seed generator states) and its optimizer's
    (slots, iteration counter)."""
    return [v.numpy().copy() for v in (*model.variables, *model.optimizer.variables)]


def split_ops(trace: Any, *names: str) -> list[str]:
    """The ops of Split named ``names``, as the trace names them (Keras numbers its scopes:
    ``regressor_1/split_1/A``; inside model.fit's step ``StatefulPartitionedCall/...``)."""
    ops = trace.ops["op"].astype(str)
    pattern = r".*regressor[_0-9]*/split[_0-9]*/\w+"
    return sorted(op for op in ops if re.fullmatch(pattern, op) and op.rsplit("/", 1)[1] in names)


def unchanged(before: list[Any], after: list[Any]) -> bool:
    """Bit for bit."""
    return len(before) == len(after) and all(
        a.dtype == b.dtype and a.tobytes() == b.tobytes()
        for a, b in zip(before, after, strict=True)
    )


batch = np.random.default_rng(1).random((64, 256), dtype=np.float32)
targets = np.ones((64, 1), np.float32)


@logged_scenario
def try_fix_keras_training():
    """Issue 33, a Keras training step (train_on_batch): the fix of Split's copies is tried
    from the same weights, Adam slots and counter and dropout seed each run, and all of them
    are as before try_fix after it; a "fix" that also moves the read of ``scale`` (another
    value on CPU:1) changes the step's results and is rejected."""
    keras.utils.set_random_seed(0)
    model = split_model()
    model.train_on_batch(batch, targets)  # the user trained once before
    trace = trace_placement(model.train_on_batch, batch, targets)
    moved = split_ops(trace, "A", "B")
    before, iterations = keras_state(model), int(model.optimizer.iterations.numpy())
    effect = trace.try_fix(("costly_transfer", moved))
    after, iterations_after = keras_state(model), int(model.optimizer.iterations.numpy())
    row = trace.all_findings[trace.all_findings["ops"].map(lambda ops: set(moved) <= set(ops))]
    wrong = row.iloc[0].copy()
    scale = dict.fromkeys(split_ops(trace, "scale", "read"), "/CPU:1")
    wrong["fix"] = {**wrong["fix"], "overrides": {**wrong["fix"]["overrides"], **scale}}
    rejected = trace.try_fix(wrong)
    after_rejected = keras_state(model)
    suggested = trace.suggest_placement()
    return {
        "moved": moved,
        "effect": _effect(effect),
        "unchanged": unchanged(before, after),
        "variables": len(before),
        "iterations": (iterations, iterations_after),
        "rejected": _effect(rejected),
        "unchanged_after_rejected": unchanged(before, after_rejected),
        "suggested": {
            "verified": suggested.verified,
            "why": suggested.why,
            "outputs_equal": [t.outputs_equal for t in suggested.trials]
            + [suggested.outputs_equal],
        },
        "unchanged_after_suggested": unchanged(before, keras_state(model)),
    }


@logged_scenario
def try_fix_keras_fit():
    """Issue 33, ``model.fit(x, y, epochs=1)``: Keras makes a new iterator each call, and its
    shuffle draws its seeds from TensorFlow's global seed: with one set
    (keras.utils.set_random_seed) the fit is tried from the same state each run; with none
    each fit shuffles otherwise, and that is said."""
    found = {}
    for seeded in (True, False):
        if seeded:
            keras.utils.set_random_seed(0)
        else:
            tf.random.set_seed(None)
        model = split_model()
        trace = trace_placement(model.fit, batch, targets, fn_kwargs={"epochs": 1, "verbose": 0})
        moved = split_ops(trace, "A", "B")
        before, history = keras_state(model), model.history
        effect = trace.try_fix(("costly_transfer", moved))
        found[seeded] = {
            "moved": moved,
            "effect": _effect(effect),
            "unchanged": unchanged(before, keras_state(model)),
            "history_kept": model.history is history,
        }
    return found


@logged_scenario
def try_fix_reading_an_iterator():
    """Issue 33: a step reading a tf.data iterator the user made: its position moves with every
    call and cannot be put back, so the fix's outputs are not compared, and that is said."""
    data = iter(
        tf.data.Dataset.range(10**6).map(lambda i: tf.fill((1000,), tf.cast(i, tf.float32)))
    )

    @tf.function
    def reading(iterator):
        v = next(iterator)
        with tf.device("/cpu:0"):
            a = tf.add(v, 1.0, name="A")
            b = tf.multiply(v, 2.0, name="B")
        with tf.device("/cpu:1"):
            return tf.add(a, b, name="C")

    trace = trace_placement(reading, data)
    return _effect(trace.try_fix(("costly_transfer", ["A", "B"])))


@scenario
def variable_made_outside_the_function():
    """Issue 33: a variable made eagerly on CPU:0, read by a tf.function's MatMul on CPU:1.
    No request inside the function moves it (it arrives as a resource argument): the fix is
    the edit at its creation, said to be untried, and try_fix says why."""
    with tf.device("/cpu:0"):
        weights = tf.Variable(tf.ones((200, 200)), name="weights")

    @tf.function
    def step(v):
        with tf.device("/cpu:1"):
            return tf.matmul(tf.reshape(v[:200], (1, 200)), weights, name="mm")

    trace = trace_placement(step, x)
    rows = trace.findings[trace.findings["ops"].map(lambda ops: "mm/ReadVariableOp" in ops)]
    try:
        trace.try_fix(rows.iloc[0])
        refused = ""
    except ValueError as exc:
        refused = str(exc)
    return {"kinds": rows["kind"].tolist(), "fix": rows["fix"].iloc[0], "refused": refused}


def main(out: str) -> None:
    with open(out, "wb") as handle:
        pickle.dump(RESULTS, handle)
    assert TraceError  # the error type the scenarios expect is importable


if __name__ == "__main__":
    main(sys.argv[1])
