"""The ``tf.data`` functions that ran during the traced calls, as function graphs.

``tf.data`` instantiates its datasets' functions (a ``map``'s, a ``filter``'s...) with its own
function library runtime, outside the eager context's graph collector: TensorFlow records no
placed graph of them. The profiler times their ops on ``tf.data``'s threads
(``sources.input_pipeline``); their FunctionDefs are in the eager context. Where they ran is
TensorFlow's rule for them (``CapturedFunction::Instantiate``, ``captured_function.cc``): the
function is instantiated for the iterator's device with ``default_device_to_target``, so an op
without a ``tf.device`` of its own runs on the iterator's device, and one with a request runs
where it asked (soft placement moves a request no device here meets to the iterator's device).
This module builds, per function that ran, the entry ``read_function_graphs`` reads (its
graph as built, and one placed partition by that rule), so its ops get rows like the step's.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .._model.devices import canonical_device, parse_device, short_device
from .._model.records import Executed, HandedVariable
from .._sources.functions import (
    FunctionFacts,
    function_display_name,
    read_function_graphs,
    without_instances,
)
from .._sources.input_pipeline import InputPipeline
from .._sources.xspace import HOST_PLANE
from .function_copies import is_copy, reachable_functions

_DATASET_FUNCTION = re.compile(r"^__inference_Dataset_.+_(\d+)$")
_ITERATOR_TYPES = ("IteratorGetNext", "IteratorGetNextAsOptional", "IteratorGetNextSync")


@dataclass
class DatasetSources:
    """Where the datasets the traced calls read come from: the datasets and iterators among
    the call's arguments (``given``), and the tf.data functions the calls made themselves
    (``made``, their FunctionDefs: Keras's data adapter makes its datasets over arrays in
    ``fit`` and drops them, and their functions leave the eager context, before ``fit``
    returns)."""

    given: list = field(default_factory=list)
    before: set[str] = field(default_factory=set)
    made: dict[str, Any] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)  # given function -> its dataset's kind
    _ctx: Any = None

    def snapshot(self) -> None:
        """Just before the traced calls: remember the functions the eager context holds, and
        keep the FunctionDef of every tf.data function removed from it until :meth:`close`."""
        from tensorflow.python.eager import context

        ctx = self._ctx = context.context()
        self.before = set(ctx.list_function_names())
        remove = type(ctx).remove_function

        def keeping(name: Any) -> None:
            self._keep(name)
            remove(ctx, name)

        ctx.remove_function = keeping  # the instance's only: AtomicFunction calls it there

    def close(self) -> None:
        """After the traced calls: keep the calls' tf.data functions still in the context too,
        and leave the context's ``remove_function`` as it was."""
        ctx, self._ctx = self._ctx, None
        if ctx is None:
            return
        vars(ctx).pop("remove_function", None)
        for fname in ctx.list_function_names():
            if fname not in self.before:
                self._keep(fname)

    def _keep(self, name: Any) -> None:
        fname = name.decode() if isinstance(name, bytes) else str(name)
        if fname in self.before or not _DATASET_FUNCTION.match(fname) or is_copy(fname):
            return
        try:
            self.made.setdefault(fname, self._ctx.get_function_def(fname))
        except Exception:  # already gone: nothing to keep
            return


