"""keras-io "Text classification from scratch": TextVectorization, a 1D convnet, and the
end-to-end model on raw strings.

Reproduces keras-team/keras-io examples/nlp/text_classification_from_scratch.py (commit
01ae2db402523e96f804c6fc3b0a59582e6a671e, Apache-2.0): the custom standardization (lowercase,
strip ``<br />`` and punctuation), ``TextVectorization.adapt``, the Embedding/Dropout/Conv1D/
GlobalMaxPooling1D/Dense model, and the end-to-end model that takes raw strings (its lookup
table inside the step); written anew for this suite (see ../NOTICE.md). Changed: 32 made-up
reviews instead of the IMDB download, 2,000 tokens, sequences of 40, embeddings of 16,
Conv1D of 16 filters; the step traced is the end-to-end model's ``test_on_batch`` (the
example's last ``evaluate``).
"""

import re
import string

import keras
import numpy as np
import tensorflow as tf
from keras import layers

MAX_FEATURES = 2000
EMBEDDING_DIM = 16
SEQUENCE_LENGTH = 40
WORDS = ["good", "bad", "great", "awful", "movie", "plot", "actor", "boring", "fun", "loved"]


def custom_standardization(input_data):
    lowercase = tf.strings.lower(input_data)
    stripped_html = tf.strings.regex_replace(lowercase, "<br />", " ")
    return tf.strings.regex_replace(stripped_html, f"[{re.escape(string.punctuation)}]", "")


def program() -> dict:
    rng = np.random.default_rng(0)
    reviews = [" ".join(rng.choice(WORDS, 12)).capitalize() + ".<br />Really!" for _ in range(32)]
    labels = rng.integers(0, 2, (32, 1)).astype("float32")
    raw_train_ds = tf.data.Dataset.from_tensor_slices((reviews, labels)).batch(8)

    vectorize_layer = layers.TextVectorization(
        standardize=custom_standardization,
        max_tokens=MAX_FEATURES,
        output_mode="int",
        output_sequence_length=SEQUENCE_LENGTH,
    )
    vectorize_layer.adapt(raw_train_ds.map(lambda x, y: x))

    inputs = keras.Input(shape=(None,), dtype="int64")
    x = layers.Embedding(MAX_FEATURES, EMBEDDING_DIM)(inputs)
    x = layers.Dropout(0.5)(x)
    x = layers.Conv1D(16, 7, padding="valid", activation="relu", strides=3)(x)
    x = layers.Conv1D(16, 7, padding="valid", activation="relu", strides=3)(x)
    x = layers.GlobalMaxPooling1D()(x)
    x = layers.Dense(16, activation="relu")(x)
    x = layers.Dropout(0.5)(x)
    predictions = layers.Dense(1, activation="sigmoid", name="predictions")(x)
    model = keras.Model(inputs, predictions)
    model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])

    text_input = keras.Input(shape=(1,), dtype="string")
    indices = vectorize_layer(text_input)
    end_to_end_model = keras.Model(text_input, model(indices))
    end_to_end_model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])
    raw_text = np.array(reviews[:8], dtype=object).reshape(-1, 1)
    return {
        "fn": end_to_end_model.test_on_batch,
        "args": (raw_text, labels[:8]),
        "cpu_only": ["lookup_table"],
    }
