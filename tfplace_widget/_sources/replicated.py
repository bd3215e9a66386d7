"""Constants TensorFlow copied per consuming device after placement (``ReplicateConstantsPass``).

TensorFlow's ``ReplicateConstantsPass`` (``core/common_runtime/replicate_constants_pass.cc``,
a ``POST_REWRITE_FOR_EXEC`` pass, in Sessions and in tf.functions alike) takes each constant
the placer put on a CPU that has at most 16 elements, no control edge out and readers on more
than one device, and replaces it with one copy per readers' device, named
``<constant>/replicate/_<n>``; with ``enable_aggressive_constant_replication`` (on by default)
each local CPU is a device of its own. The constant the placer placed is then in no partition
graph, though its placement log lists it. This module pairs the copies with the constant (by
the pass's naming and the graph as built) and reads the constant's device from the placement
log the trace captured (the placer's own ``name: (Type): device`` lines): always there in graph
mode (the trace's Session logs placement), in function mode only when the user turned the log
on before TensorFlow's runtime started (TF prints nothing when it is turned on later). Seen in
TF 2.16 and 2.21 alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from functools import cached_property

from .._model.devices import canonical_device
from .._model.graphfacts import GraphFacts
from .._model.records import Executed

_REPLICA = re.compile(r"^(.+)/replicate/_\d+$")
# The placer's line, logged (``I... placer.cc:162] name: (Type): device``) or printed (bare).
_LOGGED = re.compile(r"placer\.cc:\d+\] (\S+): \((\S+)\): (/\S+)$")
_PRINTED = re.compile(r"^(\S+): \((\S+)\): (/job:\S+)$")


def replicas_of(ran_types: Mapping[str, str], built_type: Callable[[str], str]) -> dict[str, list]:
    """``{constant as built: [its copies]}``: each op that ran named ``<c>/replicate/_<n>``,
    not in the graph as built, whose ``<c>`` is (``built_type``: its type as built, or ""), of
    the same type, and did not run."""
    found: dict[str, list[str]] = {}
    for name, op_type in ran_types.items():
        if "/replicate/_" not in name:
            continue
        match = _REPLICA.match(name)
        if match is None or built_type(name):
            continue
        original = match.group(1)
        if original not in ran_types and built_type(original) == op_type:
            found.setdefault(original, []).append(name)
    for copies in found.values():  # in the pass's order: _0, _1, ... (one counter per graph)
        copies.sort(key=lambda copy: int(copy.rpartition("_")[2]))
    return found


def placement_blocks(log: str) -> list[dict[str, tuple[str, str]]]:
    """The placer's blocks in ``log`` (one per graph it placed): ``{name: (type, device)}``.

    The logged lines (with their thread) are read when there are any, else the printed ones
    (``TF_CPP_MIN_LOG_LEVEL`` silences the logged copy); a block ends where a name repeats.
    """
    if "): /" not in log:
        return []
    logged = "placer.cc:" in log
    pattern = _LOGGED if logged else _PRINTED
    blocks: list[dict[str, tuple[str, str]]] = []
    current: dict[str, dict[str, tuple[str, str]]] = {}
    for line in log.splitlines():
        if "): /" not in line:
            continue
        found = pattern.search(line.rstrip())
        if found is None:
            continue
        name, op_type, device = found.groups()
        thread = line.split(None, 3)[2] if logged and line[:1] in "IW" else ""
        block = current.get(thread)
        if block is None or name in block:
            block = current[thread] = {}
            blocks.append(block)
        block[name] = (op_type, canonical_device(device))
    return blocks


class PlacementLog:
    """A captured log whose placer blocks are parsed on first use (most traces need none)."""

    def __init__(self, text: str) -> None:
        self.text = text

    @cached_property
    def blocks(self) -> list[dict[str, tuple[str, str]]]:
        return placement_blocks(self.text)


def placed_device(
    original: str, op_type: str, blocks: list[dict[str, tuple[str, str]]], names: Iterable[str]
) -> str:
    """The device the placer's log gives ``original`` (of ``op_type``), in the block that shares
    most of ``names`` (the graph's ops) among those listing it; "" when no block does."""
    listing = [b for b in blocks if b.get(original, ("", ""))[0] == op_type]
    if not listing:
        return ""
    if len(listing) > 1:
        wanted = set(names)
        listing.sort(key=lambda b: len(wanted.intersection(b)), reverse=True)
    return listing[0][original][1]


def add_replicated_constants(executed: Executed, facts: GraphFacts, log: str) -> None:
    """Graph mode: record the constants the pass replaced (``executed.replicated``) and give
    each the row of the op the placer placed, on the device its placement log names (no row
    when the log does not: a RunMetadata read from a file)."""
    replicas = replicas_of(executed.type, lambda name: facts.types.get(name, ""))
    if not replicas:
        return
    blocks = placement_blocks(log)
    for original, copies in replicas.items():
        executed.replicated[original] = copies
        device = placed_device(original, facts.types[original], blocks, executed.device)
        if device:
            executed.device[original] = device
            executed.type[original] = facts.types[original]
            executed.inputs[original] = list(facts.inputs.get(original, ()))
