"""TF2 function mode: the placed graphs of instantiated ``tf.function``s, as the user wrote them.

``RunMetadata.function_graphs`` (``context.enable_run_metadata()``) holds, per instantiated
function, the graph before optimisation (what the function asked for: its ``FuncGraph`` node
defs and the library of nested functions and loop bodies) and the placed partition graphs
(where every node ran). The runtime inlines nested calls and lowers ``while``/``cond``/``case``
into primitive ops, naming them ``call/op``, ``while/body/_9/while/add`` or
``cond/then/_3/cond/add``; the ``_N`` numbers change from run to run. This module maps every
executed node back to the node def it came from and reads its request, colocation and resource
edges from that node def, so the same :class:`~tfplace_widget._explain.Explainer` rules apply as
in graph mode. One rule names every executed node, the body's ops and the runtime's plumbing
around them alike: the ``_N`` after a ``body``/``cond``/``then``/``else``/``branch<k>`` segment
(which inlined instance) is dropped, so ``while/body/_9/while/add`` is ``while/body/while/add``
and its input ``Func/while/body/_9/input/_23`` is ``Func/while/body/input/_23`` (a trailing
``/_N``, a runtime node's own number, stays: it tells the loop's inputs apart).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._model.devices import canonical_device
from .._model.graphfacts import OVERRIDE_ATTR, GraphFacts
from .._model.records import (
    SEND_TYPES,
    Executed,
    HandedVariable,
    producer,
    producers,
    send_transfer,
)
from .._tfadapter.kernels import kernel_facts
from .._tfadapter.registry import REGISTRY, registered_op_def
from .onednn import MERGED_TYPES, onednn_merges
from .persistent import variable_bytes
from .replicated import PlacementLog, placed_device, replicas_of

_CALL_TYPES = {"PartitionedCall", "StatefulPartitionedCall"}
_WHILE_TYPES = {"While", "StatelessWhile"}
_IF_TYPES = {"If", "StatelessIf"}
_CASE_TYPES = {"Case", "StatelessCase"}
_COUNTER = re.compile(r"_\d+$")
# The inlined instance's number after a body or branch segment, wherever it is in a name.
_INSTANCE = re.compile(r"(?<=/)(body|cond|then|else|branch\d+)/_\d+(?=/|$)")
_FUNCTION_NAME = re.compile(r"^__(?:inference|forward|backward)_(.+?)_\d+$")


@dataclass
class CallScope:
    """A request that reached a body op from the call (or loop) around it, not its own."""

    device: str  # the request, as written on the call node
    call: str  # the call node's display name
    function: str  # the called function's display name


@dataclass
class FunctionFacts(GraphFacts):
    """:class:`GraphFacts` of the node defs that ran, plus where each belongs."""

    # display name -> the tf.function it belongs to (display name of the innermost function)
    function: dict[str, str] = field(default_factory=dict)
    # display name -> the call scope whose tf.device gave it its request
    scope: dict[str, CallScope] = field(default_factory=dict)


@dataclass
class _Body:
    """One function body: its node defs by name, and how its inputs name producers."""

    nodes: dict[str, Any]
    function: str  # display name of the tf.function this body belongs to
    library: dict[str, Any]
    arg_types: dict[str, int] = field(default_factory=dict)  # FunctionDef input args
    definition: str | None = None  # its FunctionDef's name (None where not known)


def function_display_name(name: str) -> str:
    """``__inference_train_step_123`` -> ``train_step``; other names are kept."""
    match = _FUNCTION_NAME.match(name)
    return match.group(1) if match else name


def entry_arity(entry: Any) -> int:
    """How many inputs the function a ``function_graphs`` entry instantiated takes: its
    partition graphs' ``_Arg`` indices (a function's own; those of functions it calls are
    inlined away). A pre-optimization graph may hold other functions' nodes too."""
    return len(
        {n.attr["index"].i for g in entry.partition_graphs for n in g.node if n.op == "_Arg"}
    )


