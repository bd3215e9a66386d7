"""The training script of notebook 07's TF2 section: a custom training loop under
``tf.distribute.MultiWorkerMirroredStrategy``, as each machine of a cluster runs it.

``trace_placement(setup, cluster="local:worker=2", mode="function")`` runs ``setup`` in one
process per task (each imports it from this module, with its own ``TF_CONFIG``), so it lives in
a file, not in a notebook cell. The model is the TF1 section's: ``w1`` (100 x 50), ``b1`` (50),
``w2`` (50 x 10), ``b2`` (10).
"""

from __future__ import annotations

import json
import os
from typing import Any

import tensorflow as tf

PER_WORKER_BATCH = 32


def setup() -> Any:
    """The strategy, the data and the model on this task; returns the step and its argument."""
    workers = len(json.loads(os.environ["TF_CONFIG"])["cluster"]["worker"])
    global_batch = PER_WORKER_BATCH * workers
    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # reads the task's TF_CONFIG

    def dataset_fn(context: Any) -> Any:
        x = tf.random.stateless_normal((256, 100), seed=(1, 2))
        y = tf.random.stateless_uniform((256,), seed=(3, 4), maxval=10, dtype=tf.int64)
        data = tf.data.Dataset.from_tensor_slices((x, y))
        data = data.shard(context.num_input_pipelines, context.input_pipeline_id)
        return data.repeat().batch(context.get_per_replica_batch_size(global_batch))

    with strategy.scope():
        model = tf.keras.Sequential(
            [
                tf.keras.Input((100,)),
                tf.keras.layers.Dense(50, activation="relu"),
                tf.keras.layers.Dense(10),
            ]
        )
        optimizer = tf.keras.optimizers.SGD(0.1)
    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))

    @tf.function
    def train_step(iterator: Any) -> Any:
        def step_fn(inputs: Any) -> Any:
            x, y = inputs
            with tf.GradientTape() as tape:
                per_example = tf.keras.losses.sparse_categorical_crossentropy(
                    y, model(x, training=True), from_logits=True
                )
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        losses = strategy.run(step_fn, args=(next(iterator),))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    return train_step, (iterator,)
