"""The process of a local cluster: its servers, and the Session that talks to them.

Run by ``local_cluster`` as ``python -c <this file> PARENT_PID NETWORK``, never imported by it
for more than the frame functions: until TensorFlow is imported it uses the standard library
only. In order, from its first instruction:

1. it dies with its parent (``PR_SET_PDEATHSIG``: the kernel sends it SIGKILL when the parent
   dies, at any phase, TensorFlow's import included) and ignores Ctrl-C (the parent decides);
2. with ``NETWORK == "isolated"`` it moves into a network namespace of its own with only a
   loopback interface (``unshare(CLONE_NEWNET)``, or ``CLONE_NEWUSER | CLONE_NEWNET`` for a user
   without ``CAP_SYS_ADMIN``): TensorFlow's gRPC servers listen on every interface of their
   namespace, and this one has no interface another host can reach;
3. a thread reads the job from stdin and then exits the process when stdin closes (the parent
   ended it, or died);
4. it imports TensorFlow, starts one server per task, imports the GraphDef the parent built and
   runs it (the init ops, warm-up steps, traced steps), and writes each traced step's
   RunMetadata bytes back, as TensorFlow returned them.

Messages both ways are frames: an 8-byte length, a JSON header (with ``sizes``), then that
many bytes per blob.
"""

import contextlib
import json
import os
import re
import signal
import sys
import threading

NETWORK_ISOLATED = "isolated"  # argv[2]: a network namespace of its own, or refuse
NETWORK_EXPOSED = "exposed"  # argv[2]: try one, but run on the host's network if refused
NETWORK_HOST = "host"  # argv[2]: the host's network (no namespace tried)
_CLONE_NEWNET, _CLONE_NEWUSER = 0x40000000, 0x10000000
_PR_SET_PDEATHSIG = 1
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def write_frame(stream, header, blobs=()):
    """One message: ``header`` (JSON) and the ``blobs`` after it, flushed."""
    header = dict(header, sizes=[len(blob) for blob in blobs])
    text = json.dumps(header).encode()
    stream.write(len(text).to_bytes(8, "big") + text)
    for blob in blobs:
        stream.write(blob)
    stream.flush()


def read_frame(stream):
    """``(header, blobs)`` of the next message; ``None`` at the end of the stream."""
    size = _read_exactly(stream, 8)
    if size is None:
        return None
    header = json.loads(_read_exactly(stream, int.from_bytes(size, "big")) or b"{}")
    return header, [_read_exactly(stream, n) or b"" for n in header.pop("sizes", [])]


def _read_exactly(stream, count):
    parts, left = [], count
    while left:
        part = stream.read(left)
        if not part:
            return None
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def die_with_parent(parent):
    """Be killed when ``parent`` dies; exit now if it already has (it died before the prctl)."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def isolate():
    """Enter a network namespace of its own with loopback up; ``None``, or why it cannot."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces are a Linux feature, and this is {sys.platform}"
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    refused = []
    for flags, name in (
        (_CLONE_NEWNET, "unshare(CLONE_NEWNET)"),
        (_CLONE_NEWUSER | _CLONE_NEWNET, "unshare(CLONE_NEWUSER | CLONE_NEWNET)"),
    ):
        if libc.unshare(flags) == 0:
            if flags & _CLONE_NEWUSER:
                _map_own_ids(uid, gid)
            return _loopback_up()
        refused.append(f"{name}: {os.strerror(ctypes.get_errno())}")
    return "the kernel refused a network namespace (" + "; ".join(refused) + ")"


def _map_own_ids(uid, gid):
    """In the new user namespace, be the same user and group as before (not ``nobody``)."""
    for path, text in (
        ("/proc/self/setgroups", "deny"),
        ("/proc/self/uid_map", f"{uid} {uid} 1"),
        ("/proc/self/gid_map", f"{gid} {gid} 1"),
    ):
        try:
            with open(path, "w") as handle:
                handle.write(text)
        except OSError:
            pass  # unmapped: the kernel still checks files against the real ids


