"""TF2 programs for ``trace_placement(setup, cluster="local:worker=2,ps=2", mode="function")``
under ``ParameterServerStrategy``: each setup runs in the coordinator's process, as in
TensorFlow's "Parameter server training" tutorial (tensorflow/docs,
site/en/tutorials/distribute/parameter_server_training.ipynb, its custom training loop), so
they live in a module the coordinator imports.

Shrunk to seconds, and without Keras layers: under Keras 3 the tutorial's model with a
``variable_partitioner`` fails with or without tfplace (``'ShardedVariable' object has no
attribute 'handle'`` in ``tape.gradient``), so the model is a ``tf.Module`` of ``tf.Variable``s
and the optimizer plain SGD (``assign_sub``). The tutorial's accuracy
(``tf.cast(tf.greater(pred, 0.5), tf.int64)``) is a count of the step's own, without a Keras
metric's variables, under a ``tf.device("/cpu:0")`` of the program's own inside the replica:
a request the strategy's replica device (also ``/device:CPU:0`` on a worker without a GPU)
does not make, which a prediction for workers with GPUs keeps.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

FEATURES, UNITS, BATCH = 10, 64, 8
# The first layer's kernel (10 x 64 float32, 2,560 bytes) is split in two by the partitioner;
# the others (256 bytes, 256 bytes) are smaller than a shard.
MIN_SHARD_BYTES = 1024


class Model(tf.Module):
    """Two dense layers, their variables made in this order: w1, b1, w2 (with ``aggregation``:
    how the strategy aggregates the replicas' updates of each, which it needs to build the step
    with more than one replica per worker, e.g. ``"MEAN"``; ignored with one)."""

    def __init__(self, aggregation: str = "NONE") -> None:
        super().__init__()
        how = tf.VariableAggregation[aggregation]
        self.w1 = tf.Variable(
            tf.random.stateless_normal((FEATURES, UNITS), seed=(1, 2)), name="w1", aggregation=how
        )
        self.b1 = tf.Variable(tf.zeros(UNITS), name="b1", aggregation=how)
        self.w2 = tf.Variable(
            tf.random.stateless_normal((UNITS, 1), seed=(3, 4)), name="w2", aggregation=how
        )

    def __call__(self, x: Any) -> Any:
        return tf.matmul(tf.nn.relu(tf.matmul(x, self.w1) + self.b1), self.w2)


def dataset_fn(input_context: Any = None) -> Any:
    x = tf.random.stateless_uniform((64, FEATURES), seed=(5, 6))
    y = tf.random.stateless_uniform((64, 1), seed=(7, 8))
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(64).repeat().batch(BATCH)


def custom_loop(aggregation: str = "NONE") -> Any:
    """The tutorial's set-up up to its training loop: the strategy with a variable
    partitioner, the coordinator, the model in ``strategy.scope()``, the per-worker dataset
    and ``step_fn``; returns the step and its per-worker iterator, which the coordinator
    schedules (``coordinator.schedule(step_fn, args=(per_worker_iterator,))``). With more than
    one GPU per worker the strategy refuses ``assign_sub`` in a replica of a variable made
    without an ``aggregation`` (the tutorial's Keras optimizer updates in cross-replica
    context): ``aggregation="MEAN"`` gives one."""
    strategy = tf.distribute.experimental.ParameterServerStrategy(
        tf.distribute.cluster_resolver.TFConfigClusterResolver(),
        variable_partitioner=tf.distribute.experimental.partitioners.MinSizePartitioner(
            min_shard_bytes=MIN_SHARD_BYTES, max_shards=2
        ),
    )
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = Model(aggregation)
    per_worker_dataset = coordinator.create_per_worker_dataset(dataset_fn)
    per_worker_iterator = iter(per_worker_dataset)

    @tf.function
    def step_fn(iterator: Any) -> Any:
        def replica_fn(batch_data: Any, labels: Any) -> Any:
            with tf.GradientTape() as tape:
                pred = model(batch_data)
                per_example_loss = tf.square(pred - labels)
                loss = tf.nn.compute_average_loss(per_example_loss)
            gradients = tape.gradient(loss, model.trainable_variables)
            for variable, gradient in zip(model.trainable_variables, gradients, strict=True):
                variable.assign_sub(0.01 * gradient)
            with tf.device("/cpu:0"):  # the program's own request, inside the replica
                correct = tf.reduce_sum(tf.cast(tf.greater(pred, 0.5), tf.int64))
            return loss, correct

        batch_data, labels = next(iterator)
        losses, correct = strategy.run(replica_fn, args=(batch_data, labels))
        total = tf.distribute.ReduceOp.SUM
        return strategy.reduce(total, losses, axis=None), strategy.reduce(total, correct, None)

    return step_fn, (per_worker_iterator,)


def mirrored_on_ps_cluster() -> Any:
    """MultiWorkerMirroredStrategy's setup, given a cluster with ps tasks by mistake."""
    return tf.function(lambda: tf.constant(1.0))


