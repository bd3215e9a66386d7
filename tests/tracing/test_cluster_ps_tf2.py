"""TF2 code under ``ParameterServerStrategy`` across a local cluster (issue 36):
``trace_placement(setup, cluster="local:worker=2,ps=2", mode="function")`` runs ``setup`` in the
coordinator's process (``/job:chief/task:0``, which tfplace adds), schedules the step it returns
through the ``ClusterCoordinator``, and traces what the workers placed.

Checked against TensorFlow itself: every task's process prints TensorFlow's placement log
(``log_device_placement``, which the strategy passes on to each task), and the trace's ops are
on the devices that log names, op for op; the shards are those TensorFlow's partitioner makes,
their bytes those of the shapes it gives. The program is in ``ps_programs`` (a module: the
coordinator imports the setup by name).
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections import Counter
from typing import Any

import pandas as pd
import ps_programs
import pytest
from test_cluster import WORKER0, WORKER1, record
from test_cluster_tf2 import gpu_kernel_for, on_task, worker_processes

from tfplace_widget import compare
from tfplace_widget._model.errors import ClusterError, TraceError
from tfplace_widget._model.trace import STRATEGY_TASKS_RAW, PlacementTrace

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
PS1 = "/job:ps/replica:0/task:1/device:CPU:0"
WORKERS = {"/job:worker/task:0": WORKER0, "/job:worker/task:1": WORKER1}
_SECTION = re.compile(r"^tfplace: (/job:\w+/task:\d+) ran (\S+)\(\); its process printed:$", re.M)
_PLACED = re.compile(r"placer\.cc:\d+\] (\S+): \((\w+)\): (\S+)$", re.MULTILINE)
_DUMPED = re.compile(r"Dumped Graph to \S+/(\S+?)\.\d{4}\.main\.(\w+)\.pbtxt$", re.MULTILINE)
_NOT_COMPARED = {"_Retval", "_DeviceArg"}
# The ops of the program's `tf.reduce_sum(tf.cast(tf.greater(pred, 0.5), tf.int64))`, under its
# own tf.device("/cpu:0") (ps_programs.custom_loop), as TensorFlow names them.
ACCURACY_OPS = {"Greater", "Greater/y", "Cast_1", "Const_1", "Sum_1"}


@pytest.fixture(scope="module")
def ps(trace_placement: Any) -> Any:
    """The tutorial's custom training loop on two workers and two ps tasks; the processes it
    started and the thread count before."""
    with pytest.MonkeyPatch.context() as patch:
        spy = record(patch)
        threads = threading.active_count()
        trace = trace_placement(
            ps_programs.custom_loop, cluster="local:worker=2,ps=2", mode="function", steps=2
        )
        return trace, spy, threads


def printed(trace: Any) -> dict[str, str]:
    """What each task's process printed, as the merged log keeps it."""
    found = list(_SECTION.finditer(trace.log))
    ends = [m.start() for m in found[1:]] + [len(trace.log)]
    return {m[1]: trace.log[m.end() : end] for m, end in zip(found, ends, strict=True)}


def step_placements(log: str) -> list[tuple[str, str, str]]:
    """TensorFlow's placement log of the step's function in one task's log: the placer's lines
    after TensorFlow dumped that function's graph before the placer (``__inference_step_fn_N``)."""
    dumps = list(_DUMPED.finditer(log))
    placed = []
    for index, dump in enumerate(dumps):
        if dump[2] != "before_placer" or not re.fullmatch(r"__inference_step_fn_\d+", dump[1]):
            continue
        end = dumps[index + 1].start() if index + 1 < len(dumps) else len(log)
        placed += _PLACED.findall(log[dump.end() : end])
    return placed


def ran_the_step(trace: Any) -> list[str]:
    """The workers whose ops are in the trace."""
    return [task for task, device in WORKERS.items() if device in set(trace.ops["device"])]


def test_the_step_runs_on_workers_and_its_variables_on_the_ps_tasks(ps):
    trace, _, _ = ps
    workers = ran_the_step(trace)
    assert workers, trace.devices
    assert set(trace.devices) == {PS0, PS1, *(WORKERS[w] for w in workers)}
    types = trace.ops.groupby("device")["type"].agg(lambda t: {x.removeprefix("_Mkl") for x in t})
    for task in workers:
        assert {"IteratorGetNext", "Square"} <= types[WORKERS[task]], types[WORKERS[task]]
        assert "ReadVariableOp" not in types[WORKERS[task]]
    for device in (PS0, PS1):
        assert {"ReadVariableOp", "AssignSubVariableOp"} <= types[device], types[device]
        assert "IteratorGetNext" not in types[device]
    assert trace.mode == "function"


