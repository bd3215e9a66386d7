"""The "Better performance with tf.function" guide's usage cells: tf.functions called from
plain code, one of them under a ``tf.device``.

Reproduces tensorflow/docs site/en/guide/function.ipynb (commit
fd8ac77643f21f7b1d22425cbf5d2979ed635bcf, Apache-2.0), section "Usage": ``add`` and
``dense_layer`` (which calls ``add``) decorated with ``tf.function`` and called eagerly on
``tf.ones`` tensors; written anew for this suite (see ../NOTICE.md). Changed: the cells are
the body of ``usage()``, which the user hands to ``show_placement`` as it is, and the
``dense_layer`` call runs under ``tf.device("/CPU:1")`` (a GPU in the guide's device section).
"""

import tensorflow as tf


@tf.function
def add(a, b):
    return a + b


@tf.function
def dense_layer(x, w, b):
    return add(tf.matmul(x, w), b)


def usage():
    add(tf.ones([2, 2]), tf.ones([2, 2]))  # [[2., 2.], [2., 2.]]
    with tf.device("/CPU:1"):
        return dense_layer(tf.ones([3, 2]), tf.ones([2, 2]), tf.ones([2]))


def program() -> dict:
    return {"fn": usage, "args": ()}