def dataset_function_graphs(
    ran: Iterable[str],
    step_graphs: Sequence[Any],
    devices: Sequence[str],
    sources: DatasetSources | None = None,
    produced: bool = False,
) -> tuple[list[Any], list[str], set[str]]:
    """``(function graphs, display names, display names of the calls' own)`` of the tf.data
    functions that ran, each placed by tf.data's rule on the device of the ``IteratorGetNext``
    of ``step_graphs`` (the calls' recorded entries). A function ran when nodes of it are
    among ``ran`` (names of op events on tf.data's threads), or, when the calls' iterator
    ``produced`` elements, when it is a function of the datasets the calls read (``sources``:
    of a dataset or iterator they were given, or made by the calls themselves), the profiler
    having timed none of its ops (they are cheap, or the elements were made before)."""
    from tensorflow.python.eager import context

    wanted = {without_instances(name) for name in ran}
    if not wanted and not (produced and sources is not None):
        return [], [], set()
    ctx = context.context()
    bodies: dict[str, Any] = {}
    for fname in ctx.list_function_names():
        if _DATASET_FUNCTION.match(fname) and not is_copy(fname):
            try:
                bodies[fname] = ctx.get_function_def(fname)
            except Exception:  # removed meanwhile
                continue
    chosen: list[str] = []
    made: set[str] = set()
    if produced and sources is not None:
        given = reachable_functions(ctx, _functions_of(sources.given, sources.kinds))
        for fname, fdef in sources.made.items():
            bodies.setdefault(fname, fdef)
        made = set(sources.made)
        chosen = [f for f in dict.fromkeys([*given, *sorted(made)]) if f in bodies]
        for fname in chosen:  # a timed name of these is theirs, not a namesake's elsewhere
            wanted -= _hits(wanted, bodies[fname])
    others = {f: fdef for f, fdef in bodies.items() if f not in chosen}
    chosen += _functions_that_ran(wanted, others) if wanted else []
    if not chosen:
        return [], [], set()
    target = _iterator_device(step_graphs, devices)
    graphs, names = [], []
    for fname in chosen:
        graphs.append(_placed_entry(ctx, bodies[fname], target, devices))
        names.append(function_display_name(fname))
    return graphs, names, {function_display_name(f) for f in made}


def _functions_of(given: Iterable[Any], kinds: dict[str, str]) -> list[str]:
    """The functions of the datasets (and of the iterators' datasets) in ``given`` and of
    their input datasets, by their FunctionDef names; ``kinds`` receives each one's dataset
    kind (``Map`` for a ``_MapDataset``'s)."""
    found: list[str] = []
    pending = [getattr(each, "_dataset", each) for each in given]
    seen: set[int] = set()
    while pending:
        dataset = pending.pop()
        if id(dataset) in seen or not hasattr(dataset, "_inputs"):
            continue
        seen.add(id(dataset))
        try:
            wrappers, inputs = list(dataset._functions()), list(dataset._inputs())
        except Exception:  # not a tf.data dataset after all
            continue
        kind = type(dataset).__name__.strip("_").removesuffix("Dataset")
        for wrapper in wrappers:
            name = getattr(getattr(wrapper, "function", None), "name", b"")
            found.append(name.decode() if isinstance(name, bytes) else str(name))
            kinds.setdefault(found[-1], kind)
        pending += inputs
    return [name for name in found if name]


def datasets_among(values: Iterable[Any]) -> list[Any]:
    """The ``tf.data`` datasets and iterators among ``values`` (a call's arguments, one level
    into lists, tuples and dicts)."""
    import tensorflow as tf

    found = []
    for value in values:
        inner = value.values() if isinstance(value, dict) else value
        for each in inner if isinstance(value, list | tuple | dict) else [value]:
            if isinstance(each, tf.data.Dataset) or isinstance(
                getattr(each, "_dataset", None), tf.data.Dataset
            ):
                found.append(each)
    return found


@dataclass
class PipelineRows:
    """What the traced calls' input pipeline adds to the trace."""

    display: dict[str, str] = field(default_factory=dict)  # executed name -> display name
    stages: dict[str, str] = field(default_factory=dict)  # display name -> stage
    functions: set[str] = field(default_factory=set)  # display names of its functions
    made: set[str] = field(default_factory=set)  # those of datasets the calls made themselves
    kinds: dict[str, str] = field(default_factory=dict)  # display name -> its dataset's kind


