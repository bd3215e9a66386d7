"""Opening a file from someone else (issue 21): bounded sizes, clear errors, nothing run.

Every file starts from a real trace: the vendored GPU trace KittiBox recorded with TensorFlow's
``timeline.py`` (saved as a ``.tfplace`` here, with its findings), or the seed experiment traced
in a Session (for the graph facts). Bombs (``bombs.py``) are a few MB on disk and valid all the
way down, so a reader without bounds would unpack them whole. Each bomb is opened in a child
process, which reports the outcome, the load's seconds and its peak RSS (``ru_maxrss``); its
address space is capped at 3 GiB, so that a reader without bounds fails there (MemoryError)
instead of taking the memory of the machine.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from bombs import GIB, MIB, Member, deflated, write_gzip, write_zip, zeros
from helpers import GPU_TRACES, tfplace_members

from tfplace_widget import PlacementTrace, TraceError, show_placement
from tfplace_widget._sources import limits
from tfplace_widget._tfplace_format import limits as archive_limits

# Processes, sockets, signals and files, not where TensorFlow puts an op: CI runs them once,
# with oneDNN's default (.ci/run's oneDNN-off run leaves out the lifecycle marker).
pytestmark = pytest.mark.lifecycle

KITTIBOX = GPU_TRACES / "kittibox" / "timeline_01.json"
CPU_01 = "ikhlestov-tensorflow-profiling/CPU_timeline_01.json"
# Generous for a loaded 2-core CI machine: the refusals take well under a second here.
SECONDS = 20
# What a refusal may take: one member up to the limit (a bomb whose size is only found by
# unpacking it), and room for the reader's own work; an unbounded reader takes gigabytes.
PEAK_MB = limits.MAX_MEMBER_BYTES / MIB + 200

CHILD = r"""
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from tfplace_widget import PlacementTrace, TraceError
if sys.argv[1] == "from_run_metadata":  # it imports TensorFlow first: not the load's memory
    from tfplace_widget._tfadapter.capture import import_tensorflow
    import_tensorflow()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
try:
    getattr(PlacementTrace, sys.argv[1])(sys.argv[2])
    outcome, message = "loaded", ""
except TraceError as exc:
    outcome, message = "TraceError", str(exc)
except BaseException as exc:
    outcome, message = type(exc).__name__, str(exc)[:300]
seconds = time.perf_counter() - start
peak_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(json.dumps(dict(outcome=outcome, message=message, seconds=seconds, peak_mb=peak_mb)))
"""


def open_in_child(reader: str, path: Path | str) -> dict[str, Any]:
    """``PlacementTrace.<reader>(path)`` in a fresh interpreter: what it reports."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, reader, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=Path(path).parent,  # not the checkout: the package imported as installed
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def assert_refused(report: dict[str, Any], *named: str) -> None:
    """Refused with a TraceError naming each of ``named``, quickly and without the memory."""
    assert report["outcome"] == "TraceError", report
    for text in named:
        assert text in report["message"], (text, report["message"])
    assert report["seconds"] < SECONDS, report
    assert report["peak_mb"] < PEAK_MB, report


# -- a real trace to start from -------------------------------------------------------------
@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """KittiBox (a real GPU trace) saved as a .tfplace, with its findings (every one: each
    takes under 1% of its step, so none is material)."""
    trace = PlacementTrace.from_chrome_trace(KITTIBOX)
    trace.__dict__["_findings_cache"] = trace.all_findings
    assert len(trace.findings)  # computed, so saved too
    return Path(trace.save(tmp_path_factory.mktemp("saved") / "kittibox.tfplace"))


def members_of(path: Path) -> dict[str, bytes]:
    """The file's members, its frames as JSON documents with their values inline (as format
    version 1 wrote them and version 2 reads them), for a test to change a value."""
    return tfplace_members(path)


