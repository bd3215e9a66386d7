"""trace_placement on real sessions: the seed experiment, frames, steps, loops, feeds, options."""

from __future__ import annotations

import re

import pytest
from helpers import CPU0, CPU1, SEED_N, TWO_CPUS, op_row

from tfplace_widget._sources.frames import EVENTS_COLUMNS, OPS_COLUMNS, TRANSFERS_COLUMNS

FLOAT32 = 4


# -- the seed experiment ----------------------------------------------------------------------
ISSUE_OPS_COLUMNS = [
    "op",
    "type",
    "device",
    "requested_device",
    "how",
    "reason",
    "start_us",
    "duration_us",
    "runs",
    "output_bytes",
    "function",  # issue 10: the tf.function an op belongs to ("" in graph mode)
    "kernels",  # issue 12: device types with a kernel for the node def ("CPU GPU")
    "gpu_kernel",  # issue 12: yes / host / dtype / no / NA
    "xla_op",  # issue 23: the HLO instruction an op of an XLA cluster went into (<NA> outside)
    "input_stage",  # issue 30: the tf.data stage whose function ran the op (<NA> outside)
    "source",  # issue 33: the user's line that made the op ("" for the runtime's ops)
    "source_path",  # issue 33: that line's file as a full path, for an editor
    "allocated_bytes",  # issue 34: bytes the op's allocations took (TF's allocator records)
    "peak_bytes",  # issue 34: the op's own high-water mark
    "allocator",  # issue 34: TF's allocator name ("cpu", "mklcpu", "GPU_0_bfc")
]
ISSUE_EVENTS_COLUMNS = ["op", "device", "lane", "thread", "start_us", "duration_us", "label"]
ISSUE_TRANSFERS_COLUMNS = [
    "tensor",
    "src_device",
    "dst_device",
    "bytes",
    "cross_task",  # issue 15: source and destination on different tasks of a cluster
]


def test_columns_are_exactly_the_documented_ones(seed_cpu):
    """Issue 2 fixes these names and their order; the panel code depends on them."""
    assert list(seed_cpu.ops.columns) == OPS_COLUMNS == ISSUE_OPS_COLUMNS
    assert list(seed_cpu.events.columns) == EVENTS_COLUMNS == ISSUE_EVENTS_COLUMNS
    assert list(seed_cpu.transfers.columns) == TRANSFERS_COLUMNS == ISSUE_TRANSFERS_COLUMNS


def test_seed_inputs_cpu_places_a_b_where_asked_and_c_on_the_other_device(seed_cpu):
    for name in ("A", "B"):
        row = op_row(seed_cpu, name)
        assert (row.type, row.device, row.requested_device, row.how) == (
            "Fill",
            CPU0,
            "/device:CPU:0",
            "explicit",
        )
    c = op_row(seed_cpu, "C")
    assert (c.type, c.device, c.requested_device, c.how) == (
        "AddV2",
        CPU1,
        "/device:CPU:1",
        "explicit",
    )
    assert "CPU:1" in c.reason and "tf.device" in c.reason


def test_seed_inputs_none_puts_unrequested_inputs_on_the_first_device(seed_none):
    """No request: the placer takes the highest-priority device (CPU:0 here), not C's device."""
    for name in ("A", "B"):
        row = op_row(seed_none, name)
        assert (row.device, row.requested_device, row.how) == (CPU0, "", "implicit")
        assert "No device requested" in row.reason and "GPU before CPU" in row.reason
    c = op_row(seed_none, "C")
    assert (c.device, c.requested_device, c.how) == (CPU1, "/device:CPU:1", "explicit")
    # The helper ops tf.ones builds (shape and fill value) have no request either.
    helpers = seed_none.ops[seed_none.ops["op"].str.match(r"^[AB]/(shape_as_tensor|Const)$")]
    assert len(helpers) == 4 and set(helpers["type"]) == {"Const"}
    assert set(helpers["device"]) == {CPU0} and set(helpers["how"]) == {"implicit"}


