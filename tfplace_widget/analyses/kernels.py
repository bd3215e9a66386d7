"""Moved to :mod:`tfplace_widget.model.kernels` (the facts) and
:mod:`tfplace_widget.tfadapter.kernels` (reading them); this import path stays for code and
notebooks that use it."""

from ..model.kernels import GPU_KERNEL_VALUES, KERNEL_DEVICE_TYPES, UNKNOWN, KernelFacts  # noqa: F401
from ..tfadapter.kernels import (  # noqa: F401
    SYMBOLIC_DEVICE_TYPES,
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
