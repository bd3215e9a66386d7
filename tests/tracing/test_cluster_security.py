"""Issue 21: a local cluster is safe to run. No server another host can reach, nothing that
outlives the user's process or the trace, Ctrl-C stops it at once.

What a process listens on is read from ``/proc``: its sockets (``/proc/PID/fd``), the TCP
tables of its network namespace (``/proc/PID/net/tcp`` and ``tcp6``) and that namespace's
interfaces (``/proc/PID/net/dev``). A listening socket is reachable from another host when its
namespace has an interface other than loopback and it is not bound to a loopback address.
Processes killed or interrupted here run traces in a Python process of their own
(``start_tracing``), since a SIGKILL or a Ctrl-C is aimed at the whole process.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from helpers import CTRL_C_AS_AT_A_TERMINAL, ignore_sigint, python_ctrl_c
from test_cluster import PS0, Spy, assert_nothing_left, blocked_dequeue, one_ps_model, record

from tfplace_widget._model.errors import TraceError
from tfplace_widget._tracing import local_cluster
from tfplace_widget._tracing.profile_dir import remove_stale

# Processes, sockets, signals and files, not where TensorFlow puts an op: CI runs them once,
# with oneDNN's default (.ci/run's oneDNN-off run leaves out the lifecycle marker).
pytestmark = [
    pytest.mark.lifecycle,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

PROMPT_S = 3.0  # Ctrl-C: "within about a second", with room for a loaded machine
GONE_S = 5.0  # the cluster's process is gone this long after its parent died
START_S = 180.0  # for a trace's process to import TensorFlow and its cluster to start
TESTS = Path(__file__).resolve().parent
_STATES = {"01": "ESTABLISHED", "0A": "LISTEN"}


@dataclass
class Listening:
    """A TCP socket a process listens on, in which network namespace."""

    pid: int
    address: str
    port: int
    netns: str
    interfaces: list[str]

    @property
    def reachable(self) -> bool:
        """Whether another host could connect: bound beyond loopback, in a namespace with an
        interface other than loopback."""
        outside = [name for name in self.interfaces if name != "lo"]
        return bool(outside) and not ipaddress.ip_address(self.address).is_loopback


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(int(link[len("socket:[") : -1]))
    return inodes


def _address(text: str) -> tuple[str, int]:
    """``0100007F:1F90`` (or its 32-digit IPv6 form) as ``("127.0.0.1", 8080)``."""
    host, port = text.split(":")
    raw = b"".join(bytes.fromhex(host[i : i + 8])[::-1] for i in range(0, len(host), 8))
    return str(ipaddress.ip_address(raw)), int(port, 16)


def _tcp_rows(pid: int) -> Iterator[list[str]]:
    """The rows of the TCP tables of ``pid``'s network namespace."""
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as handle:
            yield from (line.split() for line in handle.readlines()[1:])