def test_each_tasks_ops_are_where_its_placement_log_puts_them(ps):
    """TensorFlow's placement log of the step on each worker that ran it (printed in that
    worker's process): every op it names is in the trace on the device it names, the
    variables' ops on the ps tasks, the rest on that worker."""
    trace, _, _ = ps
    logs = printed(trace)
    assert set(logs) == {
        "/job:chief/task:0",
        "/job:worker/task:0",
        "/job:worker/task:1",
        "/job:ps/task:0",
        "/job:ps/task:1",
    }
    rows = Counter(zip(trace.ops["op"], trace.ops["device"], strict=True))
    for task in ran_the_step(trace):
        placed = [(n, t, d) for n, t, d in step_placements(logs[task]) if t not in _NOT_COMPARED]
        assert len(placed) >= 40, (task, placed)
        compared: Counter = Counter()
        for name, op_type, device in placed:
            assert rows[(name, device)] == 1, (task, name, op_type, device)
            compared[device] += 1
        print(f"{task}: {sum(compared.values())} ops placed as its placement log says", compared)
        assert compared[WORKERS[task]] >= 30 and compared[PS0] >= 4 and compared[PS1] >= 4


def test_each_shard_names_its_ps_task_and_the_partitioner(ps, tf):
    """The variables' _Arg ops (their handles) are on the ps task TensorFlow's placement log
    puts them on, and say which variable or shard they are: w1 in the shards the strategy's
    MinSizePartitioner makes (asked here of the partitioner itself), dealt out round-robin in
    creation order (w1's two shards on ps:0 and ps:1, then b1 on ps:0, w2 on ps:1)."""
    trace, _, _ = ps
    partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
        min_shard_bytes=ps_programs.MIN_SHARD_BYTES, max_shards=2
    )
    split = partitioner(tf.TensorShape([ps_programs.FEATURES, ps_programs.UNITS]), tf.float32)
    assert list(split) == [2, 1]
    rows = ps_programs.FEATURES // 2
    shard = rows * ps_programs.UNITS * 4
    expected = {
        "Variable shard 1 of 2 of w1 (w1/part_0: "
        f"[{rows}, {ps_programs.UNITS}] float32, {shard:,} bytes), placed on /job:ps/task:0 by "
        "the strategy's variable_partitioner (MinSizePartitioner)": PS0,
        "Variable shard 2 of 2 of w1 (w1/part_1: "
        f"[{rows}, {ps_programs.UNITS}] float32, {shard:,} bytes), placed on /job:ps/task:1 by "
        "the strategy's variable_partitioner (MinSizePartitioner)": PS1,
        "Variable b1 ([64] float32, 256 bytes), placed on /job:ps/task:0": PS0,
        "Variable w2 ([64, 1] float32, 256 bytes), placed on /job:ps/task:1": PS1,
    }
    rule = (
        "ParameterServerStrategy deals variables and shards out round-robin over the ps tasks "
        "in the order they are created (task = creation index mod the number of ps tasks)."
    )
    logged = {
        name: device
        for task in ran_the_step(trace)
        for name, op_type, device in step_placements(printed(trace)[task])
        if op_type == "_Arg"
    }
    handles = trace.ops[(trace.ops["type"] == "_Arg") & trace.ops["op"].str.endswith("_resource")]
    found = {}
    for op, device, reason in handles[["op", "device", "reason"]].itertuples(index=False):
        said = [words for words in expected if words in reason]
        assert len(said) == 1 and reason.endswith(rule), reason
        assert logged[op] == device == expected[said[0]], (op, device, logged.get(op))
        found[said[0]] = op
    assert len(found) == 4, handles
    # the reads and updates of each variable are on its task, and say so too
    for op_type in ("ReadVariableOp", "AssignSubVariableOp"):
        for reason in trace.ops.loc[trace.ops["type"] == op_type, "reason"]:
            assert sum(words in reason for words in expected) == 1, reason
    raw = json.loads(trace.raw[STRATEGY_TASKS_RAW])
    assert raw["strategy"] == "ParameterServerStrategy"
    assert raw["partitioner"] == "MinSizePartitioner"
    assert any(
        "sharded by MinSizePartitioner: w1 on /job:ps/task:0, /job:ps/task:1 (2 shards)" in note
        for note in trace.notes
    ), trace.notes


