"""``trace_placement(cluster=..., target=...)``: where a graph-mode trace runs across tasks.

Two kinds of cluster:

- ``cluster="local:worker=2,ps=1"`` (or ``{"worker": 2, "ps": 1}``): tfplace starts that many
  ``tf.distribute.Server``s on free loopback ports, the trace runs against the chief (the
  ``chief`` job's task 0, else worker 0), and the servers are stopped afterwards.
- ``cluster=tf.train.ClusterSpec(...)`` (or a dict of address lists) and ``target=
  "grpc://host:port"``: servers the user already runs. Nothing is started or stopped.

Why a child process: TensorFlow 2 cannot stop an in-process server (``Server.join`` blocks
forever, there is no ``stop``, and ``__del__`` leaves the gRPC server, its port and its
threads alive until the process exits). So every server of a local cluster runs in one child
Python process that imports only TensorFlow; stopping the cluster ends that process, which
closes its ports and threads for certain. The child also exits by itself when its stdin
closes, so a parent that dies (a killed kernel) leaves no server behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import TraceError

LOCAL_PREFIX = "local:"
MAX_TASKS = 16  # per job of a local cluster: more is a typo, not a trace on one machine
START_TIMEOUT_S = 120.0  # importing TensorFlow in the child and starting its servers
STOP_WAIT_S = 5.0  # for the child to exit after its stdin closes, before it is killed
PROBE_TIMEOUT_S = 3.0  # a user's server must accept a TCP connection within this
_JOB = re.compile(r"[a-z][a-z0-9_]*")
_EXAMPLE = "cluster='local:worker=2,ps=1' or cluster={'worker': 2, 'ps': 1}"


class ClusterError(TraceError, ValueError):
    """A ``cluster=``/``target=`` that cannot work (bad spec, unknown target, missing job): a
    ``TraceError`` like any failed trace, and a ``ValueError`` like any bad option value."""


@dataclass
class ClusterPlan:
    """A checked ``cluster=``/``target=`` pair: what to start (``local``) or where to connect."""

    jobs: dict[str, int] = field(default_factory=dict)  # local: job -> number of tasks
    addresses: dict[str, list[str]] = field(default_factory=dict)  # user's: job -> addresses
    target: str = ""  # user's cluster: the grpc:// target of the session

    @property
    def local(self) -> bool:
        return bool(self.jobs)

    def chief(self) -> tuple[str, int]:
        """(job, task) the session talks to: ``chief`` task 0, else ``worker`` task 0."""
        jobs = self.jobs or self.addresses
        for job in ("chief", "worker"):
            if job in jobs:
                return job, 0
        return next(iter(jobs)), 0


def parse_cluster(cluster: Any, target: Any) -> ClusterPlan | None:
    """Check ``cluster`` and ``target`` before anything starts; ``None`` when neither is given.

    A :class:`ClusterError` (or ``TypeError`` for a wrong type) names the problem and the
    spelling that works.
    """
    if cluster is None:
        if target is not None:
            raise ClusterError(
                f"target={target!r} needs cluster=: pass the servers' "
                "tf.train.ClusterSpec({'worker': [...], 'ps': [...]}) with it, so tfplace knows "
                "the tasks; or use cluster='local:worker=2,ps=1' and leave target out."
            )
        return None
    if isinstance(cluster, str):
        if not cluster.startswith(LOCAL_PREFIX):
            raise ClusterError(
                f"cluster={cluster!r} is not understood: a string names a local cluster "
                f"tfplace starts, e.g. {_EXAMPLE}; for servers you run, pass "
                "tf.train.ClusterSpec(...) and target='grpc://host:port'."
            )
        return _local_plan(_parse_local(cluster[len(LOCAL_PREFIX) :], cluster), target)
    if (
        isinstance(cluster, Mapping)
        and cluster
        and all(isinstance(n, int) and not isinstance(n, bool) for n in cluster.values())
    ):
        return _local_plan(dict(cluster), target)
    addresses = _addresses(cluster)
    plan = ClusterPlan(addresses=addresses)
    plan.target = _check_target(target, addresses, plan.chief())
    return plan


def _parse_local(text: str, whole: str) -> dict[str, int]:
    jobs: dict[str, int] = {}
    for part in text.split(","):
        name, sep, count = part.strip().partition("=")
        if not sep or not count.strip().isdigit():
            raise ClusterError(
                f"cluster={whole!r}: cannot read {part.strip()!r}; write JOB=TASKS pairs "
                f"separated by commas, e.g. {_EXAMPLE}."
            )
        if name.strip() in jobs:
            raise ClusterError(f"cluster={whole!r} names job {name.strip()!r} twice.")
        jobs[name.strip()] = int(count)
    return jobs


def _local_plan(jobs: dict[Any, int], target: Any) -> ClusterPlan:
    if target is not None:
        raise ClusterError(
            f"target={target!r} is for servers you run; a local cluster is started by tfplace, "
            "which connects to its chief itself: leave target out."
        )
    for job, count in jobs.items():
        if not isinstance(job, str) or not _JOB.fullmatch(job):
            raise ClusterError(
                f"Job name {job!r} is not valid: use lower-case letters, digits and _, "
                f"starting with a letter (e.g. 'worker', 'ps'), as in {_EXAMPLE}."
            )
        if not 1 <= count <= MAX_TASKS:
            raise ClusterError(
                f"Job {job!r} asks for {count} tasks: a local cluster has 1 to {MAX_TASKS} "
                f"tasks per job, as in {_EXAMPLE}."
            )
    if "worker" not in jobs and "chief" not in jobs:
        raise ClusterError(
            f"A local cluster needs a 'worker' (or 'chief') job: the trace runs on its task 0. "
            f"Jobs given: {', '.join(map(str, jobs))}. E.g. {_EXAMPLE}."
        )
    return ClusterPlan(jobs=dict(jobs))


def _addresses(cluster: Any) -> dict[str, list[str]]:
    """The job -> addresses of a ``tf.train.ClusterSpec`` or a dict of address lists."""
    as_dict = getattr(cluster, "as_dict", None)
    if callable(as_dict) and type(cluster).__name__ == "ClusterSpec":
        raw = as_dict()
    elif isinstance(cluster, Mapping):
        raw = dict(cluster)
    else:
        raise TypeError(
            f"cluster must be a local cluster ({_EXAMPLE}) or the servers you run "
            f"(tf.train.ClusterSpec({{'worker': ['host:port', ...]}})), not "
            f"{type(cluster).__name__}."
        )
    addresses: dict[str, list[str]] = {}
    for job, tasks in raw.items():
        if isinstance(tasks, Mapping):  # a sparse ClusterSpec: {task index: address}
            tasks = [tasks[i] for i in sorted(tasks)]
        if isinstance(tasks, str) or not all(isinstance(a, str) and ":" in a for a in tasks):
            raise ClusterError(
                f"cluster job {job!r} must list 'host:port' addresses, not {tasks!r}: e.g. "
                "tf.train.ClusterSpec({'worker': ['localhost:2222'], 'ps': ['localhost:2223']})."
            )
        addresses[str(job)] = list(tasks)
    if not addresses:
        raise ClusterError("cluster names no jobs: give at least one job with its addresses.")
    return addresses


def _check_target(target: Any, addresses: dict[str, list[str]], chief: tuple[str, int]) -> str:
    if target is None:
        job, task = chief
        return f"grpc://{addresses[job][task]}"
    if not isinstance(target, str) or not target.startswith("grpc://"):
        raise ClusterError(
            f"target must be a 'grpc://host:port' string naming one of the cluster's servers, "
            f"not {target!r}."
        )
    address = target[len("grpc://") :]
    known = [a for tasks in addresses.values() for a in tasks]
    if address not in known:
        raise ClusterError(
            f"target {target!r} is not a server of the cluster (addresses: {', '.join(known)}): "
            "pass the grpc:// address of one of its tasks, usually the chief (worker 0)."
        )
    return target


@dataclass
class RunningCluster:
    """The target to give the Session and what the local servers printed (their log)."""

    target: str
    addresses: dict[str, list[str]]
    log_path: str = ""

    def log(self) -> str:
        """What the child's servers printed (the master's placement log among it)."""
        if not self.log_path:
            return ""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except OSError:
            return ""


@contextlib.contextmanager
def cluster_target(plan: ClusterPlan, device_count: Mapping[str, int] | None) -> Iterator[Any]:
    """Yield a :class:`RunningCluster`: the local servers started (and stopped on exit,
    whatever happens in the block), or the user's servers checked to answer."""
    if not plan.local:
        _probe(plan.addresses)
        yield RunningCluster(plan.target, plan.addresses)
        return
    with _local_servers(plan, device_count) as running:
        yield running


