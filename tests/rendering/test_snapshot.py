"""The panel has a static picture beside its widget view (issue 24): ``text/html`` in its bundle.

Where no widget can be drawn (``jupyter nbconvert --to html`` of a notebook saved without its
widget state, GitHub, nbviewer, a frontend without the widget manager) the output's
``text/html`` is shown: the snapshot of ``rendering.snapshot``. These tests read it from the
bundle of real traced panels, from an executed notebook converted by nbconvert offline, and
check that it stays small, as itables checks its outputs' size.

Size budget: at most ``OUTPUT_BUDGET`` (60 KB) per panel output in the notebook file, whatever
the trace. What the snapshot can hold at most: 20 rows (~400 B each with the longest names cut
to 100 characters: 8 KB), 400 SVG rects (~60 B each: 24 KB), 40 lane labels (~4 KB),
10 findings (messages cut to 300 characters: ~5 KB), the header, chips and style sheet (~4 KB):
about 45 KB, and the widget view and text/plain beside it are under 1 KB. A seed panel's
output is ~10 KB (``SEED_BUDGET`` 20 KB); a snapshot that grew with the trace (every row,
every bar) would be megabytes at 100,000 ops. The executed notebooks' own budget
(``tests/entry/test_notebooks.py``, 1 MB without the widget state) keeps room for three panels.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import re
from html.parser import HTMLParser

import nbformat
import numpy as np
import pandas as pd
import pytest
from helpers import CPU0, CPU1, SEED_N, kernels_forward_native_output
from test_html_report import HOSTILE

from tfplace_widget import PlacementPanel, PlacementTrace, show_comparison, show_placement
from tfplace_widget._rendering.colors import device_color
from tfplace_widget._rendering.figure import TimelineFigure
from tfplace_widget._rendering.snapshot import (
    MAX_RECTS,
    SNAPSHOT_ROWS,
    panel_snapshot_html,
    timeline_svg,
)

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
OUTPUT_BUDGET = 60_000  # bytes of one panel output in the .ipynb (see the module docstring)
SEED_BUDGET = 20_000
BIG_OPS = 100_000

NOTEBOOK_CELLS = [
    f"""import tensorflow as tf
from tfplace_widget import show_placement

def inputs_cpu():
    with tf.device("/cpu:0"):
        a = tf.ones(({SEED_N},), name="A")
        b = tf.ones(({SEED_N},), name="B")
    with tf.device("/cpu:1"):
        return tf.add(a, b, name="C")""",
    'show_placement(inputs_cpu, device_count={"CPU": 2})',
]


def snapshot_of(widget) -> str:
    bundle = widget._repr_mimebundle_()
    assert WIDGET_VIEW in bundle, "the live widget view stays in the bundle"
    return bundle["text/html"]


def rects(html: str) -> list[str]:
    return re.findall(r"<rect [^>]*>", html)


class _Cells(HTMLParser):
    """The text of every ``td`` and the fill of every bar of a page (any quoting, as nbconvert
    rewrites the HTML it is given)."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self.fills: list[str] = []
        self.svgs = 0
        self._in_td = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attrs = dict(attrs)
        self._in_td = tag == "td"
        if self._in_td:
            self.cells.append("")
        self.svgs += tag == "svg"
        if tag == "rect" and attrs.get("fill") != "#8881":
            self.fills.append(attrs.get("fill"))

    def handle_endtag(self, tag: str) -> None:
        self._in_td = self._in_td and tag != "td"

    def handle_data(self, data: str) -> None:
        if self._in_td:
            self.cells[-1] += data


def parsed(html: str) -> _Cells:
    parser = _Cells()
    parser.feed(html)
    return parser


def bars(html: str) -> list[str]:
    """The timeline's bars: rects in a device colour (not the lanes' background bands)."""
    return [r for r in rects(html) if "fill='#8881'" not in r]


