"""The TensorFlow "Use a GPU" guide's placement cells, run as one zero-argument function.

Reproduces tensorflow/docs site/en/guide/gpu.ipynb (commit
0b5a2b246bea0d86bda35a83b91399fa96a6ff49, Apache-2.0): tensors pinned with ``tf.device``, a
MatMul left to the runtime, a request for a device that does not exist under soft placement,
and the "manual placement on multiple devices" cell (one MatMul per logical device, summed
with ``tf.add_n`` on the CPU). Written anew for this suite (see ../NOTICE.md). Changed: the
guide's logical GPUs are the two logical CPUs here (``/CPU:1`` where it says ``/GPU:0``), and
the cells are the body of ``guide()``, which the user hands to ``show_placement`` as it is.
"""

import tensorflow as tf


def guide():
    with tf.device("/CPU:0"):  # "Place tensors on the CPU"
        a = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        b = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    c = tf.matmul(a, b)  # "Run on the GPU": no request
    with tf.device("/device:GPU:2"):  # a device that does not exist: soft placement moves it
        soft = tf.matmul(a, b)
    products = [soft, c]
    for device in tf.config.list_logical_devices("CPU"):  # "Without tf.distribute.Strategy"
        with tf.device(device.name):
            products.append(tf.matmul(a, b))
    with tf.device("/CPU:0"):
        return tf.add_n(products)


def program() -> dict:
    tf.config.set_soft_device_placement(True)  # the guide's soft-placement cell
    return {"fn": guide, "args": ()}
