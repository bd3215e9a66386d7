"""The TensorFlow "Basic training loops" guide: a tf.Module linear model trained by hand.

Reproduces tensorflow/docs site/en/guide/basic_training_loops.ipynb (commit
a68c452e3da63207a8648d704b9c2d4e901fd9b0, Apache-2.0): ``MyModel`` with two variables, the
squared-error loss and ``train()`` with ``tf.GradientTape`` and ``assign_sub``, written anew
for this suite (see ../NOTICE.md). Changed: 100 noisy points instead of 201, and the step
traced is one ``train(model, x, y, learning_rate)`` call, as the guide's loop makes it.
"""

import tensorflow as tf

TRUE_W, TRUE_B = 3.0, 2.0


class MyModel(tf.Module):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.w = tf.Variable(5.0)  # in practice randomly initialised
        self.b = tf.Variable(0.0)

    def __call__(self, x):
        return self.w * x + self.b


def loss(target_y, predicted_y):
    return tf.reduce_mean(tf.square(target_y - predicted_y))


def train(model, x, y, learning_rate):
    with tf.GradientTape() as t:
        current_loss = loss(y, model(x))
    dw, db = t.gradient(current_loss, [model.w, model.b])
    model.w.assign_sub(learning_rate * dw)
    model.b.assign_sub(learning_rate * db)


def program() -> dict:
    x = tf.linspace(-2, 2, 100)
    x = tf.cast(x, tf.float32)
    noise = tf.random.normal(shape=[100], seed=0)
    y = x * TRUE_W + TRUE_B + noise
    return {"fn": train, "args": (MyModel(), x, y, 0.1)}
