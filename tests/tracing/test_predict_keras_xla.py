"""``predict_placement(<Keras step>, gpus=1)`` says that on a GPU Keras 3 would compile the step
with XLA (issue 23): the whole step one XLA cluster on one GPU, so the per-op placement
predicted is what runs only with ``jit_compile=False``.

Real small Keras models (Dense layers, compiled with an optimizer) on this machine. Keras
resolves ``jit_compile="auto"`` inside ``model.compile`` (``False`` without a GPU), so where
TensorFlow sees no GPU a model compiled with the default and one compiled with
``jit_compile=False`` hold the same setting: the note says it cannot tell them apart there.
"""

from __future__ import annotations

import pytest
from test_xla import compiled  # noqa: F401  (the fixture: a real jit_compile=True run)

from tfplace_widget import predict_placement
from tfplace_widget._tracing.predict import keras_xla

MARK = "Keras 3 would compile"


def keras_notes(trace) -> list[str]:
    return [note for note in trace.notes if "XLA" in note and "Keras" in note]


@pytest.fixture(scope="module")
def keras(tf):
    import keras

    return keras


def small_model(keras, **compile_options):
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)]
    )
    model.compile(optimizer="adam", loss="mse", **compile_options)
    return model


def gpu_visible(tf) -> bool:
    return any(d.device_type != "CPU" for d in tf.config.list_physical_devices())


def test_default_keras_step_says_xla_on_a_gpu(tf, keras):
    model = small_model(keras)
    predicted = predict_placement(
        model.train_on_batch, gpus=1, args=(tf.ones((8, 4)), tf.ones((8, 2)))
    )
    [note] = keras_notes(predicted)
    assert predicted.notes[1] == note  # right after the prediction's own line
    assert f"{MARK} {model.name}.train_on_batch with XLA" in note
    assert "jit_compile='auto'" in note and "one XLA cluster on one GPU" in note
    assert "only with model.compile(..., jit_compile=False)" in note
    if not gpu_visible(tf):  # as on this machine: 'auto' was resolved to False at compile()
        assert model.jit_compile is False
        assert "unless the model was compiled with jit_compile=False" in note
        assert "this machine cannot tell which was passed" in note
    # the predicted ops are still there, on the GPU the prediction added
    gpu = "/job:localhost/replica:0/task:0/device:GPU:0"
    assert (predicted.ops["device"] == gpu).any()


def test_the_note_is_shown_in_the_header_and_the_text_report(tf, keras):
    import html
    import io

    from tfplace_widget._rendering.html_parts import header_html
    from tfplace_widget._rendering.text_report import TextOutput, print_summary

    model = small_model(keras)
    predicted = predict_placement(model.predict_on_batch, gpus=1, args=(tf.ones((8, 4)),))
    [note] = keras_notes(predicted)
    assert f"{model.name}.predict_on_batch" in note
    assert html.escape(note) in header_html(predicted)  # the panel's header
    text = io.StringIO()
    print_summary(predicted, TextOutput(text, "never"), list_ops=False)
    assert f"note: {note}" in text.getvalue()


def test_jit_compile_false_on_a_machine_with_a_gpu_says_nothing(tf, keras):
    """Where a GPU is visible Keras would have resolved 'auto' to True, so False is the user's
    choice. This machine has none: gpu_here=True asks what keras_xla decides there."""
    model = small_model(keras, jit_compile=False)
    assert keras_xla(model.train_on_batch, gpu_here=True) is None
    found = keras_xla(model.train_on_batch, gpu_here=False)  # no GPU: could be 'auto'
    assert found is not None and found.requested == "auto or False"


def test_jit_compile_false_here_cannot_be_told_from_the_default(tf, keras):
    if gpu_visible(tf):
        pytest.skip("a GPU is visible: Keras resolved 'auto' to True, False is the user's")
    default, off = small_model(keras), small_model(keras, jit_compile=False)
    assert default.jit_compile is off.jit_compile is False  # Keras resolved 'auto' at compile()
    assert default.get_compile_config()["jit_compile"] is False
    assert off.get_compile_config()["jit_compile"] is False


