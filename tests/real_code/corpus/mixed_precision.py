"""The TensorFlow "Mixed precision" guide: a Keras model under the mixed_float16 policy.

Reproduces tensorflow/docs site/en/guide/mixed_precision.ipynb (commit
fd8ac77643f21f7b1d22425cbf5d2979ed635bcf, Apache-2.0): ``set_global_policy("mixed_float16")``,
two Dense/ReLU layers, a float32 softmax ``Activation`` for numeric stability, RMSprop and
``fit``'s loss scaling, written anew for this suite (see ../NOTICE.md). Changed: 64 units
instead of 4096, random MNIST-shaped vectors instead of keras.datasets.mnist (which
downloads), a batch of 16; the step traced is the one ``fit`` runs per batch.
"""

import keras
import numpy as np
from keras import layers, mixed_precision


def program() -> dict:
    mixed_precision.set_global_policy("mixed_float16")
    inputs = keras.Input(shape=(784,), name="digits")
    num_units = 64
    dense1 = layers.Dense(num_units, activation="relu", name="dense_1")
    x = dense1(inputs)
    dense2 = layers.Dense(num_units, activation="relu", name="dense_2")
    x = dense2(x)
    x = layers.Dense(10, name="dense_logits")(x)
    outputs = layers.Activation("softmax", dtype="float32", name="predictions")(x)
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(
        loss="sparse_categorical_crossentropy",
        optimizer=keras.optimizers.RMSprop(),
        metrics=["accuracy"],
    )
    rng = np.random.default_rng(0)
    x_train = rng.random((16, 784), dtype=np.float32)
    y_train = rng.integers(0, 10, 16).astype("float32")
    return {"fn": model.train_on_batch, "args": (x_train, y_train), "teardown": _policy_back}


def _policy_back() -> None:
    mixed_precision.set_global_policy("float32")