def _loopback_up():
    """Bring ``lo`` up (a new namespace's only interface starts down); ``None`` or why not."""
    import fcntl
    import socket
    import struct

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            request = struct.pack("16sh", b"lo", 0)
            flags = struct.unpack("16sh", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
            fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | _IFF_UP))
    except OSError as exc:
        return f"the loopback interface of the new network namespace did not come up ({exc})"
    return None


class _Job:
    """The parent's request, read from stdin by a thread that then watches stdin's end."""

    def __init__(self):
        self.ready = threading.Event()
        self.frame = None

    def watch(self, stdin):
        self.frame = read_frame(stdin)
        self.ready.set()
        while stdin.read(65536):
            pass
        os._exit(0)  # stdin closed: the parent is done with us, or gone


class _Bytes:
    """A RunMetadata stand-in for ``session.run``: keeps the bytes TensorFlow returns."""

    def __init__(self):
        self.data = b""

    def ParseFromString(self, data):  # noqa: N802 (protobuf's name)
        self.data = bytes(data)
        return len(self.data)


def serve(request, blobs, answer):
    """Start the servers; say so (or why not); run the job if there is one."""
    import tensorflow as tf

    v1 = tf.compat.v1
    cluster = request["cluster"]
    try:
        config = v1.ConfigProto()
        for kind, count in request["device_count"].items():
            config.device_count[kind] = count
        spec = tf.train.ClusterSpec(cluster)
        servers = {
            (job, task): tf.distribute.Server(
                spec, job_name=job, task_index=task, config=config, start=True
            )
            for job, tasks in cluster.items()
            for task in range(len(tasks))
        }
    except BaseException as exc:
        write_frame(answer, {"error": f"{type(exc).__name__}: {exc}"})
        return
    write_frame(answer, {"ready": True})
    job = request.get("job")
    if job is not None:
        chief = servers[tuple(request["chief"])]
        write_frame(answer, *run(tf, chief.target, job, blobs))


def run(tf, target, job, blobs):
    """Import the graph and run it as ``trace_placement`` would in its own process: the init
    ops, ``warmup`` untraced steps, ``steps`` traced ones; the header and blobs to answer."""
    import pickle

    v1 = tf.compat.v1
    graph_def, config, traced, plain, feeds = blobs
    phase = ["init", 0]
    devices = []
    try:
        feed_dict = pickle.loads(feeds)
        named = [*job["init"], *job["fetches"], *feed_dict]
        graph = import_graph(tf, graph_def, {name.partition(":")[0] for name in named})
        traced, plain = v1.RunOptions.FromString(traced), v1.RunOptions.FromString(plain)
        # Not closed: the process exits right after the answer, which ends it faster.
        session = v1.Session(target, graph=graph, config=v1.ConfigProto.FromString(config))
        devices = [d.name for d in session.list_devices()]
        session.run(job["init"], feed_dict=feed_dict, options=plain)
        for phase[1] in range(job["warmup"]):
            phase[0] = "warmup"
            session.run(job["fetches"], feed_dict=feed_dict, options=plain)
        steps = []
        for phase[1] in range(job["steps"]):
            phase[0] = "step"
            steps.append(_Bytes())
            session.run(job["fetches"], feed_dict=feed_dict, options=traced, run_metadata=steps[-1])
    except Exception as exc:
        return {"run_error": described(exc), "phase": phase, "devices": devices}, []
    return {"devices": devices}, [step.data for step in steps]


# How Session.run finds the node an error names ([[{{node x}}]]), as TensorFlow's
# BaseSession._NODEDEF_NAME_RE: the parent looks it up in its own graph, as its Session would.
NODE_IN_MESSAGE = re.compile(r"\[\[(Node: )?(\{\{node )?([^\} ]*)(\}\})?\s*=*")