def _probe(addresses: dict[str, list[str]]) -> None:
    """A ``TraceError`` naming the first task whose server does not accept connections: the
    Session would otherwise wait for it forever."""
    for job, tasks in addresses.items():
        for task, address in enumerate(tasks):
            host, _, port = address.rpartition(":")
            try:
                with socket.create_connection((host.strip("[]"), int(port)), PROBE_TIMEOUT_S):
                    pass
            except (OSError, ValueError) as exc:
                raise TraceError(
                    f"The server of /job:{job}/task:{task} at {address} does not answer ({exc}). "
                    "Start it (tf.distribute.Server(cluster_spec, job_name="
                    f"{job!r}, task_index={task})) and run again, or trace on a local cluster "
                    "with cluster='local:worker=2,ps=1'."
                ) from exc


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports nobody listens on now (the OS picks them)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


@contextlib.contextmanager
def _local_servers(plan: ClusterPlan, device_count: Mapping[str, int] | None) -> Iterator[Any]:
    ports = iter(free_ports(sum(plan.jobs.values())))
    addresses = {
        job: [f"localhost:{next(ports)}" for _ in range(count)] for job, count in plan.jobs.items()
    }
    job, task = plan.chief()
    request = {"cluster": addresses, "device_count": dict(device_count or {})}
    log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed and removed below
        "w+b", prefix="tfplace-cluster-", suffix=".log", delete=False
    )
    child = None
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, json.dumps(request)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        _wait_ready(child, log.name, addresses)
        yield RunningCluster(f"grpc://{addresses[job][task]}", addresses, log.name)
    finally:
        if child is not None:
            stop(child)
        log.close()
        with contextlib.suppress(OSError):
            os.unlink(log.name)


