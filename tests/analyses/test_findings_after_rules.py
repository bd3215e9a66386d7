"""What ``find_findings`` does after the rules, at a large trace's scale (issue 35): the CPU
fallbacks picked out of the view without a look-up of every op asked onto the CPU, a fix's
request read until the movers' requests differ, and no set of a finding's ops made when no
other finding could be a copy of it. Counted, not timed (``benchmarks/findings_side.py``
times them); the answers are checked against the plain way of reaching them."""

from __future__ import annotations

from typing import Any

import pytest

from tfplace_widget._analyses import findings
from tfplace_widget._analyses.findings import base, fallbacks, fixes


def _step(tf: Any) -> Any:
    """Chains of adds asked onto the CPUs (most of a large CPU trace's ops), an int32 MatMul
    and a string op with no GPU kernel between them (the fallbacks), and adds with no request
    (the placer's choice: a GPU, on a GPU machine)."""
    x = tf.constant(1.0, name="start")
    for j in range(30):
        if j % 3 == 2:
            x = tf.add(x, 1.0, name=f"free{j}")
        else:
            with tf.device(f"/cpu:{j % 2}"):
                x = tf.add(x, 1.0, name=f"asked{j}")
    counts = tf.cast(tf.reshape(x, (1, 1)), tf.int32, name="to_int")
    product = tf.matmul(counts, counts, name="int_matmul")
    text = tf.strings.as_string(tf.cast(product, tf.float32, name="to_float"), name="as_text")
    return [x, tf.strings.join(["n: ", tf.reshape(text, ())], name="label")]


@pytest.fixture(scope="module")
def mixed(tf: Any, trace_placement: Any) -> Any:
    return trace_placement(lambda: _step(tf), device_count={"CPU": 2})


class _AskedFor(dict):
    """``why_cpu`` that records which ops' causes are looked up (``get``)."""

    asked: list[str]

    def get(self, name: Any, default: Any = None) -> Any:
        self.asked.append(name)
        return super().get(name, default)


def _summary(found: list[base.Finding]) -> list[tuple]:
    return [(f.kind, f.severity, f.ops, f.message, f.evidence, f.fix) for f in found]


def test_cpu_fallbacks_look_up_no_cause_of_an_op_asked_onto_the_cpu(mixed):
    """``find_cpu_fallbacks`` reads the CPU ops' causes in one pass when ``why_cpu`` holds
    the view's CPU ops in its order (as the prediction makes it): of a million-op CPU trace's
    800,000 CPU ops, all but a few asked for (``requested``), none is looked up. In any other
    order each CPU op's cause is looked up, with the same findings."""
    context = base.Context.of(mixed)
    why = context.why_cpu
    requested = {n for n, (cause, _) in why.items() if cause == "requested"}
    assert len(requested) >= 10 and len(requested) < len(why)
    plain = _summary(fallbacks.find_cpu_fallbacks(context))
    assert {"int_matmul", "as_text"} <= {op for row in plain for op in row[2]}

    counted = base.Context.of(mixed)
    counted.why_cpu = _AskedFor(counted.why_cpu)
    counted.why_cpu.asked = []
    assert _summary(fallbacks.find_cpu_fallbacks(counted)) == plain
    assert counted.why_cpu.asked and not requested & set(counted.why_cpu.asked)

    shuffled = base.Context.of(mixed)  # not the view's order: each op's cause looked up
    shuffled.why_cpu = _AskedFor(reversed(list(shuffled.why_cpu.items())))
    shuffled.why_cpu.asked = []
    assert _summary(fallbacks.find_cpu_fallbacks(shuffled)) == plain
    assert requested <= set(shuffled.why_cpu.asked)


class _Requests(dict):
    """``requested`` that counts its look-ups."""

    looked_up = 0

    def get(self, name: Any, default: Any = None) -> Any:
        self.looked_up += 1
        return super().get(name, default)


