"""The static HTML report (issue 14): ``export.html.write_html(trace, path)``.

Real traces: the seed experiment traced in a Session (``seed_cpu``), its prediction on one GPU
(no events), the GPU traces vendored in the package, and a generated 10k-op graph traced by
TensorFlow (``benchmarks/graphs.py``). The page's JSON is read back and checked against the
trace and against the panel's own timeline. The page's search (JavaScript) and ``search.py``
answer the same table of cases in ``tests/rendering/test_search_cases.py``. What a browser does with the
file is ``tests/browser/test_html_report_browser.py``.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from helpers import GPU_TRACES, REPO, needs_source_tree, run_python

from tfplace_widget import PlacementTrace, TraceWriteError
from tfplace_widget import _static as static
from tfplace_widget._analyses.summary import format_us
from tfplace_widget._export.html import (
    FORMAT_JS,
    plotly_path,
    report_data,
    report_html,
    unpack_json,
    write_html,
)
from tfplace_widget._model.errors import TraceError
from tfplace_widget._rendering.figure import TimelineFigure
from tfplace_widget._widgets.timeline import Timeline

ALL_GPU_TRACES = sorted(GPU_TRACES.glob("*/*.json"))
TYPED = {"f4": np.float32, "f8": np.float64, "i4": np.int32}
MB = 1_000_000
HOSTILE = "</script><img src=x onerror=alert(1)><!--&amp;"


# -- helpers ----------------------------------------------------------------------------------
def page_data(path: Path) -> dict[str, Any]:
    """The JSON document inside a written report."""
    page = path.read_text(encoding="utf-8")
    found = re.search(r"<script id='tfplace-data'[^>]*>(.*?)</script>", page, re.S)
    assert found, "no data element in the page"
    assert re.fullmatch(r"[A-Za-z0-9+/=]+", found.group(1))
    return unpack_json(found.group(1))


def typed(value: dict[str, str]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(value["b64"]), dtype=TYPED[value["dtype"]])


def decoded(value: Any) -> Any:
    """The page's JSON as the page's ``decode`` makes it: typed arrays back to numpy."""
    if isinstance(value, list):
        return [decoded(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"dtype", "b64"}:
            return typed(value)
        return {k: decoded(v) for k, v in value.items()}
    return value


def column(data: dict, name: str) -> list:
    col = data["columns"][name]
    if isinstance(col, list):
        return col
    if "b64" in col:
        return list(typed(col))
    return [col["values"][c] for c in col["codes"]]


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def same(a: Any, b: Any) -> bool:
    """Equal plotly.js values: arrays element-wise (NaN equal to NaN), None equal to NaN."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple, np.ndarray)) or isinstance(b, (list, tuple, np.ndarray)):
        left, right = list(a), list(b)
        return len(left) == len(right) and all(same(x, y) for x, y in zip(left, right, strict=True))
    if missing(a) or missing(b):
        return missing(a) and missing(b)
    return a == b


