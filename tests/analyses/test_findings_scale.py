"""Findings of a large trace cost time in proportion to its ops, not to its ops times its
findings (issue 35: ten traced steps of a large model are a million op executions).

The trace: chains of scalar adds over two CPUs that each ask for a CPU, but every fifth for
none (the shape of ``benchmarks/graphs.py``), so that on a machine with a GPU every fifth op
would move there and the chain would bounce GPU -> CPU -> GPU: hundreds of predicted ping_pong
findings, most of them immaterial. Counted, not timed: how often the rules scan every op name,
and how many op lists the messages spell out. ``benchmarks/scale.py`` times them at 10k, 100k
and 1M ops next to a baseline, and checks the answers equal.
"""

from __future__ import annotations

import gc
from copy import copy as clone
from importlib import import_module
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tfplace_widget import PlacementTrace
from tfplace_widget._analyses import findings
from tfplace_widget._analyses.findings import base, find_findings, graph, transfers
from tfplace_widget._analyses.findings.predicted import _strings, predict_with_module
from tfplace_widget._analyses.predict.devices import master_task, predicted_devices
from tfplace_widget._analyses.predict.result import predict_devices

# the module (the package exports a function of its name)
material = import_module("tfplace_widget._analyses.findings.material")

CHAINS, LENGTH = 8, 150