def netns(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


def interfaces(pid: int) -> list[str]:
    with open(f"/proc/{pid}/net/dev") as handle:
        return [line.split(":")[0].strip() for line in handle.readlines()[2:]]


def listening_sockets(pid: int) -> list[Listening]:
    """Every TCP socket process ``pid`` listens on; none once it has ended (a short-lived
    helper process can end while it is looked at: CI saw /proc/<pid>/ns/net vanish)."""
    try:
        inodes, space, names = _socket_inodes(pid), netns(pid), interfaces(pid)
        rows = list(_tcp_rows(pid))
    except (FileNotFoundError, ProcessLookupError):
        return []
    return [
        Listening(pid, *_address(row[1]), space, names)
        for row in rows
        if row[3] == "0A" and int(row[9]) in inodes
    ]


def tcp_states(pid: int) -> Counter:
    """How many sockets of ``pid``'s network namespace are in each state (LISTEN, ...)."""
    return Counter(_STATES.get(row[3], row[3]) for row in _tcp_rows(pid))


def wait_for(condition: Callable[[], Any], timeout: float, what: str, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error, OSError):
            found = condition()
            if found:
                return found
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def cluster_child_of(parent: psutil.Process) -> psutil.Process | None:
    for process in parent.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if local_cluster.CHILD_SOURCE in process.cmdline():
                return process
    return None


def running(child: psutil.Process, listening: int) -> bool:
    """The cluster's servers listen in their namespace and its session talks to them."""
    states = tcp_states(child.pid)
    return states["LISTEN"] >= listening and states["ESTABLISHED"] > 0


def importing_tensorflow(child: psutil.Process) -> bool:
    """The cluster's process is loading TensorFlow's libraries, no server of it up yet."""
    with open(f"/proc/{child.pid}/maps") as handle:
        loading = "tensorflow" in handle.read()
    return loading and not listening_sockets(child.pid)


@contextlib.contextmanager
def tracing_in_a_thread(trace: Callable[[], Any]) -> Iterator[dict[str, Any]]:
    """Run ``trace()`` in a thread; its outcome (``error``) once the block has ended."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["trace"] = trace()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield outcome
    finally:
        thread.join(START_S)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    return record(monkeypatch)


def host_addresses() -> list[str]:
    """This machine's addresses another host would connect to (not loopback)."""
    found = []
    for name, addresses in psutil.net_if_addrs().items():
        for address in addresses:
            if name != "lo" and address.family == socket.AF_INET:
                found.append(address.address)
    return found


def assert_unreachable(server_pids: set[int], ports: list[int]) -> list[Listening]:
    """No socket this process or any it started listens on is reachable from another host; the
    servers' (those of ``server_pids``) are in a namespace with only loopback; no address of
    this machine answers on ``ports``. Returns the servers' sockets."""
    me = psutil.Process()
    processes = [me, *me.children(recursive=True)]
    sockets = [s for p in processes for s in listening_sockets(p.pid)]
    assert [s for s in sockets if s.reachable] == []
    servers = [s for s in sockets if s.pid in server_pids]
    # on every address of a namespace with only loopback
    assert {(s.netns == netns(me.pid), tuple(s.interfaces)) for s in servers} == {(False, ("lo",))}
    for host in ["127.0.0.1", *host_addresses()]:
        for port in ports:
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((host, port), timeout=2).close()
    return servers


def test_no_server_of_a_running_local_cluster_is_reachable_from_another_host(trace_placement, spy):
    """Every listening socket of every process of a running cluster trace: none reachable."""

    def trace() -> Any:
        return trace_placement(blocked_dequeue, mode="graph", cluster="local:worker=2,ps=1")

    child = None
    with tracing_in_a_thread(trace) as outcome:
        try:
            child = wait_for(lambda: spy.children and spy.children[0], START_S, "the cluster")
            wait_for(lambda: running(child, 3), START_S, "its servers and session")
            cluster_pids = {child.pid, *(p.pid for p in child.children(recursive=True))}

            def servers_listening() -> list[Listening]:
                found = [s for pid in cluster_pids for s in listening_sockets(pid)]
                return found if {s.port for s in found} >= set(spy.ports) else []

            wait_for(servers_listening, START_S, "every server listening")
            servers = assert_unreachable(cluster_pids, spy.ports)
            assert {s.port for s in servers} == set(spy.ports)  # the check saw the servers
        finally:
            if child is not None:
                child.kill()  # the run never ends by itself: the trace fails, and says why
    assert "ended during the run (it was killed)" in str(outcome.get("error"))


def test_without_a_namespace_a_local_cluster_is_refused_naming_the_opt_in(
    trace_placement, spy, monkeypatch
):
    monkeypatch.setenv(local_cluster.NO_NAMESPACE_ENV, "1")
    monkeypatch.delenv(local_cluster.ALLOW_EXPOSED_ENV, raising=False)
    with pytest.raises(TraceError, match="cannot run safely here") as caught:
        trace_placement(one_ps_model, mode="graph", cluster="local:worker=2,ps=1")
    message = str(caught.value)
    assert "TFPLACE_CLUSTER_NO_NAMESPACE=1 turns network namespaces off" in message
    assert "listen on every network interface" in message
    assert "set the environment variable TFPLACE_ALLOW_EXPOSED_CLUSTER=1" in message
    assert spy.children == []  # refused before anything started


def test_the_opt_in_runs_the_cluster_on_the_machines_network_and_says_so(
    trace_placement, spy, monkeypatch, capfd
):
    monkeypatch.setenv(local_cluster.NO_NAMESPACE_ENV, "1")
    monkeypatch.setenv(local_cluster.ALLOW_EXPOSED_ENV, "1")
    trace = trace_placement(one_ps_model, mode="graph", cluster="local:worker=2,ps=1")
    assert trace.device_of("w") == PS0
    assert (
        "the local cluster's servers ran on this machine's network, reachable from other hosts "
        "for the length of the trace (TFPLACE_ALLOW_EXPOSED_CLUSTER=1; no network namespace: "
        "TFPLACE_CLUSTER_NO_NAMESPACE=1 turns network namespaces off)"
    ) in trace.log
    assert len(spy.children) == 1 and not alive(spy.children[0])
    # Issue 31: said on the terminal too, not only in trace.log
    err = capfd.readouterr().err
    assert "tfplace: warning: the local cluster's servers ran on this machine's network" in err


def test_the_cluster_process_imports_nothing_from_the_working_directory(tmp_path, monkeypatch):
    """Issue 31: the child ran as ``python -c``, so a ``json.py`` in the working directory was
    imported by it (run as the user, before any namespace)."""
    marker = tmp_path / "imported"
    (tmp_path / "json.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    with tempfile.TemporaryFile("w+b") as log, local_cluster._child(log, "host") as child:
        answer = local_cluster.read_frame(child.stdout)  # the first frame: its network
    assert answer is not None and answer[0]["network"] == "host", answer
    assert not marker.exists()


REFUSED = r"""
import json, os, sys
from test_cluster import one_ps_model
from tfplace_widget import TraceError, trace_placement

results = {}
try:
    trace_placement(one_ps_model, mode="graph", cluster="local:worker=2,ps=1")
except TraceError as exc:
    results["refused"] = str(exc)
os.environ["TFPLACE_ALLOW_EXPOSED_CLUSTER"] = "1"
trace = trace_placement(one_ps_model, mode="graph", cluster="local:worker=2,ps=1")
results["w"] = trace.device_of("w")
results["exposed"] = "ran on this machine's network" in trace.log
print(json.dumps(results), flush=True)
"""

# A user namespace in which the kernel grants no network (or user) namespace: the limits of
# /proc/sys/user are per user namespace, so this changes nothing outside the test's process.
NO_NAMESPACES = (
    "echo 0 > /proc/sys/user/max_net_namespaces && echo 0 > /proc/sys/user/max_user_namespaces"
)


def run_reporting_json(prefix: list[str], script: Path, drop_env: str = "") -> Any:
    """Run ``script`` under ``prefix`` (a jail, a dropped capability) with this checkout on its
    path; what it printed last, as JSON."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent), str(TESTS.parents[1])]),
    }
    env.pop(drop_env, None)
    run = subprocess.run(
        [*prefix, sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=2 * START_S,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_where_the_kernel_refuses_namespaces_the_cluster_is_refused_unless_opted_in(tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) here")
    jail = ["unshare", "--user", "--map-root-user", "sh", "-c"]
    probe = subprocess.run([*jail, f"{NO_NAMESPACES} && ! unshare --net true"], check=False)
    if probe.returncode != 0:
        pytest.skip("cannot make a user namespace whose kernel limits refuse network ones")
    script = tmp_path / "refused.py"
    script.write_text(REFUSED)
    results = run_reporting_json(
        [*jail, f'{NO_NAMESPACES} && exec "$0" "$1"'],
        script,
        drop_env=local_cluster.ALLOW_EXPOSED_ENV,
    )
    refused = results["refused"]
    assert "cannot run safely here: the kernel refused a network namespace" in refused
    assert "unshare(CLONE_NEWNET): No space left on device" in refused
    assert "TFPLACE_ALLOW_EXPOSED_CLUSTER=1" in refused
    assert results == {"refused": refused, "w": PS0, "exposed": True}  # the opt-in runs it


UNPRIVILEGED = r"""
import json, os, sys, threading, time
import psutil
from test_cluster import one_ps_model
from test_cluster_security import cluster_child_of, interfaces, listening_sockets, netns
from tfplace_widget import trace_placement

seen = {}


def watch():
    me = psutil.Process()
    while "w" not in seen:
        child = cluster_child_of(me)
        sockets = listening_sockets(child.pid) if child else []
        if sockets:
            with open(f"/proc/{child.pid}/uid_map") as handle:
                seen["uid_map"] = handle.read().split()
            seen["own_user_ns"] = os.readlink(f"/proc/{child.pid}/ns/user") != os.readlink(
                "/proc/self/ns/user"
            )
            seen["own_net_ns"] = netns(child.pid) != netns(os.getpid())
            seen["interfaces"] = interfaces(child.pid)
            seen["reachable"] = [s.port for s in sockets if s.reachable]
            return
        time.sleep(0.05)


threading.Thread(target=watch, daemon=True).start()
seen["w"] = trace_placement(one_ps_model, mode="graph", cluster="local:worker=2,ps=1").device_of("w")
print(json.dumps(seen), flush=True)
"""


def test_a_user_without_cap_sys_admin_gets_a_namespace_through_a_user_namespace(tmp_path):
    """As a user without CAP_SYS_ADMIN: CLONE_NEWUSER | CLONE_NEWNET, the user mapped to
    itself, and again only loopback."""
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv(1) here")
    drop = ["setpriv", "--inh-caps=-sys_admin", "--bounding-set=-sys_admin"]
    if subprocess.run([*drop, "unshare", "--net", "true"], check=False).returncode == 0:
        pytest.skip("CAP_SYS_ADMIN could not be dropped")
    script = tmp_path / "unprivileged.py"
    script.write_text(UNPRIVILEGED)
    seen = run_reporting_json(drop, script)
    uid = str(os.getuid())
    assert seen == {
        "uid_map": [uid, uid, "1"],
        "own_user_ns": True,
        "own_net_ns": True,
        "interfaces": ["lo"],
        "reachable": [],
        "w": PS0,
    }


# A program that traces a step that never ends on a local cluster (in graph mode, or as TF2
# code on every task), and says when Ctrl-C reached it.
TRACING_TEMPLATE = r"""
import json, sys, time
from {module} import {step}
from tfplace_widget import trace_placement

print("importing done", flush=True)
try:
    trace_placement({step}, mode="{mode}", cluster="{cluster}", warmup=0)
except KeyboardInterrupt:
    print(json.dumps({{"interrupted_at": time.monotonic()}}), flush=True)
"""
TRACING = TRACING_TEMPLATE.format(
    module="test_cluster", step="blocked_dequeue", mode="graph", cluster="local:worker=2"
)
TRACING_TF2 = TRACING_TEMPLATE.format(
    module="mwms_programs", step="blocked", mode="function", cluster="local:worker=2"
)
# ParameterServerStrategy: the coordinator (chief) and the servers of 2 workers and 1 ps task
TRACING_PS = TRACING_TEMPLATE.format(
    module="ps_programs", step="blocked", mode="function", cluster="local:worker=2,ps=1"
)


@contextlib.contextmanager
def start_tracing(
    tmp_path: Path, tracing: str = TRACING
) -> Iterator[tuple[subprocess.Popen, Path]]:
    """A Python process (a session of its own, like a kernel) that traces ``blocked_dequeue``
    on a local cluster (or runs ``tracing``), and its temporary folder; killed at the end if
    still running."""
    script, temporary = tmp_path / "tracing.py", tmp_path / "tmp"
    script.write_text(CTRL_C_AS_AT_A_TERMINAL + tracing)
    temporary.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(temporary),
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent), str(TESTS.parents[1])]),
    }
    process = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
        preexec_fn=ignore_sigint,  # as a background `./dev test &` starts it: TRACING sets its own
    )
    try:
        yield process, temporary
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.stdout.close()


def tf2_tasks_running(child: psutil.Process, tasks: int) -> list[psutil.Process]:
    """The task processes of a TF2 cluster trace, once each listens (its strategy's server)."""
    workers = child.children()
    if len(workers) == tasks and all(listening_sockets(w.pid) for w in workers):
        return workers
    return []


PHASES: dict[str, Callable[[psutil.Process], bool]] = {
    "as_it_starts": lambda child: True,
    "importing_tensorflow": importing_tensorflow,
    "running": lambda child: running(child, 2),
    # TF2 code on every task (issue 36): the cluster's process starts one process per task
    "tf2_tasks_starting": lambda child: bool(child.children()),
    "tf2_running": lambda child: bool(tf2_tasks_running(child, 2)),
    # ParameterServerStrategy: the step scheduled on a worker, blocked there
    "ps_running": lambda child: bool(tf2_tasks_running(child, 4)),
}


@pytest.mark.parametrize("phase", list(PHASES))
def test_a_sigkill_of_the_users_process_leaves_no_cluster_process_or_log(tmp_path, phase):
    program = {"tf2": TRACING_TF2, "ps_": TRACING_PS}.get(phase[:3], TRACING)
    with start_tracing(tmp_path, program) as (parent, temporary):
        traced = psutil.Process(parent.pid)
        child = wait_for(lambda: cluster_child_of(traced), START_S, "the cluster", every=0.005)
        wait_for(lambda: PHASES[phase](child), START_S, f"the cluster {phase}", every=0.01)
        family = traced.children(recursive=True)
        parent.kill()
        parent.wait()
        wait_for(lambda: not any(map(alive, family)), GONE_S, "the processes it started")
        if phase == "ps_running":  # the serving tasks' private folders (their TensorFlow's
            # graphs): a killed process's, which the next trace removes (profile_dir) once the
            # process is reaped
            left = sorted(str(p) for p in temporary.iterdir())
            removed: list[str] = []

            def cleaned_up() -> bool:
                removed.extend(remove_stale(str(temporary)))
                return sorted(removed) == left

            assert left
            wait_for(cleaned_up, GONE_S, "the next trace's removal of the tasks' folders")
        assert list(temporary.iterdir()) == []  # no log (nor any other file) left


@pytest.mark.parametrize("phase", ["running", "tf2_running", "ps_running"])
def test_ctrl_c_of_a_running_cluster_trace_stops_it_at_once(tmp_path, phase):
    """A Ctrl-C at a terminal: SIGINT to the whole process group, the cluster's included (and,
    for TF2 code, its tasks' processes; for ParameterServerStrategy, the coordinator's step
    blocked on a worker)."""
    program = {"tf2": TRACING_TF2, "ps_": TRACING_PS}.get(phase[:3], TRACING)
    with start_tracing(tmp_path, program) as (parent, _):
        traced = psutil.Process(parent.pid)
        child = wait_for(lambda: cluster_child_of(traced), START_S, "the cluster")
        wait_for(lambda: PHASES[phase](child), START_S, "its servers (and session or tasks)")
        family = traced.children(recursive=True)
        time.sleep(2.0)  # the step has been blocked for a while
        interrupted = time.monotonic()
        os.killpg(parent.pid, signal.SIGINT)
        out, _ = parent.communicate(timeout=START_S)
    answer = json.loads(out.strip().splitlines()[-1])
    assert answer["interrupted_at"] - interrupted < PROMPT_S
    assert parent.returncode == 0 and not alive(child)
    wait_for(lambda: not any(map(alive, family)), GONE_S, "the processes it started")


def test_interrupt_main_stops_a_cluster_trace_at_once_leaving_nothing(trace_placement, spy):
    """``_thread.interrupt_main`` (what some frontends do) sends no signal at all."""
    import _thread

    threads = threading.active_count()
    fired: list[float] = []

    def interrupt_once_running() -> None:
        child = wait_for(lambda: spy.children and spy.children[0], START_S, "the cluster")
        wait_for(lambda: running(child, 2), START_S, "its servers and session")
        time.sleep(2.0)
        fired.append(time.monotonic())
        _thread.interrupt_main()

    watcher = threading.Thread(target=interrupt_once_running, daemon=True)
    watcher.start()
    with python_ctrl_c(), pytest.raises(KeyboardInterrupt):
        trace_placement(blocked_dequeue, mode="graph", cluster="local:worker=2", warmup=0)
    stopped = time.monotonic()
    watcher.join()
    assert fired and stopped - fired[0] < PROMPT_S
    assert_nothing_left(spy, threads)


# -- TF2 across tasks (issue 36): one process per task, started by the cluster's process ------
@pytest.mark.parametrize(
    "program, cluster, tasks",
    [
        ("mwms_programs:blocked", "local:worker=2", 2),
        # ParameterServerStrategy: the coordinator (chief), 2 workers, 1 ps task
        ("ps_programs:blocked", "local:worker=2,ps=1", 4),
    ],
)
def test_no_socket_of_a_running_tf2_cluster_trace_is_reachable_from_another_host(
    trace_placement, spy, program, cluster, tasks
):
    """The strategy's servers, one per task process (MultiWorkerMirroredStrategy's workers;
    ParameterServerStrategy's coordinator, workers and ps tasks): all in the cluster's
    namespace (loopback only), none reachable; killing the cluster's process ends them."""

    def trace() -> Any:
        return trace_placement(program, mode="function", cluster=cluster, warmup=0)

    child, workers = None, []
    with tracing_in_a_thread(trace) as outcome:
        try:
            child = wait_for(lambda: spy.children and spy.children[0], START_S, "the cluster")
            workers = wait_for(lambda: tf2_tasks_running(child, tasks), START_S, "its tasks")
            servers = assert_unreachable({w.pid for w in workers}, spy.ports)
            assert set(spy.ports) <= {s.port for s in servers}  # each task's TF_CONFIG port
            assert {netns(w.pid) for w in workers} == {netns(child.pid)}
        finally:
            if child is not None:
                child.kill()  # the step never ends by itself: the trace fails, and says why
    assert "ended during the run (it was killed)" in str(outcome.get("error"))
    wait_for(lambda: not any(map(alive, workers)), GONE_S, "the task processes")
