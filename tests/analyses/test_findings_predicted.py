"""Findings about a GPU machine the run did not have are marked and shown apart (issue 24).

A CPU-only trace with its graph predicts what a machine with a GPU would do (the kernel
registry of the pip wheel says which ops have a GPU kernel): those findings are ``predicted``,
and every view (the frame, ``tfplace show``'s text, the panel's findings list, its static
snapshot, the HTML report) puts them after the findings measured in this run, under
``PREDICTED_HEADER``, so that "would run on the CPU" never reads as what this run did. A trace
recorded on a GPU machine (the vendored real ones) has no predicted finding and no such header.

The step is real graph-mode code run in a ``tf.compat.v1.Session`` on two CPUs: 4 MB tensors
copied to the stand-in device ``CPU:1`` (a measured ``costly_transfer``) and an int32 MatMul
between float ops (a predicted ``cpu_fallback`` and ``ping_pong``: no GPU kernel for int32).
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from typing import Any

import pandas as pd
import pytest
from helpers import GPU_TRACES, TWO_CPUS

from tfplace_widget import PlacementTrace, show_placement
from tfplace_widget._analyses.findings import (
    COLUMNS,
    MEASURED_HEADER,
    PREDICTED_HEADER,
    PREDICTION_HEADER,
    find_findings,
    finding_groups,
)
from tfplace_widget._export.html import report_data, report_html, unpack_json
from tfplace_widget._rendering.snapshot import findings_html
from tfplace_widget._rendering.text_report import TextOutput, print_summary
from tfplace_widget._tfplace_format.layout import MANIFEST

KITTIBOX = GPU_TRACES / "kittibox" / "timeline_01.json"
PREDICTED_KINDS = {"cpu_fallback", "ping_pong"}


def copy_and_int_matmul(tf: Any) -> Any:
    """4 MB inputs on CPU:0 added on CPU:1 (two real copies), and an int32 MatMul big enough
    to be a material share of the step (a 4x4 one takes under 1% of it: no finding) also when
    the machine's load stretches another op by tens of milliseconds (a 128x128 one took
    0.3 ms, 8% of a 3.5 ms step: under 1% of a step stretched by 25 ms)."""
    n = 10**6
    a = tf.ones((n,), name="A")
    b = tf.ones((n,), name="B")
    with tf.device("/cpu:1"):
        c = tf.add(a, b, name="C")
    x = tf.matmul(tf.ones((256, 256), name="m"), tf.ones((256, 256), name="w"), name="dense")
    i = tf.cast(x, tf.int32, name="to_int")
    j = tf.matmul(i, tf.ones((256, 256), tf.int32, name="iw"), name="int_matmul")
    return [c, tf.reduce_sum(tf.cast(j, tf.float32, name="to_float"), name="out")]


@pytest.fixture(scope="module")
def panel(tf: Any) -> Any:
    return show_placement(lambda: copy_and_int_matmul(tf), device_count=TWO_CPUS)


@pytest.fixture(scope="module")
def cpu_trace(panel: Any) -> PlacementTrace:
    return panel.trace


@pytest.fixture(scope="module")
def gpu_trace() -> PlacementTrace:
    """KITTIBOX's GPU trace with every finding listed, the immaterial ones too (each takes
    under 1% of its step): these tests are about how the views group measured findings."""
    trace = PlacementTrace.from_chrome_trace(KITTIBOX)
    trace.__dict__["_findings_cache"] = trace.all_findings
    return trace


def _text(trace: PlacementTrace, findings: int = 5) -> str:
    stream = io.StringIO()
    print_summary(trace, TextOutput(stream, color="never"), findings=findings, list_ops=False)
    return stream.getvalue()


def _positions(text: str, *needles: str) -> list[int]:
    found = [text.find(needle) for needle in needles]
    assert -1 not in found, [n for n, at in zip(needles, found, strict=True) if at < 0]
    return found


# -- the frame ---------------------------------------------------------------------------------
def test_a_cpu_only_run_marks_its_gpu_findings_predicted(cpu_trace):
    assert not any("GPU" in d for d in cpu_trace.devices)  # nothing ran on a GPU
    findings = cpu_trace.findings
    assert list(findings.columns) == COLUMNS and findings["predicted"].dtype == bool
    by_kind = findings.groupby("kind")["predicted"].agg(set).to_dict()
    assert set(by_kind) >= PREDICTED_KINDS
    for kind in PREDICTED_KINDS:
        assert by_kind[kind] == {True}, kind  # would run on a GPU machine: a prediction
    # The copies to CPU:1 happened in this run: measured.
    assert by_kind["costly_transfer"] == {False}
    # Measured first, then predicted.
    assert list(findings["predicted"]) == sorted(findings["predicted"])
    groups = finding_groups(findings, cpu_trace)
    assert [h for h, _ in groups] == [MEASURED_HEADER, PREDICTED_HEADER]
    assert set(groups[1][1]["kind"]) >= PREDICTED_KINDS
    assert not groups[0][1]["predicted"].any() and groups[1][1]["predicted"].all()


def test_a_gpu_trace_has_no_predicted_findings(gpu_trace):
    findings = gpu_trace.findings
    assert any("GPU" in d for d in gpu_trace.devices) and len(findings)
    assert not findings["predicted"].any()
    assert [h for h, _ in finding_groups(findings, gpu_trace)] == [""]  # no header at all


def test_a_prediction_s_findings_are_all_predicted(cpu_trace):
    from tfplace_widget import predict_placement

    predicted = predict_placement(cpu_trace, gpus=1)
    findings = predicted.findings
    assert len(findings) and findings["predicted"].all()
    assert [h for h, _ in finding_groups(findings, predicted)] == [PREDICTION_HEADER]


# -- the views ---------------------------------------------------------------------------------
def test_the_text_report_puts_them_under_the_header(cpu_trace, gpu_trace):
    text = _text(cpu_trace, findings=10)  # all 4
    head, measured, predicted, fallback = _positions(
        text,
        "Findings: ",
        f"  {MEASURED_HEADER}:",
        f"  {PREDICTED_HEADER}:",
        "cpu_fallback",
    )
    assert head < measured < text.find("costly_transfer") < predicted < fallback
    assert "measured first, each group worst first" in text
    # every predicted finding's line is below the header, none above it
    for kind in PREDICTED_KINDS:
        assert text.find(kind) > predicted
    gpu_text = _text(gpu_trace, findings=10)
    assert "Findings: " in gpu_text and "Predicted for" not in gpu_text
    assert MEASURED_HEADER not in gpu_text


def test_the_panel_s_findings_list_groups_them(panel, cpu_trace):
    items = panel.findings_view.items
    findings = cpu_trace.findings
    assert [i["kind"] for i in items] == list(findings["kind"])  # selected is a row of it
    assert [i["predicted"] for i in items] == list(findings["predicted"])
    for item in items:
        assert item["group"] == (PREDICTED_HEADER if item["predicted"] else MEASURED_HEADER)
    assert {i["kind"] for i in items if i["group"] == PREDICTED_HEADER} >= PREDICTED_KINDS


def test_the_panel_of_a_gpu_trace_draws_no_header(gpu_trace):
    items = show_placement(gpu_trace).findings_view.items
    assert items and all(i["group"] == "" and not i["predicted"] for i in items)


def test_the_snapshot_puts_them_under_the_header(panel, gpu_trace):
    html = panel._repr_mimebundle_()["text/html"]
    measured, predicted = _positions(html, MEASURED_HEADER, PREDICTED_HEADER)
    assert measured < html.find("<code>costly_transfer</code>") < predicted
    for kind in PREDICTED_KINDS:
        assert html.find(f"<code>{kind}</code>") > predicted
    gpu_html = findings_html(gpu_trace.findings, trace=gpu_trace)
    assert "<code>host_memory_on_gpu</code>" in gpu_html
    assert "Predicted for" not in gpu_html and MEASURED_HEADER not in gpu_html


def _page_data(trace: PlacementTrace) -> dict:
    page = report_html(trace)
    assert "id='tfplace-findings'" in page
    packed = re.search(r"<script id='tfplace-data'[^>]*>([^<]+)</script>", page)
    assert packed is not None
    return unpack_json(packed.group(1))


def test_the_html_report_groups_them(cpu_trace, gpu_trace):
    data = _page_data(cpu_trace)
    found = data["findings"]
    assert [f["kind"] for f in found] == list(cpu_trace.findings["kind"])
    groups = [f["group"] for f in found]
    assert groups == sorted(groups, key=[MEASURED_HEADER, PREDICTED_HEADER].index)
    assert {f["kind"] for f in found if f["group"] == PREDICTED_HEADER} >= PREDICTED_KINDS
    names = list(cpu_trace.ops["op"])
    fallback = next(f for f in found if f["kind"] == "cpu_fallback")
    assert "int_matmul" in {names[r] for r in fallback["rows"]}  # a click keeps its ops
    gpu = report_data(gpu_trace)["findings"]
    assert gpu and all(f["group"] == "" and not f["predicted"] for f in gpu)


# -- saved and loaded --------------------------------------------------------------------------
def test_the_mark_is_saved_and_an_older_file_finds_it_again(cpu_trace, tmp_path):
    path = tmp_path / "run.tfplace"
    cpu_trace.save(path)
    loaded = PlacementTrace.load(path)
    assert "_findings_cache" in vars(loaded)  # the saved frame, not found again
    pd.testing.assert_frame_equal(loaded.findings, cpu_trace.findings)
    # A file saved before the column: its findings are found again, with the mark.
    with zipfile.ZipFile(path) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    saved = json.loads(members["frames/findings.json"])
    saved["columns"] = [c for c in saved["columns"] if c["name"] != "predicted"]
    members["frames/findings.json"] = json.dumps(saved).encode()
    older = tmp_path / "older.tfplace"
    with zipfile.ZipFile(older, "w") as archive:
        for name in [MANIFEST, *(n for n in members if n != MANIFEST)]:
            archive.writestr(name, members[name])
    reloaded = PlacementTrace.load(older)
    assert "_findings_cache" not in vars(reloaded)
    # Found again from the facts the file recorded (no registry of this process: issue 32),
    # with the same findings, ops and marks as the trace's own.
    same = ["kind", "severity", "ops", "predicted"]
    pd.testing.assert_frame_equal(reloaded.findings[same], find_findings(cpu_trace)[same])