# -- (1) the bundle of a real traced panel -----------------------------------------------------
def test_a_traced_panel_has_a_static_snapshot_beside_its_widget_view(seed_cpu):
    panel = PlacementPanel(seed_cpu)
    html = snapshot_of(panel)
    assert "static snapshot of the live panel" in html
    assert f"first {len(seed_cpu.ops)} of {len(seed_cpu.ops)} ops" in html
    for op in ("A", "B", "C", "_SOURCE"):
        assert f"<td style='border-left-color:{device_color(CPU0)};text-align:left'>{op}</td>" in (
            html
        ) or (
            f"<td style='border-left-color:{device_color(CPU1)};text-align:left'>{op}</td>" in html
        ), op
    assert "CPU:0 · " in html and "CPU:1 · " in html  # the chips
    assert "TensorFlow placement" in html  # the header
    assert "Findings" in html and "costly_transfer" in html
    svg = html[html.index("<svg") : html.index("</svg>")]
    assert ">CPU:0</text>" in svg and ">CPU:1</text>" in svg  # one lane per device
    colours = {re.search(r"fill='([^']+)'", r).group(1) for r in bars(svg)}
    assert colours == {device_color(CPU0), device_color(CPU1)}
    assert "<script" not in html and "http" not in html.replace(
        "http://www.w3.org/2000/svg", ""
    )  # nothing runs, nothing is fetched


def test_the_snapshot_shows_the_filtered_table_and_says_how_many_ops_are_left_out(seed_cpu):
    panel = PlacementPanel(seed_cpu)
    panel.search.value = "A"
    html = snapshot_of(panel)
    shown = len(panel.visible_ops)
    assert 0 < shown < len(seed_cpu.ops)
    assert f"first {shown} of {len(seed_cpu.ops)} ops; {len(seed_cpu.ops) - shown} are not" in html
    assert html.count("<tr>") == shown + 1  # the heading, then the kept rows


def test_names_from_the_trace_are_escaped(seed_cpu):
    rename = {"C": f"C{HOSTILE}"}
    hostile = dataclasses.replace(
        seed_cpu,
        ops=seed_cpu.ops.assign(op=seed_cpu.ops["op"].replace(rename)),
        events=seed_cpu.events.assign(op=seed_cpu.events["op"].replace(rename)),
        source=f"s{HOSTILE}",
    )
    html = snapshot_of(PlacementPanel(hostile))
    assert "<img" not in html and "</script>" not in html and "<!--" not in html
    assert "C&lt;/script&gt;&lt;img" in html


def test_a_closed_panel_shows_nothing(seed_cpu):
    panel = PlacementPanel(seed_cpu)
    panel.close()
    assert panel._repr_mimebundle_ is None  # ipywidgets': a closed widget displays nothing


def test_the_comparison_view_has_a_snapshot_of_both_timelines(seed_cpu, seed_none):
    html = snapshot_of(show_comparison(seed_cpu, seed_none))
    assert "static snapshot of the live comparison view" in html
    assert html.count("<svg") == 2
    assert "a: a" in html and "device a" in html and "device b" in html
    panel = show_placement(seed_none)
    panel.compare_with(seed_cpu)
    assert html.count("<svg") == snapshot_of(panel).count("<svg") == 2


# -- (2) an executed notebook, converted by nbconvert offline --------------------------------
def _execute(notebook: nbformat.NotebookNode) -> None:
    from nbclient import NotebookClient

    NotebookClient(notebook, kernel_name="python3", timeout=180, startup_timeout=120).execute()


