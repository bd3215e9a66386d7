"""Simple MNIST convnet compiled with XLA, as Keras 3 compiles it on a GPU: one training step.

Reproduces keras-team/keras-io examples/vision/mnist_convnet.py
(commit 02cfe8063b505adc073986c91729f22039f77ad0, Apache-2.0): same layers, loss, optimizer and
metric, written anew for this test suite (see ../NOTICE.md). Changed: ``model.compile(...,
jit_compile=True)``, which is what Keras 3's default ``jit_compile="auto"`` picks when a GPU is
visible (here XLA:CPU compiles it), random data of the MNIST shapes instead of
keras.datasets.mnist (which downloads), a batch of 16 instead of 128, and the step traced is
the one ``model.fit`` runs per batch (``train_on_batch``).
"""

from mnist_convnet import training_step  # the same model and batch (corpus/ is on sys.path)


def program() -> dict:
    return {**training_step(jit_compile=True), "xla": True}
