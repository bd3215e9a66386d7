"""Ops oneDNN fuses after placement keep their rows, checked against TensorFlow's placement log.

On an x86 CPU TensorFlow's oneDNN pass merges a ``Conv2D`` into the ``BiasAdd`` after it
(``_MklNativeConv2DWithBias``) and a ``BiasAddGrad`` into the filter gradient beside it, after
the placer placed them: the placement log lists them, the partition graphs do not. A Keras
convnet's training step (function mode) and a TF1 convnet step in a Session (graph mode) run
here, each first as its user runs it with the placement log captured at fd 2, then traced.
Every op the placer placed has a row, on the device the log names; the prediction for a GPU
machine works from the ops as built (a GPU has no oneDNN rewrite). With
``TF_ENABLE_ONEDNN_OPTS=0`` nothing is fused and the same assertions hold on the plain ops.

The scenarios need two logical CPUs set before TensorFlow's runtime starts: this file runs
itself in a child process (``python test_onednn_fusions.py OUT.pickle``) once per session.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

REAL_CODE = Path(__file__).resolve().parents[1] / "real_code"
sys.path.insert(0, str(REAL_CODE))  # ground_truth: TensorFlow's own log, read independently
OPS = ["op", "type", "device", "how", "reason", "runs", "duration_us", "function"]


def convnet_step() -> dict[str, Any]:
    """The MNIST convnet's shape, tiny: one ``train_on_batch`` as the user calls it, with the
    placement log; then its trace and the trace's prediction for one GPU."""
    import keras
    import numpy as np
    from ground_truth import log_blocks, stderr_at_fd_level

    from tfplace_widget import predict_placement, trace_placement

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    x = np.random.rand(16, 28, 28, 1).astype("float32")
    y = np.random.randint(0, 10, 16)
    with stderr_at_fd_level() as lines:
        model.train_on_batch(x, y)
    trace = trace_placement(model.train_on_batch, x, y)
    prediction = predict_placement(trace, gpus=1)
    return {
        "blocks": log_blocks(lines)[0],
        "ops": trace.ops[OPS],
        "prediction": prediction.ops[["op", "type", "device", "gpu_kernel"]],
    }


def padded_conv() -> dict[str, Any]:
    """A ``tf.pad`` before a ``VALID`` convolution (oneDNN: ``_MklNativePadWithConv2D``), called
    once with the placement log, then traced."""
    import tensorflow as tf
    from ground_truth import log_blocks, stderr_at_fd_level

    from tfplace_widget import trace_placement

    w = tf.ones((3, 3, 2, 4))

    @tf.function
    def f(x):
        padded = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], name="pad")
        return tf.nn.conv2d(padded, w, 1, "VALID", name="conv")

    x = tf.ones((2, 8, 8, 2))
    with stderr_at_fd_level() as lines:
        f(x)
    return {"blocks": log_blocks(lines)[0], "ops": trace_placement(f, x).ops[OPS]}


def tf1_convnet() -> Any:
    """A TF1 convnet training step: conv, bias, relu, a loss and gradient descent."""
    import tensorflow as tf

    v1 = tf.compat.v1
    x = v1.placeholder_with_default(tf.ones((4, 12, 12, 1)), (4, 12, 12, 1), name="x")
    w = v1.get_variable("w", (3, 3, 1, 4), initializer=v1.ones_initializer(), use_resource=True)
    b = v1.get_variable("b", (4,), initializer=v1.zeros_initializer(), use_resource=True)
    y = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "VALID", name="conv"), b, name="bias"))
    return v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(y))


def session_step() -> dict[str, Any]:
    """``tf1_convnet`` run in a Session on two CPUs with the placement log, then traced."""
    import tensorflow as tf
    from ground_truth import run_graph

    from tfplace_widget import trace_placement

    truths = run_graph(tf1_convnet, cpus=2).truths
    # A Session's placer places the whole graph; the step runs what its fetch needs.
    graph_def = tf.compat.v1.GraphDef()
    graph_def.node.extend(truths[0].top.nodes.values())
    needed = tf.compat.v1.graph_util.extract_sub_graph(graph_def, ["GradientDescent"]).node
    step = {n.name for n in needed}
    trace = trace_placement(tf1_convnet, device_count={"CPU": 2})
    logged = {op: device for op, device in truths[0].logged.items() if op in step}
    return {"logged": logged, "mode": trace.mode, "ops": trace.ops[OPS]}


def main(out: str) -> None:
    import tensorflow as tf

    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2
    )
    tf.debugging.set_log_device_placement(True)  # before the runtime starts, or TF never logs
    from tensorflow.python.util import _pywrap_util_port

    results = {"onednn": _pywrap_util_port.IsMklEnabled()}
    results["function"] = convnet_step()
    results["graph"] = session_step()
    results["pad"] = padded_conv()
    with open(out, "wb") as handle:
        pickle.dump(results, handle)


if __name__ == "__main__":
    main(sys.argv[1])
