"""Which op of TensorFlow's own run each row of the tool's trace is.

Names alone mislead: the tool may trace a wrapper around the user's calls (``tf.function`` of a
plain callable, or a Session graph of it), so ``PartitionedCall/add`` in the trace can be the
first call of ``add`` while in the user's run it names the ``add`` nested in ``dense_layer``.
So a row is matched by where its node def sits: each row is resolved in the graphs the tool's
own run recorded (``trace.raw``: TensorFlow's protos as returned) to ``(functions down to its
body..., its name there)``, and that key's longest suffix found in the user's run names the
op there. Rows with no node def (copies, lowered-loop plumbing) are matched by name inside the
graph of the same function.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ground_truth import GraphTruth, NodeFact, function_name, graph_truth

RUNTIME_TYPES = {
    "_Arg", "_Retval", "_DeviceArg", "_DeviceRetval", "_Send", "_Recv", "_HostSend",
    "_HostRecv", "_SOURCE", "_SINK",
}  # fmt: skip


@dataclass
class Mapped:
    """A trace row and the op(s) of the user's run it is (several when TF instantiated the
    same function body more than once)."""

    places: list[tuple[GraphTruth, str]]  # (TF's graph, the op's display name there)
    fact: NodeFact | None  # the node def in TF's graph of the user's run
    tool_fact: NodeFact | None  # the same node def, in the tool's run
    tool_prefix: str  # what the tool's name adds in front of its name in its own graph


def tool_truths(trace: Any) -> list[GraphTruth]:
    """The graphs the tool's own run recorded (``trace.raw``), as ``GraphTruth``s."""
    from tensorflow.core.framework import graph_pb2
    from tensorflow.core.protobuf import config_pb2

    raw = trace.raw or {}
    if "function_graphs.pb" in raw:
        holder = config_pb2.RunMetadata.FromString(raw["function_graphs.pb"])
        names = json.loads(raw["functions.json"])["names"]
        return [
            graph_truth(g.pre_optimization_graph, list(g.partition_graphs), n == "eager", n)
            for g, n in zip(holder.function_graphs, names, strict=True)
        ]
    if "graph_def.pb" in raw:
        graph = graph_pb2.GraphDef.FromString(raw["graph_def.pb"])
        steps = sorted(k for k in raw if k.startswith("run_metadata_"))
        metadata = config_pb2.RunMetadata.FromString(raw[steps[0]]) if steps else None
        return [graph_truth(graph, list(metadata.partition_graphs) if metadata else [])]
    return []


@dataclass
class Mapping:
    """Every row of a trace, placed in the user's run and in the tool's own."""

    mapped: dict[str, Mapped]  # rows matched to ops of the user's run
    eager_rows: list  # user ops with no graph in the user's run (it ran them eagerly)
    unmapped: Counter  # why the other rows could not be matched
    located: dict[str, tuple[GraphTruth, str]]  # every row: the tool's graph and name in it


def map_rows(trace: Any, truths: list[GraphTruth]) -> Mapping:
    """Match each row of ``trace`` to the op(s) of the user's run (``truths``) it is."""
    index: dict[tuple, list[tuple[GraphTruth, str]]] = {}
    for truth in truths:
        if truth.eager:
            continue
        for name in truth.placed:
            fact = truth.fact(name)
            if fact is not None:
                index.setdefault(_normal(fact.key), []).append((truth, name))
    tools = tool_truths(trace)
    mapped: dict[str, Mapped] = {}
    eager_rows, unmapped, located = [], Counter(), {}
    for row in trace.ops.itertuples(index=False):
        if isinstance(getattr(row, "input_stage", None), str):
            unmapped["input pipeline"] += 1
            continue
        tool, tool_name = _in_tool_graphs(tools, row)
        if tool is not None:
            located[row.op] = (tool, tool_name)
        tool_fact = tool.fact(tool_name) if tool is not None else None
        prefix = row.op[: len(row.op) - len(tool_name)] if tool_name else ""
        places = _by_key(index, tool_fact) if tool_fact is not None else []
        if not places and tool_name:
            places = _by_name(truths, tool, tool_name)
        if places:
            first = places[0]
            mapped[row.op] = Mapped(places, first[0].fact(first[1]), tool_fact, prefix)
        elif tool_fact is not None and not (row.how == "runtime" or row.type in RUNTIME_TYPES):
            eager_rows.append(row)  # a user op with no graph in the user's run: eager there
        else:
            unmapped[_why_unmapped(row, tool)] += 1
    return Mapping(mapped, eager_rows, unmapped, located)


def _normal(key: tuple[str, ...]) -> tuple[str, ...]:
    return (*(function_name(f) for f in key[:-1]), key[-1])


def _in_tool_graphs(tools: list[GraphTruth], row: Any) -> tuple[GraphTruth | None, str]:
    """The tool's graph holding the row, and the row's name in it."""
    function = "" if row.function == "" else row.function
    candidates = [row.op, row.op.removeprefix(f"{function}/"), row.op.removeprefix("eager/")]
    ordered = sorted(tools, key=lambda t: t.function != function)
    for tool in ordered:
        for name in candidates:
            if name in tool.placed or name in tool.raw_placed:
                return tool, name
    return None, ""


def _by_key(index: dict, tool_fact: NodeFact) -> list[tuple[GraphTruth, str]]:
    key = _normal(tool_fact.key)
    for start in range(len(key) - 1):  # the longest suffix that names a function's body
        found = index.get(key[start:])
        if found:
            return found
    return []


def _by_name(truths: list, tool: GraphTruth, name: str) -> list[tuple[GraphTruth, str]]:
    same = [
        t
        for t in truths
        if not t.eager and function_name(t.function) == function_name(tool.function)
    ]
    return [(t, name) for t in same if name in t.placed or name in t.raw_placed]


def _why_unmapped(row: Any, tool: GraphTruth | None) -> str:
    if row.type in ("_SOURCE", "_SINK") or row.op in ("_SOURCE", "_SINK"):
        return "_SOURCE/_SINK (in step stats, not in partition graphs)"
    if tool is None:
        return "not in the graphs of the tool's own run"
    if row.type in ("_Send", "_Recv"):
        return "copy op the user's run numbered differently"
    if row.type in RUNTIME_TYPES:
        return "argument or result of a graph the user's run did not have"
    return "runtime plumbing (Func/..., loop frames) numbered differently"
