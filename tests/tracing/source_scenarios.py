"""Real code whose ops' ``source`` must point at the lines below: a tf.function (with a cond and
a called function), a Keras Sequential, a subclassed model, a custom ``train_step`` run by
``model.fit``, and a TF1 graph builder. Each line that makes ops ends in a ``# line: <mark>``
comment; ``tests/tracing/test_source.py`` runs this script in a process of its own and checks
every op's ``source`` against the lines the marks are on.

Usage: ``python tests/tracing/source_scenarios.py OUT.pickle``
"""

from __future__ import annotations

import pickle
import sys

import keras
import numpy as np
import tensorflow as tf

from tfplace_widget import trace_placement

COLUMNS = ["op", "type", "source", "source_path"]
RESULTS = {}


@tf.function
def scaled(v):
    return tf.nn.relu(v) * 2.0  # line: scaled


@tf.function
def step(x):
    y = tf.matmul(x, x, name="product")  # line: matmul
    z = tf.cond(tf.reduce_sum(y) > 0.0, lambda: y + 1.0, lambda: y - 1.0)  # line: cond
    return scaled(z)  # line: call_scaled


RESULTS["tf_function"] = trace_placement(step, tf.ones((4, 4)))  # line: trace_step

sequential = keras.Sequential(
    [keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)]
)
features = np.ones((8, 4), "float32")
RESULTS["sequential"] = trace_placement(sequential, features)  # line: trace_sequential


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(8, activation="relu")
        self.out = keras.layers.Dense(2)

    def call(self, inputs):
        h = self.hidden(inputs)  # line: net_hidden
        return self.out(h * 0.5)  # line: net_out


net = Net()
RESULTS["subclassed"] = trace_placement(net, features)  # line: trace_subclassed


class Trained(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(2)

    def call(self, inputs):
        return self.dense(inputs)  # line: trained_call

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            predicted = self(x, training=True)  # line: train_forward
            loss = tf.reduce_mean(tf.square(predicted - y))  # line: train_loss
        grads = tape.gradient(loss, self.trainable_variables)  # line: train_gradient
        self.optimizer.apply(grads, self.trainable_variables)  # line: train_apply
        return {"loss": loss}


trained = Trained()
trained.compile(optimizer="sgd")
batches = tf.data.Dataset.from_tensor_slices((features, np.ones((8, 2), "float32"))).batch(4)
fit_once = {"epochs": 1, "verbose": 0}
RESULTS["train_step"] = trace_placement(trained.fit, batches, fn_kwargs=fit_once)  # line: trace_fit


def build():
    a = tf.constant(np.ones((3, 3), "float32"), name="a")  # line: graph_a
    b = tf.matmul(a, a, name="b")  # line: graph_b
    return tf.reduce_sum(b, name="total")  # line: graph_total


RESULTS["graph_builder"] = trace_placement(build)  # line: trace_graph

with open(sys.argv[1], "wb") as handle:
    pickle.dump({name: trace.ops[COLUMNS] for name, trace in RESULTS.items()}, handle)
