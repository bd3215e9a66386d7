"""``.tfplace`` format version 2 (issue 35): frames as typed arrays and dictionary-encoded text.

Every dtype a frame may hold comes back exactly (missing values of each kind, empty frames,
unicode text); a file written by format version 1 (``data/kittibox_format1.tfplace``, saved by
tfplace_widget at commit 69987f8 from the vendored KittiBox trace) still loads, with the frames
of the trace made now; a trace whose JSON frames would pass the member limit saves and opens
under the same limit; an array member that lies about its length, type, codes or size is
refused naming it. No TensorFlow: the traces are the vendored GPU traces. The cost at 10k, 100k
and 1M ops is measured in ``benchmarks/save_load.py``, not here.
"""

from __future__ import annotations

import json
import math
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from helpers import GPU_TRACES, tfplace_members

from tfplace_widget import PlacementTrace, TraceError
from tfplace_widget._sources import limits
from tfplace_widget._tfplace_format import limits as archive_limits
from tfplace_widget._tfplace_format.frame_arrays import (
    ArrayReader,
    frame_from_members,
    frame_to_members,
    from_planes,
    to_planes,
)
from tfplace_widget._tfplace_format.frame_json import frame_to_json
from tfplace_widget._tfplace_format.layout import FORMAT_VERSION, MANIFEST

KITTIBOX = GPU_TRACES / "kittibox" / "timeline_01.json"
FORMAT_1 = Path(__file__).parent / "data" / "kittibox_format1.tfplace"
FRAMES = ("ops", "events", "transfers")


def every_dtype(rows: int = 4) -> pd.DataFrame:
    """A column of each dtype a frame may hold, with each kind of missing value."""
    frame = pd.DataFrame(
        {
            "text": pd.array(["a", None, "c", "a"], dtype=pd.StringDtype("python", np.nan)),
            "string": pd.array(["a", pd.NA, "é", "日本"], dtype="string"),
            "object": pd.Series(["x", None, math.nan, pd.NA], dtype=object),
            "unique": pd.Series(["c0/add1", "ü", "😀 emoji", ""], dtype=object),
            "na_object": pd.Series([pd.NA, [1, 2], {"k": 1.5}, None], dtype=object),
            "ints": np.array([1, -2, 2**62, -(2**63)], dtype=np.int64),
            "small": np.array([1, 2, 3, -128], dtype=np.int8),
            "unsigned": np.array([0, 1, 2**64 - 1, 7], dtype=np.uint64),
            "floats": [0.1, math.inf, math.nan, -0.0],
            "float32": np.array([0.5, -1, math.nan, 3e38], dtype=np.float32),
            "nullable": pd.array([1, None, 3, -(2**63)], dtype="Int64"),
            "nullable_small": pd.array([1, None, 3, 4], dtype="UInt8"),
            "nullable_float": pd.array([0.5, None, -math.inf, 1e-300], dtype="Float64"),
            "flags": [True, False, True, True],
            "maybe": pd.array([True, None, False, None], dtype="boolean"),
            "level": pd.Categorical(["b", None, "a", "b"], categories=["b", "a"], ordered=True),
        }
    )
    return frame.iloc[:rows].reset_index(drop=True) if rows < 4 else frame


def in_memory(members: dict[str, bytes], frame: str = "ops", cells: list | None = None) -> Any:
    """An ``ArrayReader`` of ``members`` (no file, no limits but the cells counted)."""
    count = cells if cells is not None else []
    return ArrayReader(
        frame,
        members.__getitem__,
        lambda name: json.loads(members[name]),
        lambda n, what: count.append(n),
    )


def strings_of(members: dict[str, bytes], data: dict) -> list[str]:
    """The distinct strings of a text column (or of the maps): joined by NUL, or JSON."""
    if "split" in data:
        text = members[data["strings"]].decode()
        return text.split("\0") if data["count"] else []
    return json.loads(members[data["strings"]])


def assert_same(back: pd.DataFrame, frame: pd.DataFrame) -> None:
    assert list(back.dtypes.astype(str)) == list(frame.dtypes.astype(str))
    pd.testing.assert_frame_equal(back, frame, check_exact=True)