@pytest.mark.parametrize("variant", ["seed_cpu", "seed_none"])
def test_seed_transfers_are_the_send_recv_pairs(variant, request):
    """A and B cross to CPU:1 for C; C crosses back to CPU:0, where the client fetches it."""
    trace = request.getfixturevalue(variant)
    transfers = trace.transfers.sort_values("tensor").reset_index(drop=True)
    assert transfers[["tensor", "src_device", "dst_device"]].values.tolist() == [
        ["A:0", CPU0, CPU1],
        ["B:0", CPU0, CPU1],
        ["C:0", CPU1, CPU0],
    ]
    assert transfers["bytes"].tolist() == [SEED_N * FLOAT32] * 3
    sends = trace.ops[trace.ops["type"] == "_Send"]
    recvs = trace.ops[trace.ops["type"] == "_Recv"]
    assert len(sends) == len(recvs) == len(transfers)
    for tensor, src, dst in transfers[["tensor", "src_device", "dst_device"]].values:
        producer = tensor.split(":")[0]
        assert trace.device_of(producer) == src
        assert (sends["device"] == src).sum() >= 1 and (recvs["device"] == dst).sum() >= 1
    # _Send/_Recv are never in step_stats: no timing, no runs.
    assert sends["runs"].isna().all() and sends["start_us"].isna().all()
    assert not trace.events["op"].isin(set(sends["op"]) | set(recvs["op"])).any()


@pytest.mark.parametrize("variant", ["seed_cpu", "seed_none"])
def test_seed_step_stats_match_the_seed_question(variant, request):
    """Like the asker's printout: each device lists _SOURCE and the ops it ran."""
    trace = request.getfixturevalue(variant)
    ran = trace.events.groupby("device")["op"].apply(set).to_dict()
    assert set(ran) == {CPU0, CPU1}
    assert ran[CPU1] == {"_SOURCE", "C"}
    assert {"_SOURCE", "A", "B", "_retval_C_0_0"} <= ran[CPU0]
    assert trace.devices == [CPU0, CPU1]


def test_c_reads_its_inputs_through_recv_ops_on_its_own_device(seed_cpu):
    label = seed_cpu.events.loc[seed_cpu.events["op"] == "C", "label"].iloc[0]
    match = re.fullmatch(r"C = AddV2\((\S+), (\S+)\)", label)
    assert match, label
    for name in match.groups():
        row = op_row(seed_cpu, name)
        assert (row.type, row.device, row.how) == ("_Recv", CPU1, "runtime")
    assert sorted(seed_cpu.inputs["C"]) == sorted(match.groups())
    assert seed_cpu.consumers_of(match.group(1)) == ["C"]


def test_output_bytes_and_events(seed_cpu):
    for name in ("A", "B", "C"):
        assert op_row(seed_cpu, name).output_bytes == SEED_N * FLOAT32
    events = seed_cpu.events
    assert events["start_us"].min() == 0 and (events["duration_us"] >= 0).all()
    assert (events["lane"] == events["device"]).all()  # CPU runs: one op-level lane per device
    assert set(events["op"]) <= set(seed_cpu.ops["op"])
    assert events["label"].str.match(r"^\S+ = \w+\(").all()  # "[cpu ...]" prefixes removed
    assert events["start_us"].is_monotonic_increasing


def test_runtime_ops_one_source_per_device(seed_cpu):
    sources = seed_cpu.ops[seed_cpu.ops["op"] == "_SOURCE"]
    assert sorted(sources["device"]) == [CPU0, CPU1]
    assert set(sources["how"]) == {"runtime"}
    retval = op_row(seed_cpu, "_retval_C_0_0")
    assert (retval.type, retval.device, retval.how) == ("_Retval", CPU0, "runtime")


def test_log_has_the_placement_lines(seed_cpu):
    """The run uses log_device_placement, and fds 1/2 are captured into trace.log."""
    log = seed_cpu.log
    assert "placer.cc" in log
    assert f"A: (Fill): {CPU0}" in log
    assert f"C: (AddV2): {CPU1}" in log


# -- optimize ---------------------------------------------------------------------------------
@pytest.mark.parametrize("builder", ["inputs_cpu", "inputs_none"])
def test_optimize_on_grappler_folds_a_plus_b_into_one_const(
    builder, seed_builders, trace_placement
):
    trace = trace_placement(seed_builders[builder], device_count=TWO_CPUS, optimize=True)
    c = op_row(trace, "C")
    # TF 2.21: the whole A + B becomes a Const named C that keeps C's device request.
    assert (c.type, c.device, c.requested_device, c.how) == (
        "Const",
        CPU1,
        "/device:CPU:1",
        "explicit",
    )
    assert "AddV2" in c.reason and "Const" in c.reason
    assert not trace.ops["type"].isin(["Fill", "AddV2"]).any()
    assert not trace.ops["op"].isin(["A", "B"]).any()
    assert trace.transfers[["tensor", "src_device", "dst_device"]].values.tolist() == [
        ["C:0", CPU1, CPU0]
    ]


