"""Issue 5: bad input never breaks the notebook, says what is wrong and how to fix it, and
leaves the user's TensorFlow state alone; panels survive failed runs and do not interfere;
everything that reaches HTML is escaped.

Every trace here is a real ``tf.compat.v1.Session`` run; ``device_count={"CPU": 3}`` gives
three real CPU devices.
"""

from __future__ import annotations

import html
import json
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
import tensorflow as tf
from helpers import conflicting_colocation

from tfplace_widget import (
    PlacementTrace,
    TraceError,
    TraceFileNotFound,
    show_placement,
    trace_placement,
)
from tfplace_widget._widgets.panel import PlacementPanel
from tfplace_widget._widgets.table import OpTable

THREE_CPUS = {"CPU": 3}
CPU = "/job:localhost/replica:0/task:0/device:CPU:{}"
HOSTILE = "<img src=x onerror=alert(1)>"
ESCAPED = "&lt;img src=x onerror=alert(1)&gt;"


# ---------------------------------------------------------------------------------------------
# Builders
# ---------------------------------------------------------------------------------------------
def good_builder():
    with tf.device("/cpu:2"):
        return tf.add(tf.ones((4,), name="ones"), 1.0, name="good")


def assert_next_good_call_works() -> None:
    trace = trace_placement(good_builder, device_count=THREE_CPUS)
    assert trace.device_of("good") == CPU.format(2)
    assert len(trace.devices) == 3


def placeholders_builder():
    images = tf.compat.v1.placeholder(tf.float32, [2], name="images")
    labels = tf.compat.v1.placeholder(tf.float32, [2], name="labels")
    return tf.add(images, labels, name="total")


def string_placeholder_builder():
    text = tf.compat.v1.placeholder(tf.string, [], name="text")
    return tf.strings.length(text, name="length")


def device_builder(device: str, name: str = "pinned") -> Callable[[], Any]:
    def build():
        with tf.device(device):
            return tf.constant(1.0, name=name)

    return build


def colocated_with_missing_gpu():
    with tf.device("/gpu:0"):
        anchor = tf.constant(1.0, name="anchor")
    with tf.compat.v1.colocate_with(anchor.op):
        return tf.add(anchor, 1.0, name="follower")


def group_on_missing_device():
    """The anchor asks for nothing; the op colocated with it asks for a missing GPU."""
    with tf.compat.v1.colocate_with(tf.constant(1.0, name="anchor").op), tf.device("/gpu:0"):
        return tf.constant(2.0, name="pinned_by_group")


def raising_builder():
    tf.constant(1.0, name="before_the_bug")
    raise RuntimeError("half-written builder")


def variable_from_placeholder_builder():
    start = tf.compat.v1.placeholder(tf.float32, [2], name="start")
    return tf.add(tf.Variable(start, name="counter"), 1.0, name="next")


def one_element_dataset_builder():
    dataset = tf.data.Dataset.from_tensors(tf.constant([1.0, 2.0], name="element"))
    return tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()


def writes_into(users_graph: Any) -> Callable[[], Any]:
    """A builder that builds into ``users_graph``, made outside it (the user's global default
    graph, which holds ``users_own_op``: see ``user_default_graph`` below)."""

    def build():
        with users_graph.as_default():
            tf.constant(1.0, name="stray")
        return tf.constant(2.0, name="mine")

    return build


EAGER = tf.constant(3.0)  # an eager tensor made outside every builder


def queue_builder():
    queue = tf.compat.v1.FIFOQueue(3, tf.float32, name="queue")
    return queue.dequeue(name="wait_forever")


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------
def real_run_metadata() -> Any:
    """A RunMetadata from a real FULL_TRACE run (a plain session, closed here)."""
    graph = tf.Graph()
    with graph.as_default():
        out = tf.reduce_sum(tf.ones((8, 8), name="x") * 2.0, name="total")
    v1 = tf.compat.v1
    metadata = v1.RunMetadata()
    options = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE, output_partition_graphs=True)
    with v1.Session(graph=graph) as session:
        session.run(out, options=options, run_metadata=metadata)
    return metadata


def truncated_proto_file(tmp_path: Path) -> Path:
    """A real trace cut short where protobuf itself reports a truncated message."""
    from google.protobuf.message import DecodeError

    data = real_run_metadata().SerializeToString()
    for cut in range(len(data) // 2, len(data)):
        try:
            tf.compat.v1.RunMetadata().ParseFromString(data[:cut])
        except DecodeError:
            path = tmp_path / "cut.pb"
            path.write_bytes(data[:cut])
            return path
    raise AssertionError("no cut point makes a truncated message")  # pragma: no cover


def write(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


CHROME_NO_OPS = json.dumps(
    {
        "traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/cpu:0 Compute"}},
            {"ph": "i", "name": "marker", "pid": 1, "ts": 5},
            {"ph": "X", "name": "stray", "pid": 99, "ts": 5, "dur": 1},  # not a Compute lane
        ]
    }
).encode()
CHROME_ONE_OP = json.dumps(
    {
        "traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/cpu:0 Compute"}},
            {"ph": "X", "pid": 1, "tid": 0, "ts": 5, "dur": 1, "name": "AddV2"},
        ]
    }
).encode()