def described(exc):
    """A failed run's exception as JSON: its class, error code and message. An OpError's
    message is TensorFlow's own, before Session.run interpolated it with this process's graph
    (which has no Python op for most nodes): the parent does that with the user's graph."""
    raw = exc.__context__ if type(exc.__context__) is type(exc) else exc
    return {
        "type": type(exc).__name__,
        "builtin": type(exc).__module__ == "builtins",
        "code": getattr(exc, "error_code", None),
        "message": str(getattr(raw, "message", None) or exc),
    }


def import_graph(tf, graph_def, names):
    """The GraphDef in a new graph, each node as sent (as the parent's own Session would send
    it to the master), with Python ops only for the nodes the runs ``names``: at C speed,
    about a tenth of ``import_graph_def``, which makes a Python op of every node (and reapplies
    device functions to them). Falls back to it if TensorFlow's internals changed."""
    graph = tf.Graph()
    try:
        from tensorflow.python.client import pywrap_tf_session as c_api
        from tensorflow.python.framework import c_api_util

        scoped = c_api_util.ScopedTFImportGraphDefOptions()
        c_api.TF_ImportGraphDefOptionsSetPrefix(scoped.options, "")
        buffer = c_api.TF_NewBufferFromString(graph_def)
    except (ImportError, AttributeError):
        with graph.as_default():
            tf.compat.v1.import_graph_def(tf.compat.v1.GraphDef.FromString(graph_def), name="")
        return graph
    try:
        with graph._mutation_lock(), graph._c_graph.get() as c_graph:
            results = c_api.TF_GraphImportGraphDefWithResults(c_graph, buffer, scoped.options)
            c_api_util.ScopedTFImportGraphDefResults(results)  # frees them
    finally:
        c_api.TF_DeleteBuffer(buffer)
    for c_op in graph.new_operations():
        if c_api.TF_OperationName(c_op) in names:
            graph._create_op_from_tf_operation(c_op, compute_device=False)
    return graph


ROLE_SERVERS = "servers"  # argv[3]: TF1 servers and a Session (the default)
ROLE_WORKERS = "workers"  # argv[3]: one TF2 worker process per task, started from here
ROLE_WORKER = "worker"  # argv[3]: one TF2 task, started by a ROLE_WORKERS process