def test_each_step_reads_every_shard_from_its_ps_task_and_sends_the_updates_back(ps):
    """The cross-task transfers of each worker that ran the step: each variable's (shard's)
    value from its ps task, and its update back, with the bytes of its shape (float32): the
    static shapes of the step's graph, whose tensors TensorFlow's partitions send."""
    trace, _, _ = ps
    transfers = trace.transfers
    # not the control edges' dummy tensors (".../ctrl/_N:0"), which carry no data
    crossing = transfers[transfers["cross_task"] & ~transfers["tensor"].str.contains("/ctrl/")]
    shard = ps_programs.FEATURES // 2 * ps_programs.UNITS * 4
    sizes = Counter({(PS0, shard): 1, (PS1, shard): 1, (PS0, 256): 1, (PS1, 256): 1})
    for task in ran_the_step(trace):
        worker = WORKERS[task]
        reads = crossing[crossing["dst_device"] == worker]
        values = reads[reads["tensor"].str.contains("ReadVariableOp")]
        assert Counter(zip(values["src_device"], values["bytes"], strict=True)) == sizes, values
        updates = crossing[crossing["src_device"] == worker]
        assert Counter(zip(updates["dst_device"], updates["bytes"], strict=True)) == sizes, updates
    assert not set(trace.transfers["src_device"]) - set(trace.devices)


def test_the_worker_of_each_step_is_the_one_the_coordinator_sent_it_to(ps):
    """The coordinator scheduled the step warmup + steps = 3 times; each call's worker (TensorFlow
    logged it on that worker) is a worker whose TensorFlow placed the step (its graphs), and
    every op there names the calls it ran."""
    trace, _, _ = ps
    raw = json.loads(trace.raw[STRATEGY_TASKS_RAW])
    scheduled = raw["scheduled"]
    assert len(scheduled) == raw["calls"] == 3 and raw["warmup"] == 1, raw
    assert set(scheduled) == set(ran_the_step(trace))
    for task in ran_the_step(trace):
        calls = [
            f"{n + 1}{' (warm-up)' if n < raw['warmup'] else ''}"
            for n, w in enumerate(scheduled)
            if w == task
        ]
        words = (
            f"The step runs on {task} because the coordinator scheduled it there "
            f"(ClusterCoordinator.schedule: call{'s' * (len(calls) > 1)} {', '.join(calls)} of 3)."
        )
        for reason in trace.ops.loc[trace.ops["device"] == WORKERS[task], "reason"]:
            assert reason.endswith(words), reason
    assert any(
        "the coordinator (/job:chief/task:0) scheduled the step 3 times" in n for n in trace.notes
    )


def test_each_tasks_profiler_times_its_ops_on_one_clock(ps):
    """Each worker and ps task's TensorFlow profiler recorded the step's ops there in the
    traced calls (the 2 after the warm-up call): each op's events are on its own task's
    device; the ps tasks ran each variable's read once per traced call (whichever worker it
    was for), each worker ran its compute once per traced call it was sent; and on one clock,
    every worker's MatMul/concat (which joins w1's two shards) starts after the ps task's read
    of the first shard that it waited for."""
    trace, _, _ = ps
    events = trace.events
    assert not events.empty and events["start_us"].min() == 0
    placed = set(zip(trace.ops["op"], trace.ops["device"], strict=True))
    assert all(key in placed for key in zip(events["op"], events["device"], strict=True))
    raw = json.loads(trace.raw[STRATEGY_TASKS_RAW])
    traced = raw["scheduled"][raw["warmup"] :]
    assert len(traced) == 2
    ops = trace.ops.set_index(["op", "device"])
    for read, device in (
        ("MatMul/concat/ReadVariableOp", PS0),
        ("MatMul/concat/ReadVariableOp_1", PS1),
        ("add/ReadVariableOp", PS0),
        ("MatMul_1/ReadVariableOp", PS1),
    ):
        assert ops.loc[(read, device), "runs"] == len(traced), (read, device)
    for task in ran_the_step(trace):
        runs = ops.loc[("MatMul/concat", WORKERS[task]), "runs"]
        assert (0 if pd.isna(runs) else runs) == traced.count(task), task
    reads = events[(events["op"] == "MatMul/concat/ReadVariableOp") & (events["device"] == PS0)]
    joins = events[events["op"] == "MatMul/concat"]
    assert len(joins) == len(traced)
    for start in joins["start_us"]:
        assert (reads["start_us"] <= start).any(), (start, reads)
    assert any(n.startswith("Times: of the traced calls") for n in trace.notes)


