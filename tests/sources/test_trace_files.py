"""Trace files as users have them: gzipped, upper-case names, and broken fields in a Chrome trace.

Every bad record is a ``TraceError`` that names the file, the record and the field; nothing
absurd is drawn.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
from helpers import GPU_TRACES

from tfplace_widget import PlacementTrace, TraceError
from tfplace_widget._sources.files import trace_format

RIPTIDE = GPU_TRACES / "riptide" / "timeline.ctf.json"


def first_op_record(document: dict) -> int:
    """Index of the first ``X`` event on a Compute lane of ``document``."""
    compute = {
        e["pid"]
        for e in document["traceEvents"]
        if e.get("ph") == "M" and str(e.get("args", {}).get("name", "")).endswith(" Compute")
    }
    return next(
        i
        for i, e in enumerate(document["traceEvents"])
        if e.get("ph") == "X" and e.get("pid") in compute
    )


def write_with(tmp_path: Path, field: str, value: object) -> tuple[Path, int]:
    document = json.loads(RIPTIDE.read_text())
    index = first_op_record(document)
    document["traceEvents"][index][field] = value
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(document))  # NaN is written as NaN, as Python's json allows
    return path, index


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ts", math.nan),
        ("ts", "1e3"),
        ("ts", None),
        ("ts", 1e30),
        ("dur", -5),
        ("dur", math.inf),
        ("args", [1, 2]),
        ("tid", "GPU thread"),
        ("pid", [1]),
    ],
)
def test_a_bad_field_names_the_file_the_record_and_the_field(tmp_path, field, value):
    path, index = write_with(tmp_path, field, value)
    with pytest.raises(TraceError) as info:
        PlacementTrace.from_chrome_trace(path)
    message = str(info.value)
    assert str(path) in message and f"record {index}" in message and f"{field}=" in message


def test_float_times_are_microseconds_like_ints(tmp_path):
    path, _ = write_with(tmp_path, "ts", 12.75)
    trace = PlacementTrace.from_chrome_trace(path)
    assert len(trace.ops) == len(PlacementTrace.from_chrome_trace(RIPTIDE).ops)


def test_gzipped_chrome_trace_loads_like_the_plain_one(tmp_path):
    path = tmp_path / "TIMELINE.JSON.GZ"
    path.write_bytes(gzip.compress(RIPTIDE.read_bytes()))
    assert trace_format(path) == "chrome"
    loaded = PlacementTrace.from_chrome_trace(path)
    plain = PlacementTrace.from_chrome_trace(RIPTIDE)
    assert loaded.ops.equals(plain.ops) and loaded.events.equals(plain.events)


@pytest.fixture(scope="module")
def run_metadata(tf):
    """A real FULL_TRACE RunMetadata of a two-op graph."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        c = tf.add(tf.ones((4,), name="A"), 1.0, name="C")
    options = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE, output_partition_graphs=True)
    metadata = v1.RunMetadata()
    with v1.Session(graph=graph) as session:
        session.run(c, options=options, run_metadata=metadata)
    return metadata


def test_gzipped_run_metadata_loads(tmp_path, run_metadata):
    path = tmp_path / "step.pb.gz"
    path.write_bytes(gzip.compress(run_metadata.SerializeToString()))
    loaded = PlacementTrace.from_run_metadata(path)
    direct = PlacementTrace.from_run_metadata(run_metadata)
    assert len(loaded.ops) >= 2 and loaded.ops.equals(direct.ops)


def test_truncated_gzip_is_a_clear_error(tmp_path):
    path = tmp_path / "cut.json.gz"
    path.write_bytes(gzip.compress(RIPTIDE.read_bytes())[:200])
    with pytest.raises(TraceError, match="gzip file that cannot be decompressed"):
        PlacementTrace.from_chrome_trace(path)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("a.json", "chrome"),
        ("A.JSON", "chrome"),
        ("a.json.gz", "chrome"),
        ("a.PBTXT", "text"),
        ("a.pbtxt.gz", "text"),
        ("a.pb", "binary"),
        ("a.pb.gz", "binary"),
        ("host.xplane.pb", "xspace"),
        ("HOST.XPLANE.PB.GZ", "xspace"),
    ],
)
def test_trace_format_by_suffix_in_any_case(name, kind):
    assert trace_format(name) == kind


def test_show_placement_opens_a_gzipped_upper_case_chrome_trace(tmp_path):
    from tfplace_widget import show_placement

    path = tmp_path / "TIMELINE.JSON.GZ"
    path.write_bytes(gzip.compress(RIPTIDE.read_bytes()))
    panel = show_placement(str(path))
    assert len(panel.trace.ops) == len(PlacementTrace.from_chrome_trace(RIPTIDE).ops)
    panel.close()


def test_transfer_sizes_in_words():
    import pandas as pd

    from tfplace_widget._analyses.summary import transfer_bytes_text

    def frame(sizes: list) -> pd.DataFrame:
        return pd.DataFrame({"bytes": pd.array(sizes, dtype="Int64")})

    assert transfer_bytes_text(frame([pd.NA, pd.NA])) == "sizes not recorded"
    assert transfer_bytes_text(frame([2048, pd.NA])).endswith("(1 of 2 sizes known)")
    assert "known" not in transfer_bytes_text(frame([2048, 1024]))
