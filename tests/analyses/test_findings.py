"""``trace.findings``: the classic CPU fallbacks of a step, found in real TensorFlow traces.

Every trace here is a real ``tf.compat.v1.Session`` run (two CPU devices, no GPU): the kernel
registry of the pip wheel still says which ops have a GPU kernel, so the findings predict what a
GPU machine would do. The GPU traces are the vendored real ones.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any

import numpy as np
import pandas as pd
import pytest
from helpers import GPU_TRACES, TWO_CPUS, raw_chrome_events

from tfplace_widget import PlacementTrace
from tfplace_widget._analyses.findings import (
    COLUMNS,
    KINDS,
    MATERIAL_SHARE,
    SEVERITIES,
    find_findings,
)

MERGED = GPU_TRACES / "ikhlestov-tensorflow-profiling" / "GPU_timeline_03_merged_5_runs.json"
KITTIBOX = GPU_TRACES / "kittibox" / "timeline_01.json"
BERT_PROFILE = GPU_TRACES / "tensorflow-profiler-bert" / "34.83.195.179_6003.xplane.pb"


def classic_step(tf: Any, width: int = 4, batch: int = 2) -> Any:
    """A step with the four classic fallbacks between GPU-capable float ops: a dataset read in
    the step, an int32 MatMul (``batch`` x ``width`` by ``width`` x ``width``: at 2 x 4 it takes a
    few µs, about 1% of the step; at 64 x 512 milliseconds, most of it), a string op and a
    tf.py_function."""
    rows = np.ones((4 * batch, width), np.float32)
    ds = tf.data.Dataset.from_tensor_slices(rows).batch(batch).repeat()
    batch = tf.compat.v1.data.make_one_shot_iterator(ds).get_next(name="batch")
    hidden = tf.matmul(batch, tf.ones((width, width), name="w"), name="dense")
    counts = tf.cast(hidden, tf.int32, name="to_int")
    int_w = tf.ones((width, width), tf.int32, name="int_w")
    int_mm = tf.matmul(counts, int_w, name="int_matmul")
    back = tf.cast(int_mm, tf.float32, name="to_float")
    total = tf.reduce_sum(back, name="total")
    label = tf.strings.join(["sum: ", tf.strings.as_string(total, name="as_text")], name="label")
    doubled = tf.py_function(lambda t: t * 2.0, [back], tf.float32, name="py")
    loss = tf.reduce_sum(tf.multiply(doubled, 0.5, name="half"), name="loss")
    return [loss, label]


def fixed_step(tf: Any) -> Any:
    """The same step with every fix applied: batches fed in, float32 MatMul, no strings and no
    Python in the step."""
    batch = tf.ones((2, 4), name="batch")
    hidden = tf.matmul(batch, tf.ones((4, 4), name="w"), name="dense")
    mm = tf.matmul(hidden, tf.ones((4, 4), name="w2"), name="float_matmul")
    return tf.reduce_sum(tf.multiply(mm * 2.0, 0.5, name="half"), name="loss")


def int_arithmetic(tf: Any) -> Any:
    """int32 AddV2 between float ops: its GPU kernel computes in host memory."""
    x = tf.matmul(tf.ones((4, 4), name="a"), tf.ones((4, 4), name="b"), name="mm")
    i = tf.cast(x, tf.int32, name="to_int")
    j = tf.add(i, i, name="int_add")
    return tf.reduce_sum(tf.cast(j, tf.float32, name="to_float"), name="out")


@pytest.fixture(scope="module")
def classic(tf: Any, trace_placement: Any) -> Any:
    return trace_placement(lambda: classic_step(tf), device_count=TWO_CPUS)


@pytest.fixture(scope="module")
def classic_findings(classic: Any) -> pd.DataFrame:
    return classic.findings


def _with(findings: pd.DataFrame, kind: str, op: str) -> pd.DataFrame:
    return findings[(findings["kind"] == kind) & findings["ops"].map(lambda ops: op in ops)]


def _one(findings: pd.DataFrame, kind: str, op: str) -> pd.Series:
    found = _with(findings, kind, op)
    assert len(found) == 1, f"{kind} for {op}: {len(found)} in\n{findings[['kind', 'ops']]}"
    return found.iloc[0]


def test_the_frame_has_its_columns_and_is_sorted_by_severity(classic_findings):
    assert list(classic_findings.columns) == COLUMNS
    assert set(classic_findings["kind"]) <= set(KINDS)
    # the measured ones first, then the predicted ones (issue 24), each group worst first
    ranks = [
        (bool(p), SEVERITIES.index(s))
        for p, s in zip(classic_findings["predicted"], classic_findings["severity"], strict=True)
    ]
    assert ranks == sorted(ranks)
    for row in classic_findings.itertuples():
        assert row.ops and all(isinstance(op, str) for op in row.ops)
        assert all(isinstance(v, (int, float)) for v in row.evidence.values()), row.evidence
        assert row.message.endswith(".") and "\n" not in row.message


def test_int32_matmul_is_a_cpu_fallback_with_the_cast_as_its_fix(classic):
    assert classic.ops.set_index("op").loc["int_matmul", "gpu_kernel"] == "dtype"
    # all_findings: the int32 MatMul takes about 0.4% of this toy step, on either side of the
    # 1% materiality line as the machine's load stretches the other ops (CI, oneDNN off)
    classic_findings = classic.all_findings
    found = _one(classic_findings, "cpu_fallback", "int_matmul")
    assert found["severity"] == "high"  # between two ops that run on the GPU
    assert found["message"].startswith("Cast to float32 before the MatMul (int_matmul)")
    assert "int32 MatMul has no GPU kernel" in found["message"]
    assert found["evidence"]["gpu_neighbours"] == 2  # to_int before it, to_float after it
    chain = _one(classic_findings, "ping_pong", "int_matmul")
    assert chain["ops"] == ["to_int", "int_matmul", "to_float"]
    assert "GPU:0 -> CPU -> GPU:0" in chain["message"]


def test_string_ops_are_one_cpu_fallback(classic):
    # all_findings: the string ops take 1-2% of this toy step, under the 1% materiality line
    # when the machine's load stretches the py_function (failed so in CI, oneDNN off)
    found = _one(classic.all_findings, "cpu_fallback", "label")
    assert {"as_text", "label"} <= set(found["ops"])  # AsString -> StringJoin: one stretch
    assert "string ops have no GPU kernel" in found["message"]
    assert found["severity"] == "high"  # it reads `total`, a GPU op


def test_a_dataset_read_in_the_step_is_a_cpu_fallback_with_its_reader(classic):
    found = _one(classic.all_findings, "cpu_fallback", "OneShotIterator")
    # IteratorGetNext has a GPU kernel but reads the iterator resource, which has none.
    assert classic.ops.set_index("op").loc["batch", "gpu_kernel"] == "yes"
    assert "batch" in found["ops"]
    # the kernel registry's word: OneShotIterator has no GPU kernel, IteratorGetNext has one
    assert "(OneShotIterator has no GPU kernel)" in found["message"]
    assert "IteratorGetNext has no" not in found["message"]
    assert "prefetch_to_device" in found["message"]
    assert found["severity"] == "info" and found["evidence"]["user_fix"] == 1


def test_py_function_sits_on_the_gpu_but_copies_to_the_host(classic):
    # EagerPyFunc has a DEFAULT kernel: the placer puts it on the GPU, its Python runs on the host
    assert classic.ops.set_index("op").loc["py", "type"] == "EagerPyFunc"
    classic_findings = classic.all_findings
    found = _one(classic_findings, "ping_pong", "py")
    assert found["ops"] == ["to_float", "py", "half"]
    assert "Python body runs on the host" in found["message"]
    assert not len(_with(classic_findings, "cpu_fallback", "py"))


def test_the_fixed_step_has_no_fallbacks(tf, trace_placement):
    findings = trace_placement(lambda: fixed_step(tf), device_count=TWO_CPUS).findings
    bad = findings[findings["kind"].isin(["cpu_fallback", "ping_pong", "host_memory_on_gpu"])]
    assert bad.empty, bad


def test_int32_arithmetic_computes_in_host_memory_on_the_gpu(tf, trace_placement):
    findings = trace_placement(lambda: int_arithmetic(tf), device_count=TWO_CPUS).all_findings
    found = _one(findings, "host_memory_on_gpu", "int_add")
    assert found["evidence"]["copies"] == 2  # device -> host into it, host -> device out
    assert "int32 AddV2" in found["message"] and "keep them float32" in found["message"]
    assert not len(_with(findings, "cpu_fallback", "int_add"))


def test_a_predicted_gpu_trace_finds_the_same_fallbacks(classic):
    from tfplace_widget import predict_placement

    predicted = predict_placement(classic, gpus=1)
    findings = predicted.all_findings  # every finding: which are material is the step's timing
    classic_findings = classic.all_findings
    for kind, op in [
        ("cpu_fallback", "int_matmul"),
        ("cpu_fallback", "label"),
        ("cpu_fallback", "OneShotIterator"),
        ("ping_pong", "py"),
        ("ping_pong", "int_matmul"),
    ]:
        assert len(_with(findings, kind, op)) == 1, (kind, op)
        assert len(_with(classic_findings, kind, op)) == 1, (kind, op)


def test_cross_device_copies_say_count_bytes_and_what_to_move(tf, trace_placement):
    n = 10**6

    def inputs_none():  # the seed: A and B on CPU:0, C on the stand-in, 4 MB each
        a = tf.ones((n,), name="A")
        b = tf.ones((n,), name="B")
        with tf.device("/cpu:1"):
            return tf.add(a, b, name="C")

    trace = trace_placement(inputs_none, device_count=TWO_CPUS)
    found = _one(trace.findings, "costly_transfer", "A")
    assert found["severity"] == "high"
    assert found["evidence"]["copies"] == 2 and found["evidence"]["bytes"] == 8 * 10**6
    assert "from CPU:0 to CPU:1 (8.0 MB" in found["message"]
    assert "put A, B on CPU:1 with C" in found["message"]
    assert {"A", "B", "C"} <= set(found["ops"])  # with their _Send/_Recv
    fetch = _one(trace.findings, "costly_transfer", "C/_4")  # C:0 back to the client
    assert fetch["severity"] == "info" and "results, going back to the caller" in fetch["message"]


def test_soft_move_says_the_device_does_not_exist(tf, trace_placement):
    def on_gpu():
        with tf.device("/gpu:0"):
            return tf.add(tf.ones((4,), name="x"), 1.0, name="G")

    found = _one(trace_placement(on_gpu, device_count=TWO_CPUS).all_findings, "soft_move", "G")
    assert "for /device:GPU:0 and ran on CPU:0" in found["message"]
    assert "does not exist here" in found["message"]
    assert found["severity"] == "info"  # no GPU on this machine: nothing to fix here


def test_an_idle_device_beside_a_busy_one(tf, trace_placement):
    # a step well over IDLE_MIN_STEP_US (1 ms), under which the finding is rightly left out:
    # six 300x300 matmuls took 1.8-1.9 ms here, and one CI run found no finding; 600x600: 5-11 ms
    def lopsided():
        x = tf.ones((600, 600), name="x")
        for i in range(6):
            x = tf.matmul(x, x, name=f"heavy_{i}") / 600.0
        with tf.device("/cpu:1"):
            tiny = tf.add(tf.ones((2,), name="t"), 1.0, name="tiny")
        return [x, tiny]

    trace = trace_placement(lopsided, device_count=TWO_CPUS)
    found = trace.findings[trace.findings["kind"] == "idle_device"]
    assert len(found) == 1, trace.findings
    assert found.iloc[0]["message"].startswith("CPU:1 is idle for")
    assert found.iloc[0]["evidence"]["idle_share"] > 1 - 0.25


# -- loaded traces ------------------------------------------------------------------------------
def test_merged_runs_are_not_reported_as_cpu_fallbacks():
    trace = PlacementTrace.from_chrome_trace(MERGED)
    events = raw_chrome_events(MERGED)
    on = {
        kind: {e["args"]["name"] for e in events if kind in e["lane"].lower()}
        for kind in ("cpu", "gpu")
    }
    both = (on["cpu"] & on["gpu"]) - {"_SOURCE"}
    assert len(both) > 50  # the merge artifact: the fifth run's ops on the "cpu:0" lane
    findings = trace.findings
    fallbacks = findings[findings["kind"] == "cpu_fallback"]
    assert not {op for ops in fallbacks["ops"] for op in ops} & both
    merged = findings[findings["kind"] == "merged_runs"]
    assert len(merged) == 1 and set(merged.iloc[0]["ops"]) == both
    assert "merges several runs" in merged.iloc[0]["message"]


def test_a_trace_without_its_graph_makes_no_kernel_guesses(tf):
    graph = tf.Graph()
    with graph.as_default():
        fetches = classic_step(tf)
    v1 = tf.compat.v1
    config = v1.ConfigProto(device_count=TWO_CPUS)
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    options = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE, output_partition_graphs=True)
    metadata = v1.RunMetadata()
    with v1.Session(graph=graph, config=config) as session:
        session.run(fetches, options=options, run_metadata=metadata)
    bare = PlacementTrace.from_run_metadata(metadata)
    assert set(bare.ops["gpu_kernel"].astype(str)) == {"NA"}
    findings = bare.findings
    assert list(findings.columns) == COLUMNS
    guesses = findings[findings["kind"].isin(["cpu_fallback", "ping_pong", "host_memory_on_gpu"])]
    assert guesses.empty, guesses
    assert not findings["message"].str.contains("kernel").any()
    # With the graph the same run says it all.
    full = PlacementTrace.from_run_metadata(metadata, graph=graph).all_findings
    assert len(_with(full, "cpu_fallback", "int_matmul")) == 1


def test_a_real_gpu_trace_shows_host_memory_ops_without_a_graph():
    trace = PlacementTrace.from_chrome_trace(KITTIBOX)
    findings = trace.all_findings
    found = findings[findings["kind"] == "host_memory_on_gpu"]
    assert len(found) == 1
    # 16 StridedSlices of a 4 s step: under 1% of it, so not listed in trace.findings
    assert found.iloc[0]["evidence"]["step_share"] < MATERIAL_SHARE
    assert "host_memory_on_gpu" not in set(trace.findings["kind"])
    ops = found.iloc[0]["ops"]
    assert all(trace.device_of(op).endswith("GPU:0") for op in ops)
    assert found.iloc[0]["evidence"]["copies"] >= len(ops)
    # The host waiting for a busy GPU is how it should be: no idle_device for the CPU.
    assert not (findings["kind"] == "idle_device").any()
    assert not findings["message"].str.contains("has no GPU kernel").any()


def test_a_gpu_profiles_copies_are_told_only_as_the_file_shows_them():
    """A real TF2 GPU profile read without its graph (BERT): copies off a GPU (the input
    pipeline's, a ``_HostRecv`` into host memory) are no "step's inputs" to prefetch to the
    device, and copies that name no tensor or reader no "step's results going back to the
    caller": both only say the file does not tell who read them."""
    trace = PlacementTrace.from_xspace(BERT_PROFILE)
    copies = trace.all_findings[trace.all_findings["kind"] == "costly_transfer"]
    assert len(copies)
    unknown = "loaded without its graph, the trace does not say which ops read them"
    for message in copies["message"]:
        assert "the step's results" not in message and "fetch only" not in message
        if message.split(" (")[0].endswith("to CPU:0"):  # off a GPU
            assert unknown in message and "the step's inputs" not in message


def test_findings_of_an_empty_trace_and_bad_input(seed_none):
    empty = dataclasses.replace(
        seed_none,
        ops=seed_none.ops.iloc[0:0],
        events=seed_none.events.iloc[0:0],
        transfers=seed_none.transfers.iloc[0:0],
        inputs={},
    )
    assert find_findings(empty).empty
    assert list(find_findings(empty).columns) == COLUMNS
    with pytest.raises(TypeError, match="takes a PlacementTrace, not int"):
        find_findings(42)


def test_xla_cluster_of_tf2_code_is_not_hidden(tf, trace_placement):
    @tf.function(jit_compile=True)
    def compiled(x):
        return tf.matmul(x, x) + 1.0

    trace = trace_placement(compiled, tf.ones((4, 4)))
    assert "xla_hidden" not in set(trace.findings["kind"])  # its ops are in trace.ops
    assert set(trace.ops["how"]) == {"xla"}


def test_many_findings_of_a_kind_end_in_one_line_for_the_rest(tf, trace_placement):
    from tfplace_widget._analyses.findings import MAX_PER_KIND

    chains = MAX_PER_KIND + 4

    def many():
        x = tf.ones((2, 2), name="x")
        outs = []
        for i in range(chains):
            counts = tf.cast(x * float(i + 1), tf.int32, name=f"to_int_{i}")
            product = tf.matmul(counts, counts, name=f"int_matmul_{i}")
            outs.append(tf.cast(product, tf.float32, name=f"to_float_{i}"))
        return tf.add_n(outs, name="total")

    # every finding: some of these 2x2 int MatMuls take under 1% of the step
    findings = trace_placement(many, device_count=TWO_CPUS).all_findings
    fallbacks = findings[findings["kind"] == "cpu_fallback"]
    assert len(fallbacks) == MAX_PER_KIND
    last = fallbacks.iloc[-1]
    assert last["message"].startswith(f"{chains - MAX_PER_KIND + 1} more cpu_fallback findings")
    covered = {op for ops in fallbacks["ops"] for op in ops}
    assert {f"int_matmul_{i}" for i in range(chains)} <= covered


# -- findings are the trace's, not the process's (issue 32) ---------------------------------------
def findings_in_a_fresh_process(path: Any, import_tensorflow_first: bool) -> tuple[bool, str]:
    """``(TensorFlow imported, every finding as JSON)`` of the trace saved at ``path``, loaded
    in a new Python process that imports TensorFlow first or never."""
    code = (
        "import sys\n"
        + ("import tensorflow\n" if import_tensorflow_first else "")
        + "from tfplace_widget import PlacementTrace\n"
        f"found = PlacementTrace.load({str(path)!r}).all_findings\n"
        "print('tensorflow' in sys.modules)\n"
        "print(found.to_json(orient='records', default_handler=str))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    imported, found = done.stdout.splitlines()[-2:]
    return imported == "True", found


def test_a_saved_traces_findings_are_the_same_whether_or_not_tensorflow_is_imported(
    classic, tmp_path
):
    """A CPU trace's findings are a prediction for a GPU machine. Loaded from a file (its
    findings not saved with it), they are read from the facts the file recorded: the same in a
    process that never imported TensorFlow as in one that did (on main, one with TensorFlow
    imported replayed this process's placer and registry and offered a cast the other did not)."""
    saved = tmp_path / "classic.tfplace"
    classic.save(saved)
    bare = PlacementTrace.load(saved)
    bare.__dict__.pop("_findings_cache", None)
    bare.save(tmp_path / "bare.tfplace")

    without_tf = findings_in_a_fresh_process(tmp_path / "bare.tfplace", False)
    with_tf = findings_in_a_fresh_process(tmp_path / "bare.tfplace", True)
    assert (without_tf[0], with_tf[0]) == (False, True)
    assert "int_matmul (MatMul): int32 MatMul has no GPU kernel" in without_tf[1]
    assert with_tf[1] == without_tf[1]
