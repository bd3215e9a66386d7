"""TF2 programs for ``trace_placement(setup, cluster="local:worker=2", mode="function")``:
each setup runs on every task of the local cluster, as the same script runs on every machine
of a real one (so they live in a module the tasks import).

``custom_loop``: the custom training loop of TensorFlow's "Custom training loop with Keras
and MultiWorkerMirroredStrategy" tutorial (tensorflow/docs,
site/en/tutorials/distribute/multi_worker_with_ctl.ipynb), shrunk to seconds: a dense model,
a distributed dataset, ``strategy.run`` in a ``tf.function``. Its first call is the user's
own (TensorFlow's placement log of it is what the trace is checked against).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

GLOBAL_BATCH = 8


def dataset() -> Any:
    x = tf.random.stateless_uniform((64, 6), seed=(1, 2))
    y = tf.cast(tf.reduce_sum(x, axis=1) > 3.0, tf.int64)
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(GLOBAL_BATCH)


def custom_loop() -> Any:
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential(
            [
                tf.keras.Input((6,)),
                tf.keras.layers.Dense(4, activation="relu"),
                tf.keras.layers.Dense(2),
            ]
        )
        optimizer = tf.keras.optimizers.SGD(0.1)
    iterator = iter(strategy.experimental_distribute_dataset(dataset()))
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=tf.keras.losses.Reduction.NONE
    )

    @tf.function
    def train_step(iterator: Any) -> Any:
        def step_fn(inputs: Any) -> Any:
            x, y = inputs
            with tf.GradientTape() as tape:
                per_example = loss_fn(y, model(x, training=True))
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        losses = strategy.run(step_fn, args=(next(iterator),))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    train_step(iterator)  # the user's own first call, with the placement log on
    return train_step, (iterator,)


def fails_on_worker_1() -> Any:
    """A setup that raises on /job:worker/task:1 only (the other task must not hang)."""
    import json
    import os

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    if json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 1:
        raise RuntimeError("no data on this worker")
    with strategy.scope():
        v = tf.Variable(1.0)
    return tf.function(lambda: strategy.run(v.assign_add, args=(1.0,)))


def no_strategy() -> Any:
    return tf.function(lambda: tf.constant(1.0) * 2.0)


def blocked() -> Any:
    """A step that waits forever, on every worker (a dequeue from an empty queue), once the
    strategy's servers listen: what the safety tests kill or interrupt."""
    tf.distribute.MultiWorkerMirroredStrategy()
    queue = tf.queue.FIFOQueue(1, tf.float32)
    return tf.function(lambda: queue.dequeue())
