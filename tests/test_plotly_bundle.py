"""plotly's widget code crosses the comm once per kernel, compressed, instead of once per figure.

Real widgets throughout; only the comm under them records what ipywidgets would send to the
browser (the same replacement of ``comm.create_comm`` as the benchmarks'). No TensorFlow: the
100k-event timeline is built from a generated events table.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import anywidget
import comm
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from comm.base_comm import BaseComm
from ipywidgets.embed import dependency_state
from ipywidgets.widgets import widget as ipywidget

from tfplace_widget import plotly_bundle
from tfplace_widget.plotly_bundle import CompactFigureWidget, PlotlyBundle, holder
from tfplace_widget.timeline import Timeline

HOLDER_ID = f"{PlotlyBundle.__module__}.{PlotlyBundle.__qualname__}"
FIGURE_ID = f"{CompactFigureWidget.__module__}.{CompactFigureWidget.__qualname__}"
MB = 1024 * 1024


@dataclass
class Opened:
    """One comm_open as ipywidgets would send it."""

    state: dict
    buffer_paths: list
    buffers: list[bytes]
    json_bytes: int

    @property
    def size(self) -> int:
        return self.json_bytes + sum(len(b) for b in self.buffers)


@dataclass
class Traffic:
    opened: list[Opened] = field(default_factory=list)
    message_bytes: int = 0

    def of(self, anywidget_id: str) -> list[Opened]:
        return [o for o in self.opened if o.state.get("_anywidget_id") == anywidget_id]

    @property
    def total(self) -> int:
        return sum(o.size for o in self.opened) + self.message_bytes


@contextlib.contextmanager
def recorded() -> Iterator[Traffic]:
    traffic = Traffic()

    class Recorder(BaseComm):
        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys) -> None:
            text = len(json.dumps(data, separators=(",", ":"), default=str).encode())
            if msg_type == "comm_open":
                buffers = [bytes(memoryview(b)) for b in buffers or ()]
                traffic.opened.append(
                    Opened(data["state"], data.get("buffer_paths", []), buffers, text)
                )
            elif msg_type == "comm_msg":
                traffic.message_bytes += text + sum(memoryview(b).nbytes for b in buffers or ())

    original = comm.create_comm
    comm.create_comm = lambda *args, **kwargs: Recorder(*args, **kwargs)
    try:
        yield traffic
    finally:
        comm.create_comm = original


@pytest.fixture
def fresh_holder() -> Iterator[None]:
    """Start without a holder, as a new kernel does (tests share one process)."""
    holder().close()
    yield


def installed_bundle() -> bytes:
    """What plain ``go.FigureWidget`` sends as ``_esm``: anywidget's ``str()`` of the file."""
    return str(go.FigureWidget._esm).encode("utf-8")


def test_plotly_here_is_an_anywidget_with_its_bundle() -> None:
    # The premise: if plotly stops shipping the bundle this way, this module needs a look.
    assert issubclass(go.FigureWidget, anywidget.AnyWidget)
    assert plotly_bundle.compact()
    assert len(installed_bundle()) > 2 * MB


def test_the_holder_carries_plotlys_bundle_gzipped_with_its_digest() -> None:
    code = installed_bundle()
    box = holder()
    assert gzip.decompress(box.bundle_gz) == code
    assert box.digest == hashlib.sha256(code).hexdigest()
    assert len(box.bundle_gz) < len(code) / 2.5  # 4.96 MB -> 1.52 MB with plotly 7.1


def test_the_bundle_goes_as_one_binary_buffer_not_json_text(fresh_holder) -> None:
    with recorded() as traffic:
        box = holder()
    [opened] = traffic.of(HOLDER_ID)
    assert opened.buffer_paths == [["bundle_gz"]]
    assert opened.buffers == [box.bundle_gz]
    assert "bundle_gz" not in opened.state
    assert opened.state["digest"] == box.digest
    assert opened.json_bytes < 10_000  # the holder's own small _esm and the usual traits


def test_one_holder_for_many_figures_and_it_opens_first(fresh_holder) -> None:
    with recorded() as traffic:
        figures = [CompactFigureWidget() for _ in range(5)]
    kinds = [o.state.get("_anywidget_id") for o in traffic.opened]
    assert kinds.count(HOLDER_ID) == 1
    assert kinds.count(FIGURE_ID) == 5
    assert kinds.index(HOLDER_ID) < kinds.index(FIGURE_ID)
    assert all(f._plotly_bundle is holder() for f in figures)
    alive = [w for w in ipywidget._instances.values() if isinstance(w, PlotlyBundle)]
    assert alive == [holder()]


