"""``overrides=``: ask for other devices without editing the code, as if it had said ``tf.device``.

``{"C": "/cpu:0", "tower_1/*": "/gpu:1"}`` sets the requested device of every op whose name is
``C`` or matches the glob ``tower_1/*``, before the placer runs: in graph mode on the built
graph, in function mode on the FunctionDefs the call instantiates (on the copies of them that
the traced calls run, ``function_copies``; the user's own stay as they are). Each overridden
node def also gets the attr ``_tfplace_override`` (the pattern), so the graph facts, and the
``reason`` column, can say where its request came from. A request for a device that does not exist follows soft placement
like any other.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterable, Mapping
from typing import Any

from .._model.devices import parse_device
from .._model.graphfacts import OVERRIDE_ATTR


def check_overrides(overrides: Any) -> dict[str, str]:
    """``overrides`` as a plain dict, or ``TypeError``/``ValueError`` naming what is wrong."""
    if overrides is None:
        return {}
    if not isinstance(overrides, Mapping):
        raise TypeError(
            "overrides must be a dict from op name (or glob, e.g. 'tower_1/*') to device, "
            f"e.g. {{'C': '/cpu:0'}}, not {type(overrides).__name__}."
        )
    checked = {}
    for pattern, device in overrides.items():
        if not isinstance(pattern, str) or not pattern:
            raise TypeError(f"overrides keys are op names or globs, not {pattern!r}.")
        if not isinstance(device, str):
            raise TypeError(
                f"overrides[{pattern!r}] must be a device string such as '/cpu:0', not "
                f"{type(device).__name__}."
            )
        try:
            parse_device(device)
        except ValueError as exc:
            raise ValueError(f"overrides[{pattern!r}]: {exc}") from None
        checked[pattern] = device
    return checked


def matches(pattern: str, name: str) -> bool:
    """An exact name, or a glob (``*``, ``?``, ``[...]``) over the whole name, case-sensitive."""
    return name == pattern or fnmatch.fnmatchcase(name, pattern)


def override_for(name: str, overrides: Mapping[str, str]) -> tuple[str, str] | None:
    """``(pattern, device)`` of the last pattern matching ``name`` (later entries win)."""
    found = None
    for pattern, device in overrides.items():
        if matches(pattern, name):
            found = (pattern, device)
    return found


def unmatched_error(patterns: Iterable[str], names: list[str], where: str) -> ValueError:
    """The error for patterns that matched no op, with the closest op names."""
    lines = []
    for pattern in patterns:
        close = difflib.get_close_matches(pattern, names, n=3, cutoff=0.5)
        hint = f" (closest: {', '.join(map(repr, close))})" if close else ""
        lines.append(f"{pattern!r}{hint}")
    return ValueError(
        f"overrides matched no op {where}: {'; '.join(lines)}. Use an op name as trace.ops "
        "shows it, or a glob such as 'scope/*'."
    )


def _canonical(device: str) -> str:
    """The device as ``tf.device`` writes it into a node def (``/cpu:0`` -> ``/device:CPU:0``)."""
    import tensorflow as tf

    return tf.DeviceSpec.from_string(device).to_string()


def _mark(node_def: Any, pattern: str, device: str) -> None:
    node_def.device = _canonical(device)
    node_def.attr[OVERRIDE_ATTR].s = pattern.encode()


def apply_to_graph(graph: Any, overrides: Mapping[str, str]) -> None:
    """Set the requested device of the matching ops of a built ``tf.Graph``."""
    if not overrides:
        return
    from tensorflow.core.framework import attr_value_pb2

    used = set()
    names = []
    for op in graph.get_operations():
        names.append(op.name)
        found = override_for(op.name, overrides)
        if found is None:
            continue
        pattern, device = found
        used.add(pattern)
        op._set_device(_canonical(device))  # what tf.device does for an op built under it
        op._set_attr(OVERRIDE_ATTR, attr_value_pb2.AttrValue(s=pattern.encode()))
    missing = [p for p in overrides if p not in used]
    if missing:
        raise unmatched_error(missing, names, "in the built graph")


def override_function_defs(
    fdefs: list[Any], overrides: Mapping[str, str], xla_fdefs: Iterable[Any] = ()
) -> None:
    """Set the requested device of the matching nodes of these FunctionDefs (every function the
    call instantiates, nested ones included: function mode's copies of them, which the traced
    calls run), or ``ValueError`` when a pattern matches none of their nodes; ``xla_fdefs``
    (the functions XLA compiles, never rewritten) name the patterns that match only there."""
    used = set()
    names = []
    prefixes = _inlined_prefixes(fdefs)
    for fdef in fdefs:
        for node in fdef.node_def:
            spelled = [node.name] + [p + node.name for p in prefixes.get(fdef.signature.name, ())]
            names += spelled
            found = next(filter(None, (override_for(n, overrides) for n in spelled)), None)
            if found is not None:
                used.add(found[0])
                _mark(node, *found)
    missing = [p for p in overrides if p not in used]
    for fdef in xla_fdefs:
        inside = [p for p in missing if any(matches(p, n.name) for n in fdef.node_def)]
        if inside:
            raise _inside_xla_error(inside, fdef.signature.name)
    if missing:
        raise unmatched_error(missing, sorted(set(names)), "in the functions the call ran")


def _inlined_prefixes(fdefs: list[Any]) -> dict[str, list[str]]:
    """Per function called by another's ``PartitionedCall``/``StatefulPartitionedCall`` node,
    the prefixes its nodes' names get when TensorFlow inlines it into the caller (the call
    node's name and a slash, after the caller's own): the names ``trace.ops`` shows, as in
    ``StatefulPartitionedCall/sequential/dense/MatMul`` inside Keras's ``model.fit`` step."""
    calls: dict[str, list[tuple[str, str]]] = {}  # callee -> (caller, call node)
    for fdef in fdefs:
        for node in fdef.node_def:
            if node.op in _CALL_OPS and node.attr["f"].func.name:
                calls.setdefault(node.attr["f"].func.name, []).append(
                    (fdef.signature.name, node.name)
                )
    found: dict[str, list[str]] = {}

    def prefixes(fname: str, seen: frozenset[str]) -> list[str]:
        if fname not in found:
            mine = []
            for caller, node in calls.get(fname, ()):
                if caller not in seen:  # a recursive function: its own prefixes are enough
                    outer = prefixes(caller, seen | {fname})
                    mine += [f"{node}/"] + [f"{p}{node}/" for p in outer]
            found[fname] = mine
        return found[fname]

    for fname in calls:
        prefixes(fname, frozenset())
    return found


_CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")


def _inside_xla_error(patterns: list[str], fname: str) -> ValueError:
    from .._sources.functions import function_display_name

    return ValueError(
        f"overrides {', '.join(map(repr, patterns))}: inside the XLA cluster "
        f"{function_display_name(fname)} (jit_compile=True), which XLA compiles as a whole for "
        "the one device the cluster runs on, so its ops are not placed one by one. To move the "
        "cluster, call it under "
        "tf.device(...) (or trace with device_scope=...); to place its ops one by one, use "
        "jit_compile=False."
    )