def test_a_saved_trace_loads_the_same(ps, tmp_path):
    """The trace saves and loads whole (its strategy's record too)."""
    trace, _, _ = ps
    loaded = PlacementTrace.load(trace.save(tmp_path / "ps.tfplace"))
    columns = ["op", "device", "reason", "runs"]
    assert loaded.ops[columns].equals(trace.ops[columns])
    assert loaded.transfers.equals(trace.transfers) and loaded.notes == trace.notes
    assert loaded.raw[STRATEGY_TASKS_RAW] == trace.raw[STRATEGY_TASKS_RAW]


def test_each_workers_step_is_predicted_on_its_gpu_and_the_variables_stay_on_the_ps_tasks(
    ps, tmp_path
):
    """predict_placement(trace, gpus=1) (was: refused, "cannot predict a trace of
    ParameterServerStrategy"): on workers with a GPU the strategy's worker_devices are the
    GPUs and strategy.run builds the replica under tf.device("/device:GPU:0"), so each op the
    strategy pinned to the replica is predicted on that worker's GPU:0 when TensorFlow's
    registry has a GPU kernel for its node def (the step's node defs as the worker's
    TensorFlow dumped them before its placer), and on the worker's CPU:0 by soft placement
    when not (the Assert's string constants); the program's own tf.device("/cpu:0") inside
    the replica (the coordinator recorded which ops it reaches, told from the strategy's
    /device:CPU:0 by the very scope the strategy pushed) stays on the worker's CPU:0; the
    variables' handles, reads and updates stay on the ps tasks' CPU:0 where the trace has
    them; each shard's value then travels from its ps task to the worker's GPU (and the
    update back), with its bytes. A saved and loaded trace predicts the same."""
    from tensorflow.core.framework import graph_pb2
    from test_cluster_tf2 import gpu_kernel_for

    from tfplace_widget import predict_placement

    trace, _, _ = ps
    loaded = PlacementTrace.load(trace.save(tmp_path / "ps.tfplace"))
    predicted = predict_placement(loaded, gpus=1)
    assert predicted.predicted and predicted.notes[0].startswith("Predicted, not run")
    assert "ParameterServerStrategy's coordinator scheduled on 2 worker(s)" in predicted.notes[0]
    assert "per-worker tf.data iterator stays on each worker's CPU:0" in predicted.notes[1]
    workers = ran_the_step(trace)
    gpus = {task: WORKERS[task].replace("CPU:0", "GPU:0") for task in workers}
    assert set(predicted.devices) == {PS0, PS1, *(WORKERS[t] for t in workers), *gpus.values()}
    nodes = {n.name: n for n in graph_pb2.GraphDef.FromString(trace.raw["graph_def.pb"]).node}
    record = json.loads(trace.raw[STRATEGY_TASKS_RAW])
    traced = set(zip(trace.ops["op"], trace.ops["device"], strict=True))
    shard = ps_programs.FEATURES // 2 * ps_programs.UNITS * 4
    sizes = Counter({(PS0, shard): 1, (PS1, shard): 1, (PS0, 256): 1, (PS1, 256): 1})
    for task in workers:
        cpu, gpu = WORKERS[task], gpus[task]
        user = record["tasks"][task]["gpu_requests"]  # the program's tf.device("/cpu:0")
        assert {"Greater", "Cast_1", "Sum_1"} <= set(user), user
        assert set(user.values()) == {"/device:CPU:0"} and "MatMul" not in user, user
        rows = predicted.ops[predicted.ops["device"].isin([cpu, gpu])]
        on_task = {op for op, device in traced if device == cpu and op in nodes}
        assert set(rows["op"]) == on_task
        checked: Counter = Counter()
        for row in rows.itertuples(index=False):
            assert row.reason.endswith(
                "because the coordinator scheduled it there "
                f"(ClusterCoordinator.schedule: {_calls(record, task)})."
            )
            requested = trace.facts.requested.get(row.op, "")
            if row.type in _NOT_COMPARED or row.type == "_Arg":
                continue
            if row.op in user:
                assert row.device == cpu and row.how == "explicit", row
                assert "the user's own tf.device inside ParameterServerStrategy's" in row.reason
                checked["user's, kept"] += 1
            elif requested and gpu_kernel_for(nodes[row.op]):
                assert requested == "/device:CPU:0" and row.device == gpu, row
                assert "ParameterServerStrategy's replica device, this worker's GPU:0" in (
                    row.reason
                )
                checked["GPU"] += 1
            elif requested:
                assert row.device == cpu and row.how == "soft", row
                assert "no GPU kernel" in row.reason, row.reason
                assert nodes[row.op].attr["dtype"].type == 7, row  # tf.string
                checked["no GPU kernel"] += 1
            elif row.how == "colocated":  # with the per-worker iterator, checked below
                assert row.type == "IteratorGetNext", row
            else:  # no request: the worker the step was sent to, its GPU first
                assert row.device == (gpu if gpu_kernel_for(nodes[row.op]) else cpu), row
                assert f"the worker the coordinator sent the step to, {task}" in row.reason
                checked["no request"] += 1
        print(task, dict(checked))
        assert checked["GPU"] >= 50 and checked["no GPU kernel"] >= 3, checked
        assert checked["user's, kept"] == 5 and checked["no request"] >= 2, checked
        # the batches: the per-worker tf.data iterator stays on the CPU, its batch is copied
        reads = rows[rows["type"] == "IteratorGetNext"]
        assert list(reads["device"]) == [cpu], reads
        copies = predicted.transfers
        assert ((copies["tensor"] == "IteratorGetNext:0") & (copies["dst_device"] == gpu)).any()
        # the shards' values from their ps tasks to this worker's GPU, the updates back
        crossing = copies[copies["cross_task"]]
        values = crossing[crossing["dst_device"] == gpu]
        assert Counter(zip(values["src_device"], values["bytes"], strict=True)) == sizes, values
        updates = crossing[crossing["src_device"] == gpu]
        assert Counter(zip(updates["dst_device"], updates["bytes"], strict=True)) == sizes
        assert (
            not (crossing["dst_device"] == cpu).any() and not (crossing["src_device"] == cpu).any()
        )
    on_ps = predicted.ops[predicted.ops["device"].isin([PS0, PS1])]
    assert set(on_ps["type"]) >= {"_Arg", "ReadVariableOp", "AssignSubVariableOp"}
    for row in on_ps.itertuples(index=False):
        assert (row.op, row.device) in traced, row  # where the trace has it
        assert "placed on /job:ps/task:" in row.reason and "round-robin" in row.reason, row
    handles = on_ps[on_ps["type"] == "_Arg"]
    assert (
        len(handles) == 4
        and handles["reason"]
        .str.contains("makes it under tf.device\\('/job:ps/task:[01]/CPU:0'\\) whatever devices")
        .all()
    ), handles
    # the findings are each worker's own: the program's tf.device("/cpu:0") between GPU ops
    pongs = predicted.all_findings
    pongs = pongs[pongs["kind"] == "ping_pong"]
    assert len(pongs) == 1 and set(pongs["ops"].iloc[0]) <= {*user, "MatMul_1", "Identity_1"}
    same = predict_placement(loaded, gpus=0)  # without GPUs: the placement the workers made
    assert set(zip(same.ops["op"], same.ops["device"], strict=True)) <= traced


