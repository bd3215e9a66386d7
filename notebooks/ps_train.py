"""The training script of notebook 07's ``ParameterServerStrategy`` section: TensorFlow's
"Parameter server training" guide's custom training loop, shrunk to seconds.

``trace_placement(setup, cluster="local:worker=2,ps=2", mode="function")`` runs ``setup`` in the
coordinator's process (``/job:chief/task:0``, with its own ``TF_CONFIG``), which imports it
from this module, and schedules the step it returns on the workers. The model is the TF1
section's (``w1`` 100 x 50, ``b1`` 50, ``w2`` 50 x 10, ``b2`` 10), made of ``tf.Variable``s
with plain SGD (``assign_sub``): under Keras 3 the guide's Keras model with a
``variable_partitioner`` fails with or without tfplace (``'ShardedVariable' object has no
attribute 'handle'`` in ``tape.gradient``).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

# The guide's partitioner, MinSizePartitioner(min_shard_bytes=256 << 10, max_shards=NUM_PS),
# with shards of 4 kB at least, for this small model: w1 (20,000 bytes) is split in two.
MIN_SHARD_BYTES = 4 << 10
PER_WORKER_BATCH = 32


class Model(tf.Module):
    """Two dense layers, their variables made in this order: w1, b1, w2, b2."""

    def __init__(self) -> None:
        super().__init__()
        self.w1 = tf.Variable(tf.random.stateless_normal((100, 50), seed=(1, 2)), name="w1")
        self.b1 = tf.Variable(tf.zeros(50), name="b1")
        self.w2 = tf.Variable(tf.random.stateless_normal((50, 10), seed=(3, 4)), name="w2")
        self.b2 = tf.Variable(tf.zeros(10), name="b2")

    def __call__(self, x: Any) -> Any:
        return tf.matmul(tf.nn.relu(tf.matmul(x, self.w1) + self.b1), self.w2) + self.b2


def dataset_fn(input_context: Any = None) -> Any:
    x = tf.random.stateless_normal((256, 100), seed=(5, 6))
    y = tf.random.stateless_uniform((256,), seed=(7, 8), maxval=10, dtype=tf.int64)
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(256).repeat().batch(PER_WORKER_BATCH)


def setup() -> Any:
    """The guide's set-up up to its training loop: the strategy with a variable partitioner,
    the coordinator, the model in ``strategy.scope()``, the per-worker dataset and the step;
    returns the step and its per-worker iterator, which the coordinator schedules."""
    strategy = tf.distribute.ParameterServerStrategy(
        tf.distribute.cluster_resolver.TFConfigClusterResolver(),  # tfplace sets TF_CONFIG
        variable_partitioner=tf.distribute.experimental.partitioners.MinSizePartitioner(
            min_shard_bytes=MIN_SHARD_BYTES, max_shards=2
        ),
    )
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = Model()
    per_worker_iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def step_fn(iterator: Any) -> Any:
        def replica_fn(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(y, model(x))
                loss = tf.nn.compute_average_loss(per_example)
            grads = tape.gradient(loss, model.trainable_variables)
            for variable, grad in zip(model.trainable_variables, grads, strict=True):
                variable.assign_sub(0.1 * grad)
            return loss

        losses = strategy.run(replica_fn, args=next(iterator))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    return step_fn, (per_worker_iterator,)
