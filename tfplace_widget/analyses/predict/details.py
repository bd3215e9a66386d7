"""Node details beyond GraphFacts (control edges, output counts, attrs), from a GraphDef.

What a node def adds for the placer (control edges, output counts) and for the reasons
(dtypes). Moved out of the former ``analyses/predict.py`` unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...tfadapter.capture import import_tensorflow
from ...tfadapter.protos import dtype_name
from ...tfadapter.registry import op_outputs, registered_op_def


@dataclass(frozen=True)
class NodeDetail:
    """What a node def adds to :class:`GraphFacts` for the placer and for the reasons."""

    controls: tuple[str, ...] = ()
    outputs: int | None = None  # number of outputs, when known
    input_tensors: tuple[str, ...] = ()  # data inputs as "op:slot"
    dtypes: str = ""  # the node's type attrs, e.g. "int32"


def node_details(graph_def: Any) -> dict[str, NodeDetail]:
    """Per node of a ``GraphDef``: control inputs, output count, input tensors, dtypes."""
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
