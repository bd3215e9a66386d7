"""The placer's rules in words: each ``reason`` sentence, written once for runs and predictions.

A run's :class:`~.run.Explainer` and a prediction's reasons (``_analyses/predict/reasons.py``)
decide which rule placed an op from what each knows (the graph and the devices the ops ran on;
the simulated placer's state); the sentence comes from here. The rules follow TensorFlow's placer
(core/common_runtime/placer.cc, colocation_graph.cc; ``placement-rules.md`` in the project's
shared notes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._model.devices import task_of
from .._model.graphfacts import RESOURCE_COLOCATION_EXEMPT, GraphFacts

HOW_VALUES = ("explicit", "implicit", "colocated", "soft", "runtime", "unknown", "xla")

_FUNCTIONAL_TYPES = {
    "While",
    "StatelessWhile",
    "If",
    "StatelessIf",
    "Case",
    "StatelessCase",
    "PartitionedCall",
    "StatefulPartitionedCall",
}
_BY_PRIORITY = "the placer takes the highest-priority device type with a kernel for"


def asked(requested: str, facts: GraphFacts | None, name: str) -> str:
    """``Requested <spec>``, with ``through overrides (<pattern>)`` when trace_placement's
    ``overrides=`` set the request (``tf.device`` goes without saying there)."""
    how = asked_how(facts, name)
    return f"Requested {requested}" + (f" {how}" if how != "with tf.device" else "")


def asked_how(facts: GraphFacts | None, name: str) -> str:
    """How the op's request was made: ``with tf.device``, or ``through overrides (...)``."""
    pattern = facts.overridden.get(name) if facts is not None else None
    return f"through overrides ({pattern!r})" if pattern else "with tf.device"


def explicit(requested: str, how: str, short: str, *, partial: bool) -> str:
    """Rule 3: a request the placer honoured; ``partial``: it names no device type or index."""
    if not partial:
        return f"Requested {requested} {how}; placed exactly there ({short})."
    return (
        f"Requested {requested} (a partial device spec) {how}; the placer chose "
        f"{short}, the first matching device with a kernel."
    )


def soft(
    asked_text: str,
    short: str,
    *,
    exists: bool,
    available: str = "",
    where: str = "here",
    missing: str = "",
    group_blocked: bool = False,
) -> str:
    """Rule 12: soft placement moved an op off its request. ``exists``: a device matches the
    request (``available`` lists them when none does; ``where``: "here" for a run, "there" for
    a prediction's machine); ``missing``: why no kernel serves it there (``lacks_kernel_for``);
    ``group_blocked``: its colocation group could not go there."""
    if not exists:
        anyway = f" Where it exists, this op would not run there either: {missing}." * bool(missing)
        return (
            f"{asked_text}, which does not exist {where} (devices: {available}); "
            f"soft placement moved it to {short}.{anyway}"
        )
    if missing:
        return f"{asked_text}, but {missing}; soft placement moved it to {short}."
    if group_blocked:
        return (
            f"{asked_text}; its colocation group could not go there, so soft placement moved "
            f"it to {short}."
        )
    return f"{asked_text}; the placer could not honour it and moved it to {short}."


def dropped_colocation(target: str, where: str = "") -> str:
    """Rule 5: soft placement dropped a ``_class`` colocation with ``target`` (on ``where``,
    when known): a sentence to add to the op's reason."""
    runs_on = f", which runs on {where}" if where else ""
    return (
        f" It was also colocated with {target} (tf.compat.v1.colocate_with){runs_on}: that "
        "conflicted, and soft placement dropped it."
    )


def implicit_default(op_type: str, short: str, tail: str = "") -> str:
    """Rule 9: no request; the first device of the highest-priority type with a kernel."""
    return (
        f"No device requested: {_BY_PRIORITY} {op_type} (GPU before CPU), lowest index first: "
        f"{short}.{tail}"
    )


def implicit_local_task(op_type: str, task: str, short: str, tail: str = "") -> str:
    """Rule 9 in a cluster: among equals, a device of the session's own task (``task``).

    A session's graph is placed with no default device (GraphExecutionState::InitBaseGraph);
    ColocationGraph::FilterSupportedDevices sorts candidates with
    DeviceSet::SortPrioritizedDeviceVector: kernel priority, type priority (GPU before CPU),
    then Device::IsLocal() (local first), then name. Master::CreateSession gives the session's
    DeviceSet the other tasks' devices as RemoteDevice and the master's own local devices, the
    first of which is the client device that fetches go to.
    """
    return (
        f"No device requested: {_BY_PRIORITY} {op_type} (GPU before CPU) and, among those, a "
        f"device of {session_task(task)}, before other tasks': {short}.{tail}"
    )


