"""Ops that oneDNN's graph rewrite merged into a neighbour after TensorFlow placed them.

On an x86 CPU TensorFlow's oneDNN pass (``mkl_layout_pass.cc``, on unless
``TF_ENABLE_ONEDNN_OPTS=0``) rewrites each partition graph after placement: it turns ops into
their oneDNN kernels (``MatMul`` -> ``_MklMatMul``) and merges a few pairs into one kernel:
``Conv2D`` + ``BiasAdd`` -> ``_MklNativeConv2DWithBias`` (named after the BiasAdd),
``Conv2DBackpropFilter`` + ``BiasAddGrad`` -> ``_MklNativeConv2DBackpropFilterWithBias`` (named
after the filter gradient, the bias gradient its second output), ``Pad`` + ``Conv2D`` ->
``_MklNativePadWithConv2D``, and the ``Transpose`` ops around a ``Conv2D``/``MaxPool`` that only
change its data format. The merged op is then in no partition graph, though the placer placed
it (its placement log lists it). This module finds it by comparing the graph as placed with
the graphs that ran: an op of a mergeable type that did not run, next to an oneDNN kernel that
took its inputs over (it fed that kernel), or whose readers now read that kernel (its output
became one of the kernel's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .._model.graphfacts import GraphFacts
from .._model.records import Executed

# The op types mkl_layout_pass.cc merges into a neighbouring oneDNN kernel, each with the
# types (as built) of the ops it merges them into.
MERGED_INTO = {
    "Conv2D": frozenset({"BiasAdd"}),
    "BiasAddGrad": frozenset({"Conv2DBackpropFilter"}),
    "Pad": frozenset({"Conv2D", "_FusedConv2D"}),
    "Transpose": frozenset({"Conv2D", "Conv3D", "MaxPool", "MaxPool3D"}),
}
MERGED_TYPES = frozenset(MERGED_INTO)
ONEDNN_PREFIX = "_Mkl"


def onednn_merges(
    built_types: Mapping[str, str],
    built_inputs: Mapping[str, Sequence[str]],
    ran_types: Mapping[str, str],
    ran_inputs: Mapping[str, Sequence[str]],
) -> dict[str, str]:
    """``{merged op: the oneDNN kernel it was merged into}``.

    ``built_*``: each op of the graph as placed (its type, its data inputs' producers);
    ``ran_*``: the same of the partition graphs that ran. Names are the same in both.
    """
    if MERGED_TYPES.isdisjoint(built_types.values()) or not any(
        t.startswith(ONEDNN_PREFIX) for t in set(ran_types.values())
    ):
        return {}  # nothing oneDNN merges, oneDNN off or nothing it rewrote: types only
    gone = {
        name
        for name, op_type in built_types.items()
        if op_type in MERGED_TYPES and name not in ran_types
    }
    if not gone:
        return {}
    readers: dict[str, list[str]] = {name: [] for name in gone}
    for name, inputs in built_inputs.items():
        for source in inputs:
            if source in readers:
                readers[source].append(name)

    merged: dict[str, str] = {}
    for name in sorted(gone):
        kernel = _kernel_of(name, readers[name], built_types, built_inputs, ran_types, ran_inputs)
        if kernel:
            merged[name] = kernel
    return merged


def _kernel_of(
    name: str,
    readers: list[str],
    built_types: Mapping[str, str],
    built_inputs: Mapping[str, Sequence[str]],
    ran_types: Mapping[str, str],
    ran_inputs: Mapping[str, Sequence[str]],
) -> str:
    """The oneDNN kernel op ``name`` (gone from the graphs that ran) was merged into, or ""."""
    kinds = MERGED_INTO[built_types[name]]

    def kernel(candidate: str) -> bool:  # an oneDNN kernel this op can be merged into
        ran = ran_types.get(candidate, "")
        return ran.startswith(ONEDNN_PREFIX) and built_types.get(candidate) in kinds

    sources = set(built_inputs.get(name, ()))
    for reader in readers:
        now = ran_inputs.get(reader)
        if now is None or name in now:
            continue
        # The kernel took the op's inputs over (Conv2D into the BiasAdd after it)...
        if kernel(reader) and sources & set(now):
            return reader
        # ...or the op's readers read the kernel in its place (BiasAddGrad as the second
        # output of the filter gradient; a Transpose after a Conv2D, the Conv2D itself).
        before = set(built_inputs.get(reader, ()))
        for candidate in now:
            if (
                candidate not in before
                and kernel(candidate)
                and (candidate in sources or sources & set(ran_inputs[candidate]))
            ):
                return candidate
    return ""


def add_merged_nodes(executed: Executed, facts: GraphFacts) -> None:
    """Graph mode: give ``executed`` the graph's ops oneDNN merged into a kernel (the graph as
    built names them as the partition graphs do), on their kernel's device (oneDNN merges
    only ops placed on one device)."""
    merged = onednn_merges(facts.types, facts.inputs, executed.type, executed.inputs)
    for op, kernel in merged.items():
        executed.device[op] = executed.device[kernel]
        executed.type[op] = facts.types[op]
        executed.inputs[op] = list(facts.inputs.get(op, ()))
        executed.merged[op] = kernel