def check_report(trace: PlacementTrace, path: Path) -> dict[str, Any]:
    """Write ``trace``'s report and check its data against the trace; return the data."""
    assert write_html(trace, path) == path
    page = path.read_text(encoding="utf-8")
    data = page_data(path)
    ops = trace.ops
    assert data["total"] == len(ops)
    assert column(data, "op") == ops["op"].tolist()
    assert data["columns"]["device_full"] == list(pd.unique(ops["device"]))
    full = [data["columns"]["device_full"][c] for c in data["columns"]["device"]["codes"]]
    assert full == ops["device"].tolist()
    assert column(data, "how") == ops["how"].astype(str).tolist()
    assert column(data, "reason") == ops["reason"].tolist()
    starts = np.array(column(data, "start_us"))
    np.testing.assert_array_equal(starts, ops["start_us"].to_numpy(float, na_value=np.nan))
    # Each drawn bar names its op row: same op, same device as the event it draws.
    figure = TimelineFigure(trace.events, trace.devices, trace.transfers, trace.inputs)
    names = ops["op"].to_numpy()
    for device, traces in zip(data["timeline"]["devices"], figure.device_traces, strict=True):
        rows = typed(device["ops"])
        assert len(rows) == len(traces.rows)
        known = rows >= 0
        assert known.mean() > 0.5 if len(rows) else True
        np.testing.assert_array_equal(
            names[rows[known]], trace.events["op"].to_numpy()[traces.rows[known]]
        )
        assert set(ops["device"].to_numpy()[rows[known]]) <= {device["device"]}
    # plotly.js once, nothing from the network, no other script source.
    banner = plotly_path().read_text(encoding="utf-8")[:40]
    assert page.count(banner) == 1
    assert "src=" not in page.split("<script id='tfplace-data'")[0].split("</header>")[1]
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=['\"]?(https?:)?//", page)
    return data


# -- the refactor: the panel's timeline and the report's figure are one ----------------------
def test_the_report_draws_the_panels_timeline(seed_cpu, tmp_path):
    data = check_report(seed_cpu, tmp_path / "seed.html")
    widget_figure = Timeline(  # as the panel draws it, the memory lane too
        seed_cpu.events,
        seed_cpu.devices,
        seed_cpu.transfers,
        seed_cpu.inputs,
        memory=seed_cpu.memory,
    ).widget
    drawn = decoded(data["figure"])
    assert same(drawn["data"], widget_figure.drawn())
    layout = {k: v for k, v in drawn["layout"].items() if k != "uirevision"}
    panel_layout = {k: v for k, v in widget_figure.layout_dict.items() if k != "uirevision"}
    assert same(layout, panel_layout)
    names = [t["name"] for t in drawn["data"]]
    assert names[:4] == ["CPU:0", "CPU:0 matches", "CPU:1", "CPU:1 matches"]
    assert "transfers" in names  # the seed's two copies are drawn as arrows


def test_timeline_figure_is_pure_and_timeline_keeps_its_behaviour(seed_cpu):
    figure = TimelineFigure(seed_cpu.events, seed_cpu.devices, seed_cpu.transfers, {})
    timeline = Timeline(seed_cpu.events, seed_cpu.devices, seed_cpu.transfers, {})
    assert not hasattr(figure, "widget")
    assert [t["name"] for t in figure.data] == [t["name"] for t in timeline.widget.drawn()]
    assert figure.selected_index == timeline._selected_index == 4
    timeline.highlight(seed_cpu.events["op"].eq("C").to_numpy())
    assert timeline.highlighted_ops() == {"C"}
    assert figure.notes(0) == []
    timeline.release()
    assert timeline.data == [] and timeline.widget is None


# -- what the page holds ------------------------------------------------------------------------
@pytest.mark.parametrize("path", ALL_GPU_TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_gpu_traces_make_reports(path, tmp_path):
    trace = PlacementTrace.from_chrome_trace(path)
    data = check_report(trace, tmp_path / "gpu.html")
    chips = {chip["device"] for chip in data["chips"]}
    assert chips == set(trace.devices)
    lanes = decoded(data["figure"])["layout"]["yaxis"]["ticktext"]
    if any("GPU" in device for device in trace.devices):
        assert any("stream" in lane for lane in lanes)  # GPU streams as sub-lanes


def test_a_prediction_without_events_still_writes_a_report(seed_cpu, tmp_path):
    from tfplace_widget import predict_placement

    predicted = predict_placement(seed_cpu, gpus=1)
    assert predicted.events.empty
    data = check_report(predicted, tmp_path / "predicted.html")
    page = (tmp_path / "predicted.html").read_text(encoding="utf-8")
    assert "predicted, not run" in page
    assert all(len(typed(d["ops"])) == 0 for d in data["timeline"]["devices"])


def test_names_are_escaped_everywhere(seed_cpu, tmp_path):
    """An op name with markup stays text: it cannot close a script or add an element."""
    rename = {"C": f"C{HOSTILE}"}
    ops = seed_cpu.ops.assign(op=seed_cpu.ops["op"].replace(rename))
    events = seed_cpu.events.assign(op=seed_cpu.events["op"].replace(rename))
    hostile = dataclasses.replace(seed_cpu, ops=ops, events=events, source=f"s{HOSTILE}")
    path = tmp_path / "hostile.html"
    data = check_report(hostile, path)
    page = path.read_text(encoding="utf-8")
    assert "<img" not in page and "<!--&" not in page
    assert page.count("</script>") == 3  # the data, plotly.js and the page's own code
    assert f"C{HOSTILE}" in column(data, "op")
    hover = [
        text
        for trace in data["figure"]["data"]
        for text in trace.get("hovertext") or trace.get("text") or []
        if text and "C" in text
    ]
    assert any("&lt;/script&gt;&lt;img" in text for text in hover), hover


def test_search_fills_the_box_and_must_be_text(seed_cpu, tmp_path):
    write_html(seed_cpu, tmp_path / "c.html", search="C")
    assert page_data(tmp_path / "c.html")["search"] == "C"
    with pytest.raises(TypeError, match="search must be a str"):
        write_html(seed_cpu, tmp_path / "bad.html", search=3)  # type: ignore[arg-type]


def test_a_path_that_cannot_be_written_is_an_error_naming_it(seed_cpu, tmp_path):
    missing = tmp_path / "no-such-folder" / "report.html"
    with pytest.raises(TraceWriteError, match=re.escape(repr(str(missing)))) as caught:
        write_html(seed_cpu, missing)
    assert isinstance(caught.value, OSError) and isinstance(caught.value, TraceError)
    assert caught.value.filename == str(missing)
    assert "does not exist" in str(caught.value)
    with pytest.raises(TraceWriteError, match="It is a folder"):
        write_html(seed_cpu, tmp_path)
    existing = tmp_path / "kept.html"
    existing.write_text("old")
    if os.geteuid() != 0:  # root writes anywhere
        tmp_path.chmod(0o500)
        try:
            with pytest.raises(TraceWriteError, match="kept.html"):
                write_html(seed_cpu, existing)
        finally:
            tmp_path.chmod(0o700)
        assert existing.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["kept.html"]  # no temporary file left


def test_the_report_needs_no_tensorflow_no_widgets_and_no_network(tmp_path):
    trace = ALL_GPU_TRACES[0]
    code = (
        "import sys\n"
        "from tfplace_widget._model.trace import PlacementTrace\n"
        "from tfplace_widget._export.html import write_html\n"
        f"write_html(PlacementTrace.from_chrome_trace({str(trace)!r}), {str(tmp_path)!r} + '/r.html')\n"
        "print(sorted(m for m in ('tensorflow', 'ipywidgets', 'anywidget', 'plotly', 'socket')"
        " if m in sys.modules and m != 'socket'))\n"
    )
    done = run_python(code)
    assert done.stdout.strip() == "[]"
    assert (tmp_path / "r.html").stat().st_size > 4 * MB  # plotly.js is in it


def _graphs_module() -> Any:
    spec = importlib.util.spec_from_file_location("_bench_graphs", REPO / "benchmarks/graphs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@needs_source_tree  # benchmarks/graphs.py builds the graphs
def test_10k_ops_scale_to_a_100k_report_under_15_mb(trace_placement, tmp_path):
    """The data grows with the ops, plotly.js does not; at 10k ops the data is under a tenth of
    what 100k may use. (``benchmarks/html_report.py`` measures 100k itself, and the browser.)"""
    graphs = _graphs_module()
    trace = trace_placement(graphs.builder(graphs.make_graph_def(10_000)), device_count={"CPU": 4})
    assert len(trace.ops) > 10_000
    path = tmp_path / "10k.html"
    data = check_report(trace, path)
    size = path.stat().st_size
    # Everything but plotly.js and the timeline (10,000 bars at most: as many at 100k ops)
    # grows with the ops; scaled as if the whole data did, the estimate is on the safe side.
    plotly = plotly_path().stat().st_size
    assert len(trace.events) >= 10_000
    scaled = plotly + (size - plotly) * 100_000 / 10_000
    print(f"\n10k-op report: {size / MB:.2f} MB; scaled to 100k ops: {scaled / MB:.1f} MB")
    assert scaled < 15 * MB
    assert data["timeline"]["webgl"] is True


def test_report_data_is_column_arrays_not_records(seed_cpu):
    data = report_data(seed_cpu)
    assert isinstance(data["columns"]["op"], list)
    assert set(data["columns"]["type"]) == {"values", "codes"}
    assert set(data["columns"]["duration_us"]) == {"dtype", "b64"}
    assert data["page_size"] == 50


# -- the page's script: the files of static/ (its search: tests/rendering/test_search_cases.py) -------------
def test_the_page_holds_the_static_scripts_and_style_sheet_as_they_are(seed_cpu):
    """The page runs ``_static/search.js``, ``format.js``, the panel's op table ``table.js``,
    findings list ``findings.js`` and memory peaks ``memory.js`` (each without its export,
    in a scope of its own) and ``report.js`` unchanged (the files ``tests/js/`` runs under
    node), in one async function, and styles with ``table.css``, ``findings.css``,
    ``memory.css`` and ``report.css``."""
    page = report_html(seed_cpu)
    script = page.split("'use strict';\n(async () => {\n", 1)[1].split("})().catch(", 1)[0]
    assert script.startswith(static.text("search.js") + "\n" + static.text("format.js") + "\n")
    assert script.endswith(static.text("report.js"))
    for name, exported in (
        ("table.js", "renderOpTable"),
        ("findings.js", "renderFindingsList"),
        ("memory.js", "renderMemoryPeaks"),
    ):
        module = static.text(name)
        assert module.endswith(f"\nexport default {{ render: {exported} }};\n")
        assert module.rpartition("export default")[0] in script
    css = static.text("table.css") + static.text("findings.css") + static.text("memory.css")
    assert f"<style>\n{css}</style>" in page
    assert f"<style>\n{static.text('report.css')}</style>" in page


def test_trace_to_html_is_write_html(seed_cpu, tmp_path):
    """``trace.to_html(path, search=)`` (trace.py) writes the same report and returns the path."""
    written = seed_cpu.to_html(tmp_path / "method.html", search="C")
    assert written == str(tmp_path / "method.html")
    write_html(seed_cpu, tmp_path / "function.html", search="C")
    by_method, by_function = page_data(Path(written)), page_data(tmp_path / "function.html")
    for data in (by_method, by_function):
        data["figure"]["layout"].pop("uirevision")  # a counter: one per figure made
    assert by_method == by_function


# The durations both languages show alike: summary.format_us and format.js's formatUs (its
# node test, tests/js/format.test.mjs, reads the same file).
FORMAT_CASES = json.loads((Path(__file__).parents[1] / "format_cases.json").read_text("utf-8"))
US_VALUES = [case["us"] for case in FORMAT_CASES["cases"]]


@pytest.mark.parametrize("case", FORMAT_CASES["cases"], ids=lambda c: str(c["us"]))
def test_format_us_answers_as_the_cases_say(case):
    assert format_us(case["us"]) == case["text"]


def test_the_pages_times_read_as_the_panels(tmp_path):
    """The table's start and duration: ``summary.format_us`` and the page's ``formatUs``."""
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("node is not installed")
    script = tmp_path / "format.js"
    script.write_text(
        FORMAT_JS + f"process.stdout.write(JSON.stringify({json.dumps(US_VALUES)}.map(formatUs)));",
        encoding="utf-8",
    )
    done = subprocess.run([node, str(script)], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [format_us(v) for v in US_VALUES]
