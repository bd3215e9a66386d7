"""Read :class:`~tfplace_widget._model.graphfacts.GraphFacts` from a ``tf.Graph`` or a ``GraphDef``,
and the predictor's node details (:func:`node_details`) from a ``GraphDef``.

The graph as built says what the executed graph no longer shows (requests, ``colocate_with``
groups, resource and ref edges, each node def's kernels); it is read here once, with
TensorFlow, into the plain facts the reasons, predictions and findings use without it.
"""

from __future__ import annotations

from itertools import compress
from typing import Any

from .._model.gc_pause import paused_gc
from .._model.graphfacts import OVERRIDE_ATTR, GraphFacts, NodeDetail, NodeTable
from .._model.records import producers
from .capture import import_tensorflow
from .kernels import kernel_facts_of
from .protos import dtype_name
from .registry import REGISTRY, may_output_resource_or_ref, op_outputs, registered_op_def

_REF_OR_RESOURCE = ("resource",)


def facts_from_graph(graph: Any, graph_def: Any = None) -> GraphFacts:
    """Read the facts from a ``tf.Graph``, a ``GraphDef`` or its serialized bytes (a file:
    ``sources.files.read_graph_file``). ``graph_def``: the ``tf.Graph``'s own
    ``as_graph_def()`` when the caller has made it already (it is not made twice)."""
    tf, _ = import_tensorflow()

    if isinstance(graph, (bytes, bytearray)):
        graph_def = tf.compat.v1.GraphDef()
        try:
            graph_def.ParseFromString(bytes(graph))
        except Exception as exc:  # google.protobuf.message.DecodeError
            raise ValueError(
                "graph bytes are not a serialized GraphDef. Pass graph.as_graph_def() or "
                "its SerializeToString(), or the tf.Graph itself."
            ) from exc
        graph = graph_def
    written = graph_def
    if isinstance(graph, tf.compat.v1.GraphDef):
        # Importing applies colocation: a colocated op's device becomes its anchor's, and the
        # request it was written with is lost. The node defs are read as written; the imported
        # graph only answers dtype questions (resource and ref edges), which the registered
        # OpDefs answer without it for most graphs (importing 100k nodes: about 6 s).
        written = graph
        outputs = _output_dtypes_by_op_defs(graph)
        if outputs is not None:
            with paused_gc():
                return _facts_from_tf_graph(None, written, outputs)
        imported = tf.Graph()
        with imported.as_default():
            tf.graph_util.import_graph_def(graph, name="")
        graph = imported
    if not isinstance(graph, tf.Graph):
        raise ValueError(
            f"graph must be a tf.Graph or a GraphDef, not {type(graph).__name__}. "
            "Pass the graph you built the ops in (e.g. sess.graph), or leave it out."
        )
    with paused_gc():
        return _facts_from_tf_graph(graph, written)


def _facts_from_tf_graph(
    graph: Any, graph_def: Any = None, outputs: dict[str, list[bool]] | None = None
) -> GraphFacts:
    """The facts of ``graph`` (a ``tf.Graph``) or, with ``outputs``
    (:func:`_output_dtypes_by_op_defs`' answer), of ``graph_def`` alone."""
    facts = GraphFacts()
    if graph_def is None:
        graph_def = graph.as_graph_def()
    overridden, colocated_with = facts.overridden, facts.colocated_with
    nodes = list(graph_def.node)  # one wrapper per node, kept for the kernel facts below
    # each node's name, type, request, producers and attrs in node order; the name-keyed
    # dicts are built from them at the end (one C loop of stores each)
    names: list[str] = []
    ops: list[str] = []
    devices: list[str] = []
    producer_lists: list[list[str]] = []
    attrs = []
    for node in nodes:
        name = node.name
        names.append(name)
        ops.append(node.op)
        devices.append(node.device)
        node_inputs = node.input[:]
        # producers(), inlined: most nodes need no per-input work
        if node_inputs and (":" in (joined := "".join(node_inputs)) or "^" in joined):
            node_inputs = producers(node_inputs)
        producer_lists.append(node_inputs)
        attr = node.attr
        attrs.append(attr)
        if OVERRIDE_ATTR in attr:
            overridden[name] = attr[OVERRIDE_ATTR].s.decode()
        if "_class" in attr:
            targets = [
                g.decode()[5:]
                for g in attr["_class"].list.s
                if g.startswith(b"loc:@") and g[5:].decode() != name
            ]
            if targets:
                colocated_with[name] = targets
    types, inputs = facts.types, facts.inputs
    types.update(zip(names, ops, strict=True))
    facts.requested.update(zip(names, devices, strict=True))
    inputs.update(zip(names, producer_lists, strict=True))
    facts.kernels = dict(zip(names, kernel_facts_of(nodes, ops, attrs), strict=True))
    # Resource/ref dtypes are not in NodeDefs: ask the Graph (or the OpDefs, ``outputs``), but
    # only about ops whose type can make a resource or ref output at all (by its OpDef), then
    # only about their consumers.
    if outputs is None:
        facts.resource_inputs.update(_resource_inputs_by_graph(graph, types, inputs))
    else:
        facts.resource_inputs.update(_resource_inputs_by_op_defs(nodes, inputs, outputs))
    facts.node_table = NodeTable(facts)
    facts.registry = REGISTRY
    return facts


