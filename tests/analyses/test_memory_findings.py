"""The memory findings of issue 34 item 4 that name a cause besides one op: pinned host memory
for a GPU's tensors (``pinned_host_memory``) and a peak made by the input pipeline's batch
(``input_memory``), each on real graph-mode runs on two CPUs and their predictions with a GPU,
checked against TensorFlow's own records: the tensors' sizes in the RunMetadata the trace keeps
(``allocation_description.requested_bytes``), and which ops' allocations its allocator records
hold. No recorded GPU trace of the package has allocator records (``timeline.py`` wrote them
without ``show_memory``): pinned host memory here is a prediction's. Variables duplicated per
replica (``replicated_variables``): a Keras model under MirroredStrategy on two logical CPUs in
a process of its own (``tf2_replicated_variables.py``), against the strategy's own variables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import TWO_CPUS, run_script_results

from tfplace_widget import predict_placement
from tfplace_widget._analyses import findings
from tfplace_widget._analyses.findings import find_findings
from tfplace_widget.examples import gpu_trace

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
BIG = 80 * 2**20  # float32s: 320 MiB, over PEAK_OP_BYTES
BATCH = 68 * 2**20  # float32s: 272 MiB


def tf_outputs(tf: Any, trace: Any) -> dict[str, tuple[int, bool]]:
    """TensorFlow's own records of the traced step: per node, its first output's
    ``requested_bytes`` and whether its tracking allocator recorded any allocation."""
    metadata = tf.compat.v1.RunMetadata()
    metadata.ParseFromString(trace.raw["run_metadata_0.pb"])
    found = {}
    for dev in metadata.step_stats.dev_stats:
        for node in dev.node_stats:
            outputs = node.output
            description = outputs[0].tensor_description if outputs else None
            size = description.allocation_description.requested_bytes if description else 0
            allocated = any(r.alloc_bytes > 0 for m in node.memory for r in m.allocation_records)
            found[node.node_name] = (int(size), allocated)
    return found


def reduced_on_the_host(tf: Any, on_cpu: bool = True) -> Any:
    """A big tensor made where the placer likes (a GPU, predicted), summed under the user's
    ``tf.device('/cpu:0')`` (``on_cpu``) or where the placer likes."""
    big = tf.random.uniform([BIG], name="big")
    if not on_cpu:
        return tf.reduce_sum(big, name="total")
    with tf.device("/cpu:0"):
        return tf.reduce_sum(big, name="total")


def _kind(found: Any, kind: str) -> Any:
    return found[found["kind"] == kind]


def test_pinned_host_memory_names_the_reader_and_its_fix_tried(tf, trace_placement):
    """Predicted with a GPU, the 320 MiB tensor is made on GPU:0 and copied back for the sum
    the user put on CPU:0: pinned host memory of its size (TensorFlow's record of the
    tensor), a finding naming the reader and its line, and a fix (the sum on the GPU) that,
    tried, leaves no pinned memory; the program without the tf.device has none."""
    traced = trace_placement(lambda: reduced_on_the_host(tf), device_count=TWO_CPUS)
    size, _ = tf_outputs(tf, traced)["big/RandomUniform"]
    assert size == BIG * 4
    predicted = predict_placement(traced, gpus=1)
    assert predicted.device_of("big/RandomUniform") == GPU0
    found = find_findings(predicted)
    pinned = _kind(found, "pinned_host_memory")
    assert len(pinned) == 1, found[["kind", "message"]]
    row = pinned.iloc[0]
    assert row["evidence"]["pinned_bytes"] == size and bool(row["predicted"])
    assert row["ops"] == ["big/RandomUniform", "total"]
    assert "test_memory_findings.py:" in row["message"] and "for total on CPU:0" in row["message"]
    assert row["fix"]["overrides"] == {"total": "/GPU:0"}
    assert _kind(found, "memory_peak").empty or all(
        "cuda_host_bfc" not in m for m in _kind(found, "memory_peak")["message"]
    )
    fixed = predict_placement(
        lambda: reduced_on_the_host(tf),
        gpus=1,
        device_count=TWO_CPUS,
        overrides=row["fix"]["overrides"],
    )
    assert fixed.device_of("total") == GPU0
    assert _kind(find_findings(fixed, immaterial=True), "pinned_host_memory").empty
    plain = predict_placement(
        trace_placement(lambda: reduced_on_the_host(tf, on_cpu=False), device_count=TWO_CPUS),
        gpus=1,
    )
    assert _kind(find_findings(plain, immaterial=True), "pinned_host_memory").empty


def test_pinned_host_memory_without_a_gpu_kernel_has_no_fix(tf, trace_placement, monkeypatch):
    """A reader with no GPU kernel (a string conversion) needs the tensor on the host: the
    finding says no placement change cures it (its size threshold lowered for a small run)."""

    def as_text() -> Any:
        values = tf.random.uniform([2**16], name="values")
        return tf.strings.as_string(values, name="text")

    traced = trace_placement(as_text, device_count=TWO_CPUS)
    predicted = predict_placement(traced, gpus=1)
    monkeypatch.setattr(findings, "PEAK_OP_BYTES", 2**16)
    row = _kind(find_findings(predicted), "pinned_host_memory").iloc[0]
    assert row["fix"]["overrides"] is None
    assert row["fix"]["no_fix"].startswith("text has no GPU kernel")
    assert row["evidence"]["user_fix"] == 0 and "No placement change cures it" in row["message"]


def batches(tf: Any, elements: int) -> Any:
    """A tf.data pipeline whose element is ``elements`` float32s, read by a graph's step."""
    data = tf.data.Dataset.range(1).repeat().map(lambda _: tf.zeros([elements]))
    batch = tf.compat.v1.data.make_one_shot_iterator(data).get_next()
    return tf.reduce_sum(batch * 2.0, name="total")


