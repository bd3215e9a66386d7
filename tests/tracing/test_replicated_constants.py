"""Constants TensorFlow copies per device after placement keep their rows, checked against its
placement log.

TensorFlow's ``ReplicateConstantsPass`` (``replicate_constants_pass.cc``, in TF 2.16 to 2.21)
replaces a constant the placer put on a CPU that has at most 16 elements and readers on more
than one device by one copy per device (``c/replicate/_0``...), after placement: the placement
log lists ``c``, the partition graphs only the copies. Here a graph (in a Session on two CPUs)
and a tf.function (two logical CPUs) read small constants on both devices: ``c`` with no
request, ``k`` requested on CPU:1, and ``big`` (17 elements, never replicated). Each is first run
as its user runs it with the placement log captured at fd 2, then traced: every op the placer
placed has a row on the device the log names, and the rows of the copies and of the constant
say what the pass did. Without the log (TF2's default: TensorFlow prints no placement when it
is turned on after its runtime started) no record gives ``c``'s device: the copies still name
``c`` and the pass, and no row claims a device for ``c``. oneDNN on or off
(``TF_ENABLE_ONEDNN_OPTS=0``) changes nothing here.

Two logical CPUs and the placement log must be set before TensorFlow's runtime starts (TF prints
no placement when it is turned on later): this file runs itself in a child process
(``python test_replicated_constants.py OUT.pickle [unlogged]``).
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any

REAL_CODE = Path(__file__).resolve().parents[1] / "real_code"
sys.path.insert(0, str(REAL_CODE))  # ground_truth: TensorFlow's own log, read independently
OPS = ["op", "type", "device", "how", "reason", "runs", "duration_us"]
RUNTIME_TYPES = {"_Arg", "_Retval"}


def reads_on_two_devices() -> Any:
    """Two small constants and a 17-element one, each read on CPU:0 and on CPU:1."""
    import tensorflow as tf

    c = tf.constant([1.0, 2.0], name="c")
    big = tf.constant([1.0] * 17, name="big")
    with tf.device("/cpu:1"):
        k = tf.constant([3.0, 4.0], name="k")
        on_1 = tf.add(c, k, name="on_1")
        big_1 = tf.reduce_sum(big, name="big_1")
    on_0 = tf.multiply(c, k, name="on_0")
    big_0 = tf.reduce_sum(big, name="big_0")
    return tf.add_n([on_0, on_1], name="total") + big_0 + big_1


def session_step() -> dict[str, Any]:
    """The graph in a Session on two CPUs with the placement log, then traced."""
    from ground_truth import run_graph

    from tfplace_widget import trace_placement

    [truth] = run_graph(reads_on_two_devices, cpus=2).truths
    logged = {op: device for op, device in truth.logged.items() if op in truth.needed}
    trace = trace_placement(reads_on_two_devices, device_count={"CPU": 2})
    return {"logged": logged, "mode": trace.mode, "ops": trace.ops[OPS]}


def function_step() -> dict[str, Any]:
    """The same reads in a tf.function called with the placement log on, then traced."""
    import tensorflow as tf
    from ground_truth import display_name, log_blocks, stderr_at_fd_level

    from tfplace_widget import trace_placement

    @tf.function
    def step(x):
        return reads_on_two_devices() * x

    x = tf.constant(2.0)
    with stderr_at_fd_level() as lines:
        step(x)
    blocks = log_blocks(lines)[0]
    block = next(b for b in blocks if "on_1" in b)  # the step's graph, as its placer logged it
    logged = {
        display_name(name): device
        for name, (op_type, device) in block.items()
        if op_type not in RUNTIME_TYPES
    }
    trace = trace_placement(step, x)
    return {"logged": logged, "mode": trace.mode, "ops": trace.ops[OPS]}


def unlogged_function_step() -> dict[str, Any]:
    """The tf.function traced in a process whose placement log is off (TF2's default), and
    its prediction for a machine with a GPU."""
    import tensorflow as tf

    from tfplace_widget import predict_placement, trace_placement

    @tf.function
    def step(x):
        return reads_on_two_devices() * x

    trace = trace_placement(step, tf.constant(2.0))
    predicted = predict_placement(trace, gpus=1).ops[["op", "type", "device"]]
    return {"mode": trace.mode, "ops": trace.ops[OPS], "prediction": predicted}


def main(out: str, logged: bool) -> None:
    import tensorflow as tf

    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2
    )
    if logged:
        tf.debugging.set_log_device_placement(True)  # before the runtime starts, or TF never logs
        results = {"graph": session_step(), "function": function_step()}
    else:
        results = {"unlogged": unlogged_function_step()}
    with open(out, "wb") as handle:
        pickle.dump(results, handle)


if __name__ == "__main__":
    main(sys.argv[1], logged=sys.argv[2:] != ["unlogged"])
else:
    import pandas as pd
    import pytest
    from helpers import run_script_results

    CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
    CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"

    @pytest.fixture(scope="module")
    def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
        return run_script_results(Path(__file__), tmp_path_factory.mktemp("rc") / "runs.pickle")

    @pytest.fixture(params=["graph", "function"])
    def mode(request: pytest.FixtureRequest, runs: dict[str, Any]) -> dict[str, Any]:
        result = runs[request.param]
        assert result["mode"] == request.param
        return result

    def test_every_op_the_placer_placed_has_a_row_on_its_device(mode):
        logged, ops = mode["logged"], mode["ops"]
        assert {"c", "k", "big", "on_0", "on_1"} <= set(logged)
        where = dict(zip(ops["op"], ops["device"], strict=True))
        assert sorted(f"{op} ({d})" for op, d in logged.items() if where.get(op) != d) == []
        # The placer's devices, not the copies': c with no request on CPU:0, k on CPU:1.
        assert (logged["c"], logged["k"]) == (CPU0, CPU1)

    def test_the_copies_and_the_constant_name_each_other(mode):
        ops = mode["ops"].set_index("op")
        for constant, how in (("c", "implicit"), ("k", "explicit")):
            copies = sorted(op for op in ops.index if op.startswith(f"{constant}/replicate/_"))
            assert len(copies) == 2, copies  # one per reading device
            assert set(ops.loc[copies, "device"]) == {CPU0, CPU1}
            row = ops.loc[constant]
            assert row["type"] == "Const" and row["how"] == how
            assert pd.isna(row["runs"]) and pd.isna(row["duration_us"])  # it did not run
            assert "ReplicateConstantsPass replaced this constant" in row["reason"]
            assert all(copy in row["reason"] for copy in copies)
            placed = ops.loc[constant, "device"].rsplit("/device:", 1)[1]
            for copy in copies:
                reason = ops.loc[copy, "reason"]
                assert f"a copy of the constant {constant} (placed on {placed}" in reason
                assert "ReplicateConstantsPass" in reason

    def test_a_constant_of_17_elements_is_not_replicated(mode):
        ops = mode["ops"].set_index("op")
        assert not any(op.startswith("big/replicate") for op in ops.index)
        assert "ReplicateConstantsPass" not in ops.loc["big", "reason"]
        assert ops.loc["big", "how"] == "implicit"

    def test_without_the_placement_log_the_copies_still_name_the_constant(tmp_path):
        """TF2's default: no placement log, so no record of the placer's device for ``c``; the
        copies say what they are, and no row claims a device for ``c``."""
        result = run_script_results(Path(__file__), tmp_path / "runs.pickle", "unlogged")
        result = result["unlogged"]
        assert result["mode"] == "function"
        ops = result["ops"].set_index("op")
        assert "c" not in ops.index and "k" not in ops.index
        copies = [op for op in ops.index if op.startswith("c/replicate/_")]
        assert len(copies) == 2
        for copy in copies:
            reason = ops.loc[copy, "reason"]
            assert "a copy of the constant c (no row: only TensorFlow's placement log" in reason
            assert "ReplicateConstantsPass made after placement" in reason
        # A prediction works from the graph as built, which has c and k (a GPU has no copies:
        # the pass copies constants placed on a CPU only).
        predicted = result["prediction"].set_index("op")
        assert predicted.loc["c", "device"].endswith("/device:GPU:0")  # no request
        assert predicted.loc["k", "device"] == CPU1  # requested
        assert not any("/replicate/_" in op for op in predicted.index)