# ---------------------------------------------------------------------------------------------
# The catalogue
# ---------------------------------------------------------------------------------------------
@dataclass
class Case:
    id: str
    call: Callable[[Path], Any]
    error: type[BaseException]
    problem: list[str]  # the message names what is wrong ...
    fix: list[str]  # ... and how to fix it
    cause: type[BaseException] | None = None  # the original exception, chained
    absent: list[str] = field(default_factory=list)  # what the message must not claim


CATALOGUE = [
    # -- not a function ---------------------------------------------------------------------
    Case(
        "trace_placement-not-callable",
        lambda _: trace_placement("tf.constant(1.0)"),
        TypeError,
        ["needs a function", "not str"],
        ["def build()", "pass `build`"],
    ),
    Case(
        "show_placement-not-callable",
        lambda _: show_placement(42),
        TypeError,
        ["not int"],
        ["a function to trace", "PlacementTrace", "trace file path"],
    ),
    # -- the builder --------------------------------------------------------------------------
    Case(
        "builder-raises",
        lambda _: trace_placement(raising_builder),
        TraceError,
        ["RuntimeError: half-written builder"],
        ["Fix the builder and run again"],
        cause=RuntimeError,
    ),
    Case(
        "show_placement-builder-raises",
        lambda _: show_placement(raising_builder, device_count=THREE_CPUS),
        TraceError,
        ["RuntimeError: half-written builder"],
        ["Fix the builder"],
        cause=RuntimeError,
    ),
    Case(
        "returns-ndarray",
        lambda _: trace_placement(lambda: (tf.constant(1.0), np.ones(3))[1]),
        TraceError,
        ["(a ndarray)", "cannot fetch"],
        ["Return a Tensor, an Operation, or a nested list/tuple/dict"],
    ),
    Case(
        "returns-set",
        lambda _: trace_placement(lambda: {tf.constant(1.0, name="in_a_set")}),
        TraceError,
        ["(a set)", "cannot fetch"],
        ["nested list/tuple/dict"],
    ),
    Case(
        "returns-an-eager-tensor-in-graph-mode",
        lambda _: trace_placement(lambda: [tf.constant(1.0), EAGER], mode="graph"),
        TraceError,
        ["returned the eager tensor", "belongs to no graph, and to none built here"],
        ["Create it inside the builder", "mode='function'"],
    ),
    Case(
        "writes-into-the-users-default-graph",
        lambda _: trace_placement(writes_into(tf.compat.v1.get_default_graph())),
        TraceError,
        ["writes into a tf.Graph made outside it", "the op 'stray' (Const)"],
        ["the write was refused and that graph is unchanged", "drop `with graph.as_default():`"],
        cause=TraceError,
    ),
    Case(
        "builds-nothing",
        lambda _: trace_placement(lambda: print("no ops here", file=sys.stderr)),
        TraceError,
        ["built no ops"],
        ["Create TensorFlow ops inside the function"],
    ),
    # -- feeds --------------------------------------------------------------------------------
    Case(
        "unfed-placeholder",
        lambda _: trace_placement(placeholders_builder, feed_dict={"images": [1.0, 2.0]}),
        TraceError,
        ["Placeholder 'labels' needs a value"],
        ["feed_dict={'labels': value}"],
        cause=tf.errors.InvalidArgumentError,
    ),
    Case(
        "feeds-the-fetch",
        lambda _: trace_placement(placeholders_builder, feed_dict={"total": [1.0, 2.0]}),
        TraceError,
        ["feed_dict feeds 'total:0', which the builder also returns", "runs no op for it"],
        ["feed the placeholders it is computed from", "images, labels"],
    ),
    Case(
        "variable-from-an-unfed-placeholder",
        lambda _: trace_placement(variable_from_placeholder_builder),
        TraceError,
        ["Placeholder 'start' needs a value", "initial value"],
        ["feed_dict={'start': value}"],
        cause=tf.errors.InvalidArgumentError,
    ),
    Case(
        "warm-up-took-the-only-element",
        lambda _: trace_placement(one_element_dataset_builder),
        TraceError,
        ["The dataset ran out", "the untraced warm-up step (warmup=1) consumed its only element"],
        ["pass warmup=0"],
        cause=tf.errors.OutOfRangeError,
        absent=["Original stack trace"],
    ),
    Case(
        "feed-wrong-shape",
        lambda _: trace_placement(
            placeholders_builder, feed_dict={"images": [1.0, 2.0, 3.0], "labels": [1.0, 2.0]}
        ),
        TraceError,
        ["shape (3,)", "images:0", "(2,)"],
        ["shape and dtype must match each placeholder"],
        cause=ValueError,
    ),
    Case(
        "feed-strings-to-float",
        lambda _: trace_placement(
            placeholders_builder, feed_dict={"images": ["a", "b"], "labels": [1.0, 2.0]}
        ),
        TraceError,
        ["feed_dict value", "could not convert string to float"],
        ["shape and dtype must match each placeholder"],
        cause=ValueError,
    ),
    Case(
        "feed-number-to-string",
        lambda _: trace_placement(string_placeholder_builder, feed_dict={"text": 3.0}),
        TraceError,
        ["feed_dict value", "Unsupported object type float"],
        ["shape and dtype must match each placeholder"],
    ),
    Case(
        "feed-unknown-name",
        lambda _: trace_placement(placeholders_builder, feed_dict={"imagez": [1.0, 2.0]}),
        TraceError,
        ["feed_dict names 'imagez'", "no such tensor"],
        ["Placeholders in the graph: images, labels"],
        cause=KeyError,
    ),
    Case(
        "feed-key-not-a-placeholder",
        lambda _: trace_placement(placeholders_builder, feed_dict={3: [1.0, 2.0]}),
        ValueError,
        ["feed_dict keys are placeholders or their names, not 3 (a int)"],
        ["feed_dict={'x': value}"],
    ),
    # -- devices ------------------------------------------------------------------------------
    Case(
        "device_scope-malformed",
        lambda _: trace_placement(good_builder, device_scope="/cpu:x:y"),
        ValueError,
        ["Malformed device string '/cpu:x:y'"],
        ["'/cpu:0'", "'/job:localhost/replica:0/task:0/device:CPU:0'"],
    ),
    Case(
        "show_placement-device_scope-malformed",
        lambda _: show_placement(good_builder, device_scope="gpu-0"),
        ValueError,
        ["Malformed device string 'gpu-0'"],
        ["'/cpu:0'"],
    ),
    Case(
        # TF's Python DeviceSpec rejects it while the builder runs.
        "builder-device-malformed-python",
        lambda _: trace_placement(device_builder("gpu-0")),
        TraceError,
        ["'gpu-0'", "device spec"],
        ["A tf.device(...) string in the builder is malformed", "'/cpu:0'"],
        cause=ValueError,
    ),
    Case(
        # Python accepts a job name with a space; TF's C++ placer does not.
        "builder-device-malformed-runtime",
        lambda _: trace_placement(device_builder("/job:a b/cpu:0", name="c")),
        TraceError,
        ["Op 'c'", "'/job:a b/device:CPU:0'", "cannot parse"],
        ["Fix its tf.device(...) string", "'/cpu:0'"],
        cause=tf.errors.InvalidArgumentError,
        absent=["feed_dict"],
    ),
    Case(
        "missing-cpu-soft-off",
        lambda _: trace_placement(
            device_builder("/cpu:5"), device_count=THREE_CPUS, soft_placement=False
        ),
        TraceError,
        ["'pinned'", "/device:CPU:5", "the devices here are CPU:0, CPU:1, CPU:2"],
        ["soft_placement=True"],
        cause=tf.errors.InvalidArgumentError,
    ),
    Case(
        "missing-gpu-via-colocation-soft-off",
        lambda _: trace_placement(
            colocated_with_missing_gpu, device_count=THREE_CPUS, soft_placement=False
        ),
        TraceError,
        ["/device:GPU:0", "CPU:0, CPU:1, CPU:2"],
        ["soft_placement=True"],
        cause=tf.errors.InvalidArgumentError,
    ),
    Case(
        "colocation-conflict-soft-off",
        lambda _: trace_placement(
            conflicting_colocation, device_count=THREE_CPUS, soft_placement=False
        ),
        TraceError,
        ["'Read/ReadVariableOp' and 'anchor'", "on one device", "'/device:CPU:2'", "CPU:1'"],
        ["Make the requests agree", "soft_placement=True"],
        cause=tf.errors.InvalidArgumentError,
        absent=["feed_dict"],
    ),
    Case(
        "colocation-group-on-missing-device-soft-off",
        lambda _: trace_placement(
            group_on_missing_device, device_count=THREE_CPUS, soft_placement=False
        ),
        TraceError,
        ["'anchor'", "/device:GPU:0, the device its colocation group asks for", "CPU:0, CPU:1"],
        ["soft_placement=True"],
        cause=tf.errors.InvalidArgumentError,
    ),
    Case(
        # Soft placement drops a request's type and index, never its job: this fails anyway.
        "missing-job-soft-on",
        lambda _: trace_placement(device_builder("/job:worker/cpu:0"), device_count=THREE_CPUS),
        TraceError,
        ["'pinned'", "/job:worker/device:CPU:0", "soft placement is on"],
        ["Request one of those", "CPU:0, CPU:1, CPU:2"],
        cause=tf.errors.InvalidArgumentError,
        absent=["soft placement off", "soft_placement=True"],
    ),
    # -- numbers out of range -----------------------------------------------------------------
    Case(
        "steps-zero",
        lambda _: trace_placement(good_builder, steps=0),
        ValueError,
        ["steps", "not 0"],
        ["whole number from 1 to 1000"],
    ),
    Case(
        "steps-huge",
        lambda _: show_placement(good_builder, steps=10**6),
        ValueError,
        ["steps", "not 1000000"],
        ["from 1 to 1000"],
    ),
    Case(
        "device_count-not-a-dict",
        lambda _: trace_placement(good_builder, device_count=[3]),
        TypeError,
        ["device_count", "not list"],
        ["a dict like {'CPU': 2}"],
    ),
    Case(
        "config-not-a-ConfigProto",
        lambda _: trace_placement(good_builder, config={"allow_soft_placement": True}),
        TypeError,
        ["config must be a tf.compat.v1.ConfigProto, not dict"],
        ["config=tf.compat.v1.ConfigProto(", "or leave it out"],
    ),
    Case(
        "device_count-too-many",
        lambda _: trace_placement(good_builder, device_count={"CPU": 65}),
        ValueError,
        ["device_count['CPU']", "not 65"],
        ["whole number from 1 to 64"],
    ),
    Case(
        "device_count-negative-gpu",
        lambda _: trace_placement(good_builder, device_count={"GPU": -1}),
        ValueError,
        ["device_count['GPU']", "not -1"],
        ["from 0 to 64"],
    ),
    Case(
        "device_count-no-cpu",
        lambda _: show_placement(good_builder, device_count={"CPU": 0}),
        ValueError,
        ["device_count['CPU']"],
        ["from 1 to 64", "needs a CPU device"],
    ),
    # -- a timeout ----------------------------------------------------------------------------
    Case(
        "timeout",
        lambda _: trace_placement(queue_builder, timeout_s=0.2),
        TraceError,
        ["longer than timeout_s=0.2 s"],
        ["Raise timeout_s", "make the graph smaller"],
        cause=tf.errors.DeadlineExceededError,
    ),
    # -- unknown keyword arguments ------------------------------------------------------------
    Case(
        "trace_placement-typo",
        lambda _: trace_placement(good_builder, devcie_count=THREE_CPUS),
        TypeError,
        ["Unknown option 'devcie_count' for trace_placement"],
        ["Did you mean 'device_count'?"],
    ),
    Case(
        "trace_placement-typo-with-a-good-option",
        lambda _: trace_placement(good_builder, steps=2, time_out=1.0),
        TypeError,
        ["Unknown option 'time_out'"],
        ["Did you mean 'timeout_s'?"],
    ),
    Case(
        "trace_placement-unknown-no-close-match",
        lambda _: trace_placement(good_builder, colour="red"),
        TypeError,
        ["Unknown option 'colour'"],
        ["Options: fn_kwargs, mode, device_count, soft_placement, optimize, device_scope"],
    ),
    Case(
        "show_placement-typo",
        lambda _: show_placement(good_builder, soft_placment=False),
        TypeError,
        ["Unknown option 'soft_placment' for show_placement"],
        ["Did you mean 'soft_placement'?"],
    ),
    # -- files --------------------------------------------------------------------------------
    Case(
        "file-missing",
        lambda p: show_placement(p / "timeline.json"),
        TraceFileNotFound,  # a TraceError and a FileNotFoundError
        ["Cannot read trace file", "timeline.json", "No such file or directory"],
        ["Check the path"],
        cause=FileNotFoundError,
    ),
    Case(
        "file-not-a-trace-pb",
        lambda p: PlacementTrace.from_run_metadata(str(write(p, "notes.pb", b"\xff" * 64))),
        TraceError,
        ["notes.pb", "not a RunMetadata proto"],
        ["run_metadata.SerializeToString()", "FULL_TRACE"],
    ),
    Case(
        "show_placement-file-not-a-trace-json",
        lambda p: show_placement(write(p, "image.json", b"\x89PNG\r\n\x1a\n" + os.urandom(32))),
        TraceError,
        ["image.json", "not a Chrome-trace JSON"],
        ["generate_chrome_trace_format()"],
        cause=ValueError,
    ),
    Case(
        "file-truncated-pb",
        lambda p: show_placement(truncated_proto_file(p)),
        TraceError,
        ["cut.pb", "not a RunMetadata proto", "truncated"],
        ["run_metadata.SerializeToString()"],
    ),
    Case(
        "file-truncated-json",
        lambda p: PlacementTrace.from_chrome_trace(write(p, "cut.json", CHROME_ONE_OP[:-20])),
        TraceError,
        ["cut.json", "not a Chrome-trace JSON (it may be truncated)"],
        ["generate_chrome_trace_format()"],
        cause=ValueError,
    ),
    Case(
        "file-empty-pb",
        lambda p: show_placement(write(p, "empty.pb", b"")),
        TraceError,
        ["empty.pb", "is empty, not a trace"],
        ["run_metadata.SerializeToString()"],
    ),
    Case(
        "file-empty-json",
        lambda p: show_placement(write(p, "empty.json", b"  \n")),
        TraceError,
        ["empty.json", "is empty"],
        ["timeline.py"],
    ),
    Case(
        "chrome-trace-without-ops",
        lambda p: show_placement(write(p, "no_ops.json", CHROME_NO_OPS)),
        TraceError,
        ["no_ops.json", "no op events"],
        ["Trace a run with FULL_TRACE"],
    ),
    Case(
        "options-for-a-file",
        lambda p: show_placement(write(p, "one.json", CHROME_ONE_OP), soft_placement=False),
        ValueError,
        ["soft_placement", "a trace file is already traced"],
        ["Pass the graph-builder function instead"],
    ),
]