def rejoin_split_records(function_graphs: Iterable[Any]) -> list:
    """The entries of ``RunMetadata.function_graphs``, one per instantiation again.

    TensorFlow's eager context has one graph collector. Instantiating a function fills it: the
    graph before optimisation first (``CollectRawGraph``), the placed partition graphs last;
    whichever thread next finishes an eager kernel while run metadata is on empties it into a
    new entry (``CollectGraphs`` in ``EagerKernelExecute``). An op run eagerly on another
    thread while a function is being instantiated (a ``tf.py_function`` of a ``tf.data`` map,
    a thread of the user's) so cuts that function's record in two: its graph before
    optimisation in one entry, its partition graphs in a later one with an empty graph before
    optimisation, which reads as an op run eagerly, the whole function with it. Such an entry
    goes back into the instantiation it cut: the last entry before it with nodes before
    optimisation that no partition graph holds yet (else the last with any), its optimised
    graph merged there and its partition graphs appended. Entries are changed in place.
    """
    joined: list = []
    heads: list[list] = []  # [entry, unplaced or None (not known yet)], in order
    for entry in function_graphs:
        if len(entry.pre_optimization_graph.node):
            joined.append(entry)
            heads.append([entry, None])
            continue
        if not heads:
            joined.append(entry)
            continue
        for head in reversed(heads):
            if head[1] is None:
                head[1] = _unplaced(head[0])
            if head[1]:
                break
        else:
            head = heads[-1]
        head[0].post_optimization_graph.MergeFrom(entry.post_optimization_graph)
        head[0].partition_graphs.extend(entry.partition_graphs)
        head[1] = None
    return joined


def _unplaced(entry: Any) -> bool:
    """Whether a node of the entry's graph before optimisation is in none of its partition
    graphs, by its name or as the scope of nodes inlined from it (``call/op``)."""
    placed: set[str] = set()
    for partition in entry.partition_graphs:
        for node in partition.node:
            parts = node.name.split("/")
            placed.update("/".join(parts[:end]) for end in range(1, len(parts) + 1))
    return any(node.name not in placed for node in entry.pre_optimization_graph.node)


def read_function_graphs(
    function_graphs: Sequence[Any],
    names: Sequence[str],
    scope_device: str = "",
    *,
    last: int | None = None,
    renamed_out: list[dict[str, str]] | None = None,
    placement_log: str = "",
    definitions: Sequence[str | None] = (),
    handles: Sequence[Sequence[HandedVariable | None]] = (),
) -> tuple[Executed, FunctionFacts, dict[str, str]]:
    """The executed graph, the node facts, and executed name -> display name, of every
    instantiated function.

    ``names[i]`` is the display name of ``function_graphs[i]``'s function (``"eager"`` for a
    single op run eagerly). ``scope_device`` is an outer ``tf.device`` around the whole call.
    A node name used by two functions is prefixed with the later function's name; the
    profiler names executions by executed name only, so those go to the first function.
    Entries from index ``last`` on (the input pipeline's functions) come after the others,
    whatever their size; ``renamed_out``, when given, receives per entry (in input order)
    executed name -> display name. ``placement_log``: what TensorFlow printed during the calls
    (its placer's lines, when the user turned the log on: ``sources.replicated``).
    Each node made from a node def is recorded in ``Executed.made_by`` (where its stack is:
    ``tfadapter.origins``), with the FunctionDef name ``definitions[i]`` for entry ``i``'s own
    node defs (None when not given).
    ``handles[i][k]``: the variable whose handle entry ``i``'s call gave as its input ``k``
    (None for another input or when not known), for ``Executed.variable_of`` and
    ``Executed.variable_name`` (a name only where the variable's size is the ``_Arg``'s: the
    call and the graph are the same function's).
    """
    executed = Executed()
    log = PlacementLog(placement_log)
    facts = FunctionFacts()
    facts.registry = REGISTRY  # the kernel facts below are this process's registry's
    display_of: dict[str, str] = {}
    canonical: dict[str, str] = {}
    # Named functions first, largest first, so the step the user asked about keeps the plain
    # names; ops run eagerly (one small graph each) are named eager/<op>.
    later = len(names) if last is None else last
    order = sorted(
        range(len(names)),
        key=lambda i: (
            i >= later,
            names[i] == "eager",
            -len(function_graphs[i].pre_optimization_graph.node),
        ),
    )
    renamed_of: dict[int, dict[str, str]] = {}
    for index in order:
        graph, function = function_graphs[index], names[index]
        eager = function == "eager"
        pre = graph.pre_optimization_graph
        library = {f.signature.name: f for f in pre.library.function}
        definition = definitions[index] if index < len(definitions) else None
        top = _Body({n.name: n for n in pre.node}, function, library, definition=definition)
        renamed: dict[str, str] = renamed_of.setdefault(index, {})
        inputs = handles[index] if index < len(handles) else ()
        for partition in graph.partition_graphs:
            for node in partition.node:
                origin = _resolve(node.name, top, "" if eager else scope_device)
                wanted = f"eager/{node.name}" if eager else without_instances(node.name)
                display = _unique(wanted, function, executed.device)
                renamed[node.name] = display
                device = canonical.get(node.device)
                if device is None:
                    device = canonical[node.device] = canonical_device(node.device)
                executed.device[display] = device
                executed.type[display] = node.op
                if node.op == "_Arg" and not eager and (held := variable_bytes(node)):
                    executed.variables[display] = held  # a variable the function captured
                    position = node.attr["index"].i if "index" in node.attr else -1
                    if 0 <= position < len(inputs) and inputs[position] is not None:
                        executed.variable_of[display] = inputs[position].identity
                        if inputs[position].name and inputs[position].bytes == held:
                            executed.variable_name[display] = inputs[position].name
                if "fused_ops" in node.attr:
                    executed.fused[display] = [f.decode() for f in node.attr["fused_ops"].list.s]
                if origin is not None:
                    _add_facts(facts, display, origin, display[: len(display) - len(wanted)])
                    executed.made_by[display] = (origin.body.definition, origin.node.name)
                    if eager:  # the eager runtime, not the user, set its device
                        facts.requested[display] = ""
                        facts.scope[display] = CallScope("", "", "eager")
                executed.function[display] = origin.body.function if origin else function
        for partition in graph.partition_graphs:
            for node in partition.node:
                display = renamed[node.name]
                executed.inputs[display] = [
                    renamed.get(producer(i), producer(i)) for i in node.input if i[:1] != "^"
                ]
                if node.op in SEND_TYPES:
                    tensor, src, dst = send_transfer(node)
                    head, _, slot = tensor.rpartition(":")
                    executed.transfers.append((f"{renamed.get(head, head)}:{slot}", src, dst))
        _add_merged(graph, renamed, top, function, scope_device, executed, facts)
        _add_replicated(graph, renamed, top, (function, scope_device), executed, facts, log)
        _alias_fact_inputs(facts, renamed)
        for name, display in renamed.items():
            display_of.setdefault(name, display)
    facts.function.update(executed.function)
    if renamed_out is not None:
        renamed_out.extend(renamed_of[index] for index in range(len(names)))
    return executed, facts, display_of


