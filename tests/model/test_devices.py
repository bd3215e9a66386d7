"""Device names: old (``/gpu:0``) and new (``/device:GPU:0``) spellings, lanes, order, matching.

TensorFlow's own ``tf.DeviceSpec`` is the oracle for parsing and canonical names.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import CPU0, CPU1, GPU0
from hypothesis import given, settings
from hypothesis import strategies as st

from tfplace_widget._model.devices import (
    DeviceSpec,
    canonical_device,
    device_sort_key,
    lane_kind,
    lane_owner,
    parse_device,
    short_device,
)

GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"


@pytest.mark.parametrize(
    "name",
    [
        "/gpu:0",
        "gpu:0",
        "GPU:0",
        "/device:GPU:0",
        "/device:gpu:0",
        "/job:localhost/replica:0/task:0/gpu:0",
        "/job:localhost/replica:0/task:0/device:GPU:0",
        "/job:localhost/device:GPU:0",
        # step_stats lanes belong to their device
        "/gpu:0/stream:all",
        "/gpu:0/stream:12",
        "/gpu:0/memcpy",
        "/device:GPU:0/stream:7",
        "/device:GPU:0/stream:all",
        "/device:GPU:0/stream:7<MemcpyH2D>",
        "/device:GPU:0/stream:13<MemcpyD2H>",
        "/device:GPU:0/memcpy",
        "/device:GPU:0/sync",
        "/device:GPU:0/stream:",
    ],
)
def test_old_and_new_gpu_names_are_one_device(name):
    assert canonical_device(name) == GPU0
    assert short_device(name) == "GPU:0"


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("/cpu:0", CPU0),
        ("/job:localhost/replica:0/task:0/cpu:0", CPU0),
        ("/job:localhost/replica:0/task:0/cpu:1", CPU1),
        ("/device:CPU:1", CPU1),
        ("/gpu:1", GPU1),
        ("/job:worker/replica:1/task:2/device:TPU:3", "/job:worker/replica:1/task:2/device:TPU:3"),
        ("/device:XLA_GPU:0", "/job:localhost/replica:0/task:0/device:XLA_GPU:0"),
        ("", ""),
        ("/job:localhost", "/job:localhost"),  # no device type: not a device, left alone
        ("/device:GPU:*", "/device:GPU:*"),  # no index: a request, not a device
        ("Allocators", "Allocators"),  # a Chrome-trace process that is not a device
    ],
)
def test_canonical_device(name, canonical):
    assert canonical_device(name) == canonical


@pytest.mark.parametrize(
    ("lane", "kind", "owner"),
    [
        (CPU0, "device", CPU0),
        (
            "/job:localhost/replica:0/task:0/gpu:0",
            "device",
            "/job:localhost/replica:0/task:0/gpu:0",
        ),
        ("/gpu:0/stream:all", "stream:all", "/gpu:0"),
        ("/gpu:0/stream:12", "stream", "/gpu:0"),
        ("/gpu:0/memcpy", "memcpy", "/gpu:0"),
        ("/device:GPU:0/stream:7", "stream", "/device:GPU:0"),
        ("/device:GPU:0/stream:all", "stream:all", "/device:GPU:0"),
        ("/device:GPU:0/stream:7<MemcpyH2D>", "memcpy", "/device:GPU:0"),
        ("/device:GPU:0/stream:7<MemcpyP2P>", "memcpy", "/device:GPU:0"),
        ("/device:GPU:0/memcpy", "memcpy", "/device:GPU:0"),
        ("/device:GPU:0/sync", "sync", "/device:GPU:0"),
        ("/device:GPU:0/stream:", "stream", "/device:GPU:0"),
    ],
)
def test_lane_kind_and_owner(lane, kind, owner):
    assert lane_kind(lane) == kind
    assert lane_owner(lane) == owner


def test_display_order_gpus_first_then_by_index():
    names = [
        "/job:localhost/replica:0/task:0/device:CPU:10",
        CPU1,
        "/job:localhost/replica:0/task:0/device:CPU:2",
        GPU1,
        "/job:localhost/replica:0/task:0/device:TPU:0",
        CPU0,
        "/gpu:0",
    ]
    assert [short_device(n) for n in sorted(names, key=device_sort_key)] == [
        "GPU:0",
        "GPU:1",
        "TPU:0",
        "CPU:0",
        "CPU:1",
        "CPU:2",
        "CPU:10",
    ]
    # Tasks sort before types: a worker's devices stay together.
    task1 = "/job:localhost/replica:0/task:1/device:GPU:0"
    assert sorted([task1, CPU0], key=device_sort_key) == [CPU0, task1]


@pytest.mark.parametrize(
    ("request_", "device", "matches"),
    [
        ("/device:CPU:*", CPU1, True),
        ("/cpu:1", CPU1, True),
        ("/cpu:0", CPU1, False),
        ("/job:localhost", CPU1, True),
        ("/job:worker", CPU1, False),
        ("/gpu:0", CPU0, False),
        ("", CPU0, True),
        ("/task:0/device:CPU:1", CPU1, True),
    ],
)
def test_request_matching(request_, device, matches):
    assert parse_device(request_).matches(parse_device(device)) is matches


def test_spec_helpers():
    assert parse_device("").is_empty() and DeviceSpec().short() == ""
    assert parse_device("/device:GPU:*").short() == "GPU:*"
    assert parse_device("/job:worker").short() == ""
    assert parse_device("/cpu").type == "CPU" and parse_device("/cpu").index is None


@pytest.mark.parametrize(
    "bad", ["/cpu:zz", "/device:GPU:x", "/replica:x", "/device:GPU:0:1", "/a b:0"]
)
def test_malformed_names_raise_value_error_with_a_fix(bad):
    with pytest.raises(ValueError, match="Malformed device string") as info:
        parse_device(bad)
    assert "/cpu:0" in str(info.value) or "/device:CPU:0" in str(info.value)


# -- against TensorFlow's own parser ----------------------------------------------------------
@st.composite
def device_strings(draw: Any) -> str:
    """Device strings in the spellings TF accepts: full or partial, old or new style."""
    job = draw(st.sampled_from([None, "localhost", "worker", "ps"]))
    replica = draw(st.one_of(st.none(), st.integers(0, 3)))
    task = draw(st.one_of(st.none(), st.integers(0, 3)))
    kind = draw(st.sampled_from([None, "CPU", "GPU", "TPU"]))
    index = draw(st.sampled_from([None, "*", 0, 1, 2, 7, 15]))
    style = draw(st.sampled_from(["new", "new_lower", "old"]))
    parts = []
    if job is not None:
        parts.append(f"/job:{job}")
    if replica is not None:
        parts.append(f"/replica:{replica}")
    if task is not None:
        parts.append(f"/task:{task}")
    if kind is not None:
        idx = "*" if index is None else index
        if style == "old":
            parts.append(f"/{kind.lower()}:{idx}")
        elif style == "new_lower":
            parts.append(f"/device:{kind.lower()}:{idx}")
        else:
            parts.append(f"/device:{kind}:{idx}")
    return "".join(parts)


@settings(max_examples=300, deadline=None)
@given(name=device_strings())
def test_parse_device_agrees_with_tf_device_spec(tf, name):
    theirs = tf.DeviceSpec.from_string(name)
    mine = parse_device(name)
    # tf.DeviceSpec upper-cases only cpu/gpu ("/device:tpu:0" keeps "tpu"); TF's C++
    # placer compares types case-insensitively, and we always upper-case.
    their_type = theirs.device_type.upper() if theirs.device_type else None
    assert (mine.job, mine.replica, mine.task, mine.type, mine.index) == (
        theirs.job,
        theirs.replica,
        theirs.task,
        their_type,
        theirs.device_index,
    )


@settings(max_examples=300, deadline=None)
@given(name=device_strings(), stream=st.sampled_from(["", "/stream:all", "/stream:7", "/memcpy"]))
def test_canonical_device_agrees_with_tf_merged_spec(tf, name, stream):
    theirs = tf.DeviceSpec.from_string(name)
    if theirs.device_type is None or theirs.device_index is None:
        return  # only concrete devices have a canonical name
    local = tf.DeviceSpec(job="localhost", replica=0, task=0, device_type="CPU", device_index=0)
    merged = local.make_merged_spec(theirs)
    expected = merged.replace(device_type=merged.device_type.upper()).to_string()
    assert canonical_device(name + stream) == expected
    assert canonical_device(expected) == expected  # idempotent


@given(device_strings())
def test_to_string_writes_what_parse_device_reads(text):
    """DeviceSpec.to_string() is TensorFlow's spelling of the same fields."""
    spec = parse_device(text)
    assert parse_device(spec.to_string()) == spec
    if spec.type is not None and spec.index is not None:
        assert spec.to_string().endswith(f"/device:{spec.type}:{spec.index}")
