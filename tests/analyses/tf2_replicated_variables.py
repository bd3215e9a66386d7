"""A Keras model's training step under ``tf.distribute.MirroredStrategy`` on two logical CPUs,
in a process of its own (logical devices must be set before TensorFlow's runtime starts): the
trace (of ``train_on_batch``, and of ``model.fit`` with validation: its training and evaluation
steps capture the same variables), its prediction with a GPU, and TensorFlow's own record of what each replica holds, the
components of the strategy's distributed variables (``v.values``: one ``tf.Variable`` per
replica device) and the strategy's own per-device variables (its all-reduces' ordering
tokens); and the same model under a strategy of one replica.

Usage: ``python tests/analyses/tf2_replicated_variables.py OUT.pickle``
(``test_memory_findings.py``).
"""

from __future__ import annotations

import pickle
import sys
from collections import Counter
from typing import Any

import tensorflow as tf

tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2
)

import keras  # noqa: E402
import numpy as np  # noqa: E402

from tfplace_widget import predict_placement, trace_placement  # noqa: E402
from tfplace_widget._model.devices import canonical_device  # noqa: E402


def components(variable: Any) -> tuple:
    """The tf.Variables behind a Keras variable: one per replica device for a distributed one."""
    value = getattr(variable, "value", variable)
    return tuple(getattr(value, "values", None) or (value,))


def train(devices: list[str], fit: bool = False) -> dict[str, Any]:
    """A dense net's Adam step under MirroredStrategy(devices), traced after a first step;
    ``fit``: ``model.fit``'s epoch with a validation split, traced whole."""
    keras.utils.set_random_seed(0)
    strategy = tf.distribute.MirroredStrategy(devices)
    with strategy.scope():
        model = keras.Sequential(
            [
                keras.Input((64,)),
                keras.layers.Dense(512, activation="relu"),
                keras.layers.Dense(512, activation="relu"),
                keras.layers.Dense(10),
            ]
        )
        model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = np.ones((16, 64), "float32"), np.zeros((16,), "int64")
    if fit:
        kwargs = {"epochs": 1, "verbose": 0, "batch_size": 8, "validation_split": 0.5}
        trace = trace_placement(model.fit, x, y, fn_kwargs=kwargs)
    else:
        model.train_on_batch(x, y)
        trace = trace_placement(model.train_on_batch, x, y)
    held: Counter = Counter()  # per device: bytes of every tf.Variable the replicas hold
    count: Counter = Counter()
    slots: Counter = Counter()  # the optimizer's slots (momentum, velocity) alone
    optimizer: Counter = Counter()
    metrics = [v for metric in model.metrics for v in metric.variables]
    of_optimizer = {id(v) for v in model.optimizer.variables}
    for variable in [*model.variables, *model.optimizer.variables, *metrics]:
        for part in components(variable):
            device, size = (
                canonical_device(part.device),
                part.shape.num_elements() * part.dtype.size,
            )
            held[device] += size
            count[device] += 1
            if id(variable) in of_optimizer:
                optimizer[device] += size
                if str(variable.path).endswith(("_momentum", "_velocity")):
                    slots[device] += size
    tokens: Counter = Counter()  # the all-reduces' own variables, one per replica device
    collectives = getattr(strategy.extended, "_collective_ops", None)
    for launcher in getattr(collectives, "_launchers", []):
        token = getattr(launcher, "_ordering_token", None)
        if token is not None:
            device = canonical_device(token.device)
            tokens[device] += token.shape.num_elements() * token.dtype.size
            held[device] += token.shape.num_elements() * token.dtype.size
            count[device] += 1
    return {
        "trace": trace,
        "held": held,
        "count": count,
        "slots": slots,
        "optimizer": optimizer,
        "tokens": tokens,
        "replicas": strategy.num_replicas_in_sync,
    }


results = {
    "two": train(["/cpu:0", "/cpu:1"]),
    "one": train(["/cpu:0"]),
    "fit": train(["/cpu:0", "/cpu:1"], fit=True),
}
results["two"]["predicted"] = predict_placement(results["two"]["trace"], gpus=1)
with open(sys.argv[1], "wb") as handle:
    pickle.dump(results, handle)
