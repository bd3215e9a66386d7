"""``model.fit`` on a ``tf.data`` text pipeline (issue 30, items 2 and 3), against TensorFlow's
own records: the FunctionDefs of the traced functions (what the step's graphs hold) and the
placement log of the user's own call (where the map function's ops ran).

The program runs once, in a process of its own (``tests/tracing/tf2_input_pipeline.py``): two
logical CPUs and the placement log must be set before TensorFlow's runtime starts.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pandas.testing as pdt
import pytest
from helpers import run_script_results

from tfplace_widget._analyses.findings import find_findings
from tfplace_widget._model.columns import OPS_COLUMNS
from tfplace_widget._model.trace import PlacementTrace

SCRIPT = Path(__file__).with_name("tf2_input_pipeline.py")
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"
SCENARIOS = ("fit_dataset", "fit_arrays", "train_on_batch")
# What the runtime adds to a function's graph (arguments, results, copies, lowering) and
# Grappler-free constant plumbing: in no FunctionDef by these types.
_RUNTIME_TYPES = {
    "_Arg",
    "_Retval",
    "_DeviceArg",
    "_DeviceRetval",
    "_Send",
    "_Recv",
    "_HostSend",
    "_HostRecv",
    "Identity",
    "NoOp",
    "Const",
}
_PLACED = re.compile(r"^(\S+): \((\w+)\): (/job:\S+)$", re.MULTILINE)
_WAIT = re.compile(
    r"waited ([\d.]+) (ms|µs) for the next element of a tf.data iterator "
    r"\(IteratorGetNext, (\d+) time"
)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The program's scenarios, run once in a process of their own."""
    return run_script_results(SCRIPT, tmp_path_factory.mktemp("pipeline") / "results.pickle")


def outcome(results: dict[str, Any], name: str) -> dict[str, Any]:
    entry = results[name]
    assert "trace" in entry, entry.get("traceback")
    return entry


def _op_type(op_type: str) -> str:
    """The op type as built: oneDNN's rewrite (``_MklMatMul``) runs TF's ``MatMul``."""
    return op_type.removeprefix("_MklNative").removeprefix("_Mkl")


def _pipeline(trace: Any) -> Any:
    """The rows of the input pipeline's functions (none in a trace without the column)."""
    if "input_stage" not in trace.ops:
        return trace.ops.iloc[:0]
    return trace.ops[trace.ops["input_stage"].notna()]


@pytest.mark.parametrize("name", SCENARIOS)
def test_rows_of_the_step_are_ops_of_its_functions(results, name):
    """Every row under a traced function is one of its ops (or the runtime's plumbing), and
    every argument row one of its arguments (was, on a dataset: the StringUpper a
    tf.py_function of the map ran eagerly on tf.data's thread, and its ``input`` argument,
    listed under the step as "created by Grappler or the runtime")."""
    entry = outcome(results, name)
    trace, functions = entry["trace"], entry["functions"]
    ops = trace.ops.drop(_pipeline(trace).index)
    assert set(ops["function"]) <= set(functions), set(ops["function"]) - set(functions)
    assert set(ops["function"]) >= {"one_step_on_data"}
    for function, rows in ops.groupby("function"):
        known = functions[function]
        types = {_op_type(t) for t in rows["type"]}
        stray = {
            t
            for t in types - known["types"] - _RUNTIME_TYPES
            if not t.startswith(("_Fused", "Fused"))  # oneDNN/remapper fusions of its ops
        }
        assert not stray, rows[rows["type"].map(_op_type).isin(stray)][["op", "type", "how"]]
        arguments = rows[rows["type"] == "_Arg"]
        outside = arguments[~arguments["op"].isin(known["args"] | known["nodes"])]
        assert outside.empty, outside[["op", "function", "reason"]]


def test_the_map_functions_ops_run_where_tensorflow_ran_them(results):
    """The ops of the dataset's map function have rows, on the device TensorFlow's placement
    log gives each (the user's ``tf.device('/CPU:1')`` inside the map included), grouped
    under the map function (was: no row at all)."""
    entry = outcome(results, "fit_dataset")
    trace, log = entry["trace"], entry["log"]
    placed: dict[tuple[str, str], set[str]] = {}
    for node, op_type, device in _PLACED.findall(log):
        placed.setdefault((node, op_type), set()).add(device)
    rows = _pipeline(trace)
    assert len(rows) and set(rows["function"]) == {"Dataset_map_encode"}
    compared = 0
    for op, op_type, device in zip(rows["op"], rows["type"], rows["device"], strict=True):
        node = op.removeprefix("Dataset_map_encode/")
        logged = placed.get((node, _op_type(op_type)))
        if logged is None:
            continue  # a runtime node (Identity, NoOp) TF's log names in no function
        assert device in logged, (op, device, logged)
        compared += 1
    must = {"EagerPyFunc": CPU0, "None_Lookup/LookupTableFindV2": CPU0, "on_cpu1": CPU1}
    for node, device in must.items():
        assert trace.ops.set_index("op").loc[node, "device"] == device, node
    assert placed[("on_cpu1", "AddV2")] == {CPU1}
    assert compared >= 20, compared


