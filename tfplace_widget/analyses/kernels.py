"""Moved to :mod:`tfplace_widget.model.kernels`; this import path stays for code and notebooks that use it."""

from ..model.kernels import (  # noqa: F401
    GPU_KERNEL_VALUES,
    KERNEL_DEVICE_TYPES,
    SYMBOLIC_DEVICE_TYPES,
    UNKNOWN,
    KernelFacts,
    device_type_priorities,
    gpu_host_memory_outputs,
    has_kernel,
    kernel_facts,
    op_type_has_kernel,
    registered_device_types,
)

__all__ = [
    "GPU_KERNEL_VALUES",
    "KERNEL_DEVICE_TYPES",
    "KernelFacts",
    "SYMBOLIC_DEVICE_TYPES",
    "UNKNOWN",
    "device_type_priorities",
    "gpu_host_memory_outputs",
    "has_kernel",
    "kernel_facts",
    "op_type_has_kernel",
    "registered_device_types",
]
