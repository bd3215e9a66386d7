"""Every copy in the real GPU traces is explained (issue 12), and graph-mode transfers too."""

from __future__ import annotations

from collections import Counter

import pytest
from helpers import GPU_TRACES

from tfplace_widget import PlacementTrace
from tfplace_widget._analyses.copies import CAUSES, COPIES_COLUMNS, explain_copies
from tfplace_widget._model.kernel_registry import MissingRegistryError
from tfplace_widget._tfadapter.registry import REGISTRY

IKHLESTOV = GPU_TRACES / "ikhlestov-tensorflow-profiling"


def _causes(path) -> dict[str, str]:
    copies = explain_copies(PlacementTrace.from_chrome_trace(path), REGISTRY)
    assert list(copies.columns) == COPIES_COLUMNS
    assert set(copies["cause"]) <= set(CAUSES)
    assert copies["reason"].str.len().gt(0).all()
    return dict(zip(copies["producer"], copies["cause"], strict=True))


def test_every_copy_in_every_real_gpu_trace_has_a_cause():
    counted = Counter()
    for path in sorted(GPU_TRACES.rglob("*.json")):
        trace = PlacementTrace.from_chrome_trace(path)
        copies = explain_copies(trace, REGISTRY)
        assert len(copies) == len(trace.transfers)
        counted.update(copies["cause"])
    # No copy in them comes from an op that ran on the CPU: every GPU-side copy is an input,
    # a host-memory output (int32 values, shapes) or a result going back to the host.
    assert set(counted) == {"input", "host_memory_output", "to_host"}
    assert sum(counted.values()) == 26 == 1 + 6 + 6 + 11 + 2


def test_a_gpu_ops_copy_to_the_gpu_asks_the_registry_handed_in():
    """A Chrome trace has no graph facts, so no registry of its own: whether the GPU kernel of
    a GPU op kept its output in host memory is asked of the one handed in, never of whatever
    TensorFlow the process imports (issue 32)."""
    trace = PlacementTrace.from_chrome_trace(GPU_TRACES / "kittibox" / "timeline_01.json")
    with pytest.raises(MissingRegistryError, match="explain_copies"):
        explain_copies(trace)


def test_kittibox_int32_chains_are_host_memory_round_trips():
    causes = _causes(GPU_TRACES / "kittibox" / "timeline_01.json")
    assert causes["_arg_Placeholder_0_0"] == "input"
    # int32 Add on the "GPU" computes in host memory; its GPU consumer needs a copy back, and
    # the ToInt32 casts' results go down to those host-memory adds.
    for n in (37, 39, 41, 43):
        assert causes[f"Validation/decoder/add_{n}"] == "host_memory_output"
    for suffix in ("", "_1", "_2", "_3"):
        assert causes[f"Validation/decoder/ToInt32{suffix}"] == "to_host"


def test_feeds_gradient_shapes_and_fetches_in_ikhlestovs_traces():
    causes = _causes(IKHLESTOV / "GPU_timeline_02_step_0.json")
    assert causes["_recv_Placeholder_0"] == causes["_recv_Placeholder_1_0"] == "input"
    assert causes["gradients/Mean_grad/Shape"] == "host_memory_output"  # an int32 Const
    assert causes["gradients/Mean_grad/floordiv"] == "host_memory_output"  # int32 Div
    assert causes["gradients/Mean_grad/Prod"] == "to_host"
    assert _causes(IKHLESTOV / "GPU_timeline_01.json") == {"MatMul": "to_host"}  # the fetch


def test_graph_mode_transfers_name_their_producer(seed_cpu):
    copies = explain_copies(seed_cpu).set_index("producer")
    assert set(copies.index) == {"A", "B", "C"}
    assert set(copies["cause"]) == {"cross_device"}
    assert "A ran on CPU:0 and an op on CPU:1 reads its output" in copies.loc["A", "reason"]
