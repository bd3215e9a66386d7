"""MobileNetV2 from keras.applications: a forward pass and a training step.

Follows tensorflow/docs site/en/tutorials/images/transfer_learning.ipynb (commit
f0ab267c4854511ede25732b6f9992ca49a2112b, Apache-2.0), which builds
``keras.applications.MobileNetV2`` as a base model with a pooling and Dense head and trains it;
written anew for this suite (see ../NOTICE.md). Changed: ``weights=None`` (nothing is
downloaded), 32x32 inputs and ``alpha=0.35`` so a step takes well under a second, the base
model trainable, random images and labels.
"""

import keras
import numpy as np


def program() -> dict:
    base_model = keras.applications.MobileNetV2(
        input_shape=(32, 32, 3), alpha=0.35, include_top=False, weights=None
    )
    inputs = keras.Input(shape=(32, 32, 3))
    x = keras.applications.mobilenet_v2.preprocess_input(inputs)
    x = base_model(x, training=False)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dropout(0.2)(x)
    outputs = keras.layers.Dense(1)(x)
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=0.0001),
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=[keras.metrics.BinaryAccuracy(threshold=0.5, name="accuracy")],
    )
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, (4, 32, 32, 3)).astype("float32")
    labels = rng.integers(0, 2, (4, 1)).astype("float32")
    return {"fn": model.train_on_batch, "args": (images, labels)}
