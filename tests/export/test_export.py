"""Saving, sharing and exporting a trace: ``.tfplace`` files, Chrome trace JSON, CSV/Parquet.

Real traces: the seed experiment (graph mode, two CPUs), a tf.function run here (TF2 code, with
an int32 MatMul that would fall back to the CPU on a GPU machine), its prediction on one GPU,
and the real GPU traces vendored in ``tfplace_widget/examples/gpu_traces``.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from helpers import CPU1, GPU_TRACES, tfplace_members

from tfplace_widget import (
    PlacementTrace,
    TraceError,
    TraceFileNotFound,
    TraceWriteError,
    show_placement,
)
from tfplace_widget._analyses.findings import find_findings
from tfplace_widget._export.chrome_trace import chrome_trace
from tfplace_widget._tfplace_format.frame_json import frame_from_json, frame_to_json
from tfplace_widget._tfplace_format.layout import FORMAT_VERSION, MANIFEST
from tfplace_widget._tracing.dispatch import as_trace

FRAMES = ("ops", "events", "transfers")
KITTIBOX = GPU_TRACES / "kittibox" / "timeline_01.json"
ALL_GPU_TRACES = sorted(GPU_TRACES.glob("*/*.json"))


# -- traces -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def function_trace(tf: Any, trace_placement: Any) -> PlacementTrace:
    """TF2 code run here: a float MatMul, an int32 MatMul (no GPU kernel) and a cast."""

    @tf.function
    def step(x, i):
        y = tf.matmul(x, x, name="y")
        n = tf.matmul(i, i, name="n")
        return tf.add(tf.cast(n, tf.float32, name="f"), y, name="z")

    return trace_placement(step, tf.ones((8, 8)), tf.ones((8, 8), tf.int32))


@pytest.fixture(scope="module")
def predicted(seed_cpu: PlacementTrace) -> PlacementTrace:
    from tfplace_widget import predict_placement

    return predict_placement(seed_cpu, gpus=1)


def assert_same_frames(a: PlacementTrace, b: PlacementTrace, names=FRAMES) -> None:
    for name in names:
        left, right = getattr(a, name), getattr(b, name)
        assert list(left.dtypes.astype(str)) == list(right.dtypes.astype(str)), name
        assert left.dtypes.equals(right.dtypes), name
        pd.testing.assert_frame_equal(left, right, check_exact=True, obj=f"trace.{name}")


def fresh_findings(trace: PlacementTrace) -> pd.DataFrame:
    """The findings computed again from the trace (not the cached or saved ones)."""
    return find_findings(trace)


def round_trip(trace: PlacementTrace, tmp_path: Path, name: str = "t.tfplace") -> PlacementTrace:
    path = tmp_path / name
    assert trace.save(path) == str(path)
    return PlacementTrace.load(path)


# -- save / load ------------------------------------------------------------------------------
def test_graph_trace_round_trips_exactly(seed_cpu, tmp_path):
    findings = seed_cpu.findings  # computed, so saved too
    assert len(findings) > 0
    assert set(seed_cpu.raw) == {"run_metadata_0.pb", "graph_def.pb"}
    loaded = round_trip(seed_cpu, tmp_path)
    assert_same_frames(seed_cpu, loaded)
    assert loaded.devices == seed_cpu.devices
    assert loaded.inputs == seed_cpu.inputs
    assert (loaded.log, loaded.source, loaded.mode, loaded.truncated, loaded.notes) == (
        seed_cpu.log,
        seed_cpu.source,
        "graph",
        seed_cpu.truncated,
        seed_cpu.notes,
    )
    assert loaded.predicted is False
    assert loaded.facts == seed_cpu.facts and loaded.facts is not None
    assert loaded.raw == seed_cpu.raw
    assert loaded.device_of("C") == seed_cpu.device_of("C") == CPU1
    pd.testing.assert_frame_equal(loaded.findings, findings)  # the saved findings
    pd.testing.assert_frame_equal(fresh_findings(loaded), fresh_findings(seed_cpu))
    with pytest.raises(KeyError, match="Close matches"):
        loaded.device_of("Cc")


def test_raw_protos_parse_back(seed_cpu, tf):
    metadata = tf.compat.v1.RunMetadata()
    metadata.ParseFromString(seed_cpu.raw["run_metadata_0.pb"])
    assert metadata.step_stats.dev_stats and metadata.partition_graphs
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(seed_cpu.raw["graph_def.pb"])
    assert {"A", "B", "C"} <= {node.name for node in graph_def.node}


def test_function_trace_round_trips_with_its_facts(function_trace, tmp_path):
    assert function_trace.mode == "function"
    assert {"xspace.pb", "function_graphs.pb", "functions.json"} <= set(function_trace.raw)
    # Not computed before saving: the loaded trace computes them from the saved facts.
    function_trace.__dict__.pop("_findings_cache", None)
    loaded = round_trip(function_trace, tmp_path)
    assert "_findings_cache" not in loaded.__dict__
    assert_same_frames(function_trace, loaded)
    assert type(loaded.facts) is type(function_trace.facts)
    assert loaded.facts == function_trace.facts
    assert loaded.raw == function_trace.raw
    # all_findings: whether the 8x8 int32 MatMul takes 1% of this toy step is the machine's
    # load (CI, oneDNN off: it did not), and what is compared here is what the facts give
    findings = function_trace.all_findings
    assert "cpu_fallback" in set(findings["kind"])  # the int32 MatMul, from the kernel facts
    # The same findings, ops and marks; a cast to offer needs the registry of the process
    # that read the facts, which a loaded file's facts do not carry (issue 32).
    same = ["kind", "severity", "ops", "predicted"]
    pd.testing.assert_frame_equal(loaded.all_findings[same], findings[same])
    assert loaded.device_of("n") == function_trace.device_of("n")


def test_prediction_round_trips(predicted, tmp_path):
    saved = predicted.findings  # computed, so saved too
    loaded = round_trip(predicted, tmp_path)
    pd.testing.assert_frame_equal(loaded.findings, saved)
    assert loaded.predicted is True and loaded.notes == predicted.notes
    assert "traced_device" in loaded.ops and "copy" in loaded.transfers
    assert_same_frames(predicted, loaded)
    pd.testing.assert_frame_equal(fresh_findings(loaded), fresh_findings(predicted))


@pytest.mark.parametrize("path", ALL_GPU_TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_gpu_traces_round_trip(path, tmp_path):
    trace = PlacementTrace.from_chrome_trace(path)
    loaded = round_trip(trace, tmp_path)
    assert_same_frames(trace, loaded)
    assert loaded.facts is None and loaded.raw == {}
    pd.testing.assert_frame_equal(fresh_findings(loaded), fresh_findings(trace))


def test_as_trace_opens_a_saved_trace(seed_cpu, tmp_path):
    path = tmp_path / "seed.TFPLACE"  # the suffix in any case
    seed_cpu.save(path)
    assert_same_frames(as_trace(str(path)), seed_cpu)
    renamed = tmp_path / "seed.bin"  # no suffix: a zip by its content
    os.replace(path, renamed)
    assert_same_frames(as_trace(renamed), seed_cpu)


def test_show_placement_opens_a_saved_trace(seed_cpu, tmp_path):
    path = tmp_path / "seed.tfplace"
    seed_cpu.save(path)
    panel = show_placement(str(path))
    try:
        assert_same_frames(panel.trace, seed_cpu)
        assert panel.trace.device_of("C") == CPU1
    finally:
        panel.close()


def test_saving_over_a_file_replaces_it_whole(seed_cpu, seed_none, tmp_path, monkeypatch):
    path = tmp_path / "t.tfplace"
    seed_cpu.save(path)
    before = path.read_bytes()
    import tfplace_widget._tfplace_format.writer as archive

    def broken(*_: Any) -> Any:
        raise TypeError("boom")

    monkeypatch.setattr(archive, "frame_to_members", broken)
    with pytest.raises(TypeError, match="boom"):
        seed_none.save(path)
    assert path.read_bytes() == before  # the old file is intact, no temporary file is left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.tfplace"]


def test_the_archive_is_documented_json_and_strict(seed_cpu, tmp_path):
    path = tmp_path / "t.tfplace"
    assert seed_cpu.findings is not None  # computed, so saved too
    seed_cpu.save(path)
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        assert names[0] == MANIFEST and "frames/findings.json" in names
        manifest = json.loads(archive.read(MANIFEST))
        assert manifest["format"] == "tfplace_widget trace"
        assert manifest["version"] == FORMAT_VERSION
        assert manifest["raw"]["graph_def.pb"] == "tensorflow.GraphDef"
        for name in names:
            if name.endswith(".json"):
                # strict JSON: no NaN/Infinity tokens (other readers refuse them)
                json.loads(archive.read(name), parse_constant=_refuse)


def _refuse(token: str) -> None:
    raise AssertionError(f"non-standard JSON token {token}")


# -- load: bad input --------------------------------------------------------------------------
def test_load_a_missing_file(tmp_path):
    path = tmp_path / "nope.tfplace"
    with pytest.raises(TraceFileNotFound) as info:
        PlacementTrace.load(path)
    assert isinstance(info.value, FileNotFoundError) and str(path) in str(info.value)


def test_load_a_chrome_trace_says_which_reader_to_use(tmp_path):
    with pytest.raises(TraceError, match="not a .tfplace file.*from_chrome_trace"):
        PlacementTrace.load(GPU_TRACES / "riptide" / "timeline.ctf.json")


def test_load_a_zip_that_is_not_a_trace(tmp_path):
    path = tmp_path / "other.tfplace"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("hello.txt", "hi")
    with pytest.raises(TraceError, match=r"other.tfplace.*not a .tfplace file.*trace.save"):
        PlacementTrace.load(path)


def _rewrite(source: Path, target: Path, change: dict[str, bytes | None]) -> None:
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for name in old.namelist():
            data = change.get(name, old.read(name))
            if data is not None:
                new.writestr(name, data)


def test_load_a_newer_version_names_the_upgrade(seed_cpu, tmp_path):
    good = tmp_path / "good.tfplace"
    seed_cpu.save(good)
    with zipfile.ZipFile(good) as archive:
        manifest = json.loads(archive.read(MANIFEST))
    manifest["version"] = FORMAT_VERSION + 1
    newer = tmp_path / "newer.tfplace"
    _rewrite(good, newer, {MANIFEST: json.dumps(manifest).encode()})
    with pytest.raises(TraceError) as info:
        PlacementTrace.load(newer)
    message = str(info.value)
    assert "newer.tfplace" in message and "newer tfplace_widget" in message
    assert "pip install -U tfplace_widget" in message


@pytest.mark.parametrize(("writer", "kept"), [(None, True), ("tfplace_widget 0.0.1", False)])
def test_saved_findings_are_read_back_only_by_the_version_that_wrote_them(
    seed_cpu, tmp_path, writer, kept
):
    assert len(seed_cpu.findings)  # computed, so saved
    good = tmp_path / "good.tfplace"
    seed_cpu.save(good)
    members = tfplace_members(good)
    manifest = json.loads(members[MANIFEST])
    findings = json.loads(members["frames/findings.json"])
    message = next(c for c in findings["columns"] if c["name"] == "message")
    message["values"][0] = "found by the writer"  # mark the saved ones
    if writer is not None:
        manifest["written_by"] = writer
    changed = tmp_path / "changed.tfplace"
    change = {MANIFEST: json.dumps(manifest).encode()}
    change["frames/findings.json"] = json.dumps(findings).encode()
    _rewrite(good, changed, change)
    loaded = PlacementTrace.load(changed)
    assert ("found by the writer" in set(loaded.findings["message"])) is kept
    if not kept:  # found again, from the saved facts
        pd.testing.assert_frame_equal(loaded.findings, fresh_findings(seed_cpu))


@pytest.mark.parametrize(
    "damage",
    ["truncated", "bad json", "missing ops", "wrong column length", "bad devices"],
)
def test_load_a_damaged_file(seed_cpu, tmp_path, damage):
    good = tmp_path / "good.tfplace"
    seed_cpu.save(good)
    bad = tmp_path / "bad.tfplace"
    if damage == "truncated":
        bad.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    elif damage == "bad json":
        _rewrite(good, bad, {"frames/ops.json": b'{"rows": 3, "col'})
    elif damage == "missing ops":
        _rewrite(good, bad, {"frames/ops.json": None})
    elif damage == "wrong column length":
        ops = json.loads(tfplace_members(good)["frames/ops.json"])
        ops["columns"][0]["values"].pop()
        _rewrite(good, bad, {"frames/ops.json": json.dumps(ops).encode()})
    else:
        with zipfile.ZipFile(good) as archive:
            manifest = json.loads(archive.read(MANIFEST))
        manifest["trace"]["devices"] = "CPU:0"
        _rewrite(good, bad, {MANIFEST: json.dumps(manifest).encode()})
    with pytest.raises(TraceError, match=r"bad.tfplace.*(damaged|not a .tfplace).*trace.save"):
        PlacementTrace.load(bad)


def test_load_an_empty_file(tmp_path):
    path = tmp_path / "empty.tfplace"
    path.write_bytes(b"")
    with pytest.raises(TraceError, match="empty.tfplace.*not a .tfplace file.*empty"):
        PlacementTrace.load(path)


# -- save: bad output -------------------------------------------------------------------------
def test_save_into_a_missing_folder(seed_cpu, tmp_path):
    path = tmp_path / "no" / "such" / "t.tfplace"
    with pytest.raises(TraceWriteError, match=r"Cannot write the trace.*does not exist") as info:
        seed_cpu.save(path)
    assert isinstance(info.value, TraceError) and isinstance(info.value, OSError)
    assert info.value.filename == str(path)


def test_save_onto_a_folder(seed_cpu, tmp_path):
    with pytest.raises(TraceWriteError, match="is a folder: pass a file name"):
        seed_cpu.save(tmp_path)


def test_save_below_a_file(seed_cpu, tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    with pytest.raises(TraceWriteError, match="file.txt"):
        seed_cpu.save(blocker / "t.tfplace")


def test_save_refuses_a_column_it_cannot_keep(seed_cpu, tmp_path):
    trace = PlacementTrace(
        ops=seed_cpu.ops.assign(when=pd.Timestamp("2026-01-01")),
        events=seed_cpu.events,
        transfers=seed_cpu.transfers,
        devices=seed_cpu.devices,
    )
    with pytest.raises(TypeError, match="trace.ops column 'when'.*datetime64"):
        trace.save(tmp_path / "t.tfplace")
    assert list(tmp_path.iterdir()) == []


def test_frame_codec_keeps_every_dtype_and_missing_kind():
    frame = pd.DataFrame(
        {
            "text": pd.array(["a", None, "c"], dtype=pd.StringDtype("python", na_value=np.nan)),
            "string": pd.array(["a", pd.NA, "é"], dtype="string"),
            "object": pd.Series(["x", None, math.nan], dtype=object),
            "na_object": pd.Series([pd.NA, [1, 2], {"k": 1.5}], dtype=object),
            "ints": np.array([1, -2, 2**62], dtype=np.int64),
            "small": np.array([1, 2, 3], dtype=np.int8),
            "floats": [0.1, math.inf, math.nan],
            "nullable": pd.array([1, None, 3], dtype="Int64"),
            "nullable_float": pd.array([0.5, None, -math.inf], dtype="Float64"),
            "flags": [True, False, True],
            "maybe": pd.array([True, None, False], dtype="boolean"),
            "level": pd.Categorical(["b", None, "a"], categories=["b", "a"], ordered=True),
        }
    )
    frame.index = pd.Index(["r1", "r2", "r3"], dtype=object)
    text = json.dumps(frame_to_json(frame, "frame"), allow_nan=False)
    back = frame_from_json(json.loads(text))
    pd.testing.assert_frame_equal(back, frame, check_exact=True)
    assert back["object"].iloc[1] is None and math.isnan(back["object"].iloc[2])
    assert back["na_object"].iloc[0] is pd.NA
    empty = pd.DataFrame({c: [] for c in ("a", "b")})
    pd.testing.assert_frame_equal(frame_from_json(frame_to_json(empty, "empty")), empty)


# -- Chrome trace -----------------------------------------------------------------------------
_METADATA = {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}


def check_trace_event_format(document: Any) -> dict[str, int]:
    """Check ``document`` against the Trace Event Format (the subset the writer uses); counts
    of each ``ph``. Fails on any field of a wrong type or value."""
    assert isinstance(document, dict) and isinstance(document["traceEvents"], list)
    assert document.get("displayTimeUnit") in (None, "ms", "ns")
    events = document["traceEvents"]
    counts: dict[str, int] = {}
    named_processes: set[int] = set()
    named_threads: set[tuple[int, int]] = set()
    slices: dict[tuple[int, int], list[tuple[float, float]]] = {}
    flows: dict[Any, list[dict]] = {}
    for event in events:
        ph = event["ph"]
        counts[ph] = counts.get(ph, 0) + 1
        assert ph in {"X", "M", "s", "f", "C"}, ph
        assert isinstance(event["name"], str)
        for key in ("pid", "tid"):
            assert isinstance(event[key], int) and not isinstance(event[key], bool), event
        if ph == "M":
            assert event["name"] in _METADATA
            args = event["args"]
            if event["name"].endswith("_name"):
                assert isinstance(args["name"], str) and args["name"]
            else:
                assert isinstance(args["sort_index"], int)
            if event["name"] == "process_name":
                named_processes.add(event["pid"])
            if event["name"] == "thread_name":
                named_threads.add((event["pid"], event["tid"]))
            continue
        ts = event["ts"]
        assert isinstance(ts, (int, float)) and not isinstance(ts, bool) and math.isfinite(ts)
        assert isinstance(event["cat"], str)
        if ph == "X":
            dur = event["dur"]
            assert isinstance(dur, (int, float)) and not isinstance(dur, bool) and dur >= 0
            assert isinstance(event["args"], dict)
            slices.setdefault((event["pid"], event["tid"]), []).append((ts, ts + dur))
        elif ph == "C":  # a counter (issue 34's memory): named numbers, on a named process
            values = event["args"].values()
            assert event["args"] and all(
                isinstance(v, int) and not isinstance(v, bool) for v in values
            )
            assert event["pid"] in named_processes
        else:
            flows.setdefault(event["id"], []).append(event)
    # every slice's thread and process are named
    assert set(slices) <= named_threads
    assert {pid for pid, _ in named_threads} <= named_processes
    # slices on one thread nest (complete events must), never overlap partly
    for spans in slices.values():
        open_ends: list[float] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1], "slices overlap without nesting"
            open_ends.append(end)
    # flow ids pair one start with one finish, same name and category, bound to a slice
    for pair in flows.values():
        assert sorted(e["ph"] for e in pair) == ["f", "s"], pair
        assert len({(e["name"], e["cat"]) for e in pair}) == 1
        for end in pair:
            if end["ph"] == "f":
                assert end["bp"] == "e"
            spans = slices[(end["pid"], end["tid"])]
            assert any(s <= end["ts"] <= e for s, e in spans), "flow end not in a slice"
    return counts


def test_chrome_trace_follows_the_trace_event_format(seed_cpu, tmp_path):
    path = tmp_path / "seed.json"
    assert seed_cpu.to_chrome_trace(path) == str(path)
    document = json.loads(path.read_text(), parse_constant=_refuse)
    counts = check_trace_event_format(document)
    assert counts["X"] == len(seed_cpu.events)
    assert counts["s"] == counts["f"] >= 2  # A:0 and B:0 to CPU:1 (C's inputs)
    processes = {e["args"]["name"] for e in document["traceEvents"] if e["name"] == "process_name"}
    assert processes == {f"{d} Compute" for d in seed_cpu.devices}
    c = next(e for e in document["traceEvents"] if e["ph"] == "X" and e["name"] == "C")
    row = seed_cpu.ops.set_index("op").loc["C"]
    assert c["args"]["op"] == "AddV2" and c["args"]["device"] == CPU1
    assert c["args"]["requested_device"] == row["requested_device"]
    assert (c["args"]["how"], c["args"]["reason"]) == ("explicit", row["reason"])
    assert (c["ts"], c["dur"]) == (int(row["start_us"]), int(row["duration_us"]))  # us


def _timed(trace: PlacementTrace) -> pd.DataFrame:
    ops = trace.ops[trace.ops["start_us"].notna()]
    return ops[["op", "device", "start_us", "duration_us"]].astype(
        {"op": object, "device": object, "start_us": "int64", "duration_us": "int64"}
    )


def _events(trace: PlacementTrace) -> pd.DataFrame:
    columns = ["op", "device", "lane", "thread", "start_us", "duration_us"]
    return trace.events[columns].astype({c: object for c in ("op", "device", "lane")})


@pytest.mark.parametrize("which", ["graph", "function"])
def test_chrome_round_trip_keeps_op_device_start_and_duration(
    which, seed_cpu, function_trace, tmp_path
):
    trace = seed_cpu if which == "graph" else function_trace
    path = tmp_path / "t.json.gz"
    trace.to_chrome_trace(path)
    assert path.read_bytes()[:2] == b"\x1f\x8b"  # gzipped by the name
    check_trace_event_format(json.loads(gzip.decompress(path.read_bytes())))
    back = PlacementTrace.from_chrome_trace(path)
    pd.testing.assert_frame_equal(_events(back), _events(trace))
    pd.testing.assert_frame_equal(
        _timed(back).reset_index(drop=True), _timed(trace).reset_index(drop=True)
    )
    assert back.device_of("C" if which == "graph" else "n") == trace.device_of(
        "C" if which == "graph" else "n"
    )


@pytest.mark.parametrize("path", ALL_GPU_TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_chrome_round_trip_of_real_gpu_traces_is_exact(path, tmp_path):
    trace = PlacementTrace.from_chrome_trace(path)
    out = tmp_path / "GPU.JSON.GZ"
    trace.to_chrome_trace(out)
    document = json.loads(gzip.decompress(out.read_bytes()))
    check_trace_event_format(document)
    back = PlacementTrace.from_chrome_trace(out)
    # lanes (GPU streams, memcpy) are threads of the device's process, and come back as lanes
    assert_same_frames(trace, back)


def test_chrome_trace_has_an_arrow_per_timed_copy():
    trace = PlacementTrace.from_chrome_trace(KITTIBOX)
    document = chrome_trace(trace)
    check_trace_event_format(document)
    starts = [e for e in document["traceEvents"] if e["ph"] == "s"]
    assert starts and {e["name"] for e in starts} <= set(trace.transfers["tensor"])


def test_chrome_trace_of_a_prediction_is_refused(predicted, tmp_path):
    with pytest.raises(ValueError, match="no events to draw.*prediction.*trace.save"):
        predicted.to_chrome_trace(tmp_path / "p.json")
    assert list(tmp_path.iterdir()) == []


def test_chrome_trace_to_an_unwritable_path(seed_cpu, tmp_path):
    with pytest.raises(TraceWriteError, match=r"Cannot write the Chrome trace.*does not exist"):
        seed_cpu.to_chrome_trace(tmp_path / "missing" / "t.json")


# -- frames, CSV, Parquet ---------------------------------------------------------------------
def test_to_frames_are_copies(seed_cpu):
    frames = seed_cpu.to_frames()
    assert list(frames) == [*FRAMES, "memory"]  # the seed's ones allocated (issue 34)
    for name, frame in frames.items():
        pd.testing.assert_frame_equal(frame, getattr(seed_cpu, name))
    frames["ops"].loc[:, "device"] = "elsewhere"
    assert seed_cpu.device_of("C") == CPU1


def test_to_csv_writes_three_tables(seed_cpu, tmp_path):
    folder = tmp_path / "out" / "csv"  # made, parents included
    paths = seed_cpu.to_csv(folder)
    assert paths == {name: str(folder / f"{name}.csv") for name in [*FRAMES, "memory"]}
    for name, path in paths.items():
        original = getattr(seed_cpu, name)
        back = pd.read_csv(path, keep_default_na=False, na_values=[""])
        assert list(back.columns) == list(original.columns)
        assert len(back) == len(original)
        first = original.columns[0]
        assert back[first].astype(str).tolist() == original[first].astype(str).tolist()
    ops = pd.read_csv(paths["ops"], keep_default_na=False, na_values=[""])
    c = ops.set_index("op").loc["C"]
    assert c["device"] == CPU1 and c["how"] == "explicit"
    assert c["start_us"] == seed_cpu.ops.set_index("op").loc["C", "start_us"]


def test_to_csv_onto_a_file(seed_cpu, tmp_path):
    blocker = tmp_path / "tables"
    blocker.write_text("x")
    with pytest.raises(TraceWriteError, match="is a file, not a folder"):
        seed_cpu.to_csv(blocker)


def test_to_parquet_without_pyarrow_says_what_to_install(seed_cpu, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"pip install 'tfplace_widget\[parquet\]'"):
        seed_cpu.to_parquet(tmp_path / "pq")
    assert not (tmp_path / "pq").exists()


def test_to_parquet_keeps_the_tables(seed_cpu, tmp_path):
    pytest.importorskip("pyarrow")
    paths = seed_cpu.to_parquet(tmp_path / "pq")
    for name, path in paths.items():
        back = pd.read_parquet(path)
        original = getattr(seed_cpu, name)
        pd.testing.assert_frame_equal(back, original, check_dtype=False, check_categorical=False)
        for column in original.columns:
            if isinstance(original[column].dtype, pd.CategoricalDtype):
                assert isinstance(back[column].dtype, pd.CategoricalDtype)


# -- raw protos -------------------------------------------------------------------------------
def test_raw_keeps_every_step_within_the_budget(seed_cpu_steps3, tf):
    from tfplace_widget._sources.raw import raw_protos

    steps = [f"run_metadata_{i}.pb" for i in range(3)]
    assert set(seed_cpu_steps3.raw) == {"graph_def.pb", *steps}
    metadatas = []
    for name in steps:
        metadata = tf.compat.v1.RunMetadata()
        metadata.ParseFromString(seed_cpu_steps3.raw[name])
        metadatas.append(metadata)
    first = metadatas[0].ByteSize()
    raw, note = raw_protos(metadatas, budget=first + 1)
    assert list(raw) == ["run_metadata_0.pb"]
    assert _parsed(tf, raw["run_metadata_0.pb"]) == metadatas[0]
    assert "first 1 of 3 steps" in note
    raw, note = raw_protos(metadatas)
    assert len(raw) == 3 and note == ""


def test_from_run_metadata_keeps_what_it_was_given(seed_cpu, tmp_path, tf):
    metadata, graph_def = seed_cpu.raw["run_metadata_0.pb"], seed_cpu.raw["graph_def.pb"]
    trace = PlacementTrace.from_run_metadata(metadata, graph=graph_def)
    assert set(trace.raw) == {"run_metadata_0.pb", "graph_def.pb"}
    assert trace.raw["graph_def.pb"] == graph_def
    assert _parsed(tf, trace.raw["run_metadata_0.pb"]) == _parsed(tf, metadata)
    loaded = round_trip(trace, tmp_path)
    assert loaded.raw == trace.raw and loaded.facts == trace.facts
    assert_same_frames(trace, loaded)


def _parsed(tf: Any, data: bytes) -> Any:
    metadata = tf.compat.v1.RunMetadata()
    metadata.ParseFromString(data)
    return metadata


@pytest.mark.parametrize("which", ["graph", "function", "gpu"])
def test_a_loaded_trace_shows_the_same_panel(which, seed_cpu, function_trace, tmp_path):
    from tfplace_widget import PlacementPanel

    trace = {
        "graph": seed_cpu,
        "function": function_trace,
        "gpu": PlacementTrace.from_chrome_trace(KITTIBOX),
    }[which]
    panels = [PlacementPanel(trace), PlacementPanel(round_trip(trace, tmp_path))]
    try:
        first, second = panels
        assert first.header.value == second.header.value
        assert first.status.value == second.status.value
        pd.testing.assert_frame_equal(first.visible_ops, second.visible_ops)
        assert _same(first.timeline.drawn(), second.timeline.drawn())
        pd.testing.assert_frame_equal(first.trace.findings, second.trace.findings)
    finally:
        for panel in panels:
            panel.close()


def _same(a: Any, b: Any) -> bool:
    """Deep equality of what the timeline draws (dicts, lists, numpy arrays, numbers)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        x, y = np.asarray(a), np.asarray(b)
        floats = x.dtype.kind == "f" and y.dtype.kind == "f"
        return x.shape == y.shape and np.array_equal(x, y, equal_nan=floats)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b or (a != a and b != b)