def _calls(record: dict[str, Any], task: str) -> str:
    calls = [
        f"{n + 1}{' (warm-up)' if n < record['warmup'] else ''}"
        for n, worker in enumerate(record["scheduled"])
        if worker == task
    ]
    return f"call{'s' * (len(calls) > 1)} {', '.join(calls)} of {len(record['scheduled'])}"


def test_a_prediction_with_more_gpus_or_of_an_older_trace_is_refused_by_name(ps):
    """More GPUs per worker make more replicas, a graph the trace does not hold: refused, saying
    what the strategy builds then (parameter_server_strategy_v2.py: worker_devices one per GPU
    the workers have, strategy.run through mirrored_run, AggregatingVariable with more than one
    replica, ReductionToOneDevice to /device:CPU:0) and what the user can do; a trace made
    before the coordinator recorded the step's own requests cannot say what they ask for."""
    from tfplace_widget import predict_placement

    trace, _, _ = ps
    with pytest.raises(TraceError) as refused:
        predict_placement(trace, gpus=3)
    said = str(refused.value)
    assert "cannot predict ParameterServerStrategy with gpus=3 per worker" in said, said
    assert "makes 3 replicas on it (its worker_devices /device:GPU:0 to /device:GPU:2" in said
    assert "builds the step function once per replica under tf.device of its GPU" in said
    assert "the variables stay on the ps tasks" in said and "AggregatingVariable" in said
    assert "reduced on the worker's /device:CPU:0" in said
    assert "only when the workers it connects to have 3 GPUs each" in said
    assert "predict_placement(setup, gpus=3, cluster='local:worker=2,ps=2'" in said, said
    assert "or predict_placement(trace, gpus=1)" in said
    older = copy.deepcopy(trace)
    record = json.loads(older.raw[STRATEGY_TASKS_RAW])
    for info in record["tasks"].values():
        info.pop("gpu_requests", None)
    older.raw[STRATEGY_TASKS_RAW] = json.dumps(record).encode()
    with pytest.raises(TraceError, match="made by an older tfplace.*trace it again"):
        predict_placement(older, gpus=1)


