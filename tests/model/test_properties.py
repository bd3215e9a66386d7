"""Property-based tests (issue 5): random graphs of a few hundred ops, random device requests
over three real CPUs (some for devices that do not exist), random ``colocate_with`` groups,
resource variables and soft placement on or off; each is traced for real and checked against
the executed graph TensorFlow reports (its partition graphs) and the wall clock of the run.

Profiles: ``HYPOTHESIS_PROFILE=ci`` (default, 20 examples, well under 90 s), ``dev`` (6) or
``thorough`` (150).
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from helpers import conflicting_colocation
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfplace_widget import TraceError, trace_placement
from tfplace_widget._model.devices import canonical_device
from tfplace_widget._tracing import tracer as tracer_module

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]
settings.register_profile(
    "ci", max_examples=20, deadline=None, suppress_health_check=_SLOW_OK, print_blob=True
)
settings.register_profile("dev", max_examples=6, deadline=None, suppress_health_check=_SLOW_OK)
settings.register_profile(
    "thorough", max_examples=150, deadline=None, suppress_health_check=_SLOW_OK
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")

CPUS = 3
EXISTING = [f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(CPUS)]
# Requests a graph may make: the three CPUs in several spellings, partial specs, and devices
# that do not exist here. (Other jobs or tasks fail even with soft placement, which only
# drops a request's type and index: that case is in test_reliability.py.)
REQUESTS = [
    "/cpu:0",
    "/cpu:1",
    "/cpu:2",
    "/device:CPU:1",
    "/job:localhost/replica:0/task:0/device:CPU:2",
    "/device:CPU:*",
    "/cpu:5",
    "/gpu:0",
    "/device:GPU:*",
    "/job:localhost/device:GPU:1",
]
KINDS = ["add", "mul", "identity", "neg", "const", "read", "square_sum"]


@dataclass(frozen=True)
class OpSpec:
    kind: str
    request: str | None  # None: no tf.device; "clear": tf.device(None)
    a: int
    b: int
    colocate: int | None  # index of an earlier tensor to colocate with


@dataclass(frozen=True)
class GraphSpec:
    ops: tuple[OpSpec, ...]
    variables: tuple[str | None, ...]  # a request per resource variable
    soft: bool
    device_scope: str | None
    steps: int


@st.composite
def graph_specs(draw: Any, min_ops: int = 150, max_ops: int = 300) -> GraphSpec:
    count = draw(st.integers(min_ops, max_ops))
    requests = st.one_of(
        st.none(), st.sampled_from(REQUESTS), st.just("clear")
    )  # about a third of ops ask for nothing
    ops = []
    for i in range(count):
        ops.append(
            OpSpec(
                kind=draw(st.sampled_from(KINDS)),
                request=draw(requests),
                a=draw(st.integers(0, i + 1)),
                b=draw(st.integers(0, i + 1)),
                colocate=draw(st.one_of(st.none(), st.none(), st.integers(0, i + 1))),
            )
        )
    variables = tuple(draw(st.lists(st.one_of(st.none(), st.sampled_from(REQUESTS)), max_size=3)))
    return GraphSpec(
        ops=tuple(ops),
        variables=variables,
        soft=draw(st.booleans()),
        device_scope=draw(st.sampled_from([None, None, "/cpu:1", "/cpu:4", "/device:CPU:*"])),
        steps=draw(st.sampled_from([1, 1, 2])),
    )


class _Device:
    def __init__(self, request: str | None) -> None:
        self.request = request

    def __enter__(self) -> None:
        self.scope = tf.device(None) if self.request == "clear" else tf.device(self.request or "")
        self.scope.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self.scope.__exit__(*exc)


def builder_for(spec: GraphSpec, built: dict) -> Any:
    """The graph builder of ``spec``; ``built["graph"]`` is the graph it ran in."""

    def build() -> None:
        built["graph"] = tf.compat.v1.get_default_graph()
        tensors = [tf.constant(np.ones(4, np.float32), name="seed")]
        variables = []
        for v, request in enumerate(spec.variables):
            with _Device(request):
                variables.append(tf.Variable(np.full(4, v, np.float32), name=f"var_{v}"))
        for i, op in enumerate(spec.ops):
            x, y = tensors[op.a % len(tensors)], tensors[op.b % len(tensors)]
            target = tensors[op.colocate % len(tensors)].op if op.colocate is not None else None
            colocation = tf.compat.v1.colocate_with(target) if target is not None else _NoScope()
            with colocation, _Device(op.request):
                name = f"op_{i}"
                if op.kind == "add":
                    out = tf.add(x, y, name=name)
                elif op.kind == "mul":
                    out = tf.multiply(x, y, name=name)
                elif op.kind == "identity":
                    out = tf.identity(x, name=name)
                elif op.kind == "neg":
                    out = tf.negative(x, name=name)
                elif op.kind == "const":
                    out = tf.constant(np.full(4, i, np.float32), name=name)
                elif op.kind == "read" and variables:
                    out = tf.add(variables[op.a % len(variables)].read_value(), x, name=name)
                else:
                    out = tf.add(tf.square(x), tf.reduce_sum(y), name=name)
            tensors.append(out)
        return None  # run every op nothing consumes

    return build


class _NoScope:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


# ---------------------------------------------------------------------------------------------
# Device strings, read with TensorFlow's own DeviceSpec (not the package's parser)
# ---------------------------------------------------------------------------------------------
_FIELDS = ("job", "replica", "task", "device_type", "device_index")


def tf_spec(name: str) -> tf.DeviceSpec:
    return tf.DeviceSpec.from_string(name)


def matches(request: str, device: str) -> bool:
    wanted, actual = tf_spec(request), tf_spec(device)
    for attribute in _FIELDS:
        want = getattr(wanted, attribute)
        if want is None:
            continue
        have = getattr(actual, attribute)
        if attribute == "device_type":
            want, have = want.upper(), (have or "").upper()
        if want != have:
            return False
    return True


def exists(request: str) -> bool:
    return any(matches(request, device) for device in EXISTING)


# ---------------------------------------------------------------------------------------------
# Running a spec
# ---------------------------------------------------------------------------------------------
@dataclass
class Run:
    trace: Any
    metadatas: list
    windows: list[tuple[float, float]]  # wall clock (µs since epoch) around each traced run
    graph_def: Any


def run_spec(spec: GraphSpec) -> Run:
    built: dict = {}
    captured: dict = {}
    windows: list[tuple[float, float]] = []
    real_build_trace = tracer_module.build_trace
    real_session = tf.compat.v1.Session

    def build_trace(metadatas: list, *args: Any, **kwargs: Any) -> Any:
        captured["metadatas"] = list(metadatas)
        return real_build_trace(metadatas, *args, **kwargs)

    class TimedSession(real_session):  # type: ignore[misc, valid-type]
        def run(self, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("run_metadata") is None:
                return super().run(*args, **kwargs)
            before = time.time() * 1e6
            try:
                return super().run(*args, **kwargs)
            finally:
                windows.append((before, time.time() * 1e6))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tracer_module, "build_trace", build_trace)
        patch.setattr(tf.compat.v1, "Session", TimedSession)
        trace = trace_placement(
            builder_for(spec, built),
            device_count={"CPU": CPUS},
            soft_placement=spec.soft,
            device_scope=spec.device_scope,
            steps=spec.steps,
        )
    return Run(trace, captured["metadatas"], windows, built["graph"].as_graph_def())


def missing_requests(graph_def: Any) -> dict[str, str]:
    """Ops of the built graph whose final device request matches no device here."""
    return {n.name: n.device for n in graph_def.node if n.device and not exists(n.device)}


# ---------------------------------------------------------------------------------------------
# The properties
# ---------------------------------------------------------------------------------------------
@settings(settings.get_profile(PROFILE))
@given(graph_specs())
def test_random_graphs_placed_as_tensorflow_did(spec: GraphSpec) -> None:
    graph_def = built_graph_def(spec)
    missing = missing_requests(graph_def)
    if spec.soft:
        check_trace(run_spec(spec), spec)
        return
    try:
        run = run_spec(spec)
    except TraceError as exc:
        check_refusal(str(exc), missing, graph_def)
        return
    # Soft placement off and a request for a device that does not exist: TF must refuse.
    assert not missing, f"placed although these ops ask for missing devices: {missing}"
    check_trace(run, spec)


def built_graph_def(spec: GraphSpec) -> Any:
    """The graph ``spec`` builds, as trace_placement builds it (inside its device_scope)."""
    graph = tf.Graph()
    with graph.as_default(), tf.device(spec.device_scope):
        builder_for(spec, {})()
    return graph.as_graph_def()


def check_refusal(message: str, missing: dict[str, str], graph_def: Any) -> None:
    """With soft placement off TF refuses two things, and the error says which and how to fix
    it: an op (or its colocation group) asking for a device that does not exist; and a
    colocation group (colocate_with, or a variable with its reads) whose members ask for
    different devices that both exist. The second is TF's rule too: without soft placement
    the placer will not pick one request over the other ("Cannot merge devices with
    incompatible ids"), so such a graph is not a case for the placement properties."""
    assert "CPU:0, CPU:1, CPU:2" in message and "soft_placement=True" in message, message
    placed = re.search(r"Cannot place op '([^']+)' on (\S+?)(?=[,:] )", message)
    conflict = re.search(r"must put '([^']+)' and '([^']+)' on one device", message)
    assert placed or conflict, message
    nodes = {node.name for node in graph_def.node}
    if placed:
        assert missing, message
        assert placed.group(1) in nodes and not exists(placed.group(2)), message
    else:
        assert {conflict.group(1), conflict.group(2)} <= nodes, message
        assert "incompatible" in message, message


def check_trace(run: Run, spec: GraphSpec) -> None:
    trace, ops = run.trace, run.trace.ops
    built = {node.name: node for node in run.graph_def.node}

    # 1. Every op of the executed graph appears once in trace.ops, on its device.
    executed = {
        node.name: canonical_device(node.device)
        for graph_def in run.metadatas[0].partition_graphs
        for node in graph_def.node
    }
    rows = Counter(zip(ops["op"], ops["device"], strict=True))
    assert all(count == 1 for count in rows.values()), [k for k, c in rows.items() if c > 1]
    for name, device in executed.items():
        assert rows[(name, device)] == 1, (name, device)
    extra = [(op, dev) for op, dev in rows if op not in executed]
    # ... and the only other rows are the executor's per-partition start nodes and the
    # constants ReplicateConstantsPass replaced by copies after placement (no partition graph
    # holds them), on the device of the placer's line for them in the log.
    replaced = {
        (op, dev)
        for op, dev in extra
        if op in built
        and built[op].op == "Const"
        and any(name.startswith(f"{op}/replicate/_") for name in executed)
    }
    for op, dev in replaced:
        assert f"{op}: (Const): {dev}" in trace.log, op
    assert {op for op, _ in set(extra) - replaced} <= {"_SOURCE"}, extra
    assert len(set(extra) - replaced) <= len({d for d in executed.values()})
    assert ops.loc[ops["op"] != "_SOURCE", "op"].is_unique

    # 2. Every device exists.
    assert set(ops["device"]) <= set(EXISTING), set(ops["device"]) - set(EXISTING)
    assert set(trace.devices) == set(EXISTING)

    # 3. Requests are read from the graph as built.
    for name, requested in zip(ops["op"], ops["requested_device"], strict=True):
        if name in built:
            assert requested == built[name].device, (name, requested)

    # 4. Every explicit op sits where it asked; every soft op asked for a device that does not
    #    exist (every op type here has a CPU kernel, so soft placement has no other reason).
    for row in ops.itertuples(index=False):
        if row.how == "explicit":
            assert row.requested_device and matches(row.requested_device, row.device), row
        elif row.how == "soft":
            assert row.requested_device and not exists(row.requested_device), row
            assert spec.soft
        elif row.how == "runtime":
            assert row.requested_device == ""

    # 5. colocate_with: an op sits on the device of the op it names. With soft placement on, TF
    #    drops a colocation that conflicts with a stronger constraint (seen: a read colocated
    #    with an op on CPU:0 stays with its variable on CPU:2; placement-rules.md, rule 5), and
    #    then the reason must say so rather than claim it runs on that op's device.
    placed = dict(zip(ops["op"], ops["device"], strict=True))
    reason_of = dict(zip(ops["op"], ops["reason"], strict=True))
    for name, node in built.items():
        if name not in placed:
            continue
        for group in node.attr["_class"].list.s if "_class" in node.attr else ():
            target = group.decode()[len("loc:@") :]
            if target not in placed or target == name or placed[name] == placed[target]:
                continue
            assert spec.soft, (name, target)
            assert "soft placement dropped it" in reason_of[name], (name, reason_of[name])
            assert f"runs on {target}'s device" not in reason_of[name], reason_of[name]

    # 6. Every transfer joins two different, existing devices.
    for transfer in trace.transfers.itertuples(index=False):
        assert transfer.src_device != transfer.dst_device, transfer
        assert {transfer.src_device, transfer.dst_device} <= set(EXISTING), transfer

    # 7. Events lie inside the step: on the trace's own axis they start at or after 0, and on
    #    the wall clock each one lies inside one traced session.run call.
    events = trace.events
    assert len(events) and (events["start_us"] >= 0).all()
    assert (events["duration_us"] >= 0).all()
    origin = min(
        node.all_start_micros
        for dev in run.metadatas[0].step_stats.dev_stats
        for node in dev.node_stats
    )
    assert len(run.windows) == spec.steps
    slack = 2000  # µs: time.time() and TF's clock are both CLOCK_REALTIME; allow for rounding
    step_length = run.windows[-1][1] - origin
    ends = events["start_us"] + events["duration_us"]
    assert (ends <= step_length + slack).all(), (ends.max(), step_length)
    starts = origin + events["start_us"].to_numpy()
    inside = np.zeros(len(events), dtype=bool)
    for before, after in run.windows:
        inside |= (starts >= before - slack) & (starts + events["duration_us"] <= after + slack)
    assert inside.all(), events[~inside].head()

    # 8. An op that ran has a start and a duration inside the step, and ran once per step
    #    (no loops here) on its device.
    ran = ops[ops["runs"].notna()]
    assert (ran["runs"] == spec.steps).all(), ran[ran["runs"] != spec.steps].head()
    assert (ran["start_us"] >= 0).all()


# ---------------------------------------------------------------------------------------------
# Cases hypothesis found, kept as plain tests
# ---------------------------------------------------------------------------------------------
def two_variables_one_colocation():
    """Reads of variables on CPU:1 and CPU:2, all colocated with one anchor: impossible."""
    anchor = tf.constant(1.0, name="anchor")
    with tf.device("/cpu:1"):
        first = tf.Variable(1.0, name="weights_a")
    with tf.device("/cpu:2"):
        second = tf.Variable(1.0, name="weights_b")
    with tf.compat.v1.colocate_with(anchor.op):
        read_a = tf.identity(first.read_value(), name="read_a")
        read_b = tf.identity(second.read_value(), name="read_b")
    return tf.add(read_a, read_b, name="out"), anchor


def test_soft_placement_drops_an_impossible_colocation_and_the_reason_says_so():
    trace = trace_placement(two_variables_one_colocation, device_count={"CPU": CPUS})
    ops = trace.ops.set_index("op")
    anchor = ops.loc["anchor", "device"]
    moved = ops[
        (ops["reason"].str.contains("loc:@anchor|colocated with anchor"))
        & (ops["device"] != anchor)
    ]
    assert len(moved) == 1  # one read stays with its variable, away from the anchor
    row = moved.iloc[0]
    variables = {ops.loc["weights_a", "device"], ops.loc["weights_b", "device"]}
    assert variables == {EXISTING[1], EXISTING[2]}
    assert row["device"] in variables - {anchor}
    assert row["how"] == "colocated"
    assert "shares a resource/ref edge with weights_" in row["reason"]
    assert "soft placement dropped it" in row["reason"]
    assert "runs on anchor's device" not in row["reason"]


def test_without_soft_placement_the_impossible_colocation_is_refused():
    with pytest.raises(TraceError) as info:
        trace_placement(
            two_variables_one_colocation, device_count={"CPU": CPUS}, soft_placement=False
        )
    message = str(info.value)
    assert re.search(r"must put '[^']+' and '[^']+' on one device", message)
    assert "incompatible ids" in message and "Make the requests agree" in message


def test_an_op_moved_with_its_colocation_group_is_colocated_not_soft():
    """An existing-device request that the group overrode: hypothesis's first find (the
    anchor asked for CPU:1; the read colocated with it is pinned to its variable on CPU:2)."""

    trace = trace_placement(conflicting_colocation, device_count={"CPU": CPUS})
    anchor = trace.ops.set_index("op").loc["anchor"]
    assert anchor["device"] == EXISTING[2] and anchor["requested_device"] == "/device:CPU:1"
    assert anchor["how"] == "colocated"
    assert "colocation group with weights" in anchor["reason"]
