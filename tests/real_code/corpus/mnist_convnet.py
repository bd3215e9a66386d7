"""Simple MNIST convnet, as keras-io teaches it: a Keras Sequential CNN and one training step.

Reproduces keras-team/keras-io examples/vision/mnist_convnet.py
(commit 02cfe8063b505adc073986c91729f22039f77ad0, Apache-2.0): same layers, loss, optimizer and
metric, written anew for this test suite (see ../NOTICE.md). Changed: random data of the
MNIST shapes instead of keras.datasets.mnist (which downloads), a batch of 16 instead of 128,
and the step traced is the one ``model.fit`` runs per batch (``train_on_batch``).
"""

import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

NUM_CLASSES = 10
INPUT_SHAPE = (28, 28, 1)


def program() -> dict:
    return training_step(jit_compile="auto")  # Keras' default, as keras-io leaves it


def training_step(jit_compile: bool | str) -> dict:
    """The model, compiled as keras-io does (``jit_compile`` as given), and its batch."""
    rng = np.random.default_rng(0)
    images = rng.random((16, *INPUT_SHAPE), dtype=np.float32)  # scaled to [0, 1] like x_train
    labels = keras.utils.to_categorical(rng.integers(0, NUM_CLASSES, 16), NUM_CLASSES)
    model = keras.Sequential(
        [
            keras.Input(shape=INPUT_SHAPE),
            layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Flatten(),
            layers.Dropout(0.5),
            layers.Dense(NUM_CLASSES, activation="softmax"),
        ]
    )
    model.compile(
        loss="categorical_crossentropy",
        optimizer="adam",
        metrics=["accuracy"],
        jit_compile=jit_compile,
    )
    return {"fn": model.train_on_batch, "args": (images, labels)}
