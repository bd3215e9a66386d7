"""keras-io "Bidirectional LSTM on IMDB": two stacked bidirectional LSTMs, one training step.

Reproduces keras-team/keras-io examples/nlp/bidirectional_lstm_imdb.py (commit
0a4be8bbc3ae126f3ca49a0bf173902866ec06f0, Apache-2.0): Embedding, two
``Bidirectional(LSTM(...))`` layers and a sigmoid Dense, compiled with adam and binary
crossentropy, written anew for this suite (see ../NOTICE.md). Changed: random padded token
ids of the example's shape instead of keras.datasets.imdb (which downloads), 8 units instead of
64, sequences of 20 instead of 200, 2,000 words instead of 20,000, a batch of 4.
"""

import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

MAX_FEATURES = 2000
MAXLEN = 20


def program() -> dict:
    inputs = keras.Input(shape=(None,), dtype="int32")
    x = layers.Embedding(MAX_FEATURES, 16)(inputs)
    x = layers.Bidirectional(layers.LSTM(8, return_sequences=True))(x)
    x = layers.Bidirectional(layers.LSTM(8))(x)
    outputs = layers.Dense(1, activation="sigmoid")(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    rng = np.random.default_rng(0)
    x_train = rng.integers(1, MAX_FEATURES, (4, MAXLEN)).astype("int32")
    y_train = rng.integers(0, 2, 4).astype("float32")
    return {"fn": model.train_on_batch, "args": (x_train, y_train)}
