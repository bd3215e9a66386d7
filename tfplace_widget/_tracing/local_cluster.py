"""``cluster="local:..."``: the servers and the Session that runs the graph, in a child process
no other host can reach, that ends with the trace and dies with the user's process.

TensorFlow's gRPC server listens on every network interface whatever address its cluster spec
gives, and answers anyone: a process that reaches a port can run any op as the user. So the
servers do not run in the user's process (TensorFlow 2 cannot stop an in-process server
either) but in one child process (``cluster_child``) that moves into a network namespace of its
own, with only loopback, before it imports TensorFlow. The Session must then run in there too:
the graph is built here and sent over as a GraphDef with the feeds, fetch names, init ops and
run options; each traced step's RunMetadata comes back as bytes.

Where no namespace can be had (not Linux, or the kernel refuses), a local cluster is refused
with a ``TraceError`` that says why, unless ``TFPLACE_ALLOW_EXPOSED_CLUSTER=1`` accepts the
risk: then the servers run on the machine's network, as TensorFlow's own servers do.

Nothing outlives the trace: the child is killed when the trace ends, fails or is interrupted
(Ctrl-C stops it at once), the kernel kills it if the user's process dies (``cluster_child``),
and its log is a file without a name, gone with the last process that holds it.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import pickle
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .._model.errors import TraceError
from . import cluster as cluster_module
from .cluster_child import (
    NETWORK_EXPOSED,
    NETWORK_HOST,
    NETWORK_ISOLATED,
    NODE_IN_MESSAGE,
    ROLE_SERVERS,
    ROLE_WORKERS,
    read_frame,
    write_frame,
)

ALLOW_EXPOSED_ENV = "TFPLACE_ALLOW_EXPOSED_CLUSTER"  # "1": servers on the host's network if need be
NO_NAMESPACE_ENV = "TFPLACE_CLUSTER_NO_NAMESPACE"  # "1": act as a platform without namespaces
START_TIMEOUT_S = 120.0  # importing TensorFlow in the child and starting its servers
STOP_WAIT_S = 5.0  # for the killed child to be reaped
POLL_S = 0.1  # how often a wait for the child lets Ctrl-C through
# Run as `python -c`, whose sys.path starts with "" (the working directory): dropped first, so
# that a json.py (or tensorflow/) there is never imported by the child.
CHILD_SOURCE = 'import sys\nif sys.path[:1] == [""]:\n    del sys.path[0]\n' + (
    Path(__file__).parent / "cluster_child.py"
).read_text(encoding="utf-8")
EXPOSED_NOTE = "tfplace: the local cluster's servers ran on this machine's network"


@dataclass
class GraphJob:
    """What the child runs: a GraphDef and its Session.run arguments, serialized."""

    graph_def: bytes
    config: bytes  # ConfigProto
    traced: bytes  # RunOptions of the traced steps
    plain: bytes  # RunOptions of the init ops and warm-up steps
    feeds: dict[str, Any]  # tensor name -> value, as feed_dict takes it
    fetches: list[str]  # tensor and op names
    init: list[str]  # op names
    steps: int
    warmup: int

    @classmethod
    def of(
        cls,
        graph: Any,
        fetches: Any,
        feeds: Mapping[Any, Any],
        init: list,
        steps: int,
        warmup: int,
        *,
        config: Any,
        traced: Any,
        plain: Any,
    ) -> GraphJob:
        """The job of running ``fetches`` of ``graph`` as ``Session.run`` would run them."""
        from tensorflow.python.client.session import _FetchHandler  # what Session.run fetches

        handler = _FetchHandler(graph, fetches, {})
        return cls(
            graph_def=graph.as_graph_def().SerializeToString(),
            config=config.SerializeToString(),
            traced=traced.SerializeToString(),
            plain=plain.SerializeToString(),
            feeds={key.name: value for key, value in feeds.items()},  # placeholders of graph
            fetches=[t.name for t in handler.fetches()] + [op.name for op in handler.targets()],
            init=[op.name for op in init],
            steps=steps,
            warmup=warmup,
        )

    def frame(self) -> tuple[dict[str, Any], list[bytes]]:
        try:
            feeds = pickle.dumps(self.feeds, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise TraceError(
                f"A feed_dict value cannot be sent to the local cluster's process ({exc}): "
                "feed NumPy arrays, numbers, strings or lists of them."
            ) from exc
        header = {
            "fetches": self.fetches,
            "init": self.init,
            "steps": self.steps,
            "warmup": self.warmup,
        }
        return header, [self.graph_def, self.config, self.traced, self.plain, feeds]


@dataclass
class ClusterRun:
    """What came back: each traced step's RunMetadata bytes, the session's devices, what the
    child printed (the master's placement log among it) and a note on its network."""

    steps: list[bytes] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    log: str = ""
    note: str = ""


class RemoteRunError(Exception):
    """A Session.run in the child failed: its exception (type, code, message, node), the run
    it failed in and the session's devices, for the tracer to explain as its own."""

    def __init__(self, error: dict[str, Any], phase: list[Any], devices: list[str]) -> None:
        super().__init__(error.get("message", ""))
        self.error, self.phase, self.devices = error, phase, devices
        self.log = ""  # what the child printed

    def exception(self, graph: Any) -> Exception:
        """The child's exception, rebuilt: a ``tf.errors.OpError`` of the same class made as
        ``Session.run`` makes it (its node and the message's node references from ``graph``),
        a built-in one, or one of the same name."""
        error, message = self.error, self.error.get("message", "")
        if error.get("code") is not None:
            return _op_error(error["code"], message, graph)
        found = getattr(builtins, error.get("type", ""), None) if error.get("builtin") else None
        if isinstance(found, type) and issubclass(found, Exception):
            return found(message)
        return type(str(error.get("type") or "Error"), (Exception,), {})(message)


def _op_error(code: int, message: str, graph: Any) -> Exception:
    """What ``BaseSession._do_call`` raises for TensorFlow's error ``code`` and ``message``."""
    from tensorflow.python.framework import errors_impl

    node_def = op = None
    named = NODE_IN_MESSAGE.search(message)
    if named is not None:
        with contextlib.suppress(KeyError, ValueError):
            op = graph.get_operation_by_name(named.group(3))
            node_def = op.node_def
    with contextlib.suppress(ImportError, AttributeError):
        from tensorflow.python.framework import error_interpolation

        message = error_interpolation.interpolate_graph(message, graph)
    return errors_impl.exception_type_from_error_code(code)(node_def, op, message)


def refusal(why: str) -> TraceError:
    """The error of a local cluster that cannot be made unreachable from other hosts."""
    return TraceError(
        f"A local cluster cannot run safely here: {why}. tfplace runs a local cluster's "
        "servers in a network namespace of their own, because TensorFlow's gRPC servers listen "
        "on every network interface, whatever address the cluster spec gives, and without "
        "authentication: anyone who can reach a port could run any TensorFlow op as you (read "
        "and write your files). To run them anyway, reachable from other hosts for the length "
        f"of the trace, set the environment variable {ALLOW_EXPOSED_ENV}=1 (on a machine no other "
        "host can reach); or start servers yourself and pass cluster=tf.train.ClusterSpec(...) "
        "with target='grpc://host:port'."
    )


def network_mode() -> tuple[str, str]:
    """``(mode for the child, why no namespace is tried)``; the refusal if none may be."""
    allowed = os.environ.get(ALLOW_EXPOSED_ENV, "") == "1"
    if os.environ.get(NO_NAMESPACE_ENV, "") == "1":
        why = f"{NO_NAMESPACE_ENV}=1 turns network namespaces off"
    elif not sys.platform.startswith("linux"):
        why = f"network namespaces are a Linux feature, and this is {sys.platform}"
    else:
        return (NETWORK_EXPOSED if allowed else NETWORK_ISOLATED), ""
    if not allowed:
        raise refusal(why)
    return NETWORK_HOST, why


def run_on_local_cluster(
    plan: Any, device_count: dict[str, int] | None, job: GraphJob | None
) -> ClusterRun:
    """Start the servers of ``plan`` in the child, run ``job`` there (``None``: only start
    them) and end the child, whatever happens (Ctrl-C included)."""
    mode, why = network_mode()
    ports = iter(cluster_module.free_ports(sum(plan.jobs.values())))
    addresses = {
        name: [f"localhost:{next(ports)}" for _ in range(count)]
        for name, count in plan.jobs.items()
    }
    header, blobs = job.frame() if job is not None else ({}, [])
    request = {
        "cluster": addresses,
        "device_count": dict(device_count or {}),
        "chief": list(plan.chief()),
        "job": header if job is not None else None,
    }
    # No name in the file system: nothing to pile up in /tmp, even if this process is killed.
    with tempfile.TemporaryFile("w+b") as log, _child(log, mode) as child:
        sender = threading.Thread(
            target=_send, args=(child.stdin, request, blobs), name="tfplace-cluster-send"
        )
        try:
            sender.start()
            return _converse(child, log, addresses, job is not None, why)
        finally:
            stop(child)
            sender.join()  # its write fails at once: the child is gone


@dataclass
class TaskRun:
    """What one task of a TF2 cluster trace sent back: its header (``strategy``,
    ``collectives``), its pickled trace and what its process printed."""

    job: str
    task: int
    header: dict[str, Any]
    trace: bytes
    log: str


def run_tf2_on_local_cluster(
    plan: Any, worker: dict[str, Any], blobs: list[bytes], serving: tuple[str, ...] = ()
) -> tuple[list[TaskRun], str]:
    """Start one process per task of ``plan`` (each with its ``TF_CONFIG``) in the cluster's
    process and namespace, have each run ``worker`` (``cluster_worker.run_task``'s request;
    ``blobs``: the pickled setup and its arguments) and end them all, whatever happens.
    The tasks of the ``serving`` jobs answer once all the others have answered.
    Returns each task's answer and the note of a cluster on the host's network."""
    mode, why = network_mode()
    ports = iter(cluster_module.free_ports(sum(plan.jobs.values())))
    addresses = {
        name: [f"localhost:{next(ports)}" for _ in range(count)]
        for name, count in plan.jobs.items()
    }
    request = {
        "cluster": addresses,
        "tasks": list(plan.jobs),
        "serving": list(serving),
        "worker": worker,
        "source": CHILD_SOURCE,
    }
    with tempfile.TemporaryFile("w+b") as log, _child(log, mode, ROLE_WORKERS) as child:
        sender = threading.Thread(
            target=_send, args=(child.stdin, request, blobs), name="tfplace-cluster-send"
        )
        try:
            sender.start()
            pipe, note = _started(child, log, addresses, why)
            return _task_runs(_answer(pipe, child, log)), note
        finally:
            stop(child)
            sender.join()


def _task_runs(answer: tuple[dict[str, Any], list[bytes]]) -> list[TaskRun]:
    header, blobs = answer
    tasks = [tuple(t) for t in header["tasks"]] if "failed" in header else []
    if "failed" in header:
        logs = {
            f"/job:{job}/task:{index}": data.decode("utf-8", errors="replace")
            for (job, index), data in zip(tasks, blobs, strict=False)
        }
        failed = header["failed"]
        job, index = failed["task"]
        name = f"/job:{job}/task:{index}"
        if failed.get("traceback"):  # where the task's code raised, for error.log
            logs[name] += failed["traceback"]
        exit_code = failed.get("exit") or 0
        what = failed.get("error") or (
            f"its process exited with code {exit_code}"
            if exit_code >= 0
            else _ended_on_signal(-exit_code, logs.get(name, ""))
        )
        error = TraceError(
            f"{name} of the local cluster failed: {what}. The other tasks were stopped; "
            "nothing was left running."
        )
        error.logs = logs  # type: ignore[attr-defined]  # what each task printed
        error.failed_task = (name, exit_code)  # type: ignore[attr-defined]
        raise error
    count = len(header["tasks"])
    runs = []
    for number, task in enumerate(header["tasks"]):
        job, index = task.pop("task")
        runs.append(
            TaskRun(
                job=job,
                task=int(index),
                header=task,
                trace=blobs[number],
                log=blobs[count + number].decode("utf-8", errors="replace"),
            )
        )
    return runs


_TF_LOG_LINE = re.compile(
    r"(?:[IWEF]\d{4} [\d:.]+ +\d+ |\d{4}-\d\d-\d\d [\d:.]+: [IWEF] )[^\]\s]+\.(?:cc|h):\d+\] "
)


def _ended_on_signal(number: int, log: str) -> str:
    """Why a task's process ended on signal ``number``: the signal, and its ``last_words``."""
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    said = last_words(log)
    return f"its process ended on {name}" + (f" after writing {said!r}" if said else "")


def last_words(log: str) -> str:
    """The last line a process wrote when it is not one of TensorFlow's log lines (what the C
    library or the crashing code printed: ``free(): invalid pointer``); ``""`` otherwise."""
    lines = log.strip().splitlines()
    last = lines[-1].strip() if lines else ""
    return "" if is_tensorflow_log_line(last) else last


def is_tensorflow_log_line(line: str) -> bool:
    """A line of TensorFlow's log: absl's (``I0000 00:00:1796535081.1 6264 file.cc:81] ...``,
    TF 2.17 on) or TensorFlow's own (``2026-12-06 05:43:58.96: I tensorflow/.../file.cc:113] ...``)."""
    return _TF_LOG_LINE.match(line) is not None


@contextlib.contextmanager
def _child(log: IO[bytes], mode: str, role: str = ROLE_SERVERS) -> Iterator[subprocess.Popen]:
    """The cluster's process, killed and reaped when the block ends, however it ends."""
    child = None
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD_SOURCE, str(os.getpid()), mode, role],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        yield child
    finally:
        if child is not None:
            stop(child)
            for stream in (child.stdin, child.stdout):
                with contextlib.suppress(OSError):
                    stream.close()