def test_a_fix_reads_the_movers_requests_until_two_differ(mixed):
    """``placement_fix`` changes the movers' shared ``tf.device`` when they all have one and
    wraps their lines in a new one otherwise: the requests are read only until two differ (a
    large finding's hundreds of thousands of movers on four CPUs differ within a few)."""
    context = base.Context.of(mixed)
    asked = [n for n in context.view if context.requested.get(n, "").endswith("CPU:0")]
    other = [n for n in context.view if context.requested.get(n, "").endswith("CPU:1")]
    free = [n for n in context.view if n.startswith("free")]
    assert len(asked) > 5 and other and free
    gpu = "/job:localhost/replica:0/task:0/device:GPU:0"
    for movers, shared in ((asked, True), ([*asked[:2], *other, *asked], False), (free, False)):
        context.requested = _Requests(context.requested)
        fix = fixes.placement_fix(context, movers, gpu, free[:1])
        assert ("change the tf.device(" in fix["edit"]) == shared
        assert ("wrap the lines" in fix["edit"]) != shared
        assert list(fix["overrides"]) == list(dict.fromkeys(movers))
        if not shared and movers[0] in asked:
            assert context.requested.looked_up == 3  # CPU:0, CPU:0, CPU:1: done
    assert fixes._one_request(context, []) == ""


class _Listed(list):
    """A finding's ops that count how often they are read one by one."""

    reads = 0

    def __iter__(self) -> Any:
        self.reads += 1
        return super().__iter__()


def test_a_finding_no_other_could_copy_makes_no_set_of_its_ops(mixed):
    """``_one_per_copy`` merges the findings of one kind about the same ops (a function's
    copies): a finding with no other of its kind, or without copies of its op count, has none
    to merge with, and its ops (a large trace's hundreds of thousands) are not read into a
    set. Findings that may be copies still merge."""
    context = base.Context.of(mixed)

    def finding(kind: str, ops: list[str]) -> base.Finding:
        made = base.Finding(kind, "medium", ops, "m", {})
        made.ops = _Listed(made.ops)
        return made

    alone = [finding("ping_pong", ["a", "b", "c"]), finding("costly_transfer", ["a", "b"])]
    alone.append(finding("costly_transfer", ["a", "b", "c"]))  # its kind's, another count
    twins = [finding("cpu_fallback", ["x", "y"]), finding("cpu_fallback", ["y", "x"])]
    kept = findings._one_per_copy(context, [*alone, *twins])
    assert kept == [*alone, twins[0]] and twins[0].evidence["function_copies"] == 2
    assert [f.ops.reads for f in alone] == [0, 0, 0]


def test_one_cause_of_every_cpu_op_is_counted_not_read_op_by_op(mixed, monkeypatch):
    """When every CPU op of the view has one cause (a million-op CPU trace's 800,000 were all
    asked onto the CPU), ``_not_requested`` counts it in the causes' list and reads none of
    them op by op, with the answer the op-by-op reading gives; mixed causes are read."""
    import operator

    from tfplace_widget._analyses.findings.byrow import ListedValues

    context = base.Context.of(mixed)
    cpu = [n for n, kind in context.view.items() if kind == "CPU"]
    assert len(cpu) > 2
    read: list[Any] = []

    def counting(index: int) -> Any:
        get = operator.itemgetter(index)

        def one(item: Any) -> Any:
            read.append(item)
            return get(item)

        return one

    monkeypatch.setattr(fallbacks, "itemgetter", counting)
    for cause in (("requested", ""), ("", ""), ("no", "")):
        context.why_cpu = ListedValues(cpu, [cause] * len(cpu))
        expected = [n for n in cpu if cause[0] != "requested"]
        assert fallbacks._not_requested(context) == expected and not read
    context.why_cpu = ListedValues(cpu, [("requested", "")] * (len(cpu) - 1) + [("", "")])
    assert fallbacks._not_requested(context) == cpu[-1:] and len(read) == len(cpu)