def with_members(saved: Path, target: Path, change: dict[str, Any]) -> Path:
    """``saved`` written again with ``change`` (name -> bytes, a JSON value, or None to drop)."""
    members = members_of(saved)
    for name, value in change.items():
        if value is None:
            members.pop(name, None)
        else:
            members[name] = value if isinstance(value, bytes) else json.dumps(value).encode()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return target


def bomb_archive(saved: Path, target: Path, bombs: list[Member]) -> Path:
    """``saved``'s members, those named by ``bombs`` replaced and the others added."""
    bombed = {member.name for member in bombs}
    kept = [Member(n, deflated((d, 1))) for n, d in members_of(saved).items() if n not in bombed]
    return write_zip(target, kept + bombs)


# -- 2. decompression bombs -------------------------------------------------------------------
def test_a_tfplace_whose_log_inflates_to_3_gib_is_refused(saved, tmp_path):
    path = bomb_archive(saved, tmp_path / "log.tfplace", [Member("log.txt", zeros(3 * GIB))])
    assert path.stat().st_size < 4 * MIB
    assert_refused(open_in_child("load", path), "log.txt", "256 MiB", "MAX_MEMBER_BYTES")


def test_eight_raw_members_of_1_gib_are_refused(saved, tmp_path):
    bombs = [Member(f"raw/run_metadata_{k}.pb", zeros(GIB)) for k in range(8)]
    path = bomb_archive(saved, tmp_path / "raw.tfplace", bombs)
    assert path.stat().st_size < 10 * MIB
    assert_refused(open_in_child("load", path), "raw/run_metadata_0.pb", "256 MiB")


def test_members_within_the_limit_one_by_one_but_not_together(saved, tmp_path):
    size = limits.MAX_MEMBER_BYTES - MIB
    count = archive_limits.MAX_ARCHIVE_BYTES // size + 1
    bombs = [Member(f"raw/step_{k}.pb", zeros(size)) for k in range(count)]
    path = bomb_archive(saved, tmp_path / "total.tfplace", bombs)
    assert_refused(open_in_child("load", path), f"raw/step_{count - 1}.pb", "1 GiB")


def test_a_member_that_claims_less_than_it_holds_is_read_no_further(saved, tmp_path):
    """The headers say 1 MiB, the stream holds 3 GiB: only the bytes really unpacked count."""
    bomb = Member("log.txt", zeros(3 * GIB), claimed_size=MIB)
    path = bomb_archive(saved, tmp_path / "lies.tfplace", [bomb])
    assert_refused(open_in_child("load", path), "log.txt")