# -- every dtype, exactly ---------------------------------------------------------------------
@pytest.mark.parametrize("rows", [4, 1, 0], ids=["rows", "one row", "empty"])
def test_every_dtype_and_missing_kind_round_trips_through_typed_arrays(rows):
    frame = every_dtype(rows)
    document, members, cells = frame_to_members(frame, "ops", "frame")
    text = json.dumps(document, allow_nan=False)  # strict JSON, arrays aside
    counted: list[int] = []
    back = frame_from_members(json.loads(text), in_memory(members, cells=counted))
    assert_same(back, frame)
    if rows == 4:
        assert back["object"].iloc[1] is None and math.isnan(back["object"].iloc[2])
        assert back["object"].iloc[3] is pd.NA and back["na_object"].iloc[0] is pd.NA
        assert math.copysign(1, back["floats"].iloc[3]) == -1  # -0.0 kept
    # only other objects stay JSON; every other column is an array member
    inline = [c["name"] for c in document["columns"] if "data" not in c]
    assert inline == (["na_object"] if rows > 1 else [])  # [pd.NA] alone is missing text
    unique = next(c for c in document["columns"] if c["name"] == "unique")
    assert "array" not in unique["data"] or rows == 0  # each row its own string: no codes
    assert sum(counted) == cells  # the rows and the strings, as the writer counted them


