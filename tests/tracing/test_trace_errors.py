"""Every error of issues 2 and 11: a TraceError that says what went wrong and how to fix it, a
ValueError for a bad value, or a TypeError for an argument of the wrong type."""

from __future__ import annotations

import errno
import os
import time
from typing import Any

import pytest
from helpers import TWO_CPUS

import tfplace_widget
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


@pytest.mark.parametrize(
    ("shape", "said"),
    [
        ("alone", "returned the eager tensor <tf.Tensor"),
        ("with graph ops", "returned the eager tensor <tf.Tensor"),
        ("as an op input", "uses an eager tensor or variable made outside it"),
        ("a variable", "returned the eager variable <tf.Variable"),
    ],
)
def test_an_eager_tensor_made_outside_the_builder_belongs_to_no_graph_built_here(
    tf, trace_placement, shape, said
):
    """``mode="graph"`` never falls back to TF2: it says why the Session cannot use it."""
    outside = tf.Variable(2.0) if shape == "a variable" else tf.constant(3.0)

    def build():
        if shape == "alone":
            return outside
        if shape == "as an op input":
            return tf.add(outside, 1.0, name="uses_it")
        return [tf.constant(1.0, name="made_here"), outside]

    with pytest.raises(TraceError) as info:
        trace_placement(build, mode="graph")
    message = str(info.value)
    assert said in message
    assert "belongs to no graph, and to none built here" in message
    assert "Create it inside the builder" in message and "mode='function'" in message
    assert type(info.value) is TraceError  # not a private subclass


def _outer_graph(tf: Any) -> Any:
    outer = tf.Graph()
    with outer.as_default():
        tf.constant(0.0, name="existing")
        outer.add_to_collection("mine", "existing entry")
    return outer


def _graph_state(graph: Any) -> dict[str, Any]:
    return {
        "ops": [op.name for op in graph.get_operations()],
        "collections": {key: graph.get_collection(key) for key in graph.get_all_collection_keys()},
        "next Add name": graph.unique_name("Add", mark_as_used=False),
        "next stray name": graph.unique_name("stray", mark_as_used=False),
        "functions": len(graph.as_graph_def().library.function),
    }


@pytest.mark.parametrize(
    ("write", "said"),
    [
        ("as_default", "the op 'stray' (Const)"),
        ("create_op", "the op 'stray' (NoOp)"),
        ("name_scope", "the name 'stray'"),
        ("import_graph_def", "the name 'import'"),
        ("collection", "an entry of the collection 'mine'"),
        ("swallowed", "the op 'stray' (Const)"),
    ],
)
def test_a_builder_writing_into_an_outer_graph_is_told_and_the_graph_is_left_as_it_was(
    tf, trace_placement, write, said
):
    outer = _outer_graph(tf)
    before = _graph_state(outer)
    other = tf.Graph()
    with other.as_default():
        tf.constant(1.0, name="imported")
    imported = other.as_graph_def()

    def build():
        mine = tf.constant(1.0, name="mine")
        if write == "as_default":
            with outer.as_default():
                tf.constant(1.0, name="stray")
        elif write == "create_op":
            outer.create_op("NoOp", [], [], name="stray")
        elif write == "name_scope":
            with outer.as_default():
                tf.add(outer.get_tensor_by_name("existing:0"), 1.0, name="stray")
        elif write == "import_graph_def":
            with outer.as_default():
                tf.graph_util.import_graph_def(imported)
        elif write == "collection":
            outer.add_to_collection("mine", mine)
        else:  # the builder catches the refusal and goes on: still told
            try:
                with outer.as_default():
                    tf.constant(1.0, name="stray")
            except Exception:
                pass
        return mine

    with pytest.raises(TraceError) as info:
        trace_placement(build)
    message = str(info.value)
    assert "writes into a tf.Graph made outside it" in message and said in message
    assert "the write was refused and that graph is unchanged" in message
    assert "drop `with graph.as_default():`" in message
    assert _graph_state(outer) == before
    with outer.as_default():  # the outer graph works as before
        assert tf.add(outer.get_tensor_by_name("existing:0"), 1.0).op.name == "Add"


