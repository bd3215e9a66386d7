"""``trace_placement(setup, cluster="local:worker=2", mode="function")``: TF2 code under
``tf.distribute.MultiWorkerMirroredStrategy``, traced on every task of a local cluster.

A multi-worker program runs the same script on every machine, each with its ``TF_CONFIG``.
So does this: ``setup`` (a function of a module, importable by name, or ``"module:function"``)
runs in one process per task, each started inside the local cluster's network namespace
(``local_cluster``, ``cluster_child``: the same isolation and clean-up as a TF1 cluster) with
the task's ``TF_CONFIG``; it makes the strategy, the model and the data, and returns the step
(``cluster_worker``). Each task traces its step with the function-mode tracer, and the traces
come back here, merged into one: every task's ops on its own devices
(``/job:worker/replica:0/task:K/device:CPU:0``), the reasons naming the strategy, each
collective op with its group (``group_key``, ``group_size``) and the tasks that took part.
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import sys
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from .._model.columns import TRANSFERS_COLUMNS
from .._model.errors import ClusterError, TraceError
from .._model.trace import STRATEGY_TASKS_RAW, PlacementTrace
from .cluster_ps import PS_JOBS, SERVING_JOBS, merged_ps, with_coordinator
from .local_cluster import (
    TaskRun,
    is_tensorflow_log_line,
    last_words,
    run_tf2_on_local_cluster,
)
from .mwms_gpus import GPUS_BUILD, host_cpus

# The strategy's class -> its public name (tf.distribute.MultiWorkerMirroredStrategy is the
# class CollectiveAllReduceStrategy).
PUBLIC_NAMES = {
    "CollectiveAllReduceStrategy": "MultiWorkerMirroredStrategy",
    "_CollectiveAllReduceStrategyExperimental": "MultiWorkerMirroredStrategy",
}
SUPPORTED_JOBS = ("worker", "chief")
# The log's sections, per task: what its process printed (the setup, the user's own calls,
# TensorFlow's placement log of them), then the log of its trace.
TASK_PRINTED = "tfplace: {task} ran {name}(); its process printed:"
TASK_TRACE = "tfplace: {task} traced the step; its trace's log:"
_EXAMPLE = (
    "# train.py\n"
    "def setup():\n"
    "    strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
    "    with strategy.scope():\n"
    "        model = ...\n"
    "    return train_step, (next(iterator),)\n\n"
    "from train import setup\n"
    "trace_placement(setup, cluster='local:worker=2', mode='function')"
)


class ModuleFunction:
    """``"module:function"``, imported in the task's process when called."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.__name__ = spec.partition(":")[2].rpartition(".")[2]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        module, _, name = self.spec.partition(":")
        target: Any = importlib.import_module(module)
        for part in name.split("."):
            target = getattr(target, part)
        return target(*args, **kwargs)


