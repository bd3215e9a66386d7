"""keras-io "Customizing what happens in fit() with TensorFlow": a Model with its own train_step.

Reproduces keras-team/keras-io guides/custom_train_step_in_tensorflow.py (commit
b4108fbfe9f0cbad37f4f3c2bc5e4db0dd8bd2b6, Apache-2.0): ``CustomModel.train_step`` computing the
loss under ``tf.GradientTape``, applying gradients and updating the compiled metrics, written
anew for this suite (see ../NOTICE.md). Changed: 64 random samples instead of 1000, and one
epoch of one batch (``fit(x, y, batch_size=64, epochs=1)``) is traced.
"""

import keras
import numpy as np
import tensorflow as tf


class CustomModel(keras.Model):
    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
        gradients = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply(gradients, self.trainable_variables)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


def program() -> dict:
    inputs = keras.Input(shape=(32,))
    outputs = keras.layers.Dense(1)(inputs)
    model = CustomModel(inputs, outputs)
    model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    rng = np.random.default_rng(0)
    x = rng.random((64, 32), dtype=np.float32)
    y = rng.random((64, 1), dtype=np.float32)
    return {
        "fn": model.fit,
        "args": (x, y),
        "kwargs": {"batch_size": 64, "epochs": 1, "verbose": 0},
    }