def read_with_pipeline(
    graphs: list,
    names: list[str],
    scope: str,
    records: Any,
    on_data: set[int],
    pipeline: InputPipeline,
    devices: Sequence[str],
    sources: DatasetSources | None = None,
    placement_log: str = "",
    definitions: Sequence[str | None] = (),
    handles: Sequence[Sequence[HandedVariable | None]] = (),
) -> tuple[Executed, FunctionFacts, dict[str, str], PipelineRows]:
    """``read_function_graphs`` of the calls' ``graphs`` and of the tf.data functions whose
    ops ``records`` timed on tf.data's threads (``on_data``; after the calls', which keep the
    plain names), and of the datasets the calls read that ``sources`` names (when their
    iterator produced elements during the calls). Those records are renamed to their display names here (``""``, dropped
    later, for an op of no such function), never taken for an op of the calls' that has the
    same name. ``definitions``: the FunctionDef name of each of ``graphs``; ``handles``: the
    variable each input of each of ``graphs``' calls hands out (``read_function_graphs``)."""
    ran = {records.op[index] for index in on_data}
    data_graphs, data_names, made = dataset_function_graphs(
        ran, graphs, devices, sources, produced=bool(pipeline.waits)
    )
    renamed: list[dict[str, str]] = []
    executed, facts, display_of = read_function_graphs(
        [*graphs, *data_graphs],
        [*names, *data_names],
        scope,
        last=len(graphs),
        renamed_out=renamed,
        placement_log=placement_log,
        definitions=definitions,
        handles=handles,
    )
    rows = PipelineRows(functions=set(data_names), made=made)
    if sources is not None:
        rows.kinds = {function_display_name(f): k for f, k in sources.kinds.items()}
    for each in renamed[len(graphs) :]:
        for executed_name, display in each.items():
            rows.display.setdefault(executed_name, display)
    rows.stages = record_stages(records, on_data, rows.display, pipeline)
    for index in on_data:
        records.op[index] = rows.display.get(records.op[index], "")
    for node, op_type, thread, start, duration in pipeline.waits:  # IteratorGetNext's time
        records.append(node, op_type, HOST_PLANE, thread, start, duration, f"{node} = {op_type}()")
    return executed, facts, display_of, rows


def _hits(wanted: set[str], fdef: Any) -> set[str]:
    """The names of ``wanted`` that are nodes of ``fdef`` (or inlined inside one of them)."""
    body = {node.name for node in fdef.node_def}
    return {name for name in wanted if name in body or name.split("/", 1)[0] in body}


def _functions_that_ran(wanted: set[str], bodies: dict[str, Any]) -> list[str]:
    """The fewest dataset functions that hold the names that ran: the one holding most first,
    the newest (highest number: the dataset defined last) on a tie."""
    left = set(wanted)
    chosen: list[str] = []
    hits = {fname: _hits(wanted, fdef) for fname, fdef in bodies.items()}
    while left:
        ranked = [
            (len(found & left), int(_DATASET_FUNCTION.match(f).group(1)), f)
            for f, found in hits.items()
            if f not in chosen
        ]
        best = max(ranked, default=None)
        if best is None or not best[0]:
            break
        chosen.append(best[2])
        left -= hits[best[2]]
    return chosen


def _iterator_device(step_graphs: Sequence[Any], devices: Sequence[str]) -> str:
    """Where the iterator lives: the device of the step's ``IteratorGetNext`` (colocated with
    the iterator resource), else the first CPU."""
    for graph in step_graphs:
        for partition in graph.partition_graphs:
            for node in partition.node:
                if node.op in _ITERATOR_TYPES and node.device:
                    return canonical_device(node.device)
    cpus = [canonical_device(d) for d in devices if "CPU" in d.upper()]
    return cpus[0] if cpus else canonical_device("/device:CPU:0")


