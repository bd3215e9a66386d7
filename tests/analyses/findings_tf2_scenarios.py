"""Real TF2 programs whose findings must be true, traced on two logical CPUs in a process of
their own (``tests/analyses/test_findings_truth.py`` runs this script once and asserts on what it saves).

The models follow keras-io examples (Apache License 2.0, https://github.com/keras-team/keras-io),
shrunk so that each step runs in well under a second: ``examples/vision/mnist_convnet.py``
(Conv2D, MaxPooling2D, Dropout, Adam), ``examples/nlp/text_classification_from_scratch.py``
(its end-to-end model: ``TextVectorization`` on raw strings), ``examples/nlp/
bidirectional_lstm_imdb.py`` (Embedding and LSTM), a GRU, and the mixed precision guide's
``mixed_float16`` policy (a ``LossScaleOptimizer``), and ``model.fit`` traced as the bound
method (``examples/nlp/text_classification_with_transformer.py`` shrunk, with validation data;
a ``MirroredStrategy`` over the two CPUs; a ``tf.data`` pipeline with a ``tf.py_function`` and
a ``StaticHashTable`` made under ``tf.device('/CPU:0')``). Each result is a trace and its
prediction on one GPU (``predict_placement(trace, gpus=1)``).

Usage: ``python tests/analyses/findings_tf2_scenarios.py OUT.pickle``
"""

from __future__ import annotations

import pickle
import sys
import traceback
from collections.abc import Callable
from typing import Any

import tensorflow as tf

# Before anything starts the runtime: two logical CPUs.
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2
)

import keras  # noqa: E402
import numpy as np  # noqa: E402

from tfplace_widget import predict_placement, trace_placement  # noqa: E402

RESULTS: dict[str, Any] = {}


def scenario(function: Callable[[], Any]) -> Callable[[], Any]:
    """Run a scenario now: keep its trace and prediction, or the error it raised."""
    try:
        trace = function()
        RESULTS[function.__name__] = {"trace": trace, "predicted": predict_placement(trace, 1)}
    except Exception as exc:  # kept for the test to report
        RESULTS[function.__name__] = {"error": f"{type(exc).__name__}: {exc}"}
        RESULTS[function.__name__]["traceback"] = traceback.format_exc()
    return function


def _train(model: Any, x: Any, y: Any) -> Any:
    model.train_on_batch(x, y)  # the user's own first step: variables built, optimizer made
    return trace_placement(model.train_on_batch, x, y)


@scenario
def mnist_convnet():
    """keras-io's Simple MNIST convnet, on 8 images of 28x28: Conv2D, Dropout, Adam."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input(shape=(28, 28, 1)),
            keras.layers.Conv2D(4, kernel_size=(3, 3), activation="relu"),
            keras.layers.MaxPooling2D(pool_size=(2, 2)),
            keras.layers.Conv2D(8, kernel_size=(3, 3), activation="relu"),
            keras.layers.MaxPooling2D(pool_size=(2, 2)),
            keras.layers.Flatten(),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
    x = np.random.rand(8, 28, 28, 1).astype("float32")
    y = keras.utils.to_categorical(np.arange(8) % 10, 10)
    return _train(model, x, y)


@scenario
def text_end_to_end():
    """keras-io's text classification from scratch, its end-to-end model: raw strings in,
    TextVectorization (with the example's custom standardization), Embedding, Conv1D."""
    import re
    import string

    def custom_standardization(input_data):
        lowercase = tf.strings.lower(input_data)
        stripped_html = tf.strings.regex_replace(lowercase, "<br />", " ")
        return tf.strings.regex_replace(stripped_html, f"[{re.escape(string.punctuation)}]", "")

    keras.utils.set_random_seed(0)
    texts = np.array([["a good movie<br />"], ["a bad film!"], ["good, good"], ["bad."]] * 2)
    vectorize_layer = keras.layers.TextVectorization(
        standardize=custom_standardization,
        max_tokens=50,
        output_mode="int",
        output_sequence_length=24,
    )
    vectorize_layer.adapt(texts[:, 0])
    inputs = keras.Input(shape=(1,), dtype="string")
    x = vectorize_layer(inputs)
    x = keras.layers.Embedding(50, 8)(x)
    x = keras.layers.Dropout(0.5)(x)
    x = keras.layers.Conv1D(8, 7, padding="valid", activation="relu", strides=3)(x)
    x = keras.layers.GlobalMaxPooling1D()(x)
    outputs = keras.layers.Dense(1, activation="sigmoid")(x)
    model = keras.Model(inputs, outputs)
    model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])
    return _train(model, texts, np.array([1, 0, 1, 0] * 2, "float32"))