else:
    import pandas as pd
    import pytest

    @pytest.fixture(scope="module")
    def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
        out = tmp_path_factory.mktemp("onednn") / "runs.pickle"
        run = subprocess.run(
            [sys.executable, __file__, str(out)], capture_output=True, text=True, timeout=600
        )
        assert run.returncode == 0, run.stderr[-4000:]
        with open(out, "rb") as handle:
            return pickle.load(handle)

    def _onednn_kernel(op_type: str) -> str:
        """``_MklNativeConv2DWithBias`` (or ``_MklConv2DWithBias``) -> ``Conv2DWithBias``."""
        return op_type.removeprefix("_Mkl").removeprefix("Native") if op_type[:4] == "_Mkl" else ""

    def _step_block(blocks: list[dict], names: set[str]) -> dict[str, tuple[str, str]]:
        """The placer's block for the traced step: the one sharing most names with its rows."""
        from ground_truth import display_name

        return max(blocks, key=lambda b: len(names & {display_name(n) for n in b}))

    def _unplaced(logged: dict[str, str], ops: Any) -> list[str]:
        """The ops the log places that have no row, or a row on another device."""
        where = dict(zip(ops["op"], ops["device"], strict=True))
        return sorted(
            f"{op} ({device})" for op, device in logged.items() if where.get(op) != device
        )

    def test_every_op_the_placer_placed_in_a_keras_step_has_a_row(runs):
        from ground_truth import display_name

        ops = runs["function"]["ops"]
        block = _step_block(runs["function"]["blocks"], set(ops["op"]))
        logged = {display_name(name): device for name, (_, device) in block.items()}
        assert len(logged) > 100  # the whole training step, not a small helper graph
        assert _unplaced(logged, ops) == []
        types = {display_name(name): op_type for name, (op_type, _) in block.items()}
        assert "Conv2D" in types.values() and "BiasAddGrad" in types.values()
        rows = ops.set_index("op")
        for op, op_type in types.items():  # a fused op keeps the type it was placed as
            if op_type in ("Conv2D", "BiasAddGrad"):
                assert rows.loc[op, "type"] == op_type, op

    def test_a_fused_op_and_its_kernel_name_each_other(runs):
        ops = runs["function"]["ops"].set_index("op")
        conv = ops[ops["type"] == "Conv2D"]
        assert len(conv) == 1
        [name] = conv.index
        merged = conv.loc[name]
        if not runs["onednn"]:  # TF_ENABLE_ONEDNN_OPTS=0: the Conv2D ran as itself
            assert merged["runs"] >= 1 and "oneDNN" not in merged["reason"]
            assert not ops["type"].str.startswith("_Mkl").any()
            return
        kernel = ops[ops["type"].map(_onednn_kernel) == "Conv2DWithBias"]
        assert len(kernel) == 1
        [kernel_name] = kernel.index
        assert merged["device"] == kernel.loc[kernel_name, "device"]
        assert pd.isna(merged["runs"]) and pd.isna(merged["duration_us"])  # no time of its own
        assert (
            f"fused it into the {kernel.loc[kernel_name, 'type']} kernel {kernel_name}"
            in merged["reason"]
        )
        assert f"for {int(kernel.loc[kernel_name, 'duration_us'])} µs" in merged["reason"]
        assert merged["how"] == "implicit"  # placed as a Conv2D with no request
        assert "kernel for Conv2D" in merged["reason"]
        assert f"also fused {name} (Conv2D) into this" in kernel.loc[kernel_name, "reason"]
        grad = ops[ops["type"] == "BiasAddGrad"]
        fused_grads = [g for g in grad.index if "fused it into" in grad.loc[g, "reason"]]
        assert fused_grads and all(
            "Conv2DBackpropFilterWithBias kernel" in grad.loc[g, "reason"] for g in fused_grads
        )

    def test_the_gpu_prediction_of_a_convnet_predicts_the_ops_as_built(runs):
        ops = runs["function"]["ops"]
        predicted = runs["function"]["prediction"]
        assert not predicted["type"].str.startswith("_Mkl").any()
        rows = predicted.set_index("op")
        for op_type in ("Conv2D", "BiasAdd", "BiasAddGrad", "MatMul", "Conv2DBackpropFilter"):
            of_type = rows[rows["type"] == op_type]
            assert len(of_type), op_type
            assert set(of_type["device"]) == {"/job:localhost/replica:0/task:0/device:GPU:0"}
            assert set(of_type["gpu_kernel"]) == {"yes"}, op_type
        assert set(ops["op"]) <= set(predicted["op"])  # every row of the trace is predicted

    def test_every_op_the_placer_placed_in_a_session_step_has_a_row(runs):
        graph = runs["graph"]
        assert graph["mode"] == "graph"
        logged = graph["logged"]
        assert "conv" in logged and "bias" in logged
        assert _unplaced(logged, graph["ops"]) == []
        ops = graph["ops"].set_index("op")
        assert ops.loc["conv", "type"] == "Conv2D"
        if runs["onednn"]:
            kernel = ops.loc["bias", "type"]
            assert _onednn_kernel(kernel) == "Conv2DWithBias"
            assert f"fused it into the {kernel} kernel bias" in ops.loc["conv", "reason"]

    def test_a_pad_fused_into_its_convolution_keeps_its_row(runs):
        from ground_truth import display_name

        ops = runs["pad"]["ops"]
        block = _step_block(runs["pad"]["blocks"], set(ops["op"]))
        logged = {display_name(name): device for name, (_, device) in block.items()}
        assert {"pad", "conv"} <= set(logged)
        assert _unplaced(logged, ops) == []
        rows = ops.set_index("op")
        assert rows.loc["pad", "type"] == "Pad"
        if runs["onednn"]:
            kernel = rows.loc["conv", "type"]
            assert _onednn_kernel(kernel) == "PadWithConv2D"
            assert f"fused it into the {kernel} kernel conv" in rows.loc["pad", "reason"]
            assert "also fused pad (Pad) into this kernel" in rows.loc["conv", "reason"]