def test_a_large_column_of_names_is_written_a_string_per_row_and_comes_back_exactly():
    """Op names at scale (a few repeated, as ``_SOURCE`` is once per device) are written row by
    row, with no codes; a column with a name missing, or of few values, keeps its codes."""
    rows = 1 << 17
    names = [f"c{i // 7}/add{i % 7}" for i in range(rows)]
    names[5] = names[9] = "_SOURCE"
    frame = pd.DataFrame(
        {
            "op": pd.Series(names, dtype=object),
            "label": pd.array(names, dtype=pd.StringDtype("python", np.nan)),
            "missing": pd.Series([*names[:-1], None], dtype=object),
            "type": pd.Series(["MatMul", "AddV2"] * (rows // 2), dtype=object),
        }
    )
    document, members, cells = frame_to_members(frame, "ops", "trace.ops")
    data = {c["name"]: c["data"] for c in document["columns"]}
    assert "array" not in data["op"] and "array" not in data["label"]
    assert "array" in data["missing"] and "array" in data["type"]
    counted: list[int] = []
    back = frame_from_members(json.loads(json.dumps(document)), in_memory(members, cells=counted))
    assert_same(back, frame)
    assert back["missing"].iloc[-1] is None
    assert sum(counted) == cells


def test_kernel_facts_are_stored_once_per_value_whether_ops_share_the_object_or_not():
    from tfplace_widget._model.graphfacts import GraphFacts
    from tfplace_widget._model.kernels import KernelFacts
    from tfplace_widget._tfplace_format.facts_json import facts_from_json, facts_to_json

    gpu, cpu = KernelFacts("CPU GPU", "yes", (1,), (), "T=int32"), KernelFacts("CPU", "no")
    kernels = {"a": gpu, "b": cpu, "c": gpu, "d": KernelFacts("CPU", "no")}
    kernels["e"] = KernelFacts("CPU GPU", "yes", (1,), (), "T=int32")  # equal to gpu, not it
    document = json.loads(json.dumps(facts_to_json(GraphFacts(kernels=kernels))))
    assert document["kernels"]["table"] == [
        ["CPU GPU", "yes", [1], [], "T=int32"],
        ["CPU", "no", [], [], ""],
    ]
    assert document["kernels"]["of"] == {"a": 0, "b": 1, "c": 0, "d": 1, "e": 0}
    assert facts_from_json(document).kernels == kernels
    assert facts_to_json(GraphFacts())["kernels"] == {
        "table": [],
        "fields": document["kernels"]["fields"],
        "of": {},
    }


def test_a_trace_round_trips_every_frame_with_findings(tmp_path):
    """KittiBox (a real GPU trace): its three frames and its findings (nested evidence, fix)
    come back exactly from typed arrays, in a file whose frames are array members."""
    trace = PlacementTrace.from_chrome_trace(KITTIBOX)
    trace.__dict__["_findings_cache"] = trace.all_findings
    loaded = PlacementTrace.load(trace.save(tmp_path / "k.tfplace"))
    for name in FRAMES:
        assert_same(getattr(loaded, name), getattr(trace, name))
    assert_same(loaded.findings, trace.findings)
    members = tfplace_members(tmp_path / "k.tfplace", frames_as_json=False)
    assert json.loads(members[MANIFEST])["version"] == FORMAT_VERSION == 3
    ops = json.loads(members["frames/ops.json"])
    assert all("data" in c and "values" not in c for c in ops["columns"])
    assert "frames/ops/0.strings" in members and "frames/events/4.values" in members


# -- older files, larger traces -----------------------------------------------------------------
def test_a_file_written_by_format_version_1_loads_as_the_trace_made_now():
    with zipfile.ZipFile(FORMAT_1) as archive:
        assert json.loads(archive.read(MANIFEST))["version"] == 1
        assert not any(n.startswith("frames/ops/") for n in archive.namelist())
    old, now = PlacementTrace.load(FORMAT_1), PlacementTrace.from_chrome_trace(KITTIBOX)
    for name in FRAMES:
        assert_same(getattr(old, name), getattr(now, name))
    assert old.devices == now.devices and old.findings["kind"].tolist() == (
        now.all_findings["kind"].tolist()
    )


def test_a_trace_whose_json_frames_pass_the_member_limit_saves_and_opens(tmp_path, monkeypatch):
    """Issue 35 at a small scale: with the member limit between the size of the version-1
    ``frames/ops.json`` and that of the largest member version 2 writes, the trace saves and
    opens again under that limit (on main: "Cannot save ... frames/ops.json would take more
    than ... MAX_MEMBER_BYTES")."""
    trace = PlacementTrace.from_chrome_trace(KITTIBOX)
    as_json = len(json.dumps(frame_to_json(trace.ops, "ops")))
    path = trace.save(tmp_path / "k.tfplace")
    largest = max(len(d) for d in tfplace_members(path, frames_as_json=False).values())
    assert largest < as_json // 2
    monkeypatch.setattr(limits, "MAX_MEMBER_BYTES", as_json // 2)
    loaded = PlacementTrace.load(trace.save(tmp_path / "again.tfplace"))
    assert_same(loaded.ops, trace.ops)


def test_raw_protos_past_the_limits_are_left_out_with_a_note_not_the_trace(tmp_path, monkeypatch):
    trace = PlacementTrace.from_chrome_trace(KITTIBOX)
    trace.raw = {"graph_def.pb": b"g" * 1000, "run_metadata_0.pb": b"r" * 300_000}
    monkeypatch.setattr(limits, "MAX_MEMBER_BYTES", 200_000)
    with pytest.warns(UserWarning, match=r"leaves out raw/run_metadata_0.pb \(0 MB\)"):
        path = trace.save(tmp_path / "k.tfplace")
    loaded = PlacementTrace.load(path)
    assert loaded.raw == {"graph_def.pb": b"g" * 1000}
    assert loaded.notes[-1].startswith("This file leaves out raw/run_metadata_0.pb")
    assert_same(loaded.ops, trace.ops)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # within the limits: nothing said, nothing left out
        monkeypatch.undo()
        assert PlacementTrace.load(trace.save(tmp_path / "all.tfplace")).raw == trace.raw


# -- hostile files ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    trace = PlacementTrace.from_chrome_trace(KITTIBOX)
    return Path(trace.save(tmp_path_factory.mktemp("v2") / "kittibox.tfplace"))


def changed(saved: Path, target: Path, change: dict[str, Any]) -> Path:
    """``saved`` with members replaced (bytes, or a JSON value) or dropped (None)."""
    members = tfplace_members(saved, frames_as_json=False)
    for name, value in change.items():
        if value is None:
            members.pop(name)
        else:
            members[name] = value if isinstance(value, bytes) else json.dumps(value).encode()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return target


def spec(saved: Path, frame: str, column: str) -> tuple[dict, dict]:
    """The document of ``frames/<frame>.json`` and the spec of its ``column`` in it."""
    document = json.loads(tfplace_members(saved, frames_as_json=False)[f"frames/{frame}.json"])
    return document, next(c for c in document["columns"] if c["name"] == column)


def member_of(saved: Path, name: str) -> bytes:
    return tfplace_members(saved, frames_as_json=False)[name]


def _short(saved: Path, document: dict, column: dict) -> dict:
    name = column["data"]["array"]
    return {name: member_of(saved, name)[:-8]}


def _long(saved: Path, document: dict, column: dict) -> dict:
    name = column["data"]["array"]
    return {name: member_of(saved, name) + b"\0" * 8}


def _codes(saved: Path, column: dict, rows: int, code: int) -> dict:
    """The column's codes (or a category's) with row 0's set to ``code``."""
    name, kind = column["data"]["array"], column["data"]["type"]
    codes = from_planes(member_of(saved, name), kind, rows)
    codes[0] = code
    return {name: to_planes(codes)}


def _code_past_the_strings(saved: Path, document: dict, column: dict) -> dict:
    if "strings" in column["data"]:
        count = len(strings_of(tfplace_members(saved, frames_as_json=False), column["data"]))
    else:  # a category's
        count = len(column["categories"]["values"])
    return _codes(saved, column, document["rows"], count)


def _code_below_missing(saved: Path, document: dict, column: dict) -> dict:
    return _codes(saved, column, document["rows"], -4)  # past -1: it would wrap around


def _type(kind: str) -> Any:
    def change(saved: Path, document: dict, column: dict) -> dict:
        column["data"]["type"] = kind
        return {}

    return change


def _dtype(saved: Path, document: dict, column: dict) -> dict:
    column["dtype"] = "complex128"
    return {}


def _flag(saved: Path, document: dict, column: dict) -> dict:
    name = column["data"]["array"]
    flags = bytearray(member_of(saved, name))  # one byte per row: no planes
    flags[0] = 7
    return {name: bytes(flags)}


def _member(target: str) -> Any:
    def change(saved: Path, document: dict, column: dict) -> dict:
        column["data"]["array"] = target
        return {}

    return change


def _strings_of_numbers(saved: Path, document: dict, column: dict) -> dict:
    column["data"].pop("split")  # a JSON list, as format version 2 wrote them
    return {column["data"]["strings"]: json.dumps([1, 2, 3]).encode()}


def _strings_counted(count: Any) -> Any:
    def change(saved: Path, document: dict, column: dict) -> dict:
        column["data"]["count"] = count
        return {}

    return change


def _strings_not_utf8(saved: Path, document: dict, column: dict) -> dict:
    return {column["data"]["strings"]: b"\xff\xfe" + member_of(saved, column["data"]["strings"])}


def _missing_member(saved: Path, document: dict, column: dict) -> dict:
    return {column["data"]["array"]: None}


@pytest.mark.parametrize(
    ("frame", "column", "change", "said"),
    [
        ("events", "start_us", _short, "frames/events/4.values holds 40,872 bytes, not the 40,880"),
        ("events", "start_us", _long, "holds 40,888 bytes, not the 40,880 of 5,110 rows of <i8"),
        ("events", "op", _code_past_the_strings, "column 'op' has the code"),
        ("ops", "type", _code_below_missing, "column 'type' has the code -4, outside -1.."),
        ("ops", "how", _code_past_the_strings, "column 'how' has the code 7, outside -1..6"),
        ("events", "start_us", _type("<f8"), "column 'start_us' is stored as '<f8', not as <i8"),
        ("events", "start_us", _type("|O"), "column 'start_us' is stored as '|O'"),
        ("events", "op", _type("<f8"), "column 'op' is stored as '<f8'"),
        ("events", "start_us", _dtype, "unknown dtype 'complex128'"),
        ("transfers", "cross_task", _flag, "column 'cross_task' holds a flag that is neither"),
        ("ops", "start_us", _member("raw/graph_def.pb"), "its array member is 'raw/graph_def.pb'"),
        ("ops", "start_us", _member("frames/ops/../x"), "not one of frames/ops/"),
        ("ops", "start_us", _member("frames/events/4.values"), "not one of frames/ops/"),
        ("ops", "op", _strings_of_numbers, "frames/ops/0.strings is not a list of strings"),
        ("ops", "op", _strings_counted(3), "frames/ops/0.strings holds 310 strings, not 3"),
        ("ops", "op", _strings_counted("3"), "frames/ops/0.strings has strings {"),
        ("ops", "op", _strings_not_utf8, "frames/ops/0.strings is not UTF-8 text"),
        ("ops", "duration_us", _missing_member, "it has no frames/ops/7.values"),
    ],
)
def test_an_array_member_that_lies_is_refused_naming_it(
    saved, tmp_path, frame, column, change, said
):
    document, target = spec(saved, frame, column)
    members = change(saved, document, target)
    members[f"frames/{frame}.json"] = document
    path = changed(saved, tmp_path / "bad.tfplace", members)
    with pytest.raises(TraceError, match=rf"bad.tfplace.*{re.escape(said)}") as caught:
        PlacementTrace.load(path)
    assert "damaged" in str(caught.value) or "cannot be" in str(caught.value)


def test_rows_past_the_cell_limit_are_refused_before_their_arrays_are_read(saved, tmp_path):
    """A document claiming a billion rows: refused on the first column (``MAX_CELLS``), before
    any member is unpacked or allocated."""
    document, _ = spec(saved, "ops", "op")
    document["rows"] = 10**9
    document["index"] = {"range": [0, 10**9, 1]}
    path = changed(saved, tmp_path / "rows.tfplace", {"frames/ops.json": document})
    with pytest.raises(
        TraceError, match=r"rows.tfplace.*frames/ops.json column 'op'.*64,000,000 cells"
    ):
        PlacementTrace.load(path)


def test_the_cell_limit_counts_every_frame_and_dictionary(saved, monkeypatch):
    """The cells of all frames and of the strings of text columns count together."""
    members = tfplace_members(saved, frames_as_json=False)
    rows = {f: json.loads(members[f"frames/{f}.json"])["rows"] for f in FRAMES}
    columns = {f: len(json.loads(members[f"frames/{f}.json"])["columns"]) for f in FRAMES}
    arrays = sum(rows[f] * columns[f] for f in FRAMES)
    monkeypatch.setattr(archive_limits, "MAX_CELLS", arrays)  # the strings push it over
    with pytest.raises(TraceError, match=r"kittibox.tfplace.*MAX_CELLS"):
        PlacementTrace.load(saved)
    monkeypatch.setattr(archive_limits, "MAX_CELLS", 2 * arrays)
    assert len(PlacementTrace.load(saved).ops) == rows["ops"]


def test_a_trace_past_the_cell_limit_is_not_saved(tmp_path, monkeypatch):
    trace = PlacementTrace.from_chrome_trace(KITTIBOX)
    monkeypatch.setattr(archive_limits, "MAX_CELLS", 1000)
    path = tmp_path / "big.tfplace"
    with pytest.raises(ValueError, match=r"Cannot save .*big.tfplace.*cells.*MAX_CELLS"):
        trace.save(path)
    assert not path.exists()


def test_an_array_bomb_is_refused_at_the_member_limit(saved, tmp_path):
    """A codes member that inflates to 3 GiB (a few MB on disk)."""
    from bombs import GIB, MIB, Member, deflated, write_zip, zeros

    members = tfplace_members(saved, frames_as_json=False)
    kept = [Member(n, deflated((d, 1))) for n, d in members.items() if n != "frames/ops/0.codes"]
    path = write_zip(
        tmp_path / "bomb.tfplace", [*kept, Member("frames/ops/0.codes", zeros(3 * GIB))]
    )
    assert path.stat().st_size < 4 * MIB
    with pytest.raises(TraceError, match=r"bomb.tfplace.*frames/ops/0.codes.*MAX_MEMBER_BYTES"):
        PlacementTrace.load(path)


def test_a_newer_format_is_refused_with_the_upgrade(saved, tmp_path, monkeypatch):
    """What a version-1 reader says of this version's files (its check, with its version)."""
    from tfplace_widget._tfplace_format import reader

    monkeypatch.setattr(reader, "FORMAT_VERSION", 1)
    with pytest.raises(TraceError, match=r"trace format 3.*reads formats up to 1.*pip install -U"):
        PlacementTrace.load(saved)


# -- format version 3: trace.inputs and the facts' per-op maps as arrays ---------------------------
# Saved by tfplace_widget at commit f659f38 (format version 2: inputs.json, facts.json as JSON
# objects) from the seed graph (tests/conftest.py ``inputs_cpu``, two CPUs, graph mode).
FORMAT_2 = Path(__file__).parent / "data" / "seed_format2.tfplace"


def test_a_file_written_by_format_version_2_loads_and_saves_as_version_3(tmp_path):
    with zipfile.ZipFile(FORMAT_2) as archive:
        assert json.loads(archive.read(MANIFEST))["version"] == 2
        assert {"inputs.json", "facts.json"} <= set(archive.namelist())
    old = PlacementTrace.load(FORMAT_2)
    assert old.inputs["C"] == ["A/_1", "B/_3"] and old.facts.types["C"] == "AddV2"
    path = old.save(tmp_path / "again.tfplace")
    members = tfplace_members(path, frames_as_json=False)
    assert json.loads(members[MANIFEST])["version"] == 3
    assert "maps.json" in members and "inputs.json" not in members
    assert set(json.loads(members["facts.json"])) == {"class", "kernels"}  # the rest: arrays
    new = PlacementTrace.load(path)
    for name in FRAMES:
        assert_same(getattr(new, name), getattr(old, name))
    assert new.inputs == old.inputs and new.facts == old.facts and new.raw == old.raw


@pytest.fixture(scope="module")
def with_facts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    trace = PlacementTrace.load(FORMAT_2)
    return Path(trace.save(tmp_path_factory.mktemp("v3") / "seed.tfplace"))


def _in_map(name: str, part: str, row: int, value: Any) -> Any:
    """Set row ``row`` of the ``part`` array of map ``name`` to ``value``."""

    def change(members: dict[str, bytes], maps: dict) -> dict:
        data = maps["maps"][name][part]
        rows = len(members[data["array"]]) // np.dtype(data["type"]).itemsize
        values = from_planes(members[data["array"]], data["type"], rows)
        values[row] = values[0] if value == "first" else value
        return {data["array"]: to_planes(values)}

    return change


def _map_spec(name: str, key: str, value: Any) -> Any:
    def change(members: dict[str, bytes], maps: dict) -> dict:
        maps["maps"][name][key] = value
        return {}

    return change


def _short_map(members: dict[str, bytes], maps: dict) -> dict:
    name = maps["maps"]["facts.types"]["values"]["array"]
    return {name: members[name][:-1]}


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_in_map("inputs", "keys", 0, 127), "map 'inputs' keys have the code 127, outside 0.."),
        (_in_map("facts.types", "values", 0, -1), "map 'facts.types' values have the code -1"),
        (_in_map("inputs", "keys", 1, "first"), "map 'inputs' has an op more than once"),
        (_in_map("inputs", "lengths", 0, -1), "map 'inputs' has a negative length"),
        (_in_map("facts.kernels.of", "values", 0, 99), "'kernels'.*not a row"),
        (_in_map("facts.kernels.of", "values", 0, -5), "map 'facts.kernels.of' holds a negative"),
        (_short_map, "holds 9 bytes, not the 10 of 10 rows of |i1"),
        (_map_spec("facts.types", "kind", "names"), "map 'facts.types' is .*not of kind 'text'"),
        (_map_spec("inputs", "keys", {"array": "raw/graph_def.pb", "type": "|i1"}), "not one of"),
        (_map_spec("inputs", "keys", {"array": "maps/0.keys"}), "maps.json: 'type'"),
        (_map_spec("inputs", "rows", 10**9), "maps.json map 'inputs'.*MAX_JSON_VALUES"),
        (_map_spec("inputs", "rows", "10"), "map 'inputs' has '10' rows"),
    ],
)
def test_a_map_array_that_lies_is_refused_naming_it(with_facts, tmp_path, change, said):
    members = tfplace_members(with_facts, frames_as_json=False)
    maps = json.loads(members["maps.json"])
    replaced = change(members, maps)
    path = changed(with_facts, tmp_path / "bad.tfplace", {**replaced, "maps.json": maps})
    with pytest.raises(TraceError, match=rf"bad.tfplace.*{said}"):
        PlacementTrace.load(path)