def test_the_py_function_is_a_row_of_its_dataset_stage(results):
    """``EagerPyFunc`` (the tf.py_function) ran once per element, in the ``map`` fused with
    ``batch`` (tf.data's MapAndBatch), and its row says so; its time is the user's Python."""
    trace = outcome(results, "fit_dataset")["trace"]
    py = trace.ops.set_index("op").loc["EagerPyFunc"]
    assert py["type"] == "EagerPyFunc" and py["function"] == "Dataset_map_encode"
    assert py["runs"] == results["elements"]
    assert "MapAndBatch" in py["input_stage"] and "MapDataset" in py["input_stage"]
    assert py["duration_us"] >= results["elements"] * results["sleep_s"] * 1e6
    assert "Input pipeline (Dataset_map_encode, stage MapAndBatch" in py["reason"]
    lookup = trace.ops.set_index("op").loc["None_Lookup/LookupTableFindV2"]
    assert lookup["how"] == "implicit" and "iterator's device" in lookup["reason"]
    assert list(trace.ops.columns) == OPS_COLUMNS


def _logged(log: str) -> dict[tuple[str, str], set[str]]:
    """(node, op type) -> the devices TensorFlow's placement log gave it."""
    placed: dict[tuple[str, str], set[str]] = {}
    for node, op_type, device in _PLACED.findall(log):
        placed.setdefault((node, op_type), set()).add(device)
    return placed


def _agree_with_the_log(rows: Any, log: str) -> int:
    """Every row of ``rows`` is on a device TensorFlow's log gave the node of that name and
    type; how many were compared (an op's node name without its function's prefix)."""
    placed = _logged(log)
    compared = 0
    for op, op_type, function, device in zip(
        rows["op"], rows["type"], rows["function"], rows["device"], strict=True
    ):
        logged = placed.get((op.removeprefix(f"{function}/"), _op_type(op_type)))
        assert logged is not None, (op, op_type, function)
        assert device in logged, (op, device, logged)
        compared += 1
    return compared


def test_a_map_function_the_profiler_timed_nothing_of_has_rows(results):
    """The map before a full shuffle buffer ran in the warm-up call (which filled the
    buffer), not in the traced one: the profiler timed none of its ops, yet TensorFlow
    instantiated it for the iterator the step read, and its log places each of its ops. Each
    has a row, on TensorFlow's device, with no time (was: no row at all)."""
    entry = outcome(results, "untimed_map")
    rows = _pipeline(entry["trace"])
    assert set(rows["function"]) == {"Dataset_map_lambda"}, rows[["op", "function"]]
    types = {_op_type(t) for t in rows["type"]}
    assert {"Cast", "RealDiv", "Const", "Identity"} <= types, types
    assert _agree_with_the_log(rows, entry["log"]) == len(rows)
    assert rows["duration_us"].isna().all(), rows[["op", "duration_us"]]
    assert rows["reason"].str.startswith("Input pipeline (Dataset_map_lambda, stage Map)").all()
    assert set(rows["input_stage"]) == {"Map"}  # its dataset's kind: no run of it to name one


def test_kerass_own_adapter_functions_have_rows(results):
    """``fit`` on arrays: Keras makes its own datasets over them (a shuffled permutation,
    batch slices, a gather of each batch) and drops them before ``fit`` returns, and their
    functions with them. Every op of those functions has a row on TensorFlow's device, with
    its stage, and the rows say the dataset is Keras's, not the user's (was: no row)."""
    entry = outcome(results, "fit_arrays")
    rows = _pipeline(entry["trace"])
    functions = set(rows["function"])
    assert {"Dataset_map_permutation", "Dataset_flat_map_slice_batch_indices"} <= functions
    assert any(f.startswith("Dataset_map_grab_batch") for f in functions), functions
    assert _agree_with_the_log(rows, entry["log"]) >= 20
    assert {"RandomShuffle", "Range", "GatherV2", "TensorSliceDataset"} <= set(rows["type"])
    assert rows["reason"].str.contains("Keras's data adapter").all()
    assert rows["input_stage"].str.contains("Map").all(), set(rows["input_stage"])
    assert results["context_patched"] is False  # TensorFlow's context left as it was
    user = _pipeline(outcome(results, "fit_dataset")["trace"])
    assert not user["reason"].str.contains("Keras's data adapter").any()


