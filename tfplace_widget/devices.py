"""Moved to :mod:`tfplace_widget.model.devices`; this import path stays for code and notebooks that use it."""

from .model.devices import (  # noqa: F401
    DeviceSpec,
    canonical_device,
    crosses_tasks,
    device_sort_key,
    lane_kind,
    lane_kinds,
    lane_owner,
    name_in_task,
    parse_device,
    short_device,
    task_of,
    tasks_of,
)

__all__ = [
    "DeviceSpec",
    "canonical_device",
    "crosses_tasks",
    "device_sort_key",
    "lane_kind",
    "lane_kinds",
    "lane_owner",
    "name_in_task",
    "parse_device",
    "short_device",
    "task_of",
    "tasks_of",
]