def session_task(task: str) -> str:
    """How :func:`implicit_local_task` names the task whose devices are local to the placer."""
    return f"the task the session runs on, its master, {task}, where fetched values go,"


def instantiating_worker(task: str) -> str:
    """What :func:`session_task` says instead for a step a worker placed itself: a
    ``ParameterServerStrategy`` step the coordinator sent to worker ``task``, which places
    it with its own devices local and the ps tasks' remote."""
    return (
        f"the worker the coordinator sent the step to, {task}, which places it (its own "
        "devices local, the ps tasks' remote)"
    )


def implicit_remote_task(op_type: str, task: str, short: str, tail: str = "") -> str:
    """Rule 9 in a cluster whose session's task has no device of the best type."""
    return (
        f"No device requested: {_BY_PRIORITY} {op_type} (GPU before CPU) first, the session's "
        f"own task ({task}) only among equals, and that task has none of that type: "
        f"{short}.{tail}"
    )


def implicit_no_kernel(missing: str, short: str) -> str:
    """Rules 2 and 9: no request, and no GPU kernel (``missing`` says which): the CPU."""
    return f"No device requested and {missing}, so the placer chose the CPU: {short}."


def follows_input(op_type: str, source: str, short: str) -> str:
    """Rule 11: a metadata op or Identity with no request follows its input."""
    return (
        f"No device requested: the placer puts a {op_type} with its input "
        f"({source}) to avoid a copy, so it runs on {short}."
    )


def with_consumers(consumers: Sequence[str], short: str) -> str:
    """Rule 10: an op with no inputs and no request moves to its consumers' device."""
    distinct = list(dict.fromkeys(consumers))
    shown = ", ".join(distinct[:3])
    if len(distinct) > 3:
        shown += f" and {len(distinct) - 3:,} more"
    return (
        f"No device requested: an op with no inputs is placed with its consumers "
        f"({shown}), so it runs on {short}."
    )


# What a resource is, by the ops that use it (their type's start).
_RESOURCE_KINDS = (
    (
        ("IteratorGetNext", "MultiDeviceIteratorGetNext", "DeserializeIterator"),
        "a tf.data iterator",
    ),
    (("Lookup",), "a lookup table"),
    (
        (
            "ReadVariableOp",
            "AssignVariableOp",
            "AssignAddVariableOp",
            "AssignSubVariableOp",
            "ResourceApply",
            "ResourceSparseApply",
            "ResourceGather",
            "ResourceScatter",
            "VarIsInitializedOp",
            "VariableShape",
        ),
        "a variable",
    ),
)


def resource_argument(readers: Sequence[str], reader_types: Sequence[str], short: str) -> str:
    """A function's ``_Arg`` that carries a resource's handle, used by ``readers`` (of
    ``reader_types``): the runtime gives such an argument the device of the resource it
    points to, where the resource was made, before the placer runs."""
    kind = next(
        (
            name
            for starts, name in _RESOURCE_KINDS
            if reader_types and all(t.startswith(starts) for t in reader_types)
        ),
        "a resource",
    )
    distinct = list(dict.fromkeys(readers))
    shown = ", ".join(distinct[:3]) + (
        f" and {len(distinct) - 3:,} more" if len(distinct) > 3 else ""
    )
    return (
        f"A function's argument that carries {kind}'s handle (used by {shown}): the runtime "
        f"puts such an argument on the device of the resource it points to, where that was "
        f"made, before the placer runs: {short}."
    )


def no_kernel(op_type: str, device_type: str, dtypes: str = "") -> str:
    """Rule 2: no kernel of ``device_type`` serves an op: for its type, or ``for <dtypes>`` of
    its node def (a kernel registered for other dtypes)."""
    return f"{op_type} has no {device_type} kernel" + (f" for {dtypes}" if dtypes else "")


def resource_source(
    name: str,
    facts: GraphFacts,
    in_group: Callable[[str], bool],
    lowered: Callable[[str], bool] = lambda _: False,
) -> str:
    """Rule 4: the producer of a resource or ref op ``name`` uses that the placer keeps with it
    (``in_group``: in its colocation group); "" when none. A consumer exempt from resource
    colocation (a function call) has none; ``lowered``: a producer the runtime lowered away
    (a loop body's argument, carried from the resource by Enter/Switch on its device) also
    counts for the others."""
    producers = facts.resource_inputs.get(name, ())
    found = next((p for p in producers if p != name and in_group(p)), "")
    if found or facts.types.get(name) in RESOURCE_COLOCATION_EXEMPT:
        return found
    return next((p for p in producers if lowered(p)), "")