def _wait_ms(trace: Any) -> tuple[float, int]:
    found = [_WAIT.search(note) for note in trace.notes]
    found = [m for m in found if m]
    assert len(found) == 1, trace.notes
    value, unit, times = found[0].groups()
    return float(value) / (1 if unit == "ms" else 1000), int(times)


def test_the_wait_for_input_is_in_the_notes_and_the_log(results):
    """The notes (the panel's header) and the log say how long the step waited in
    ``IteratorGetNext``: once per batch, at least the time the map's Python takes to make a
    batch (16 x 2 ms, the step itself is far shorter) for all but the first."""
    trace = outcome(results, "fit_dataset")["trace"]
    waited, times = _wait_ms(trace)
    batches = results["elements"] // results["batch"]
    assert times == batches
    assert waited >= (batches - 1) * results["batch"] * results["sleep_s"] * 1000
    # the step's IteratorGetNext row has that time (an async kernel: no op event of its own)
    row = trace.ops.set_index("op").loc["IteratorGetNext"]
    assert row["runs"] == batches and row["function"] == "multi_step_on_iterator"
    assert abs(row["duration_us"] / 1000 - waited) <= 0.05 + waited * 0.001
    assert all(note in trace.log for note in trace.notes)
    arrays = outcome(results, "fit_arrays")["trace"]
    assert _wait_ms(arrays)[1] == batches  # Keras's own pipeline over the arrays
    assert not _pipeline(arrays).empty or "input_stage" not in " ".join(arrays.notes)
    assert not any(_WAIT.search(n) for n in outcome(results, "train_on_batch")["trace"].notes)


def test_the_step_findings_leave_the_input_pipeline_out(results):
    """The map's ops run on the CPU by tf.data's rule: no finding about the step names them;
    one ``input_wait`` finding says the step waited for them, and which op made it wait (the
    tf.py_function sleeping 2 ms per element)."""
    trace = outcome(results, "fit_dataset")["trace"]
    pipeline = set(_pipeline(trace)["op"])
    findings = find_findings(trace)
    steps = findings[findings["kind"] != "input_wait"]
    named = {op for ops in steps["ops"] for op in ops}
    assert not named & pipeline, named & pipeline
    wait = findings[findings["kind"] == "input_wait"]
    assert len(wait) == 1, findings[["kind", "message"]]
    wait = wait.iloc[0]
    assert wait["ops"][:2] == ["IteratorGetNext", "EagerPyFunc"], wait["ops"]
    assert "EagerPyFunc is a tf.py_function" in wait["message"]
    waited, _ = _wait_ms(trace)
    assert abs(wait["evidence"]["waited_us"] / 1000 - waited) <= 0.05 + waited * 0.001
    batch = outcome(results, "train_on_batch")["trace"]  # no iterator: nothing to wait for
    assert "input_wait" not in set(find_findings(batch)["kind"])


def test_input_stage_is_saved_and_older_files_load(results, tmp_path):
    trace = outcome(results, "fit_dataset")["trace"]
    loaded = PlacementTrace.load(trace.save(tmp_path / "pipeline.tfplace"))
    pdt.assert_frame_equal(loaded.ops, trace.ops)
    old = dataclasses.replace(trace, ops=trace.ops.drop(columns="input_stage"))  # before it
    loaded = PlacementTrace.load(old.save(tmp_path / "old.tfplace"))
    assert list(loaded.ops.columns) == OPS_COLUMNS and loaded.ops["input_stage"].isna().all()


def test_a_gpu_leaves_the_input_pipeline_where_it_ran(results):
    """On a machine with a GPU, tf.data still runs its functions on the iterator's device
    (``CapturedFunction::Instantiate``: ``default_device_to_target``): the prediction keeps
    the map's ops where TensorFlow ran them here (was, once they had rows: 60 of them on
    GPU:0), the op the user put on CPU:1 included."""
    from tfplace_widget import predict_placement

    trace = outcome(results, "fit_dataset")["trace"]
    predicted = predict_placement(trace, gpus=1).ops.set_index("op")["device"]
    ran = _pipeline(trace).set_index("op")["device"]
    assert predicted[ran.index].to_dict() == ran.to_dict()
    assert ran["on_cpu1"] == CPU1