def _resource_inputs_by_graph(
    graph: Any, types: dict[str, str], inputs: dict[str, list[str]]
) -> dict[str, list[str]]:
    """op -> its producers whose tensor it reads is a resource or a ref, asked of the
    ``tf.Graph`` (per distinct type, then the nodes picked at C speed: no Python call per
    node)."""
    may = {t for t in set(types.values()) if may_output_resource_or_ref(t)}
    special = set()
    for name in compress(types, map(may.__contains__, types.values())):
        op = graph.get_operation_by_name(name)
        if any(_is_resource_or_ref(t.dtype) for t in op.outputs):
            special.add(name)
    found: dict[str, list[str]] = {}
    if special:
        for name, sources in inputs.items():
            if special.isdisjoint(sources):
                continue
            op = graph.get_operation_by_name(name)
            pinned = [t.op.name for t in op.inputs if _is_resource_or_ref(t.dtype)]
            if pinned:
                found[name] = pinned
    return found


def _resource_inputs_by_op_defs(
    nodes: list[Any], inputs: dict[str, list[str]], outputs: dict[str, list[bool]]
) -> dict[str, list[str]]:
    """:func:`_resource_inputs_by_graph` from the node defs: a data input ``producer:k`` is a
    resource or a ref when the producer's output ``k`` is one (``outputs``)."""
    special = {name for name, flags in outputs.items() if any(flags)}
    found: dict[str, list[str]] = {}
    if not special:
        return found
    for node in nodes:
        if special.isdisjoint(inputs.get(node.name, ())):
            continue
        pinned = []
        for raw in node.input:
            if raw[:1] == "^":
                continue
            producer, _, index = raw.partition(":")
            flags = outputs.get(producer)
            k = int(index) if index else 0
            if flags is not None and k < len(flags) and flags[k]:
                pinned.append(producer)
        if pinned:
            found[node.name] = pinned
    return found


def _is_resource_or_ref(dtype: Any) -> bool:
    return dtype.name in _REF_OR_RESOURCE or dtype._is_ref_dtype


_DT_RESOURCE = 20  # types_pb2.DT_RESOURCE
_REF_OFFSET = 100  # a ref dtype's enum is its base type's plus 100 (types.proto)


def _output_dtypes_by_op_defs(graph_def: Any) -> dict[str, list[bool]] | None:
    """For each node whose type may output a resource or a ref (by its OpDef), whether each of
    its outputs is one, read from the node def's attrs and the registered OpDef, as importing
    the graph would type them; None when a node's outputs cannot be read so (a function of the
    graph's library, an op this TensorFlow does not register, an attr missing): then the graph
    is imported and asked."""
    answer: dict[str, list[bool]] = {}
    # per op type: its OpDef and attr defaults when it may output a resource or a ref, else None
    read: dict[str, tuple[Any, dict[str, Any]] | None] = {}
    for node in graph_def.node:
        op = node.op
        if op not in read:
            read[op] = None
            if may_output_resource_or_ref(op):
                op_def = registered_op_def(op)
                attrs = op_def.attr if op_def is not None else ()
                defaults = {a.name: a.default_value for a in attrs if a.HasField("default_value")}
                read[op] = (op_def, defaults)
        if read[op] is None:
            continue
        op_def, defaults = read[op]
        outputs = None if op_def is None else _node_outputs(node, op_def, defaults)
        if outputs is None:
            return None
        answer[node.name] = outputs
    return answer


def _node_outputs(node: Any, op_def: Any, defaults: dict[str, Any]) -> list[bool] | None:
    """Per output of ``node``: is it a resource or a ref (``op_def``'s output args, sized and
    typed by the node's attrs or the OpDef's ``defaults``, read once per op type); None when an
    attr is missing."""
    attrs = node.attr

    def attr(name: str) -> Any:
        return attrs[name] if name in attrs else defaults.get(name)

    outputs: list[bool] = []
    for arg in op_def.output_arg:
        count = 1
        if arg.number_attr:
            value = attr(arg.number_attr)
            if value is None:
                return None
            count = value.i
        if arg.type:
            types = [arg.type] * count
        elif arg.type_attr:
            value = attr(arg.type_attr)
            if value is None:
                return None
            types = [value.type] * count
        elif arg.type_list_attr:
            value = attr(arg.type_list_attr)
            if value is None:
                return None
            types = list(value.list.type)
        else:
            return None
        outputs.extend(arg.is_ref or t == _DT_RESOURCE or t > _REF_OFFSET for t in types)
    return outputs


def node_details(graph_def: Any) -> dict[str, NodeDetail]:
    """Per node of a ``GraphDef``: control inputs, output count, input tensors, dtypes (what a
    node def adds to the facts for the predictor: :class:`NodeDetail`)."""
    import_tensorflow()
    details = {}
    for node in graph_def.node:
        controls, tensors = [], []
        for raw in node.input:
            if raw[:1] == "^":
                controls.append(raw[1:])
            else:
                tensors.append(raw if ":" in raw else f"{raw}:0")
        type_names = []
        for value in node.attr.values():
            which = value.WhichOneof("value")
            if which == "type":
                type_names.append(dtype_name(value.type))
            elif which == "list" and len(value.list.type):
                type_names.extend(dtype_name(t) for t in value.list.type)
        details[node.name] = NodeDetail(
            tuple(controls),
            _output_count(node),
            tuple(tensors),
            ", ".join(dict.fromkeys(sorted(type_names))),
        )
    return details


def _output_count(node: Any) -> int | None:
    count, _, _ = op_outputs(node.op)
    if count is not None:
        return count
    op_def = registered_op_def(node.op)
    if op_def is None:
        return None
    total = 0
    for arg in op_def.output_arg:
        if arg.number_attr:
            if arg.number_attr not in node.attr:
                return None
            total += node.attr[arg.number_attr].i
        elif arg.type_list_attr:
            if arg.type_list_attr not in node.attr:
                return None
            total += len(node.attr[arg.type_list_attr].list.type)
        else:
            total += 1
    return total
