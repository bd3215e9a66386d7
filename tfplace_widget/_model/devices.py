"""Device names: parse TensorFlow's old and new spellings, canonicalise them, match requests.

Pure string code (no TensorFlow import) so traces from any TF era compare equal:
``/job:localhost/replica:0/task:0/gpu:0`` and ``/device:GPU:0`` name the same device.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

_DEFAULT_JOB = "localhost"
# Devices sort by this priority in the placer (GPU before CPU); lower sorts first here.
_TYPE_ORDER = {"GPU": 0, "TPU": 1, "CPU": 2}


@dataclass(frozen=True)
class DeviceSpec:
    """The fields of a (possibly partial) device string; ``None`` means "not specified"."""

    job: str | None = None
    replica: int | None = None
    task: int | None = None
    type: str | None = None
    index: int | None = None  # None: unspecified or "*"

    def is_empty(self) -> bool:
        return all(v is None for v in (self.job, self.replica, self.task, self.type, self.index))

    def matches(self, device: DeviceSpec) -> bool:
        """True when every field this spec sets equals the field of ``device``."""
        return all(
            mine is None or mine == theirs
            for mine, theirs in (
                (self.job, device.job),
                (self.replica, device.replica),
                (self.task, device.task),
                (self.type, device.type),
                (self.index, device.index),
            )
        )

    def to_string(self) -> str:
        """The spec as TensorFlow writes a device name: ``/job:w/replica:0/device:GPU:*``."""
        parts = [
            f"/{field}:{value}"
            for field, value in (("job", self.job), ("replica", self.replica), ("task", self.task))
            if value is not None
        ]
        if self.type is not None:
            parts.append(f"/device:{self.short()}")
        return "".join(parts)

    def short(self) -> str:
        """``CPU:1``, ``GPU:*`` or ``""`` for a spec without a device type."""
        if self.type is None:
            return ""
        return f"{self.type}:{'*' if self.index is None else self.index}"


_PART = re.compile(r"^(job|replica|task|device|cpu|gpu|tpu|xla_cpu|xla_gpu)?:?(.*)$", re.I)


@lru_cache(maxsize=4096)
def parse_device(name: str) -> DeviceSpec:
    """Parse a device string in any of TensorFlow's spellings; raise ``ValueError`` if malformed.

    Accepts ``/job:x/replica:0/task:0/device:GPU:0``, ``/gpu:0``, ``GPU:0``, ``/device:CPU:*``,
    ``/cpu:1``, ``/job:worker`` and ``""``.
    """
    text = (name or "").strip()
    if not text:
        return DeviceSpec()
    job = replica = task = dtype = index = None
    parts = [p for p in text.split("/") if p]
    i = 0
    while i < len(parts):
        part = parts[i]
        key, _, value = part.partition(":")
        low = key.lower()
        if low == "job" and value:
            job = value
        elif low in ("replica", "task") and value.isdigit():
            if low == "replica":
                replica = int(value)
            else:
                task = int(value)
        elif low == "device" and value:
            dtype, index = _type_and_index(value, name)
        elif value == "" and ":" not in part and re.fullmatch(r"[A-Za-z_]+", key):
            # bare "/cpu" or "/device"-less "GPU"
            dtype, index = key.upper(), None
        elif re.fullmatch(r"[A-Za-z_]+", key) and (value.isdigit() or value == "*"):
            dtype, index = key.upper(), None if value == "*" else int(value)
        else:
            raise ValueError(
                f"Malformed device string {name!r}: cannot read {part!r}. "
                "Use a form like '/cpu:0', '/device:GPU:1' or "
                "'/job:localhost/replica:0/task:0/device:CPU:0'."
            )
        i += 1
    return DeviceSpec(job, replica, task, dtype, index)


def _type_and_index(value: str, name: str) -> tuple[str, int | None]:
    dtype, _, idx = value.partition(":")
    if not re.fullmatch(r"[A-Za-z_]+", dtype) or not (idx == "" or idx == "*" or idx.isdigit()):
        raise ValueError(
            f"Malformed device string {name!r}: {value!r} is not TYPE:INDEX. "
            "Use a form like '/device:CPU:0' or '/gpu:1'."
        )
    return dtype.upper(), (int(idx) if idx.isdigit() else None)


@lru_cache(maxsize=4096)
def canonical_device(name: str) -> str:
    """Full canonical name of a concrete device: ``/job:localhost/replica:0/task:0/device:GPU:0``.

    Stream and memcpy lanes (``/device:GPU:0/stream:7``) map to their owning device.
    Returns ``""`` for an empty name; names that are not concrete devices (no index, as in
    ``/device:GPU:*``, or a bare word such as Chrome's ``Allocators``) are returned unchanged.
    """
    owner = lane_owner(name)
    try:
        spec = parse_device(owner)
    except ValueError:
        return name
    if spec.type is None or spec.index is None:
        return name
    return (
        f"/job:{spec.job or _DEFAULT_JOB}/replica:{spec.replica or 0}/task:{spec.task or 0}"
        f"/device:{spec.type}:{spec.index or 0}"
    )


_LANE_SUFFIX = re.compile(r"/(stream:[^/]*|memcpy|sync)$", re.I)


def lane_owner(lane: str) -> str:
    """The device part of a step_stats lane: ``/device:GPU:0/stream:7`` -> ``/device:GPU:0``."""
    return _LANE_SUFFIX.sub("", lane or "")


def lane_kind(lane: str) -> str:
    """``device`` (the op-level lane), ``stream``, ``stream:all``, ``memcpy`` or ``sync``."""
    match = _LANE_SUFFIX.search(lane or "")
    if not match:
        return "device"
    suffix = match.group(1).lower()
    if suffix == "stream:all":
        return "stream:all"
    if suffix.startswith("stream:") and "<memcpy" in suffix:
        return "memcpy"
    if suffix.startswith("stream"):
        return "stream"
    return suffix


def lane_kinds(lanes: pd.Series) -> np.ndarray:
    """:func:`lane_kind` of every lane in a column, computed once per distinct lane."""
    return _kinds(*pd.factorize(lanes))


def _kinds(codes: np.ndarray, unique: Sequence) -> np.ndarray:
    kinds = np.array([lane_kind(lane) for lane in unique] + [""], dtype=object)
    return kinds[codes]


@dataclass(frozen=True, eq=False)
class EventKeys:
    """An events frame's ``device`` and ``lane`` columns as integer codes (``pd.factorize``:
    -1 for a missing value; the distinct values, an object array, in order of first
    appearance), for the views that group the same events by both, the timeline's lanes and
    the device chips: at a million events each factorize is about 0.1 s CPU.

    Made by the caller for one use (the panel: once per trace it draws, handed to both) from
    the frame as it is then; never kept beside the frame, so a frame edited in place is
    factorized again by the next use."""

    device_codes: np.ndarray
    devices: np.ndarray
    lane_codes: np.ndarray
    lanes: np.ndarray

    @classmethod
    def of(cls, events: pd.DataFrame) -> EventKeys:
        """The keys of ``events`` as it is now."""
        device_codes, devices = pd.factorize(events["device"])
        lane_codes, lanes = pd.factorize(events["lane"])
        return cls(
            device_codes,
            np.asarray(devices, dtype=object),
            lane_codes,
            np.asarray(lanes, dtype=object),
        )

    def lane_kinds(self) -> np.ndarray:
        """:func:`lane_kinds` of the lane column."""
        return _kinds(self.lane_codes, self.lanes)


@lru_cache(maxsize=4096)
def short_device(name: str) -> str:
    """``CPU:1`` for a device of this process (what a narrow table column shows); in a cluster
    ``/job:ps/task:1/CPU:0``, since the task is what matters there (and ``tf.device`` takes it).

    A name that is not a device string (an odd lane in a loaded trace) is returned as it is.
    """
    try:
        spec = parse_device(canonical_device(name)) if name else DeviceSpec()
    except ValueError:
        return name
    if spec.type is None or (
        spec.job in (None, _DEFAULT_JOB) and not spec.replica and not spec.task
    ):
        return spec.short()
    return task_of(spec) + "/" + spec.short()


def name_in_task(name: str) -> str:
    """``CPU:0``: a device as its task knows it (a chip inside its task's group needs no task)."""
    return short_device(name).rsplit("/", 1)[-1]


def task_of(device: str | DeviceSpec) -> str:
    """The task a device belongs to, as ``tf.device`` takes it: ``/job:ps/task:1`` (with
    ``/replica:N`` when N is not 0); a name without job or task is on ``/job:localhost/task:0``,
    one that is not a device string gives ``""``."""
    try:
        spec = device if isinstance(device, DeviceSpec) else parse_device(canonical_device(device))
    except ValueError:
        return ""
    replica = f"/replica:{spec.replica}" if spec.replica else ""
    return f"/job:{spec.job or _DEFAULT_JOB}{replica}/task:{spec.task or 0}"


def crosses_tasks(sources: Sequence[str], targets: Sequence[str]) -> np.ndarray:
    """Per (source, destination) pair of devices: on different tasks of a cluster (another
    job, replica or task: a tensor between them goes over the network, not through memory)?"""
    pairs = zip(sources, targets, strict=True)
    return np.fromiter(
        (_task_key(src) != _task_key(dst) for src, dst in pairs), dtype=bool, count=len(sources)
    )


@lru_cache(maxsize=4096)
def _task_key(device: str) -> tuple:
    """``(job, replica, task)`` of a device name; the name itself when it is not one."""
    try:
        spec = parse_device(canonical_device(device))
    except ValueError:
        return (device,)
    return (spec.job or _DEFAULT_JOB, spec.replica or 0, spec.task or 0)


def tasks_of(devices: Iterable[str]) -> list[str]:
    """The distinct tasks of ``devices`` (:func:`task_of`), in order, names that are not
    device strings left out: more than one means the trace ran across a cluster."""
    return [task for task in dict.fromkeys(map(task_of, devices)) if task]


def device_sort_key(name: str) -> tuple:
    """Display order: GPUs, then TPUs, then CPUs, then anything else; by task and index."""
    try:
        spec = parse_device(canonical_device(name))
    except ValueError:  # not a device string (a loaded trace's odd lane): last, by name
        return (1, "", 0, 0, 9, name, 0)
    return (
        0,
        spec.job or "",
        spec.replica or 0,
        spec.task or 0,
        _TYPE_ORDER.get(spec.type or "", 5),
        spec.type or "",
        spec.index or 0,
    )
