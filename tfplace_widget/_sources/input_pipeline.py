"""TF2 profiles: what the ``tf.data`` input pipeline did, read from the profiler's ``XSpace``.

``tf.data`` runs the functions of its datasets (a ``map``'s, a ``filter``'s...) on threads of
its own (lines named ``tf_data_...`` on the ``/host:CPU`` plane), outside any function the
eager context records: ``context.enable_run_metadata()`` keeps no graph of them. The profile
has their op events (``<node>:<OpType>``, as for any op), and TraceMe events that say which
dataset stage ran them: ``InstantiatedCapturedFunction::Run``/``RunAsync`` (``id``: the
function run's step id) inside the stage's ``<Kind>Produce`` or ``Iterator::...::<Kind>``
event, and ``ExecutorState::Process`` (the same ``id``) around the run's ops on the thread
that ran them. ``IteratorGetNextOp::DoCompute`` is the time the step's ``IteratorGetNext``
waited for its next element (an async kernel: it has no ``<node>:<OpType>`` event); the
``ExecutorState::ProcessAsync::Done`` of the same step id names its node.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from .xspace import (
    HOST_PLANE,
    _event_stats,
    _line_start_ns,
    _profile_start_ns,
    _span_us,
    _text,
    parse_xspace,
)

_TF_DATA_THREAD = "tf_data"
_FUNCTION_RUNS = (
    "InstantiatedCapturedFunction::Run",
    "InstantiatedCapturedFunction::RunAsync",
    "InstantiatedCapturedFunction::RunWithBorrowedArgs",
    "InstantiatedCapturedFunction::RunInstantiated",
)
_PROCESS = "ExecutorState::Process"
_DONE = "ExecutorState::ProcessAsync::Done"  # an async kernel's end: its node and step
_WAIT = "IteratorGetNextOp::DoCompute"
_ITERATOR = "Iterator::"
_PRODUCE = "Produce"


@dataclass
class InputPipeline:
    """What the profile says about the input pipeline."""

    threads: set[int] = field(default_factory=set)  # host-plane line ids of tf.data threads
    # thread -> sorted (start_us, end_us, stage) of the function runs on it
    runs: dict[int, list[tuple[int, int, str]]] = field(default_factory=dict)
    # IteratorGetNext's waits: (node, op type, thread, start_us, duration_us)
    waits: list[tuple[str, str, int, int, int]] = field(default_factory=list)
    stages: list[str] = field(default_factory=list)  # the dataset stages that ran functions

    def records_on_threads(self, records: Any) -> set[int]:
        """Indices of the host records timed on tf.data's threads."""
        if not self.threads:
            return set()
        rows = zip(records.lane, records.thread, strict=True)
        return {
            i
            for i, (lane, thread) in enumerate(rows)
            if lane == HOST_PLANE and thread in self.threads
        }

    def stage_at(self, thread: int, start_us: int) -> str:
        """The stage whose function run holds an op event of ``thread`` at ``start_us``."""
        spans = self.runs.get(thread)
        if not spans:
            return ""
        at = bisect.bisect_right(spans, (start_us, float("inf"), "")) - 1
        for begin, end, stage in reversed(spans[max(0, at - 7) : at + 1]):
            if begin <= start_us <= end:  # a run's ops interleave only with a few others'
                return stage
        return ""


def input_pipeline_from_xspace(data: bytes | Any) -> InputPipeline:
    """The tf.data threads, function runs (with their stage) and ``IteratorGetNext`` waits of
    an ``.xplane.pb``."""
    pipeline = InputPipeline()
    planes = [(_text(plane.name), plane) for plane in parse_xspace(data).planes]
    origin_ns = max((_profile_start_ns(p) for n, p in planes if n == "Task Environment"), default=0)
    for name, plane in planes:
        if name == HOST_PLANE:
            _read_host(plane, origin_ns, pipeline)
    return pipeline


