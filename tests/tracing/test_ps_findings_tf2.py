"""Findings of ``ParameterServerStrategy`` traces that need a program of their own (issue 36):
a wide first layer whose 1 MiB kernel the strategy puts whole on one ps task (no
``variable_partitioner``), then the fix the ``unbalanced_ps`` finding offers, applied in the
program (``FixedShardsPartitioner(num_shards=2)``) and traced again: the finding is gone.

One worker and two ps tasks (each trace takes about 30 s: every task imports TensorFlow).
The bytes are the trace's transfers, the static shapes of the tensors TensorFlow's partition
graphs send; the variables' tasks are those of their handles in the partition graphs.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import ps_programs
import pytest
from test_cluster_ps_tf2 import PS0, PS1

WORKER = "/job:worker/replica:0/task:0/device:CPU:0"
W1 = ps_programs.WIDE_FEATURES * ps_programs.WIDE_UNITS * 4  # 1 MiB
SMALL = ps_programs.WIDE_UNITS * 4  # b1, w2: 4 kB each


@pytest.fixture(scope="module")
def whole(trace_placement: Any) -> Any:
    return trace_placement(ps_programs.wide_whole, cluster="local:worker=1,ps=2", mode="function")


@pytest.fixture(scope="module")
def sharded(trace_placement: Any) -> Any:
    return trace_placement(
        ps_programs.wide_fixed_shards, cluster="local:worker=1,ps=2", mode="function"
    )


def served(trace: Any, ps: str) -> int:
    """Bytes the ps task sends to the worker and receives from it, in the step's graphs."""
    transfers = trace.transfers
    between = ((transfers["src_device"] == ps) & (transfers["dst_device"] == WORKER)) | (
        (transfers["src_device"] == WORKER) & (transfers["dst_device"] == ps)
    )
    return int(transfers.loc[between, "bytes"].sum())


def handles_on(trace: Any, device: str) -> set[str]:
    """The variables and shards whose handles TensorFlow placed on ``device`` (named by their
    reasons: "Variable w1 (...)", "Variable shard 1 of 2 of w1 (w1/part_0: ...)")."""
    args = trace.ops[
        (trace.ops["type"] == "_Arg")
        & trace.ops["op"].str.endswith("_resource")
        & (trace.ops["device"] == device)
    ]
    return {_HELD.search(reason)[1] for reason in args["reason"]}


_HELD = re.compile(r"\. Variable (?:shard \d+ of \d+ of \S+ \()?([\w/]+)")


def test_one_ps_task_serving_most_bytes_is_an_unbalanced_ps_finding(whole):
    """Without a partitioner the strategy deals whole variables round-robin in creation order:
    w1 (1 MiB) and w2 to ps:0, b1 to ps:1; ps:0 then sends and receives 2.1 MB a step (each
    variable read, and its update back), ps:1 8 kB. The finding names ps:0, its share, its
    variables, the rule, and the partitioner fix (tried below)."""
    assert handles_on(whole, PS0) == {"w1", "w2"} and handles_on(whole, PS1) == {"b1"}
    assert served(whole, PS0) == 2 * (W1 + SMALL) and served(whole, PS1) == 2 * SMALL
    found = whole.findings
    unbalanced = found[found["kind"] == "unbalanced_ps"]
    assert len(unbalanced) == 1, found[["kind", "message"]]
    finding = unbalanced.iloc[0]
    assert finding["evidence"]["bytes"] == served(whole, PS0)
    assert finding["evidence"]["share"] == round(served(whole, PS0) / (2 * (W1 + 2 * SMALL)), 4)
    assert finding["evidence"]["user_fix"] == 1 and finding["severity"] == "medium"
    message = finding["message"]
    assert message.startswith("/job:ps/task:0 serves 2.1 MB a step of the ps tasks' 2.1 MB"), (
        message
    )
    assert "It holds w1 (1.0 MB), w2 (4.1 kB)." in message
    assert "the strategy has no variable_partitioner" in message
    assert "(the creation order: w1 -> ps/task:0, b1 -> ps/task:1, w2 -> ps/task:0)" in message
    assert "FixedShardsPartitioner(num_shards=2)" in finding["fix"]["edit"]
    on_ps0 = set(whole.ops.loc[whole.ops["device"] == PS0, "op"])
    assert finding["ops"] and set(finding["ops"]) <= on_ps0


