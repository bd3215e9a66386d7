"""The analyses on real cluster traces (issue 15): predict_placement, findings and reasons.

Each module-scoped trace runs real ``tf.distribute.Server``s (about 4 s): ``setter_model`` on
worker=2,ps=2, and on worker=2,ps=1 ``one_ps_model`` plus one op on worker 0's second CPU (so
that the trace also has a copy between two devices of one task). One test runs the user's own
servers with the session on worker 1, where ops that ask for nothing then go.
"""

from __future__ import annotations

import copy
from typing import Any

import pandas as pd
import pytest
from helpers import op_row
from test_cluster import (
    PS0,
    PS1,
    WORKER0,
    WORKER1,
    one_ps_model,
    setter_model,
    users_servers,
)

from tfplace_widget import predict_placement
from tfplace_widget._analyses import findings as findings_module
from tfplace_widget._analyses.findings import find_findings
from tfplace_widget._analyses.predict import master_task
from tfplace_widget._explain.run import Explainer
from tfplace_widget._model.devices import task_of

FLOAT32 = 4
WORKER0_CPU1 = "/job:worker/replica:0/task:0/device:CPU:1"


def two_cpu_model() -> Any:
    """``one_ps_model``, and its result doubled on worker 0's second CPU."""
    import tensorflow as tf

    free = one_ps_model()
    with tf.device("/job:worker/task:0/device:CPU:1"):
        return tf.multiply(free, 2.0, name="twice")


@pytest.fixture(scope="module")
def ps2(trace_placement: Any) -> Any:
    return trace_placement(setter_model, mode="graph", cluster="local:worker=2,ps=2")


@pytest.fixture(scope="module")
def ps1(trace_placement: Any) -> Any:
    return trace_placement(
        two_cpu_model, mode="graph", cluster="local:worker=2,ps=1", device_count={"CPU": 2}
    )


def placed(trace: Any) -> pd.Series:
    return trace.ops.drop_duplicates("op").set_index("op")["device"]


def assert_prediction_is_the_placement(trace: Any) -> Any:
    predicted = predict_placement(trace, gpus=0)
    real, guess = placed(trace), placed(predicted)
    # Every op of the graph as built that ran is predicted (runtime nodes are not in it).
    built = trace.ops.loc[trace.ops["how"].astype(str) != "runtime", "op"]
    assert set(built) <= set(guess.index)
    common = real.index.intersection(guess.index)
    wrong = {op: (real[op], guess[op]) for op in common if real[op] != guess[op]}
    assert wrong == {}
    assert set(predicted.devices) == set(trace.devices)  # gpus=0 adds nothing
    # The same copies between tasks as the step made: the initializers' edges (never run in
    # a step) are not predicted as copies a step. (A fetch's copy to the client device, inside
    # the session's task, is not predicted: the placer does not place it.)
    columns = ["tensor", "src_device", "dst_device"]
    crossing = [t.transfers[t.transfers["cross_task"]] for t in (trace, predicted)]
    rows = [set(map(tuple, frame[columns].to_numpy().tolist())) for frame in crossing]
    assert rows[0] == rows[1] and rows[0]
    return predicted


# -- predict_placement --------------------------------------------------------------------------
@pytest.mark.parametrize("shape", ["ps2", "ps1"])
def test_prediction_without_gpus_is_the_placement_the_cluster_made(request, shape):
    trace = request.getfixturevalue(shape)
    predicted = assert_prediction_is_the_placement(trace)
    # Ops that asked for nothing stay on the session's task, although /job:ps sorts first.
    assert master_task(trace) == "/job:worker/task:0"
    free = op_row(predicted, "free")
    assert (free.device, free.requested_device) == (WORKER0, "")
    assert "the task the session runs on" in free.reason and "/job:worker/task:0" in free.reason
    assert "each of the cluster's" in predicted.notes[0]