def _placed_entry(ctx: Any, fdef: Any, target: str, devices: Sequence[str]) -> Any:
    """A ``RunMetadata.FunctionGraphs`` for ``fdef``: the graph as built (its node defs, the
    functions it calls as library) and one partition with every node on its device."""
    from tensorflow.core.protobuf import config_pb2

    known = {canonical_device(d) for d in devices}
    entry = config_pb2.RunMetadata.FunctionGraphs()
    pre = entry.pre_optimization_graph
    pre.node.extend(fdef.node_def)
    name = fdef.signature.name
    for called in reachable_functions(ctx, [name]):
        if called != name:
            try:
                pre.library.function.append(ctx.get_function_def(called))
            except Exception:  # not in the eager context: its nodes stay unexplained
                continue
    partition = entry.partition_graphs.add()
    partition.node.extend(fdef.node_def)
    for node in partition.node:  # FunctionDef inputs (``op:output:0``) as a graph's (``op:0``)
        inputs = [_graph_input(raw) for raw in node.input]
        del node.input[:]
        node.input.extend(inputs)
    device_of = _placed(partition.node, target, known)
    for node in partition.node:
        node.device = device_of[node.name]
    return entry


def _graph_input(raw: str) -> str:
    if raw.startswith("^") or raw.count(":") < 2:
        return raw
    head, _, index = raw.rpartition(":")
    return f"{head.split(':', 1)[0]}:{index}"


def _placed(nodes: Any, target: str, known: set[str]) -> dict[str, str]:
    """The device of every node by the placer's rules (``placer.cc``) with tf.data's default
    device: a request a device here meets is honoured; metadata ops (``Shape``...) and
    ``Identity`` go with their input (the placer's heuristic B), a generator with its
    consumers when they share one (heuristic A); anything else goes to ``target``, the
    iterator's device, where the captured resources (a lookup table) are taken to live."""
    by_name = {node.name: node for node in nodes}
    device: dict[str, str] = {}
    for node in nodes:
        asked = canonical_device(node.device) if node.device else ""
        if asked in known:
            device[node.name] = asked

    def producers(node: Any) -> list[str]:
        return [raw.split(":", 1)[0] for raw in node.input if not raw.startswith("^")]

    for _ in range(len(by_name)):  # follow chains of metadata ops, one link per pass
        changed = False
        for node in nodes:
            if node.name in device or node.op not in _FOLLOWS_INPUT:
                continue
            sources = [p for p in producers(node) if p in by_name]
            if len(producers(node)) == 1 and sources and sources[0] in device:
                device[node.name] = device[sources[0]]
                changed = True
        if not changed:
            break
    consumers: dict[str, list[str]] = {}
    for node in nodes:
        for source in producers(node):
            consumers.setdefault(source, []).append(node.name)
    for node in nodes:
        if node.name in device or producers(node):
            continue
        where = {device.get(c, target) for c in consumers.get(node.name, [])}
        if len(where) == 1:
            device[node.name] = where.pop()
    return {node.name: device.get(node.name, target) for node in nodes}


_FOLLOWS_INPUT = frozenset({"Shape", "ShapeN", "Size", "Rank", "Identity"})


def record_stages(
    records: Any, on_data: set[int], data_display: dict[str, str], pipeline: InputPipeline
) -> dict[str, str]:
    """Display name -> the dataset stage whose function runs timed it (the most frequent)."""
    seen: dict[str, Counter] = {}
    for index in on_data:
        display = data_display.get(records.op[index])
        if display is not None:
            stage = pipeline.stage_at(records.thread[index], records.start[index])
            if stage:
                seen.setdefault(display, Counter())[stage] += 1
    return {display: counts.most_common(1)[0][0] for display, counts in seen.items()}