def link_words(facts: GraphFacts, name: str, partner: str) -> str:
    """How op ``name`` is tied to ``partner`` in the placer's colocation groups, in words
    (after "it"); the trace's reasons and the prediction's say it the same way."""
    resource = facts.resource_inputs
    if partner in resource.get(name, ()) or name in resource.get(partner, ()):
        if facts.types.get(partner) == "_Arg":
            return (
                f"shares a resource/ref edge with {partner} (the resource's handle, passed in "
                "as a function argument)"
            )
        owner = "" if partner in facts else functional_owner(name, facts)
        if owner:
            return (
                f"shares a resource/ref edge with {partner}, the argument that carries the "
                f"resource into the body of {owner} ({facts.types[owner]})"
            )
        return f"shares a resource/ref edge with {partner}"
    colocated = facts.colocated_with
    if partner in colocated.get(name, ()) or name in colocated.get(partner, ()):
        return f"is colocated with {partner} (tf.compat.v1.colocate_with)"
    return (
        f"is in one colocation group with {partner} (joined by resource/ref edges and "
        "tf.compat.v1.colocate_with)"
    )


def colocated_reason(requested: str, link: str, short: str) -> str:
    """Rules 4-6: an op placed by its colocation group (``link``: :func:`link_words`)."""
    if requested:
        return (
            f"Asked for {requested}, but it {link}; TF's placer keeps them together and "
            f"ignored the request, so it runs on {short}."
        )
    return f"No device requested, but it {link}, which pins both to one device: {short}."


def functional_owner(name: str, facts: GraphFacts | None) -> str:
    """The functional op (while/cond/call) whose lowering created ``name``, if any."""
    if facts is None:
        return ""
    path = name[5:] if name.startswith("Func/") else name
    parts = path.split("/")
    for end in range(len(parts) - 1, 0, -1):
        prefix = "/".join(parts[:end])
        if facts.types.get(prefix) in _FUNCTIONAL_TYPES:
            return prefix
    return ""


def round_robin_rule(job: str, who: str) -> str:
    """How variables are dealt out over the ``job`` tasks, by ``who`` ("the setter deals
    variables out"): tf.compat.v1.train.replica_device_setter's rule, and
    ParameterServerStrategy's (its ``_create_variable_round_robin``)."""
    return (
        f"{who} round-robin over the {job} tasks in the order they are created (task = "
        "creation index mod the number of ps tasks)"
    )


def scheduled_there(task: str, scheduled: Sequence[str], warmup: int) -> str:
    """Why a ``ParameterServerStrategy`` step's op is on worker ``task``: the calls of the
    step the coordinator sent there (``scheduled``: the worker of each call, in order; the
    first ``warmup`` were warm-up calls)."""
    calls = [
        f"{n + 1}{' (warm-up)' if n < warmup else ''}"
        for n, worker in enumerate(scheduled)
        if worker == task
    ]
    return (
        f"The step runs on {task} because the coordinator scheduled it there "
        f"(ClusterCoordinator.schedule: call{'s' * (len(calls) != 1)} "
        f"{', '.join(calls) or 'none'} of {len(scheduled)})."
    )


def ps_variable(variable: Mapping[str, Any], partitioner: str) -> str:
    """Which task holds a ``ParameterServerStrategy`` variable (shard), as the coordinator
    recorded it (name, device, shape, dtype, bytes; shard and shards), and the strategy's
    rule that put it there (``partitioner``: its ``variable_partitioner``'s class)."""
    task = task_of(variable["device"])
    size = f"{variable['shape']} {variable['dtype']}, {variable['bytes']:,} bytes"
    rule = round_robin_rule("ps", "ParameterServerStrategy deals variables and shards out")
    if "shard" in variable:
        return (
            f"Variable shard {variable['shard'] + 1} of {variable['shards']} of "
            f"{variable['variable']} ({variable['name']}: {size}), placed on {task} by the "
            f"strategy's variable_partitioner ({partitioner or 'variable_partitioner'}): "
            f"{rule}."
        )
    return f"Variable {variable['name']} ({size}), placed on {task}: {rule}."