# ---------------------------------------------------------------------------------------------
# TensorFlow's global state
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def user_default_graph() -> Any:
    """The user has built something in the global default graph: it must stay as it is."""
    graph = tf.compat.v1.get_default_graph()
    with graph.as_default():
        tf.constant(1.0, name="users_own_op")
    return graph


def tf_state() -> dict[str, Any]:
    graph = tf.compat.v1.get_default_graph()
    cpu = tf.config.list_physical_devices("CPU")[0]
    return {
        "default graph": graph,
        "default graph ops": [op.name for op in graph.get_operations()],
        "executing eagerly": tf.executing_eagerly(),
        "visible devices": tf.config.get_visible_devices(),
        "logical devices": tf.config.list_logical_devices(),
        "logical device configuration": tf.config.get_logical_device_configuration(cpu),
        "soft device placement": tf.config.get_soft_device_placement(),
        "optimizer options": tf.config.optimizer.get_experimental_options(),
        "jit": tf.config.optimizer.get_jit(),
        "device policy": tf.config.experimental.get_device_policy(),
        "functions run eagerly": tf.config.functions_run_eagerly(),
        "inter-op threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "intra-op threads": tf.config.threading.get_intra_op_parallelism_threads(),
    }


def process_state() -> dict[str, Any]:
    """What the output capture touches: fds 1 and 2 and Python's streams."""
    return {
        "open fds": psutil.Process().num_fds(),
        "fd 1": os.fstat(1).st_ino,
        "fd 2": os.fstat(2).st_ino,
        "sys.stdout": sys.stdout,
        "sys.stderr": sys.stderr,
    }


