"""trace_placement across a cluster (issue 15): real ``tf.distribute.Server``s, really run.

Local clusters run their servers in a child process tfplace starts and ends; each test checks
that no server process, listening port or thread is left behind. The ClusterSpec + target
path runs against servers this test starts itself (in a child process it kills afterwards).
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from helpers import op_row

from tfplace_widget._model.errors import TraceError
from tfplace_widget._tracing import cluster as cluster_module
from tfplace_widget._tracing import local_cluster

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
PS1 = "/job:ps/replica:0/task:1/device:CPU:0"
WORKER0 = "/job:worker/replica:0/task:0/device:CPU:0"
WORKER1 = "/job:worker/replica:0/task:1/device:CPU:0"
FLOAT32 = 4


def setter_model() -> Any:
    """Graph builder: two variables pinned by replica_device_setter, a matmul on worker 0, a
    sum on worker 1, an identity on ``/job:ps`` (a partial spec) and an add asking nothing."""
    import tensorflow as tf

    v1 = tf.compat.v1
    with v1.device(v1.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:0")):
        w = tf.Variable(tf.ones((100, 100)), name="w")
        b = tf.Variable(tf.zeros((100,)), name="b")
        y = tf.matmul(tf.ones((10, 100), name="x"), w) + b
    with tf.device("/job:worker/task:1"):
        z = tf.reduce_sum(y, name="z")
    with tf.device("/job:ps"):
        q = tf.identity(z, name="q")
    return tf.add(q, 1.0, name="free")


LOG_CHAIN = 1500  # ops with no request: the servers' placement log outgrows a 64 KB pipe


def one_ps_model() -> Any:
    """As :func:`setter_model`, for a cluster with one ps task (the setter's ps_tasks=1), plus
    a chain of ``LOG_CHAIN`` adds asking for nothing (they run on the chief)."""
    import tensorflow as tf

    v1 = tf.compat.v1
    with v1.device(v1.train.replica_device_setter(ps_tasks=1, worker_device="/job:worker/task:0")):
        w = tf.Variable(tf.ones((100, 100)), name="w")
        b = tf.Variable(tf.zeros((100,)), name="b")
        y = tf.matmul(tf.ones((10, 100), name="x"), w) + b
    with tf.device("/job:worker/task:1"):
        z = tf.reduce_sum(y, name="z")
    chain = tf.constant(0.0, name="chain")
    for _ in range(LOG_CHAIN):
        chain = tf.add(chain, 1.0)
    return tf.add(z, chain, name="free")


def listening(ports: list[int]) -> list[int]:
    """Which of ``ports`` some process on this machine listens on."""
    found = {c.laddr.port for c in psutil.net_connections("tcp") if c.status == "LISTEN"}
    return sorted(found & set(ports))


def is_cluster_child(argv: Any) -> bool:
    """Whether ``argv`` starts a local cluster's process."""
    return isinstance(argv, list) and local_cluster.CHILD_SOURCE in argv


class Spy:
    """Records the ports tfplace picks and the processes it starts."""

    def __init__(self) -> None:
        self.ports: list[int] = []
        self.children: list[psutil.Process] = []


def record(patch: pytest.MonkeyPatch) -> Spy:
    """A :class:`Spy` that ``patch`` makes record the ports picked and the processes started."""
    found = Spy()
    free_ports, popen = cluster_module.free_ports, subprocess.Popen

    def recording_ports(count: int) -> list[int]:
        found.ports.extend(free_ports(count))
        return found.ports[-count:]

    def recording_popen(*args: Any, **kwargs: Any) -> subprocess.Popen:
        child = popen(*args, **kwargs)
        if is_cluster_child(args[0]):  # not the output-capture helper
            found.children.append(psutil.Process(child.pid))
        return child

    patch.setattr(cluster_module, "free_ports", recording_ports)
    patch.setattr(local_cluster.subprocess, "Popen", recording_popen)
    return found


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Spy]:
    yield record(monkeypatch)


def assert_nothing_left(spy: Spy, threads: int) -> None:
    assert spy.ports and spy.children
    assert listening(spy.ports) == []
    assert not any(child.is_running() and child.status() != "zombie" for child in spy.children)
    assert threading.active_count() == threads


