"""Where a function's arguments would live on a machine with GPUs, before the placer runs.

A ``tf.function``'s ``_Arg`` nodes are placed by the runtime, not by the placer: each is pinned
to the device of the value the caller passes (``PinArgsAndRets``); for a resource (a variable's
handle, a ``tf.data`` iterator, a lookup table) that is the device the resource was *made* on,
read from the handle itself (eager's ``GetDeviceForInput`` takes ``ResourceHandle::device()``).
The placer then keeps every op that uses the resource on that device (resource edges,
colocation_graph.cc). So predicting a GPU machine means saying where each resource would have
been made there:

- a variable is made where ``VarHandleOp`` runs: under a ``tf.device`` or a distribution
  strategy, on that device on any machine; with no device, on the highest-priority device,
  ``GPU:0`` on a machine with a GPU. A handle carries its variable's dtype and shape (the
  placed ``_Arg``'s ``_handle_dtypes``, from ``ResourceHandleProto.dtypes_and_shapes``);
- lookup tables (``HashTableV2``, ``MutableHashTableV2``...) have CPU kernels only, and a
  ``tf.data`` iterator is made beside its dataset's variant (``iterator_ops.py``:
  ``colocate_with(ds_variant)``), whose ops run on the CPU: both stay where they were made.

What the trace cannot know (was a variable on the first CPU made with no device, or under
``tf.device('/cpu:0')``?) is assumed, and the reason says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._model.devices import device_sort_key, parse_device, short_device
from .._model.errors import TraceError
from .._model.graphfacts import RESOURCE_COLOCATION_EXEMPT, GraphFacts
from .._sources.limits import parse_json

HOST = "/job:localhost/replica:0/task:0/device:CPU:0"


@dataclass(frozen=True)
class Pinned:
    """Where an ``_Arg`` lives before the placer runs, and why. ``assumed``: when that device
    is an assumption the trace cannot check (where a variable was made), what the ops placed
    with it say about it (``""``: no assumption)."""

    device: str
    reason: str
    assumed: str = ""


def pinned_arguments(
    trace: Any, facts: GraphFacts, args: Sequence[str], gpus: int, gpu: str
) -> dict[str, Pinned]:
    """Each of ``args`` (the ``_Arg`` nodes of ``facts``) with the device it would be pinned to
    on this machine plus ``gpus`` GPUs (``gpu``: the first of them) and the reason."""
    if not args:
        return {}
    ops = trace.ops
    rows = ops[ops["type"] == "_Arg"].drop_duplicates("op")
    traced = dict(zip(rows["op"], rows["device"], strict=True))
    cpus = sorted((d for d in trace.devices if "device:CPU:" in d), key=device_sort_key)
    first_cpu = cpus[0] if cpus else HOST
    users, forwarded = _resource_users(facts, args)
    handles = _handle_data(trace) if users or forwarded else {}
    # Only a variable on the first CPU of a run without a GPU may have been made with no
    # device, and so would be made on the GPU there.
    may_move = gpus > 0 and not any("device:GPU:" in d for d in trace.devices)
    asked = _value_requests(facts, users) if may_move and users else {}
    pinned = {}
    for name in args:
        device = traced.get(name) or first_cpu
        used_by = users.get(name, [])
        if not used_by and name not in forwarded:
            pinned[name] = Pinned(device, _value_reason(device, gpus))
            continue
        shown = used_by or forwarded[name]
        user = shown[0] + (f" and {len(shown) - 1} more" if len(shown) > 1 else "")
        user = f"used by {user}" if used_by else f"passed on to {user}"
        kind = _kind(facts, used_by, handles.get(_node_name(facts, name)))
        if not gpus:
            pinned[name] = Pinned(
                device, f"A resource handle ({user}) on {short_device(device)}; {_PINNED}."
            )
        elif kind not in ("variable", "unknown"):
            pinned[name] = Pinned(device, _stays(kind, user, device))
        elif not may_move or device != first_cpu:
            pinned[name] = Pinned(device, _made_there(kind, user, device, may_move))
        elif name in asked and _names(asked[name][1], device):
            pinned[name] = Pinned(
                device,
                _made_with_its_ops(kind, user, device, asked[name], gpu),
                _assumed(name, "under the tf.device its ops ask for", "with no tf.device", gpu),
            )
        else:
            pinned[name] = Pinned(
                gpu,
                _moves(kind, user, device, gpu),
                _assumed(name, "with no tf.device", f"under tf.device('{_cpu(device)}')", device),
            )
    return pinned


# How the reason of a variable's argument moved to the GPU by assumption says so.
ASSUMED_MADE = "Assumed made that way"
_PINNED = "the runtime pins the argument to the resource's device before the placer runs"


def _resource_users(
    facts: GraphFacts, args: Sequence[str]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Per resource ``_Arg``: the ops that use it through a resource edge the placer honours,
    and the ops that only forward it (a call of another function, whose body uses it)."""
    wanted = set(args)
    users: dict[str, list[str]] = {}
    forwarded: dict[str, list[str]] = {}
    for consumer, producers in facts.resource_inputs.items():
        found = forwarded if facts.types.get(consumer) in RESOURCE_COLOCATION_EXEMPT else users
        for producer in producers:
            if producer in wanted:
                found.setdefault(producer, []).append(consumer)
    return users, forwarded