def run_workers(request, blobs, answer, source):
    """TF2 across tasks: one process per task, each started from this one (so in its network
    namespace, and killed with it), each running the user's setup and step with its task's
    ``TF_CONFIG``; their answers go back as one frame: a header per task (``tasks``) and, per
    task, its trace and what it printed. The first task that fails (or dies) ends them all:
    the others would wait for it in their collectives forever."""
    import queue
    import subprocess
    import tempfile

    cluster = request["cluster"]
    tasks = [(job, index) for job in request["tasks"] for index in range(len(cluster[job]))]
    done = queue.Queue()
    workers, logs = [], []
    try:
        for job, index in tasks:
            log = tempfile.TemporaryFile("w+b")  # noqa: SIM115 (read at the end; no name)
            worker = subprocess.Popen(
                [sys.executable, "-c", source, str(os.getpid()), NETWORK_HOST, ROLE_WORKER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
            workers.append(worker)
            logs.append(log)
            tf_config = {"cluster": cluster, "task": {"type": job, "index": index}}
            write_frame(worker.stdin, dict(request["worker"], tf_config=tf_config), blobs)
            threading.Thread(
                target=lambda n, out: done.put((n, read_frame(out))),
                args=(len(workers) - 1, worker.stdout),
                daemon=True,
            ).start()
    except BaseException as exc:
        for worker in workers:
            worker.kill()
        write_frame(answer, {"error": f"{type(exc).__name__}: {exc}"})
        return
    write_frame(answer, {"ready": True})
    headers, traces = [None] * len(tasks), [b""] * len(tasks)
    failed = None
    # Tasks of the "serving" jobs (ParameterServerStrategy's workers and ps) only serve the
    # others: each answers once told that all the other tasks have answered.
    serving = [n for n, (job, _) in enumerate(tasks) if job in request.get("serving", ())]
    for count in range(len(tasks)):
        if count == len(tasks) - len(serving):
            for number in serving:
                with contextlib.suppress(OSError):  # a task that is gone: its answer says so
                    write_frame(workers[number].stdin, {"finish": True})
        number, frame = done.get()
        job, index = tasks[number]
        if frame is None:
            workers[number].wait()
            failed = {"task": [job, index], "exit": workers[number].returncode}
        elif "error" in frame[0]:
            failed = dict(frame[0], task=[job, index])
        if failed is not None:
            break
        headers[number] = dict(frame[0], task=[job, index])
        traces[number] = (frame[1] or [b""])[0]
    for worker in workers:
        if failed is not None and worker.poll() is None:
            worker.kill()
        worker.wait()
    printed = []
    for log in logs:
        log.seek(0)
        printed.append(log.read())
    if failed is not None:
        write_frame(answer, {"failed": failed, "tasks": [list(t) for t in tasks]}, printed)
    else:
        write_frame(answer, {"tasks": headers}, traces + printed)


def work(answer):
    """One TF2 task: read the job, take its sys.path and TF_CONFIG, run it (``cluster_worker``
    in the package, which imports TensorFlow and tfplace) and answer."""
    frame = read_frame(sys.stdin.buffer)
    if frame is None:
        os._exit(0)
    request, blobs = frame
    told = threading.Event()
    threading.Thread(target=_exit_at_end, args=(sys.stdin.buffer, told), daemon=True).start()
    sys.path[:] = request["sys_path"]
    os.environ["TF_CONFIG"] = json.dumps(request["tf_config"])
    try:
        if request.get("role"):  # a task of ParameterServerStrategy's
            from tfplace_widget._tracing.ps_task import run_ps_task as run_task
        else:
            from tfplace_widget._tracing.cluster_worker import run_task
    except BaseException as exc:
        write_frame(answer, {"error": f"{type(exc).__name__}: {exc}", "type": "ImportError"})
        os._exit(1)
    write_frame(answer, *run_task(request, blobs, told))
    os._exit(0)


def _exit_at_end(stdin, told):
    """Set ``told`` at the starter's next frame (a serving task's "finish"), or at the end of
    stdin; exit the process at the end of stdin (the process that started this one is gone)."""
    read_frame(stdin)
    told.set()
    while stdin.read(65536):
        pass
    os._exit(0)


def main():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent, network = int(sys.argv[1]), sys.argv[2]
    role = sys.argv[3] if len(sys.argv) > 3 else ROLE_SERVERS
    die_with_parent(parent)
    # Answers go through the original stdout; anything else written to fd 1 (the master's
    # placement log, a line per op) goes to the log on fd 2, so that a pipe the parent does
    # not read can never block a server thread.
    answer = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    if role == ROLE_WORKER:  # in its starter's namespace already
        work(answer)
    why = isolate() if network != NETWORK_HOST else ""  # "": the parent knows why not
    if why is not None and network == NETWORK_ISOLATED:
        write_frame(answer, {"refused": why})
        os._exit(0)
    die_with_parent(parent)  # again: a new user namespace clears the parent-death signal
    write_frame(answer, {"network": "isolated" if why is None else "host", "why": why})
    job = _Job()
    threading.Thread(target=job.watch, args=(sys.stdin.buffer,), daemon=True).start()
    if role == ROLE_WORKERS:  # TensorFlow is imported by the workers, not here
        job.ready.wait()
        if job.frame is None:
            os._exit(0)
        request, blobs = job.frame
        run_workers(request, blobs, answer, request["source"])
        os._exit(0)
    try:
        import tensorflow  # noqa: F401 (while the job arrives)
    except BaseException as exc:
        write_frame(answer, {"error": f"{type(exc).__name__}: {exc}"})
        os._exit(1)
    job.ready.wait()
    if job.frame is None:
        os._exit(0)
    request, blobs = job.frame
    serve(request, blobs, answer)
    if request.get("job") is None:
        threading.Event().wait()  # servers only: until stdin closes (the watching thread exits)
    os._exit(0)


if __name__ == "__main__":
    main()