FORMULAS = ["=cmd|' /C calc'!A0", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)", "\t=1+1", "\r=1+1"]


def test_to_csv_writes_no_field_a_spreadsheet_would_run_as_a_formula(tmp_path):
    """Issue 31: op names and types from a crafted file went into the CSV as they were; a
    spreadsheet opening it runs ``=cmd|' /C calc'!A0``. Such a field gets a ``'`` in front."""
    import csv

    document = json.loads(KITTIBOX.read_text())
    ops = iter(e for e in document["traceEvents"] if e.get("ph") == "X")
    for formula, event in zip(FORMULAS, ops, strict=False):
        event["args"].update(name=formula, op=formula)
    path = tmp_path / "formulas.json"
    path.write_text(json.dumps(document))
    trace = PlacementTrace.from_chrome_trace(path)
    paths = trace.to_csv(tmp_path / "tables")
    fields = []
    for table in paths.values():
        with open(table, newline="", encoding="utf-8") as stream:
            rows = list(csv.reader(stream))
        fields += [field for row in rows[1:] for field in row if isinstance(field, str)]
    numbers = {str(v) for t in ("ops", "events", "transfers") for v in _numbers(trace, t)}
    risky = [f for f in fields if f[:1] in ("=", "+", "-", "@", "\t", "\r") and f not in numbers]
    assert not risky, risky[:5]
    back = pd.read_csv(paths["ops"], keep_default_na=False, na_values=[""])
    assert {f"'{formula}" for formula in FORMULAS} <= set(back["op"])
    assert {f"'{formula}" for formula in FORMULAS} <= set(back["type"])


