"""The TensorFlow "Load text" tutorial's second example: a ``tf.data`` text pipeline and a
vocabulary lookup table feeding a 1D convnet trained with ``model.fit``.

Follows tensorflow/docs site/en/tutorials/load_data/text.ipynb (commit
017e49145e3cee4991c449d7bf9612ca85167d8f, Apache-2.0), "Example 2: Predict the author of Iliad
translations": lines of three translations labeled with ``dataset.map(labeler)``, shuffled,
tokenized with ``dataset.map``, a vocabulary counted over the tokenized dataset, a lookup table
from a ``KeyValueTensorInitializer`` (0 for padding, 1 for unknown tokens), padded batches, the
``create_model`` convnet (Embedding with ``mask_zero``, Conv1D, GlobalMaxPooling1D, Dense),
Adam and SparseCategoricalCrossentropy; written anew for this suite (see ../NOTICE.md).
Changed: made-up lines instead of the downloaded text files; ``tensorflow_text`` is not
installed, so the tokenizer is Python run by ``tf.py_function`` inside ``dataset.map`` (the
tf.data guide's way to apply arbitrary Python logic, site/en/guide/data.ipynb); the table is a
``tf.lookup.StaticHashTable`` made under ``tf.device("/CPU:0")`` and looked up in the model's
first layer, as the tutorial's export model holds its vocabulary inside the model, so that the
model trains on token strings; embeddings of 16 and 16 filters instead of 64, batches of 8, and
one epoch of two batches (``fit(train_data, epochs=1)``) is traced.
"""

import collections

import keras
import numpy as np
import tensorflow as tf
from keras import layers

SEQUENCE = 12
WORDS = [
    "achilles", "hector", "spear", "ships", "wrath", "goddess", "sing", "troy", "shield",
    "fell", "armour", "gods", "son", "king", "the", "of", "and", "his", "with", "him",
]  # fmt: skip


def python_tokenize(text: tf.Tensor) -> tf.Tensor:
    """Lower-case, split on whitespace and commas, pad or cut to ``SEQUENCE`` tokens."""
    words = text.numpy().decode().lower().replace(",", " ").split()
    return tf.constant((words + [""] * SEQUENCE)[:SEQUENCE])


def tokenize(text, label):
    tokens = tf.py_function(python_tokenize, [text], Tout=tf.string)
    tokens.set_shape([SEQUENCE])
    return tokens, label


def labeler(example, index):
    return example, tf.cast(index, tf.int64)


class VocabularyLookup(layers.Layer):
    """Token strings to ids through the user's table."""

    def __init__(self, table, **kwargs):
        super().__init__(**kwargs)
        self.table = table

    def call(self, tokens):
        return self.table.lookup(tokens)


def program() -> dict:
    rng = np.random.default_rng(0)
    labeled_data_sets = []
    for index in range(3):  # one per translation
        lines = [", ".join(rng.choice(WORDS, 8)).capitalize() for _ in range(6)]
        lines_dataset = tf.data.Dataset.from_tensor_slices(lines)
        labeled_data_sets.append(lines_dataset.map(lambda ex, i=index: labeler(ex, i)))
    all_labeled_data = labeled_data_sets[0]
    for labeled_dataset in labeled_data_sets[1:]:
        all_labeled_data = all_labeled_data.concatenate(labeled_dataset)
    all_labeled_data = all_labeled_data.shuffle(18, seed=0, reshuffle_each_iteration=False)
    tokenized_ds = all_labeled_data.map(tokenize)

    vocab_dict = collections.defaultdict(int)
    for tokens, _ in tokenized_ds.as_numpy_iterator():
        for token in tokens:
            if token:
                vocab_dict[token] += 1
    vocab = [token for token, _ in sorted(vocab_dict.items(), key=lambda x: x[1], reverse=True)]
    with tf.device("/CPU:0"):  # lookup tables have CPU kernels only
        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                [b"", *vocab], [0, *range(2, len(vocab) + 2)], tf.string, tf.int64
            ),
            default_value=1,
        )
    train_data = tokenized_ds.take(16).batch(8).prefetch(tf.data.AUTOTUNE)

    tokens = keras.Input(shape=(SEQUENCE,), dtype="string")
    x = VocabularyLookup(table)(tokens)
    x = layers.Embedding(len(vocab) + 2, 16, mask_zero=True)(x)
    x = layers.Conv1D(16, 5, padding="valid", activation="relu", strides=2)(x)
    x = layers.GlobalMaxPooling1D()(x)
    outputs = layers.Dense(3)(x)
    model = keras.Model(tokens, outputs)
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return {
        "fn": model.fit,
        "args": (train_data,),
        "kwargs": {"epochs": 1, "verbose": 0},
        "cpu_only": ["lookup_table"],
    }
