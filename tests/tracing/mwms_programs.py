"""TF2 programs for ``trace_placement(setup, cluster="local:worker=2", mode="function")``:
each setup runs on every task of the local cluster, as the same script runs on every machine
of a real one (so they live in a module the tasks import).

``custom_loop``: TensorFlow's "Custom training loop with Keras and MultiWorkerMirroredStrategy"
tutorial (tensorflow/docs, site/en/tutorials/distribute/multi_worker_with_ctl.ipynb: its
``mnist.py`` and ``main.py``), shrunk to seconds. Its first call of the step is the user's own
(TensorFlow's placement log of it is what the trace is checked against). The "Multi-worker
training with Keras" tutorial (``model.fit``) fails under Keras 3 with or without tfplace
(``Attempt to convert a value (PerReplica...)``, keras-team/keras#20585), so it is not here.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

PER_WORKER_BATCH = 8


def mnist_dataset() -> Any:
    """The tutorial's ``mnist.mnist_dataset``, with random 28x28 images (no download)."""
    x = tf.random.stateless_uniform((64, 28, 28), seed=(1, 2))
    y = tf.random.stateless_uniform((64,), seed=(3, 4), maxval=10, dtype=tf.int64)
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(64).repeat()


def dataset_fn(global_batch_size: int, input_context: Any) -> Any:
    batch_size = input_context.get_per_replica_batch_size(global_batch_size)
    dataset = mnist_dataset().shard(
        input_context.num_input_pipelines, input_context.input_pipeline_id
    )
    return dataset.batch(batch_size)


def build_cnn_model(units: int = 16) -> Any:
    """The tutorial's ``mnist.build_cnn_model``, with 8 filters and 16 units (not 32, 128)."""
    regularizer = tf.keras.regularizers.L2(1e-5)
    return tf.keras.Sequential(
        [
            tf.keras.Input(shape=(28, 28)),
            tf.keras.layers.Reshape(target_shape=(28, 28, 1)),
            tf.keras.layers.Conv2D(8, 3, activation="relu", kernel_regularizer=regularizer),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(units, activation="relu", kernel_regularizer=regularizer),
            tf.keras.layers.Dense(10, kernel_regularizer=regularizer),
        ]
    )


def custom_loop(units: int = 16, build_optimizer: bool = False) -> Any:
    """The tutorial's ``main.py`` up to its training loop: the strategy, then
    :func:`tutorial_step`; one call of the step (the user's own, which TensorFlow's placement
    log records), then the step to trace. ``units``: the hidden layer's width;
    ``build_optimizer``: :func:`tutorial_step`'s (needed with more than one GPU per worker)."""
    import json
    import os

    num_workers = len(json.loads(os.environ["TF_CONFIG"])["cluster"]["worker"])
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    train_step, iterator = tutorial_step(strategy, num_workers, units, build_optimizer)
    train_step(iterator)  # the user's own first call, with the placement log on
    return train_step, (iterator,)


def tutorial_step(
    strategy: Any, num_workers: int, units: int = 16, build_optimizer: bool = False
) -> tuple[Any, Any]:
    """The tutorial's distributed dataset, model, optimizer and metric in
    ``strategy.scope()``, and its ``train_step``: ``(train_step, iterator)``, not called.
    ``build_optimizer``: make the optimizer's slots in the scope rather than in the step's
    first trace (where, with more than one replica per worker, Keras 3 fails to lift their
    initializers out of the step: ``UnliftableError``, seen with TF 2.21)."""
    global_batch_size = PER_WORKER_BATCH * num_workers
    with strategy.scope():
        multi_worker_dataset = strategy.distribute_datasets_from_function(
            lambda input_context: dataset_fn(global_batch_size, input_context)
        )
        multi_worker_model = build_cnn_model(units)
        optimizer = tf.keras.optimizers.RMSprop(learning_rate=0.001)
        train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")
        if build_optimizer:
            optimizer.build(multi_worker_model.trainable_variables)

    @tf.function
    def train_step(iterator: Any) -> Any:
        def step_fn(inputs: Any) -> Any:
            x, y = inputs
            with tf.GradientTape() as tape:
                predictions = multi_worker_model(x, training=True)
                per_example_loss = tf.keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True, reduction=tf.keras.losses.Reduction.NONE
                )(y, predictions)
                loss = tf.nn.compute_average_loss(per_example_loss)
                model_losses = multi_worker_model.losses
                if model_losses:
                    loss += tf.nn.scale_regularization_loss(tf.add_n(model_losses))
            grads = tape.gradient(loss, multi_worker_model.trainable_variables)
            optimizer.apply_gradients(
                zip(grads, multi_worker_model.trainable_variables, strict=True)
            )
            with tf.device("/cpu:0"):  # the user's own request, inside the strategy's
                train_accuracy.update_state(y, predictions)
            return loss

        per_replica_losses = strategy.run(step_fn, args=(next(iterator),))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)

    return train_step, iter(multi_worker_dataset)


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


def aborts_on_worker_1() -> Any:
    """A setup whose process aborts on /job:worker/task:1 (as native code that crashes does),
    after writing why to its standard error."""
    import json
    import os
    import sys

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    if json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 1:
        print("fatal: this worker's native reader crashed", file=sys.stderr, flush=True)
        os.abort()
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