def test_optimize_off_runs_the_graph_as_built(seed_cpu):
    types = dict(zip(seed_cpu.ops["op"], seed_cpu.ops["type"], strict=False))
    assert (types["A"], types["B"], types["C"]) == ("Fill", "Fill", "AddV2")


# -- steps, loops, feeds ----------------------------------------------------------------------
def test_steps_3_triples_runs(seed_cpu, seed_cpu_steps3):
    trace = seed_cpu_steps3
    timed = trace.ops[trace.ops["runs"].notna()]
    assert len(timed) == len(seed_cpu.ops[seed_cpu.ops["runs"].notna()])
    assert (timed["runs"] == 3).all()
    assert len(trace.events) == 3 * len(seed_cpu.events)
    by_op = trace.events.groupby(["op", "device"])
    for row in timed.itertuples():
        assert row.duration_us == by_op["duration_us"].sum()[(row.op, row.device)]
        assert row.start_us == by_op["start_us"].min()[(row.op, row.device)]
    # Steps follow each other on one time axis: each op's 3 runs start at increasing times.
    starts = trace.events[trace.events["op"] == "C"]["start_us"].tolist()
    assert len(starts) == 3 and starts == sorted(starts) and len(set(starts)) == 3


def _loop_builder(tf):
    def build():
        i = tf.constant(0, name="i0")
        return tf.while_loop(
            lambda i: tf.less(i, 5, name="below"),
            lambda i: tf.add(i, 1, name="step"),
            [i],
            name="loop",
        )

    return build


@pytest.mark.parametrize("steps", [1, 2])
def test_while_loop_body_runs_once_per_iteration(steps, tf, trace_placement):
    trace = trace_placement(_loop_builder(tf), steps=steps)
    ops = trace.ops
    # The user's "step" add, renamed by lowering (e.g. loop/body/_1/step_0).
    body = ops[ops["op"].str.contains(r"/body/.*\bstep", regex=True) & (ops["type"] == "AddV2")]
    cond = ops[ops["op"].str.contains("/cond/") & (ops["type"] == "Less")]
    assert len(body) == 1 and len(cond) == 1
    # 5 iterations: the body runs 5 times, the condition 6 times (the last says stop).
    assert body["runs"].iloc[0] == 5 * steps
    assert cond["runs"].iloc[0] == 6 * steps
    exits = ops[ops["type"] == "Exit"]
    assert len(exits) >= 1 and (exits["runs"] == steps).all()
    assert (ops["runs"].dropna() > steps).any()
    # The lowered loop's nodes are not in the graph as built; the reason says where they came from.
    assert "lowering loop" in body["reason"].iloc[0]


def _feed_builder(tf, holder=None):
    def build():
        x = tf.compat.v1.placeholder(tf.float32, [None], name="x")
        if holder is not None:
            holder[x] = [1.0, 2.0, 3.0, 4.0, 5.0]
        return tf.multiply(x, 2.0, name="y")

    return build


@pytest.mark.parametrize("key", ["x", "x:0"])
def test_feed_by_name(key, tf, trace_placement):
    trace = trace_placement(_feed_builder(tf), feed_dict={key: [1.0, 2.0, 3.0, 4.0, 5.0]})
    # The fed value really flowed: y has the fed length, 5 floats.
    assert op_row(trace, "y").output_bytes == 5 * FLOAT32
    arg = op_row(trace, "_arg_x_0_0")
    assert (arg.type, arg.how) == ("_Arg", "runtime")


def test_feed_by_tensor(tf, trace_placement):
    """The builder creates the placeholder, so it fills the feed dict it was given."""
    feeds: dict = {}
    trace = trace_placement(_feed_builder(tf, feeds), feed_dict=feeds)
    assert len(feeds) == 1
    assert op_row(trace, "y").output_bytes == 5 * FLOAT32


# -- scopes, config, fetches ------------------------------------------------------------------
def test_device_scope_wraps_the_builder(tf, trace_placement):
    def build():
        a = tf.constant(1.0, name="a")
        with tf.device(None):
            cleared = tf.constant(2.0, name="cleared")
        with tf.device("/cpu:0"):
            inner = tf.constant(3.0, name="inner")
        return a, cleared, inner

    trace = trace_placement(build, device_count=TWO_CPUS, device_scope="/cpu:1")
    a, cleared, inner = (op_row(trace, n) for n in ("a", "cleared", "inner"))
    assert (a.device, a.requested_device, a.how) == (CPU1, "/device:CPU:1", "explicit")
    assert (cleared.device, cleared.requested_device, cleared.how) == (CPU0, "", "implicit")
    assert (inner.device, inner.requested_device, inner.how) == (CPU0, "/device:CPU:0", "explicit")