def test_two_gpus_per_worker_are_predicted_from_the_step_the_coordinator_builds():
    """predict_placement(setup, gpus=2, cluster="local:worker=2,ps=2") (was: refused): after
    the traced run the coordinator builds the tutorial's step with the strategy counting 2
    GPUs per worker (its _set_num_gpus), as ClusterCoordinator.schedule traces it, not sent
    to a worker, and the prediction places that graph. Against TensorFlow's build, read here
    from its GraphDef as TensorFlow serialized it: on each worker, every node is a row on that
    worker or on a ps task, and none else; the strategy made 2 replicas (worker_devices
    /device:GPU:0, /device:GPU:1; num_replicas_in_sync 2) and wrapped the 4 variables (w1's 2
    shards, b1, w2) in AggregatingVariable; every node the build asks for replica k's GPU is on
    the worker's GPU:k, or on its CPU:0 by soft placement when TensorFlow registered no GPU
    kernel for its node def, or kept with the resource it shares an edge with; every node it
    asks for a ps task is there, each variable's handle on the ps task the strategy made it
    on; the program's own tf.device("/cpu:0") of each replica stays on the worker's CPU:0, as
    does the mean of the replicas' updates of each variable; no collectives."""
    import base64

    import tensorflow as tf

    from tfplace_widget import predict_placement

    predicted = predict_placement(
        ps_programs.custom_loop,
        gpus=2,
        cluster="local:worker=2,ps=2",
        mode="function",
        fn_kwargs={"aggregation": "MEAN"},
    )
    assert predicted.predicted and predicted.notes[0].startswith("Predicted, not run")
    assert "with 2 GPUs on each worker" in predicted.notes[0]
    assert "num_replicas_in_sync 2" in predicted.notes[0]
    assert "without sending it to a worker" in predicted.notes[0]
    assert "4 wrapped in AggregatingVariable" in predicted.notes[0]
    assert any(n.startswith("Not modelled: times") for n in predicted.notes)
    record = json.loads(predicted.raw[STRATEGY_TASKS_RAW])
    build = record["gpus_build"]
    assert build["worker_devices"] == ["/device:GPU:0", "/device:GPU:1"]
    assert build["replicas"] == 2
    assert len(build["aggregating"]) == 4
    graph = tf.compat.v1.GraphDef.FromString(base64.b64decode(build["graph"]))
    assert not [n.op for n in graph.node if n.op.startswith("Collective")]
    on_ps = predicted.ops[predicted.ops["device"].isin([PS0, PS1])]
    ps_device = dict(zip(on_ps["op"], on_ps["device"], strict=True))
    held = {
        name: pin for name, pin in build["pins"].items() if pin[1] == "variable"
    }  # each variable handle -> [its ps device, "variable"]
    assert {tf.DeviceSpec.from_string(d).to_string() for d, _ in held.values()} == {PS0, PS1}
    for name, (device, _) in held.items():
        assert ps_device[name] == device, name
        reason = predicted.ops.loc[predicted.ops["op"] == name, "reason"].iloc[0]
        held_by = device.split("/device:")[0].replace("/replica:0", "")
        assert f"placed on {held_by}" in reason, reason
    for task, cpu in WORKERS.items():
        prefix = cpu.removesuffix("/device:CPU:0")
        gpus = [f"{prefix}/device:GPU:{k}" for k in range(2)]
        rows, (device, how, reason) = on_task(predicted, prefix, "device", "how", "reason")
        assert Counter(rows["op"]) + Counter(on_ps["op"]) == Counter(n.name for n in graph.node)
        assert set(rows["device"]) == {cpu, *gpus}
        checked: Counter = Counter()
        for node in graph.node:
            if node.device.startswith("/job:ps/"):
                assert ps_device[node.name] == tf.DeviceSpec.from_string(node.device).to_string()
                checked["on the ps task asked"] += 1
                continue
            if node.device not in build["worker_devices"]:
                continue
            k = build["worker_devices"].index(node.device)
            assert f"replica {k + 1} of 2" in reason[node.name], reason[node.name]
            assert "Built by TensorFlow at the coordinator for 2 GPUs" in reason[node.name]
            if how[node.name] == "colocated":
                checked["kept with a resource"] += 1
            elif device[node.name] == gpus[k]:
                assert gpu_kernel_for(node) or node.op in _NOT_COMPARED, node
                checked["on its replica's GPU"] += 1
            else:
                assert device[node.name] == cpu and how[node.name] == "soft", node
                assert not gpu_kernel_for(node), node
                checked["soft, no GPU kernel"] += 1
        accuracy = [n.name for n in graph.node if n.name.removeprefix("replica_1/") in ACCURACY_OPS]
        assert len(accuracy) == 2 * len(ACCURACY_OPS), accuracy
        assert {device[name] for name in accuracy} == {cpu}
        # each AggregatingVariable's MEAN of the 2 replicas' updates, reduced to the worker's
        # /device:CPU:0 (ReductionToOneDevice) before the update goes to its ps task
        means = [n.name for n in graph.node if n.op == "RealDiv" and n.device == "/device:CPU:0"]
        assert len(means) == len(build["aggregating"]), means
        assert {device[name] for name in means} == {cpu}
        print(task, dict(checked))
        assert checked["on its replica's GPU"] >= 100, checked
        assert checked["on the ps task asked"] >= 4, checked
        iterators = [n for n, (_, kind) in build["pins"].items() if kind == "iterator"]
        assert iterators and {device[n] for n in iterators} == {cpu}
        # replica 2's read of w1's first shard crosses from ps:0 to this worker's GPU:1, its
        # bytes those of the shard's shape in the built graph
        shard = ps_programs.FEATURES // 2 * ps_programs.UNITS * 4
        crossing = predicted.transfers[
            (predicted.transfers["src_device"] == PS0)
            & (predicted.transfers["dst_device"] == gpus[1])
        ]
        assert shard in set(crossing["bytes"].dropna()), crossing
    found = predicted.all_findings
    reads = found[found["kind"] == "cross_task_transfer"]["message"]
    assert any("w1/part_0 (shard 1 of 2 of w1" in m for m in reads), list(reads)