@pytest.mark.parametrize(
    ("size", "blank"),
    [(4_000_000_000, 1_000_000), (4 * GIB, MIB)],  # the trailer says 4 GB; 0 (modulo 2**32)
    ids=["length-in-trailer", "length-wrapped-to-0"],
)
def test_a_gzipped_chrome_trace_inflating_to_4_gb_is_refused(tmp_path, size, blank):
    packed = deflated((b'{"traceEvents": [', 1), (b" " * blank, size // blank), (b"]}", 1))
    path = write_gzip(tmp_path / "timeline.json.gz", packed)
    assert path.stat().st_size < 5 * MIB
    assert_refused(open_in_child("from_chrome_trace", path), "timeline.json.gz", "256 MiB")


def test_a_gzipped_run_metadata_bomb_is_refused(tmp_path):
    """4 GiB of empty partition graphs (field 3, length 0): a valid RunMetadata."""
    path = write_gzip(tmp_path / "step.pb.gz", deflated((b"\x1a\x00" * (MIB // 2), 4096)))
    assert_refused(open_in_child("from_run_metadata", path), "step.pb.gz", "256 MiB")


def test_an_xspace_past_the_limit_is_refused_unread(tmp_path):
    path = tmp_path / "host.xplane.pb"
    with open(path, "wb") as handle:
        handle.truncate(limits.MAX_MEMBER_BYTES + MIB)  # on disk: a few blocks
    assert_refused(open_in_child("from_xspace", path), "host.xplane.pb", "256 MiB")


def test_a_file_that_is_not_an_xspace_is_a_trace_error_naming_it(tmp_path):
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(b"\xff" * 64)
    with pytest.raises(TraceError, match=r"host\.xplane\.pb.*not an XSpace.*tf\.profiler"):
        PlacementTrace.from_xspace(path)


@pytest.mark.parametrize("where", ["sparse file", "/dev/zero"])
def test_a_file_past_the_limit_is_refused_unread(tmp_path, where):
    if where == "sparse file":
        path = tmp_path / "huge.pb"
        with open(path, "wb") as handle:
            handle.truncate(limits.MAX_MEMBER_BYTES + MIB)  # on disk: a few blocks
    else:
        path = Path(where)
        if not path.exists():
            pytest.skip("no /dev/zero here")
    assert_refused(open_in_child("from_run_metadata", path), str(path), "256 MiB")


@pytest.mark.parametrize("count", [archive_limits.MAX_MEMBERS + 1, 120_000])
def test_an_archive_with_too_many_members_is_refused(saved, tmp_path, count):
    """Past MAX_MEMBERS, refused after the directory is read, or (past a directory that many
    members would fill) before zipfile parses it."""
    extra = [Member(f"x{k}") for k in range(count)]
    path = bomb_archive(saved, tmp_path / "many.tfplace", extra)
    assert_refused(open_in_child("load", path), "MAX_MEMBERS")


def test_the_limits_are_read_when_a_file_is_opened(saved, monkeypatch):
    sizes = {name: len(data) for name, data in tfplace_members(saved, False).items()}
    limit = sizes["tfplace.json"]  # the manifest passes, the ops' document does not
    assert sizes["frames/ops.json"] > limit
    monkeypatch.setattr(limits, "MAX_MEMBER_BYTES", limit)
    said = rf"frames/ops.json would unpack to more than {re.escape(limits.size_text(limit))}"
    with pytest.raises(TraceError, match=said):
        PlacementTrace.load(saved)
    monkeypatch.undo()
    assert len(PlacementTrace.load(saved).ops)


# -- 5. deeply nested JSON --------------------------------------------------------------------
DEEP = b"[" * 100_000 + b"]" * 100_000
# Lists 900 deep (shallow enough for Python's parser), side by side: one comma per 900 lists.
NESTED_LISTS = b"[" * 900 + b"]" * 900


def nested_lists(size: int) -> Any:
    """A JSON list of ``NESTED_LISTS`` unpacking to about ``size`` bytes, deflated."""
    block = (NESTED_LISTS + b",") * 100
    return deflated((b"[", 1), (block, size // len(block)), (NESTED_LISTS + b"]", 1))


def test_a_tfplace_of_nested_lists_is_refused_before_parsing(saved, tmp_path):
    """160 MB of ``[[[...]]]`` (in a file of a few hundred KiB) has 89,000 commas but 80
    million lists: gigabytes once parsed. Every list counts against ``MAX_JSON_VALUES``."""
    bomb = Member("frames/ops.json", nested_lists(160 * MIB))
    path = bomb_archive(saved, tmp_path / "nested.tfplace", [bomb])
    assert path.stat().st_size < MIB
    assert_refused(open_in_child("load", path), "frames/ops.json", "MAX_JSON_VALUES")


def test_a_gzipped_chrome_trace_of_nested_lists_is_refused_before_parsing(tmp_path):
    path = write_gzip(tmp_path / "nested.json.gz", nested_lists(160 * MIB))
    assert path.stat().st_size < MIB
    assert_refused(open_in_child("from_chrome_trace", path), "nested.json.gz", "MAX_JSON_VALUES")


@pytest.mark.parametrize(
    "member",
    ["tfplace.json", "frames/ops.json", "frames/findings.json", "inputs.json", "facts.json"],
)
def test_deeply_nested_json_in_a_member_is_a_trace_error_naming_it(saved, tmp_path, member):
    document = DEEP
    if member == "tfplace.json":  # nested under a key a reader ignores
        manifest = json.loads(members_of(saved)[member])
        document = json.dumps(manifest)[:-1].encode() + b', "later": ' + DEEP + b"}"
    path = with_members(saved, tmp_path / "deep.tfplace", {member: document})
    with pytest.raises(TraceError, match=rf"deep.tfplace.*{member}.*nests .* deeper"):
        PlacementTrace.load(path)


@pytest.mark.parametrize("name", ["deep.json", "deep.json.gz"])
def test_a_deeply_nested_chrome_trace_is_a_trace_error(tmp_path, name):
    import gzip

    path = tmp_path / name
    path.write_bytes(gzip.compress(DEEP) if name.endswith(".gz") else DEEP)
    with pytest.raises(TraceError, match=rf"{name}.*nests .* deeper"):
        PlacementTrace.from_chrome_trace(path)


def test_a_nested_value_where_a_chrome_record_names_its_op_is_refused(tmp_path):
    document = json.loads(KITTIBOX.read_text())
    events = document["traceEvents"] if isinstance(document, dict) else document
    index = next(i for i, e in enumerate(events) if e.get("ph") == "X")
    events[index]["args"]["name"] = json.loads(b"[" * 500 + b"]" * 500)
    path = tmp_path / "nested.json"
    path.write_text(json.dumps(document))
    with pytest.raises(TraceError, match=rf"record {index} of traceEvents has args.name=\[\["):
        PlacementTrace.from_chrome_trace(path)


# -- 7. frames that would load but break later ------------------------------------------------
def frame_document(saved: Path, name: str) -> dict:
    return json.loads(members_of(saved)[f"frames/{name}.json"])


def column(document: dict, name: str) -> dict:
    return next(c for c in document["columns"] if c["name"] == name)


def _without(document: dict, name: str) -> None:
    document["columns"].remove(column(document, name))


def _dicts(document: dict, name: str) -> None:
    spec = column(document, name)
    spec.update(dtype="object", values=[{"op": v} for v in spec["values"]])
    spec.pop("storage", None), spec.pop("na", None)


def _strings(document: dict, name: str) -> None:
    spec = column(document, name)
    spec.update(dtype="object", values=[str(v) for v in spec["values"]])


def _floats(document: dict, name: str) -> None:
    spec = column(document, name)
    spec.update(dtype="float64", values=[None] + spec["values"][1:])


def _categories(document: dict, name: str) -> None:
    column(document, name)["categories"]["values"][0] = "forced"


def _missing_text(document: dict, name: str) -> None:
    spec = column(document, name)
    spec["values"][0] = None


def _dtype(document: dict, name: str) -> None:
    column(document, name)["dtype"] = "complex128"


def _extra_column_of_dicts(document: dict, name: str) -> None:
    rows = document["rows"]
    document["columns"].append({"name": name, "dtype": "object", "values": [{}] * rows})


def _most_negative(document: dict, name: str) -> None:
    column(document, name)["values"][0] = -(2**63)


def _no_category(document: dict, name: str) -> None:
    column(document, name)["values"][0] = -1  # a category's code for "missing"


def _negative(document: dict, name: str) -> None:
    column(document, name)["values"][0] = -5


def _index(document: dict, name: str) -> None:
    start, stop, step = document["index"]["range"]
    document["index"]["range"] = [start + 5, stop + 5, step]


@pytest.mark.parametrize(
    ("frame", "name", "change", "said"),
    [
        ("ops", "device", _without, "it has no 'device' column"),
        ("ops", "op", _dicts, "column 'op' must hold text (strings), not a dict"),
        ("ops", "start_us", _strings, "column 'start_us' must hold numbers, not strings"),
        ("ops", "device", _missing_text, "column 'device' must hold text"),
        ("ops", "how", _categories, "column 'how' must be a category of explicit"),
        ("ops", "runs", _dtype, "column 'runs' has an unknown dtype 'complex128'"),
        ("events", "thread", _floats, "column 'thread' must hold whole numbers"),
        ("events", "label", _dicts, "column 'label' must hold text (strings), not a dict"),
        ("events", "lane", _index, "rows are not numbered 0, 1, 2"),
        ("transfers", "bytes", _strings, "column 'bytes' must hold whole numbers"),
        ("transfers", "notes", _extra_column_of_dicts, "column 'notes' holds a dict"),
        ("findings", "evidence", _strings, "column 'evidence' must hold objects of named"),
        # issue 31: loaded, then the Chrome export wrote a file its own reader refused
        ("events", "start_us", _most_negative, "column 'start_us' holds a time of 1e17"),
        ("events", "duration_us", _negative, "column 'duration_us' holds a negative duration"),
        ("ops", "duration_us", _negative, "column 'duration_us' holds a negative duration"),
        # found by tests/sources/test_fuzz_members.py: the Chrome export failed, or wrote a
        # file its reader refused
        ("events", "thread", _most_negative, "column 'thread' holds -2**63"),
        ("ops", "how", _no_category, "column 'how' has a missing value"),
    ],
)
def test_a_frame_the_trace_cannot_use_is_refused_naming_the_column(
    saved, tmp_path, frame, name, change, said
):
    document = frame_document(saved, frame)
    change(document, name)
    path = with_members(saved, tmp_path / "bad.tfplace", {f"frames/{frame}.json": document})
    with pytest.raises(TraceError, match=rf"bad.tfplace.*frames/{frame}.json.*{re.escape(said)}"):
        PlacementTrace.load(path)


@pytest.mark.parametrize("columns", [["op"], [None], [{"name": ["op"], "dtype": "object"}]])
def test_a_frame_document_of_the_wrong_shape_is_a_trace_error(saved, tmp_path, columns):
    document = {**frame_document(saved, "ops"), "columns": columns}
    path = with_members(saved, tmp_path / "shape.tfplace", {"frames/ops.json": document})
    with pytest.raises(TraceError, match=r"shape.tfplace.*frames/ops.json"):
        PlacementTrace.load(path)


def test_findings_of_an_unknown_kind_are_refused(saved, tmp_path):
    document = frame_document(saved, "findings")
    column(document, "kind")["values"][0] = "format_disk"
    path = with_members(saved, tmp_path / "kind.tfplace", {"frames/findings.json": document})
    with pytest.raises(TraceError, match=r"findings.json.*'kind' holds 'format_disk'"):
        PlacementTrace.load(path)


@pytest.mark.parametrize("change", [_without, _dicts])
def test_tfplace_show_and_show_placement_give_the_clear_error(saved, tmp_path, capsys, change):
    from tfplace_widget._cli import main

    document = frame_document(saved, "ops")
    change(document, "device")
    path = with_members(saved, tmp_path / "bad.tfplace", {"frames/ops.json": document})
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tfplace: error: ") and "frames/ops.json" in err and "'device'" in err
    with pytest.raises(TraceError, match=r"frames/ops.json.*'device'"):
        show_placement(path)


# -- 7. the graph facts and the manifest ------------------------------------------------------
@pytest.fixture(scope="module")
def saved_with_facts(seed_cpu: PlacementTrace, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(seed_cpu.save(tmp_path_factory.mktemp("facts") / "seed.tfplace"))


def _facts(document: dict, where: str) -> None:
    kernels = document["kernels"]
    if where == "gpu_host_inputs":
        row = kernels["fields"].index("gpu_host_inputs")
        kernels["table"][0][row] = [{"a": 1}]
    elif where == "attrs":
        row = kernels["fields"].index("attrs")
        kernels["table"][0][row] = "T"  # no "=": KernelFacts.dtypes would fail on it
    elif where == "fields":
        kernels["fields"][0] = "__class__"
    elif where == "of":
        op = next(iter(kernels["of"]))
        kernels["of"][op] = len(kernels["table"]) + 3
    elif where == "of as a list":
        kernels["of"] = list(kernels["of"])
    elif where == "types":
        op = next(iter(document["types"]))
        document["types"][op] = ["Const"]
    elif where == "inputs":
        op = next(iter(document["inputs"]))
        document["inputs"][op] = [["deep"]]


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("gpu_host_inputs", "gpu_host_inputs is \\[\\{'a': 1\\}\\], not a list of argument"),
        ("attrs", "attrs is 'T', not name=value pairs"),
        ("fields", "has the fields \\['__class__'"),
        ("of", "'kernels'.*not a row"),
        ("of as a list", "'kernels' has no table of rows and ops"),
        ("types", "'types'.*is \\['Const'\\], not text"),
        ("inputs", "'inputs'.*not a list of names"),
    ],
)
def test_graph_facts_of_the_wrong_kind_are_refused(saved_with_facts, tmp_path, where, said):
    document = json.loads(members_of(saved_with_facts)["facts.json"])
    _facts(document, where)
    path = with_members(saved_with_facts, tmp_path / "facts.tfplace", {"facts.json": document})
    with pytest.raises(TraceError, match=rf"facts.tfplace.*facts.json.*{said}"):
        PlacementTrace.load(path)


def test_the_host_plane_is_a_device_only_of_a_trace_without_its_graph(
    saved, saved_with_facts, tmp_path
):
    """``/host:CPU`` (a TF2 profile's host ops, read without a graph) loads; with graph facts,
    whose placer replay needs every device's full name, it is a damaged file."""
    for source, name in ((saved, "no_facts.tfplace"), (saved_with_facts, "facts.tfplace")):
        manifest = json.loads(members_of(source)["tfplace.json"])
        manifest["trace"]["devices"].append("/host:CPU")
        path = with_members(source, tmp_path / name, {"tfplace.json": manifest})
        if source is saved:
            assert "/host:CPU" in PlacementTrace.load(path).devices
        else:
            with pytest.raises(TraceError, match=r"devices has '/host:CPU' in a trace with graph"):
                PlacementTrace.load(path)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("notes", [["nested"]]),
        ("devices", [{"name": "CPU:0"}]),
        ("mode", None),
        ("devices", ["garbage"]),  # predict_placement would fail on it
        ("devices", ["/job:<img src=x onerror=alert(1)>/replica:0/task:0/device:CPU:0"]),
    ],
)
def test_a_manifest_field_of_the_wrong_kind_is_refused(saved, tmp_path, key, value):
    manifest = json.loads(members_of(saved)["tfplace.json"])
    manifest["trace"][key] = value
    path = with_members(saved, tmp_path / "manifest.tfplace", {"tfplace.json": manifest})
    with pytest.raises(TraceError, match=rf"manifest.tfplace.*tfplace.json: {key} (is|has)"):
        PlacementTrace.load(path)


# -- other risks: paths, links, pickles -------------------------------------------------------
class _Marker:
    """Unpickled, it would create a file: proof that something was unpickled."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return (open, (str(self.path), "w"))


def test_member_names_are_never_paths_and_nothing_is_extracted(saved, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    outside = tmp_path / "outside.txt"
    path = tmp_path / "paths.tfplace"
    with_members(saved, path, {})
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("../outside.txt", b"escaped")
        archive.writestr(str(outside), b"absolute")
        archive.writestr("raw/../../outside.txt", b"escaped")
        archive.writestr("raw/.hidden", b"hidden")
        link = zipfile.ZipInfo("raw/link")
        link.create_system = 3  # unix
        link.external_attr = 0o120777 << 16  # a symbolic link to /etc/passwd
        archive.writestr(link, b"/etc/passwd")
    before = sorted(tmp_path.rglob("*"))
    trace = PlacementTrace.load(path)
    assert sorted(tmp_path.rglob("*")) == before and not outside.exists()
    assert trace.raw == {"link": b"/etc/passwd"}  # the link's text, never what it points to


def test_a_pickle_in_a_member_is_never_unpickled(saved, tmp_path):
    marker = tmp_path / "unpickled"
    payload = pickle.dumps(_Marker(marker))
    path = with_members(saved, tmp_path / "pickle.tfplace", {"raw/payload.pkl": payload})
    assert PlacementTrace.load(path).raw["payload.pkl"] == payload
    for member in ("frames/ops.json", "facts.json", "inputs.json"):
        path = with_members(saved, tmp_path / "pickle.tfplace", {member: payload})
        with pytest.raises(TraceError, match=member):
            PlacementTrace.load(path)
    assert not marker.exists()
    assert os.listdir(tmp_path) == ["pickle.tfplace"]


# -- what is saved opens again ----------------------------------------------------------------
def test_a_trace_past_the_limits_is_not_saved(monkeypatch, tmp_path):
    trace = PlacementTrace.from_chrome_trace(KITTIBOX)
    monkeypatch.setattr(limits, "MAX_JSON_VALUES", 1000)
    path = tmp_path / "big.tfplace"
    with pytest.raises(ValueError, match=r"Cannot save .*big.tfplace.*MAX_JSON_VALUES"):
        trace.save(path)
    assert not path.exists()


def test_raw_keeps_no_step_larger_than_a_member_may_be(seed_cpu_steps3, tf, monkeypatch):
    from tfplace_widget._sources.raw import raw_protos

    metadata = tf.compat.v1.RunMetadata()
    metadata.ParseFromString(seed_cpu_steps3.raw["run_metadata_0.pb"])
    monkeypatch.setattr(limits, "MAX_MEMBER_BYTES", metadata.ByteSize() - 1)
    raw, line = raw_protos([metadata])
    assert raw == {} and "first 0 of 1 steps" in line and "MAX_MEMBER_BYTES" in line


# -- devices -----------------------------------------------------------------------------------
@pytest.mark.parametrize("frame", ["ops", "events"])
def test_a_device_the_manifest_does_not_list_is_refused(saved, tmp_path, frame):
    """Issue 31: the panel has a chip, a summary and a colour for each device of the manifest;
    an op or event on another one (thousands of them in a crafted file) is a damaged file."""
    document = frame_document(saved, frame)
    column(document, "device")["values"][0] = "/job:localhost/replica:0/task:0/device:CPU:7"
    path = with_members(saved, tmp_path / "devices.tfplace", {f"frames/{frame}.json": document})
    with pytest.raises(
        TraceError,
        match=rf"devices.tfplace.*frames/{frame}.json: device '/job:localhost/replica:0/task:0/"
        r"device:CPU:7' is not one of the 2 devices of tfplace.json",
    ):
        PlacementTrace.load(path)


# -- text no UTF-8 can hold --------------------------------------------------------------------
def test_a_lone_surrogate_in_a_name_is_refused_on_load(saved, tmp_path):
    """Issue 31: an op named ``"\\ud800"`` loaded, then ``tfplace show``, ``to_html``,
    ``to_csv`` and the kernel's display failed with a bare ``UnicodeEncodeError``."""
    document = frame_document(saved, "ops")
    column(document, "op")["values"][0] = "\ud800"
    path = with_members(saved, tmp_path / "surrogate.tfplace", {"frames/ops.json": document})
    with pytest.raises(TraceError, match=r"surrogate.tfplace.*frames/ops.json.*lone surrogate"):
        PlacementTrace.load(path)


@pytest.mark.parametrize("written", [b'"\\udc00x"', b'"x\xed\xa0\x80"'], ids=["escape", "bytes"])
def test_a_chrome_trace_with_a_lone_surrogate_is_refused(tmp_path, written):
    text = KITTIBOX.read_bytes()
    path = tmp_path / "surrogate.json"
    path.write_bytes(text.replace(b'"MatMul"', written, 1))
    assert path.read_bytes() != text
    with pytest.raises(TraceError, match=r"surrogate.json.*the Chrome trace.*lone surrogate"):
        PlacementTrace.from_chrome_trace(path)


def test_an_emoji_written_as_a_surrogate_pair_loads(tmp_path):
    text = KITTIBOX.read_bytes()
    path = tmp_path / "emoji.json"
    path.write_bytes(text.replace(b'"MatMul"', b'"MatMul\\ud83d\\ude00"'))
    ops = PlacementTrace.from_chrome_trace(path).ops
    assert "MatMul\U0001f600" in {*ops["op"], *ops["type"]}


def test_a_log_past_the_member_limit_is_cut_and_the_trace_saved(saved, tmp_path, monkeypatch):
    """Issue 31: ``tfplace run`` of a program that printed ~600 MB lost its trace ("log.txt
    would take more than 256 MiB"); here with the limit at 1 MiB and a 3 MB log."""
    monkeypatch.setattr(limits, "MAX_MEMBER_BYTES", MIB)
    trace = PlacementTrace.load(saved)
    trace.log = "first line\n" + "é" * 3_000_000 + "\nlast line"
    path = trace.save(tmp_path / "chatty.tfplace")
    log = PlacementTrace.load(path).log
    assert log.startswith("first line\n") and log.endswith("\nlast line")
    assert "characters of this log were cut here when the trace was saved" in log
    assert f"trace.log held {len(trace.log):,}" in log


def test_a_truncated_gzip_is_called_truncated_not_a_bomb(tmp_path):
    """Issue 31: a 300-byte truncated ``.json.gz`` was called a possible decompression bomb
    (the last 4 bytes, read as the trailer's length, were from the middle of the stream)."""
    import gzip
    import random

    events = [
        {"ph": "X", "name": f"op{i}", "ts": i, "dur": 1, "pid": 1, "tid": 1} for i in range(3000)
    ]
    packed = gzip.compress(json.dumps({"traceEvents": events}).encode())
    for size in [300, *random.Random(31).sample(range(20, len(packed) - 8), 20)]:
        path = tmp_path / "cut.json.gz"
        path.write_bytes(packed[:size])
        with pytest.raises(TraceError) as caught:
            PlacementTrace.from_chrome_trace(path)
        message = str(caught.value)
        assert "cannot be decompressed (it may be truncated)" in message, (size, message)
        assert "bomb" not in message


def test_an_empty_transfers_frame_of_any_dtype_compares(tmp_path):
    """Issue 31: an empty ``transfers`` frame whose ``src_device`` was ``float64`` loaded (an
    empty column may have any dtype), then ``compare()`` failed inside pandas."""
    from tfplace_widget import compare

    original = PlacementTrace.from_chrome_trace(GPU_TRACES / CPU_01)
    saved = Path(original.save(tmp_path / "cpu.tfplace"))
    document = frame_document(saved, "transfers")
    document.update(rows=0, index={"range": [0, 0, 1]})
    for spec in document["columns"]:
        spec["values"] = []
    column(document, "src_device")["dtype"] = "float64"
    path = with_members(saved, tmp_path / "empty.tfplace", {"frames/transfers.json": document})
    loaded = PlacementTrace.load(path)
    diff = compare(loaded, original)  # a pandas ValueError on main
    assert loaded.transfers.empty and loaded.transfers["src_device"].dtype == object
    assert diff.transfers.empty and set(diff.ops["status"]) == {"same"}