def _read_host(plane: Any, origin_ns: int, pipeline: InputPipeline) -> None:
    names = {key: _text(meta.name) for key, meta in plane.event_metadata.items()}
    stat_names = {key: _text(meta.name) for key, meta in plane.stat_metadata.items()}
    dataset_of_kind: dict[str, str] = {}  # "MapAndBatch" -> "fused(MapDataset:1,...)"
    run_kind: dict[int, str] = {}  # function run id -> its stage's kind
    processes: list[tuple[int, int, int, int]] = []  # (thread, start, end, run id)
    waits: list[tuple[Any, int, int, int]] = []  # (step id, thread, start, duration)
    done: dict[Any, tuple[str, str]] = {}  # step id -> (node, type) of its IteratorGetNext
    # Events read on tf.data's threads; on the others (the step's), only its waits.
    on_data = {
        key
        for key, name in names.items()
        if name.startswith(("Iterator", "Instantiated", "ExecutorState::"))
        or name.endswith(_PRODUCE)
    }
    elsewhere = {key for key, name in names.items() if name in (_WAIT, _DONE)}
    for line in plane.lines:
        wanted = elsewhere
        if _text(line.name).startswith(_TF_DATA_THREAD):
            pipeline.threads.add(line.id)
            wanted = on_data
        events = [event for event in line.events if event.metadata_id in wanted]
        if not events:
            continue
        line_ns = _line_start_ns(line, origin_ns)
        # (end, kind) of the open stage events, in ps on the line: a stage that ended before
        # a run began does not hold it, even when both fall in one µs (a ForeverRepeat's
        # GetNext just before its Map's function run)
        enclosing: list[tuple[int, str]] = []
        for event in sorted(events, key=lambda e: (e.offset_ps, -e.duration_ps)):
            name = names[event.metadata_id]
            start, duration = _span_us(line_ns, event)
            while enclosing and enclosing[-1][0] <= event.offset_ps:
                enclosing.pop()
            if name == _WAIT:
                run = _event_stats(event, stat_names).get("id")
                waits.append((run, line.id, start, duration))
            elif name == _DONE:
                stats = _event_stats(event, stat_names)
                kernel = stats.get("kernel_type")
                if isinstance(kernel, str) and kernel.startswith("IteratorGetNext"):
                    done[stats.get("step_id")] = (str(stats.get("name") or kernel), kernel)
            elif name.startswith(_ITERATOR):
                kind = name.rpartition("::")[2]
                stats = _event_stats(event, stat_names)
                dataset = stats.get("name")
                if isinstance(dataset, str) and dataset:
                    dataset_of_kind.setdefault(kind, dataset)
                enclosing.append((event.offset_ps + event.duration_ps, kind))
            elif name.endswith(_PRODUCE) and " " not in name and ":" not in name:
                enclosing.append((event.offset_ps + event.duration_ps, name[: -len(_PRODUCE)]))
            elif name in _FUNCTION_RUNS:
                run = _event_stats(event, stat_names).get("id")
                if isinstance(run, int) and enclosing:
                    run_kind[run] = enclosing[-1][1]
            elif name == _PROCESS:
                run = _event_stats(event, stat_names).get("id")
                if isinstance(run, int):
                    processes.append((line.id, start, start + duration, run))
    for run, thread, start, duration in waits:
        node, kernel = done.get(run, ("IteratorGetNext", "IteratorGetNext"))
        pipeline.waits.append((node, kernel, thread, start, duration))
    stages: dict[str, str] = {}
    for kind in run_kind.values():
        # ParallelMapProduce runs the functions of Iterator::...::ParallelMapV2
        near = [k for k in dataset_of_kind if k.startswith(kind)]
        dataset = dataset_of_kind.get(kind) or (dataset_of_kind[near[0]] if near else "")
        stages.setdefault(kind, f"{kind} ({dataset})" if dataset else kind)
    pipeline.stages = list(stages.values())
    for thread, start, end, run in processes:
        kind = run_kind.get(run)
        if kind is not None:
            pipeline.runs.setdefault(thread, []).append((start, end, stages[kind]))
    for spans in pipeline.runs.values():
        spans.sort()