@pytest.fixture(scope="module")
def local_trace(trace_placement: Any) -> Any:
    """``setter_model`` on a local cluster with one worker more than the ps tasks; the ports
    and child processes it used, and the thread counts before and after."""
    with pytest.MonkeyPatch.context() as patch:
        found = record(patch)
        threads = threading.active_count()
        native = psutil.Process().num_threads()
        trace = trace_placement(one_ps_model, mode="graph", cluster="local:worker=2,ps=1")
        return trace, found, threads, native


def test_local_cluster_puts_variables_on_the_ps_task_and_reads_beside_them(local_trace):
    trace = local_trace[0]
    for name in ("w", "b"):
        row = op_row(trace, name)
        assert (row.device, row.requested_device, row.how) == (PS0, "/job:ps/task:0", "explicit")
        assert "job/task request on the node def" in row.reason
        assert "replica_device_setter" in row.reason and "round-robin" in row.reason
    for read in ("MatMul/ReadVariableOp", "add/ReadVariableOp"):
        row = op_row(trace, read)
        assert (row.device, row.requested_device, row.how) == (PS0, "", "colocated")
        assert "resource/ref edge" in row.reason and "/job:ps/task:0/CPU:0" in row.reason
    matmul = op_row(trace, "MatMul")
    assert (matmul.device, matmul.how) == (WORKER0, "explicit")
    assert op_row(trace, "z").device == WORKER1
    free = op_row(trace, "free")  # asked for nothing: the client's task, the chief
    assert (free.device, free.requested_device, free.how) == (WORKER0, "", "implicit")
    assert "chief (/job:worker/task:0)" in free.reason
    chain = trace.ops[trace.ops["op"].str.match(r"^Add(_\d+)?$")]
    assert len(chain) == LOG_CHAIN and set(chain["device"]) == {WORKER0}


def test_local_cluster_lists_cross_task_transfers_with_bytes(local_trace):
    transfers = local_trace[0].transfers.set_index("tensor")
    assert list(transfers.columns) == ["src_device", "dst_device", "bytes", "cross_task"]
    assert transfers["cross_task"].dtype == bool
    expected = {
        "MatMul/ReadVariableOp:0": (PS0, WORKER0, 100 * 100 * FLOAT32),
        "add/ReadVariableOp:0": (PS0, WORKER0, 100 * FLOAT32),
        "add:0": (WORKER0, WORKER1, 10 * 100 * FLOAT32),
        "z:0": (WORKER1, WORKER0, FLOAT32),
    }
    for tensor, (src, dst, size) in expected.items():
        row = transfers.loc[tensor]
        assert (row.src_device, row.dst_device, row.bytes, row.cross_task) == (src, dst, size, True)
    # The fetch sent to the client is no device-to-device transfer.
    assert "free:0" not in transfers.index
    assert (transfers["src_device"] != transfers["dst_device"]).all()


def test_local_cluster_has_lanes_per_job_task_and_device(local_trace):
    trace = local_trace[0]
    assert trace.devices == [PS0, WORKER0, WORKER1]
    assert set(trace.events["device"]) == {PS0, WORKER0, WORKER1}
    ops = trace.ops
    recv = ops[(ops["op"] == "RecvTensor") & (ops["device"] == WORKER0)].iloc[0]
    assert recv.how == "runtime" and "cross_task True" in recv.reason


def test_local_cluster_leaves_no_server_port_or_thread_behind(local_trace):
    _, found, threads, native = local_trace
    assert len(found.ports) == 3 and len(found.children) == 1
    assert listening(found.ports) == []
    assert not found.children[0].is_running() or found.children[0].status() == "zombie"
    assert threading.active_count() == threads
    assert psutil.Process().num_threads() <= native + 2  # TF's own pools may start once


def test_dict_cluster_deals_variables_round_robin_with_device_count_per_task(trace_placement, spy):
    threads = threading.active_count()
    trace = trace_placement(
        setter_model, mode="graph", cluster={"worker": 2, "ps": 2}, device_count={"CPU": 2}
    )
    assert_nothing_left(spy, threads)
    assert len(trace.devices) == 8  # two CPUs on each of four tasks
    assert (op_row(trace, "w").device, op_row(trace, "b").device) == (PS0, PS1)
    assert op_row(trace, "b").requested_device == "/job:ps/task:1"
    q = op_row(trace, "q")  # asked for /job:ps only: task 0 of two, its CPU:0
    assert (q.device, q.requested_device, q.how) == (PS0, "/job:ps", "explicit")
    assert "a job request" in q.reason and "/job:ps has 2 tasks" in q.reason


