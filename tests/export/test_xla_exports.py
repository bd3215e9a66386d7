"""The exports carry what XLA did (issue 23): ``to_frames``, CSV and Parquet write ``trace.xla``;
the Chrome trace has each executed HLO instruction as an event on its device's lane (args
``cluster``, ``kind``, ``tf_ops``, ``source``); the HTML report has the ``xla_op`` column and a
table of the instructions. All on the real XLA:CPU run of ``tests/tracing/test_xla.py``'s
``compiled`` fixture (a ``jit_compile=True`` matmul, add and reduction, two steps): every
expected name and time is read from that run's ``trace.xla``, none is written here.

TensorFlow 2.16's profile records no XLA instruction (``trace.xla`` is empty): these tests skip
there, saying so.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pandas.testing as pdt
import pytest
from test_html_report import column, page_data
from test_xla import compiled  # noqa: F401  (the fixture: one real XLA:CPU run)

from tfplace_widget import PlacementTrace
from tfplace_widget._export.html import XLA_COLUMN, report_data, xla_table
from tfplace_widget._model.columns import XLA_COLUMNS

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


@pytest.fixture
def xla_run(compiled):  # noqa: F811
    """The traced XLA run; skipped where this TensorFlow's profile records no instruction."""
    if compiled.xla.empty:
        pytest.skip("this TensorFlow's profile records no XLA instruction (2.16)")
    return compiled


def test_to_frames_holds_xla_as_a_copy(xla_run):
    frames = xla_run.to_frames()
    assert list(frames) == ["ops", "events", "transfers", "xla"]
    pdt.assert_frame_equal(frames["xla"], xla_run.xla)
    pdt.assert_frame_equal(frames["ops"], xla_run.ops)  # the xla_op column included
    assert frames["ops"]["xla_op"].notna().any()
    frames["xla"]["tf_ops"].iloc[0].append("changed")
    frames["xla"].loc[:, "cluster"] = "changed"
    assert "changed" not in xla_run.xla["tf_ops"].iloc[0]
    assert "changed" not in set(xla_run.xla["cluster"])


def test_a_trace_without_xla_keeps_its_three_frames(xla_run):
    plain = PlacementTrace(
        ops=xla_run.ops, events=xla_run.events, transfers=xla_run.transfers, devices=[CPU0]
    )
    assert plain.xla.empty and list(plain.to_frames()) == ["ops", "events", "transfers"]


def test_to_csv_writes_the_instructions(xla_run, tmp_path):
    paths = xla_run.to_csv(tmp_path / "csv")
    assert sorted(paths) == ["events", "ops", "transfers", "xla"]
    back = pd.read_csv(paths["xla"], keep_default_na=False, na_values=[""])
    xla = xla_run.xla
    assert list(back.columns) == XLA_COLUMNS
    assert back["instruction"].tolist() == xla["instruction"].tolist()
    assert back["kind"].tolist() == xla["kind"].tolist()
    assert back["start_us"].tolist() == xla["start_us"].tolist()
    assert back["duration_us"].tolist() == xla["duration_us"].tolist()
    split = [[] if pd.isna(v) else v.split(" ") for v in back["tf_ops"]]
    assert split == [list(ops) for ops in xla["tf_ops"]]
    ops = pd.read_csv(paths["ops"], keep_default_na=False, na_values=[""])
    assert ops.set_index("op")["xla_op"].dropna().to_dict() == (
        xla_run.ops.set_index("op")["xla_op"].dropna().to_dict()
    )


def test_a_trace_without_xla_replaces_an_earlier_xla_table_as_part_of_the_set(xla_run, tmp_path):
    from tfplace_widget._cli.errors import CliError
    from tfplace_widget._cli.outputs import check_tables_output

    folder = tmp_path / "csv"
    xla_run.to_csv(folder)
    plain = PlacementTrace(
        ops=xla_run.ops, events=xla_run.events, transfers=xla_run.transfers, devices=[CPU0]
    )
    with pytest.raises(FileExistsError):  # without overwrite nothing is replaced
        plain.to_csv(folder, overwrite=False)
    (folder / "ops.csv").unlink()
    (folder / "events.csv").unlink()
    (folder / "transfers.csv").unlink()
    with pytest.raises(FileExistsError):  # the earlier xla.csv alone is refused too
        plain.to_csv(folder, overwrite=False)
    with pytest.raises(CliError, match="xla.csv"):  # and by tfplace export, before loading
        check_tables_output("--csv", str(folder), "CSV", force=False)
    paths = plain.to_csv(folder)  # overwrite: the set is replaced, the stale xla.csv goes
    assert sorted(paths) == ["events", "ops", "transfers"]
    assert sorted(p.name for p in folder.iterdir()) == ["events.csv", "ops.csv", "transfers.csv"]


