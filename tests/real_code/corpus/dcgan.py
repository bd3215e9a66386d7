"""keras-io "DCGAN to generate face images": a GAN whose ``train_step`` trains a discriminator
and a generator with two GradientTapes, trained with ``model.fit`` on a ``tf.data`` dataset.

Reproduces keras-team/keras-io examples/generative/dcgan_overriding_train_step.py (commit
cca4efba8e0b8514ae3817931696294039b3bfc9, Apache-2.0): the Conv2D/LeakyReLU discriminator with
Flatten, Dropout and a sigmoid Dense, the Dense/Reshape/Conv2DTranspose generator, the ``GAN``
model overriding ``compile`` (two Adam optimizers, BinaryCrossentropy) and ``train_step``
(``tf.random.normal`` latent vectors, ``tf.concat`` of fake and real images, noisy labels with
``tf.random.uniform``, the two tapes and ``apply_gradients``, the Mean loss metrics), and the
dataset rescaled with ``dataset.map(lambda x: x / 255.0)``, written anew for this suite (see
../NOTICE.md). Changed: 16 random 16x16 images instead of the CelebA download at 64x64 (so the
generator's three stride-2 transposes start at 2x2 instead of 8x8), 16 to 32 filters instead of 64 to 512, a latent space of 16 instead of 128, batches of 8
instead of 32, ``negative_slope=`` for Keras 3's LeakyReLU (the example's ``alpha=``), no
image-saving callback, and one epoch of two batches (``fit(dataset, epochs=1)``) is traced.
"""

import keras
import numpy as np
import tensorflow as tf
from keras import layers

IMAGE = 16
LATENT_DIM = 16


class GAN(keras.Model):
    def __init__(self, discriminator, generator, latent_dim):
        super().__init__()
        self.discriminator = discriminator
        self.generator = generator
        self.latent_dim = latent_dim

    def compile(self, d_optimizer, g_optimizer, loss_fn):
        super().compile()
        self.d_optimizer = d_optimizer
        self.g_optimizer = g_optimizer
        self.loss_fn = loss_fn
        self.d_loss_metric = keras.metrics.Mean(name="d_loss")
        self.g_loss_metric = keras.metrics.Mean(name="g_loss")

    @property
    def metrics(self):
        return [self.d_loss_metric, self.g_loss_metric]

    def train_step(self, real_images):
        batch_size = tf.shape(real_images)[0]
        random_latent_vectors = tf.random.normal(shape=(batch_size, self.latent_dim))
        generated_images = self.generator(random_latent_vectors)
        combined_images = tf.concat([generated_images, real_images], axis=0)
        labels = tf.concat([tf.ones((batch_size, 1)), tf.zeros((batch_size, 1))], axis=0)
        labels += 0.05 * tf.random.uniform(tf.shape(labels))  # noisy labels

        with tf.GradientTape() as tape:
            predictions = self.discriminator(combined_images)
            d_loss = self.loss_fn(labels, predictions)
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))  # noqa: B905

        random_latent_vectors = tf.random.normal(shape=(batch_size, self.latent_dim))
        misleading_labels = tf.zeros((batch_size, 1))
        with tf.GradientTape() as tape:
            predictions = self.discriminator(self.generator(random_latent_vectors))
            g_loss = self.loss_fn(misleading_labels, predictions)
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))  # noqa: B905

        self.d_loss_metric.update_state(d_loss)
        self.g_loss_metric.update_state(g_loss)
        return {"d_loss": self.d_loss_metric.result(), "g_loss": self.g_loss_metric.result()}


def program() -> dict:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (16, IMAGE, IMAGE, 3)).astype("float32")
    dataset = tf.data.Dataset.from_tensor_slices(images).batch(8)
    dataset = dataset.map(lambda x: x / 255.0)

    discriminator = keras.Sequential(
        [
            keras.Input(shape=(IMAGE, IMAGE, 3)),
            layers.Conv2D(16, kernel_size=4, strides=2, padding="same"),
            layers.LeakyReLU(negative_slope=0.2),
            layers.Conv2D(32, kernel_size=4, strides=2, padding="same"),
            layers.LeakyReLU(negative_slope=0.2),
            layers.Conv2D(32, kernel_size=4, strides=2, padding="same"),
            layers.LeakyReLU(negative_slope=0.2),
            layers.Flatten(),
            layers.Dropout(0.2),
            layers.Dense(1, activation="sigmoid"),
        ],
        name="discriminator",
    )
    generator = keras.Sequential(
        [
            keras.Input(shape=(LATENT_DIM,)),
            layers.Dense(2 * 2 * 32),
            layers.Reshape((2, 2, 32)),
            layers.Conv2DTranspose(16, kernel_size=4, strides=2, padding="same"),
            layers.LeakyReLU(negative_slope=0.2),
            layers.Conv2DTranspose(16, kernel_size=4, strides=2, padding="same"),
            layers.LeakyReLU(negative_slope=0.2),
            layers.Conv2DTranspose(32, kernel_size=4, strides=2, padding="same"),
            layers.LeakyReLU(negative_slope=0.2),
            layers.Conv2D(3, kernel_size=5, padding="same", activation="sigmoid"),
        ],
        name="generator",
    )
    gan = GAN(discriminator=discriminator, generator=generator, latent_dim=LATENT_DIM)
    gan.compile(
        d_optimizer=keras.optimizers.Adam(learning_rate=0.0001),
        g_optimizer=keras.optimizers.Adam(learning_rate=0.0001),
        loss_fn=keras.losses.BinaryCrossentropy(),
    )
    return {"fn": gan.fit, "args": (dataset,), "kwargs": {"epochs": 1, "verbose": 0}}