def _send(stream: IO[bytes], request: dict[str, Any], blobs: list[bytes]) -> None:
    """Write the request (in a thread: a large GraphDef never blocks Ctrl-C)."""
    with contextlib.suppress(OSError, ValueError):  # the child is gone: its answer says why
        write_frame(stream, request, blobs)


class _PolledPipe:
    """The child's stdout, waited on in polls of ``POLL_S``: Ctrl-C always gets through (a
    signal, or ``_thread.interrupt_main``, which only acts when Python code runs)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.deadline: float | None = None

    def read(self, count: int) -> bytes:
        while not select.select([self.fd], [], [], POLL_S)[0]:
            if self.deadline is not None and time.monotonic() > self.deadline:
                raise TimeoutError
        return os.read(self.fd, count)


def _started(
    child: subprocess.Popen, log: IO[bytes], addresses: dict, why: str
) -> tuple[_PolledPipe, str]:
    """Wait for the child to say its network and that its tasks started: its answers'
    pipe, and the note of a cluster on the host's network ("" in a namespace)."""
    assert child.stdout is not None
    pipe = _PolledPipe(child.stdout.fileno())
    pipe.deadline = time.monotonic() + START_TIMEOUT_S
    try:
        network = read_frame(pipe)
        if network is not None and "refused" in network[0]:
            raise refusal(network[0]["refused"])
        ready = read_frame(pipe) if network is not None else None
    except TimeoutError:
        silent = f"it gave no answer in {START_TIMEOUT_S:.0f} s"
        raise _not_started(child, log, addresses, silent) from None
    if ready is None or not ready[0].get("ready"):
        raise _not_started(child, log, addresses, ready[0].get("error") if ready else None)
    pipe.deadline = None
    note = ""
    if network is not None and network[0].get("network") == "host":
        note = (
            f"{EXPOSED_NOTE}, reachable "
            f"from other hosts for the length of the trace ({ALLOW_EXPOSED_ENV}=1; no network "
            f"namespace: {network[0].get('why') or why}).\n"
        )
    return pipe, note