@pytest.fixture(scope="module")
def chains(tf: Any, trace_placement: Any) -> PlacementTrace:
    def build() -> Any:
        ones = []
        for k in range(2):
            with tf.device(f"/cpu:{k}"):
                ones.append(tf.constant(1.0, name=f"one_{k}"))
        tails = []
        for c in range(CHAINS):
            with tf.device(f"/cpu:{c % 2}"):
                x = tf.constant(0.0, name=f"c{c}/start")
            for j in range(LENGTH):
                k = (c + j // 8) % 2
                if j % 5 == 4:  # no request: the placer's choice (a GPU, on a GPU machine)
                    x = tf.add(x, ones[k], name=f"c{c}/add{j}")
                else:
                    with tf.device(f"/cpu:{k}"):
                        x = tf.add(x, ones[k], name=f"c{c}/add{j}")
            tails.append(x)
        with tf.device("/cpu:0"):
            return tf.add_n(tails, name="sum")

    return trace_placement(build, device_count={"CPU": 2})


class _Counting:
    """A compiled regex that records the texts it is asked about (``search`` and ``match``)."""

    def __init__(self, real: Any, asked: list[str]) -> None:
        self.real, self.asked = real, asked

    def search(self, text: str) -> Any:
        self.asked.append(text)
        return self.real.search(text)

    def match(self, text: str) -> Any:
        self.asked.append(text)
        return self.real.match(text)


def _bounces(found: pd.DataFrame) -> int:
    """How many ping_pong findings there are, those capped into one line counted one by one."""
    evidence = found.loc[found["kind"] == "ping_pong", "evidence"]
    return int(evidence.map(lambda e: e.get("findings", 1)).sum())


def test_the_replica_scan_reads_each_op_name_once_however_many_ping_pongs(chains, monkeypatch):
    """Whether a distribution strategy ran the step is one question about the trace: asked
    for each ping_pong finding, it read every op name again (over 600 s at 100,000 ops)."""
    searched: list[str] = []
    monkeypatch.setattr(base, "REPLICA", _Counting(base.REPLICA, searched))
    found = find_findings(chains, immaterial=True)
    ping_pongs = int((found["kind"] == "ping_pong").sum())
    every = found.loc[found["kind"] == "ping_pong", "evidence"].map(lambda e: e.get("findings", 1))
    assert ping_pongs > 1 and int(every.sum()) > 50, found[["kind", "message"]]
    assert len(searched) <= chains.ops["op"].nunique()


def test_a_message_nobody_reads_spells_out_no_ops(chains, monkeypatch):
    """Of the hundreds of ping_pong findings, the immaterial ones are dropped and all but the
    worst capped into one line: their op lists are written only when a message is read."""
    spelled: list[int] = []
    real = transfers.listed_ops

    def counting(names: Any, *args: Any, **kwargs: Any) -> str:
        spelled.append(1)
        return real(names, *args, **kwargs)

    monkeypatch.setattr(transfers, "listed_ops", counting)
    monkeypatch.setattr(transfers, "op_groups", counting_groups := _counted(transfers.op_groups))
    everything = find_findings(chains, immaterial=True)
    bounces = _bounces(everything)
    spelled.clear()
    counting_groups.calls.clear()
    shown = find_findings(chains)
    assert len(spelled) + len(counting_groups.calls) <= 3 * len(shown) < bounces
    # a message that is read is the whole message
    listed = everything[(everything["kind"] == "ping_pong")]
    for message, evidence in zip(listed["message"], listed["evidence"], strict=True):
        if "findings" not in evidence:  # not the capped ones' summary line
            assert " -> CPU -> " in message and "copies a step" in message, message


class _counted:
    """A function that keeps the first argument of each call (``calls``)."""

    def __init__(self, real: Any) -> None:
        self.real, self.calls = real, []

    def __call__(self, names: Any, *args: Any) -> Any:
        self.calls.append(list(names))
        return self.real(names, *args)


def test_a_ping_pong_groups_its_ops_once_for_message_and_fix(chains, monkeypatch):
    """A ping_pong's ops (hundreds of thousands at a million ops) are named by its message and
    its fix: its CPU ops, feeders and readers grouped once each for both, and worded as
    ``listed_ops`` words them (the message names two groups of each, the fix ``MAX_NAMED``
    of the CPU ops and of the feeders and readers together)."""
    grouping = _counted(transfers.op_groups)
    monkeypatch.setattr(transfers, "op_groups", grouping)
    found = find_findings(chains, immaterial=True)
    pongs = found[found["kind"] == "ping_pong"]
    fixes = [fix["edit"] for fix in pongs["fix"] if fix and fix.get("edit")]
    calls = grouping.calls
    assert fixes and len(calls) == 3 * (len(pongs) - 1)  # the capped line has none
    for before, inside, after in zip(calls[::3], calls[1::3], calls[2::3], strict=True):
        named = [base.listed_ops(ops, 2) for ops in (before, inside, after)]
        assert any(" -> ".join(named) in m for m in pongs["message"]), named
        fix = f"put {base.listed_ops(inside)} on "
        beside = f" with {base.listed_ops([*before, *after])}: "
        assert any(fix in edit and beside in edit for edit in fixes), (fix, beside)


def test_the_source_lines_of_fixes_read_the_op_frame_once_however_many_fixes(chains, monkeypatch):
    """Each ping_pong's fix names the lines that made its ops (the ``source`` column): looked
    up by a scan of every op row per fix, that was quadratic (344 of 386 s at 100,000 ops)."""
    assert "source" in chains.ops
    scans: list[int] = []
    real = pd.DataFrame.dropna

    def counting(frame: pd.DataFrame, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("subset") == ["source"]:
            scans.append(len(frame))
        return real(frame, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "dropna", counting)
    found = find_findings(chains, immaterial=True)
    fixed = found.loc[found["kind"] == "ping_pong", "fix"].map(
        lambda fix: bool(fix and fix.get("edit"))
    )
    assert int(fixed.sum()) > 1, found[["kind", "fix"]]
    assert len(scans) <= 1, scans


def test_a_fix_nobody_reads_is_not_made(chains, monkeypatch):
    """Like its message, a ping_pong's fix (its ops' lines, the ops they move) is made only for
    the findings shown, not for the hundreds dropped or capped."""
    made: list[int] = []
    real = transfers.placement_fix

    def counting(*args: Any, **kwargs: Any) -> Any:
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(transfers, "placement_fix", counting)
    everything = find_findings(chains, immaterial=True)
    bounces = _bounces(everything)
    made.clear()
    shown = find_findings(chains)
    assert len(made) <= len(shown) < bounces


def test_the_owner_of_a_name_is_looked_up_once_per_first_scope(chains, monkeypatch):
    """A message lists its ops by owner (a Keras layer, an optimizer): asked for each of the
    100k op names of a costly_transfer, five regex matches per name were a seventh of the
    findings' time. The owner depends on the first scope's name, looked up once per scope."""
    matched: list[str] = []
    monkeypatch.setattr(base, "_MODEL_SCOPE", _Counting(base._MODEL_SCOPE, matched))
    forget = getattr(base, "_plain_scope", None)  # the scopes' answers, kept per process
    clear = forget.cache_clear if forget is not None else lambda: None
    clear()
    names = chains.ops["op"].tolist()
    owners = [base.owner_of(name) for name in names]
    assert owners == [("", name) for name in names]  # the chains' ops are the user's own
    assert base.listed_ops(names) == base.listed_names(list(dict.fromkeys(names)))
    heads = {name.partition("/")[0] for name in names}
    assert 0 < len(matched) <= len(heads) < len(names) / 10
    clear()  # the real regex again for the other tests


def test_the_garbage_collector_waits_while_the_findings_are_made(chains, monkeypatch):
    """The rules make hundreds of thousands of small objects and no cycles: each of the
    collections they set off walked the whole heap of the kernel (a fifth of the findings'
    time at 100k ops). It is paused while they run, and left as it was found."""
    seen: list[bool] = []
    real = findings.find_ping_pongs

    def recording(context: Any) -> Any:
        seen.append(gc.isenabled())
        return real(context)

    monkeypatch.setattr(findings, "find_ping_pongs", recording)
    assert gc.isenabled()
    find_findings(chains)
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        find_findings(chains)
        assert not gc.isenabled()  # a caller's own choice stays
    finally:
        gc.enable()


def test_ping_pong_finds_its_stretches_and_their_copies_without_a_call_per_edge(
    chains, monkeypatch
):
    """The CPU stretches and their GPU ends are found over integer edge arrays: at a million
    ops, a Python walk per stretch asked ``crosses_memory`` once per boundary edge (hundreds
    of thousands of calls), and the same stretches, ends and findings come out."""
    context = base.Context.of(chains)
    asked: list[tuple[str, str]] = []
    real = base.Context.crosses_memory

    def counting(self: Any, producer: str, consumer: str) -> bool:
        asked.append((producer, consumer))
        return real(self, producer, consumer)

    monkeypatch.setattr(base.Context, "crosses_memory", counting)
    found = transfers.find_ping_pongs(context)
    assert len(found) > 50 and all(f.kind == "ping_pong" for f in found)
    assert asked == []
    for finding in found:  # GPU -> CPU stretch -> GPU, as the view has them
        cpu = [op for op in finding.ops if context.view.get(op) == "CPU"]
        gpu = [op for op in finding.ops if context.view.get(op) == "GPU"]
        assert len(cpu) == finding.evidence["cpu_ops"] and gpu, finding.ops
        # each end one copy: a GPU op that feeds the stretch and reads it is two
        assert len(gpu) <= finding.evidence["copies"] <= 2 * len(gpu)


def test_components_label_each_node_with_the_smallest_it_is_joined_to():
    """``graph.components`` against a plain union-find: long chains in either order (a
    million-op model's CPU stretch), random edges, self-loops and lone nodes."""
    import numpy as np

    from tfplace_widget._analyses.findings.graph import components

    def reference(count: int, a: np.ndarray, b: np.ndarray) -> list[int]:
        parent = list(range(count))

        def root(x: int) -> int:
            while parent[x] != x:
                x = parent[x]
            return x

        for x, y in zip(a.tolist(), b.tolist(), strict=True):
            rx, ry = root(x), root(y)
            parent[max(rx, ry)] = min(rx, ry)
        return [root(x) for x in range(count)]

    rng = np.random.default_rng(35)
    chain = np.arange(9_999)
    cases = [
        (10_000, chain, chain + 1),
        (10_000, chain[::-1] + 1, chain[::-1]),
        (10_000, rng.permutation(10_000)[:-1], rng.permutation(10_000)[1:]),
        (500, rng.integers(0, 500, 300), rng.integers(0, 500, 300)),
        (5, np.array([3, 4]), np.array([3, 1])),
        (3, np.array([], dtype=int), np.array([], dtype=int)),
    ]
    for count, a, b in cases:
        assert components(count, a, b).tolist() == reference(count, a, b)


def test_each_names_first_device_is_found_without_pandas_hashing_every_name(chains, monkeypatch):
    """A name listed more than once (``_SOURCE`` on each device; one op of merged runs) runs
    where its first row says, in its first row's place: read off the rows in reverse, not by
    ``drop_duplicates`` over every name (a second of a million-op trace's findings)."""
    ops = chains.ops
    assert ops["op"].duplicated().any()  # two devices: a _SOURCE each
    dropped: list[Any] = []
    real = pd.DataFrame.drop_duplicates

    def counting(self: pd.DataFrame, *args: Any, **kwargs: Any) -> pd.DataFrame:
        dropped.append(args or kwargs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "drop_duplicates", counting)
    context = base.Context.of(chains)
    assert dropped == []
    first = ops.groupby("op", sort=False)["device"].first()
    assert list(context.device_of.items()) == list(first.items())
    copies = [n for n, t in context.type_of.items() if t in ("_Send", "_Recv")]
    assert copies  # two CPUs: the chains' copies, each under the op it carries
    for copy in copies:
        assert copy in transfers.copy_nodes(context, base.copy_key(copy))


def test_ping_pong_sums_its_stretches_time_by_positions_and_exactly(chains, monkeypatch):
    """Each stretch's time is summed by positions (one ``bincount``), not by a
    ``summed_duration`` call per finding (130k of them at a million ops), and it is the same
    float: with the trace's whole microseconds, and with fractional ones (where the order of
    adding matters), for which the rule falls back to ``summed_duration``."""
    calls: list[int] = []
    real = transfers.summed_duration

    def counting(context: Any, names: Any) -> float:
        calls.append(1)
        return real(context, names)

    monkeypatch.setattr(transfers, "summed_duration", counting)
    context = base.Context.of(chains)
    found = transfers.find_ping_pongs(context)
    stretches = [f for f in found if "tf.py_function" not in f.message]
    assert len(stretches) > 50 and calls == []
    for finding in stretches:  # each stretch's CPU ops' own time, as summed_duration sums it
        inside = [op for op in finding.ops if context.view.get(op) == "CPU"]
        inside = [op for op in inside if not base.follower(context, op)]
        assert finding.evidence["duration_us"] == real(context, inside)
    other = clone(chains)  # fractional times: the order of adding changes the last bits
    other.ops = chains.ops.assign(duration_us=chains.ops["duration_us"] * 1.1 + 0.1)
    context = base.Context.of(other)
    found = [f for f in transfers.find_ping_pongs(context) if "tf.py_function" not in f.message]
    assert len(found) == len(stretches) and len(calls) == len(found)
    for finding in found:
        inside = [op for op in finding.ops if context.view.get(op) == "CPU"]
        assert finding.evidence["duration_us"] == real(context, inside)


def test_ping_pong_makes_only_the_stretches_that_may_be_material_when_only_those_are_read(chains):
    """``find_findings`` without ``immaterial=True`` lists only the material findings: of a
    million-op graph's 130k CPU stretches nearly all are immaterial, so ping_pong then makes
    (and ``judge`` weighs) only those whose ops' time may reach ``MATERIAL_SHARE`` of a step;
    the material findings are the same ones, with the same evidence."""
    from tfplace_widget._analyses.findings.material import judge, material

    def ping_pongs(material_only: bool) -> list[Any]:
        context = base.Context.of(chains)
        context.material_only = material_only
        return judge(context, transfers.find_ping_pongs(context))

    every, some = ping_pongs(False), ping_pongs(True)
    kept = [(f.ops, f.evidence) for f in every if material(f)]
    assert 0 < len(kept) <= len(some) < len(every), (len(kept), len(some), len(every))
    assert [(f.ops, f.evidence) for f in some if material(f)] == kept


def test_a_trace_loaded_from_its_file_finds_the_same_findings_in_the_same_order(chains, tmp_path):
    """A trace loaded from a ``.tfplace`` has no kernel registry of this process, so the
    findings' GPU view comes from its kernel columns (``_predict_here``) rather than the
    placer's prediction; both list the graph's ops in the graph's order, so the findings whose
    cost ties (the ping_pongs of equal chains) and the ops of the line summing up the rest come
    out as they did for the trace that was saved."""
    loaded = PlacementTrace.load(chains.save(tmp_path / "chains.tfplace"))
    for immaterial in (False, True):
        found, again = (find_findings(t, immaterial=immaterial) for t in (chains, loaded))
        assert len(found) > 1
        pd.testing.assert_frame_equal(again, found)


def test_costly_transfer_makes_only_the_directions_that_can_reach_the_top(
    tf, trace_placement, monkeypatch
):
    """Only ``TOP_TRANSFERS`` copy directions are reported: a direction's finding (its op
    lists, tens of thousands of names at a million ops) is made only while its cost can still
    rank it among them, and the same findings come out, in the same order, as when every
    direction's is made."""
    from tfplace_widget._analyses.findings import costly

    def build() -> Any:
        out = []
        for src in range(4):  # from each CPU to each other one, a different number of copies
            for dst in range(4):
                for i in range(0 if src == dst else 10 + (3 * src + dst) % 5):
                    with tf.device(f"/cpu:{src}"):
                        x = tf.fill([64 * (1 + src)], float(i), name=f"x{src}{dst}_{i}")
                    with tf.device(f"/cpu:{dst}"):
                        out.append(tf.reduce_sum(x, name=f"r{src}{dst}_{i}"))
        with tf.device("/cpu:0"):
            return tf.add_n(out, name="total")

    trace = trace_placement(build, device_count={"CPU": 4})
    made: list[tuple[str, str]] = []
    real = costly._direction_finding

    def counting(context: Any, src: str, dst: str, *args: Any) -> Any:
        made.append((src, dst))
        return real(context, src, dst, *args)

    monkeypatch.setattr(costly, "_direction_finding", counting)
    top, count = costly.find_costly_transfers(base.Context.of(trace)), costly.TOP_TRANSFERS
    shown = len(made)
    made.clear()
    monkeypatch.setattr(costly, "TOP_TRANSFERS", 100)  # every direction's finding
    every = costly.find_costly_transfers(base.Context.of(trace))
    assert len(top) == count and len(every) == len(made) > shown, (shown, made)
    assert [(f.ops, f.message, f.evidence, f.severity) for f in top] == [
        (f.ops, f.message, f.evidence, f.severity) for f in every[: len(top)]
    ]


def test_among_answers_isin_by_looking_up_only_the_names_asked_about():
    """``graph.among`` answers ``Index.isin`` for a unique index (by a look-up of each asked
    name in the index's own table: a million-op view is not hashed again per question)."""
    from tfplace_widget._analyses.findings.graph import among

    index = pd.Index([f"op{i}" for i in range(50)], dtype=object)
    for names in ([], ["op3"], {"op0", "op49", "absent"}, [f"op{i}" for i in range(0, 60, 7)]):
        assert among(index, names).tolist() == index.isin(list(names)).tolist()


def test_the_runtimes_names_come_off_the_columns_without_a_dict_of_every_ops_how(chains):
    """Which ops TensorFlow inserted is read off the ``how`` and ``type`` columns (a name's
    last row deciding, as the ``how`` dict of every op said): that dict of a million names is
    made only when a rule reads ``how``, which a CPU-only trace's findings never do."""
    context = base.Context.of(chains)
    assert context.how_of is None  # nothing read it
    find_findings(chains, immaterial=True)
    ops = chains.ops
    how = dict(zip(ops["op"], ops["how"].astype(str), strict=True))  # the last row's
    types = dict(zip(ops["op"], ops["type"], strict=True))
    expected = {
        n
        for n, t in types.items()
        if how[n] == "runtime" or t in base.RUNTIME_TYPES or n in ("_SOURCE", "_SINK")
    }
    assert context.runtime == expected and len(expected) > 100
    assert context.how == how and list(context.how) == list(types)


def test_a_names_last_row_says_whether_the_runtime_placed_it():
    """With a name on several rows, its last row's ``how`` decides, as the ``how`` dict did;
    names of a runtime type are the runtime's whatever their rows say."""
    from tfplace_widget._analyses.findings.runtime import runtime_names

    names = ["a", "b", "a", "c", "b", "s", "r", "d"]
    types = ["Add", "Mul", "Add", "Const", "Mul", "_Send", "_Recv", "Add"]
    how = pd.Series(
        ["runtime", "explicit", "implicit", "runtime", "runtime", "explicit", "runtime", "x"],
        dtype="category",
    )
    type_of = dict(zip(names, types, strict=True))
    runtime, sends, receives, copies = runtime_names(type_of, how, names)
    assert runtime == {"b", "c", "s", "r"}  # a's last row is not the runtime's, b's is
    assert (sends, receives, copies) == ({"s"}, {"r"}, ["s", "r"])
    unique = runtime_names({"a": "Add", "c": "Const"}, pd.Series(["x", "runtime"]), ["a", "c"])
    assert unique[0] == {"c"}


def test_a_fix_follows_only_the_movers_that_ops_of_their_own_scope_feed():
    """``placement_fix`` moves each op with the ops of its own name scope that feed it; the
    movers with such producers are found by C passes over all their producers (a large
    finding's hundreds of thousands), and the ops moved are those the walk over every mover
    finds, in its order."""
    from tfplace_widget._analyses.findings import fixes

    inputs = {
        "m1": ["x", "m1/Const", "m1/shape"],
        "m1/shape": ["m1/shape/inner", "y"],
        "m1/shape/inner": [],
        "m2": ["m1", "m2x/Const"],  # m2x/ is no scope of m2's
        "m3": ["m3/a"],
        "m3/a": ["m3/a"],  # a cycle: each op once
        "m4": [],
    }

    class Plain:
        pass

    context = Plain()
    context.inputs = inputs

    def walk(movers: list[str]) -> list[str]:  # every mover's producers, one by one
        found = list(movers)
        for mover in movers:
            stack, seen = list(inputs.get(mover, ())), set()
            while stack:
                producer = stack.pop()
                if producer.startswith(mover + "/") and producer not in seen:
                    seen.add(producer)
                    found.append(producer)
                    stack += inputs.get(producer, ())
        return list(dict.fromkeys(found))

    for movers in (["m1", "m2", "m3", "m4"], ["m4", "m3", "m1"], ["m2"], [], ["m1", "m1"]):
        assert fixes._with_their_internals(context, movers) == walk(movers)
    assert fixes._with_own_producers(inputs, ["m4", "m2", "m3", "m1"]) == ["m3", "m1"]


def test_rows_among_answers_isin_by_looking_up_each_row_in_the_set():
    """``graph.rows_among`` answers ``Series.isin`` (a row's value one of a set of names), by
    looking each row up in that set: no hash table of 750k runtime names built again."""
    from tfplace_widget._analyses.findings.graph import rows_among

    values = pd.Series(["a", "b", None, "c", float("nan"), "a"], dtype=object)
    for names in (set(), {"a"}, {"b", "c", "zz"}, ["a", "c"]):
        assert rows_among(values, names).tolist() == values.isin(list(names)).tolist()


def test_costly_transfer_reads_what_each_copy_is_for_off_the_columns(chains, monkeypatch):
    """What each copy is for (``_io_of``: a feed, a fetch, the step's own compute) is read off
    the copies' columns and their readers' types by C passes, not asked copy by copy (a
    million-op trace has hundreds of thousands of copies): the same answer as ``_io_of`` of
    every copy, and the directions in the order they first appear, with some readers made
    identities that hand the tensor back (fetches) and a producer made an ``_Arg`` (a feed)."""
    from tfplace_widget._analyses.findings import costly

    context = base.Context.of(chains)
    transfers = chains.transfers
    rows = [
        r
        for r in transfers.itertuples()
        if r.src_device != r.dst_device and not costly._CONTROL.match(r.tensor)
    ]
    producers = [base.copied_op(context, r.tensor) for r in rows]
    made = {producers[1]: "_Arg"}  # a function's argument: a feed
    for p in producers[::3]:  # read only by identities that nothing reads: handed back
        for c in context.consumers.get(p, ()):
            made[c], context.consumers[c] = "Identity", []
    context.ops = context.ops.copy()  # the types as the trace would record them
    rows_made = context.ops["op"].isin(list(made))
    context.ops.loc[rows_made, "type"] = context.ops.loc[rows_made, "op"].map(made)
    context.type_of.update(made)

    def expected(row: Any, producer: str) -> str:
        readers = [c for c in context.consumers.get(producer, ()) if c in context.type_of]
        from_cpu = base.device_type(row.src_device) == "CPU"
        return costly._io_of(context, row.tensor, producer, readers, False, from_cpu)

    want = {r.tensor: expected(r, p) for r, p in zip(rows, producers, strict=True)}
    assert {"", "feed", "fetch"} <= set(want.values())
    asked: list[str] = []
    real = costly._io_of
    monkeypatch.setattr(costly, "_io_of", lambda *a: asked.append(a[1]) or real(*a))
    directions = costly._directions(context, transfers, {}, {})
    got = {t: key[2] for key, group in directions.items() for t in group.tensors}
    assert got == want and not asked
    order = dict.fromkeys((r.src_device, r.dst_device, want[r.tensor]) for r in rows)
    assert list(directions) == list(order)


def test_ping_pong_hands_pandas_arrays_and_lists_only_the_kept_stretches_ops(chains, monkeypatch):
    """ping_pong's look-ups of every edge's names go to pandas as object arrays, not lists
    that pandas would copy and type-check element by element (a fifth of their time at a
    million ops); and when only the material findings are read, the name lists of the
    stretches' ops, feeders and readers are cut for the stretches kept, not for all of them
    (130k at a million ops, all but one dropped)."""
    asked: list[tuple[type, int]] = []
    real_positions = graph.positions_in

    def positions(index: pd.Index, names: Any) -> Any:
        asked.append((type(names), len(names)))
        return real_positions(index, names)

    listed: list[int] = []
    real_by_label = transfers._by_label

    def by_label(labels: Any, ids: Any, names: Any) -> dict[int, list[str]]:
        listed.append(len(ids))
        return real_by_label(labels, ids, names)

    monkeypatch.setattr(graph, "positions_in", positions)
    monkeypatch.setattr(material, "positions_in", positions)
    monkeypatch.setattr(transfers, "_by_label", by_label)
    found = {}
    for material_only in (False, True):
        context = base.Context.of(chains)
        context.material_only = material_only
        listed.clear()
        found[material_only] = transfers.find_ping_pongs(context)
        named = sum(listed)
        if not material_only:
            every = named
    big = [kind for kind, size in asked if size >= len(context.view) // 2]
    assert big and all(kind is not list for kind in big), asked
    assert len(found[True]) < len(found[False])  # most stretches are immaterial here
    assert 0 < named < every, (named, every)


def test_judge_weighs_all_findings_by_one_lookup_of_their_ops_with_the_same_shares(
    chains, monkeypatch
):
    """``judge``'s shares look every finding's ops up in the steps' names at once (one
    ``get_indexer`` call, no dict of every op that ran: a million names at 1M ops), and are
    the same floats as summing each finding's ops' time step by step: exactly with the
    trace's whole microseconds (then the ops are looked up as listed), and to the last bits
    with fractional times (then in the order of the set of each finding's ops, as before)."""
    import numpy as np

    from tfplace_widget._analyses.findings.material import (
        Steps,
        step_of,
        steps_of,
        timed_events,
        trace_steps,
    )

    def expected(trace: Any, found: list[Any]) -> np.ndarray:
        events = timed_events(trace)
        step, count = step_of(events, trace_steps(trace))
        per = {}
        for op, s, took in zip(events["op"], step, events["duration_us"], strict=True):
            per.setdefault(op, [0.0] * count)[s] += float(took)
        total = np.array([sum(v[s] for v in per.values()) for s in range(count)])
        rows = []
        for f in found:
            summed = [sum(per.get(op, [0.0] * count)[s] for op in set(f.ops)) for s in range(count)]
            own = f.cost[0] > sum(summed)
            rows.append(
                [(f.cost[0] / count if own else summed[s]) / total[s] for s in range(count)]
            )
        return np.minimum(np.array(rows), 1.0)

    lookups: list[int] = []
    real = material.positions_in

    def counting(index: pd.Index, target: Any) -> Any:
        if steps is not None and index is steps.names:
            lookups.append(len(target))
        return real(index, target)

    steps = None
    monkeypatch.setattr(material, "positions_in", counting)
    context = base.Context.of(chains)
    found = transfers.find_ping_pongs(context)  # every stretch: material_only is off
    assert len(found) > 50
    steps = steps_of(context)
    assert steps.exact
    shares = steps.shares(found)
    assert lookups == [sum(len(f.ops) for f in found)]
    assert np.array_equal(shares, expected(chains, found))

    other = clone(chains)  # fractional times: the order of adding changes the last bits
    other.events = chains.events.assign(duration_us=chains.events["duration_us"] * 1.1 + 0.1)
    steps = Steps(other)
    assert not steps.exact
    assert np.allclose(steps.shares(found), expected(other, found), rtol=1e-12, atol=0)


def test_a_fix_looks_source_lines_up_only_while_there_are_lines_to_find(chains):
    """``sources`` keeps only real lines (not ``""``, as every runtime op of the 1M-op graph
    has), and stops once it has found every line the trace has: a fix of a large finding
    names hundreds of thousands of ops, made by a few lines or none. The lines it names are
    those of the ops it is given, in their order, each once."""
    from tfplace_widget._analyses.findings.fixes import sources

    context = base.Context.of(chains)
    ops = list(context.view)
    frame = chains.ops
    every = dict(zip(frame["op"], frame["source"].astype(str), strict=True))
    wanted = [s for s in dict.fromkeys(map(every.get, ops)) if s not in ("", "<NA>", None)]
    assert wanted
    assert sources(context, ops) == f" ({base.listed_names(wanted)})"
    assert "" not in context.source_of.values() and "<NA>" not in context.source_of.values()
    assert context.source_of.lines == len(set(context.source_of.values()))

    blank = clone(chains)
    blank.ops = frame.assign(source=frame["source"].where(frame["source"].isna(), ""))
    context = base.Context.of(blank)
    assert sources(context, ops) == ""
    assert not context.source_of  # no row with a line: nothing kept, nothing looked up


def test_the_cpu_ops_causes_come_from_their_requests_without_a_set_of_every_asked_op(chains):
    """Why each op is on the CPU of the predicted GPU machine is read per op from its kernel
    and its request (``tf.device`` on a CPU: ``requested``), in the view's order: no set of
    every op a ``tf.device`` put on a CPU is made for it (most of a million-op CPU trace's),
    and ``asked_cpu`` answers as that set (``cpu_requested``) does."""
    context = base.Context.of(chains)
    assert context.predicted_view and context.requested_cpu is None
    cpu = [n for n, kind in context.view.items() if kind == "CPU"]
    requests = dict(zip(chains.ops["op"], chains.ops["requested_device"].astype(str), strict=True))
    expected = {}
    for name in cpu:
        kernel = context.gpu_kernel.get(name, "")
        asked = base.device_type(requests[name]) == "CPU"
        expected[name] = (
            (kernel, "") if kernel in base.NO_GPU else ("requested" if asked else "", "")
        )
    assert list(context.why_cpu.items()) == list(expected.items())
    assert "requested" in {cause for cause, _ in expected.values()} and len(cpu) > 100
    asked = context.cpu_requested()
    assert all(context.asked_cpu(n) == (n in asked) for n in context.type_of)


def test_two_sends_of_one_tensors_key_resolve_in_the_producer_lists_order():
    """A receive's reader reads the op its key's send sent. The sends are read in the copies'
    order while each key's sends agree; when two sends of one key send different ops, the
    producer lists' order decides (the first user op wins), as the pass over every op did."""
    from tfplace_widget._analyses.findings.runtime import runtime_names

    type_of = {"a": "Add", "b": "Add", "X/_1": "_Send", "X/_2": "_Send", "X/_3": "_Recv"}
    type_of["d"] = "Mul"
    names = list(type_of)
    for sent, expected in ((("b", "a"), "b"), (("a", "a"), "a"), (("X/_1", "a"), "a")):
        raw = {"X/_2": [sent[0]], "X/_1": [sent[1]], "d": ["X/_3", "a"], "a": [], "b": []}
        runtime, sends, receives, copies = runtime_names(type_of, pd.Series(["x"] * 6), names)
        context = base.Context(
            trace=None,
            ops=pd.DataFrame(),
            device_of={},
            type_of=type_of,
            gpu_kernel={},
            requested={},
            inputs={},
        )
        context.runtime = runtime
        edges = context._through_copies(raw, sends, receives, copies)
        assert edges == {"d": [expected, "a"], "a": [], "b": []}, sent
        assert list(edges) == ["d", "a", "b"]


def test_the_consumers_are_the_edges_read_backwards_copies_looked_through(chains):
    """``consumers`` (made in the one pass that resolves the copies) holds each producer's
    readers in the edges' order, one per edge, a reader on the other CPU among them: the
    chains cross between the two CPUs, so TensorFlow's runtime put a ``_Send``/``_Recv``
    pair on each crossing, and the reader's raw input is the ``_Recv``."""
    context = base.Context.of(chains)
    expected: dict[str, list[str]] = {}
    for op, producers in context.inputs.items():
        for producer in producers:
            expected.setdefault(producer, []).append(op)
    assert list(context.consumers.items()) == list(expected.items())
    received = [
        op
        for op, producers in chains.inputs.items()
        if any(context.type_of.get(p) == "_Recv" for p in producers) and op in context.user
    ]
    assert received  # the copies' path is taken
    for op in received:
        assert all(p in context.user for p in context.inputs[op])
        devices = {context.device_of[p] for p in context.inputs[op]} | {context.device_of[op]}
        assert len(devices) == 2, op  # one of its producers ran on the other CPU
        assert all(op in context.consumers[p] for p in context.inputs[op])


def _by_name(frame: pd.DataFrame, column: str, last: bool) -> dict[str, str]:
    """op -> ``column``'s value at its first (or last) row, in the order of its first row."""
    values = dict.fromkeys(frame["op"])
    rows = zip(frame["op"], frame[column].astype(str), strict=True)
    for name, value in rows if last else reversed(list(rows)):
        values[name] = value
    return values


def test_devices_requests_and_kernels_are_read_by_row_without_a_dict_of_every_op(chains):
    """``device_of`` (a name's first row's device), ``requested`` (its last row's request) and
    ``gpu_kernel`` (its known kernels) read the op frame's columns through one table of each
    name's row, not a dict of every op each (three of a million names at 1M ops), and answer
    as those dicts do, in their order: also when a name has several rows that differ (a trace
    merged from several runs), and when such a name has two known kernels."""
    frame = chains.ops
    twice = frame["op"].isin(["sum", "c0/add3", "c1/add4"]).to_numpy()
    later = frame[twice].assign(
        device="/job:localhost/replica:0/task:0/device:CPU:1",
        requested_device="/device:CPU:1",
        gpu_kernel=["NA", "no", "host"][: int(twice.sum())],
    )
    for ops in (frame, pd.concat([frame, later], ignore_index=True)):
        trace = clone(chains)
        trace.ops = ops
        context = base.Context.of(trace)
        for mapping in (context.device_of, context.requested, context.gpu_kernel):
            assert not isinstance(mapping, dict) or ops is not frame
        device_of = _by_name(ops, "device", last=False)
        requested = _by_name(ops, "requested_device", last=True)
        known = ops[ops["gpu_kernel"].astype(str) != "NA"]
        kernels = dict(zip(known["op"], known["gpu_kernel"].astype(str), strict=True))
        assert list(context.device_of.items()) == list(device_of.items())
        assert list(context.requested.items()) == list(requested.items())
        assert list(context.gpu_kernel.items()) == list(kernels.items())
        for name in [*list(device_of)[:50], "sum", "c1/add4", "no such op"]:
            assert context.device_of.get(name) == device_of.get(name)
            assert context.requested.get(name, "?") == requested.get(name, "?")
            assert context.gpu_kernel.get(name) == kernels.get(name)
            assert (name in context.gpu_kernel) == (name in kernels)
        assert context.requested["sum"] == requested["sum"] and len(context.requested) == len(
            requested
        )


def test_a_name_the_prediction_lists_twice_is_viewed_as_its_last_row(chains):
    """The placer's prediction is read as it comes (no set of its million names made to find
    a name listed twice): a name of several rows is found by the view's own dict, and then
    placed by its last row, in its first row's place, with a cause only if that row is a CPU."""
    context = base.Context.of(chains)
    from tfplace_widget._analyses.findings.predicted import predict_with_module

    names, devices, hows, reasons = predict_with_module(context, chains.facts)
    view, why = dict(context.view), dict(context.why_cpu)
    moved = next(n for n in names if why.get(n) == ("requested", ""))
    gpu = next(d for d in devices if base.device_type(d) == "GPU")
    context.view, context.why_cpu = {}, {}
    listed = reasons()
    context._view_of_prediction(
        [*names, moved], [*devices, gpu], [*hows, "explicit"], lambda: [*listed, ""]
    )
    assert list(context.view) == list(view) and context.view[moved] == "GPU"
    assert {n: k for n, k in context.view.items() if n != moved} == {
        n: k for n, k in view.items() if n != moved
    }
    assert moved not in context.why_cpu
    assert list(context.why_cpu.items()) == [(n, c) for n, c in why.items() if n != moved]


def test_the_predicted_view_is_the_placers_lists_with_no_dict_until_a_name_is_looked_up(chains):
    """A CPU-only trace's view is the placer's prediction (each node once, by name): kept as
    its lists, iterated in the prediction's order, a dict by name made only when a rule looks
    a name up (a million-op trace's rules iterate it), and answering as that dict does."""
    context = base.Context.of(chains)
    names, devices, _, _ = predict_with_module(context, chains.facts)
    ours = [(n, base.device_type(d)) for n, d in zip(names, devices, strict=True)]
    expected = {n: kind for n, kind in ours if n in context.user}
    view = context.view
    assert context.predicted_view and not isinstance(view, dict)
    assert list(view.items()) == list(expected.items()) and list(view) == list(expected)
    assert list(view.values()) == list(expected.values()) and len(view) == len(expected)
    for name in [*names[:40], "no such op"]:
        assert view.get(name) == expected.get(name) and (name in view) == (name in expected)
    assert view == expected


def test_the_prediction_is_read_off_the_placers_columns_as_its_frame_reads_them(chains):
    """The findings read the placer's columns with no frame of them made: the same lists as
    ``predict_devices``' frame gives, and values that are not all ``str`` as its ``str``
    column reads them (a missing one as ``"nan"``)."""
    context = base.Context.of(chains)
    names, devices, hows, reasons = predict_with_module(context, chains.facts)
    frame = predict_devices(
        chains.facts,
        predicted_devices(chains.devices, 1),
        soft_placement=True,
        local_task=master_task(chains),
        registry=chains.facts.registry,
    )
    assert names == frame["op"].tolist() and devices == frame["predicted_device"].tolist()
    assert hows == frame["how"].tolist() and reasons() == frame["reason"].tolist()
    assert _strings(np.array(["a", None, ""], dtype=object)) == ["a", "nan", ""]
    assert _strings(["a", "b"]) == ["a", "b"]


def test_the_cpu_ops_causes_are_lists_that_a_ping_pong_reads_with_no_dict_of_them(chains):
    """A CPU-only trace's CPU ops' causes, when each is a request's or none (no kernel and no
    colocation to follow), are kept as the view is: the prediction's CPU ops and their causes
    as lists, no dict of the million of a large trace. ``ping_pong`` reads its stretches' causes
    with one pass over them and makes no such dict, with the findings the dict gives."""
    context = base.Context.of(chains)  # every stretch's finding made, material or not
    why = context.why_cpu
    assert isinstance(why, base.ListedValues) and why._by_name is None
    cpu = [n for n, kind in context.view.items() if kind == "CPU"]
    assert list(why) == cpu and {cause for cause, _ in why.values()} == {"requested"}
    found = transfers.find_ping_pongs(context)
    assert len(found) > 1 and why._by_name is None  # read, and no dict made

    looked_up = base.Context.of(chains)  # the same, its causes a dict looked up by name
    looked_up.why_cpu = dict(looked_up.why_cpu)
    again = transfers.find_ping_pongs(looked_up)
    assert [(f.kind, f.severity, f.ops, f.message, f.evidence, f.fix) for f in found] == [
        (f.kind, f.severity, f.ops, f.message, f.evidence, f.fix) for f in again
    ]
    by_name = dict(zip(why, why.values(), strict=True))
    some = [cpu[0], cpu[-1], "no such op"]  # the values of some names, one of them missing
    expected = sorted(by_name.get(n, ("", "x")) for n in some)
    assert sorted(why.values_among(some, ("", "x"))) == expected and why._by_name is None
    assert why.get(cpu[0]) == by_name[cpu[0]] and why._by_name == by_name  # looked up: made
    assert sorted(why.values_among(some, ("", "x"))) == expected


def test_a_send_of_the_op_its_key_names_leaves_no_key_to_look_up(chains):
    """TensorFlow's runtime names a copy's ``_Send``/``_Recv`` after the tensor's op
    (``c0/add7/_12`` sends ``c0/add7``): then each receive's reader reads its key's op itself,
    and no dict of a key per copied tensor is made; a send of another op than its key names
    is still looked up."""
    from tfplace_widget._analyses.findings.runtime import runtime_names, sent_ops

    context = base.Context.of(chains)
    ops, raw = chains.ops, chains.inputs
    _, sends, _, _ = runtime_names(context.type_of, ops["how"], ops["op"].tolist())
    keys = context.copy_keys
    assert sends and all(raw[s][0] == keys[s] for s in sends if raw.get(s))  # what TF names
    assert sent_ops(raw, sends, keys, context.user) == {}
    send = next(s for s in sends if raw.get(s))
    other = next(op for op in context.user if op != keys[send])
    moved = {**raw, send: [other]}
    assert sent_ops(moved, sends, keys, context.user).get(keys[send]) == other