@scenario
def lstm():
    """keras-io's bidirectional LSTM on IMDB, shrunk: Embedding, Bidirectional(LSTM), Dense."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input(shape=(None,), dtype="int32"),
            keras.layers.Embedding(100, 8),
            keras.layers.Bidirectional(keras.layers.LSTM(8)),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    x = np.random.randint(0, 100, (8, 12)).astype("int32")
    return _train(model, x, np.ones((8, 1), "float32"))


@scenario
def gru():
    """A GRU over float sequences, trained with RMSprop."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input(shape=(6, 3)), keras.layers.GRU(8), keras.layers.Dense(1)]
    )
    model.compile(optimizer="rmsprop", loss="mse")
    x = np.random.rand(8, 6, 3).astype("float32")
    return _train(model, x, np.ones((8, 1), "float32"))


@scenario
def mixed_precision():
    """The mixed precision guide's model: mixed_float16, so Keras wraps Adam in a
    LossScaleOptimizer (its scale, step counter and finite check run in the step)."""
    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = keras.Sequential(
            [
                keras.Input(shape=(16,)),
                keras.layers.Dense(32, activation="relu"),
                keras.layers.Dense(10),
                keras.layers.Activation("softmax", dtype="float32"),
            ]
        )
        model.compile(loss="sparse_categorical_crossentropy", optimizer="adam")
    finally:
        keras.mixed_precision.set_global_policy("float32")
    x = np.random.rand(8, 16).astype("float32")
    return _train(model, x, np.arange(8) % 10)


@scenario
def py_function():
    """A tf.function whose middle step is Python (tf.py_function) between float ops."""

    @tf.function
    def step(x):
        h = tf.matmul(x, x, name="before")
        y = tf.py_function(lambda t: t * 2.0, [h], tf.float32, name="py")
        return tf.reduce_sum(tf.multiply(y, 0.5, name="after"), name="loss")

    return trace_placement(step, tf.ones((4, 4)))


@scenario
def variables_on_cpu1():
    """The model's variables made under tf.device('/cpu:1'), its step run on CPU:0: every
    variable is read across devices in every step."""
    keras.utils.set_random_seed(0)
    with tf.device("/cpu:1"):
        model = keras.Sequential(
            [
                keras.Input((8,)),
                keras.layers.Dense(16, activation="relu"),
                keras.layers.Dense(16, activation="relu"),
                keras.layers.Dense(1),
            ]
        )
        model.compile(optimizer="adam", loss="mse")
        model.build((None, 8))
        model.optimizer.build(model.trainable_variables)
    x, y = np.ones((16, 8), "float32"), np.ones((16, 1), "float32")
    return _train(model, x, y)


