"""Every error of issue 2: a TraceError that says what went wrong and how to fix it, or ValueError."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from conftest import TWO_CPUS

from tfplace_widget import PlacementTrace, TraceError


def _constant(tf: Any) -> Any:
    def build():
        return tf.constant(1.0, name="c")

    return build


# -- the builder ------------------------------------------------------------------------------
def test_builder_that_raises_is_chained(trace_placement):
    def build():
        raise ZeroDivisionError("the builder's own bug")

    with pytest.raises(TraceError) as info:
        trace_placement(build)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert "ZeroDivisionError" in str(info.value) and "the builder's own bug" in str(info.value)


def test_builder_tf_error_is_chained(tf, trace_placement):
    def build():
        return tf.add(tf.constant([1.0, 2.0]), tf.constant([1.0, 2.0, 3.0]))  # shapes clash

    with pytest.raises(TraceError) as info:
        trace_placement(build)
    assert isinstance(info.value.__cause__, ValueError)


@pytest.mark.parametrize(
    ("returned", "shown"),
    [(42, "42 (a int)"), ({"ok": None, "bad": "text"}, "'text' (a str)"), ([1.5], "1.5")],
)
def test_wrong_fetch_type(tf, trace_placement, returned, shown):
    def build():
        fetch = tf.constant(1.0, name="c")
        if isinstance(returned, dict):
            return {**returned, "ok": fetch}
        return returned

    with pytest.raises(TraceError, match="cannot fetch") as info:
        trace_placement(build)
    assert shown in str(info.value) and "Return a Tensor, an Operation" in str(info.value)


def test_fetch_from_another_graph(tf, trace_placement):
    elsewhere = tf.Graph()
    with elsewhere.as_default():
        stray = tf.constant(1.0, name="stray")

    def build():
        tf.constant(2.0, name="here")
        return stray

    with pytest.raises(TraceError, match="another graph") as info:
        trace_placement(build)
    assert "'stray:0'" in str(info.value)


@pytest.mark.parametrize("returned", [None, []])
def test_empty_graph(trace_placement, returned):
    with pytest.raises(TraceError, match="built no ops"):
        trace_placement(lambda: returned)


@pytest.mark.parametrize(
    ("returned", "shown"), [(42, "returned int 42"), ("text", "returned str 'text'")]
)
def test_a_builder_that_returns_a_plain_value_says_what_it_returned(
    trace_placement, returned, shown
):
    with pytest.raises(TraceError) as info:
        trace_placement(lambda: returned)
    message = str(info.value)
    assert shown in message and "cannot fetch" in message
    assert "built no ops" not in message


# -- feeds ------------------------------------------------------------------------------------
def _placeholder_builder(tf: Any) -> Any:
    def build():
        x = tf.compat.v1.placeholder(tf.float32, [2], name="images")
        return tf.multiply(x, 2.0, name="scaled")

    return build


def test_missing_feed_names_the_placeholder(tf, trace_placement):
    with pytest.raises(TraceError) as info:
        trace_placement(_placeholder_builder(tf))
    message = str(info.value)
    assert "'images'" in message and "feed_dict={'images': value}" in message
    assert isinstance(info.value.__cause__, tf.errors.InvalidArgumentError)


def test_feed_for_a_tensor_that_does_not_exist_lists_the_placeholders(tf, trace_placement):
    with pytest.raises(TraceError) as info:
        trace_placement(_placeholder_builder(tf), feed_dict={"imagez": [1.0, 2.0]})
    assert "'imagez'" in str(info.value) and "Placeholders in the graph: images" in str(info.value)
    assert isinstance(info.value.__cause__, (KeyError, ValueError))


def test_feed_of_the_wrong_shape(tf, trace_placement):
    with pytest.raises(TraceError, match="shape") as info:
        trace_placement(_placeholder_builder(tf), feed_dict={"images": [1.0, 2.0, 3.0]})
    assert info.value.__cause__ is not None


# -- devices ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("request_", "named"), [("/gpu:0", "/device:GPU:0"), ("/cpu:7", "/device:CPU:7")]
)
def test_missing_device_with_soft_placement_off(tf, trace_placement, request_, named):
    def build():
        with tf.device(request_):
            return tf.constant(1.0, name="pinned")

    with pytest.raises(TraceError) as info:
        trace_placement(build, device_count=TWO_CPUS, soft_placement=False)
    message = str(info.value)
    assert "'pinned'" in message and named in message
    assert "CPU:0, CPU:1" in message  # the devices that exist
    assert "soft_placement=True" in message
    assert isinstance(info.value.__cause__, tf.errors.InvalidArgumentError)


# -- timeout ----------------------------------------------------------------------------------
def test_timeout(tf, trace_placement):
    """A dequeue from a queue nobody fills blocks until RunOptions.timeout_in_ms stops it."""

    def build():
        queue = tf.compat.v1.FIFOQueue(3, tf.float32, name="queue")
        return queue.dequeue(name="wait_forever")

    started = time.monotonic()
    with pytest.raises(TraceError, match=r"timeout_s=0\.2") as info:
        trace_placement(build, timeout_s=0.2)
    assert time.monotonic() - started < 10
    assert isinstance(info.value.__cause__, tf.errors.DeadlineExceededError)


def test_operation_timeout_in_ms_of_the_config_is_named(tf, trace_placement):
    """The session's own limit (ConfigProto.operation_timeout_in_ms) stops the run: the
    message names that setting, not timeout_s, which was not given."""

    def build():
        return tf.compat.v1.FIFOQueue(3, tf.float32, name="queue").dequeue(name="wait_forever")

    config = tf.compat.v1.ConfigProto(operation_timeout_in_ms=200)
    with pytest.raises(TraceError) as info:
        trace_placement(build, config=config)
    message = str(info.value)
    assert "operation_timeout_in_ms=200" in message and "config" in message
    assert "timeout_s=None" not in message
    assert isinstance(info.value.__cause__, tf.errors.DeadlineExceededError)


@pytest.mark.parametrize(
    "timeout_s", [float("nan"), float("inf"), float("-inf"), -0.5, 1e30, 10**12]
)
def test_timeout_s_is_checked_before_the_builder_runs(trace_placement, timeout_s):
    ran = []

    def build():
        ran.append(True)
        raise AssertionError("the builder ran")

    with pytest.raises(ValueError, match="timeout_s must be a positive number") as info:
        trace_placement(build, timeout_s=timeout_s)
    assert repr(timeout_s) in str(info.value)
    assert ran == []


def test_output_fds_are_restored_after_an_error(tf, trace_placement, capfd):
    with pytest.raises(TraceError):
        trace_placement(_placeholder_builder(tf))
    os.write(1, b"fd1 still works\n")
    os.write(2, b"fd2 still works\n")
    out, err = capfd.readouterr()
    assert "fd1 still works" in out and "fd2 still works" in err


# -- files that are not traces ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("empty.json", b"", "is empty"),
        ("text.json", b"not json at all", "not a Chrome-trace JSON"),
        ("binary.json", bytes(range(256)), "not a Chrome-trace JSON"),
        ("object.json", b'{"a": 1}', "no 'traceEvents' list"),
        ("no_ops.json", b'{"traceEvents": []}', "no op events"),
        ("list.json", b'[{"ph": "M", "name": "process_name", "pid": 1}]', "no op events"),
    ],
)
def test_chrome_file_that_is_not_a_trace(tmp_path, name, content, match):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(TraceError, match=match) as info:
        PlacementTrace.from_chrome_trace(path)
    assert name in str(info.value)


def test_chrome_file_that_does_not_exist(tmp_path):
    with pytest.raises(TraceError, match="No such file") as info:
        PlacementTrace.from_chrome_trace(tmp_path / "missing.json")
    assert isinstance(info.value.__cause__, OSError)


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("empty.pb", b"", "is empty"),
        ("random.pb", bytes(range(256)) * 4, "not a RunMetadata proto"),
        ("trace.json", b'{"traceEvents": []}', "not a RunMetadata proto"),
        ("text.pbtxt", b"this is { not a proto", "not a text RunMetadata"),
        ("unrelated.pbtxt", b"step_stats { dev_stats { device: 7 } }", "not a text RunMetadata"),
        ("nothing.pbtxt", b"# a comment only\n", "no step_stats and no partition graphs"),
    ],
)
def test_run_metadata_file_that_is_not_a_trace(tmp_path, name, content, match):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(TraceError, match=match):
        PlacementTrace.from_run_metadata(str(path))


def test_run_metadata_bytes_that_are_not_a_trace():
    with pytest.raises(TraceError, match="not a RunMetadata proto") as info:
        PlacementTrace.from_run_metadata(b"\xff\xff\xff garbage")
    assert info.value.__cause__ is not None
    with pytest.raises(TraceError, match="no step_stats"):
        PlacementTrace.from_run_metadata(b"")


def test_run_metadata_proto_without_steps(tf):
    with pytest.raises(TraceError, match="no step_stats"):
        PlacementTrace.from_run_metadata(tf.compat.v1.RunMetadata())


# -- bad arguments: ValueError ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"steps": 0}, "steps"),
        ({"steps": 1001}, "steps"),
        ({"steps": 1.5}, "steps"),
        ({"steps": True}, "steps"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": -1}, "timeout_s"),
        ({"timeout_s": "1"}, "timeout_s"),
        ({"device_count": [2]}, "device_count"),
        ({"device_count": {"CPU": 0}}, "at least 1"),
        ({"device_count": {"cpu": 0}}, "at least 1"),
        ({"device_count": {"CPU": -1}}, "device_count"),
        ({"device_count": {"CPU": 1.5}}, "device_count"),
        ({"device_count": {"C PU": 1}}, "device_count"),
        ({"device_scope": "/cpu:zz"}, "Malformed device string"),
        ({"device_scope": 3}, "device_scope"),
        ({"config": "not a config"}, "ConfigProto"),
        ({"feed_dict": [1.0]}, "feed_dict"),
    ],
)
def test_bad_arguments_raise_value_error(tf, trace_placement, kwargs, match):
    with pytest.raises(ValueError, match=match):
        trace_placement(_constant(tf), **kwargs)


def test_not_a_function_raises_value_error(trace_placement):
    with pytest.raises(ValueError, match="needs a function"):
        trace_placement("tf.constant(1.0)")


def test_bad_from_run_metadata_arguments(tf):
    with pytest.raises(ValueError, match="run_metadata must be"):
        PlacementTrace.from_run_metadata(12)
    metadata = tf.compat.v1.RunMetadata()
    metadata.step_stats.dev_stats.add(device="/job:localhost/replica:0/task:0/device:CPU:0")
    with pytest.raises(ValueError, match="graph must be"):
        PlacementTrace.from_run_metadata(metadata, graph=42)
    with pytest.raises(ValueError, match="not a serialized GraphDef"):
        PlacementTrace.from_run_metadata(metadata, graph=b"\xff\xff garbage")