# ---------------------------------------------------------------------------------------------
# The catalogue, case by case
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CATALOGUE, ids=[c.id for c in CATALOGUE])
def test_bad_input_says_what_and_how_to_fix_and_leaves_no_trace(case, tmp_path):
    assert_next_good_call_works()  # so the state below is the state after a good call
    before, streams = tf_state(), process_state()
    with pytest.raises(case.error) as info:
        case.call(tmp_path)
    error = info.value
    assert type(error) is case.error, f"{type(error).__name__}: {error}"
    message = str(error)
    for needle in case.problem + case.fix:
        assert needle in message, f"{needle!r} not in {message!r}"
    for needle in case.absent:
        assert needle not in message, f"{needle!r} in {message!r}"
    if case.cause is not None:
        assert isinstance(error.__cause__, case.cause), repr(error.__cause__)
        assert error.__cause__.__traceback__ is not None
    assert tf_state() == before
    assert process_state() == streams
    assert_next_good_call_works()


def test_the_builders_own_traceback_is_kept():
    def build():
        tf.constant(1.0)
        helper_that_fails()

    def helper_that_fails():
        raise KeyError("layer_7")

    with pytest.raises(TraceError) as info:
        trace_placement(build)
    cause = info.value.__cause__
    assert isinstance(cause, KeyError)
    frames = [frame.name for frame in traceback.extract_tb(cause.__traceback__)]
    assert frames[-2:] == ["build", "helper_that_fails"]
    # The formatted exception shows both: the builder's traceback, then ours.
    text = "".join(traceback.format_exception(info.value))
    assert "helper_that_fails" in text and "The above exception was the direct cause" in text