def _kind(facts: GraphFacts, users: list[str], handle_dtypes: bool | None) -> str:
    """What the resource is, from the ops that use it and its handle: ``iterator``, ``table``,
    ``cpu_only`` (a user has no GPU kernel), ``variable`` (its handle carries a dtype),
    ``resource`` (its handle carries none: not a variable), ``unknown`` (no handle seen)."""
    types = [facts.types.get(u, "") for u in users]
    if any("Iterator" in t for t in types):
        return "iterator"
    if any(t.startswith(("LookupTable", "InitializeTable")) for t in types):
        return "table"
    kernels = getattr(facts, "kernels", {})
    if any(getattr(kernels.get(u), "gpu_kernel", "") in ("no", "dtype") for u in users):
        return "cpu_only"
    if handle_dtypes is None:
        return "unknown"
    return "variable" if handle_dtypes else "resource"


def _value_requests(facts: GraphFacts, users: dict[str, list[str]]) -> dict[str, tuple]:
    """Per resource ``_Arg``: ``(op, request)`` when the ops that take its users' values all
    ask for a device themselves and one of them is named (a distribution strategy's replica
    or a ``tf.device`` block around the model makes every op of it ask)."""
    owner = {user: arg for arg, found in users.items() for user in found}
    requests: dict[str, list[tuple[str, str]]] = {}
    wanted = set(owner)
    for consumer, producers in facts.inputs.items():
        if wanted.isdisjoint(producers):
            continue
        for producer in producers:
            if producer in owner:
                requests.setdefault(owner[producer], []).append(
                    (consumer, facts.requested.get(consumer, ""))
                )
    return {
        arg: found[0]
        for arg, found in requests.items()
        if all(request for _, request in found) and len({r for _, r in found}) == 1
    }


def _names(request: str, device: str) -> bool:
    """Whether ``request`` names ``device`` (its type and index, not a partial spec)."""
    try:
        spec, placed = parse_device(request), parse_device(device)
    except ValueError:
        return False
    return spec.type is not None and spec.index is not None and spec.matches(placed)


def _value_reason(device: str, gpus: int) -> str:
    short = short_device(device)
    if not gpus:
        return (
            f"A function argument: it lives where the caller's value is, {short}, before the "
            "placer runs."
        )
    return (
        f"A function argument: the caller's value, on {short} here, assumed there with a GPU "
        "too (NumPy data and tf.data elements arrive in host memory; a tensor made on a GPU "
        "would arrive there); the runtime pins it there before the placer runs."
    )


def _stays(kind: str, user: str, device: str) -> str:
    """A resource that is not a variable: made where it was here on any machine."""
    short = short_device(device)
    what, why = {
        "iterator": (
            "a tf.data iterator",
            "tf.data makes an iterator beside its dataset, whose ops run on the CPU",
        ),
        "table": ("a lookup table", "lookup tables have CPU kernels only"),
        "cpu_only": ("a resource", "an op that uses it has no GPU kernel"),
        "resource": (
            "a resource that is not a variable",
            "its handle carries no dtype; assumed made where it was here",
        ),
    }[kind]
    return (
        f"A function argument: the handle of {what} ({user}), on {short} with a GPU "
        f"too ({why}); {_PINNED}."
    )