def test_jit_compile_true_says_the_step_is_one_cluster(tf, keras):
    model = small_model(keras, jit_compile=True)
    predicted = predict_placement(
        model.train_on_batch, gpus=1, args=(tf.ones((8, 4)), tf.ones((8, 2)))
    )
    [note] = keras_notes(predicted)
    assert f"Keras compiles {model.name}.train_on_batch with XLA (jit_compile=True)" in note
    assert "one XLA cluster on one GPU" in note
    assert not [n for n in predicted.notes if n.startswith("The traced run compiled")]


def test_no_note_where_keras_would_not_use_xla(tf, keras):
    x, y = tf.ones((8, 4)), tf.ones((8, 2))
    eager = small_model(keras, run_eagerly=True)  # Keras never compiles an eager step
    assert keras_xla(eager.train_on_batch) is None
    model = small_model(keras)
    assert keras_xla(model) is None  # model(x): Keras compiles only its train/test/predict steps
    assert keras_xla(model.summary) is None
    no_gpu = predict_placement(model.train_on_batch, gpus=0, args=(x, y))
    assert not keras_notes(no_gpu)  # no GPU: 'auto' is no XLA, the prediction is what runs

    @tf.function
    def plain(a):
        return tf.matmul(a, a)

    assert not keras_notes(predict_placement(plain, gpus=1, args=(tf.ones((4, 4)),)))


def test_keras_made_step_functions_are_keras_steps(tf, keras):
    model = small_model(keras)
    model.make_train_function()
    model.make_predict_function()
    train, predict = keras_xla(model.train_function), keras_xla(model.predict_function)
    assert train is not None and train.model == model.name and train.step == "step function"
    assert predict is not None and predict.step == "predict_function"


def test_a_model_never_compiled_is_auto(tf, keras):
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    found = keras_xla(model.predict_on_batch)
    assert found is not None and found.requested == "auto"
    assert getattr(model, "_jit_compile", None) is None  # read, not resolved


def test_a_traced_xla_cluster_is_said_when_predicting_from_the_trace(compiled):  # noqa: F811
    """predict_placement(trace) (the panel's "as on N GPUs") has no callable to ask Keras
    about: the traced run's XLA clusters (how 'xla') say it."""
    xla_ops = compiled.ops[compiled.ops["how"] == "xla"]
    if xla_ops.empty:
        pytest.skip("this TensorFlow's profile records no XLA instruction (2.16)")
    predicted = predict_placement(compiled, gpus=1)
    [note] = [n for n in predicted.notes if "XLA cluster" in n]
    assert predicted.notes[1] == note
    clusters = sorted(set(xla_ops["function"]))
    assert f"compiled {len(clusters)} XLA cluster" in note and clusters[0] in note
    assert f"of their {len(xla_ops):,} ops" in note and "jit_compile=False" in note
    unlisted = int((~xla_ops["op"].isin(set(predicted.ops["op"]))).sum())
    assert (f"has no row for {unlisted:,} of them" in note) == (unlisted > 0)
    assert not [n for n in predict_placement(compiled, gpus=0).notes if "XLA cluster" in n]