def add_input_stages(trace: Any, rows: PipelineRows) -> None:
    """Fill ``input_stage`` for the rows of the input pipeline's functions: the stage that ran
    the op, or (an op the profiler did not time) the stage that ran its function's other ops,
    or (a function it timed nothing of) its dataset's kind; the reason of a function of a
    dataset the calls made themselves says so."""
    stages, functions, made = rows.stages, rows.functions, rows.made
    if not functions:
        return
    ops = trace.ops
    of_function: dict[str, Counter] = {}
    for op, function in zip(ops["op"], ops["function"], strict=True):
        if function in functions and op in stages:
            of_function.setdefault(function, Counter())[stages[op]] += 1
    main = {f: counts.most_common(1)[0][0] for f, counts in of_function.items()}
    column = [
        (stages.get(op) or main.get(function) or rows.kinds.get(function) or "tf.data")
        if function in functions
        else None
        for op, function in zip(ops["op"], ops["function"], strict=True)
    ]
    ops["input_stage"] = pd.array(column, dtype="string")
    reasons = ops["reason"].tolist()
    rows = zip(column, ops["function"], ops["requested_device"], ops["device"], strict=True)
    for index, (stage, function, requested, device) in enumerate(rows):
        if stage is None:
            continue
        where = short_device(device)
        if not requested:
            reasons[index] = (
                f"No device requested: tf.data runs the functions of its datasets on the "
                f"iterator's device, and an op without a tf.device of its own runs there, GPU "
                f"or not (tf.data instantiates them with default_device_to_target): {where}."
            )
        elif not _has_device_type(requested):
            reasons[index] = (
                f"Its node def asks for {requested} (no device type: TensorFlow's own code "
                f"recorded where it was built); tf.data runs it on the iterator's device: "
                f"{where}."
            )
        own = (
            " A dataset the traced call made itself, not one of yours (Keras's data adapter, "
            "when fit is given arrays)."
            if function in made
            else ""
        )
        reasons[index] = f"Input pipeline ({function}, stage {stage}).{own} {reasons[index]}"
    ops["reason"] = reasons


def _has_device_type(requested: str) -> bool:
    try:
        return parse_device(requested).type is not None
    except ValueError:
        return False


def input_notes(trace: Any, pipeline: InputPipeline) -> list[str]:
    """A note on the input pipeline: how long the calls waited in ``IteratorGetNext``, and
    where the rows of its functions are ("" when the calls read no tf.data iterator)."""
    if not pipeline.waits:
        return []
    waits = [wait[-1] for wait in pipeline.waits]
    total = sum(waits)
    ops = trace.ops
    in_step = ops["input_stage"].isna().to_numpy()
    step_ops = set(ops["op"][in_step])
    events = trace.events[trace.events["op"].isin(step_ops)]
    span = 0
    if len(events):
        span = int((events["start_us"] + events["duration_us"]).max() - events["start_us"].min())
    share = f", {100 * total / span:.0f}% of the traced calls' {_ms(span)}" if span else ""
    note = (
        f"Input: the calls waited {_ms(total)} for the next element of a tf.data iterator "
        f"(IteratorGetNext, {len(waits)} time(s): {_ms(total / len(waits))} on average, "
        f"{_ms(max(waits))} at most{share})."
    )
    functions = sorted(set(ops["function"][~in_step]))
    if functions:
        stages = sorted(set(ops["input_stage"].dropna()))
        note += (
            f" The ops of its functions ({', '.join(functions)}; stage "
            f"{', '.join(stages)}) are the rows with an input_stage: tf.data runs them on "
            "its own threads, on the iterator's device."
        )
    return [note]


def _ms(us: float) -> str:
    return f"{us / 1000:.1f} ms" if us >= 100 else f"{us:.0f} µs"


_BOUNDARY_TYPES = frozenset({"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval"})


def drop_foreign_partitions(graph: Any, foreign: frozenset) -> None:
    """Drop the partition graphs of another instantiation that TensorFlow recorded into this
    entry: those whose nodes are all ``foreign`` (nodes of the merged pre-optimisation graph
    that are not the called function's) or its arguments and results.

    TensorFlow's eager context has one graph collector: a function instantiated on another
    thread while the call runs (an op run eagerly by a ``tf.py_function`` of a ``tf.data``
    map, TensorFlow's one-op ``__wrapped__`` function) adds its graphs to the call's entry
    (``GraphCollector::CollectRawGraph`` merges, ``CollectGraph`` appends). Its ``_EagerConst``
    or ``StringUpper`` and its ``input`` argument ran in no partition of the call.
    """
    if not foreign:
        return
    for index in reversed(range(len(graph.partition_graphs))):
        partition = graph.partition_graphs[index]
        named = [node.name for node in partition.node if node.op not in _BOUNDARY_TYPES]
        if named and all(name in foreign for name in named):
            del graph.partition_graphs[index]