SERVERS = r"""
import json, os, sys
import tensorflow as tf
cluster = json.loads(sys.argv[1])
spec = tf.train.ClusterSpec(cluster)
servers = [tf.distribute.Server(spec, job_name=job, task_index=task, start=True)
           for job, tasks in cluster.items() for task in range(len(tasks))]
print("ready", flush=True)
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # the master's placement log: not into the pipe
sys.stdin.read()
"""


@contextlib.contextmanager
def users_servers() -> Iterator[tuple[dict[str, list[str]], list[int], subprocess.Popen]]:
    """A user's own cluster (two workers, one ps task), started by the test in a child process
    of its own (not by tfplace) and killed afterwards: its addresses, ports and process."""
    ports = cluster_module.free_ports(3)
    addresses = {
        "worker": [f"localhost:{ports[0]}", f"localhost:{ports[1]}"],
        "ps": [f"localhost:{ports[2]}"],
    }
    servers = subprocess.Popen(
        [sys.executable, "-c", SERVERS, json.dumps(addresses)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert servers.stdout.readline().strip() == b"ready"
        yield addresses, ports, servers
    finally:
        servers.kill()
        servers.wait()
        servers.stdout.close()
        servers.stdin.close()


def test_cluster_spec_and_target_use_the_users_servers_and_start_nothing(
    trace_placement, tf, monkeypatch
):
    with users_servers() as (addresses, ports, servers):

        def no_start(*args: Any, **kwargs: Any) -> None:
            raise AssertionError("tfplace started a process for the user's own servers")

        monkeypatch.setattr(local_cluster.subprocess, "Popen", no_start)
        trace = trace_placement(
            one_ps_model,
            mode="graph",
            cluster=tf.train.ClusterSpec(addresses),
            target=f"grpc://localhost:{ports[0]}",
        )
        assert op_row(trace, "w").device == PS0 and op_row(trace, "z").device == WORKER1
        assert trace.transfers["cross_task"].all()
        assert servers.poll() is None  # still running: tfplace stops nothing it did not start
        assert listening(ports) == sorted(ports)


def test_a_taken_port_is_a_clear_error_and_nothing_is_left_running(
    trace_placement, spy, monkeypatch
):
    """Only on the host's network (the opt-in without a namespace) can another program take a
    port: in the cluster's own network namespace every port is free."""
    monkeypatch.setenv(local_cluster.NO_NAMESPACE_ENV, "1")
    monkeypatch.setenv(local_cluster.ALLOW_EXPOSED_ENV, "1")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    free = cluster_module.free_ports
    spy.ports.append(port)
    cluster_module.free_ports = lambda n: [port, *free(n - 1)]  # restored by monkeypatch
    threads = threading.active_count()
    try:
        with pytest.raises(TraceError, match="did not start") as caught:
            trace_placement(one_ps_model, mode="graph", cluster="local:worker=2,ps=1")
    finally:
        taken.close()
    message = str(caught.value)
    assert "Could not start gRPC server" in message and "A port was taken" in message
    assert "Nothing was left running" in message
    assert_nothing_left(spy, threads)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"cluster": "local:worker=0"}, "1 to 16 tasks"),
        ({"cluster": "local:ps=1"}, "needs a 'worker'"),
        ({"cluster": "local:worker"}, "write JOB=TASKS pairs"),
        ({"cluster": "worker=2,ps=1"}, "not understood"),
        ({"cluster": {"Worker!": 1}}, "is not valid"),
        ({"cluster": "local:worker=2", "target": "grpc://localhost:1"}, "leave target out"),
        ({"target": "grpc://localhost:1"}, "needs cluster="),
        ({"cluster": {"worker": ["localhost:1"]}, "target": "grpc://elsewhere:2"}, "not a server"),
        (
            {"cluster": {"worker": ["localhost:1"]}, "device_count": {"CPU": 2}},
            "Leave device_count",
        ),
    ],
)
def test_a_bad_cluster_spec_is_a_trace_error_before_anything_starts(
    trace_placement, spy, options, words
):
    with pytest.raises(TraceError, match=words) as caught:
        trace_placement(one_ps_model, mode="graph", **options)
    assert isinstance(caught.value, ValueError)
    assert spy.children == []


def test_a_users_server_that_does_not_answer_is_named(trace_placement, tf, spy):
    (port,) = cluster_module.free_ports(1)  # nobody listens there
    spec = tf.train.ClusterSpec({"worker": [f"localhost:{port}"]})
    with pytest.raises(TraceError, match=r"/job:worker/task:0 at localhost:\d+ does not answer"):
        trace_placement(one_ps_model, mode="graph", cluster=spec)
    assert spy.children == []