# -- issue 30 item 4: what XLA does with the step, decided as Keras and XLA do -----------------
def hashing_model(keras, tf, **compile_options):
    """A custom layer with string ops: Keras's supports_jit says yes (layers do by default),
    XLA has no kernel for them."""

    class Hash(keras.layers.Layer):
        def call(self, x):
            buckets = tf.strings.to_hash_bucket_fast(tf.strings.as_string(x), 10)
            return x + tf.cast(buckets, x.dtype)

    model = keras.Sequential([keras.Input((4,)), Hash(), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse", **compile_options)
    return model


def batches(tf):
    return tf.data.Dataset.from_tensor_slices((tf.ones((16, 4)), tf.ones((16, 2)))).batch(8)


def test_a_step_xla_cannot_compile_is_predicted_to_fail(tf, keras, trace_placement, tmp_path):
    import re

    from keras.src.trainers.trainer import model_supports_jit

    from tfplace_widget import PlacementTrace

    model = hashing_model(keras, tf)
    assert model_supports_jit(model)  # so Keras's 'auto' picks XLA on a machine with a GPU
    # What a user gets with XLA: the same model compiled with jit_compile=True, run here.
    with pytest.raises(tf.errors.InvalidArgumentError) as failed:
        hashing_model(keras, tf, jit_compile=True).train_on_batch(tf.ones((8, 4)), tf.ones((8, 2)))
    message = str(failed.value)
    assert "Detected unsupported operations when trying to compile graph" in message
    refused = set(re.findall(r"No registered '(\w+)' OpKernel for XLA_CPU_JIT", message))
    assert refused
    trace = trace_placement(model.fit, batches(tf), fn_kwargs={"epochs": 1, "verbose": 0})
    trace.save(tmp_path / "step.tfplace")
    loaded = PlacementTrace.load(tmp_path / "step.tfplace")  # the record, no proto parsed
    for predicted in (
        predict_placement(trace, gpus=1),
        predict_placement(loaded, gpus=1),
        predict_placement(
            model.fit, gpus=1, args=(batches(tf),), fn_kwargs={"epochs": 1, "verbose": 0}
        ),
    ):
        [note] = keras_notes(predicted)
        assert "the step fails, since XLA cannot compile 2 of its ops (no XLA_GPU_JIT" in note
        assert all(f"({op_type}" in note for op_type in refused), (refused, note)
        assert "Detected unsupported operations when trying to compile graph" in note
        assert "on XLA_GPU_JIT" in note and "jit_compile=False" in note
        assert "one XLA cluster" not in note
        ops = predicted.ops
        assert not (ops["how"] == "xla").any()  # the per-op placement: what runs without XLA
        string_ops = ops[ops["type"].isin(["AsString", "StringToHashBucketFast"])]
        assert len(string_ops) == 2
        assert string_ops["reason"].str.contains("no XLA_GPU_JIT kernel for").all()
        assert (
            not ops.loc[~ops.index.isin(string_ops.index), "reason"]
            .str.contains("XLA_GPU_JIT")
            .any()
        )


def test_a_compilable_step_is_one_cluster_without_per_op_findings(tf, keras, trace_placement):
    model = small_model(keras)
    trace = trace_placement(model.fit, batches(tf), fn_kwargs={"epochs": 1, "verbose": 0})
    assert "keras_xla.json" in trace.raw  # the trace keeps Keras's decision for later
    predicted = predict_placement(trace, gpus=1)
    [note] = keras_notes(predicted)
    assert "the whole step (its" in note and "runs as one XLA cluster on one GPU" in note
    assert "IteratorGetNext" in note  # Keras's loop around the step is not compiled
    # The variables were made with no tf.device: on the GPU by assumption, which the note says.
    assert "This assumes the variables of" in note and "the step would fail" in note
    ops = predicted.ops
    gpu = "/job:localhost/replica:0/task:0/device:GPU:0"
    xla = ops[ops["how"] == "xla"]
    assert (xla["device"] == gpu).all() and set(xla["function"]) == {"one_step_on_data"}
    assert xla["reason"].str.contains("With jit_compile=False it would go to").all()
    loop = ops[ops["type"] == "IteratorGetNext"]
    assert len(loop) == 1 and loop["how"].iloc[0] != "xla"
    # What XLA compiles for real (here on XLA:CPU, jit_compile=True): the ops of the step
    # function, not those of Keras's loop around it.
    real = trace_placement(
        small_model(keras, jit_compile=True).fit,
        batches(tf),
        fn_kwargs={"epochs": 1, "verbose": 0},
    )
    real_xla = real.ops[real.ops["how"] == "xla"]
    if not real_xla.empty:  # TF 2.16's profile records no XLA instruction
        assert not real_xla["type"].isin(["IteratorGetNext", "OptionalFromValue"]).any()
        assert set(real_xla["function"]) == set(xla["function"])
    # No per-op finding inside the cluster: no fallback, no host-memory arithmetic there.
    findings = predicted.all_findings  # material or not: none inside the cluster
    inside = set(xla["op"])
    for kind in ("cpu_fallback", "host_memory_on_gpu"):
        named = {op for ops_ in findings.loc[findings["kind"] == kind, "ops"] for op in ops_}
        assert not named & inside, (kind, named & inside)
    # host-memory copies between the cluster's ops are gone
    producers = predicted.transfers["tensor"].str.rpartition(":")[0]
    same = predicted.transfers["src_device"] == predicted.transfers["dst_device"]
    assert not (producers.isin(inside) & same).any()
