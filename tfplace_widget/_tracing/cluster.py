"""``trace_placement(cluster=..., target=...)``: where a graph-mode trace runs across tasks.

Two kinds of cluster:

- ``cluster="local:worker=2,ps=1"`` (or ``{"worker": 2, "ps": 1}``): tfplace starts that many
  ``tf.distribute.Server``s, the trace runs against the chief (the ``chief`` job's task 0, else
  worker 0), and the servers are stopped afterwards: all in a child process in a network
  namespace of its own (``local_cluster``, ``cluster_child``).
- ``cluster=tf.train.ClusterSpec(...)`` (or a dict of address lists) and ``target=
  "grpc://host:port"``: servers the user already runs. Nothing is started or stopped.

This module checks the two spellings and probes the user's servers; ``local_cluster`` runs
a local one.
"""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._model.errors import ClusterError, TraceError

LOCAL_PREFIX = "local:"
MAX_TASKS = 16  # per job of a local cluster: more is a typo, not a trace on one machine
PROBE_TIMEOUT_S = 3.0  # a user's server must accept a TCP connection within this
_JOB = re.compile(r"[a-z][a-z0-9_]*")
_EXAMPLE = "cluster='local:worker=2,ps=1' or cluster={'worker': 2, 'ps': 1}"


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
    """The target to give the Session: one of the user's servers."""

    target: str
    addresses: dict[str, list[str]]


@contextlib.contextmanager
def cluster_target(plan: ClusterPlan) -> Iterator[RunningCluster]:
    """Yield the user's servers once each answers (a local cluster runs in ``local_cluster``:
    its servers cannot be reached from here)."""
    assert not plan.local, "a local cluster runs with local_cluster.run_on_local_cluster"
    _probe(plan.addresses)
    yield RunningCluster(plan.target, plan.addresses)


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