def test_config_is_used_and_explicit_arguments_win(tf, trace_placement):
    config = tf.compat.v1.ConfigProto(device_count={"CPU": 2}, allow_soft_placement=False)

    def build():
        with tf.device("/cpu:7"):
            return tf.constant(1.0, name="s7")

    # device_count comes from config; soft_placement=True (the default) overrides config's False.
    trace = trace_placement(build, config=config)
    assert trace.devices == [CPU0, CPU1]
    assert op_row(trace, "s7").how == "soft"
    # The caller's config is copied, not modified.
    assert config.allow_soft_placement is False and not config.log_device_placement


def test_fetch_none_runs_every_sink(tf, trace_placement):
    def build():
        a = tf.constant([1.0, 2.0], name="a")
        tf.add(a, a, name="doubled")
        tf.identity(a, name="copied")

    trace = trace_placement(build)
    assert {"a", "doubled", "copied"} <= set(trace.events["op"])


def test_fetch_none_does_not_rerun_variable_initializers(tf, trace_placement):
    """Initializers are sinks too, but they run once before tracing, not in each step."""

    def build():
        v = tf.Variable([1.0, 2.0], name="v")
        v.assign_add([1.0, 1.0], name="bump")

    trace = trace_placement(build, steps=3)
    ran = set(trace.events["op"])
    assert op_row(trace, "bump").runs == 3
    assert not any(name.startswith(("v/Assign", "v/IsInitialized")) for name in ran), ran


def test_fetch_nested_structures_and_operations(tf, trace_placement):
    def build():
        a = tf.constant(1.0, name="a")
        b = tf.constant(2.0, name="b")
        group = tf.group(a, b, name="both")
        return {"pair": [a, (b,)], "op": group}

    trace = trace_placement(build)
    assert {"a", "b", "both"} <= set(trace.events["op"])


def test_variables_are_initialised_untraced(tf, trace_placement):
    def build():
        v = tf.Variable([1.0, 2.0, 3.0], name="v")
        return tf.identity(v.read_value(), name="r")

    trace = trace_placement(build)
    assert op_row(trace, "r").output_bytes == 3 * FLOAT32
    ran = set(trace.events["op"])
    assert not any(n.startswith(("init", "v/Assign")) for n in ran), ran


def test_default_graph_and_global_config_untouched(tf, trace_placement, seed_builders):
    outer = tf.compat.v1.get_default_graph()
    before = len(outer.get_operations())
    cpus_before = len(tf.config.list_logical_devices("CPU"))
    seen = []

    def build():
        seen.append(tf.compat.v1.get_default_graph())
        return seed_builders["inputs_none"]()

    trace_placement(build, device_count=TWO_CPUS)
    assert seen and seen[0] is not outer
    assert tf.compat.v1.get_default_graph() is outer
    assert len(outer.get_operations()) == before
    # device_count applies to the traced session only, not to TF's global configuration.
    assert len(tf.config.list_logical_devices("CPU")) == cpus_before


# -- device_of --------------------------------------------------------------------------------
def test_device_of(seed_cpu, seed_none):
    assert seed_cpu.device_of("C") == CPU1
    assert seed_cpu.device_of("A") == CPU0
    assert seed_none.device_of("A") == CPU0


def test_device_of_unknown_op_names_close_matches(seed_cpu):
    with pytest.raises(KeyError) as info:
        seed_cpu.device_of("A/shape_as_tensr")
    message = str(info.value)
    assert "A/shape_as_tensr" in message and "Close matches: A/shape_as_tensor" in message
    with pytest.raises(KeyError) as info:
        seed_cpu.device_of("no_such_op_anywhere")
    assert "Close matches" not in str(info.value)


def test_a_graphdef_keeps_the_requests_it_was_written_with(tf):
    """import_graph_def gives a colocated op its anchor's device; the facts keep the request."""
    from tfplace_widget._tfadapter.graphfacts import facts_from_graph

    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/cpu:0"):
            anchor = tf.constant(1.0, name="anchor")
        with tf.compat.v1.colocate_with(anchor.op), tf.device("/cpu:1"):
            tf.identity(anchor, name="follower")
    graph_def = graph.as_graph_def()
    graph_def.node[1].device = "/device:CPU:5"  # what a file may say: not the anchor's device
    for given in (graph_def, graph_def.SerializeToString()):
        facts = facts_from_graph(given)
        assert facts.requested["follower"] == "/device:CPU:5"
        assert facts.colocated_with["follower"] == ["anchor"]