def _alias_fact_inputs(facts: FunctionFacts, renamed: dict[str, str]) -> None:
    """Point the facts' edges of one function graph at its ops' display names. ``_add_facts``
    spells an input by the consumer's own display prefix, which is the producer's only when
    both or neither were renamed for a name another function has (``_unique``): a map
    function's ``truediv`` reads its own ``Cast``, shown as ``Dataset_map_lambda/Cast`` beside
    the step's ``Cast``, not the step's."""
    alias = {without_instances(name): display for name, display in renamed.items()}
    if all(alias.get(path) == path for path in alias):
        return  # nothing renamed: every edge is spelt as shown
    for name, display in renamed.items():
        wanted = without_instances(name)
        prefix = display[: len(display) - len(wanted)]
        for edges in (facts.inputs, facts.resource_inputs, facts.colocated_with):
            names = edges.get(display)
            if names:
                edges[display] = [
                    alias.get(n[len(prefix) :] if n.startswith(prefix) else n, n) for n in names
                ]


def _add_merged(
    graph: Any,
    renamed: dict[str, str],
    top: _Body,
    function: str,
    scope_device: str,
    executed: Executed,
    facts: FunctionFacts,
) -> None:
    """The placed ops oneDNN merged into a kernel after placement (``sources.onednn``): the
    graph after placement (``post_optimization_graph``) has them, the partitions do not."""
    placed = graph.post_optimization_graph.node
    # One pass over the placed graph's types; the rest only where an op went missing.
    if not any(n.op in MERGED_TYPES and n.name not in renamed for n in placed):
        return
    ran = [node for partition in graph.partition_graphs for node in partition.node]
    by_name = {n.name: n for n in placed}
    merged = onednn_merges(
        {n.name: n.op for n in placed},
        {n.name: producers(n.input[:]) for n in placed},
        {n.name: n.op for n in ran},
        {n.name: producers(n.input[:]) for n in ran},
    )
    for name, kernel in merged.items():
        origin = _resolve(name, top, scope_device)
        if origin is None:  # not a node def of the function: leave it out
            continue
        node = by_name[name]
        wanted = without_instances(name)
        display = _unique(wanted, function, executed.device)
        executed.device[display] = canonical_device(node.device)
        executed.type[display] = node.op
        executed.inputs[display] = [renamed.get(i, i) for i in producers(node.input[:])]
        executed.function[display] = origin.body.function
        executed.merged[display] = renamed[kernel]
        _add_facts(facts, display, origin, display[: len(display) - len(wanted)])
        executed.made_by[display] = (origin.body.definition, origin.node.name)