def test_the_task_the_session_runs_on_gets_the_unrequested_ops(trace_placement, tf):
    """The user's servers, the session on worker 1: unrequested ops go there, not to the
    chief, and the prediction follows."""
    with users_servers() as (addresses, ports, _):
        trace = trace_placement(
            one_ps_model,
            mode="graph",
            cluster=tf.train.ClusterSpec(addresses),
            target=f"grpc://localhost:{ports[1]}",
        )
    free = op_row(trace, "free")
    assert (free.device, free.how) == (WORKER1, "implicit")
    assert "/job:worker/task:1" in free.reason and "chief" not in free.reason
    assert op_row(trace, "_send_free_0").device == WORKER1  # the client device
    assert master_task(trace) == "/job:worker/task:1"
    predicted = assert_prediction_is_the_placement(trace)
    assert op_row(predicted, "chain").device == WORKER1


def test_each_task_gets_its_own_gpus(ps2):
    predicted = predict_placement(ps2, gpus=2)
    gpus = {d for d in predicted.devices if "device:GPU:" in d}
    tasks = {task_of(d) for d in ps2.devices}
    assert len(tasks) == 4
    assert gpus == {
        f"/job:{job}/replica:0/task:{task}/device:GPU:{k}"
        for job, task in (("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1))
        for k in (0, 1)
    }
    gpu0 = {name: device.replace("CPU:0", "GPU:0") for name, device in [("w", PS0), ("b", PS1)]}
    assert op_row(predicted, "w").device == gpu0["w"]
    assert op_row(predicted, "b").device == gpu0["b"]
    assert op_row(predicted, "add/ReadVariableOp").device == gpu0["b"]
    assert op_row(predicted, "z").device == WORKER1.replace("CPU:0", "GPU:0")
    # Asked for nothing: the session's own GPU, not /job:ps/task:0's (first by name).
    assert op_row(predicted, "free").device == WORKER0.replace("CPU:0", "GPU:0")
    assert "2 GPUs added to each of the cluster's 4 tasks" in predicted.notes[0]


# -- findings -------------------------------------------------------------------------------------
def cross_task_rows(trace: Any) -> pd.DataFrame:
    rows = trace.transfers[trace.transfers["cross_task"]].copy()
    rows["pair"] = [
        (task_of(s), task_of(d))
        for s, d in zip(rows["src_device"], rows["dst_device"], strict=True)
    ]
    return rows


def pair_of(message: str) -> tuple[str, str]:
    words = message.split(" the network from ", 1)[1].split(" (", 1)[0]
    src, dst = words.split(" to ")
    return src, dst


def receive_time(trace: Any) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    events = trace.events[trace.events["op"] == "RecvTensor"]
    for label, duration in zip(events["label"], events["duration_us"], strict=True):
        src, dst = label.rsplit(" from ", 1)[1].split(" to ")
        key = (task_of(src), task_of(dst))
        out[key] = out.get(key, 0.0) + float(duration)
    return out


def test_cross_task_transfers_are_one_finding_per_pair_of_tasks(ps2):
    # every pair's finding, listed or not: on a loaded machine a scalar's copy can fall under
    # the material share of a step whose time varies
    found = find_findings(ps2, immaterial=True)
    cross = found[found["kind"] == "cross_task_transfer"]
    rows = cross_task_rows(ps2)
    expected = {
        pair: (len(group), int(group["bytes"].sum()), group)
        for pair, group in rows.groupby("pair", sort=False)
    }
    assert len(cross) == len(expected) == 4
    time = receive_time(ps2)
    by_pair = {pair_of(f.message): f for f in cross.itertuples()}
    assert set(by_pair) == set(expected)
    for pair, (count, size, group) in expected.items():
        finding = by_pair[pair]
        assert finding.evidence["copies"] == count
        assert finding.evidence["bytes"] == size
        assert finding.evidence["steps"] == 1
        assert finding.evidence["time_us"] == pytest.approx(time.get(pair, 0.0))  # no record: 0
        largest = group.sort_values("bytes", ascending=False)["tensor"].iloc[0]
        assert f"largest: {largest}" in finding.message
        assert f"{count} transfer{'s' if count > 1 else ''} a step cross" in finding.message
        if size >= findings_module.NETWORK_HIGH_BYTES:
            assert finding.severity == "high"
        elif size >= findings_module.NETWORK_MEDIUM_BYTES:
            assert finding.severity == "medium"
        else:
            assert finding.severity == "info"
        for tensor in group["tensor"]:
            assert tensor.rpartition(":")[0] in finding.ops
    # The sizes the model makes: the 100x100 w read (and the scalar q), the 100 b read, a
    # 10x100 activation between the workers, a scalar back to the ps task.
    sizes = {pair: value[1] for pair, value in expected.items()}
    assert sizes == {
        ("/job:ps/task:0", "/job:worker/task:0"): 100 * 100 * FLOAT32 + FLOAT32,
        ("/job:ps/task:1", "/job:worker/task:0"): 100 * FLOAT32,
        ("/job:worker/task:0", "/job:worker/task:1"): 10 * 100 * FLOAT32,
        ("/job:worker/task:1", "/job:ps/task:0"): FLOAT32,
    }
    reads = by_pair[("/job:ps/task:0", "/job:worker/task:0")]
    assert "reads of the variables on /job:ps/task:0 (w)" in reads.message
    assert "Partition large variables" in reads.message and "Also crossing: q" in reads.message
    between = by_pair[("/job:worker/task:0", "/job:worker/task:1")]
    assert "z on /job:worker/task:1 reads add" in between.message
    assert "tf.device('/job:worker/task:0') around z" in between.message


def test_severity_of_a_cross_task_transfer_follows_its_bytes(ps2, monkeypatch):
    """The w read (40 kB a step) is high once the threshold is below it."""
    monkeypatch.setattr(findings_module, "NETWORK_HIGH_BYTES", 40_000)
    monkeypatch.setattr(findings_module, "NETWORK_MEDIUM_BYTES", 400)
    found = find_findings(ps2, immaterial=True)
    cross = found[found["kind"] == "cross_task_transfer"]
    severity = {pair_of(f.message): f.severity for f in cross.itertuples()}
    assert severity[("/job:ps/task:0", "/job:worker/task:0")] == "high"
    assert severity[("/job:ps/task:1", "/job:worker/task:0")] == "medium"
    assert severity[("/job:worker/task:1", "/job:ps/task:0")] == "info"
    assert found["kind"].iloc[0] == "cross_task_transfer"  # worst first


def test_costly_transfer_keeps_to_copies_inside_a_task(ps1, ps2):
    # every finding, the immaterial ones too: 4-byte copies of a few-µs step
    assert "costly_transfer" not in set(find_findings(ps2, immaterial=True)["kind"])
    found = find_findings(ps1, immaterial=True)
    costly = found[found["kind"] == "costly_transfer"]
    local = ps1.transfers[~ps1.transfers["cross_task"]]
    assert len(local) == 2 and len(cross_task_rows(ps1)) == 4
    assert sum(e["copies"] for e in costly["evidence"]) == len(local)
    assert sum(e["bytes"] for e in costly["evidence"]) == int(local["bytes"].sum())
    for message in costly["message"]:
        assert "/job:ps" not in message and "/job:worker/task:1" not in message
    by_tensor = {m.split("largest ", 1)[1].split(")", 1)[0]: m for m in costly["message"]}
    # free:0 goes to twice on CPU:1: a copy between two ops, not a result going back.
    assert "put free on /job:worker/task:0/CPU:1 with twice" in by_tensor["free:0"]
    assert "going back to the caller" in by_tensor["twice:0"]  # the fetch, to the client
    cross = found[found["kind"] == "cross_task_transfer"]
    assert {pair_of(m) for m in cross["message"]} == set(cross_task_rows(ps1)["pair"])


def test_no_cpu_fallback_when_every_task_has_a_gpu(ps2):
    """b (a float32 VarHandleOp on /job:ps/task:1) has a GPU kernel: with a GPU on each task
    it and its read stay on the GPU, so there is no fallback to report."""
    found = find_findings(ps2, immaterial=True)
    assert "cpu_fallback" not in set(found["kind"])
    assert "soft_move" not in set(found["kind"])
    # idle_device depends on the timing (a worker waiting for another's tensor on a loaded
    # machine); nothing else is reported.
    assert set(found["kind"]) - {"idle_device"} == {"cross_task_transfer"}


def test_a_parameter_server_waiting_is_not_an_idle_device(ps2):
    """Worker 0 busy the whole step, worker 1 and the ps tasks nearly idle: worker 1 is a
    finding, the parameter servers are not (holding variables is their job)."""
    trace = copy.copy(ps2)
    rows = [
        ("MatMul", WORKER0, 0.0, 1000.0),
        ("z", WORKER1, 0.0, 10.0),
        ("w", PS0, 0.0, 10.0),
        ("b", PS1, 0.0, 10.0),
    ]
    events = pd.DataFrame(
        {
            "op": [r[0] for r in rows],
            "device": [r[1] for r in rows],
            "lane": [r[1] for r in rows],
            "thread": [0] * len(rows),
            "start_us": [r[2] for r in rows],
            "duration_us": [r[3] for r in rows],
            "label": [""] * len(rows),
        }
    )
    trace.events = events.astype(ps2.events.dtypes.to_dict())
    idle = find_findings(trace)
    idle = idle[idle["kind"] == "idle_device"]
    assert len(idle) == 1
    assert idle["message"].iloc[0].startswith("/job:worker/task:1/CPU:0 is idle")


def test_a_predicted_cluster_trace_says_its_transfers_would_cross(ps2):
    # every finding: the initializers' copies are no share of the traced step
    found = find_findings(predict_placement(ps2, gpus=1), immaterial=True)
    cross = found[found["kind"] == "cross_task_transfer"]
    # The graph as built: the step's four pairs, and the initializers' (ones, zeros -> ps).
    assert {pair_of(m) for m in cross["message"]} >= set(cross_task_rows(ps2)["pair"])
    assert all("would cross" in m and "sizes unknown" in m for m in cross["message"])
    assert "costly_transfer" not in set(found["kind"])


# -- reasons --------------------------------------------------------------------------------------
def test_the_fetch_send_returns_the_value_to_the_client(ps2):
    fetch = op_row(ps2, "_send_free_0")
    assert (fetch.device, fetch.how) == (WORKER0, "runtime")
    assert "return the fetched value free:0 to the client" in fetch.reason
    assert "/job:worker/task:0/CPU:0" in fetch.reason
    assert "another device" not in fetch.reason
    copies = ps2.ops[ps2.ops["op"].str.startswith("MatMul/ReadVariableOp_S")]
    assert len(copies) == 2
    assert all(
        "a tensor to another device" in r or "a tensor from another device" in r
        for r in copies["reason"]
    )
    free = op_row(ps2, "free")
    assert "the task the session runs on" in free.reason
    assert "the chief (/job:worker/task:0)" in free.reason


def test_feeds_and_fetches_of_a_local_session_are_named_one_by_one():
    """A session without the function convention (TF 1.x, a partial run) feeds through
    ``_recv_<op>_<slot>`` and fetches through ``_send_<op>_<slot>``; ordinary copies on the
    same device keep their own reason, and explain_all agrees with explain."""
    cpu0 = "/job:localhost/replica:0/task:0/device:CPU:0"
    explainer = Explainer(None, {}, [cpu0], {})
    names = ["_send_y_0", "_send_logits/out_1", "_recv_Placeholder_0", "y/_1", "x/_2"]
    types = ["_Send", "_Send", "_Recv", "_Send", "_Recv"]
    one_by_one = [explainer.explain(n, t, cpu0) for n, t in zip(names, types, strict=True)]
    reasons = [r for _, _, r in one_by_one]
    assert "return the fetched value y:0 to the client" in reasons[0]
    assert "return the fetched value logits/out:1 to the client" in reasons[1]
    assert "receive the fed value of Placeholder:0 (feed_dict)" in reasons[2]
    assert "send a tensor to another device" in reasons[3]
    assert "receive a tensor from another device" in reasons[4]
    assert all(how == "runtime" for _, how, _ in one_by_one)
    together = explainer.explain_all(names, types, [cpu0] * len(names))
    assert together[2] == reasons


def towers_model() -> Any:
    """In-graph replication: w and b on the one ps task, a tower per worker, the gradients
    averaged with no device asked for (so on the chief), applied on the ps task, and the loss
    fetched once the update is done."""
    import tensorflow as tf

    v1 = tf.compat.v1
    with v1.device(v1.train.replica_device_setter(ps_tasks=1)):
        w = v1.get_variable("w", (100, 50))
        b = v1.get_variable("b", (50,))
    grads, losses = [], []
    for i in (0, 1):
        with tf.device(f"/job:worker/task:{i}"):
            x = tf.fill((8, 100), 0.5)
            losses.append(tf.reduce_sum(tf.square(tf.matmul(x, w) + b)))
            grads.append(tf.gradients(losses[-1], [w, b]))
    means = [tf.add_n(pair) / 2.0 for pair in zip(*grads, strict=True)]
    update = v1.train.GradientDescentOptimizer(0.1).apply_gradients(zip(means, [w, b], strict=True))
    with tf.control_dependencies([update]):
        return tf.identity(tf.add_n(losses), name="step_loss")


@pytest.fixture(scope="module")
def towers(trace_placement: Any) -> Any:
    return trace_placement(towers_model, mode="graph", cluster="local:worker=2,ps=1")


def test_gradients_relayed_by_the_chief_are_named_with_the_fix(towers):
    cross = find_findings(towers, immaterial=True)
    cross = cross[cross["kind"] == "cross_task_transfer"]
    by_pair = {pair_of(f.message): f for f in cross.itertuples()}
    relay = by_pair[("/job:worker/task:1", "/job:worker/task:0")]
    assert "/job:worker/task:0 passes them on:" in relay.message
    assert "to update variables" in relay.message and "on its variable's ps task" in relay.message
    assert "put them on one task" not in relay.message
    # One update per variable already: the advice is not to aggregate again.
    updates = by_pair[("/job:worker/task:0", "/job:ps/task:0")]
    assert "Each variable already gets one update a step" in updates.message
    assert "Aggregate the gradients" not in updates.message
    # An update's done signal crosses as a 0-byte tensor: counted, never named as "largest".
    zero = towers.transfers[towers.transfers["cross_task"] & (towers.transfers["bytes"] == 0)]
    assert len(zero)  # the ps task tells the chief its updates are done
    pairs = zip(zero["src_device"].map(task_of), zero["dst_device"].map(task_of), strict=True)
    for pair in set(pairs):
        message = by_pair[pair].message
        assert "control signal" in message
        assert not any(f"{t} (0 B)" in message for t in zero["tensor"])


def test_a_finding_every_task_has_is_told_once_with_the_strategys_rule():
    """A strategy trace's findings are found per task (findings/tasks.py): one each task
    has is told once, naming the other tasks and why they run the same step."""
    from tfplace_widget._analyses.findings.base import Finding
    from tfplace_widget._analyses.findings.tasks import merged

    def found() -> list:
        return [Finding("soft_move", "high", ["A"], "A moved.", {"material": 0}, (1.0, 0, 1))]

    tasks = [("/job:worker/task:0", found()), ("/job:worker/task:1", found())]
    tasks[1][1][0].evidence["material"] = 1
    [mirrored] = merged(tasks, "MultiWorkerMirroredStrategy")
    assert mirrored.message == (
        "A moved. The same on /job:worker/task:1: MultiWorkerMirroredStrategy runs this step "
        "on every worker."
    )
    assert mirrored.evidence == {"material": 1, "tasks": 2}  # material on any task
    [scheduled] = merged([(t, found()) for t, _ in tasks], "ParameterServerStrategy")
    assert scheduled.message.endswith(
        "/job:worker/task:1: the coordinator scheduled the step there too."
    )
