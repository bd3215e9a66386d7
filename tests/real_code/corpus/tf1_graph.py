"""A TF1 graph as the TensorFlow 1 guides built it: placeholders-free linear regression trained
with GradientDescentOptimizer in a Session, the compute pinned to a device.

Reproduces tensorflow/docs site/en/r1/guide/low_level_intro.md (commit
7f87c255b556dcc18208c982f61857e48940da8b, Apache-2.0), section "Training": constant inputs,
a dense layer's kernel and bias variables, ``mean_squared_error`` and
``GradientDescentOptimizer(0.01).minimize``, with the manual placement of
site/en/r1/guide/graphs.md (commit 58c68c2e7215b5ad185e4e070f37b1958cf19904), "Placing
operations on different devices" (``with tf.device(...)`` around the compute); written anew
for this suite with ``tf.compat.v1`` (see ../NOTICE.md). Changed: the dense layer is written
with ``tf.compat.v1.get_variable`` + ``matmul`` (tf.layers is gone with Keras 3), and
``/cpu:1`` stands in for the guide's ``/device:GPU:0``.
"""

import tensorflow as tf

v1 = tf.compat.v1


def build():
    x = tf.constant([[1], [2], [3], [4]], dtype=tf.float32)
    y_true = tf.constant([[0], [-1], [-2], [-3]], dtype=tf.float32)
    kernel = v1.get_variable("dense/kernel", [1, 1], initializer=v1.ones_initializer())
    bias = v1.get_variable("dense/bias", [1], initializer=v1.zeros_initializer())
    with tf.device("/cpu:1"):
        y_pred = tf.matmul(x, kernel) + bias
        loss = v1.losses.mean_squared_error(labels=y_true, predictions=y_pred)
    optimizer = v1.train.GradientDescentOptimizer(0.01)
    train = optimizer.minimize(loss)
    return train, loss


def program() -> dict:
    return {"builder": build, "options": {"device_count": {"CPU": 2}}}