@pytest.fixture(scope="module")
def executed() -> nbformat.NotebookNode:
    """The two cells, run in a fresh kernel by nbclient (in a thread: the browser tests'
    Playwright keeps an event loop in the main thread), widget state stored as nbclient does."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in NOTEBOOK_CELLS]
    with (
        kernels_forward_native_output(),
        concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool,
    ):
        pool.submit(_execute, notebook).result()
    return notebook


def panel_output(notebook: nbformat.NotebookNode) -> dict:
    (output,) = [o for o in notebook.cells[1].outputs if o.output_type == "execute_result"]
    return output


def test_nbconvert_shows_the_static_panel_of_a_notebook_saved_without_widget_state(executed):
    """As JupyterLab saves a notebook by default (its widget manager's ``saveState`` is off),
    and as GitHub keeps it: nbconvert shows the snapshot, no widget script, nothing fetched."""
    from nbconvert import HTMLExporter

    notebook = nbformat.from_dict(json.loads(json.dumps(executed)))
    notebook.metadata.pop("widgets", None)
    page, _ = HTMLExporter().from_notebook_node(notebook)
    assert "static snapshot of the live panel" in page
    snapshot = parsed(page[page.index("tfplace-snapshot") :])
    for name in ("A", "B", "C", "_SOURCE", "CPU:0", "CPU:1", "/device:CPU:1"):
        assert name in snapshot.cells, name
    assert snapshot.svgs == 1
    assert set(snapshot.fills) == {device_color(CPU0), device_color(CPU1)}
    assert WIDGET_VIEW not in page and "html-manager" not in page  # no widget renderer


def test_nbconvert_shows_the_widget_view_of_a_notebook_with_widget_state_unless_cleared(executed):
    """nbconvert prefers a widget view whose model is in the saved state (drawn by a renderer
    from a CDN); ``--ClearMetadataPreprocessor.enabled=True`` drops the state, and the snapshot
    is shown instead (the README says so)."""
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    with_state, _ = HTMLExporter().from_notebook_node(executed)
    assert f'type="{WIDGET_VIEW}"' in with_state
    assert "static snapshot of the live panel" not in with_state
    config = Config()
    config.ClearMetadataPreprocessor.enabled = True
    cleared, _ = HTMLExporter(config=config).from_notebook_node(
        nbformat.from_dict(json.loads(json.dumps(executed)))
    )
    assert "static snapshot of the live panel" in cleared and WIDGET_VIEW not in cleared


def test_the_executed_notebook_keeps_the_live_view_and_the_snapshot(executed):
    """The file keeps both: the widget view for JupyterLab (which draws it and ignores the
    text/html when its widget manager is there) and the snapshot for everything else."""
    output = panel_output(executed)
    assert WIDGET_VIEW in output.data and "text/html" in output.data
    assert "static snapshot of the live panel" in output.data["text/html"]
    state = executed.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert output.data[WIDGET_VIEW]["model_id"] in state


# -- (3) the size budget ------------------------------------------------------------------------
def test_a_seed_panel_output_stays_within_its_size_budget(executed):
    size = len(json.dumps(panel_output(executed)))
    print(f"\nseed panel output: {size:,} bytes")
    assert size < SEED_BUDGET


@pytest.fixture(scope="module")
def big_trace() -> PlacementTrace:
    from test_large_traces import run_metadata

    return PlacementTrace.from_run_metadata(run_metadata(BIG_OPS, devices=3))


def test_a_100k_op_panel_snapshot_stays_small(big_trace):
    panel = show_placement(big_trace)
    output = {"data": panel._repr_mimebundle_(), "metadata": {}, "output_type": "display_data"}
    html = output["data"]["text/html"]
    size = len(json.dumps(output))
    print(f"\n100k-op panel output: {size:,} bytes, {len(bars(html))} bars")
    assert size < OUTPUT_BUDGET
    assert html.count("<tr>") == SNAPSHOT_ROWS + 1
    assert f"first {SNAPSHOT_ROWS} of {BIG_OPS:,} ops; {BIG_OPS - SNAPSHOT_ROWS:,} are not" in html
    assert 3 <= len(bars(html)) <= MAX_RECTS  # one lane per device at least, merged bars
    assert "draws a sample" in html  # the header says what the live timeline draws


FOUR_CPUS = [CPU0.replace("CPU:0", f"CPU:{i}") for i in range(4)]


def scattered_events(count: int) -> pd.DataFrame:
    """``count`` 1 µs events on four CPUs at 500 scattered times over one second: about half
    of each lane's pixels covered, more separate bars than ``MAX_RECTS`` at 1 px."""
    rng = np.random.default_rng(24)
    slots = np.sort(rng.choice(1_000_000, size=500, replace=False))
    device = np.array(FOUR_CPUS, dtype=object)[np.arange(count) % 4]
    return pd.DataFrame(
        {
            "op": [f"op_{i}" for i in range(count)],
            "device": device,
            "lane": device,
            "thread": 0,
            "start_us": slots[rng.integers(0, len(slots), size=count)].astype(float),
            "duration_us": 1.0,
            "label": "",
        }
    )


def test_bars_are_merged_to_a_bounded_number_of_rects():
    events = scattered_events(BIG_OPS)
    figure = TimelineFigure(events, FOUR_CPUS, pd.DataFrame(columns=["tensor"]), {})
    assert len(bars(timeline_svg(figure, max_rects=10**6))) > MAX_RECTS  # at 1 px: too many
    drawn = bars(timeline_svg(figure))
    print(f"\n{BIG_OPS:,} scattered events: {len(drawn)} rects")
    assert MAX_RECTS // 4 < len(drawn) <= MAX_RECTS  # coarsened until they fit, not to nothing
    assert {re.search(r"fill='([^']+)'", r).group(1) for r in drawn} == {
        device_color(d) for d in FOUR_CPUS
    }
    for limit in (1, 10, 50):
        assert 1 <= len(bars(timeline_svg(figure, max_rects=limit))) <= limit
    assert len(timeline_svg(figure)) < 30_000


def test_a_trace_without_events_has_a_snapshot_without_bars(seed_cpu):
    from tfplace_widget import predict_placement

    predicted = predict_placement(seed_cpu, gpus=1)
    figure = TimelineFigure(predicted.events, predicted.devices, predicted.transfers, {})
    html = panel_snapshot_html(predicted, figure)
    assert "<svg" in html and not bars(html)
    assert "predicted, not run" in html


def test_findings_still_being_found_are_said_to_be_left_out(seed_cpu):
    """A large trace's findings are found after the cell, once its output is drawn."""
    figure = TimelineFigure(seed_cpu.events, seed_cpu.devices, seed_cpu.transfers, {})
    html = panel_snapshot_html(seed_cpu, figure, findings_note="finding them in 30,000 ops...")
    assert "Findings:</b> not in this snapshot (finding them in 30,000 ops...)" in html
    assert "costly_transfer" in panel_snapshot_html(seed_cpu, figure, findings=seed_cpu.findings)


def test_a_device_name_of_millions_of_characters_leaves_the_snapshot_small(seed_cpu):
    """Issue 31: a 32 KB file with a 5M-character job name gave a 20 MB snapshot."""
    long_cpu1 = CPU1.replace("job:localhost", "job:" + "j" * 5_000_000)

    def renamed(frame: pd.DataFrame) -> pd.DataFrame:
        columns = [c for c in frame.columns if "device" in c and frame[c].dtype == object]
        return frame.assign(**{c: frame[c].replace({CPU1: long_cpu1}) for c in columns})

    hostile = dataclasses.replace(
        seed_cpu,
        ops=renamed(seed_cpu.ops),
        events=renamed(seed_cpu.events),
        transfers=renamed(seed_cpu.transfers),
        devices=[long_cpu1 if d == CPU1 else d for d in seed_cpu.devices],
        source="s" * 5_000_000,
    )
    html = snapshot_of(PlacementPanel(hostile))
    assert len(html) < OUTPUT_BUDGET, len(html)
    assert "jjjjjjjjjj…" in html  # cut, saying so
