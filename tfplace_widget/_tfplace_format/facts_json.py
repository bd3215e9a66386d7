""":class:`~tfplace_widget._model.graphfacts.GraphFacts` (and function mode's ``FunctionFacts``) as
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
from itertools import chain
from typing import Any

import numpy as np
import pandas as pd

from .._model.graphfacts import GraphFacts
from .._model.kernels import GPU_KERNEL_VALUES, KernelFacts
from .._sources.limits import shown

_STRING_MAPS = ("types", "requested", "overridden", "function")
_LIST_MAPS = ("colocated_with", "resource_inputs", "inputs")


def facts_to_json(facts: GraphFacts) -> dict[str, Any]:
    """The fields of ``facts`` as a JSON-ready dict; ``TypeError`` for a facts class or field
    this format does not know (so a new field cannot be dropped silently)."""
    from .._sources.functions import CallScope, FunctionFacts

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
            table, of = _kernel_table(value)
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


def _kernel_table(kernels: dict[str, KernelFacts]) -> tuple[dict[KernelFacts, int], dict]:
    """The distinct values of ``kernels``, numbered in the order they first appear, and each
    op's number. Ops share a few hundred values, most as the same object: the objects are told
    apart by identity at C speed first, so that a ``KernelFacts`` (hashed in Python) is hashed
    once per object rather than once per op."""
    values = list(kernels.values())
    table: dict[KernelFacts, int] = {}
    if not values:
        return table, {}
    objects, _ = pd.factorize(np.fromiter(map(id, values), np.uint64, len(values)))
    # objects are numbered as they first appear: the rows where a number is first seen
    first = np.empty(len(objects), dtype=bool)
    first[0] = True
    first[1:] = objects[1:] > np.maximum.accumulate(objects)[:-1]
    numbers = np.array([table.setdefault(values[row], len(table)) for row in np.flatnonzero(first)])
    return table, dict(zip(kernels, numbers[objects].tolist(), strict=True))


# The per-op maps of a facts document that format version 3 writes as typed arrays
# (``map_arrays``), by the name they have there ("facts.<field>") and their kind.
MAPS = {
    **{f"facts.{name}": "text" for name in _STRING_MAPS},
    **{f"facts.{name}": "names" for name in (*_LIST_MAPS, "scope")},
    "facts.kernels.of": "number",
}


def take_maps(document: dict[str, Any]) -> dict[str, tuple[str, dict]]:
    """Take the per-op maps out of a :func:`facts_to_json` document: name -> (kind, map)."""
    maps = {}
    for name, kind in MAPS.items():
        holder, key = _holder(document, name)
        if isinstance(holder, dict) and key in holder:
            maps[name] = (kind, holder.pop(key))
    return maps


def put_maps(document: Any, maps: dict[str, dict]) -> None:
    """Put back into a facts document the maps :func:`take_maps` took (read from arrays)."""
    if not isinstance(document, dict):
        raise ValueError("the graph facts are not a JSON object")
    for name, value in maps.items():
        holder, key = _holder(document, name)
        if not isinstance(holder, dict):
            raise ValueError(f"graph facts field {name.split('.')[1]!r} is not an object")
        holder[key] = value


def _holder(document: dict[str, Any], name: str) -> tuple[Any, str]:
    """The object of ``document`` that holds the map ``name``, and its key there."""
    *path, key = name.split(".")[1:]
    holder: Any = document
    for step in path:
        holder = holder.get(step) if isinstance(holder, dict) else None
    return holder, key


def facts_from_json(document: Any) -> GraphFacts:
    """The facts :func:`facts_to_json` wrote; ``ValueError`` naming the field that is malformed
    (every value is type-checked: the analyses read them as they would fresh facts)."""
    from .._sources.functions import CallScope, FunctionFacts

    if not isinstance(document, dict):
        raise ValueError("the graph facts are not a JSON object")
    kind = document.get("class")
    classes = {"GraphFacts": GraphFacts, "FunctionFacts": FunctionFacts}
    cls = classes.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"the graph facts have an unknown class {shown(kind)}")
    facts = cls()
    for spec in fields(facts):
        name = spec.name
        if name not in document:
            continue  # written by a version without this field: keep the empty default
        value = document[name]
        if not isinstance(value, dict):
            raise ValueError(f"graph facts field {name!r} is not an object")
        what = f"graph facts field {name!r}"
        if name in _STRING_MAPS:
            setattr(facts, name, _text_map(value, what))
        elif name in _LIST_MAPS:
            setattr(facts, name, names_map(value, what))
        elif name == "kernels":
            facts.kernels = _kernels(value)
        elif name == "scope":
            scopes = _scopes(value, what)
            facts.scope = {op: CallScope(*s) for op, s in scopes.items()}
    return facts


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_scope(value: Any) -> bool:
    return _is_names(value) and len(value) == 3


def _is_indices(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    )


def _text_map(value: dict, what: str) -> dict[str, str]:
    """``value`` when each of its values is text (checked at C speed: 100k ops have 100k)."""
    if set(map(type, value.values())) <= {str}:
        return value
    return _checked(value, what, _is_text, "text")


def names_map(value: dict, what: str) -> dict[str, list[str]]:
    """``value`` (a JSON object: op -> names) when each of its values is a list of names;
    ``ValueError`` naming ``what`` and the first entry that is not."""
    lists = value.values()
    if set(map(type, lists)) <= {list} and set(map(type, chain.from_iterable(lists))) <= {str}:
        return value
    return _checked(value, what, _is_names, "a list of names")


def _scopes(value: dict, what: str) -> dict[str, list[str]]:
    """``value`` when each value is a [device, call, function] triple (checked at C speed)."""
    triples = value.values()
    lists = set(map(type, triples)) <= {list} and set(map(len, triples)) <= {3}
    if lists and set(map(type, chain.from_iterable(triples))) <= {str}:
        return value
    return _checked(value, what, _is_scope, "a [device, call, function] triple")


def _checked(value: dict, what: str, valid: Any, expected: str) -> dict:
    """``value`` (a JSON object), when each of its values is ``valid``; ``ValueError`` naming
    ``what`` and the first entry that is not."""
    for key, item in value.items():
        if not valid(item):
            raise ValueError(f"{what}: the entry of {key[:80]!r} is {shown(item)}, not {expected}")
    return value


_KERNEL_CHECKS = {
    "kernels": (_is_text, "text"),
    "gpu_kernel": (lambda v: isinstance(v, str) and v in GPU_KERNEL_VALUES, "a gpu_kernel value"),
    "gpu_host_inputs": (_is_indices, "a list of argument indices"),
    "gpu_host_outputs": (_is_indices, "a list of argument indices"),
    # "T=int32 Tidx=int64": KernelFacts.dtypes reads the value after each "="
    "attrs": (lambda v: _is_text(v) and all("=" in p for p in v.split()), "name=value pairs"),
}


def _kernels(value: dict) -> dict[str, KernelFacts]:
    """The ``kernels`` field: a table of distinct ``KernelFacts`` and each op's row in it."""
    names, rows, of = value["fields"], value["table"], value["of"]
    known = _is_names(names) and set(names) <= set(_KERNEL_CHECKS)
    if not known or not {"kernels", "gpu_kernel"} <= set(names):
        raise ValueError(f"graph facts field 'kernels' has the fields {shown(names)}")
    if not isinstance(rows, list) or not isinstance(of, dict):
        raise ValueError("graph facts field 'kernels' has no table of rows and ops")
    table = []
    for row in rows:
        if not isinstance(row, list) or len(row) != len(names):
            raise ValueError(f"graph facts field 'kernels' has a row {shown(row)}")
        kernel = dict(zip(names, row, strict=True))
        for field, item in kernel.items():
            valid, expected = _KERNEL_CHECKS[field]
            if not valid(item):
                raise ValueError(
                    f"graph facts field 'kernels': {field} is {shown(item)}, not {expected}"
                )
        table.append(
            KernelFacts(**{f: tuple(v) if isinstance(v, list) else v for f, v in kernel.items()})
        )
    in_table = range(len(table)).__contains__
    rows = of.values()
    if set(map(type, rows)) <= {int} and (not of or (min(rows) >= 0 and max(rows) < len(table))):
        rows_of = of  # checked at C speed: 100k ops have 100k
    else:
        rows_of = _checked(
            of, "graph facts field 'kernels'", lambda i: type(i) is int and in_table(i), "a row"
        )
    return {op: table[i] for op, i in rows_of.items()}