def _converse(
    child: subprocess.Popen, log: IO[bytes], addresses: dict, with_job: bool, why: str
) -> ClusterRun:
    pipe, note = _started(child, log, addresses, why)
    run = ClusterRun(note=note)
    if with_job:
        header, run.steps = _answer(pipe, child, log)
        run.devices = header.get("devices", [])
        if "run_error" in header:
            run.log = _read_log(child, log)
            error = RemoteRunError(header["run_error"], header["phase"], run.devices)
            error.log = run.log
            raise error
    run.log = _read_log(child, log)
    return run


def _answer(
    pipe: _PolledPipe, child: subprocess.Popen, log: IO[bytes]
) -> tuple[dict[str, Any], list[bytes]]:
    """The child's answer to the job; a ``TraceError`` if it ended without one."""
    answer = read_frame(pipe)
    if answer is None:
        stop(child)
        raise TraceError(
            f"The local cluster's process ended during the run ({_exit_words(child)})"
            + _printed(log)
            + ". Nothing was left running."
        )
    return answer


def _not_started(
    child: subprocess.Popen, log: IO[bytes], addresses: dict, error: str | None
) -> TraceError:
    stop(child)
    where = ", ".join(f"{job}: {', '.join(tasks)}" for job, tasks in addresses.items())
    if error is None:
        error = _exit_words(child) + _printed(log)
    hint = (
        " A port was taken in the meantime (another program listens on it): run again."
        if "Could not start gRPC server" in error
        else ""
    )
    return TraceError(
        f"The local cluster ({where}) did not start: {error}.{hint} Nothing was left running."
    )


def _exit_words(child: subprocess.Popen) -> str:
    code = child.returncode
    return f"it exited with code {code}" if code is not None and code >= 0 else "it was killed"


def _read_log(child: subprocess.Popen, log: IO[bytes]) -> str:
    """All the child printed, once it has ended (it shares the file's offset)."""
    stop(child)
    log.seek(0)
    return log.read().decode("utf-8", errors="replace")


def _printed(log: IO[bytes], lines: int = 12) -> str:
    log.seek(0)
    tail = "".join(log.read().decode("utf-8", errors="replace").splitlines(True)[-lines:])
    return f"; it printed:\n{tail.rstrip()}" if tail.strip() else ""


def stop(child: subprocess.Popen) -> None:
    """End the child at once (it holds nothing worth a clean exit) and reap it."""
    if child.poll() is None:
        with contextlib.suppress(OSError):
            child.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(STOP_WAIT_S)
