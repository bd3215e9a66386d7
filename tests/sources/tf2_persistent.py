"""A Keras model's training step traced in function mode on two logical CPUs, in a process of
its own (logical devices must be set before TensorFlow's runtime starts): what the trace says
each device holds through the step, and TensorFlow's own record of it, the ``tf.Variable``
objects the step captured (their device, shape and dtype, their names as TensorFlow and Keras
give them); and the same model's ``model.fit`` with a validation split.

Usage: ``python tests/sources/tf2_persistent.py OUT.pickle`` (``test_persistent_memory.py``).
"""

from __future__ import annotations

import pickle
import sys

import tensorflow as tf

tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2
)

import keras  # noqa: E402

from tfplace_widget import trace_placement  # noqa: E402

keras.utils.set_random_seed(1)
inputs = keras.Input((100,))
hidden = keras.layers.Dense(200, activation="relu")(inputs)
with tf.device("/cpu:1"):  # the second layer's weights on CPU:1, the rest on CPU:0
    logits = keras.layers.Dense(10, name="second")(hidden)
model = keras.Model(inputs, logits)
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
features = tf.random.uniform([64, 100], seed=1)
labels = tf.zeros([64], tf.int64)
trace = trace_placement(model.train_on_batch, features, labels)


def names() -> list[tuple[str, str, str, int]]:
    """TensorFlow's own record of what the model holds: each tf.Variable behind Keras's
    variables (the model's, the optimizer's, the metrics'), once, with its name (TensorFlow's,
    ``tf.Variable.name``, and Keras 3's path), its device and bytes (its shape's elements times
    its dtype's size)."""
    named = {}
    every = [*model.variables, *model.optimizer.variables]
    every += [variable for metric in model.metrics for variable in metric.variables]
    for variable in every:
        value = getattr(variable, "value", variable)
        size = value.shape.num_elements() * value.dtype.size
        named[id(value)] = (value.name, variable.path, value.device, size)
    return list(named.values())


def held() -> list[tuple[str, int]]:
    """The same variables' devices and bytes."""
    return [(device, size) for _, _, device, size in names()]


variables = held()
named = names()
# model.fit with a validation split: its training and its evaluation step each capture the
# model's variables (two functions of one trace)
fit = trace_placement(
    model.fit,
    features,
    labels,
    fn_kwargs={"epochs": 1, "verbose": 0, "batch_size": 32, "validation_split": 0.5},
)

with open(sys.argv[1], "wb") as handle:
    pickle.dump(
        {
            "trace": trace,
            "variables": variables,
            "names": named,
            "fit": fit,
            "fit_variables": held(),
            "fit_names": names(),
        },
        handle,
    )