def test_the_partitioner_it_offers_balances_the_ps_tasks(whole, sharded):
    """The fix applied in the program: every variable in two shards, dealt round-robin in
    creation order (w1/part_0 to ps:0, w1/part_1 to ps:1, b1/part_0 to ps:0...), as
    TensorFlow's handles show; each ps task serves half of the same bytes, and no finding is
    left."""
    assert handles_on(sharded, PS0) == {"w1/part_0", "b1/part_0", "w2/part_0"}
    assert handles_on(sharded, PS1) == {"w1/part_1", "b1/part_1", "w2/part_1"}
    half = 2 * (W1 // 2 + SMALL // 2 + SMALL // 2)  # each shard read, and its update back
    assert served(sharded, PS0) == served(sharded, PS1) == half
    assert 2 * half == served(whole, PS0) + served(whole, PS1)
    assert "unbalanced_ps" not in set(sharded.all_findings["kind"])


def test_cross_task_advises_partitioning_only_the_whole_large_variable(whole, sharded):
    """ps:0's reads: w1 (1 MiB, whole) is advised a partitioner, by name; w2 and b1 (4 kB)
    are not. Once partitioned, the same finding advises nothing (user_fix 0)."""
    found = whole.findings
    reads = found[
        (found["kind"] == "cross_task_transfer")
        & found["message"].str.contains("reads of the variables on /job:ps/task:0 ")
    ]
    assert len(reads) == 1, found["message"].tolist()
    message = reads.iloc[0]["message"]
    assert "(w2 (4.1 kB), w1 (1.0 MB))" in message and "_resource" not in message
    assert "Partition w1 (1.0 MB) over the 2 ps tasks" in message
    assert reads.iloc[0]["evidence"]["user_fix"] == 1
    for message, evidence in sharded.all_findings.loc[
        sharded.all_findings["kind"] == "cross_task_transfer", ["message", "evidence"]
    ].itertuples(index=False):
        assert "Partition " not in message and evidence["user_fix"] == 0, message
        assert "already split over the ps tasks by FixedShardsPartitioner" in message


def test_a_users_tf_device_in_the_step_keeps_its_words(whole):
    """The program's own tf.device("/device:CPU:0") around the loss in the replica function
    (inside the strategy's replica scope) and around the step's result (outside it: the only
    scope there, on the strategy's own device): those ops were asked by the user, and their
    reason says tf.device; the other ops' the strategy."""
    ops = whole.ops.set_index("op")
    for mine in ("user_square", "user_total"):  # user_total: one scope, as the strategy's are
        assert ops.loc[mine, "requested_device"] == "/device:CPU:0"
        assert ops.loc[mine, "reason"].startswith(
            "Requested /device:CPU:0 with tf.device; placed exactly there"
        ), ops.loc[mine, "reason"]
    assert ops.loc["user_square", "reason"].startswith(
        "Requested /device:CPU:0 with tf.device; placed exactly there"
    ), ops.loc["user_square", "reason"]
    assert ops.loc["MatMul", "reason"].startswith(
        "Requested /device:CPU:0 by ParameterServerStrategy, not by a tf.device of yours"
    )


def _asked_line() -> int:
    """The line of the program's ``with tf.device(ASKED)`` around w1's creation."""
    lines = inspect.getsource(ps_programs).splitlines()
    return 1 + next(n for n, line in enumerate(lines) if "with tf.device(ASKED)" in line)


def test_a_tf_device_the_strategy_overrides_is_an_overridden_request_finding(whole, sharded):
    """The program asks for /job:ps/task:1 around w1's creation under strategy.scope();
    TensorFlow put w1 on ps:0 anyway (its handle, in the partition graphs), as the strategy's
    round-robin deals it. The finding says where the request was, that it did not place w1,
    where w1 went and the strategy's rule; sharded by FixedShardsPartitioner, only w1/part_0
    went elsewhere (part_1 is on ps:1, as asked), and only it is named."""
    assert "w1" in handles_on(whole, PS0)
    where = f"(ps_programs.py:{_asked_line()})"
    found = whole.findings
    overridden = found[found["kind"] == "overridden_request"]
    assert len(overridden) == 1, found[["kind", "message"]]
    finding = overridden.iloc[0]
    assert finding["message"].startswith(
        f"Your tf.device('/job:ps/task:1') around the creation of w1 {where} did not place it: "
        "w1 (1.0 MB) on /job:ps/task:0. ParameterServerStrategy's variable creator opens its "
        "own device scope"
    ), finding["message"]
    assert finding["evidence"]["user_fix"] == 0 and finding["fix"] is None
    handle = whole.ops[(whole.ops["device"] == PS0) & whole.ops["op"].isin(finding["ops"])]
    assert len(handle) == 1 and handle["reason"].iloc[0].split(". Variable ")[1].startswith("w1 ")
    assert handles_on(sharded, PS1) >= {"w1/part_1"}
    split = sharded.findings[sharded.findings["kind"] == "overridden_request"]
    assert len(split) == 1 and split["message"].iloc[0].startswith(
        f"Your tf.device('/job:ps/task:1') around the creation of w1/part_0 {where} did not "
        "place it: w1/part_0 (shard 1 of 2 of w1, 524.3 kB) on /job:ps/task:0."
    ), split["message"].tolist()