def _numbers(trace: PlacementTrace, table: str) -> list[Any]:
    """The values of the numeric columns of ``trace.<table>`` (a negative number is no formula)."""
    frame = getattr(trace, table)
    return [v for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c]) for v in frame[c]]


def test_source_is_saved_and_an_older_file_loads_without_it(seed_cpu, tmp_path):
    """The seed's ops point at conftest.py's lines that made them; saving keeps the column, and
    a file written before it (no ``source``) loads with it missing, not empty (the runtime's)."""
    conftest = Path(__file__).resolve().parents[1] / "conftest.py"
    lines = conftest.read_text().splitlines()
    ops = seed_cpu.ops.set_index("op")
    for name in ("A", "B", "C"):
        path, _, line = ops.loc[name, "source_path"].rpartition(":")
        assert Path(path) == conftest and f'name="{name}"' in lines[int(line) - 1]
        assert ops.loc[name, "source"].endswith(f":{line} in inputs_cpu")
    assert set(ops.loc[ops["type"].isin(["_Send", "_Recv", "_Retval"]), "source"]) == {""}
    loaded = round_trip(seed_cpu, tmp_path)
    pd.testing.assert_frame_equal(
        loaded.ops[["source", "source_path"]], seed_cpu.ops[["source", "source_path"]]
    )
    # A file of the version before: the same trace without the columns.
    ops_now = seed_cpu.ops
    try:
        seed_cpu.ops = ops_now.drop(columns=["source", "source_path"])
        seed_cpu.save(tmp_path / "older.tfplace")
    finally:
        seed_cpu.ops = ops_now
    old = PlacementTrace.load(tmp_path / "older.tfplace")
    assert list(old.ops.columns) == list(seed_cpu.ops.columns)
    assert old.ops["source"].isna().all() and old.ops["source_path"].isna().all()
    assert str(old.ops["source"].dtype) == "string"