def _variable(kind: str) -> str:
    if kind == "variable":
        return "a variable's handle"
    return "a resource handle (assumed a variable's: the trace keeps no handle dtypes)"


def _made_there(kind: str, user: str, device: str, may_move: bool) -> str:
    short = short_device(device)
    why = (
        "a tf.device or a distribution strategy made it there (with no device it would be "
        "on the first CPU)"
        if may_move
        else "where the traced run, which had a GPU, made it"
    )
    return f"A function argument: {_variable(kind)} ({user}), on {short}: {why}; {_PINNED}."


def _made_with_its_ops(kind: str, user: str, device: str, asked: tuple, gpu: str) -> str:
    short = short_device(device)
    op, request = asked
    return (
        f"A function argument: {_variable(kind)} ({user}), on {short}. The ops that use "
        f"its value ask for a device themselves ({op}: {request}), as a distribution strategy's "
        f"replica or a tf.device block does: assumed made under the same device, so it stays on "
        f"{short} with a GPU (made with no device, it would be on {short_device(gpu)}); "
        f"{_PINNED}."
    )


def _assumed(name: str, made: str, other: str, otherwise: str) -> str:
    """What an op placed with the resource ``name`` says of the assumption it rests on:
    the resource is assumed ``made`` so; made ``other`` it would be on ``otherwise``."""
    return (
        f"This rests on an assumption the trace cannot check (it keeps the device a variable "
        f"is on, not the tf.device it was made under): that {name}'s variable was made {made}; "
        f"made {other}, it would be on {short_device(otherwise)}, and so would this op."
    )


def _cpu(device: str) -> str:
    """``/CPU:0``: the tf.device a user writes for ``device``."""
    short = short_device(device)
    return short if short.startswith("/") else f"/{short}"


def _moves(kind: str, user: str, device: str, gpu: str) -> str:
    short, to = short_device(device), short_device(gpu)
    return (
        f"A function argument: {_variable(kind)} ({user}), on {short} here, where TF "
        f"makes a variable with no tf.device when there is no GPU. {ASSUMED_MADE}: with "
        f"a GPU, TF makes it on {to}, and {_PINNED} (made under tf.device('/cpu:0') or by a "
        f"strategy on the CPU, it would stay on {short})."
    )


# ---------------------------------------------------------------------------------------------
# The handles' dtypes, from the placed graphs the trace was read from
# ---------------------------------------------------------------------------------------------
def _handle_data(trace: Any) -> dict[tuple[str, str], bool]:
    """Per ``(function, _Arg name)`` of a function-mode trace: does the placed resource
    ``_Arg`` carry its handle's dtypes (``_handle_dtypes``, set by the runtime from the
    handle: variables have them)? Read from ``raw/functions.json`` (parsed under the limits of
    any member of a file: the ``raw/`` protos are not parsed); empty when the trace keeps none
    (a file saved before it did, or a damaged one: no evidence, not an error)."""
    data = (getattr(trace, "raw", None) or {}).get("functions.json")
    if getattr(trace, "mode", "") != "function" or not data:
        return {}
    try:
        document = parse_json(bytes(data), "raw/functions.json", "raw/functions.json")
    except (TraceError, ValueError):
        return {}
    rows = document.get("resource_args") if isinstance(document, dict) else None
    if not isinstance(rows, list):
        return {}
    return {
        (row[0], row[1]): row[2]
        for row in rows
        if isinstance(row, list)
        and len(row) == 3
        and isinstance(row[0], str)
        and isinstance(row[1], str)
        and isinstance(row[2], bool)
    }


def _node_name(facts: GraphFacts, display: str) -> tuple[str, str]:
    """``(function, node name)`` of an ``_Arg`` by its display name (a name two functions
    share is shown as ``function/name``)."""
    function = getattr(facts, "function", {}).get(display, "")
    prefix = f"{function}/"
    name = display[len(prefix) :] if function and display.startswith(prefix) else display
    return function, name