def _add_replicated(
    graph: Any,
    renamed: dict[str, str],
    top: _Body,
    call: tuple[str, str],
    executed: Executed,
    facts: FunctionFacts,
    log: PlacementLog,
) -> None:
    """The constants ReplicateConstantsPass replaced by per-device copies after placement
    (``sources.replicated``): each is recorded with its copies and its node def's facts, and
    has a row on the device the placer's log gives it when TensorFlow printed one."""
    if not any("/replicate/_" in name for name in renamed):
        return
    ran = {n.name: n.op for p in graph.partition_graphs for n in p.node}
    function, scope_device = call
    origins: dict[str, Any] = {}

    def built_type(name: str) -> str:
        if name not in origins:
            origins[name] = _resolve(name, top, scope_device)
        return origins[name].node.op if origins[name] is not None else ""

    names = [n.name for n in graph.post_optimization_graph.node]
    for name, copies in replicas_of(ran, built_type).items():
        origin = origins[name]
        wanted = without_instances(name)
        device = placed_device(name, origin.node.op, log.blocks, names)
        display = _unique(wanted, function, executed.device)
        executed.replicated[display] = [renamed[c] for c in copies]
        # Its node def is a fact of the graph as built either way (a prediction places it).
        _add_facts(facts, display, origin, display[: len(display) - len(wanted)])
        if device:
            executed.device[display] = device
            executed.type[display] = origin.node.op
            executed.inputs[display] = []
            executed.function[display] = origin.body.function
            executed.made_by[display] = (origin.body.definition, origin.node.name)


def without_instances(name: str) -> str:
    """``name`` without the numbers of inlined bodies and branches: ``while/body/_9/while/add``
    -> ``while/body/while/add``, ``Func/while/body/_9/input/_23`` ->
    ``Func/while/body/input/_23`` (the one naming rule of function mode)."""
    return _INSTANCE.sub(r"\1", name) if "/_" in name else name


def _unique(name: str, function: str, taken: dict[str, str]) -> str:
    """``name``, or ``function/name`` (then ``_1``, ``_2``...) when another function has it."""
    if name not in taken:
        return name
    candidate = name if name.startswith(f"{function}/") else f"{function}/{name}"
    serial = 0
    while candidate in taken:
        serial += 1
        candidate = f"{function}/{name}_{serial}"
    return candidate


@dataclass
class _Origin:
    """Where an executed node came from: its node def and its body."""

    node: Any
    body: _Body
    scope: CallScope | None


def _resolve(name: str, body: _Body, scope_device: str, outer: CallScope | None = None) -> Any:
    """The node def behind executed node ``name`` of ``body``, or ``None`` (runtime-made)."""
    scope = outer or (CallScope(scope_device, "", body.function) if scope_device else None)
    node = body.nodes.get(name)
    if node is not None:
        return _Origin(node, body, scope)
    parts = name.split("/")
    for end in range(len(parts) - 1, 0, -1):
        call_name = "/".join(parts[:end])
        call = body.nodes.get(call_name)
        if call is None:
            continue
        found = _enter(call, parts[end:])
        if found is None:
            return None
        function_name, rest = found
        inner = body.library.get(function_name)
        if inner is None:
            return None
        is_call = call.op in _CALL_TYPES
        inner_body = _Body(
            {n.name: n for n in inner.node_def},
            function_display_name(function_name) if is_call else body.function,
            body.library,
            {a.name: a.type for a in inner.signature.input_arg},
            definition=function_name,
        )
        inner_scope = scope
        if call.device:
            inner_scope = CallScope(call.device, call_name, inner_body.function)
        return _resolve("/".join(rest), inner_body, "", inner_scope)
    return None