def test_the_cluster_leaves_no_process_or_thread(ps):
    trace, spy, threads = ps
    assert len(spy.children) == 1 and not spy.children[0].is_running()
    assert worker_processes(spy) == []
    assert threading.active_count() == threads


def test_options_the_coordinator_cannot_apply_are_refused_before_anything_starts(
    trace_placement, monkeypatch
):
    spy = record(monkeypatch)
    with pytest.raises(ClusterError, match="overrides= is not applied under ParameterServer"):
        trace_placement(
            ps_programs.custom_loop,
            cluster="local:worker=2,ps=1",
            mode="function",
            overrides={"MatMul": "/cpu:0"},
        )
    with pytest.raises(ClusterError, match="job\\(s\\) evaluator are not supported"):
        trace_placement("ps_programs:custom_loop", cluster="local:worker=2,ps=1,evaluator=1")
    assert spy.children == []


def test_cross_task_findings_name_the_variables_and_leave_partitioned_ones_be(ps):
    """Each worker's reads from a ps task and updates back are a cross_task_transfer finding
    that names the variables and shards TensorFlow's partitioner made (as the coordinator's
    strategy holds them), not the handle arguments the step's graph takes them through; w1 is
    already split in two by the MinSizePartitioner and b1 and w2 are 256 bytes each, so no
    partitioner is advised and the finding has no fix of the user's."""
    trace, _, _ = ps
    found = trace.all_findings
    crossing = found[found["kind"] == "cross_task_transfer"]
    named = {
        PS0: ("w1/part_0 (shard 1 of 2 of w1, 1.3 kB)", "b1 (256 B)"),
        PS1: ("w1/part_1 (shard 2 of 2 of w1, 1.3 kB)", "w2 (256 B)"),
    }
    seen = 0
    for message, evidence in crossing[["message", "evidence"]].itertuples(index=False):
        assert "_resource" not in message and "Partition " not in message, message
        assert evidence["user_fix"] == 0, evidence
        for device, names in named.items():
            task = device.replace("/replica:0", "").removesuffix("/device:CPU:0")
            if f"variables on {task} (" in message:
                assert all(name in message for name in names), message
                assert "w1 already split over the ps tasks by MinSizePartitioner" in message
                seen += 1
    # reads and updates, between each ps task and each worker that ran the step
    assert seen == 2 * 2 * len(ran_the_step(trace)), crossing["message"].tolist()


