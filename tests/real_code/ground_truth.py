"""TensorFlow's own word on where a program's ops ran: its placement log and partition graphs.

The program is run the way its user runs it (``fn(*args)`` in the eager runtime, or the graph
in a ``tf.compat.v1.Session``), independently of the tool, with fd 2 captured at C level (the
placer's ``name: (Type): device`` lines, the eager runtime's ``Executing op T in device D``)
and the run metadata's placed partition graphs. Grappler is off for that run, as the tool's
default (``optimize=False``) has it, so the partition graphs hold the nodes as built.

Names: the function runtime inlines nested calls (``PartitionedCall/op``) and lowers loops and
conds, numbering their bodies (``while/body/_4/while/add``); ``display_name`` drops those
``_N`` counters, as the README says the tool names them. Node defs are resolved from each
function's graph before optimisation and its library (the call, loop and branch attrs).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

_PLACER_LINE = re.compile(r"placer\.cc:\d+\] (\S+): \((\S+)\): (\S+)$")
_THREAD = re.compile(r"^\S+ \S+\s+(\d+) ")  # absl's "I0000 00:00:1796.78   23984 file:line]"
_EAGER_LINE = re.compile(r"Executing op (\S+) in device (\S+)$")
_FUNCTION = re.compile(r"^__(?:inference|forward|backward)_(.+?)_\d+$")
_BODY_COUNTER = re.compile(r"(^|/)(body|cond|then|else|branch\d+)/_\d+(?=/|$)")
_CALLS = {"PartitionedCall", "StatefulPartitionedCall"}
_WHILES = {"While", "StatelessWhile"}
_IFS = {"If", "StatelessIf"}
_CASES = {"Case", "StatelessCase"}
DT_RESOURCE = 20
# Ops that hand their inputs on unchanged: copies, Identity, and the Optional Keras's
# ``multi_step_on_iterator`` wraps its step's outputs in before returning them.
_PASS_THROUGH = {
    "Identity", "IdentityN", "_Recv", "_HostRecv", "_Send", "_HostSend", "OptionalFromValue",
}  # fmt: skip


def display_name(raw: str) -> str:
    """``while/body/_4/while/add`` -> ``while/body/while/add`` (the runtime's counters go)."""
    return _BODY_COUNTER.sub(r"\1\2", raw)


@contextlib.contextmanager
def stderr_at_fd_level() -> Iterator[list[str]]:
    """Capture what C++ writes to fd 2 in the block; the lines are in the yielded list."""
    lines: list[str] = []
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines.extend(sink.read().decode("utf-8", "replace").splitlines())


@dataclass
class Body:
    """One function body: node defs by name and the types of its arguments."""

    nodes: dict[str, Any]
    arg_types: dict[str, int]
    scope_device: str  # a tf.device on the call (or loop) that leads here
    chain: tuple[str, ...] = ()  # the functions from the graph's top down to this body


@dataclass
class NodeFact:
    """A node def as TensorFlow's graph states it, with the body it lives in."""

    node: Any
    body: Body
    prefix: str  # the display name minus the node def's own name

    @property
    def requested(self) -> str:
        return self.node.device or self.body.scope_device

    @property
    def key(self) -> tuple[str, ...]:
        """Where the node def sits, independent of how a run named it: the functions down to
        its body, then its name there (``("dense_layer", "add", "add")``)."""
        return (*self.body.chain, self.node.name)


@dataclass
class GraphTruth:
    """One placed graph (a function instantiation, an eager op, or a Session's graph)."""

    placed: dict[str, str] = field(default_factory=dict)  # display name -> device
    raw_placed: dict[str, str] = field(default_factory=dict)  # raw name -> device
    types: dict[str, str] = field(default_factory=dict)  # display name -> op type
    logged: dict[str, str] = field(default_factory=dict)  # display name -> logged device
    logged_types: dict[str, str] = field(default_factory=dict)  # display name -> logged type
    retval_fed: set[str] = field(default_factory=set)  # display names feeding a _Retval
    top: Body | None = None
    library: dict[str, Any] = field(default_factory=dict)
    eager: bool = False
    function: str = ""  # the instantiated function's display name ("" for a Session graph)
    # A Session graph: the nodes its step's fetches need (the placer places the whole graph,
    # initializers too); None for a function, all of which its call runs.
    needed: set[str] | None = None

    def fact(self, display: str) -> NodeFact | None:
        """The node def behind ``display``, or ``None`` (made by the runtime)."""
        return _resolve(display.split("/"), self.top, self.library, "") if self.top else None


def _resolve(parts: list[str], body: Body, library: dict, prefix: str) -> NodeFact | None:
    name = "/".join(parts)
    if name in body.nodes:
        return NodeFact(body.nodes[name], body, prefix)
    for end in range(len(parts) - 1, 0, -1):
        call_name = "/".join(parts[:end])
        call = body.nodes.get(call_name)
        if call is None:
            continue
        rest = parts[end:]
        function, label = _called(call, rest)
        if function is None or function not in library or not rest[label:]:
            return None
        fdef = library[function]
        inner = Body(
            {n.name: n for n in fdef.node_def},
            {a.name: a.type for a in fdef.signature.input_arg},
            call.device or body.scope_device,
            (*body.chain, function_name(function)),
        )
        inner_prefix = f"{prefix}{call_name}/{'/'.join(rest[:label])}{'/' if label else ''}"
        return _resolve(rest[label:], inner, library, inner_prefix)
    return None


def _called(call: Any, rest: list[str]) -> tuple[str | None, int]:
    """The function a functional node runs for the path ``rest`` under it, and how many of
    the path's parts name the branch (``body``, ``then``...)."""
    attr = call.attr
    if call.op in _CALLS:
        return attr["f"].func.name, 0
    kind = rest[0]
    if call.op in _WHILES and kind in ("body", "cond"):
        return attr[kind].func.name, 1
    if call.op in _IFS and kind in ("then", "else"):
        return attr[f"{kind}_branch"].func.name, 1
    if call.op in _CASES and kind.startswith("branch") and kind[6:].isdigit():
        branches = attr["branches"].list.func
        return (branches[int(kind[6:])].name if int(kind[6:]) < len(branches) else None), 1
    return None, 0


def log_blocks(lines: list[str]) -> tuple[list[dict[str, tuple[str, str]]], list[tuple]]:
    """The placer's blocks (one per graph placed: raw name -> (type, device)) and the eager
    runtime's ``(type, device)`` executions, from captured fd-2 lines."""
    blocks: list[dict[str, tuple[str, str]]] = []
    eager: list[tuple[str, str]] = []
    # Per thread: tf.data's threads place their functions while the caller's thread logs
    # its own, and the lines interleave.
    # its own, and the lines interleave. (Two graphs one thread places back to back, with no
    # other line between them and no name in common, stay one block.)
    current: dict[str, dict[str, tuple[str, str]]] = {}
    for line in lines:
        thread = _THREAD.match(line)
        tid = thread.group(1) if thread else ""
        placed = _PLACER_LINE.search(line)
        if placed:
            name, op_type, device = placed.groups()
            block = current.get(tid)
            if block is None or name in block:
                block = current[tid] = {}
                blocks.append(block)
            block[name] = (op_type, device)
            continue
        current.pop(tid, None)
        executed = _EAGER_LINE.search(line)
        if executed:
            eager.append(executed.groups())
    return blocks, eager


def function_name(name: str) -> str:
    """``__inference_dense_layer_123`` -> ``dense_layer``; ``while_body_45`` -> ``while_body``."""
    match = _FUNCTION.match(name)
    return re.sub(r"_\d+$", "", match.group(1) if match else name)


def graph_truth(
    pre_graph: Any, partition_graphs: list, eager: bool = False, function: str = ""
) -> GraphTruth:
    """A ``GraphTruth`` from a graph before optimisation and its placed partitions."""
    truth = GraphTruth(eager=eager, function=function)
    truth.top = Body({n.name: n for n in pre_graph.node}, {}, "", (function,))
    truth.library = {f.signature.name: f for f in pre_graph.library.function}
    recv_of: dict[str, str] = {}  # tensor_name -> the _Recv's display name
    sends: dict[str, str] = {}  # tensor_name -> the sent tensor's producer
    for partition in partition_graphs:
        for node in partition.node:
            display = display_name(node.name)
            truth.placed[display] = node.device
            truth.raw_placed[node.name] = node.device
            truth.types[display] = node.op
            if node.op in ("_Send", "_HostSend"):
                sends[node.attr["tensor_name"].s.decode()] = display_name(
                    node.input[0].split(":")[0]
                )
            elif node.op in ("_Recv", "_HostRecv"):
                recv_of[node.attr["tensor_name"].s.decode()] = display
    received = {recv: sends.get(tensor, "") for tensor, recv in recv_of.items()}
    inputs = {
        display_name(node.name): [display_name(i.split(":")[0]) for i in node.input if i[:1] != "^"]
        for partition in partition_graphs
        for node in partition.node
    }
    # What reaches a _Retval through copies and Identity nodes only is a result of the call.
    todo = [n for n, t in truth.types.items() if t == "_Retval"]
    while todo:
        name = todo.pop()
        for source in inputs.get(name, []):
            source = received.get(source) or source
            if source in truth.retval_fed:
                continue
            truth.retval_fed.add(source)
            if truth.types.get(source) in _PASS_THROUGH:
                todo.append(source)
    return truth


def attach_log(truths: list[GraphTruth], blocks: list[dict[str, tuple[str, str]]]) -> list[int]:
    """Give each graph the placer block that placed it (the one sharing most names); the
    indices of the blocks no recorded graph claims (graphs another runtime placed: the
    functions of ``tf.data`` transformations)."""
    claimed = set()
    for truth in truths:
        if not truth.raw_placed:
            continue
        names = set(truth.raw_placed)
        best = max(  # most names shared, then fewest names of one and not the other
            range(len(blocks)),
            key=lambda i: (len(names & set(blocks[i])), -len(names ^ set(blocks[i]))),
            default=None,
        )
        if best is None or not names & set(blocks[best]):
            continue
        claimed.add(best)
        truth.logged = {display_name(raw): device for raw, (_, device) in blocks[best].items()}
        truth.logged_types = {display_name(raw): t for raw, (t, _) in blocks[best].items()}
    return [i for i in range(len(blocks)) if i not in claimed]


@dataclass
class Run:
    """What TensorFlow said of one call: its placed graphs, eager executions, log lines, and
    the placer blocks of graphs outside the run metadata (``tf.data`` functions)."""

    truths: list[GraphTruth]
    eager_ops: list[tuple]
    lines: list[str]
    dataset_blocks: list[dict[str, tuple[str, str]]]


def run_function(call: Callable[[], Any]) -> Run:
    """Call TF2 code once as its user would, Grappler off: the graphs placed, the eager ops
    executed ``(type, device)``, the captured log lines and the unclaimed placer blocks."""
    import tensorflow as tf
    from tensorflow.python.eager import context

    ctx = context.context()
    options = dict(ctx._optimizer_experimental_options)
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    ctx.clear_kernel_cache()
    ctx.enable_run_metadata()
    try:
        with stderr_at_fd_level() as lines:
            call()
        metadata = ctx.export_run_metadata()
    finally:
        ctx.disable_run_metadata()
        ctx._optimizer_experimental_options = options
        ctx._thread_local_data.function_call_options = None
        ctx.clear_kernel_cache()
    truths = []
    names = instantiated_functions(list(metadata.function_graphs))
    for graph, name in zip(metadata.function_graphs, names, strict=True):
        pre = graph.pre_optimization_graph
        eager = _is_eager_op(pre)
        truths.append(graph_truth(pre, list(graph.partition_graphs), eager, name))
    blocks, eager_ops = log_blocks(lines)
    unclaimed = attach_log(truths, blocks)
    _call_scopes(truths, eager_ops)
    return Run(truths, eager_ops, lines, [blocks[i] for i in unclaimed])


def _call_scopes(truths: list[GraphTruth], eager_ops: list[tuple]) -> None:
    """A tf.function the user called eagerly under ``tf.device``: the runtime instantiates its
    body for that device (the log's ``Executing op __inference_f_N in device D``), which then
    stands for a request of every op without one, as a ``tf.device`` around a nested call.
    The eager default device (CPU:0 here) is no sign of a request and sets none."""
    called: dict[str, set[str]] = {}
    for op_type, device in eager_ops:
        if op_type.startswith("__inference_"):
            called.setdefault(function_name(op_type), set()).add(device)
    for truth in truths:
        devices = {d for d in truth.placed.values()}
        if truth.top is None or len(devices) != 1:
            continue
        (device,) = devices
        if device in called.get(truth.function, set()) and not device.endswith("CPU:0"):
            truth.top.scope_device = device


# Nodes of an instantiated graph that its FunctionDef does not hold: arguments and results,
# and the ``_EagerConst`` the runtime adds for an eager constant fed to the call (``model.fit``'s
# step on a ``tf.data`` iterator).
_NOT_IN_FUNCTION_DEF = ("_Arg", "_Retval", "_DeviceArg", "_EagerConst")


def instantiated_functions(function_graphs: list) -> list[str]:
    """The display name of the function each recorded graph instantiated (the eager
    context's FunctionDef with the same node names), ``""`` when none matches."""
    from tensorflow.python.eager import context

    ctx = context.context()
    known: dict[frozenset, str] = {}
    for fname in ctx.list_function_names():
        with contextlib.suppress(Exception):
            body = frozenset(n.name for n in ctx.get_function_def(fname).node_def)
            known.setdefault(body, function_name(fname))
    names = []
    for graph in function_graphs:
        nodes = graph.pre_optimization_graph.node
        body = frozenset(n.name for n in nodes if n.op not in _NOT_IN_FUNCTION_DEF)
        names.append(known.get(body, ""))
    return names


def _is_eager_op(pre_graph: Any) -> bool:
    """An op the eager runtime ran on its own: its graph's nodes are named after their types
    (``MatMul``, ``_MklMatMul``), besides the arguments and results."""
    users = [n for n in pre_graph.node if n.op not in ("_Arg", "_Retval", "_DeviceArg")]
    return not pre_graph.library.function and all(n.name == n.op for n in users)


def run_graph(builder: Callable[[], Any], cpus: int) -> Run:
    """Build the graph and run one step in a Session with ``cpus`` CPUs and the placement log
    on (``ConfigProto(log_device_placement=True)``), Grappler off."""
    import tensorflow as tf
    from tensorflow.core.protobuf import rewriter_config_pb2

    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        fetches = builder()
        init = [v1.global_variables_initializer(), v1.local_variables_initializer()]
    config = v1.ConfigProto(
        log_device_placement=True, allow_soft_placement=True, device_count={"CPU": cpus}
    )
    # The graph as built: no Grappler, and none of the Session's own graph optimizer either.
    config.graph_options.optimizer_options.opt_level = v1.OptimizerOptions.L0
    config.graph_options.optimizer_options.do_constant_folding = False
    config.graph_options.optimizer_options.do_function_inlining = False
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.graph_options.rewrite_options.constant_folding = rewriter_config_pb2.RewriterConfig.OFF
    metadata = v1.RunMetadata()
    with stderr_at_fd_level() as lines, v1.Session(graph=graph, config=config) as session:
        session.run(init)
        session.run(
            fetches,
            options=v1.RunOptions(output_partition_graphs=True),
            run_metadata=metadata,
        )
    truth = graph_truth(graph.as_graph_def(), list(metadata.partition_graphs))
    truth.needed = _needed(graph.as_graph_def(), fetches)
    blocks, _ = log_blocks(lines)
    attach_log([truth], blocks)
    return Run([truth], [], lines, [])


def _needed(graph_def: Any, fetches: Any) -> set[str]:
    """The nodes a Session run of ``fetches`` needs: the fetches and everything they depend
    on, through data and control inputs."""
    import tensorflow as tf

    inputs = {n.name: [i.lstrip("^").split(":")[0] for i in n.input] for n in graph_def.node}
    todo = [getattr(f, "op", f).name for f in tf.nest.flatten(fetches)]
    needed: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo.extend(inputs.get(name, []))
    return needed


def produces_resource(raw_input: str, body: Body) -> bool:
    """Whether a node def's input (GraphDef or FunctionDef spelling) carries a resource."""
    from tensorflow.python.framework import op_def_registry

    source, _, rest = raw_input.lstrip("^").partition(":")
    if source in body.arg_types:
        return body.arg_types[source] == DT_RESOURCE
    producer = body.nodes.get(source)
    if producer is None:
        return False
    if producer.op in ("_Arg", "Placeholder", "VarHandleOp"):
        attr = producer.attr
        return producer.op == "VarHandleOp" or any(
            key in attr and attr[key].type == DT_RESOURCE for key in ("T", "dtype")
        )
    try:
        op_def = op_def_registry.get(producer.op)
    except Exception:
        return False
    if op_def is None:
        return False
    # GraphDef spelling: "op:3", the 4th output overall; FunctionDef: "op:out_arg:3".
    parts = rest.split(":") if rest else ["0"]
    named = None if parts[0].isdigit() else parts[0]
    index = int(parts[-1]) if parts[-1].isdigit() else 0
    outputs: list[int] = []
    for arg in op_def.output_arg:
        types = _output_types(arg, producer.attr)
        if named is not None and arg.name == named:
            return index < len(types) and types[index] == DT_RESOURCE
        outputs += types
    return named is None and index < len(outputs) and outputs[index] == DT_RESOURCE


def _output_types(arg: Any, attr: Any) -> list[int]:
    """The dtypes an OpDef output arg stands for in this node (a list arg: several)."""
    if arg.type_list_attr:
        return list(attr[arg.type_list_attr].list.type) if arg.type_list_attr in attr else []
    dtype = arg.type or (attr[arg.type_attr].type if arg.type_attr in attr else 0)
    count = attr[arg.number_attr].i if arg.number_attr and arg.number_attr in attr else 1
    return [dtype] * count
