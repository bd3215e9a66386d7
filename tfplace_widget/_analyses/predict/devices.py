"""Device-name maths for the placer, and the device set of a prediction.

``DeviceNameUtils`` (core/util/device_name_utils.cc) on 5-tuples ``(job, replica, task, type,
id)``: merging requests the way colocation groups do, soft placement's dropped fields, the
device type priorities; and which devices a prediction places on (:func:`predicted_devices`,
:func:`master_task`). Moved out of the former ``analyses/predict.py`` unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from ..._model.devices import DeviceSpec, canonical_device, device_sort_key, parse_device, task_of

# DeviceFactory priorities (GPU 210, CPU 70): GPU before CPU; other types after them.
_DEVICE_TYPE_PRIORITY = {"GPU": 210, "CPU": 70, "TPU": 60}
HOST = "/job:localhost/replica:0/task:0/device:CPU:0"

# A device name as TensorFlow's DeviceNameUtils::ParsedName: (job, replica, task, type, id),
# None where unset.
Name = tuple


class _PlacementError(Exception):
    """A constraint TensorFlow refuses (the message is TensorFlow's, shortened)."""


# ---------------------------------------------------------------------------------------------
# DeviceNameUtils, on 5-tuples
# ---------------------------------------------------------------------------------------------
_EMPTY: Name = (None, None, None, None, None)
_FIELDS = ("job", "replica", "task", "type", "id")


@lru_cache(maxsize=4096)
def _parse(request: str) -> Name:
    spec = parse_device(request)
    return (spec.job, spec.replica, spec.task, spec.type, spec.index)


def _name_str(name: Name) -> str:
    return DeviceSpec(*name).to_string()


def _merge(target: Name, other: Name, soft: bool) -> Name:
    """``DeviceNameUtils::MergeDevNames``: raise on a conflict soft placement cannot drop."""
    out = list(target)
    for i in range(3):  # job, replica, task: conflicts are errors even under soft placement
        if other[i] is not None:
            if out[i] is not None and out[i] != other[i]:
                raise _PlacementError(
                    f"Cannot merge devices with incompatible {_FIELDS[i]}s: "
                    f"'{_name_str(target)}' and '{_name_str(other)}'"
                )
            out[i] = other[i]
    if other[3] is not None:
        if out[3] is not None and out[3] != other[3]:
            if not soft:
                raise _PlacementError(
                    f"Cannot merge devices with incompatible types: "
                    f"'{_name_str(target)}' and '{_name_str(other)}'"
                )
            out[3] = out[4] = None
            return tuple(out)
        out[3] = other[3]
    if other[4] is not None:
        if out[4] is not None and out[4] != other[4]:
            if not soft:
                raise _PlacementError(
                    f"Cannot merge devices with incompatible ids: "
                    f"'{_name_str(target)}' and '{_name_str(other)}'"
                )
            out[4] = None
            return tuple(out)
        out[4] = other[4]
    return tuple(out)


def _ensure(target: Name, other: Name) -> Name:
    """``EnsureSpecification``: fill the fields ``target`` leaves open from ``other``."""
    if other == _EMPTY:
        return target
    return tuple(o if t is None else t for t, o in zip(target, other, strict=True))


def _compatible(a: Name, b: Name) -> bool:
    return all(x is None or y is None or x == y for x, y in zip(a, b, strict=True))


def _override(target: Name, other: Name) -> Name:
    return tuple(t if o is None else o for t, o in zip(target, other, strict=True))


def _matches(spec: Name, device: Name) -> bool:
    return all(s is None or s == d for s, d in zip(spec, device, strict=True))


def _type_key(entry: tuple[str, int]) -> tuple:
    dtype, priority = entry
    return (-priority, -_DEVICE_TYPE_PRIORITY.get(dtype, 0), dtype)


def _merge_supported(target: list, other: list) -> list:
    """``Member::MergeSupportedDevices``: the intersection, with whose priorities."""
    other_of = dict(other)
    mine = sorted([(t, p) for t, p in target if t in other_of], key=_type_key)
    theirs = sorted([(t, other_of[t]) for t, _ in target if t in other_of], key=_type_key)
    mine_prioritized = any(p for _, p in mine)
    theirs_prioritized = any(p for _, p in theirs)
    if mine_prioritized and theirs_prioritized:
        if [t for t, _ in mine] == [t for t, _ in theirs]:
            return mine
        return sorted([(t, 0) for t, _ in mine], key=_type_key)
    return theirs if theirs_prioritized else mine


def _soft_name(requested: Name, keep_from: tuple) -> Name:
    """``GetPreferredSoftDeviceName``/``GetSoftDeviceName``: the request without its type and
    index unless one of ``keep_from`` (assigned, resource device) sets them."""
    job, replica, task, dtype, index = requested
    if all(name[3] is None for name in keep_from):
        dtype = None
    if all(name[4] is None for name in keep_from):
        index = None
    return (job, replica, task, dtype, index)


def gpu_devices(gpus: int, task: str = "/job:localhost/replica:0/task:0") -> list[str]:
    """The canonical names of ``gpus`` GPUs of ``task`` (this process's by default)."""
    return [f"{task}/device:GPU:{k}" for k in range(gpus)]


def predicted_devices(devices: Iterable[str], gpus: int) -> list[str]:
    """The device set of a prediction: ``devices`` other than GPUs, plus ``gpus`` GPUs on each
    of their tasks (each task of a cluster is a machine of its own, so each gets the GPUs;
    one process has one task, ``/job:localhost``). Display order; a CPU of this process
    when ``devices`` names none."""
    hosts = [d for d in devices if "device:GPU:" not in d]
    tasks = {}
    for device in devices:
        try:
            spec = parse_device(canonical_device(device))
        except ValueError:
            continue
        if spec.job is not None:
            tasks[(spec.job, spec.replica or 0, spec.task or 0)] = None
    if not tasks:
        tasks[("localhost", 0, 0)] = None
    added = [
        gpu
        for job, replica, task in tasks
        for gpu in gpu_devices(gpus, f"/job:{job}/replica:{replica}/task:{task}")
    ]
    found = sorted(set(hosts) | set(added), key=device_sort_key)
    return found or [HOST, *gpu_devices(gpus)]


_CLIENT_COPY_TYPES = frozenset({"_Send", "_Recv", "_HostSend", "_HostRecv"})


def master_task(trace: Any) -> str:
    """The task a cluster trace's session ran on (its master, ``/job:worker/task:0``), whose
    devices the placer prefers among equally good ones; ``""`` for a trace on one task.

    The fetches say it: the runtime sends each fetched tensor to the client device with a
    ``_send_<op>_<slot>`` node (feeds arrive by ``_recv_<op>_<slot>``), placed on that device
    (graph/subgraph.cc ``SendFetchRewrite``/``RecvFeedRewrite``; the device is
    ``DeviceSet::client_device()``, set by ``Master::CreateSession`` to the master's first
    local device). TensorFlow does not allow user op names starting with ``_``. With no
    fetch or feed recorded: the ``chief`` job's task 0, else worker 0 (where tfplace and
    TensorFlow's conventions run the session), else the first task.
    """
    tasks = sorted({task_of(d) for d in getattr(trace, "devices", ())} - {""})
    if len(tasks) <= 1:
        return ""
    ops = trace.ops
    if len(ops):
        names = ops["op"].astype(str)
        client = ops["type"].isin(_CLIENT_COPY_TYPES) & names.str.match(r"_(?:send|recv)_")
        for device in ops.loc[client, "device"]:
            task = task_of(str(device))
            if task in tasks:
                return task
    for job in ("chief", "worker"):
        if f"/job:{job}/task:0" in tasks:
            return f"/job:{job}/task:0"
    return tasks[0]
