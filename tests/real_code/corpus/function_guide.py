"""The TensorFlow "Better performance with tf.function" guide: nested functions, a loop, a
variable.

Reproduces tensorflow/docs site/en/guide/function.ipynb (commit
fd8ac77643f21f7b1d22425cbf5d2979ed635bcf, Apache-2.0): ``add`` called from ``dense_layer``
(a nested tf.function), an AutoGraph ``for`` loop over ``tf.range`` and a ``tf.Variable``
updated inside, written anew for this suite (see ../NOTICE.md). Changed: the guide's cells are
combined into one traced function, and one call is placed on ``/CPU:1`` (the guide's
``tf.device`` example uses a GPU).
"""

import tensorflow as tf


@tf.function
def add(a, b):
    return a + b


@tf.function
def dense_layer(x, w, b):
    return add(tf.matmul(x, w), b)


counter = tf.Variable(0.0)


@tf.function
def f(x, w, b):
    for i in tf.range(3):  # AutoGraph turns this into a tf.while_loop
        x = x + tf.cast(i, tf.float32)
    counter.assign_add(1.0)
    with tf.device("/CPU:1"):
        y = dense_layer(x, w, b)
    return y


def program() -> dict:
    return {"fn": f, "args": (tf.ones([3, 2]), tf.ones([2, 2]), tf.ones([2]))}
