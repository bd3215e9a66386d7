"""TF2 code across a local cluster (issue 36): ``trace_placement(setup, cluster="local:worker=2",
mode="function")`` runs ``setup`` in one process per task, each with its ``TF_CONFIG``, under
``tf.distribute.MultiWorkerMirroredStrategy``, and traces the step it returns on every task.

Checked against TensorFlow itself: each task's process prints TensorFlow's placement log of the
user's own first call of the step (the setup calls it, as a training script does), and the
trace's rows of that task are on the devices that log names, op for op. The programs are in
``mwms_programs`` (a module: each task imports the setup by name).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from collections import Counter
from typing import Any

import mwms_programs
import psutil
import pytest
from test_cluster import WORKER0, WORKER1, record

from tfplace_widget import compare
from tfplace_widget._analyses.summary import format_bytes
from tfplace_widget._model.devices import short_device
from tfplace_widget._model.errors import ClusterError, TraceError
from tfplace_widget._model.trace import STRATEGY_TASKS_RAW, PlacementTrace
from tfplace_widget._sources.xspace import _profile_start_ns, parse_xspace, profile_start_us
from tfplace_widget._tracing import cluster_tf2, local_cluster
from tfplace_widget._tracing.profile_dir import start_profiler, written_xspace

_PLACED = re.compile(r"placer\.cc:\d+\] (\S+): \((\w+)\): (\S+)$", re.MULTILINE)
_NOT_COMPARED = {"_Arg", "_Retval", "_DeviceArg"}
TASKS = ("/job:worker/task:0", "/job:worker/task:1")


def worker_processes(spy: Any) -> list[psutil.Process]:
    """The TF2 task processes still running that the cluster processes ``spy`` saw this test
    start started: a task's argv names its starter's pid (another test run on the machine,
    or another user's trace, has its own)."""
    starters = {str(child.pid) for child in spy.children}
    found = []
    for process in psutil.process_iter(["cmdline"]):
        argv = process.info["cmdline"] or []
        if local_cluster.CHILD_SOURCE in argv and argv[-1] == "worker" and argv[-3] in starters:
            found.append(process)
    return found


@pytest.fixture(scope="module")
def mwms(trace_placement: Any) -> Any:
    """The custom training loop on two workers; the ports and processes it used, and the
    thread count before."""
    with pytest.MonkeyPatch.context() as patch:
        spy = record(patch)
        threads = threading.active_count()
        trace = trace_placement(
            mwms_programs.custom_loop, cluster="local:worker=2", mode="function"
        )
        return trace, spy, threads


def task_sections(trace: Any, name: str = "custom_loop") -> dict[str, tuple[str, str]]:
    """Per task: what its process printed (the setup and the user's first call), and its
    trace's log, as the merged log keeps them."""
    sections = {}
    for index, task in enumerate(TASKS):
        start = trace.log.index(cluster_tf2.TASK_PRINTED.format(task=task, name=name))
        middle = trace.log.index(cluster_tf2.TASK_TRACE.format(task=task), start)
        following = TASKS[index + 1] if index + 1 < len(TASKS) else None
        end = (
            trace.log.index(cluster_tf2.TASK_PRINTED.format(task=following, name=name))
            if following
            else len(trace.log)
        )
        sections[task] = (trace.log[start:middle], trace.log[middle:end])
    return sections


def test_every_worker_runs_the_step_on_its_own_task(mwms):
    trace, _, _ = mwms
    assert trace.devices == [WORKER0, WORKER1]
    per_task = {
        device: Counter(zip(rows["op"], rows["type"], strict=True))
        for device, rows in trace.ops.groupby("device")
    }
    assert set(per_task) == {WORKER0, WORKER1}
    assert per_task[WORKER0] == per_task[WORKER1]  # the same step, replicated
    types = {t.removeprefix("_Mkl") for _, t in per_task[WORKER0]}
    assert {"MatMul", "CollectiveReduceV2", "IteratorGetNext"} <= types, types
    assert set(trace.events["device"]) == {WORKER0, WORKER1}
    assert trace.mode == "function"


def test_each_tasks_ops_are_where_its_placement_log_puts_them(mwms):
    """TensorFlow's placement log of the user's own call, printed in each task's process: every
    op of the trace it names is on the device it names, on that task."""
    trace, _, _ = mwms
    for task, device in zip(TASKS, (WORKER0, WORKER1), strict=True):
        printed, _ = task_sections(trace)[task]
        logged = {
            name: placed
            for name, op_type, placed in _PLACED.findall(printed)
            if op_type not in _NOT_COMPARED
        }
        rows = trace.ops[trace.ops["device"].str.startswith(device.rsplit("/device", 1)[0])]
        compared: Counter = Counter()
        for name, placed in logged.items():
            mine = rows[rows["op"] == name]
            if mine.empty:
                continue
            assert set(mine["device"]) == {placed}, (task, name, placed, mine)
            assert placed == device  # the task's own ops on the task's own CPU
            compared[mine["type"].iloc[0].removeprefix("_Mkl").removeprefix("Native")] += 1
        assert sum(compared.values()) >= 100, (task, compared)
        print(f"{task}: {sum(compared.values())} ops placed as its placement log says")
        # the all-reduces (gradients, loss), the convolution and the dense layers among them
        assert compared["CollectiveReduceV2"] == 2, compared
        assert compared["MatMul"] >= 2, compared
        assert sum(n for op_type, n in compared.items() if "Conv2D" in op_type) >= 1, compared


def optimizers_scope(trace: PlacementTrace) -> str:
    """The name scope of the optimizer's ops: ``rm_sprop`` (Keras 3.10 on) or ``rmsprop``."""
    scopes = {op.rsplit("/", 1)[0] for op in trace.ops["op"] if op.endswith("/CollectiveReduceV2")}
    assert len(scopes) == 1 and scopes <= {"rm_sprop", "rmsprop"}, scopes
    return scopes.pop()


def test_collectives_name_their_group_and_the_tasks_that_take_part(mwms):
    trace, _, _ = mwms
    reduces = trace.ops[trace.ops["type"] == "CollectiveReduceV2"]
    assert len(reduces) == 4  # the gradients' and the loss's all-reduce, on each worker
    scope = optimizers_scope(trace)
    assert set(reduces["op"]) == {f"{scope}/CollectiveReduceV2", "CollectiveReduceV2"}
    raw = json.loads(trace.raw[STRATEGY_TASKS_RAW])
    assert raw["strategy"] == "MultiWorkerMirroredStrategy"
    groups = {task: found["collectives"] for task, found in raw["tasks"].items()}
    assert set(groups) == set(TASKS)
    for task in TASKS:
        for op, group in groups[task].items():
            assert group["group_size"] == 2  # TensorFlow's: the two workers
            assert group["group_key"] == groups[TASKS[0]][op]["group_key"]
            assert group["type"] == "CollectiveReduceV2"
    for reason in reduces["reason"]:
        assert "group_size 2" in reason
        assert "/job:worker/task:0, /job:worker/task:1 (2 tasks)" in reason


def test_reasons_name_the_strategy_and_the_task(mwms):
    trace, _, _ = mwms
    for device, rows in trace.ops.groupby("device"):
        task = "/job:worker/task:" + device.split("task:")[1].split("/")[0]
        for reason in rows["reason"]:
            assert (
                "The step runs on every worker: MultiWorkerMirroredStrategy replicates it "
                f"(this is {task}'s copy)." in reason
            ), reason
    assert any("MultiWorkerMirroredStrategy ran the step on 2 tasks" in n for n in trace.notes)


def test_the_cluster_leaves_no_process_port_or_thread(mwms):
    trace, spy, threads = mwms
    assert spy.children and not any(c.is_running() and c.status() != "zombie" for c in spy.children)
    assert worker_processes(spy) == []
    assert threading.active_count() == threads


def test_a_failing_task_stops_the_others_and_is_named(trace_placement, monkeypatch):
    spy = record(monkeypatch)
    with pytest.raises(TraceError) as caught:
        # the setup by its module and name: no mode= needed
        trace_placement("mwms_programs:fails_on_worker_1", cluster="local:worker=2")
    message = str(caught.value)
    assert "/job:worker/task:1 of the local cluster failed" in message
    assert "RuntimeError: no data on this worker" in message
    assert "/job:worker/task:1 printed" in caught.value.log
    assert 'raise RuntimeError("no data on this worker")' in caught.value.log  # its traceback
    assert spy.children and worker_processes(spy) == []


def test_a_task_that_crashes_is_named_with_its_signal_and_not_run_again(
    trace_placement, monkeypatch
):
    """A task's process that aborts (not in TensorFlow's profiler) fails the trace at once, with
    the signal and the last line the process wrote; the cluster is not run again."""
    spy = record(monkeypatch)
    with pytest.raises(TraceError) as caught:
        trace_placement("mwms_programs:aborts_on_worker_1", cluster="local:worker=2")
    message = str(caught.value)
    assert "/job:worker/task:1 of the local cluster failed: its process ended on SIGABRT" in message
    assert "fatal: this worker's native reader crashed" in message
    assert len(spy.children) == 1 and worker_processes(spy) == []


def test_a_crash_in_tensorflows_profiler_is_told_apart_from_other_crashes():
    """What a task printed when TensorFlow's profiler aborted it (the tail of a real log: TF
    2.21, this test program, 2026-12-06) is a profiler crash, retried; the same abort after
    any other line, or a task that exited with a code, is not."""
    tail = (
        "I0000 00:00:1796535081.106127    6264 profiler_session.cc:132] Profiler session "
        "started.\n"
        "I0000 00:00:1796535081.107439    6264 execute.cc:1775] Executing op "
        "__inference_train_step_1125_tfplace_copy0 in device "
        "/job:worker/replica:0/task:1/device:CPU:0\n"
        "I0000 00:00:1796535081.116677    6264 profiler_session.cc:81] Profiler session "
        "collecting data.\n"
        "free(): invalid pointer\n"
    )

    def failure(log: str, exit_code: int) -> TraceError:
        error = TraceError("failed")
        error.logs = {"/job:worker/task:1": log}  # type: ignore[attr-defined]
        error.failed_task = ("/job:worker/task:1", exit_code)  # type: ignore[attr-defined]
        return error

    told = cluster_tf2._profiler_crash(failure(tail, -6))
    assert told.startswith("tfplace: /job:worker/task:1 ended on a signal while TensorFlow's")
    assert "'free(): invalid pointer'" in told
    assert cluster_tf2._profiler_crash(failure(tail, 1)) == ""
    elsewhere = tail.replace("Profiler session collecting data.", "Executing op MatMul")
    assert cluster_tf2._profiler_crash(failure(elsewhere, -6)) == ""
    assert cluster_tf2._profiler_crash(TraceError("no task failed")) == ""
    older = (  # TensorFlow 2.16's own log format
        "2026-12-06 05:43:58.967647: I tensorflow/core/profiler/lib/profiler_session.cc:70] "
        "Profiler session collecting data.\n"
        "free(): invalid pointer\n"
    )
    assert "'free(): invalid pointer'" in cluster_tf2._profiler_crash(failure(older, -6))


def test_a_setup_the_tasks_cannot_import_is_refused_before_anything_starts(
    trace_placement, monkeypatch
):
    spy = record(monkeypatch)

    def setup() -> Any:  # inside a function: no task can import it
        return None

    with pytest.raises(ClusterError, match="inside a function.*top level of a module"):
        trace_placement(setup, cluster="local:worker=2", mode="function")
    setup.__qualname__, setup.__module__ = "setup", "__main__"
    with pytest.raises(ClusterError, match="in __main__"):
        trace_placement(setup, cluster="local:worker=2", mode="function")
    with pytest.raises(ClusterError, match="not 'module:function'"):
        trace_placement("mwms_programs.custom_loop", cluster="local:worker=2")
    with pytest.raises(ClusterError, match="job\\(s\\) evaluator are not supported"):
        trace_placement(
            mwms_programs.custom_loop, cluster="local:worker=2,evaluator=1", mode="function"
        )
    assert spy.children == []


def test_a_tf2_strategy_on_a_cluster_is_no_longer_refused_outright(trace_placement, tf):
    """The auto-picked function mode with a cluster still says how to trace TF2 code there."""
    step = tf.function(lambda: tf.constant(1.0))
    with pytest.raises(ValueError, match="trace_placement\\(setup, cluster='local:worker=2'"):
        trace_placement(step, cluster="local:worker=2")


def on_task(predicted: Any, prefix: str, *columns: str) -> tuple[Any, list[dict[str, Any]]]:
    """The predicted rows on the task whose devices start with ``prefix``, and per column
    asked for, op -> its value there."""
    rows = predicted.ops[predicted.ops["device"].str.startswith(prefix + "/")]
    return rows, [dict(zip(rows["op"], rows[c], strict=True)) for c in columns]


def gpu_kernel_for(node: Any) -> bool:
    """Whether TensorFlow's registry has a GPU kernel (or a DEFAULT one, which serves GPUs)
    matching this node def's type attrs."""
    from tensorflow.python.framework import kernels

    def meets(constraint: Any) -> bool:
        if constraint.name not in node.attr:
            return True
        value, allowed = node.attr[constraint.name], constraint.allowed_values.list
        types = [value.type] if value.WhichOneof("value") == "type" else list(value.list.type)
        return not allowed.type or all(t in allowed.type for t in types)

    registered = kernels.get_registered_kernels_for_op(node.op).kernel
    return any(
        k.device_type in ("GPU", "DEFAULT") and all(map(meets, k.constraint)) for k in registered
    )


def test_the_strategys_replica_is_predicted_on_each_workers_gpu(mwms, tmp_path):
    """predict_placement(trace, gpus=1) (was: refused): on a worker with a GPU the strategy
    builds its replica under tf.device(that worker's GPU:0), so every op the strategy pinned
    to the task's CPU:0 is predicted on the task's GPU:0 when TensorFlow's registry has a GPU
    kernel for its node def (the step's node defs as TensorFlow recorded them), and on the
    task's CPU:0 by soft placement when not; the ops under the program's own
    tf.device("/cpu:0") (the metric's update) stay on the task's CPU:0; the variables and the
    per-replica iterator the step reads are on the GPU. A saved and loaded trace predicts the same. No finding of the traced run says
    what a GPU machine would do (was: a ping_pong telling to drop the strategy's tf.device)."""
    from tensorflow.core.protobuf import config_pb2

    from tfplace_widget import predict_placement

    trace, _, _ = mwms
    loaded = PlacementTrace.load(trace.save(tmp_path / "mwms.tfplace"))
    assert not trace.all_findings["predicted"].any(), trace.all_findings
    predicted = predict_placement(loaded, gpus=1)
    assert predicted.predicted and predicted.notes[0].startswith("Predicted, not run")
    assert "MultiWorkerMirroredStrategy ran on 2 workers" in predicted.notes[0]
    gpus = [device.replace("CPU:0", "GPU:0") for device in (WORKER0, WORKER1)]
    assert set(predicted.devices) == {WORKER0, WORKER1, *gpus}
    graphs = config_pb2.RunMetadata.FromString(trace.raw["function_graphs.pb"]).function_graphs
    nodes = {n.name: n for g in graphs for n in g.pre_optimization_graph.node}
    own = json.loads(trace.raw[STRATEGY_TASKS_RAW])["tasks"]
    for task, cpu, gpu in zip(TASKS, (WORKER0, WORKER1), gpus, strict=True):
        prefix = cpu.rsplit("/device", 1)[0] + "/"
        rows = predicted.ops[predicted.ops["device"].str.startswith(prefix)]
        traced = trace.ops[trace.ops["device"].str.startswith(prefix)]
        assert sorted(rows["op"]) == sorted(traced["op"])
        user = own[task]["gpu_requests"]  # the ops its tf.device("/cpu:0") reaches
        assert {"ArgMax", "Equal_1", "Sum_5"} <= set(user) and set(user.values()) == {cpu}
        checked: Counter = Counter()
        for row in rows.itertuples(index=False):
            requested = trace.facts.requested.get(row.op, "")
            if not requested or row.type in _NOT_COMPARED:
                continue
            if row.op in user:
                if row.how == "colocated":  # the metric's variable, on the GPU, wins
                    assert row.device == gpu, row
                    continue
                assert row.device == cpu and row.how == "explicit", row
                assert "the user's own tf.device inside MultiWorkerMirroredStrategy" in row.reason
                checked["user's, kept"] += 1
            elif gpu_kernel_for(nodes[row.op]):
                assert row.device == gpu, row
                assert "MultiWorkerMirroredStrategy's replica on this worker's GPU:0" in row.reason
                checked["GPU"] += 1
            else:
                assert row.device == cpu and row.how == "soft", row
                assert "no GPU kernel" in row.reason, row.reason
                checked["no GPU kernel"] += 1
        print(task, dict(checked))
        assert checked["GPU"] >= 200 and checked["no GPU kernel"] >= 1, checked
        assert checked["user's, kept"] >= 20, checked
        variables = rows[(rows["type"] == "_Arg") & rows["op"].str.endswith("_resource")]
        assert len(variables) >= 10 and set(variables["device"]) == {gpu}, variables
        reduces = rows[rows["type"] == "CollectiveReduceV2"]
        assert len(reduces) == 2 and set(reduces["device"]) == {gpu}
        # the batches: the strategy's per-replica iterator is made on the GPU (fetch to device)
        assert own[task]["inputs_to_device"] is True
        reads = rows[rows["type"] == "IteratorGetNext"]
        assert len(reads) == 1 and set(reads["device"]) == {gpu}, reads
        iterator = rows[rows["op"] == trace.facts.resource_inputs["IteratorGetNext"][0]]
        assert list(iterator["device"]) == [gpu]
        assert "per-replica tf.data iterator" in iterator["reason"].iloc[0]
    older = copy.deepcopy(loaded)  # a trace made before the tasks recorded their requests
    tasks = json.loads(older.raw[STRATEGY_TASKS_RAW])
    for info in tasks["tasks"].values():
        del info["gpu_requests"]
    older.raw[STRATEGY_TASKS_RAW] = json.dumps(tasks).encode()
    with pytest.raises(TraceError, match="made by an older tfplace.*trace it again"):
        predict_placement(older, gpus=1)
    same = predict_placement(loaded, gpus=0)  # without GPUs: the placement the cluster made
    assert Counter(zip(same.ops["op"], same.ops["device"], strict=True)) == Counter(
        zip(trace.ops["op"], trace.ops["device"], strict=True)
    )


def built_with_two_gpus_alone(tmp_path: Any) -> dict[str, Any]:
    """What ``mwms_gpus_graph.py`` records of the tutorial's step built with 2 GPUs by
    TensorFlow in a process of its own (one worker, a resolver reporting the GPUs)."""
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "built.json"
    script = Path(__file__).with_name("mwms_gpus_graph.py")
    run = subprocess.run(
        [sys.executable, str(script), str(out), "2"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(out.read_text())


def test_more_gpus_per_worker_are_refused_with_what_tensorflow_builds(mwms, tmp_path):
    """predict_placement(trace, gpus=2) refuses (as it did, saying less), and what it says the
    strategy builds on a worker with 2 GPUs is what TensorFlow builds: the tutorial's step made
    by the strategy with a cluster resolver that reports 2 GPUs, traced and not run
    (``mwms_gpus_graph.py``, in a process of its own, one worker): its worker_devices are the
    GPUs, 2 replicas; the step's replica ops once per GPU, the same ops on each and as many as
    the traced step's one replica has; every variable made once per replica (the model's and
    the metric's under each GPU); a CollectiveReduceV2 on each GPU for each the traced replica
    has, in a group of len(worker_devices) x workers. And why no trace made without the GPUs
    gives that graph, as the message says: built on this machine, the optimizer's slots and
    its updates of each copy (made beside the copy, which soft placement made on the CPU) are
    built for CPU:0."""

    from tfplace_widget import predict_placement

    trace, _, _ = mwms
    built = built_with_two_gpus_alone(tmp_path)
    devices = built["worker_devices"]
    assert [d.rsplit("/device:", 1)[1] for d in devices] == ["GPU:0", "GPU:1"]
    assert built["replicas"] == len(devices) * 1  # num_replicas_in_sync: GPUs x workers
    per_gpu = [Counter(t for _, t, device in built["ops"] if device == gpu) for gpu in devices]
    assert per_gpu[0] == per_gpu[1] and sum(per_gpu[0].values()) >= 200, per_gpu
    traced = Counter(
        trace.facts.types[op]
        for op, request in trace.facts.requested.items()
        if request == WORKER0 and op in trace.facts.types
    )
    assert per_gpu[0]["CollectiveReduceV2"] == traced["CollectiveReduceV2"] == 2
    assert set(built["group_sizes"].values()) == {len(devices) * 1}
    assert len(built["variables"]) >= 20
    for (name, device), (copy_name, copy_device) in zip(
        built["variables"][::2], built["variables"][1::2], strict=True
    ):
        assert copy_name.endswith(f"/{name}/replica_1/"), (name, copy_name)
        if "velocity" in name:  # the optimizer's slots, beside their variable's copies
            assert (device, copy_device) == (devices[0].replace("GPU", "CPU"),) * 2
        else:
            assert (device, copy_device) == tuple(devices), (name, device, copy_device)
    # the optimizer's update of each copy, built under tf.device of the copy (mirrored_strategy
    # _update): on the CPU where the copy is, here, twice the traced replica's
    updates = [device for _, t, device in built["ops"] if t == "Sqrt"]
    assert set(updates) == {devices[0].replace("GPU", "CPU")}, updates
    assert len(updates) == 2 * traced["Sqrt"] and traced["Sqrt"] >= 6, (updates, traced)
    loaded = PlacementTrace.load(trace.save(tmp_path / "mwms.tfplace"))
    for each in (trace, loaded):
        with pytest.raises(TraceError) as refused:
            predict_placement(each, gpus=2)
        said = str(refused.value)
        print(said)
        assert "cannot predict MultiWorkerMirroredStrategy with gpus=2 per worker" in said
        assert "makes 2 replicas on it, one per GPU" in said
        assert "/job:worker/task:K/device:GPU:0 to GPU:1" in said
        assert "the step's ops once per replica under tf.device of its GPU" in said
        assert "makes each variable of its scope once per replica" in said
        assert "CollectiveReduceV2 on each GPU in a group of 2 GPUs x 2 workers = 4" in said
        assert "num_replicas_in_sync 4, not 2" in said
        assert "each copy's optimizer slots and updates, made beside the copy, on the CPU" in said
        assert "Pass the setup instead, predict_placement(setup, gpus=2" in said
        assert "cluster='local:worker=2', mode='function')" in said
        assert "build (not run) the step with 2 GPUs" in said
        assert "or predict_placement(trace, gpus=1) for one GPU per worker" in said


def test_two_gpus_per_worker_are_predicted_from_the_step_tensorflow_builds_on_each_task(tmp_path):
    """predict_placement(setup, gpus=2, cluster="local:worker=2") (was: refused): each task of
    the local cluster builds the tutorial's step with the strategy seeing 2 GPUs, not run, and
    the prediction places that graph. Against TensorFlow's build, read here from its GraphDef
    (each task's, as TensorFlow serialized it): every node of each task's build is a row of
    the prediction on that task, and none else; the strategy made 2 replicas per worker
    (worker_devices GPU:0, GPU:1; num_replicas_in_sync 4); every node the build asks for
    replica k's GPU (directly, or beside a copy made for it: its stand-in CPU:k+1) is on that
    GPU, or on the task's CPU:0 by soft placement when TensorFlow registered no GPU kernel for
    its node def, or kept with the resource it shares an edge with, or, an input of the step
    (an ``_Arg``), where its value is (pinned by the runtime); each CollectiveReduceV2
    reads a group size of 4 (2 GPUs x 2 workers); each variable copy's handle and each
    per-replica iterator is pinned on its replica's GPU. The build's replica ops are those of
    TensorFlow's other route to the same graph (``mwms_gpus_graph.py``: a resolver reporting
    2 GPUs, one worker, in a process of its own): the same op types on each GPU."""
    import base64

    import tensorflow as tf

    from tfplace_widget import predict_placement

    predicted = predict_placement(
        mwms_programs.custom_loop,
        gpus=2,
        cluster="local:worker=2",
        mode="function",
        fn_kwargs={"build_optimizer": True},
    )
    assert predicted.predicted and predicted.notes[0].startswith("Predicted, not run")
    assert "with 2 GPUs on each worker" in predicted.notes[0]
    assert "without running it" in predicted.notes[0]
    assert "num_replicas_in_sync 4" in predicted.notes[0]
    assert any("Not modelled: times" in n and "NCCL or ring" in n for n in predicted.notes)
    tasks = json.loads(predicted.raw[STRATEGY_TASKS_RAW])["tasks"]
    assert set(tasks) == set(TASKS)
    alone = built_with_two_gpus_alone(tmp_path)
    for task in TASKS:
        build = tasks[task]["gpus_build"]
        prefix = task.replace("/task:", "/replica:0/task:")
        gpus = [f"{prefix}/device:GPU:{k}" for k in range(2)]
        cpu = f"{prefix}/device:CPU:0"
        stand_in = {f"{prefix}/device:CPU:{k + 1}": gpu for k, gpu in enumerate(gpus)}
        assert build["worker_devices"] == gpus and build["replicas"] == 4
        graph = tf.compat.v1.GraphDef.FromString(base64.b64decode(build["graph"]))
        rows, (device, how, reason) = on_task(predicted, prefix, "device", "how", "reason")
        assert Counter(rows["op"]) == Counter(n.name for n in graph.node)
        assert set(rows["device"]) == {cpu, *gpus}
        checked: Counter = Counter()
        for node in graph.node:
            asked = stand_in.get(node.device, node.device)
            if asked not in gpus:
                continue
            k = gpus.index(asked)
            if how[node.name] == "runtime":  # an input of the step: where its value is
                # (not pinned: a value fed at each call, such as a collective's instance key)
                where = build["pins"].get(node.name, [cpu])[0]
                assert node.op == "_Arg" and device[node.name] == where, node
                checked["input, where its value is"] += 1
            elif how[node.name] == "colocated":
                checked["kept with a resource"] += 1
            elif device[node.name] == asked:
                assert gpu_kernel_for(node) or node.op in _NOT_COMPARED, node
                assert "by the strategy's worker_devices" in reason[node.name] or (
                    node.device in stand_in and "beside replica" in reason[node.name]
                ), reason[node.name]
                assert f"eplica {k + 1} of 2" in reason[node.name]
                checked[
                    "on its replica's GPU" + (" (beside a copy)" if node.device in stand_in else "")
                ] += 1
            else:
                assert device[node.name] == cpu and how[node.name] == "soft", node
                assert not gpu_kernel_for(node), node
                checked["soft, no GPU kernel"] += 1
        print(task, dict(checked))
        assert checked["on its replica's GPU"] >= 400, checked
        assert checked["on its replica's GPU (beside a copy)"] >= 100, checked
        assert checked["soft, no GPU kernel"] >= 1, checked
        consts = {n.name: n for n in graph.node if n.op == "Const"}
        reduces = [n for n in graph.node if n.op == "CollectiveReduceV2"]
        assert len(reduces) == 4 and {stand_in.get(n.device, n.device) for n in reduces} == set(
            gpus
        )
        for node in reduces:
            size = consts[node.input[1].split(":")[0]]
            assert tf.make_ndarray(size.attr["value"].tensor).ravel()[0] == 4
            assert build["collectives"][node.name]["group_size"] == 4
            assert device[node.name] == stand_in.get(node.device, node.device)
            assert "in a group of 4 (2 GPUs x 2 workers)" in reason[node.name]
        pins = build["pins"]
        kinds = Counter(kind for _, kind in pins.values())
        assert kinds["variable"] >= 20 and kinds["iterator"] == 2, kinds
        for name, (gpu, kind) in pins.items():
            if kind in ("variable", "iterator", "resource"):
                assert gpu in gpus and device[name] == gpu, (name, kind, device[name])
        reads = rows[rows["type"] == "IteratorGetNext"]
        assert sorted(reads["device"]) == gpus, reads
        copies = [d for _, d in build["variables"]]
        assert Counter(copies)[gpus[0]] == Counter(copies)[gpus[1]] >= 12, Counter(copies)
        # TensorFlow's other route to the 2-GPU step builds the same replica ops
        on = [Counter(t for _, t, d in alone["ops"] if d == g) for g in alone["worker_devices"]]
        as_built = {"_Arg": "Placeholder"}  # the build's inputs, instantiated (mwms_gpus)
        here = [
            Counter(as_built.get(n.op, n.op) for n in graph.node if n.device == g) for g in gpus
        ]
        assert here == on, (here, on)
    _the_steps_own_request_is_the_users_to_drop(predicted)


def _the_steps_own_request_is_the_users_to_drop(predicted: Any) -> None:
    """The tutorial's step asks for /cpu:0 around its metric update, inside the function
    strategy.run runs: every replica's metric ops ask for CPU:0 alike. The findings follow
    replica 2's tensors through the build's own edges and say that request is the user's, on
    each replica's GPU, with one edit for both replicas: drop it (not: the strategy placed
    them, nothing in your code does; nor: move them to GPU:0)."""
    findings = predicted.all_findings
    bounces = findings[findings["kind"] == "ping_pong"]
    metric = [r for r in bounces.itertuples() if {"Add_2", "replica_1/Add_2"} & set(r.ops)]
    assert len(metric) == 2, [r.message for r in bounces.itertuples()]
    in_order = sorted(metric, key=lambda r: "replica_1/Add_2" in r.ops)
    for row, gpu in zip(in_order, ("0", "1"), strict=True):
        assert f"/task:0/GPU:{gpu} -> CPU -> /job:worker/task:0/GPU:{gpu}" in row.message
        assert "the CPU part is asked for" in row.message and row.evidence["user_fix"] == 1
        assert row.fix["edit"].endswith(
            "drop the tf.device('/CPU:0') around the lines that make them (inside the function "
            "strategy.run runs, the strategy then puts them on each replica's own device)."
        ), row.fix["edit"]
    user_ops = {"Add_2", "Add_3", "replica_1/Add_2", "replica_1/Add_3"}
    for row in findings.itertuples():
        if user_ops & set(row.ops):
            assert "nothing in your code places" not in row.message, row.message


def test_the_predicted_findings_are_each_workers_own_and_name_devices_it_has(mwms):
    """Every worker runs its own copy of the step under the same op names, so the findings of
    the prediction are found task by task (they mixed the copies: a ping_pong on task 0 whose
    edit named task 1's CPU, "5 copies from /job:worker/task:1/CPU:0 ... and  on the GPU read
    them"), each told once for both workers. A fix names the device as the step's code writes
    it, the worker's own /GPU:0 (was '//job:worker/task:0/GPU:0', a device that does not
    parse). No soft_move for the ops the strategy, not the user, asked onto the GPU. Variables
    of the strategy's scope are not told to move (its creator puts them on the replica device
    whatever tf.device says): the compute moves to them."""
    from tfplace_widget import predict_placement

    trace, _, _ = mwms
    predicted = predict_placement(trace, gpus=1)
    findings = predicted.all_findings
    assert len(findings) >= 1, findings
    users = {
        op
        for task in json.loads(trace.raw[STRATEGY_TASKS_RAW])["tasks"].values()
        for op in task["gpu_requests"]
    }
    softly = set(predicted.ops.loc[predicted.ops["how"] == "soft", "op"])
    assert softly - users, "the strategy's own requests: TensorFlow's asserts, soft-placed"
    for finding in findings.itertuples(index=False):
        own, _, others = finding.message.partition(" The same on ")
        assert "/job:worker/task:1" not in own, finding.message  # task 0's copy, told once
        assert others.startswith("/job:worker/task:1: MultiWorkerMirroredStrategy runs"), (
            finding.message
        )
        assert finding.evidence["tasks"] == 2
        if finding.kind == "soft_move":
            assert set(finding.ops) <= users, finding
        fix = finding.fix or {}
        for device in (fix.get("overrides") or {}).values():
            assert device in ("/GPU:0", "/CPU:0"), fix
        assert "//" not in fix.get("edit", "") and "/job:" not in fix.get("edit", ""), fix
        if "updates of variables" in finding.message or "reads of variables" in finding.message:
            moved = set(fix["overrides"])
            assert not any(op.endswith("_resource") for op in moved), fix
            assert "run that compute where they live" in finding.message


def test_each_tasks_memory_is_kept_on_its_devices_and_clock(mwms):
    """Each task's allocator records (its profile's, where oneDNN's allocator reports) are in
    the merged trace.memory (were dropped: ops with allocated_bytes and no memory row), on
    that task's devices, for its own ops, on the clock its events were moved to."""
    trace, _, _ = mwms
    recorded = trace.ops[trace.ops["allocated_bytes"].notna()]
    step = trace.memory[trace.memory["kind"] == "temporary"]  # not the variables held
    assert bool(len(recorded)) == bool(len(step))
    if recorded.empty:  # oneDNN off: TensorFlow's CPU allocator reports nothing
        return
    for device in (WORKER0, WORKER1):
        rows = step[step["device"] == device]
        events = trace.events[trace.events["device"] == device]
        assert len(rows), device
        assert set(rows["op"]) <= set(recorded.loc[recorded["device"] == device, "op"])
        end = (events["start_us"] + events["duration_us"]).max()
        allocated = rows.loc[rows["bytes"] > 0, "time_us"]
        assert events["start_us"].min() <= allocated.min() and allocated.max() <= end
    assert set(trace.memory_peaks()["device"]) == {WORKER0, WORKER1}


def test_the_tasks_times_are_on_one_clock(mwms):
    """An all-reduce cannot end on one task before the other task has started it: on one
    clock, the two tasks' runs of each CollectiveReduceV2 overlap (they would not if each
    task's times counted from its own first op, as they did). Every task runs its traced calls
    in its profiled window once all have started it, so each task has each collective's run."""
    trace, _, _ = mwms
    reduces = trace.ops.loc[trace.ops["type"] == "CollectiveReduceV2", "op"]
    events = trace.events[trace.events["op"].isin(set(reduces))]
    compared = 0
    for op, runs in events.groupby("op"):
        spans = {
            device: (rows["start_us"].min(), (rows["start_us"] + rows["duration_us"]).max())
            for device, rows in runs.groupby("device")
        }
        (start0, end0), (start1, end1) = spans[WORKER0], spans[WORKER1]
        assert start0 <= end1 and start1 <= end0, (op, spans)
        compared += 1
    assert compared >= 1, events
    assert trace.events["start_us"].min() == 0
    assert any("on one clock" in note for note in trace.notes)


def test_each_profiles_start_is_read_from_its_clock_mark(tf, tmp_path):
    """What puts each task's profile on the one clock: its start, in µs since the epoch, read
    from the mark ``start_profiler`` records. It lies between the clock read before starting
    and the mark (TF 2.16 writes no start of its own, and reading the clock before starting,
    as was done, put two tasks' runs of one all-reduce 0.4 ms apart); where TensorFlow writes
    its profile_start_time, the two agree within 100 µs (1-6 µs seen)."""

    @tf.function
    def square(x):
        return tf.matmul(x, x)

    x = tf.ones((8, 8))
    square(x)
    before_ns = time.time_ns()
    marked_ns = start_profiler(str(tmp_path))
    try:
        square(x)
    finally:
        tf.profiler.experimental.stop()
    space = written_xspace(str(tmp_path))
    start_us = profile_start_us(space, marked_ns)
    assert start_us is not None
    assert before_ns // 1000 <= start_us <= marked_ns // 1000
    written = [
        _profile_start_ns(plane) // 1000
        for plane in parse_xspace(space).planes
        if plane.name == b"Task Environment"
    ]
    for written_us in written:  # none on TF 2.16
        assert abs(start_us - written_us) <= 100, (start_us, written_us)
    assert profile_start_us(space, marked_ns + 5_000_000) == start_us + 5_000


def test_each_all_reduce_sends_its_tensor_to_the_other_task(mwms, tf):
    """The all-reduces are the step's traffic between tasks: per task and CollectiveReduceV2,
    a cross-task transfer of its input tensor to the other worker, of the size TensorFlow's
    graph gives it. The gradients' all-reduce carries every trainable variable's gradient
    (one concatenated tensor: the model's variables' sizes, float32), the loss's one float."""
    trace, _, _ = mwms
    scope = optimizers_scope(trace)
    gradients = sum(
        int(tf.size(v)) * tf.as_dtype(v.dtype).size
        for v in mwms_programs.build_cnn_model().trainable_variables
    )
    assert gradients == 4 * (3 * 3 * 8 + 8 + 26 * 26 * 8 * 16 + 16 + 16 * 10 + 10)
    crossing = trace.transfers[trace.transfers["cross_task"]]
    sent = {
        (tensor, src, dst): size
        for tensor, src, dst, size in crossing[
            ["tensor", "src_device", "dst_device", "bytes"]
        ].itertuples(index=False)
    }
    assert sent == {
        (f"{scope}/concat:0", WORKER0, WORKER1): gradients,
        (f"{scope}/concat:0", WORKER1, WORKER0): gradients,
        ("concat/concat:0", WORKER0, WORKER1): 4,
        ("concat/concat:0", WORKER1, WORKER0): 4,
    }, crossing
    reduces = trace.ops[trace.ops["op"] == f"{scope}/CollectiveReduceV2"]
    for reason in reduces["reason"]:
        assert f"Its input {scope}/concat:0 is {gradients:,} bytes" in reason, reason
    # the strategy's own traffic: no finding tells to keep both ends on one task
    assert not (trace.all_findings["kind"] == "cross_task_transfer").any(), trace.all_findings


def test_compare_two_cluster_runs(mwms, trace_placement, tf):
    """The same step with a hidden layer twice as wide, against the fixture's: every op is on
    the same task and device (matched per task: each name is on both workers), the all-reduces'
    transfers are the same four with the gradients' bytes of each model (changed: another
    size), and the summary says so and what crossed between tasks in each run."""
    trace, _, _ = mwms
    wide = trace_placement(mwms_programs.custom_loop, 32, cluster="local:worker=2", mode="function")
    diff = compare(trace, wide)
    assert set(diff.ops["status"]) == {"same"}, diff.ops[diff.ops["status"] != "same"]
    assert len(diff.ops) == len(trace.ops) == len(wide.ops)
    assert set(diff.ops["device_a"]) == {WORKER0, WORKER1}
    assert list(diff.devices["device"]) == [WORKER0, WORKER1]
    assert list(diff.devices["ops_a"]) == list(diff.devices["ops_b"])
    sizes = {
        units: sum(
            int(tf.size(v)) * tf.as_dtype(v.dtype).size
            for v in mwms_programs.build_cnn_model(units).trainable_variables
        )
        for units in (16, 32)
    }
    scope = optimizers_scope(trace)
    gradients = diff.transfers[diff.transfers["tensor"] == f"{scope}/concat:0"]
    # the same two copies, each of the other model's gradients: changed, not the same
    assert len(gradients) == 2 and set(gradients["status"]) == {"changed"}
    assert set(gradients["bytes_a"]) == {sizes[16]} and set(gradients["bytes_b"]) == {sizes[32]}
    assert set(zip(gradients["src_device"], gradients["dst_device"], strict=True)) == {
        (WORKER0, WORKER1),
        (WORKER1, WORKER0),
    }
    a_sent, b_sent = (format_bytes(2 * (sizes[units] + 4)) for units in (16, 32))
    assert diff.summary.startswith(f"No op moved. 2 transfers changed: {scope}/concat:0 ("), (
        diff.summary
    )
    change = f"{format_bytes(sizes[16])} -> {format_bytes(sizes[32])}"
    assert diff.summary.count(change) == 2, diff.summary
    assert f". Sent between tasks: a {a_sent}, b {b_sent}." in diff.summary, diff.summary


def test_a_worker_waiting_for_a_slower_one_is_no_idle_device(mwms):
    """Task 0 took far longer than task 1 (seen in notebook 07's run: 110 ms of a 120 ms step
    in its all-reduce; in CI's, on a loaded machine, in its own ops). Under
    MultiWorkerMirroredStrategy every worker runs the same step: there is no work the user
    could move to the waiting worker, so no idle_device finding (it said "move some of
    /job:worker/task:0/CPU:0's work there"). The same events without the strategy's record,
    as a TF1 cluster's trace where the user places ops on either task, do give it."""
    trace, _, _ = mwms
    slow = copy.deepcopy(trace)
    slow.__dict__.pop("_findings_cache", None)  # the findings of the changed events
    events = slow.events
    span = float((events["start_us"] + events["duration_us"]).max() - events["start_us"].min())
    on_task0 = events["device"] == WORKER0
    all_reduce = events.index[
        (events["op"] == f"{optimizers_scope(trace)}/CollectiveReduceV2") & on_task0
    ][0]
    compute = events[on_task0 & events["op"].str.contains("MatMul")]["duration_us"].idxmax()
    events.loc[[all_reduce, compute], "duration_us"] = 10 * span
    assert not (slow.all_findings["kind"] == "idle_device").any(), slow.all_findings

    placed_by_hand = copy.deepcopy(slow)
    del placed_by_hand.raw[STRATEGY_TASKS_RAW]
    idle = placed_by_hand.all_findings.query("kind == 'idle_device'")
    assert idle["message"].str.startswith(f"{short_device(WORKER1)} is idle").tolist() == [True], (
        idle["message"].tolist()
    )


def test_each_workers_copy_of_the_variables_is_no_replicated_variables(mwms, monkeypatch):
    """Every worker holds a copy of the strategy's variables, the same sizes on each, but in
    its own memory: no device holds two, so no ``replicated_variables`` finding (its findings
    are found per task, and each task's step has one replica), even at any size."""
    from tfplace_widget._analyses import findings

    trace, _, _ = mwms
    held = trace.memory[trace.memory["kind"] == "persistent"]
    sizes = {d: sorted(rows["bytes"]) for d, rows in held.groupby("device")}
    assert set(sizes) == {WORKER0, WORKER1} and sizes[WORKER0] == sizes[WORKER1]
    monkeypatch.setattr(findings, "PEAK_OP_BYTES", 1)
    found = findings.find_findings(trace, immaterial=True)
    assert not (found["kind"] == "replicated_variables").any(), found[["kind", "message"]]
