"""predict_placement on TF2 code, on two logical CPUs, in a process of its own.

Logical devices must be configured before TensorFlow's runtime starts, which the pytest process
has already done: ``tests/analyses/test_predict.py`` runs this script once and asserts on what it saves.
Per scenario: how many ops of the function graphs were compared with ``gpus=0`` and which
disagree with where TensorFlow placed them, and the devices predicted with ``gpus=1``.

Usage: ``python tests/analyses/predict_scenarios.py OUT.pickle``
"""

from __future__ import annotations

import pickle
import sys
import traceback
from collections.abc import Callable
from typing import Any

import tensorflow as tf

tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2
)

from tfplace_widget import predict_placement, trace_placement  # noqa: E402

RESULTS: dict[str, Any] = {}
x = tf.ones((100,))
v = tf.Variable(tf.ones((3,)))
with tf.device("/cpu:1"):
    w = tf.Variable(tf.ones((3,)))
with tf.device("/CPU:0"):  # where a variable with no tf.device is made here too
    on_cpu = tf.Variable(tf.ones((3,)), name="on_cpu")


def compare(fn: Any, *args: Any, **options: Any) -> dict[str, Any]:
    trace = trace_placement(fn, *args, **options)
    same = predict_placement(trace, gpus=0)
    ops = same.ops[same.ops["traced_device"] != ""]
    wrong = ops[ops["traced_device"] != ops["predicted_device"]]
    gpu = predict_placement(trace, gpus=1)
    return {
        "compared": len(ops),
        "disagreements": list(
            zip(wrong["op"], wrong["traced_device"], wrong["predicted_device"], strict=True)
        ),
        "gpu": dict(zip(gpu.ops["op"], gpu.ops["device"], strict=True)),
        "gpu_how": dict(zip(gpu.ops["op"], gpu.ops["how"], strict=True)),
    }


def scenario(function: Callable[[], Any]) -> Callable[[], Any]:
    try:
        RESULTS[function.__name__] = function()
    except Exception as exc:  # kept for the test to report
        RESULTS[function.__name__] = {"error": repr(exc), "traceback": traceback.format_exc()}
    return function


@scenario
def device_inside() -> dict:
    @tf.function
    def f(x: Any) -> Any:
        a = tf.add(x, 1.0, name="A")
        with tf.device("/cpu:1"):
            c = tf.multiply(a, a, name="C")
        return c, tf.shape(c, name="S"), tf.strings.join(["a", "b"], name="J")

    return compare(f, x)


@scenario
def variables() -> dict:
    @tf.function
    def g(x: Any) -> Any:
        v.assign_add(tf.ones((3,)))
        joined = tf.strings.join(["a", "b"], name="J")
        return v.read_value() * 2.0 + w.read_value() + tf.reduce_sum(x), joined

    return compare(g, x)


@scenario
def while_loop() -> dict:
    @tf.function
    def loop(x: Any) -> Any:
        i = tf.constant(0)
        while i < 3:
            x = x + 1.0
            i += 1
        return x

    return compare(loop, x)


@scenario
def call_under_cpu1() -> dict:
    @tf.function
    def h(x: Any) -> Any:
        v.assign_add(tf.ones((3,)))
        return tf.reduce_sum(x * 2.0) + v.read_value()

    return compare(h, x, device_scope="/cpu:1")


@scenario
def variable_made_on_cpu0() -> dict:
    """A variable made under tf.device('/CPU:0') read in a function: predicted with a GPU from a
    plain call, and run for real with the call under tf.device('/cpu:1'), CPU:1 standing in for
    a GPU (the device an op with no request of its own goes to)."""

    def make() -> Any:
        @tf.function
        def r(x: Any) -> Any:
            doubled = tf.multiply(on_cpu.read_value(), 2.0, name="doubled")
            return tf.reduce_sum(doubled, name="S") + tf.reduce_sum(x)

        return r

    def rows(trace: Any) -> dict:
        ops = trace.ops.drop_duplicates("op")
        return {
            op: (device, op_type, str(how), reason)
            for op, device, op_type, how, reason in zip(
                ops["op"], ops["device"], ops["type"], ops["how"], ops["reason"], strict=True
            )
        }

    predicted = predict_placement(trace_placement(make(), x), gpus=1)
    real = trace_placement(make(), x, device_scope="/cpu:1")
    return {"predicted": rows(predicted), "real": rows(real)}


@scenario
def keras_variables_on_cpu1() -> dict:
    """A Keras model whose variables are made under tf.device('/cpu:1'): predicted with a GPU
    (Keras's default compiles its step with XLA there), and its step compiled with XLA for real
    (jit_compile=True) here, run on CPU:0 as a GPU would run it."""
    import keras
    import numpy as np

    def make(**options: Any) -> Any:
        with tf.device("/cpu:1"):
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
            model.compile(optimizer="adam", loss="mse", **options)
            model.build((None, 4))
            model.optimizer.build(model.trainable_variables)
        return model

    data = (np.ones((8, 4), "float32"), np.ones((8, 2), "float32"))
    predicted = predict_placement(trace_placement(make().train_on_batch, *data), gpus=1)
    try:
        make(jit_compile=True).train_on_batch(*data)
        refused = ""
    except tf.errors.InvalidArgumentError as exc:
        refused = str(exc)
    ops = predicted.ops
    return {
        "notes": predicted.notes,
        "how": sorted(set(ops["how"].astype(str))),
        "args": dict(
            zip(
                ops.loc[ops["type"] == "_Arg", "op"],
                ops.loc[ops["type"] == "_Arg", "reason"],
                strict=True,
            )
        ),
        "refused": refused,
    }


if __name__ == "__main__":
    with open(sys.argv[1], "wb") as out:
        pickle.dump(RESULTS, out)