def test_ops_the_strategy_asked_a_device_for_name_the_strategy(ps):
    """The step's ops that ask for /device:CPU:0 (TensorFlow's graph before the placer: their
    requested_device): the accuracy's (the program's own tf.device("/cpu:0") around it, inside
    the replica) keep "with tf.device"; every other asks because ParameterServerStrategy runs
    the replica function under its replica device and reduces there, and its reason says so,
    on the workers and on the ps tasks (an update asks for the replica device, and goes with
    its variable). No ps task serves much more than the other (no unbalanced_ps)."""
    trace, _, _ = ps
    asked = trace.ops[trace.ops["requested_device"].fillna("") == "/device:CPU:0"]
    accuracy = asked["op"].isin(ACCURACY_OPS)
    assert len(asked[~accuracy]) >= 30 and set(asked["device"]) >= {PS0, PS1}, asked
    assert len(asked[accuracy]) == len(ACCURACY_OPS) * len(ran_the_step(trace)), asked[accuracy]
    words = (
        "Requested /device:CPU:0 by ParameterServerStrategy, not by a tf.device of yours (its "
        "replica device on the worker: strategy.run runs the replica function under it, "
        "strategy.reduce reduces there); placed exactly there ("
    )
    for reason in asked.loc[~accuracy, "reason"]:
        assert reason.startswith(words), reason
    for reason in asked.loc[accuracy, "reason"]:
        assert reason.startswith("Requested /device:CPU:0 with tf.device; placed exactly"), reason
    assert "unbalanced_ps" not in set(trace.all_findings["kind"])


def test_compare_one_ps_task_against_two(ps, trace_placement):
    """The same program with one ps task: the partitioner still makes two shards of ``w1``
    (``max_shards=2``), now both on ps:0. Every op of the step that ran on ps:1 is on ps:0
    (moved), with the sends and control-edge ops the runtime made for it under renumbered
    names; no op moved between the workers, and the step's own ops are all in both runs (the
    runtime's own may differ: it sends only to the workers that ran the step)."""
    two, _, _ = ps
    one = trace_placement(
        ps_programs.custom_loop, cluster="local:worker=2,ps=1", mode="function", steps=2
    )
    assert PS1 not in set(one.ops["device"])
    diff = compare(two, one)
    runtime = diff.ops["op"].str.contains(r"/_\d+$")
    own = diff.ops[~runtime]
    assert set(own["status"]) == {"same", "moved"}, own[own["status"] != "same"]
    moved_own = own[own["status"] == "moved"]
    assert sorted(moved_own["op"]) == sorted(
        op for op in two.ops["op"][two.ops["device"] == PS1] if not re.search(r"/_\d+$", op)
    )
    assert set(diff.moved["device_a"]) == {PS1} and set(diff.moved["device_b"]) == {PS0}
    assert runtime[diff.ops["status"] == "moved"].any()  # the runtime's ops moved with theirs
    assert diff.summary.startswith(f"{len(diff.moved)} ops moved: "), diff.summary
    assert diff.summary.index(moved_own["op"].iloc[0]) < diff.summary.index(" and ")
    assert "of them the runtime's sends, receives and control-edge ops" in diff.summary
