"""The timeline widget: plotly.js crosses the comm once per kernel, compressed; each timeline
sends only its figure, numbers as binary buffers; its state is the figure as drawn now.

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

import comm
import numpy as np
import pandas as pd
import pytest
from comm.base_comm import BaseComm
from helpers import run_python
from ipywidgets.embed import dependency_state
from ipywidgets.widgets import widget as ipywidget

from tfplace_widget._widgets.bundle_holder import PlotlyBundle, bundle_path, holder
from tfplace_widget._widgets.timeline import Timeline, TimelineWidget, encode

HOLDER_ID = f"{PlotlyBundle.__module__}.{PlotlyBundle.__qualname__}"
TIMELINE_ID = f"{TimelineWidget.__module__}.{TimelineWidget.__qualname__}"
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
    messages: list[tuple[dict, list[bytes]]] = field(default_factory=list)  # comm_msg data, buffers

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
                traffic.messages.append((data, [bytes(memoryview(b)) for b in buffers or ()]))

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


def test_plotly_ships_plotly_js_as_a_umd_file() -> None:
    # The premise of the holder's ES-module wrapper: plotly.min.js exports to a `module` it is
    # given. If plotly changes how it ships plotly.js, this module needs a look.
    code = bundle_path().read_bytes()
    assert len(code) > 2 * MB
    assert b'typeof module === "object" && module.exports' in code[:2_000]


def test_the_holder_carries_plotly_js_gzipped_with_its_digest() -> None:
    code = bundle_path().read_bytes()
    box = holder()
    assert gzip.decompress(box.bundle_gz) == code
    assert box.digest == hashlib.sha256(code).hexdigest()
    assert len(box.bundle_gz) < len(code) / 2.5  # 4.82 MB -> 1.48 MB with plotly.js 4.1


def test_the_bundle_goes_as_one_binary_buffer_not_json_text(fresh_holder) -> None:
    with recorded() as traffic:
        box = holder()
    [opened] = traffic.of(HOLDER_ID)
    assert opened.buffer_paths == [["bundle_gz"]]
    assert opened.buffers == [box.bundle_gz]
    assert "bundle_gz" not in opened.state
    assert opened.state["digest"] == box.digest
    assert opened.json_bytes < 10_000  # the holder's own small _esm and the usual traits


def test_one_holder_for_many_timelines_and_it_opens_first(fresh_holder) -> None:
    with recorded() as traffic:
        timelines = [TimelineWidget() for _ in range(5)]
    kinds = [o.state.get("_anywidget_id") for o in traffic.opened]
    assert kinds.count(HOLDER_ID) == 1
    assert kinds.count(TIMELINE_ID) == 5
    assert kinds.index(HOLDER_ID) < kinds.index(TIMELINE_ID)
    assert all(t._plotly_bundle is holder() for t in timelines)
    alive = [w for w in ipywidget._instances.values() if isinstance(w, PlotlyBundle)]
    assert alive == [holder()]


def test_a_closed_holder_is_opened_again_for_the_next_timeline() -> None:
    first = holder()
    older = TimelineWidget()
    first.close()  # as Widget.close_all() does (a user or the benchmarks, between panels)
    with recorded() as traffic:
        timeline = TimelineWidget()
    assert timeline._plotly_bundle is holder() is not first
    assert len(traffic.of(HOLDER_ID)) == 1
    # A timeline made before still serializes (a page reload asks for its whole state).
    assert older.get_state()["_plotly_bundle"] == f"IPY_MODEL_{holder().model_id}"


def test_a_timeline_sends_its_small_module_not_plotly_js() -> None:
    code = bundle_path().read_bytes()
    holder()
    with recorded() as traffic:
        timeline = TimelineWidget()
    [opened] = traffic.of(TIMELINE_ID)
    esm = opened.state["_esm"]
    assert len(esm) < 12_000  # the registry, the bundle's import and the view (8.6 KB now)
    assert timeline.get_state()["_esm"] == esm
    assert holder().digest in esm and "did not arrive" in esm
    assert opened.size < 20_000  # an empty timeline: module, css, empty figure
    assert code[:2_000].decode() not in json.dumps(opened.state)
    assert opened.state["_plotly_bundle"] == f"IPY_MODEL_{holder().model_id}"


def test_numbers_travel_as_binary_buffers_and_other_arrays_as_json() -> None:
    starts = np.array([0.5, 2.0, np.nan])
    labels = np.array(["a<b", None, np.nan], dtype=object)
    timeline = TimelineWidget()
    with recorded() as traffic:
        timeline.draw([{"type": "bar", "x": starts, "hovertext": labels}], {"height": 300})
    state = timeline.get_state()
    [trace] = state["figure"]["data"]
    assert trace["x"]["dtype"] == "f8"
    assert np.array_equal(np.frombuffer(trace["x"]["bdata"], np.float64), starts, equal_nan=True)
    assert trace["hovertext"] == ["a<b", None, None]  # JSON has no NaN: null, as plotly.js reads
    assert json.dumps(encode({"y": np.arange(3, dtype=np.float32)})["y"]["dtype"]) == '"f4"'
    assert traffic.message_bytes < 2_000  # the 24 bytes of x went as a buffer, not as text


def test_the_state_is_the_figure_as_drawn_now_and_drawn_merges_the_overlays() -> None:
    """What a page reload or a notebook saved with its widget state redraws from."""
    timeline = TimelineWidget()
    bars = {"type": "bar", "name": "bars", "x": np.arange(3.0), "opacity": 1.0}
    timeline.draw([bars, {"type": "bar", "name": "matches", "x": np.arange(0.0)}], {"height": 90})
    timeline.set_overlays({0: {"opacity": 0.25}, 1: {"x": np.array([1.0])}})
    state = timeline.get_state()
    assert [t["name"] for t in state["figure"]["data"]] == ["bars", "matches"]
    assert state["figure"]["layout"] == {"height": 90}
    assert state["overlays"]["0"] == {"opacity": 0.25}
    drawn = timeline.drawn()
    assert drawn[0]["opacity"] == 0.25 and list(drawn[1]["x"]) == [1.0]
    assert bars["opacity"] == 1.0  # the figure as built is left alone
    figure = timeline.to_figure()
    assert [t.name for t in figure.data] == ["bars", "matches"] and figure.data[0].opacity == 0.25
    timeline.draw([bars], {})  # a new figure drops the old overlays
    assert timeline.get_state()["overlays"] == {} and timeline.drawn()[0]["opacity"] == 1.0


def test_a_click_message_reaches_the_callback_and_junk_is_ignored() -> None:
    timeline = TimelineWidget()
    clicks = []
    timeline.on_click(lambda curve, point: clicks.append((curve, point)))
    for junk in ("click", {"event": "hover"}, {"event": "click", "curve": "0", "point": 1}):
        timeline._handle_message(timeline, junk, [])
    timeline._handle_message(timeline, {"event": "click", "curve": 2, "point": 7}, [])
    assert clicks == [(2, 7)]
    timeline.on_click(None)
    timeline._handle_message(timeline, {"event": "click", "curve": 2, "point": 8}, [])
    assert clicks == [(2, 7)]


def test_a_view_without_plotly_in_its_frame_gets_the_gzipped_bundle_from_its_timeline() -> None:
    """Colab and VS Code: a view that finds no plotly.js in its frame sends need_plotly; the
    widget answers with the holder's bundle, one binary buffer, to that widget's views only."""
    with recorded() as traffic:
        timeline = TimelineWidget()
        traffic.messages.clear()
        # As ipywidgets delivers a custom message: Widget._handle_msg -> _handle_custom_msg.
        timeline._handle_custom_msg({"event": "need_plotly"}, [])
        timeline._handle_custom_msg({"event": "need_plotlyjs"}, [])  # anything else: no reply
    [(data, buffers)] = traffic.messages
    assert data == {"method": "custom", "content": {"event": "plotly", "digest": holder().digest}}
    assert buffers == [holder().bundle_gz]
    assert gzip.decompress(buffers[0]) == bundle_path().read_bytes()
    assert hashlib.sha256(gzip.decompress(buffers[0])).hexdigest() == holder().digest
    assert 1 * MB < traffic.message_bytes < 2 * MB  # gzipped, not the 4.8 MB file nor base64


def test_embedding_a_timeline_takes_the_holder_along() -> None:
    timeline = TimelineWidget()
    assert holder().model_id in dependency_state([timeline])


def test_a_panel_never_imports_nbformat_or_plotlys_python_figures() -> None:
    """plotly.basewidget -> plotly.io -> nbformat -> jsonschema's grammars cost over a second
    in a fresh kernel (issue 11): the panel draws with plotly.js and needs none of it."""
    trace = "tfplace_widget/examples/gpu_traces/riptide/timeline.ctf.json"
    code = (
        "import sys\n"
        "from tfplace_widget._widgets.panel import show_placement\n"
        f"panel = show_placement({trace!r})\n"
        "panel.search.value = 'conv'\n"
        "panel.table.selected_op = panel.trace.ops['op'].iloc[0]\n"
        "assert panel.timeline.drawn()\n"
        "print(sorted(m for m in ('nbformat', 'jsonschema', 'plotly') if m in sys.modules))\n"
    )
    done = run_python(code)
    assert done.stdout.strip() == "[]"


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


def test_a_keystroke_sends_only_the_overlays_and_an_unchanged_one_nothing() -> None:
    devices = [f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(2)]
    events = _events(8_000, devices)  # WebGL, every event drawn
    transfers = pd.DataFrame(columns=["tensor", "src_device", "dst_device"])
    mask = events["op"].str.contains("block_7/").to_numpy()
    with recorded() as traffic:  # the widget's comm records all it sends
        timeline = Timeline(events, devices, transfers, {})
        built = traffic.message_bytes
        timeline.highlight(mask)
        keystroke = traffic.message_bytes - built
        timeline.highlight(mask)
        same = traffic.message_bytes - built - keystroke
    print(f"\nkeystroke over 8k events: {keystroke / 1024:.1f} KB")
    assert 0 < keystroke < 250 * 1024  # at most MAX_MATCH_BARS outlined bars
    assert same == 0
    assert timeline.matches_shown == mask.sum() == 80
    assert timeline.highlighted_ops() == set(events["op"][mask])
