""":class:`~tfplace_widget.graphfacts.GraphFacts` (and function mode's ``FunctionFacts``) as
JSON, field by field.

Why the fields and not the graph they were read from: facts of TF2 code come from the placed
function graphs *and* the eager context's function library of the process that ran them (which
names each function), so they cannot be rebuilt from saved bytes alone; and fields need no
TensorFlow to read back, give exactly the same findings and predictions, and load in
milliseconds. The raw protos are saved beside them all the same (``raw/``), for a later
version that wants to re-derive more. ``KernelFacts`` are stored once per distinct value (a
100k-node graph has a few hundred) and referenced by number.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from ..analyses.kernels import KernelFacts
from ..graphfacts import GraphFacts

_STRING_MAPS = ("types", "requested", "overridden", "function")
_LIST_MAPS = ("colocated_with", "resource_inputs", "inputs")


def facts_to_json(facts: GraphFacts) -> dict[str, Any]:
    """The fields of ``facts`` as a JSON-ready dict; ``TypeError`` for a facts class or field
    this format does not know (so a new field cannot be dropped silently)."""
    from ..sources.functions import CallScope, FunctionFacts

    kind = type(facts).__name__
    if type(facts) not in (GraphFacts, FunctionFacts):
        raise TypeError(
            f"Cannot save graph facts of type {kind}: only GraphFacts and FunctionFacts."
        )
    out: dict[str, Any] = {"class": kind}
    for spec in fields(facts):
        name, value = spec.name, getattr(facts, spec.name)
        if name in _STRING_MAPS or name in _LIST_MAPS:
            out[name] = value
        elif name == "kernels":
            table: dict[KernelFacts, int] = {}
            of = {op: table.setdefault(k, len(table)) for op, k in value.items()}
            out[name] = {
                "table": [[getattr(k, f.name) for f in fields(KernelFacts)] for k in table],
                "fields": [f.name for f in fields(KernelFacts)],
                "of": of,
            }
        elif name == "scope":
            out[name] = {
                op: [s.device, s.call, s.function]
                for op, s in value.items()
                if isinstance(s, CallScope)
            }
        else:
            raise TypeError(
                f"Cannot save the graph-facts field {name!r}: this format does not know it."
            )
    return out


def facts_from_json(document: Any) -> GraphFacts:
    """The facts :func:`facts_to_json` wrote; ``ValueError`` naming what is malformed."""
    from ..sources.functions import CallScope, FunctionFacts

    if not isinstance(document, dict):
        raise ValueError("the graph facts are not a JSON object")
    kind = document.get("class")
    cls = {"GraphFacts": GraphFacts, "FunctionFacts": FunctionFacts}.get(kind)
    if cls is None:
        raise ValueError(f"the graph facts have an unknown class {kind!r}")
    facts = cls()
    for spec in fields(facts):
        name = spec.name
        if name not in document:
            continue  # written by a version without this field: keep the empty default
        value = document[name]
        if not isinstance(value, dict):
            raise ValueError(f"graph facts field {name!r} is not an object")
        if name in _STRING_MAPS:
            setattr(facts, name, {str(k): str(v) for k, v in value.items()})
        elif name in _LIST_MAPS:
            setattr(facts, name, {str(k): [str(x) for x in v] for k, v in value.items()})
        elif name == "kernels":
            names = value["fields"]
            table = [
                KernelFacts(
                    **{
                        f: tuple(v) if isinstance(v, list) else v
                        for f, v in zip(names, row, strict=True)
                    }
                )
                for row in value["table"]
            ]
            facts.kernels = {str(op): table[i] for op, i in value["of"].items()}
        elif name == "scope":
            facts.scope = {str(op): CallScope(*map(str, s)) for op, s in value.items()}
    return facts
