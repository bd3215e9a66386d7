"""The TensorFlow "Distributed training" guide: MirroredStrategy with a custom training loop.

Reproduces tensorflow/docs site/en/guide/distributed_training.ipynb (commit
adc6168a2a196467a07e02ef2323b3bf4ff9f2d5, Apache-2.0), section "Use tf.distribute.Strategy
with custom training loops": a Dense model and an SGD optimizer made in ``strategy.scope()``,
a distributed dataset, ``strategy.run(step_fn)`` and ``strategy.reduce`` inside a
``tf.function``, written anew for this suite (see ../NOTICE.md). Changed: the strategy
mirrors over the two logical CPUs (``["/cpu:0", "/cpu:1"]``) instead of the machine's GPUs,
so its variables live on the CPUs by the user's choice.
"""

import keras
import tensorflow as tf

GLOBAL_BATCH_SIZE = 4


def program() -> dict:
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = keras.Sequential(
            [
                keras.Input((1,)),
                keras.layers.Dense(1, kernel_regularizer=keras.regularizers.L2(1e-4)),
            ]
        )
        optimizer = keras.optimizers.SGD()
    dataset = tf.data.Dataset.from_tensors(([1.0], [1.0])).repeat(100).batch(GLOBAL_BATCH_SIZE)
    dist_inputs = next(iter(strategy.experimental_distribute_dataset(dataset)))

    @tf.function
    def train_step(dist_inputs):
        def step_fn(inputs):
            features, labels = inputs
            with tf.GradientTape() as tape:
                logits = model(features, training=True)
                cross_entropy = tf.nn.softmax_cross_entropy_with_logits(
                    logits=logits, labels=labels
                )
                loss = tf.reduce_sum(cross_entropy) * (1.0 / GLOBAL_BATCH_SIZE)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(list(zip(grads, model.trainable_variables)))  # noqa: B905
            return cross_entropy

        per_example_losses = strategy.run(step_fn, args=(dist_inputs,))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, per_example_losses, axis=0)

    return {"fn": train_step, "args": (dist_inputs,), "cpu_only": ["variables"]}