def test_a_truncated_trace_file_is_an_error_or_a_shorter_trace_never_a_crash(tmp_path):
    """Cut a real trace at many points: each load is a TraceError naming the file, or (when
    the cut falls between two records, which protobuf cannot tell) a trace of fewer ops."""
    data = real_run_metadata().SerializeToString()
    full = set(PlacementTrace.from_run_metadata(data).ops["op"])
    outcomes = {"error": 0, "trace": 0}
    for cut in sorted(set(np.linspace(0, len(data) - 1, 60).astype(int))):
        path = write(tmp_path, f"cut_{cut}.pb", data[:cut])
        try:
            trace = PlacementTrace.from_run_metadata(str(path))
        except TraceError as exc:
            assert path.name in str(exc)
            outcomes["error"] += 1
        else:
            assert set(trace.ops["op"]) <= full
            outcomes["trace"] += 1
    assert outcomes["error"] > 0


def test_tf_config_is_untouched_in_a_fresh_process(tmp_path):
    """device_count and soft placement apply to the traced session only, even when the
    trace is the first thing the process does with TensorFlow (before the eager context is
    initialised, when changing it would still be possible)."""
    import subprocess

    script = tmp_path / "fresh.py"
    script.write_text(
        "import json, tensorflow as tf\n"
        "from tfplace_widget import trace_placement\n"
        "def build():\n"
        "    with tf.device('/cpu:2'):\n"
        "        return tf.constant(1.0, name='c')\n"
        "trace = trace_placement(build, device_count={'CPU': 3}, soft_placement=False)\n"
        "cpu = tf.config.list_physical_devices('CPU')[0]\n"
        "print(json.dumps({\n"
        "    'traced': trace.device_of('c'),\n"
        "    'logical': [d.name for d in tf.config.list_logical_devices()],\n"
        "    'config': tf.config.get_logical_device_configuration(cpu),\n"
        "    'soft': tf.config.get_soft_device_placement(),\n"
        "    'eager': tf.executing_eagerly(),\n"
        "    'default graph ops': len(tf.compat.v1.get_default_graph().get_operations()),\n"
        "}))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    )
    state = json.loads(done.stdout.strip().splitlines()[-1])
    assert state == {
        "traced": CPU.format(2),
        "logical": ["/device:CPU:0"],
        "config": None,
        "soft": True,
        "eager": True,
        "default graph ops": 0,
    }


# ---------------------------------------------------------------------------------------------
# The panel after errors
# ---------------------------------------------------------------------------------------------
def panel_snapshot(panel: PlacementPanel) -> dict[str, Any]:
    return {
        "trace": panel.trace,
        "visible": list(panel.visible_ops["op"]),
        "header": panel.header.value,
        "status": panel.status.value,
        "rows": [list(r) for r in panel.table.rows],
        "selected": panel.table.selected_op,
        "details": panel.details.value,
        "chips": [c.description for c in panel.chips.children],
        "timeline": [tuple(t["x"]) for t in panel.timeline.drawn() if t.get("x") is not None],
    }


def test_invalid_regex_is_a_message_and_the_table_stays():
    panel = show_placement(good_builder, device_count=THREE_CPUS)
    panel.search.value = "one"
    kept = list(panel.visible_ops["op"])
    assert 0 < len(kept) < len(panel.trace.ops)
    panel.regex.value = True
    for bad in ("good(", "[a-", "*ones", "(?P<x>"):
        panel.search.value = bad  # no exception reaches the caller
        message = panel.message.value
        assert f"Invalid regular expression {bad!r}" in html.unescape(message)
        assert "untick &#x27;regex&#x27;" in message  # the fix, escaped for HTML
        assert list(panel.visible_ops["op"]) == kept
    panel.search.value = "^good$"
    assert panel.message.value == ""
    assert list(panel.visible_ops["op"]) == ["good"]
    panel.regex.value = False
    panel.search.value = "[a-"  # plain text again: a substring, not an error
    assert panel.message.value == "" and panel.visible_ops.empty


def test_failed_reruns_keep_the_last_good_result_then_a_good_run_replaces_it():
    broken = {"how": None}

    def build():
        if broken["how"] == "raise":
            raise RuntimeError("half-written builder")
        if broken["how"] == "missing":
            with tf.device("/cpu:7"):
                return tf.constant(1.0, name="far_away")
        return good_builder()

    panel = show_placement(build, device_count=THREE_CPUS)
    panel.search.value = "good/"
    panel.table.selected_op = "good"
    shown = panel_snapshot(panel)
    searched = sorted(n for n in panel.trace.ops["op"] if "good/" in n)
    assert shown["details"] and sorted(shown["visible"]) == searched
    before = tf_state()

    def fails(expected: list[str]) -> None:
        assert panel.run() is None
        for needle in expected:
            assert needle in panel.message.value, panel.message.value
        assert "The last good result stays on screen." in panel.message.value
        assert panel.error
        assert panel_snapshot(panel) == shown
        assert not panel.rerun.disabled and panel.rerun.description == "Re-run"

    broken["how"] = "raise"
    fails(["TraceError", "RuntimeError: half-written builder"])
    broken["how"] = "missing"
    panel.soft_placement.value = False
    fails(["Cannot place op &#x27;far_away&#x27;", "CPU:0, CPU:1, CPU:2", "soft_placement=True"])
    panel.soft_placement.value = True
    broken["how"] = None
    panel.device_scope.value = "/cpu:x:y"
    fails(["ValueError", "Malformed device string"])
    panel.device_scope.value = ""
    panel.options["timeout_s"] = 0.2
    broken["how"] = "raise"
    fails(["half-written"])
    panel.options.pop("timeout_s")
    assert tf_state() == before

    broken["how"] = None
    panel.cpus.value = 3
    trace = panel.run()
    assert trace is not None and panel.trace is trace and trace is not shown["trace"]
    assert panel.message.value == "" and panel.error == ""
    assert sorted(panel.visible_ops["op"]) == searched  # the search is kept across runs
    assert tf_state() == before


# ---------------------------------------------------------------------------------------------
# Two panels
# ---------------------------------------------------------------------------------------------
def chain_builder():
    x = tf.constant(1.0, name="start")
    for i in range(6):
        with tf.device(f"/cpu:{i % 2}"):
            x = tf.add(x, 1.0, name=f"link_{i}")
    return x


def test_two_panels_do_not_interfere():
    first = show_placement(good_builder, device_count=THREE_CPUS)
    second = show_placement(chain_builder, device_count={"CPU": 2})
    assert first.timeline is not second.timeline
    assert first.table is not second.table and first.search is not second.search
    second_before = panel_snapshot(second)

    first.search.value = "good"
    first.table.selected_op = "good"
    first.chips.children[0].value = True  # a device filter on the first panel
    assert panel_snapshot(second) == second_before
    assert second.view_state.device_filter == set()

    second.search.value = "link_3"
    second.table.selected_op = "link_3"
    assert first.table.selected_op == "good"
    assert set(first.visible_ops["op"]) <= {n for n in first.trace.ops["op"] if "good" in n}
    assert "link_3" in second.details.value and "link_3" not in first.details.value

    # Re-run the first panel with other settings while the second is shown.
    second_before = panel_snapshot(second)
    first.chips.children[0].value = False
    first.cpus.value = 2
    first.device_scope.value = "/cpu:1"
    assert first.run() is not None
    assert len(first.trace.devices) == 2
    assert panel_snapshot(second) == second_before
    # ... and a failing re-run of the first does not show its error in the second.
    first.device_scope.value = "/cpu:x:y"
    assert first.run() is None
    assert first.message.value and second.message.value == ""
    assert panel_snapshot(second) == second_before


def test_two_panels_over_one_trace_share_nothing_but_the_trace():
    trace = trace_placement(chain_builder, device_count={"CPU": 2})
    ops_before = trace.ops.copy()
    first, second = show_placement(trace), show_placement(trace)
    first.search.value = "link"
    first.table.sort_by, first.table.sort_ascending = "op", False
    second.search.value = "start"
    assert set(first.visible_ops["op"]) == {n for n in trace.ops["op"] if "link" in n}
    assert list(second.visible_ops["op"]) == ["start"]
    assert list(first.visible_ops["op"]) == sorted(first.visible_ops["op"], reverse=True)
    first.table.selected_op = "link_0"
    assert second.table.selected_op == "" and second.details.value == ""
    assert trace.ops.equals(ops_before)


# ---------------------------------------------------------------------------------------------
# Escaping
# ---------------------------------------------------------------------------------------------
def html_of(panel: PlacementPanel) -> dict[str, str]:
    """Everything the panel hands the browser as HTML (or as plotly.js's HTML-like text)."""
    panel.log_section.selected_index = 0  # open the log so it renders
    hover = []
    for data in panel.timeline.drawn():
        for attribute in ("hovertext", "text"):
            values = data.get(attribute)
            if values is not None and not isinstance(values, str):
                hover.extend(str(v) for v in values)
    return {
        "header": panel.header.value,
        "details": panel.details.value,
        "message": panel.message.value,
        "status": panel.status.value,
        "log": panel.log_view.value,
        "hover": "\n".join(hover),
        "ticks": "\n".join(panel.timeline.layout_dict["yaxis"]["ticktext"] or ()),
    }


def assert_no_raw_markup(panel: PlacementPanel, *raw: str) -> None:
    for where, value in html_of(panel).items():
        for text in ("<img", "<script", *raw):
            assert text not in value, f"{text!r} unescaped in {where}: {value[:300]!r}"


def test_the_op_table_never_parses_html():
    assert "textContent" in OpTable._esm
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"):
        assert sink not in OpTable._esm


def test_hostile_names_feeds_scopes_and_log_are_escaped():
    """Op names may hold '>' (TF allows [A-Za-z0-9_.\\-/>]); fed strings and the builder's
    name are free text; tf.print writes fed text into the TensorFlow log."""
    state = {"fail": None}

    def build():
        if state["fail"] == "text":
            raise RuntimeError(HOSTILE)
        with tf.name_scope("a>b"):
            text = tf.compat.v1.placeholder(tf.string, [], name="in>put")
            with tf.device("/cpu:1"):
                shown = tf.print("fed:", text, output_stream=sys.stderr, name="say>it")
            if state["fail"] == "device":
                with tf.device("/job:" + HOSTILE + "/cpu:0"):
                    tf.constant(1.0, name="odd")
            with tf.control_dependencies([shown]):
                return tf.strings.length(text, name="len>gth")

    build.__name__ = "<script>alert('name')</script>"
    panel = show_placement(
        build, device_count=THREE_CPUS, feed_dict={"a>b/in>put": "<script>alert(2)</script>"}
    )
    ops = set(panel.trace.ops["op"])
    assert "a>b/len>gth" in ops and "_arg_a>b/in>put_0_0" in ops
    assert "&lt;script&gt;alert(&#x27;name&#x27;)&lt;/script&gt;" in panel.header.value
    panel.table.selected_op = "a>b/len>gth"
    assert "a&gt;b/len&gt;gth" in panel.details.value
    assert 'fed: "<script>alert(2)</script>"' in html.unescape(html_of(panel)["log"])
    assert "a&gt;b/len&gt;gth" in html_of(panel)["hover"]
    # The table gets plain strings (the browser sets textContent): not escaped twice.
    panel.search.value = "len>"
    assert sorted(row[0] for row in panel.table.rows) == ["_retval_a>b/len>gth_0_0", "a>b/len>gth"]
    assert_no_raw_markup(panel, "a>b", "len>")
    panel.search.value = "<script>"  # the log view filters on it; nothing is injected
    assert "fed: &quot;&lt;script&gt;" in html_of(panel)["log"]
    assert_no_raw_markup(panel)
    panel.search.value = ""

    state["fail"] = "text"
    assert panel.run() is None
    assert ESCAPED in panel.message.value
    assert_no_raw_markup(panel, "a>b")
    state["fail"] = "device"  # TF's own message quotes the malformed device
    assert panel.run() is None
    assert "cannot parse" in panel.message.value and ESCAPED in panel.message.value
    assert_no_raw_markup(panel, "a>b")


def test_hostile_strings_in_a_loaded_trace_are_escaped():
    """A RunMetadata is data from anywhere: node names, labels and device names included."""
    metadata = tf.compat.v1.RunMetadata()
    for device in (CPU.format(0), HOSTILE, "/device:GPU:0/stream:<b>7</b>"):
        lane = metadata.step_stats.dev_stats.add(device=device)
        for i in range(3):
            lane.node_stats.add(
                node_name=f"{HOSTILE}{i}",
                all_start_micros=1000 + 10 * i,
                all_end_rel_micros=5,
                timeline_label=f"{HOSTILE}{i} = <b>Op</b>({HOSTILE})",
            )
    panel = show_placement(metadata)
    assert len(panel.trace.ops) == 9 and len(panel.trace.devices) == 3
    panel.table.selected_op = f"{HOSTILE}0"
    assert f"{ESCAPED}0" in panel.details.value
    assert ESCAPED in html_of(panel)["ticks"]
    assert "&lt;b&gt;7&lt;/b&gt;" in html_of(panel)["ticks"]
    assert_no_raw_markup(panel, "<b>7", "<b>Op")
    assert all(not chip.description_allow_html for chip in panel.chips.children)
    assert panel.table.rows[0][0].startswith(HOSTILE)  # plain text for textContent
