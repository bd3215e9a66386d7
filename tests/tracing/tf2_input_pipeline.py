"""A Keras text model trained with ``model.fit`` on a ``tf.data`` pipeline, traced in a process
of its own (two logical CPUs and TensorFlow's placement log must be set before the runtime
starts): ``tests/tracing/test_input_pipeline.py`` runs it once and asserts on what it saves.

The pipeline is the one of keras-io's and TensorFlow's text guides, shrunk to seconds:
``from_tensor_slices(strings).map(...)`` whose function calls a ``tf.py_function`` (a slow
Python step: 2 ms per element) and a ``tf.lookup.StaticHashTable`` made under
``tf.device('/CPU:0')``, with one op the user put on ``/CPU:1``, then ``.batch().prefetch()``.

Saved per scenario: the trace, what TensorFlow's placement log printed while the user's own
call ran (``log``), and TensorFlow's own record of the traced functions (``functions``: per
function name, the op types and argument names of its FunctionDefs and the functions they
call, from the eager context).

Usage: ``python tests/tracing/tf2_input_pipeline.py OUT.pickle``
"""

from __future__ import annotations

import pickle
import sys
import time
import traceback
from typing import Any

import tensorflow as tf

tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2
)
tf.debugging.set_log_device_placement(True)

import keras  # noqa: E402
import numpy as np  # noqa: E402

from tfplace_widget import trace_placement  # noqa: E402
from tfplace_widget._sources.functions import function_display_name  # noqa: E402
from tfplace_widget._tfadapter.capture import capture_native_output  # noqa: E402
from tfplace_widget._tracing.function_copies import reachable_functions  # noqa: E402

ELEMENTS, BATCH, SLEEP_S = 64, 16, 0.002
RESULTS: dict[str, Any] = {"elements": ELEMENTS, "batch": BATCH, "sleep_s": SLEEP_S}


def normalize(text: Any) -> Any:
    """The user's Python step (a tf.py_function): slow on purpose."""
    time.sleep(SLEEP_S)
    return tf.strings.upper(text)


words = [f"word{i}" for i in range(7)]
strings = tf.constant([f"{words[i % 7]} {words[(i * 3) % 7]}" for i in range(ELEMENTS)])
labels = tf.constant([float(i % 2) for i in range(ELEMENTS)])
with tf.device("/CPU:0"):
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant([w.upper() for w in words]), tf.range(1, 8, dtype=tf.int64)
        ),
        default_value=0,
    )


def encode(text: Any, label: Any) -> tuple[Any, Any]:
    upper = tf.py_function(normalize, [text], tf.string)
    upper.set_shape(())
    tokens = tf.strings.split(upper)[:4]
    ids = table.lookup(tokens)
    with tf.device("/CPU:1"):
        ids = tf.add(ids, 0, name="on_cpu1")
    return tf.pad(ids, [[0, 4 - tf.shape(ids)[0]]]), label


dataset = tf.data.Dataset.from_tensor_slices((strings, labels)).map(encode).batch(BATCH).prefetch(2)


def text_model() -> Any:
    model = keras.Sequential(
        [
            keras.Input((4,), dtype="int64"),
            keras.layers.Embedding(10, 8),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dense(1),
        ]
    )
    model.compile("adam", "mse")
    return model


# The tf.data guide's pattern: a cheap map before a shuffle whose buffer holds every element,
# read by next(iterator) in the user's step: the warm-up call fills the buffer (the map runs
# 64 times), the traced call reads from it (the map runs no more: the profiler times none
# of its ops, yet TensorFlow instantiated it for the iterator the step read).
pixels = np.random.default_rng(2).integers(0, 256, (ELEMENTS, 4), dtype=np.uint8)
scaled = (
    tf.data.Dataset.from_tensor_slices(pixels)
    .map(lambda x: tf.cast(x, tf.float32) / 255.0)
    .shuffle(ELEMENTS, seed=0)
    .batch(BATCH)
    .repeat()
)


@tf.function
def read_step(iterator: Any) -> Any:
    return tf.reduce_sum(next(iterator))


model, on_arrays = text_model(), text_model()  # one fed by the dataset, one by arrays
ids = np.random.default_rng(0).integers(0, 8, (ELEMENTS, 4)).astype("int64")
targets = np.random.default_rng(1).random((ELEMENTS, 1)).astype("float32")


def functions_of(names: set[str]) -> dict[str, dict[str, set[str]]]:
    """Per traced function name: the op types and argument names in TensorFlow's FunctionDefs
    of it (every instantiation the eager context holds) and of the functions they call."""
    from tensorflow.python.eager import context

    ctx = context.context()
    found: dict[str, dict[str, set[str]]] = {}
    for fname in ctx.list_function_names():
        display = function_display_name(fname)
        if display not in names:
            continue
        entry = found.setdefault(display, {"types": set(), "args": set(), "nodes": set()})
        for called in reachable_functions(ctx, [fname]):
            fdef = ctx.get_function_def(called)
            entry["types"] |= {node.op for node in fdef.node_def}
            entry["nodes"] |= {node.name for node in fdef.node_def}
            entry["args"] |= {arg.name for arg in fdef.signature.input_arg}
    return found


def scenario(name: str, user_call: Any, traced: Any, *args: Any, **kwargs: Any) -> None:
    try:
        with capture_native_output() as captured:
            user_call()
        trace = trace_placement(traced, *args, **kwargs)
        RESULTS[name] = {
            "trace": trace,
            "log": captured.text,
            "functions": functions_of(set(trace.ops["function"])),
        }
    except Exception as exc:  # kept for the test to assert on
        RESULTS[name] = {
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
        }


fit = {"epochs": 1, "verbose": 0}
scenario("fit_dataset", lambda: model.fit(dataset, **fit), model.fit, dataset, fn_kwargs=fit)
scenario(
    "fit_arrays",
    lambda: on_arrays.fit(ids, targets, batch_size=BATCH, **fit),
    on_arrays.fit,
    ids,
    targets,
    fn_kwargs={"batch_size": BATCH, **fit},
)
scenario("untimed_map", lambda: read_step(iter(scaled)), read_step, iter(scaled))
scenario(
    "train_on_batch",
    lambda: on_arrays.train_on_batch(ids[:BATCH], targets[:BATCH]),
    on_arrays.train_on_batch,
    ids[:BATCH],
    targets[:BATCH],
)

from tensorflow.python.eager import context  # noqa: E402

# the traces kept the FunctionDefs of Keras's datasets as they left the context, and then
# left the context's remove_function as it was
RESULTS["context_patched"] = "remove_function" in vars(context.context())

with open(sys.argv[1], "wb") as handle:
    pickle.dump(RESULTS, handle)
