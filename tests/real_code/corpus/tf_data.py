"""The TensorFlow "tf.data" guide's pipeline read inside a custom training step.

Reproduces tensorflow/docs site/en/guide/data.ipynb (commit
eb1a63871415df766002b9ef2ada097f421d1bf9, Apache-2.0): ``from_tensor_slices`` over features
and labels, ``shuffle``, ``map``, ``batch``, ``prefetch``, and an iterator consumed with
``next(iterator)`` inside a ``tf.function`` step (the pattern of the custom-training-loop
guides), written anew for this suite (see ../NOTICE.md). Changed: random arrays of
Fashion-MNIST's shapes instead of keras.datasets.fashion_mnist (which downloads), 64 images.
"""

import keras
import numpy as np
import tensorflow as tf


def program() -> dict:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (64, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, 64).astype(np.uint8)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    dataset = dataset.map(lambda x, y: (tf.cast(x, tf.float32) / 255.0, tf.cast(y, tf.int32)))
    dataset = dataset.shuffle(64, seed=0).batch(8).repeat().prefetch(tf.data.AUTOTUNE)
    iterator = iter(dataset)

    model = keras.Sequential(
        [keras.Input((28, 28)), keras.layers.Flatten(), keras.layers.Dense(10)]
    )
    optimizer = keras.optimizers.SGD(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(iterator):
        features, target = next(iterator)
        with tf.GradientTape() as tape:
            loss = loss_fn(target, model(features, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))  # noqa: B905
        return loss

    return {"fn": train_step, "args": (iterator,), "cpu_only": ["iterator"]}
