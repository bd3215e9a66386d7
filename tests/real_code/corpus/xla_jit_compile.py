"""The XLA tutorial "Use XLA with tf.function": an MNIST training step compiled by XLA.

Reproduces tensorflow/tensorflow tensorflow/compiler/xla/g3doc/tutorials/jit_compile.ipynb
(commit 3330b724b6a5b1571afc49c6aa1de0369f13ce8d, Apache-2.0; tensorflow.org/xla/tutorials/
jit_compile): the ``cast`` helper, one ``Dense(10)`` layer, Adam, and the
``tf.function(jit_compile=True)`` ``train_mnist`` step (sparse softmax cross-entropy, a
GradientTape, ``apply_gradients``), written anew for this suite (see ../NOTICE.md). Changed:
random uint8 images and labels of MNIST's shapes instead of ``keras.datasets.mnist``, a batch
of 16 instead of 100, one step traced instead of the training loop, and the step is called
under ``tf.device("/CPU:1")``, the layer and optimizer made there too (the second logical CPU
stands in for a GPU), so that the device XLA ran the cluster on is not the default one.
"""

import numpy as np
import tensorflow as tf

IMAGE_SIZE = 28 * 28
NUM_CLASSES = 10
TRAIN_BATCH_SIZE = 16


def cast(images, labels):
    images = tf.cast(tf.reshape(images, [-1, IMAGE_SIZE]), tf.float32)
    labels = tf.cast(labels, tf.int64)
    return (images, labels)


# XLA runs a cluster on one device, its variables' (it refuses a resource on another), so the
# model and optimizer are made on the device the step is called on.
with tf.device("/CPU:1"):
    layer = tf.keras.layers.Dense(NUM_CLASSES)
    optimizer = tf.keras.optimizers.Adam()


@tf.function(jit_compile=True)
def train_mnist(images, labels):
    images, labels = cast(images, labels)
    with tf.GradientTape() as tape:
        predicted_labels = layer(images)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(logits=predicted_labels, labels=labels)
        )
    layer_variables = layer.trainable_variables
    grads = tape.gradient(loss, layer_variables)
    optimizer.apply_gradients(zip(grads, layer_variables))  # noqa: B905


def program() -> dict:
    rng = np.random.default_rng(0)
    images = tf.constant(rng.integers(0, 256, (TRAIN_BATCH_SIZE, 28, 28), dtype=np.uint8))
    labels = tf.constant(rng.integers(0, NUM_CLASSES, TRAIN_BATCH_SIZE, dtype=np.uint8))
    return {
        "fn": train_mnist,
        "args": (images, labels),
        "options": {"device_scope": "/CPU:1"},
        "xla": True,
    }