def blocked() -> Any:
    """A setup whose step runs until it is killed on the worker it is scheduled on (a loop
    whose condition stays true, then a read of a variable on the ps task), once every task's
    server listens: what the safety tests kill. The step holds the strategy's variable, so
    the strategy lives on (one dropped at once was collected: the coordinator then refused
    the setup within 50 ms); a queue made in the step lives on the coordinator, whose
    dequeue on the worker fails at once (a missing resource)."""
    strategy = tf.distribute.experimental.ParameterServerStrategy(
        tf.distribute.cluster_resolver.TFConfigClusterResolver()
    )
    with strategy.scope():
        offset = tf.Variable(1.0)

    @tf.function
    def step() -> Any:
        start = tf.constant(0, tf.int64)
        count = tf.while_loop(lambda i: i >= 0, lambda i: i + 1, [start])[0]
        return tf.cast(count, tf.float32) + offset

    return step


# The unbalanced case: a wide first layer (256 x 1024 float32: 1 MiB) made first, then its
# bias and a small output layer; without a variable_partitioner, the strategy deals each
# variable whole round-robin in creation order: w1 and w2 to ps:0, b1 to ps:1, whatever
# tf.device is around them.
WIDE_FEATURES, WIDE_UNITS = 256, 1024
# A tf.device the program writes around w1's creation (tensorflow#56416): w1 still goes to ps:0.
ASKED = "/job:ps/task:1"


class WideModel(tf.Module):
    """Dense layers whose first kernel dwarfs the rest, made in this order: w1, b1, w2."""

    def __init__(self) -> None:
        super().__init__()
        with tf.device(ASKED):  # the strategy's own device scope, inside this one, decides
            self.w1 = tf.Variable(
                tf.random.stateless_normal((WIDE_FEATURES, WIDE_UNITS), seed=(1, 2)), name="w1"
            )
        self.b1 = tf.Variable(tf.zeros(WIDE_UNITS), name="b1")
        self.w2 = tf.Variable(tf.random.stateless_normal((WIDE_UNITS, 1), seed=(3, 4)), name="w2")

    def __call__(self, x: Any) -> Any:
        return tf.matmul(tf.nn.relu(tf.matmul(x, self.w1) + self.b1), self.w2)


def _wide_step(partitioner: Any) -> Any:
    """The tutorial's custom loop with ``WideModel`` and ``partitioner``."""
    strategy = tf.distribute.experimental.ParameterServerStrategy(
        tf.distribute.cluster_resolver.TFConfigClusterResolver(), variable_partitioner=partitioner
    )
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = WideModel()

    def wide_dataset_fn(input_context: Any = None) -> Any:
        x = tf.random.stateless_uniform((32, WIDE_FEATURES), seed=(5, 6))
        y = tf.random.stateless_uniform((32, 1), seed=(7, 8))
        return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(BATCH)

    per_worker_iterator = iter(coordinator.create_per_worker_dataset(wide_dataset_fn))

    @tf.function
    def step_fn(iterator: Any) -> Any:
        def replica_fn(batch_data: Any, labels: Any) -> Any:
            with tf.GradientTape() as tape:
                pred = model(batch_data)
                with tf.device("/device:CPU:0"):  # the user's own request (the strategy's too)
                    loss = tf.nn.compute_average_loss(tf.square(pred - labels, name="user_square"))
            gradients = tape.gradient(loss, model.trainable_variables)
            for variable, gradient in zip(model.trainable_variables, gradients, strict=True):
                variable.assign_sub(0.01 * gradient)
            return loss

        losses = strategy.run(replica_fn, args=next(iterator))
        total = strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)
        with tf.device("/device:CPU:0"):  # the user's own, and the only scope around it
            return tf.identity(total, name="user_total")

    return step_fn, (per_worker_iterator,)


def wide_whole() -> Any:
    """``WideModel`` without a variable_partitioner: w1 (1 MiB) whole on ps:0."""
    return _wide_step(None)


def wide_fixed_shards() -> Any:
    """The fix unbalanced_ps offers, applied: ``FixedShardsPartitioner(num_shards=2)`` splits
    every variable in two, one shard on each ps task."""
    return _wide_step(tf.distribute.experimental.partitioners.FixedShardsPartitioner(num_shards=2))
