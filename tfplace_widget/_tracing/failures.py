"""What a failed graph-mode Session run means, and how to fix it: TensorFlow's messages turned
into ``TraceError``s that name the op, the devices and the option to change."""

from __future__ import annotations

import re
from typing import Any

from .._model.devices import short_device
from .._model.errors import TraceError, ran_out_message


class Phase:
    """The run in progress: variable initialisation, warm-up step ``index`` or traced step."""

    def __init__(self) -> None:
        self.name = "init"
        self.index = 0


_MISSING_FEED = re.compile(r"must feed a value for placeholder tensor '([^']+)'")
_CANNOT_ASSIGN = re.compile(r"Cannot assign a device for operation ([^:\s]+)")
_DEVICE_SPEC = re.compile(r"device specification (\S+)|was explicitly assigned to (\S+)")
_GROUP_DEVICE = re.compile(
    r"colocated with a group of nodes that required incompatible device '([^']+)'"
)
_CANNOT_COLOCATE = re.compile(
    r"Cannot colocate nodes \{\{colocation_node ([^}]+)\}\} and \{\{colocation_node ([^}]+)\}\}: "
    r"([^\n\[]*)"
)
_MALFORMED = re.compile(r"Malformed device specification '([^']*)' in node: \{name:'([^']+)'")


def explain_run_error(
    exc: Exception,
    devices: list[str],
    timeout_s: float | None,
    *,
    soft: bool = False,
    fed: bool = False,
    operation_timeout_ms: int = 0,
    phase: Phase | None = None,
    warmup: int = 0,
    steps: int = 1,
) -> TraceError:
    import tensorflow as tf

    message = str(exc)
    available = ", ".join(short_device(d) for d in devices) or "none"
    if isinstance(exc, tf.errors.OutOfRangeError) and phase is not None:
        return _ran_out(exc, phase, warmup, steps)
    if isinstance(exc, tf.errors.DeadlineExceededError):
        # RunOptions.timeout_in_ms (timeout_s) wins over the session's default, the config's
        # operation_timeout_in_ms; with neither, an op itself gave up.
        if timeout_s is not None:
            return TraceError(
                f"The run took longer than timeout_s={timeout_s} s and was stopped. Raise "
                "timeout_s, or make the graph smaller."
            )
        if operation_timeout_ms > 0:
            return TraceError(
                f"The run took longer than operation_timeout_in_ms={operation_timeout_ms} "
                f"({operation_timeout_ms / 1000:g} s) of the ConfigProto passed as config, and "
                "was stopped. Raise config.operation_timeout_in_ms (or pass timeout_s=..., "
                "which overrides it), or make the graph smaller."
            )
        return TraceError(
            f"An op of the run gave up with DeadlineExceededError: {first_lines(message)} "
            "Fix the op it names in the builder."
        )
    missing = _MISSING_FEED.search(message)
    if missing:
        why = (
            " (a variable's initial value reads it: initializers run once, untraced, before "
            "the steps)"
            if phase is not None and phase.name == "init"
            else ""
        )
        return TraceError(
            f"Placeholder {missing.group(1)!r} needs a value{why}: pass "
            f"feed_dict={{{missing.group(1)!r}: value}}."
        )
    malformed = _MALFORMED.search(message)
    if malformed:
        return TraceError(
            f"Op {malformed.group(2)!r} asks for the device {malformed.group(1)!r}, which "
            "TensorFlow cannot parse. Fix its tf.device(...) string: use a form like '/cpu:0', "
            "'/gpu:1' or '/job:localhost/replica:0/task:0/device:CPU:0'. The devices here are "
            f"{available}."
        )
    cannot = _CANNOT_ASSIGN.search(message)
    if cannot:
        spec = _DEVICE_SPEC.search(message)
        wanted = next((g for g in spec.groups() if g), "?") if spec else "?"
        group = _GROUP_DEVICE.search(message)
        if group:  # its own request is fine; a colocated op (or a variable) asked for this
            wanted = group.group(1) + (
                ", the device its colocation group asks for (tf.compat.v1.colocate_with, "
                "or a variable and its reads)"
            )
        why = (
            "soft placement is on, but it only drops a request's device type and index, so "
            "TensorFlow still cannot place it"
            if soft
            else "with soft placement off, TensorFlow needs that device"
        )
        fix = "" if soft else ", or pass soft_placement=True to let TF move it"
        return TraceError(
            f"Cannot place op {cannot.group(1)!r} on {wanted.strip('.,')}: {why}, and the "
            f"devices here are {available}. Request one of those{fix}.\n\n"
            f"TensorFlow said: {first_lines(message)}"
        )
    conflict = _CANNOT_COLOCATE.search(message)
    if conflict:
        first, second, detail = conflict.groups()
        fix = "" if soft else ", or pass soft_placement=True to let TF settle it"
        return TraceError(
            f"TensorFlow must put {first!r} and {second!r} on one device "
            "(tf.compat.v1.colocate_with, or a variable and its reads), but their device "
            f"requests conflict: {detail.strip().rstrip('.')}. The devices here are "
            f"{available}. Make the requests agree{fix}.\n\n"
            f"TensorFlow said: {first_lines(message)}"
        )
    if fed and (isinstance(exc, (ValueError, TypeError)) or "Unsupported object type" in message):
        return TraceError(
            f"TensorFlow rejected a feed_dict value: {first_lines(message)} Check feed_dict "
            "values (shape and dtype must match each placeholder)."
        )
    if isinstance(exc, (ValueError, TypeError, tf.errors.InvalidArgumentError)):
        hint = (
            " Check feed_dict values (shape and dtype must match each placeholder), or fix"
            if fed
            else " Fix"
        )
        return TraceError(
            f"TensorFlow rejected the run: {first_lines(message)}{hint} the op it names "
            "in the builder."
        )
    if isinstance(exc, tf.errors.AlreadyExistsError) and "profiling session" in message:
        return TraceError(
            "Another trace is in its traced run in this process, and TensorFlow's profiler "
            "records one run at a time. Trace again when it has finished (or interrupt it)."
        )
    return TraceError(f"The traced run failed with {type(exc).__name__}: {first_lines(message)}")


def _ran_out(exc: Any, phase: Phase, warmup: int, steps: int) -> TraceError:
    """An input (dataset iterator, queue) ran out: which run it ran out in, and the fix."""
    node_def = getattr(exc, "node_def", None)
    op, op_type = getattr(node_def, "name", "") or "?", getattr(node_def, "op", "")
    what = "dataset" if "Iterator" in op_type else "queue" if "Queue" in op_type else "input"
    where = f" (OutOfRangeError at {op!r})"
    story = ran_out_message(what, phase.name, phase.index, warmup, steps, where=where)
    return TraceError(f"{story}\n\nTensorFlow said: {first_lines(str(exc), 3)}")


def first_lines(message: str, limit: int = 6) -> str:
    # Graph execution errors open with "Detected at node 'X' defined at (most recent call
    # last):" and the Python stack that built X (in a notebook: runpy, ipykernel, ...); skip
    # that stack so the lines kept are TensorFlow's own message.
    lines = [
        line
        for line in message.strip().splitlines()
        if line.strip() and not _DEFINED_AT.match(line)
    ]
    return "\n".join(lines[:limit])


_DEFINED_AT = re.compile(
    r"\s*(Detected at node .* defined at \(most recent call last\):|File \"|Graph execution error:"
    r"|Original stack trace for )"
)