def test_the_users_global_default_graph_is_an_outer_graph_too(tf, trace_placement):
    default = tf.compat.v1.get_default_graph()
    before = [op.name for op in default.get_operations()]

    def build():
        with default.as_default():
            tf.constant(1.0, name="into_the_global_graph")
        return tf.constant(2.0)

    with pytest.raises(TraceError, match="writes into a tf.Graph made outside it"):
        trace_placement(build)
    assert [op.name for op in default.get_operations()] == before


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


def test_feeding_the_fetched_tensor_says_that_no_op_ran(tf, trace_placement):
    """A Session hands a fed fetch straight back: no op runs, so there is nothing to place."""
    with pytest.raises(TraceError) as info:
        trace_placement(_placeholder_builder(tf), feed_dict={"scaled": [1.0, 2.0]})
    message = str(info.value)
    assert "feed_dict feeds 'scaled:0', which the builder also returns" in message
    assert "runs no op for it" in message and "nothing to place" in message
    assert "placeholders in the graph: images" in message


# -- one-shot inputs and the warm-up ---------------------------------------------------------
def _dataset_builder(tf: Any, elements: int) -> Any:
    def build():
        dataset = tf.data.Dataset.range(elements)
        batch = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
        return tf.add(batch, 1, name="out")

    return build


@pytest.mark.parametrize(
    ("elements", "options", "said"),
    [
        (
            1,
            {},
            "The dataset ran out (OutOfRangeError at 'IteratorGetNext') during the traced "
            "step: the untraced warm-up step (warmup=1) consumed its only element; pass warmup=0",
        ),
        (
            2,
            {"warmup": 2},
            "during the traced step: the untraced warm-up steps (warmup=2) consumed what it "
            "had; pass warmup=0",
        ),
        (1, {"warmup": 0, "steps": 2}, "during traced step 2 of 2: the 1 step(s) before it"),
        (1, {"warmup": 2}, "during untraced warm-up step 2 of warmup=2"),
        (0, {"warmup": 0}, "during the traced step, before any step had run"),
    ],
)
def test_a_one_shot_input_that_runs_out_names_the_run_that_took_it(
    tf, trace_placement, elements, options, said
):
    with pytest.raises(TraceError) as info:
        trace_placement(_dataset_builder(tf, elements), **options)
    message = str(info.value)
    assert said in message
    assert "End of sequence" in message  # what TensorFlow said, without its Python stack
    assert "Original stack trace" not in message and not message.rstrip().endswith(":")
    assert isinstance(info.value.__cause__, tf.errors.OutOfRangeError)


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
    "read",
    [
        lambda path: PlacementTrace.from_chrome_trace(path / "missing.json"),
        lambda path: PlacementTrace.from_run_metadata(str(path / "missing.pb")),
        lambda path: PlacementTrace.from_run_metadata(str(path / "missing.pbtxt")),
        lambda path: tfplace_widget.show_placement(path / "missing.json.gz"),
    ],
    ids=["chrome", "binary", "text", "show_placement"],
)
def test_a_missing_trace_file_raises_file_not_found_error(tmp_path, read):
    """Python's convention (``open`` raises it), and still a TraceError for code that catches
    that."""
    with pytest.raises(FileNotFoundError) as info:
        read(tmp_path)
    error = info.value
    assert isinstance(error, TraceError)
    assert error.errno == errno.ENOENT and str(tmp_path) in str(error.filename)
    message = str(error)
    assert message.startswith("Cannot read trace file") and "missing." in message
    assert "No such file or directory" in message and "Check the path" in message
    assert isinstance(error.__cause__, FileNotFoundError)