def _wait_ready(child: subprocess.Popen, log_path: str, addresses: dict[str, list[str]]) -> None:
    """Block until the child says its servers run; a ``TraceError`` with its words if not."""
    import selectors

    assert child.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + START_TIMEOUT_S
        line = b""
        while time.monotonic() < deadline:
            if selector.select(timeout=0.2):
                line = child.stdout.readline()
                break
            if child.poll() is not None:
                break
    try:
        answer = json.loads(line) if line.strip() else {}
    except ValueError:
        answer = {}
    if answer.get("ready"):
        return
    where = ", ".join(f"{job}: {', '.join(tasks)}" for job, tasks in addresses.items())
    error = answer.get("error")
    if error is None:
        stop(child)
        tail = _tail(log_path)
        error = (
            f"it exited with code {child.returncode}"
            if child.returncode is not None and child.returncode >= 0
            else f"it gave no answer in {START_TIMEOUT_S:.0f} s"
        ) + (f"; it printed:\n{tail}" if tail else "")
    hint = (
        " A port was taken in the meantime (another program listens on it): run again."
        if "Could not start gRPC server" in error
        else ""
    )
    raise TraceError(
        f"The local cluster ({where}) did not start: {error}.{hint} Nothing was left running."
    )


def _tail(path: str, lines: int = 12) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(handle.readlines()[-lines:]).rstrip()
    except OSError:
        return ""


def stop(child: subprocess.Popen) -> None:
    """End the child: close its stdin (it exits by itself), then terminate, then kill."""
    if child.poll() is None and child.stdin is not None:
        with contextlib.suppress(OSError):
            child.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(STOP_WAIT_S)
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    for stream in (child.stdin, child.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


# The child: imports only TensorFlow, starts one server per task, says so on stdout, and
# exits (os._exit: no server teardown to wait for) when its stdin closes.
_CHILD = r"""
import json, os, sys
request = json.loads(sys.argv[1])
# Answers go to the parent through the original stdout; everything else written to fd 1
# (the master's placement log, a line per op) goes to the log file on fd 2, so a full pipe
# the parent does not read can never block a server thread.
answer = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
try:
    import tensorflow as tf
    spec = tf.train.ClusterSpec(request["cluster"])
    config = tf.compat.v1.ConfigProto()
    for kind, count in request["device_count"].items():
        config.device_count[kind] = count
    servers = [
        tf.distribute.Server(spec, job_name=job, task_index=task, config=config, start=True)
        for job, tasks in request["cluster"].items()
        for task in range(len(tasks))
    ]
except BaseException as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), file=answer, flush=True)
    os._exit(1)
print(json.dumps({"ready": True}), file=answer, flush=True)
sys.stdin.buffer.read()
os._exit(0)
"""
