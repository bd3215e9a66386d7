"""keras-io "Text classification with Transformer": token and position embeddings, a
Transformer block with MultiHeadAttention, trained with ``model.fit``.

Reproduces keras-team/keras-io examples/nlp/text_classification_with_transformer.py (commit
1909c6710cd3f5af6401f1176dcee9e26781b4f3, Apache-2.0): the ``TransformerBlock`` layer
(MultiHeadAttention, a two-Dense feed-forward network, two LayerNormalizations, two Dropouts),
the ``TokenAndPositionEmbedding`` layer (``ops.arange`` positions), the float ``Input`` of
``maxlen`` token ids, GlobalAveragePooling1D, the Dense head, Adam and sparse categorical
cross-entropy, written anew for this suite (see ../NOTICE.md). Changed: 32 random token
sequences instead of the IMDB download, a vocabulary of 200 instead of 20,000, sequences of 16
instead of 200, embeddings and feed-forward of 16 instead of 32, and one epoch of two batches
(``fit(x, y, batch_size=16, epochs=1)``, no validation data) is traced.
"""

import keras
import numpy as np
from keras import layers, ops

VOCAB_SIZE = 200
MAXLEN = 16
EMBED_DIM = 16
NUM_HEADS = 2
FF_DIM = 16


class TransformerBlock(layers.Layer):
    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
        super().__init__()
        self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential(
            [layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)]
        )
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(rate)
        self.dropout2 = layers.Dropout(rate)

    def call(self, inputs):
        attended = self.dropout1(self.att(inputs, inputs))
        out1 = self.layernorm1(inputs + attended)
        return self.layernorm2(out1 + self.dropout2(self.ffn(out1)))


class TokenAndPositionEmbedding(layers.Layer):
    def __init__(self, maxlen, vocab_size, embed_dim):
        super().__init__()
        self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

    def call(self, x):
        positions = self.pos_emb(ops.arange(start=0, stop=ops.shape(x)[-1], step=1))
        return self.token_emb(x) + positions


def program() -> dict:
    inputs = layers.Input(shape=(MAXLEN,))  # float, as the example leaves it
    x = TokenAndPositionEmbedding(MAXLEN, VOCAB_SIZE, EMBED_DIM)(inputs)
    x = TransformerBlock(EMBED_DIM, NUM_HEADS, FF_DIM)(x)
    x = layers.GlobalAveragePooling1D()(x)
    x = layers.Dropout(0.1)(x)
    x = layers.Dense(20, activation="relu")(x)
    x = layers.Dropout(0.1)(x)
    outputs = layers.Dense(2, activation="softmax")(x)
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])

    rng = np.random.default_rng(0)
    x_train = rng.integers(1, VOCAB_SIZE, (32, MAXLEN))  # pad_sequences' int32 ids
    y_train = rng.integers(0, 2, 32)
    return {
        "fn": model.fit,
        "args": (x_train, y_train),
        "kwargs": {"batch_size": 16, "epochs": 1, "verbose": 0},
    }