def _enter(call: Any, rest: list[str]) -> tuple[str, list[str]] | None:
    """``(function, path inside it)`` for a path under a functional node."""
    attr = call.attr
    if call.op in _CALL_TYPES:
        return attr["f"].func.name, rest
    if len(rest) < 3 or not _COUNTER.fullmatch(rest[1]):
        return None
    kind = rest[0]
    if call.op in _WHILE_TYPES and kind in ("body", "cond"):
        return attr[kind].func.name, rest[2:]
    if call.op in _IF_TYPES and kind in ("then", "else"):
        return attr[f"{kind}_branch"].func.name, rest[2:]
    if call.op in _CASE_TYPES and kind.startswith("branch") and kind[6:].isdigit():
        branches = attr["branches"].list.func
        index = int(kind[6:])
        if index < len(branches):
            return branches[index].name, rest[2:]
    return None


def _add_facts(facts: FunctionFacts, display: str, origin: _Origin, prefix: str) -> None:
    """Record the node def's type, request, colocation and resource edges under ``display``."""
    node, body = origin.node, origin.body
    scope_prefix = prefix + display[len(prefix) : len(display) - len(origin.node.name)]
    facts.types[display] = node.op
    request = node.device
    if not request and origin.scope is not None and origin.scope.device:
        request = origin.scope.device
        facts.scope[display] = origin.scope
    facts.requested[display] = request
    facts.kernels[display] = kernel_facts(node)
    if OVERRIDE_ATTR in node.attr:
        facts.overridden[display] = node.attr[OVERRIDE_ATTR].s.decode()
    inputs = []
    pinned = []
    for raw in node.input:
        if raw[:1] == "^":
            continue
        source = raw.split(":", 1)[0]
        inputs.append(scope_prefix + source if source in body.nodes else source)
        if _produces_resource(raw, body):
            pinned.append(scope_prefix + source if source in body.nodes else source)
    facts.inputs[display] = inputs
    if pinned:
        facts.resource_inputs[display] = pinned
    if "_class" in node.attr:
        targets = [
            scope_prefix + g.decode()[5:]
            for g in node.attr["_class"].list.s
            if g.startswith(b"loc:@") and g[5:].decode() != node.name
        ]
        if targets:
            facts.colocated_with[display] = targets


_DT_RESOURCE = 20


def _produces_resource(raw_input: str, body: _Body) -> bool:
    """True when the input ``raw_input`` (GraphDef or FunctionDef spelling) is a resource."""
    source, _, rest = raw_input.partition(":")
    if source in body.arg_types:
        return body.arg_types[source] == _DT_RESOURCE
    producer_def = body.nodes.get(source)
    if producer_def is None:
        return False
    if producer_def.op in ("_Arg", "Placeholder"):
        attr = producer_def.attr
        return any(key in attr and attr[key].type == _DT_RESOURCE for key in ("T", "dtype"))
    return _output_is_resource(producer_def, rest)


def _output_is_resource(node: Any, rest: str) -> bool:
    """Whether the output ``rest`` of ``node`` is a resource, by its OpDef and attrs. FunctionDef
    inputs say ``op:arg:index`` (the index within that arg); GraphDef ones ``op:index`` (over
    all outputs); ``op`` alone is output 0. A While's variant output is not its resource one."""
    op_def = registered_op_def(node.op)
    if op_def is None:
        return False
    head, _, tail = rest.partition(":")
    named, digits = (head, tail) if head and not head.isdigit() else (None, head)
    index = int(digits) if digits.isdigit() else 0
    position = 0
    for arg in op_def.output_arg:
        types = _arg_types(node, arg)
        if named is not None:
            if arg.name == named:
                return index < len(types) and types[index] == _DT_RESOURCE
        elif index < position + len(types):
            return types[index - position] == _DT_RESOURCE
        position += len(types)
    return False


def _arg_types(node: Any, arg: Any) -> list[int]:
    """The dtypes an output arg of ``node`` expands to (a type list, or N copies of one)."""
    attr = node.attr
    if arg.type_list_attr:
        return list(attr[arg.type_list_attr].list.type) if arg.type_list_attr in attr else []
    dtype = arg.type or (attr[arg.type_attr].type if arg.type_attr in attr else 0)
    count = attr[arg.number_attr].i if arg.number_attr and arg.number_attr in attr else 1
    return [dtype] * count