def _text_classifier(dtype: str) -> Any:
    """keras-io's Transformer text classifier, shrunk: token and position embeddings, one
    attention block; its ``keras.Input(shape=(maxlen,))`` left at the default float32 (as the
    example has it) or given ``dtype``."""
    keras.utils.set_random_seed(0)

    class TokenAndPositionEmbedding(keras.layers.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.token_emb = keras.layers.Embedding(20, 8)
            self.pos_emb = keras.layers.Embedding(6, 8)

        def call(self, x: Any) -> Any:
            positions = keras.ops.arange(0, 6, 1)
            return self.token_emb(x) + self.pos_emb(positions)

    inputs = keras.Input(shape=(6,), dtype=dtype)
    x = TokenAndPositionEmbedding()(inputs)
    x = x + keras.layers.MultiHeadAttention(2, 4)(x, x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    outputs = keras.layers.Dense(2, activation="softmax")(x)
    model = keras.Model(inputs, outputs)
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def _fit(model: Any, dataset: Any, **kwargs: Any) -> Any:
    """``model.fit`` traced as a user would: the bound method, its keyword arguments."""
    return trace_placement(model.fit, dataset, fn_kwargs={"epochs": 1, "verbose": 0, **kwargs})


def _token_batches(dtype: str) -> Any:
    ids = np.random.RandomState(0).randint(0, 20, (8, 6)).astype(dtype)
    return tf.data.Dataset.from_tensor_slices((ids, np.arange(8) % 2)).batch(4).prefetch(2)


@scenario
def fit_text():
    """The text classifier trained with model.fit on a prefetched tf.data dataset, with
    validation data: fit runs a training and an evaluation copy of its step."""
    batches = _token_batches("int64")
    return _fit(_text_classifier("float32"), batches, validation_data=batches)


@scenario
def fit_text_int64():
    """The same, its keras.Input declared int64: the finding's fix, tried."""
    return _fit(_text_classifier("int64"), _token_batches("int64"))


@scenario
def fit_prefetch_to_device():
    """The lever the iterator finding names, tried under model.fit: batches prefetched to
    CPU:1 (the GPU on a GPU machine)."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile("sgd", "mse")
    x, y = np.ones((8, 4), "float32"), np.ones((8, 2), "float32")
    batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(4)
    return _fit(model, batches.apply(tf.data.experimental.prefetch_to_device("/cpu:1")))


@scenario
def fit_mirrored():
    """model.fit under a MirroredStrategy over the two CPUs: two replicas, the strategy's own
    reductions and variable updates between them."""
    keras.utils.set_random_seed(0)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), keras.layers.Dense(1)])
        model.compile("sgd", "mse")
    x, y = np.ones((8, 4), "float32"), np.ones((8, 1), "float32")
    return trace_placement(model.fit, x, y, fn_kwargs={"epochs": 1, "verbose": 0, "batch_size": 4})


@scenario
def fit_lookup_table():
    """A tf.data pipeline with a tf.py_function, and a model whose string work the user put
    on the CPU with tf.device, looking words up in a StaticHashTable made there."""
    keras.utils.set_random_seed(0)
    with tf.device("/CPU:0"):
        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(["a", "b", "c"]), tf.constant([1, 2, 3], tf.int64)
            ),
            default_value=0,
        )

    def lower(text: Any) -> Any:
        out = tf.py_function(lambda t: tf.strings.lower(t), [text], tf.string)
        out.set_shape(())
        return out

    texts = tf.constant(["A b", "B c", "c a", "a a"])
    batches = (
        tf.data.Dataset.from_tensor_slices((texts, [0, 1, 0, 1]))
        .map(lambda t, y: (lower(t), y))
        .batch(2)
        .prefetch(1)
    )

    class Bag(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.embed = keras.layers.Embedding(5, 4)
            self.dense = keras.layers.Dense(2)

        def call(self, text: Any) -> Any:
            with tf.device("/CPU:0"):
                ids = table.lookup(tf.strings.split(text).to_tensor(""))
            return self.dense(tf.reduce_mean(self.embed(ids), 1))

    model = Bag()
    model.compile("adam", "sparse_categorical_crossentropy")
    return _fit(model, batches)


def main(out: str) -> None:
    with open(out, "wb") as handle:
        pickle.dump(RESULTS, handle)


if __name__ == "__main__":
    main(sys.argv[1])