def test_input_memory_is_the_batch_tf_data_allocated(tf, trace_placement):
    """A 272 MiB element from tf.data: TensorFlow records no allocation for IteratorGetNext
    (tf.data made the tensor in its own threads) though its output is that size; the finding
    says the batch is live at CPU:0's peak beside the step's own few bytes, measured, and
    predicted on the GPU (its copy there). A quarter of the element (the fix, tried): none."""
    traced = trace_placement(lambda: batches(tf, BATCH), device_count=TWO_CPUS)
    size, allocated = tf_outputs(tf, traced)["IteratorGetNext"]
    assert size == BATCH * 4 and not allocated
    for trace, device in (
        (traced, traced.device_of("IteratorGetNext")),
        (predict_placement(traced, gpus=1), GPU0),
    ):
        found = find_findings(trace)
        row = _kind(found, "input_memory")
        assert len(row) == 1, found[["kind", "message"]]
        row = row.iloc[0]
        assert row["ops"] == ["IteratorGetNext"] and row["evidence"]["batch_bytes"] >= size
        assert (
            row["evidence"]["step_bytes"] < size / 100 and bool(row["predicted"]) == trace.predicted
        )
        assert f"makes {device.rsplit('device:', 1)[1]}'s memory peak" in row["message"]
        assert _kind(found, "memory_peak").empty  # the one cause, said once
    smaller = trace_placement(lambda: batches(tf, BATCH // 4), device_count=TWO_CPUS)
    for trace in (smaller, predict_placement(smaller, gpus=1)):
        assert _kind(find_findings(trace, immaterial=True), "input_memory").empty


def test_no_memory_cause_findings_on_small_or_recorded_gpu_traces(seed_cpu):
    """The seed's step (4 kB tensors) and the recorded GPU traces (no allocator records):
    none of these findings, measured or predicted."""
    from tfplace_widget import PlacementTrace

    traces = [seed_cpu, predict_placement(seed_cpu, gpus=1)]
    traces.append(PlacementTrace.from_chrome_trace(gpu_trace("riptide/timeline.ctf.json")))
    for trace in traces:
        kinds = set(find_findings(trace, immaterial=True)["kind"])
        assert not kinds & {"pinned_host_memory", "input_memory"}


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory):
    """``tf2_replicated_variables.py``'s traces: a Keras model's Adam step under
    MirroredStrategy over two logical CPUs (and its prediction with a GPU), the same model's
    ``fit`` with validation, and its step under one replica, each with TensorFlow's own record
    of the variables each device holds."""
    script = Path(__file__).with_name("tf2_replicated_variables.py")
    return run_script_results(script, tmp_path_factory.mktemp("mirrored") / "out.pickle")


def test_replicated_variables_are_the_strategys_copies(mirrored, monkeypatch):
    """Each replica device holds its own copy of the variables: the finding's bytes per
    device and variable count are exactly the components (``v.values``) of the strategy's
    variables on each device (model, Adam's slots, the loss metric) and its all-reduces' own
    ordering tokens, as TensorFlow holds them; two copies, on CPU:0 and CPU:1, no fix
    (``user_fix`` 0, ``info``). The prediction with a GPU keeps the replicas on the CPUs the
    user named (their tf.device: no per-GPU replica), and says the same as what it would do.
    Its size threshold is lowered for a model of a few MB."""
    from tfplace_widget._analyses.summary import format_bytes

    result = mirrored["two"]
    trace, held, count = result["trace"], result["held"], result["count"]
    assert result["replicas"] == 2 and len(held) == 2 and len(set(held.values())) == 1
    (per_device,) = set(held.values())
    monkeypatch.setattr(findings, "PEAK_OP_BYTES", 2**20)
    predicted = result["predicted"]
    assert {predicted.device_of(op) for op in trace.memory["op"]} == set(held)
    for case in (trace, predicted):
        found = find_findings(case)
        rows = _kind(found, "replicated_variables")
        assert len(rows) == 1, found[["kind", "message"]]
        row = rows.iloc[0]
        evidence = row["evidence"]
        assert evidence["variables_bytes"] == per_device and evidence["copies"] == 2
        assert {evidence["variables"]} == set(count.values())
        # read only by the optimizer: at least its slots, at most its variables and the
        # all-reduces' tokens (read by the optimizer's CollectiveReduceV2)
        most = max(result["optimizer"][d] + result["tokens"][d] for d in held)
        assert min(result["slots"].values()) <= evidence["optimizer_bytes"] <= most
        assert evidence["user_fix"] == 0 and row["severity"] == "info"
        assert row["fix"]["overrides"] is None and "by design" in row["fix"]["no_fix"]
        assert bool(row["predicted"]) == case.predicted
        assert {case.device_of(op) for op in row["ops"]} == set(held)
        assert len(row["ops"]) == sum(count.values())
        message = row["message"]
        assert f"CPU:0 and CPU:1 each hold {format_bytes(per_device)}" in message
        assert f"{format_bytes(2 * per_device)} in all" in message
        assert "sequential" in message and "ParameterServerStrategy" in message
    assert "would keep" in message


def test_replicated_variables_of_fit_count_each_variable_once(mirrored, monkeypatch):
    """``model.fit`` with a validation split: its training and evaluation steps each capture
    the model's variables (one persistent row per variable and device all the same); the
    finding counts each variable once, as TensorFlow holds it on each replica device."""
    result = mirrored["fit"]
    (per_device,) = set(result["held"].values())
    monkeypatch.setattr(findings, "PEAK_OP_BYTES", 2**16)
    rows = _kind(find_findings(result["trace"]), "replicated_variables")
    assert len(rows) == 1
    evidence = rows.iloc[0]["evidence"]
    assert evidence["variables_bytes"] == per_device and evidence["copies"] == 2
    assert {evidence["variables"]} == set(result["count"].values())


def test_persistent_bytes_are_the_replicas_variables(mirrored):
    """What each replica device holds through the step (``memory_peaks``' persistent bytes, the
    need ``fits_on`` and the memory findings add to the peak) is exactly the components of the
    strategy's variables there and its all-reduces' tokens, as TensorFlow holds them: for
    ``train_on_batch`` and for ``model.fit`` with validation, whose training and evaluation
    steps capture the same variables (each counted once)."""
    for case in ("two", "fit"):
        result = mirrored[case]
        peaks = result["trace"].memory_peaks()
        held = peaks.groupby("device")["persistent_bytes"].sum()
        assert held.to_dict() == dict(result["held"]), case


def test_no_replicated_variables_for_one_replica_or_small_variables(mirrored, monkeypatch):
    """One replica holds one copy (no duplication, even at a lowered threshold); two replicas
    of a few MB of variables are below the finding's 256 MiB."""
    two, one = mirrored["two"]["trace"], mirrored["one"]["trace"]
    assert len(mirrored["one"]["held"]) == 1
    assert _kind(find_findings(two, immaterial=True), "replicated_variables").empty
    monkeypatch.setattr(findings, "PEAK_OP_BYTES", 1)
    assert _kind(find_findings(one, immaterial=True), "replicated_variables").empty
    assert not _kind(find_findings(two), "replicated_variables").empty


def test_tf2s_pinned_host_allocator_is_pinned_host_memory():
    """TF2 names its pinned host allocator ``gpu_host_bfc`` (TF 1.x: ``cuda_host_bfc``): the
    recorded TF2 GPU profile's pinned host memory (256 B, at OptionalHasValue_5) is found when
    the threshold is that low, and is not material at the default one."""
    from tfplace_widget import PlacementTrace
    from tfplace_widget._analyses.findings.memory import find_pinned_host_memory

    trace = PlacementTrace.from_xspace(
        gpu_trace("tensorflow-profiler-bert/34.83.195.179_6003.xplane.pb")
    )
    peaks = trace.memory_peaks()
    pinned = peaks[peaks["allocator"] == "gpu_host_bfc"]
    assert len(pinned) == 1 and int(pinned["peak_bytes"].iloc[0]) == 256
    (found,) = find_pinned_host_memory(trace, min_bytes=256)
    assert "(gpu_host_bfc: page-locked" in found.message and "256 B" in found.message
    assert found.ops == list(pinned["ops"].iloc[0])
    assert find_pinned_host_memory(trace) == []