def test_a_closed_holder_is_opened_again_for_the_next_figure() -> None:
    first = holder()
    older = CompactFigureWidget()
    first.close()  # as Widget.close_all() does (a user or the benchmarks, between panels)
    with recorded() as traffic:
        figure = CompactFigureWidget()
    assert figure._plotly_bundle is holder() is not first
    assert len(traffic.of(HOLDER_ID)) == 1
    # A figure made before still serializes (a page reload asks for its whole state).
    assert older.get_state()["_plotly_bundle"] == f"IPY_MODEL_{holder().model_id}"


def test_a_figure_sends_a_small_stub_instead_of_the_bundle() -> None:
    code = installed_bundle()
    holder()
    with recorded() as traffic:
        figure = CompactFigureWidget()
    [opened] = traffic.of(FIGURE_ID)
    esm = opened.state["_esm"]
    assert len(esm) < 2_000
    assert figure.get_state()["_esm"] == esm
    assert holder().digest in esm and "did not arrive" in esm
    assert opened.size < 20_000  # an empty figure: stub, layout, config
    assert code[:2_000].decode() not in json.dumps(opened.state)
    assert opened.state["_plotly_bundle"] == f"IPY_MODEL_{holder().model_id}"


def test_a_compact_figure_is_a_plotly_figure_widget() -> None:
    figure = CompactFigureWidget(data=[go.Bar(x=[1, 2], y=[3, 4])], layout={"height": 300})
    assert isinstance(figure, go.FigureWidget)
    with figure.batch_update():
        figure.add_trace(go.Scatter(x=[0, 1], y=[1, 0], name="line"))
        figure.layout.title = "t"
    figure.data[0].on_click(lambda *args: None)
    assert [t.type for t in figure.data] == ["bar", "scatter"]
    assert figure.layout.height == 300 and figure.layout.title.text == "t"
    assert figure.to_dict()["data"][1]["name"] == "line"


def test_the_whole_state_has_the_traces_added_after_construction() -> None:
    """What a page reload asks for: the figure as it is, not as it was made (empty)."""
    figure = CompactFigureWidget()
    with figure.batch_update():
        figure.add_trace(go.Bar(x=np.arange(3.0), y=[1, 2, 3], name="bars"))
        figure.update_layout(height=321)
    state = figure.get_state()
    [trace] = state["_widget_data"]
    assert trace["name"] == "bars" and trace["y"] == [1, 2, 3]
    assert state["_widget_layout"]["height"] == 321
    assert figure.get_state("_widget_data") == {"_widget_data": []}  # updates: as plotly's


def test_embedding_a_figure_takes_the_holder_along() -> None:
    figure = CompactFigureWidget()
    assert holder().model_id in dependency_state([figure])


def _events(count: int, devices: list[str]) -> pd.DataFrame:
    """``count`` timeline events over ``devices``: names, lanes, times like a traced step's."""
    rng = np.random.default_rng(0)
    device = np.array(devices, dtype=object)[np.arange(count) % len(devices)]
    ops = np.array([f"layer_{i // 100}/block_{i % 100}/add_{i}" for i in range(count)])
    return pd.DataFrame(
        {
            "op": ops,
            "device": device,
            "lane": device,
            "start_us": np.sort(rng.uniform(0, 500_000, count)),
            "duration_us": rng.exponential(20.0, count),
            "label": [f"{op} = AddV2(x, y)" for op in ops],
        }
    )


def test_a_100k_event_timeline_sends_under_5_mb_first_and_no_code_later(fresh_holder) -> None:
    devices = [f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(4)]
    events = _events(100_000, devices)
    transfers = pd.DataFrame(columns=["tensor", "src_device", "dst_device"])
    with recorded() as first:
        Timeline(events, devices, transfers, {})
    with recorded() as later:
        Timeline(events, devices, transfers, {})
    holder_bytes = sum(o.size for o in first.of(HOLDER_ID))
    print(
        f"\n100k-event timeline state: first {first.total / MB:.2f} MB "
        f"(holder {holder_bytes / MB:.2f} MB), later {later.total / MB:.2f} MB"
    )
    assert first.total < 5 * MB
    assert 1 * MB < holder_bytes < 2 * MB
    assert not later.of(HOLDER_ID)
    assert later.total < first.total - holder_bytes + 10_000  # the figure's data only


def test_a_new_timeline_puts_its_traces_in_the_figures_synced_state() -> None:
    """So a notebook saved with its widget state (nbclient) keeps the bars, not an empty plot:
    traces added to a live figure travel only as one-off messages."""
    devices = [f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(2)]
    events = _events(50, devices)
    transfers = pd.DataFrame(columns=["tensor", "src_device", "dst_device"])
    figure = Timeline(events, devices, transfers, {}).figure
    synced = figure.get_state("_widget_data")["_widget_data"]
    assert [trace["name"] for trace in synced] == [trace.name for trace in figure.data]
    assert len(synced) >= 2 and all("x" in trace for trace in synced)
