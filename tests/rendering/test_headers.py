"""The header line of the panel (and HTML report) and of the text report counts devices in
words a reader expects: one op on one device, two ops on two devices."""

from __future__ import annotations

import io

import pytest

from tfplace_widget import PlacementTrace
from tfplace_widget._rendering.html_parts import header_html
from tfplace_widget._rendering.text_report import TextOutput, print_summary

CPU = "/job:localhost/replica:0/task:0/device:CPU:{}"


def _trace(devices: int) -> PlacementTrace:
    from tensorflow.core.protobuf import config_pb2

    metadata = config_pb2.RunMetadata()
    for d in range(devices):
        lane = metadata.step_stats.dev_stats.add(device=CPU.format(d))
        lane.node_stats.add(
            node_name=f"op_{d}",
            all_start_micros=1_700_000_000_000_000 + d,
            all_end_rel_micros=2,
            timeline_label=f"op_{d} = AddV2(x, y)",
        )
    return PlacementTrace.from_run_metadata(metadata)


@pytest.mark.parametrize(("devices", "words"), [(1, "1 op on 1 device"), (2, "2 ops on 2 devices")])
def test_the_headers_count_ops_and_devices_in_words(devices, words):
    trace = _trace(devices)
    assert len(trace.devices) == len(trace.ops) == devices
    assert f": {words} · " in header_html(trace)
    text = io.StringIO()
    print_summary(trace, TextOutput(text, "never"), list_ops=False)
    assert f": {words} (" in text.getvalue().splitlines()[0]
