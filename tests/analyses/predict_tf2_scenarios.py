"""predict_placement on real Keras and tf.data code, on two logical CPUs, in a process of its own.

Logical devices must be configured before TensorFlow's runtime starts, which the pytest process
has already done: ``tests/analyses/test_predict.py`` runs this script once and asserts on what it saves.
Each scenario saves the trace, its prediction with one GPU and the ops whose prediction
without GPUs differs from where TensorFlow placed them.

The text model is keras-io's ``examples/nlp/text_classification_from_scratch.py`` (Apache 2.0,
Mark Omernick and Francois Chollet) with small shapes and a few inline reviews instead of the
IMDB download: its ``custom_standardization`` and ``TextVectorization`` adapted on the raw
dataset, the text vectorized in the tf.data pipeline for training ("option 2", ``fit``), and
the end-to-end model that takes raw strings ("option 1").

Usage: ``python tests/analyses/predict_tf2_scenarios.py OUT.pickle``
"""

from __future__ import annotations

import pickle
import re
import string
import sys
import traceback
from collections.abc import Callable
from typing import Any

import tensorflow as tf

tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2
)

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import layers  # noqa: E402

from tfplace_widget import predict_placement, trace_placement  # noqa: E402

RESULTS: dict[str, Any] = {}


def predicted(trace: Any) -> dict[str, Any]:
    """The trace, its prediction with one GPU, and where ``gpus=0`` disagrees with TF."""
    same = predict_placement(trace, gpus=0)
    ran = same.ops[same.ops["traced_device"] != ""]
    wrong = ran[ran["traced_device"] != ran["predicted_device"]]
    return {
        "trace": trace,
        "gpu": predict_placement(trace, gpus=1),
        "compared": len(ran),
        "disagreements": list(
            zip(wrong["op"], wrong["traced_device"], wrong["predicted_device"], strict=True)
        ),
    }


def scenario(function: Callable[[], Any]) -> Callable[[], Any]:
    try:
        RESULTS[function.__name__] = function()
    except Exception as exc:  # kept for the test to report
        RESULTS[function.__name__] = {"error": repr(exc), "traceback": traceback.format_exc()}
    return function


# -- keras-io text_classification_from_scratch, small --------------------------------------
REVIEWS = np.array(
    [
        "I loved this movie, the acting was great!",
        "Terrible plot.<br />The worst film I have seen.",
        "A wonderful, moving story.",
        "Boring and far too long; I fell asleep.",
    ]
    * 4
)
LABELS = np.array([1, 0, 1, 0] * 4)
raw_train_ds = tf.data.Dataset.from_tensor_slices((REVIEWS, LABELS)).batch(8)
max_features = 64
embedding_dim = 8
sequence_length = 20


def custom_standardization(input_data: Any) -> Any:
    lowercase = tf.strings.lower(input_data)
    stripped_html = tf.strings.regex_replace(lowercase, "<br />", " ")
    return tf.strings.regex_replace(stripped_html, f"[{re.escape(string.punctuation)}]", "")


vectorize_layer = keras.layers.TextVectorization(
    standardize=custom_standardization,
    max_tokens=max_features,
    output_mode="int",
    output_sequence_length=sequence_length,
)
vectorize_layer.adapt(raw_train_ds.map(lambda x, y: x))


def vectorize_text(text: Any, label: Any) -> Any:
    text = tf.expand_dims(text, -1)
    return vectorize_layer(text), label


def text_model() -> Any:
    keras.utils.set_random_seed(0)
    inputs = keras.Input(shape=(None,), dtype="int64")
    x = layers.Embedding(max_features, embedding_dim)(inputs)
    x = layers.Dropout(0.5)(x)
    x = layers.Conv1D(8, 3, padding="valid", activation="relu", strides=1)(x)
    x = layers.GlobalMaxPooling1D()(x)
    x = layers.Dense(8, activation="relu")(x)
    x = layers.Dropout(0.5)(x)
    predictions = layers.Dense(1, activation="sigmoid", name="predictions")(x)
    model = keras.Model(inputs, predictions)
    model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])
    return model


@scenario
def text_fit() -> dict:
    """keras-io's training: the text vectorized in the tf.data pipeline, model.fit."""
    train_ds = raw_train_ds.map(vectorize_text).cache().prefetch(buffer_size=10)
    model = text_model()
    return predicted(trace_placement(model.fit, train_ds, fn_kwargs={"epochs": 1, "verbose": 0}))


@scenario
def text_end_to_end() -> dict:
    """keras-io's end-to-end model (raw strings in, the lookup table inside), called."""
    inputs = keras.Input(shape=(1,), dtype="string")
    indices = vectorize_layer(inputs)
    outputs = text_model()(indices)
    end_to_end_model = keras.Model(inputs, outputs)
    return predicted(trace_placement(end_to_end_model, tf.constant(REVIEWS[:4, None])))


@scenario
def train_step_on_iterator() -> dict:
    """A training step written by hand (keras-io "writing a training loop from scratch"),
    fed by a tf.data iterator of raw strings through the end-to-end model."""
    inputs = keras.Input(shape=(1,), dtype="string")
    model = keras.Model(inputs, text_model()(vectorize_layer(inputs)))
    optimizer = keras.optimizers.Adam(learning_rate=1e-3)
    loss_fn = keras.losses.BinaryCrossentropy()
    dataset = tf.data.Dataset.from_tensor_slices((REVIEWS[:, None], LABELS)).batch(4).repeat()
    iterator = iter(dataset)

    @tf.function
    def train_step(iterator: Any) -> Any:
        x, y = next(iterator)
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss_value = loss_fn(tf.cast(y, tf.float32)[:, None], logits)
        grads = tape.gradient(loss_value, model.trainable_weights)
        optimizer.apply(grads, model.trainable_weights)
        return loss_value

    return predicted(trace_placement(train_step, iterator))


# -- variables made on a CPU on purpose ----------------------------------------------------------
@scenario
def variables_on_cpus() -> dict:
    """A lookup-style table kept on the CPU with its compute (the TF guide's advice for large
    embeddings), a variable on the second CPU, and one made with no device."""
    with tf.device("/cpu:0"):
        on_cpu0 = tf.Variable(tf.ones((3,)), name="on_cpu0")
    with tf.device("/cpu:1"):
        on_cpu1 = tf.Variable(tf.ones((3,)), name="on_cpu1")
    anywhere = tf.Variable(tf.ones((3,)), name="anywhere")

    @tf.function
    def step(x: Any) -> Any:
        with tf.device("/cpu:0"):
            a = tf.multiply(on_cpu0, x, name="a")
        b = tf.identity(on_cpu1.read_value(), name="b")
        c = tf.identity(anywhere.read_value(), name="c")
        with tf.device("/cpu:1"):
            pinned = tf.multiply(x, 2.0, name="pinned")
        return a + b + c, pinned

    return predicted(trace_placement(step, tf.ones((3,))))


@scenario
def mirrored_on_cpus() -> dict:
    """MirroredStrategy over both CPUs: each replica's variables on its own CPU."""
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        dense = layers.Dense(2)
        dense.build((None, 3))

    @tf.function
    def step(x: Any) -> Any:
        return strategy.run(lambda a: dense(a), args=(x,))

    return predicted(trace_placement(step, tf.ones((2, 3))))


if __name__ == "__main__":
    with open(sys.argv[1], "wb") as out:
        pickle.dump(RESULTS, out)