def test_a_relative_missing_path_names_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as info:
        PlacementTrace.from_chrome_trace("timeline.json")
    assert repr(str(tmp_path)) in str(info.value) and "working directory" in str(info.value)


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
        ({"device_count": {"CPU": 0}}, "from 1 to 64"),
        ({"device_count": {"cpu": 0}}, "from 1 to 64"),
        ({"device_count": {"CPU": -1}}, "device_count"),
        ({"device_count": {"CPU": 1.5}}, "device_count"),
        ({"device_count": {"C PU": 1}}, "device_count"),
        ({"device_scope": "/cpu:zz"}, "Malformed device string"),
        ({"device_scope": 3}, "device_scope"),
        ({"feed_dict": [1.0]}, "feed_dict"),
    ],
)
def test_bad_arguments_raise_value_error(tf, trace_placement, kwargs, match):
    with pytest.raises(ValueError, match=match):
        trace_placement(_constant(tf), **kwargs)


# -- arguments of the wrong type: TypeError, as Python's own --------------------------------
@pytest.mark.parametrize("fn", ["tf.constant(1.0)", 42, None])
def test_a_non_callable_fn_raises_type_error(trace_placement, fn):
    with pytest.raises(TypeError, match="needs a function") as info:
        trace_placement(fn)
    assert f"not {type(fn).__name__}" in str(info.value) and "pass `build`" in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"device_count": [2]}, r"device_count must be a dict like \{'CPU': 2\}, not list"),
        ({"device_count": 2}, "device_count must be a dict like"),
        ({"device_count": "CPU:2"}, "device_count must be a dict like"),
        ({"config": "not a config"}, "config must be a tf.compat.v1.ConfigProto, not str"),
        ({"config": {"device_count": {"CPU": 2}}}, "ConfigProto, not dict"),
    ],
)
def test_options_of_the_wrong_type_raise_type_error(tf, trace_placement, kwargs, match):
    ran = []

    def build():
        ran.append(True)
        return tf.constant(1.0)

    with pytest.raises(TypeError, match=match):
        trace_placement(build, **kwargs)
    assert ran == []  # checked before the builder runs


def test_a_config_of_the_wrong_type_is_a_type_error_for_tf2_code_too(tf, trace_placement):
    with pytest.raises(TypeError, match="ConfigProto, not str"):
        trace_placement(tf.function(lambda x: x + 1), tf.constant(1.0), config="threads=1")


@pytest.mark.parametrize(
    ("call", "named", "closest"),
    [
        (
            lambda fn: tfplace_widget.trace_placement(fn, devcie_count={"CPU": 2}),
            "'devcie_count'",
            "device_count",
        ),
        (lambda fn: tfplace_widget.trace_placement(fn, warm_up=0), "'warm_up'", "warmup"),
        (
            lambda fn: tfplace_widget.show_placement(fn, soft_placment=False),
            "'soft_placment'",
            "soft_placement",
        ),
    ],
    ids=["trace_placement", "trace_placement-warmup", "show_placement"],
)
def test_an_unknown_option_raises_type_error_naming_the_closest(tf, call, named, closest):
    with pytest.raises(TypeError) as info:
        call(_constant(tf))
    message = str(info.value)
    assert f"Unknown option {named}" in message and f"Did you mean {closest!r}?" in message


def test_bad_from_run_metadata_arguments(tf):
    with pytest.raises(ValueError, match="run_metadata must be"):
        PlacementTrace.from_run_metadata(12)
    metadata = tf.compat.v1.RunMetadata()
    metadata.step_stats.dev_stats.add(device="/job:localhost/replica:0/task:0/device:CPU:0")
    with pytest.raises(ValueError, match="graph must be"):
        PlacementTrace.from_run_metadata(metadata, graph=42)
    with pytest.raises(ValueError, match="not a serialized GraphDef"):
        PlacementTrace.from_run_metadata(metadata, graph=b"\xff\xff garbage")