def test_to_parquet_keeps_the_instructions(xla_run, tmp_path):
    pytest.importorskip("pyarrow")
    paths = xla_run.to_parquet(tmp_path / "pq")
    back = pd.read_parquet(paths["xla"])
    assert back["instruction"].tolist() == xla_run.xla["instruction"].tolist()
    assert [list(ops) for ops in back["tf_ops"]] == [list(ops) for ops in xla_run.xla["tf_ops"]]


def test_chrome_trace_has_each_instruction_on_its_device_lane(xla_run, tmp_path):
    path = xla_run.to_chrome_trace(tmp_path / "xla.json")
    with open(path, encoding="utf-8") as stream:
        document = json.load(stream)
    events = document["traceEvents"]
    process = {
        e["pid"]: e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    instructions = [e for e in events if e["ph"] == "X" and e["cat"] == "xla"]
    xla = xla_run.xla
    assert len(instructions) == len(xla)  # one per run of each instruction
    got = sorted(
        (
            e["name"],
            e["ts"],
            e["dur"],
            e["args"]["cluster"],
            e["args"]["kind"],
            tuple(e["args"]["tf_ops"]),
            e["args"]["source"],
        )
        for e in instructions
    )
    want = sorted(
        (r.instruction, r.start_us, r.duration_us, r.cluster, r.kind, tuple(r.tf_ops), r.source)
        for r in xla.itertuples(index=False)
    )
    assert got == want
    for event in instructions:
        assert process[event["pid"]] == f"{event['args']['device']} Compute"
        assert event["args"]["device"] in set(xla["device"])
        assert event["args"]["how"] == "xla" and event["args"]["op"] == event["args"]["kind"]
        assert not any(key.startswith("input") for key in event["args"])
    # the user's line of the matmul, as the run recorded it
    matmul = xla[xla["tf_ops"].map(lambda ops: "product" in ops)]
    sources = {e["args"]["source"] for e in instructions if "product" in e["args"]["tf_ops"]}
    assert sources == set(matmul["source"]) and all(
        s.endswith(tuple("0123456789")) for s in sources
    )
    # the TF ops' own slices keep their args
    tf_ops = [e for e in events if e["ph"] == "X" and e["cat"] == "op"]
    assert all("cluster" not in e["args"] for e in tf_ops)


def test_chrome_trace_reads_back_with_the_instructions(xla_run, tmp_path):
    path = xla_run.to_chrome_trace(tmp_path / "xla.json.gz")
    back = PlacementTrace.from_chrome_trace(path)
    xla = xla_run.xla
    read = back.events[back.events["op"].isin(set(xla["instruction"]))]
    assert sorted(read["start_us"]) == sorted(xla["start_us"])
    kinds = back.ops.drop_duplicates("op").set_index("op")["type"]
    for name, kind in zip(xla["instruction"], xla["kind"], strict=True):
        assert kinds[name] == kind


def test_html_report_has_the_xla_op_column(xla_run, tmp_path):
    data = page_data(Path(xla_run.to_html(tmp_path / "xla.html")))
    assert [name for name, _ in data["column_labels"]][-1] == XLA_COLUMN[0]
    assert XLA_COLUMN[0] in data["column_widths"]
    shown = column(data, "xla_op")
    expected = xla_run.ops["xla_op"].astype(object).fillna("").tolist()
    assert shown == expected and any(shown)


def test_html_report_lists_the_instructions(xla_run, tmp_path):
    data = page_data(Path(xla_run.to_html(tmp_path / "xla.html")))
    table = data["xla"]
    xla = xla_run.xla
    per = xla.groupby(["cluster", "instruction", "device"])["duration_us"].agg(["size", "sum"])
    assert table["total"] == len(per) and len(table["rows"]) == len(per)
    assert table["time_us"] == int(xla["duration_us"].sum())
    totals = [row["total_us"] for row in table["rows"]]
    assert totals == sorted(totals, reverse=True)  # the longest first
    for row in table["rows"]:
        runs, total = per.loc[(row["cluster"], row["instruction"], CPU0)]
        assert row["runs"] == runs == 2  # two traced steps
        assert row["total_us"] == total and row["device"] == "CPU:0"
        mine = xla[xla["instruction"] == row["instruction"]].iloc[0]
        assert row["kind"] == mine["kind"] and row["tf_ops"] == list(mine["tf_ops"])
        assert row["source"] == mine["source"]
    # the page has the element the script fills, and the script that fills it
    page = (tmp_path / "xla.html").read_text(encoding="utf-8")
    assert "<section id='tfplace-xla' hidden></section>" in page
    assert re.search(r"function renderXla\(\)", page)


def test_a_report_without_xla_has_neither(xla_run):
    plain = PlacementTrace(
        ops=xla_run.ops.assign(xla_op=pd.array([pd.NA] * len(xla_run.ops), dtype="string")),
        events=xla_run.events,
        transfers=xla_run.transfers,
        devices=[CPU0],
    )
    data = report_data(plain)
    assert XLA_COLUMN[0] not in [name for name, _ in data["column_labels"]]
    assert data["xla"] is None and xla_table(plain) is None