def test_function_mode_refuses_a_cluster(trace_placement, tf):
    with pytest.raises(ValueError, match="ParameterServerStrategy"):
        trace_placement(tf.function(lambda: tf.ones(2)), cluster="local:worker=1")


def test_a_cluster_trace_survives_save_load_and_chrome_export(local_trace, tmp_path):
    import pandas as pd

    from tfplace_widget import PlacementTrace

    trace = local_trace[0]
    loaded = PlacementTrace.load(trace.save(tmp_path / "cluster.tfplace"))
    pd.testing.assert_frame_equal(loaded.transfers, trace.transfers)
    pd.testing.assert_frame_equal(loaded.ops, trace.ops)
    assert loaded.devices == trace.devices
    with open(trace.to_chrome_trace(tmp_path / "cluster.json")) as handle:
        document = json.load(handle)
    flows = [e for e in document["traceEvents"] if e.get("ph") == "s"]
    assert flows and all(f["args"]["cross_task"] is True for f in flows)
    again = PlacementTrace.from_chrome_trace(tmp_path / "cluster.json")
    assert set(again.events["device"]) == {PS0, WORKER0, WORKER1}
    assert list(again.transfers.columns)[-1] == "cross_task"


def test_a_trace_saved_before_cross_task_gets_the_column_on_load(seed_cpu, tmp_path):
    """Files written before issue 15 have four transfer columns: loading adds cross_task."""
    import zipfile

    from tfplace_widget import PlacementTrace
    from tfplace_widget._tfplace_format.frame_json import frame_to_json

    path = seed_cpu.save(tmp_path / "new.tfplace")
    old = tmp_path / "old.tfplace"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(old, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "frames/transfers.json":
                frame = seed_cpu.transfers.drop(columns="cross_task")
                data = json.dumps(frame_to_json(frame, "transfers")).encode()
            target.writestr(item, data)
    loaded = PlacementTrace.load(old)
    assert list(loaded.transfers.columns) == list(seed_cpu.transfers.columns)
    assert not loaded.transfers["cross_task"].any()


def blocked_dequeue() -> Any:
    """Graph builder whose step blocks forever: a dequeue from an empty queue on worker 1."""
    import tensorflow as tf

    with tf.device("/job:worker/task:1"):
        queue = tf.queue.FIFOQueue(1, tf.float32, shapes=[], name="empty")
        return queue.dequeue(name="wait")


def fed_on_worker_1() -> Any:
    """Graph builder: a placeholder ``x`` of three floats, added to on worker 1."""
    import tensorflow as tf

    x = tf.compat.v1.placeholder(tf.float32, (3,), name="x")
    with tf.device("/job:worker/task:1"):
        return tf.add(x, 1.0, name="y")


def test_a_local_cluster_takes_feeds_and_steps_as_one_machine_does(trace_placement):
    """The Session runs in the cluster's process: the feeds and every traced step get there
    and back (each step's RunMetadata as TensorFlow serialized it)."""
    import numpy as np
    import tensorflow as tf

    trace = trace_placement(
        fed_on_worker_1,
        mode="graph",
        cluster="local:worker=2",
        feed_dict={"x": np.ones(3, np.float32)},
        steps=2,
    )
    assert op_row(trace, "y").device == WORKER1
    steps = [tf.compat.v1.RunMetadata.FromString(trace.raw[f"run_metadata_{i}.pb"]) for i in (0, 1)]
    assert all(WORKER1 in {d.device for d in s.step_stats.dev_stats} for s in steps)
    assert "tfplace: the local cluster's servers printed:" in trace.log


def test_a_failed_run_on_a_local_cluster_is_explained_as_on_one_machine(trace_placement, spy):
    """The child's exception comes back as TensorFlow's own class: the same explanation."""
    threads = threading.active_count()
    with pytest.raises(TraceError, match=r"Placeholder 'x' needs a value") as caught:
        trace_placement(fed_on_worker_1, mode="graph", cluster="local:worker=2")
    cause = caught.value.__cause__
    assert type(cause).__name__ == "InvalidArgumentError" and cause.node_def.name == "x"
    assert "You must feed a value for placeholder tensor 'x'" in caught.value.log
    assert_nothing_left(spy, threads)
