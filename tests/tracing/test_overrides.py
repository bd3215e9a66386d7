"""trace_placement(overrides=...) in graph mode (issue 13); function mode: test_function_mode.py."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import CPU0, CPU1

from tfplace_widget._analyses.compare import compare


def _row(trace: Any, op: str) -> Any:
    return trace.ops.set_index("op").loc[op]


@pytest.fixture(scope="module")
def plain(trace_placement, seed_builders):
    return trace_placement(seed_builders["inputs_none"], device_count={"CPU": 2})


def test_an_override_by_name_moves_the_op_and_says_why(trace_placement, seed_builders, plain):
    moved = trace_placement(
        seed_builders["inputs_none"], device_count={"CPU": 2}, overrides={"C": "/cpu:0"}
    )
    c = _row(moved, "C")
    assert (c.device, c.how, c.requested_device) == (CPU0, "explicit", "/device:CPU:0")
    assert (
        c.reason == "Requested /device:CPU:0 through overrides ('C'); placed exactly there (CPU:0)."
    )
    diff = compare(plain, moved)
    assert list(diff.moved["op"]) == ["C"]
    # The inputs no longer cross devices: A's and B's transfers are gone, none is added.
    assert set(diff.transfers["status"]) == {"only_a"}
    assert not len(moved.transfers)


def test_an_override_by_glob_moves_exactly_the_matching_ops(trace_placement, seed_builders, plain):
    moved = trace_placement(
        seed_builders["inputs_none"], device_count={"CPU": 2}, overrides={"A*": "/cpu:1"}
    )
    diff = compare(plain, moved)
    graph_ops = {"A", "A/Const", "A/shape_as_tensor"}
    assert set(diff.moved["op"]) == graph_ops
    assert {_row(moved, op).device for op in graph_ops} == {CPU1}
    assert all("through overrides ('A*')" in _row(moved, op).reason for op in graph_ops)
    # A now lives with C: its transfer is gone; B's still crosses.
    tensors = set(diff.transfers["tensor"][diff.transfers["status"] == "only_a"])
    assert "A:0" in tensors and "B:0" not in tensors


def test_an_override_to_a_missing_device_follows_soft_placement(trace_placement, seed_builders):
    moved = trace_placement(
        seed_builders["inputs_none"], device_count={"CPU": 2}, overrides={"C": "/gpu:0"}
    )
    c = _row(moved, "C")
    assert (c.device, c.how) == (CPU0, "soft")
    assert c.reason.startswith("Requested /device:GPU:0 through overrides ('C'), which does not")


def test_an_override_matching_nothing_names_the_closest_ops(trace_placement, seed_builders):
    with pytest.raises(ValueError, match=r"'CC' \(closest: 'C'"):
        trace_placement(seed_builders["inputs_none"], overrides={"CC": "/cpu:0"})


@pytest.mark.parametrize(
    ("overrides", "error", "text"),
    [
        (["C"], TypeError, "overrides must be a dict"),
        ({"C": 0}, TypeError, r"overrides\['C'\] must be a device string"),
        ({"": "/cpu:0"}, TypeError, "keys are op names or globs"),
        ({"C": "/cpu:zero"}, ValueError, r"overrides\['C'\]"),
    ],
)
def test_bad_overrides_are_refused_before_anything_runs(overrides, error, text):
    from tfplace_widget import trace_placement

    def never_built() -> Any:
        raise AssertionError("the builder ran")

    with pytest.raises(error, match=text):
        trace_placement(never_built, overrides=overrides)