def shipped_setup(setup: Any, args: tuple, kwargs: Mapping[str, Any] | None) -> bytes:
    """The setup and its arguments, pickled for the tasks' processes; a ``TraceError`` that
    says how to make it importable when it cannot be sent."""
    if isinstance(setup, str):
        module, sep, name = setup.partition(":")
        if not sep or not module or not name:
            raise ClusterError(
                f"setup {setup!r} is not 'module:function': e.g. 'train:setup' for the "
                "function setup of train.py."
            )
        setup = ModuleFunction(setup)
    elif (
        getattr(setup, "__module__", None) == "__main__"
        or "<locals>" in getattr(setup, "__qualname__", "")
        or getattr(setup, "__name__", "") == "<lambda>"
    ):
        name = getattr(setup, "__qualname__", repr(setup))
        raise ClusterError(
            f"{name} cannot run on the cluster's tasks: each task is a process of its own "
            "that imports the setup by its module and name, as every machine of a real "
            f"cluster runs the same script, and {name} is defined "
            + (
                "in __main__ (a notebook or the script itself)"
                if getattr(setup, "__module__", None) == "__main__"
                else "inside a function"
            )
            + ". Put it at the top level of a module (a .py file on sys.path) and import it "
            "from there, or pass 'module:function'. E.g.\n\n" + _EXAMPLE
        )
    try:
        return pickle.dumps((setup, tuple(args), dict(kwargs or {})), pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise ClusterError(
            f"The setup or its arguments cannot be sent to the cluster's tasks ({exc}): pass "
            "a function of a module and arguments pickle can send (numbers, strings, NumPy "
            "arrays); make TensorFlow objects inside the setup."
        ) from exc


def trace_on_local_cluster(
    setup: Callable[..., Any] | str,
    args: tuple,
    kwargs: Mapping[str, Any] | None,
    plan: Any,
    *,
    device_count: Mapping[str, int] | None,
    options: dict[str, Any],
    reason: str,
) -> PlacementTrace:
    """Run ``setup`` on every task of the local cluster ``plan``, trace the step it returns
    there (``options``: the function-mode tracer's) and merge the tasks' traces."""
    with_ps = "ps" in plan.jobs
    unsupported = [job for job in plan.jobs if job not in (PS_JOBS if with_ps else SUPPORTED_JOBS)]
    if unsupported:
        raise ClusterError(
            f"TF2 code across a local cluster runs under MultiWorkerMirroredStrategy ('worker' "
            "and 'chief' tasks) or ParameterServerStrategy ('worker' and 'ps' tasks, and the "
            f"coordinator tfplace adds as 'chief'): job(s) {', '.join(unsupported)} are not "
            "supported. Use cluster='local:worker=2' or cluster='local:worker=2,ps=1'."
        )
    if with_ps:
        _ps_options(options)
        plan = with_coordinator(plan)
    blob = shipped_setup(setup, args, kwargs)
    worker = {
        "sys_path": [os.path.abspath(p) if p else os.getcwd() for p in sys.path],
        "device_count": dict(device_count or {}),
        "options": options,
        "role": "ps" if with_ps else "",
    }
    gpus = GPUS_BUILD.get()
    if gpus > 1 and with_ps:  # the coordinator also builds the step for workers with gpus GPUs
        worker.update(gpus_build=gpus)
    elif gpus > 1:  # each task also builds its step with gpus GPUs
        cpus = max(worker["device_count"].get("CPU", 1), host_cpus(gpus))
        worker.update(gpus_build=gpus, device_count={**worker["device_count"], "CPU": cpus})
    retried: list[str] = []
    while True:
        try:
            serving = SERVING_JOBS if with_ps else ()
            runs, note = run_tf2_on_local_cluster(plan, worker, [blob], serving)
            break
        except TraceError as exc:
            crash = _profiler_crash(exc)
            if crash and len(retried) < PROFILER_CRASH_RETRIES:
                retried.append(crash)
                continue
            logs = getattr(exc, "logs", {})
            exc.log = "".join(  # type: ignore[attr-defined]
                f"tfplace: {task} printed:\n{text}" for task, text in logs.items()
            )
            raise
    reruns = [f"{crash} The cluster ran again." for crash in retried]
    for line in reruns + ([note.split("\n", 1)[0]] if note else []):
        print(line.replace("tfplace: ", "tfplace: warning: ", 1), file=sys.stderr)
    note = "".join(f"{line}\n" for line in reruns) + note
    name = getattr(setup, "__name__", str(setup))
    return (merged_ps if with_ps else merged)(runs, name, reason, note)


def _ps_options(options: dict[str, Any]) -> None:
    """A ``ClusterError`` for a function-mode option a ParameterServerStrategy trace does not
    apply: the workers' TensorFlow instantiates the step the coordinator sends, as it is."""
    for key in ("overrides", "device_scope"):
        if options.get(key):
            raise ClusterError(
                f"{key}= is not applied under ParameterServerStrategy yet: the coordinator sends "
                "the step to the workers as it is. Leave it out, or change the step itself."
            )


# TensorFlow's profiler can abort a task's process while it collects the events of a step
# whose collectives ran over gRPC: the stack ends in TraceMeRecorder::Consume's
# SplitEventTracker::FindStartAndMerge, with "free(): invalid pointer" (7 traces of 40 of the
# two-worker test program, TF 2.21). Running the cluster again is all a user could do, so the
# tracer does it, and says so.
PROFILER_CRASH_RETRIES = 3
_PROFILER_COLLECTING = "Profiler session collecting data."


def _profiler_crash(exc: TraceError) -> str:
    """What to tell of a task that ended on a signal while TensorFlow's profiler collected its
    events (the last line TensorFlow logged before the C library's message); ``""`` for any
    other failure."""
    task, exit_code = getattr(exc, "failed_task", ("", 0))
    if exit_code >= 0:
        return ""
    log = getattr(exc, "logs", {}).get(task, "")
    logged = [line for line in log.splitlines() if is_tensorflow_log_line(line)]
    if not logged or not logged[-1].rstrip().endswith(_PROFILER_COLLECTING):
        return ""
    said = last_words(log)
    return f"tfplace: {task} ended on a signal while TensorFlow's profiler collected its events" + (
        f" ({said!r}: a TensorFlow bug)." if said else " (a TensorFlow bug)."
    )


def merged(runs: list[TaskRun], name: str, reason: str, note: str = "") -> PlacementTrace:
    """One trace of the tasks' traces: their ops, events and transfers side by side (each on
    its task's devices), the reasons naming the strategy, the collectives with their groups."""
    traces = [pickle.loads(run.trace) for run in runs]
    strategies = {run.header.get("strategy", "") for run in runs}
    strategy = next(iter(strategies)) if len(strategies) == 1 else ""
    strategy = PUBLIC_NAMES.get(strategy, strategy)
    if not strategy:
        raise TraceError(
            f"{name}() made no tf.distribute strategy on "
            + ("every task" if len(strategies) > 1 else "the tasks")
            + ": create tf.distribute.MultiWorkerMirroredStrategy() in it (it reads the task's "
            "TF_CONFIG, which tfplace sets), and build the model in strategy.scope()."
        )
    groups = _participants(runs)
    aligned = _on_one_clock(traces)
    ops_frames = []
    for run, trace in zip(runs, traces, strict=True):
        ops = trace.ops.copy()
        ops["reason"] = [
            _reason(str(op), str(why), strategy, run, groups)
            for op, why in zip(ops["op"], ops["reason"], strict=True)
        ]
        ops_frames.append(ops)
    first = traces[0]
    devices = list(dict.fromkeys(d for t in traces for d in t.devices))
    inputs: dict[str, list[str]] = {}
    for trace in traces:
        for op, producers in trace.inputs.items():
            inputs[op] = list(dict.fromkeys([*inputs.get(op, []), *producers]))
    raw: dict[str, bytes] = dict(first.raw)
    for run, trace in zip(runs[1:], traces[1:], strict=True):
        raw.update({f"{run.job}{run.task}_{key}": data for key, data in trace.raw.items()})
    tasks = {
        f"/job:{r.job}/task:{r.task}": {
            "collectives": r.header.get("collectives", {}),
            "gpu_requests": r.header.get("gpu_requests", {}),
            "inputs_to_device": r.header.get("inputs_to_device"),
            **({"gpus_build": r.header["gpus_build"]} if "gpus_build" in r.header else {}),
        }
        for r in runs
    }
    raw[STRATEGY_TASKS_RAW] = json.dumps({"strategy": strategy, "tasks": tasks}).encode()
    log = note + "".join(
        f"{TASK_PRINTED.format(task=f'/job:{run.job}/task:{run.task}', name=name)}\n{run.log}"
        f"{TASK_TRACE.format(task=f'/job:{run.job}/task:{run.task}')}\n{trace.log}\n"
        for run, trace in zip(runs, traces, strict=True)
    )
    result = PlacementTrace(
        ops=pd.concat(ops_frames, ignore_index=True),
        events=pd.concat([t.events for t in traces], ignore_index=True),
        transfers=pd.concat(
            [*(t.transfers for t in traces), _collective_transfers(runs, traces, groups)],
            ignore_index=True,
        ),
        devices=devices,
        inputs=inputs,
        log=f"tfplace: {reason}\n{log}",
        source=first.source,
        mode="function",
        notes=list(dict.fromkeys(n for t in traces for n in t.notes)),
        facts=first.facts,  # the same program on every task: the same graphs
        raw=raw,
        mode_reason=reason,
        xla=pd.concat([t.xla for t in traces], ignore_index=True),
        memory=pd.concat([t.memory for t in traces], ignore_index=True),
    )
    result.notes.append(
        f"{strategy} ran the step on {len(runs)} tasks "
        f"({', '.join(f'/job:{r.job}/task:{r.task}' for r in runs)}); each task's ops are on "
        "its own devices"
        + (
            ", on one clock (the tasks ran on this machine): times count from the first traced "
            "op of any task."
            if aligned
            else ", and each task's times count from its own first traced op."
        )
    )
    return result


def _on_one_clock(traces: list[PlacementTrace]) -> bool:
    """Shift each task's times so that all count from the first traced op of any task: the
    tasks ran on this machine, whose clock their profilers share (``functions.json``'s
    ``zero_us``: each trace's zero, µs since the epoch). ``False`` (nothing shifted) when a
    trace does not say its zero."""
    zeros = [json.loads(t.raw.get("functions.json") or b"{}").get("zero_us") for t in traces]
    if any(zero is None for zero in zeros):
        return False
    first = min(zeros)
    for trace, zero in zip(traces, zeros, strict=True):
        for frame in (trace.ops, trace.events, trace.xla):
            if "start_us" in frame and len(frame):
                frame["start_us"] = frame["start_us"] + (zero - first)
        if len(trace.memory):
            trace.memory["time_us"] = trace.memory["time_us"] + (zero - first)
    return True


def _participants(runs: list[TaskRun]) -> dict[tuple[str, int], list[str]]:
    """(op, group_key) -> the tasks whose trace ran that collective."""
    found: dict[tuple[str, int], list[str]] = {}
    for run in runs:
        for op, group in run.header.get("collectives", {}).items():
            found.setdefault((op, group.get("group_key", -1)), []).append(
                f"/job:{run.job}/task:{run.task}"
            )
    return found


def _collective_transfers(
    runs: list[TaskRun], traces: list[PlacementTrace], groups: dict[tuple[str, int], list[str]]
) -> pd.DataFrame:
    """A transfer per collective op and task that ran it: its input tensor, of the size the
    task contributes to the all-reduce, from the task's device to the next task of its group
    (the other task, with two; the ring's next one, with more), ``cross_task=True``. What
    crosses the network is that tensor's size per task, give or take TensorFlow's algorithm
    (a ring all-reduce sends 2(N-1)/N of it each way)."""
    devices = {
        f"/job:{run.job}/task:{run.task}": dict(zip(t.ops["op"], t.ops["device"], strict=True))
        for run, t in zip(runs, traces, strict=True)
    }
    rows = []
    for run in runs:
        task = f"/job:{run.job}/task:{run.task}"
        for op, group in run.header.get("collectives", {}).items():
            members = groups.get((op, group.get("group_key", -1)), [])
            if "bytes" not in group or len(members) < 2 or task not in members:
                continue
            peer = members[(members.index(task) + 1) % len(members)]
            src, dst = devices[task].get(op), devices.get(peer, {}).get(op)
            if src and dst:
                rows.append((group.get("input", f"{op}:0"), src, dst, group["bytes"], True))
    return pd.DataFrame(rows, columns=TRANSFERS_COLUMNS).astype({"bytes": "Int64"})


def _reason(
    op: str, why: str, strategy: str, run: TaskRun, groups: dict[tuple[str, int], list[str]]
) -> str:
    """The op's reason on its task, then what the strategy does with it."""
    task = f"/job:{run.job}/task:{run.task}"
    what = (
        "the step runs on every worker: MultiWorkerMirroredStrategy replicates it"
        if strategy == "MultiWorkerMirroredStrategy"
        else f"the step runs on every task under {strategy}"
    )
    said = f"{why.rstrip().rstrip('.')}. {what[0].upper()}{what[1:]} (this is {task}'s copy)."
    group = run.header.get("collectives", {}).get(op)
    if group is None:
        return said
    members = groups.get((op, group.get("group_key", -1)), [task])
    size = group.get("group_size")
    missing = "" if size is None or size == len(members) else f", {size} expected"
    how = "/".join(group[key] for key in ("merge_op", "final_op") if group.get(key))
    return (
        f"{said} A collective {group.get('type', 'op')} ({how or 'no merge op'}) of group_key "
        f"{group.get('group_key')}, group_size {size}: it exchanges its tensor with the same "
        f"op on {', '.join(members)} ({len(members)} tasks{missing})."
        + (
            f" Its input {group.get('input')} is {group['bytes']:,} bytes: what this task "
            "sends (trace.transfers, cross_task)."
            if "bytes" in group and len(members) > 1
            else ""
        )
    )
