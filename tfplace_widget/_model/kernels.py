"""What the kernel registry says about one node def (:class:`KernelFacts`), as data.

The facts are read from TensorFlow's registry by :mod:`tfplace_widget._tfadapter.kernels`; here
they are plain values that frames, facts files and the analyses use without TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass

# Device types the ``kernels`` column reports (the ones a user's machine places ops on).
KERNEL_DEVICE_TYPES = ("CPU", "GPU")
# Device types DEFAULT kernels do not serve: XLA registers these as symbolic (op_kernel.cc).
SYMBOLIC_DEVICE_TYPES = frozenset({"XLA_CPU_JIT", "XLA_GPU_JIT", "TPU_XLA_JIT"})
GPU_KERNEL_VALUES = ("yes", "host", "dtype", "no", "NA")


@dataclass(frozen=True)
class KernelFacts:
    """What the kernel registry says about one node def."""

    kernels: str  # device types with a kernel for these attrs, sorted: "CPU GPU", "CPU", ""
    # "yes"; "host" (the GPU kernel keeps every input and output in host memory: it sits on
    # the GPU but computes on the host); "dtype" (the op type has GPU kernels, none for these
    # attrs); "no" (no GPU kernel for the op type at all); "NA" (node def unknown).
    gpu_kernel: str
    gpu_host_inputs: tuple[int, ...] = ()  # inputs the matched GPU kernel keeps in host memory
    gpu_host_outputs: tuple[int, ...] = ()  # outputs likewise
    attrs: str = ""  # the attrs kernels are chosen by, as text: "T=int32"

    @property
    def dtypes(self) -> str:
        """The type attrs' values, for a message: "int32", "int32, float32" or ""."""
        return ", ".join(dict.fromkeys(part.split("=", 1)[1] for part in self.attrs.split()))

    def has(self, device_type: str) -> bool:
        """Whether a kernel of ``device_type`` serves this node def."""
        return device_type in self.kernels.split()


UNKNOWN = KernelFacts(kernels="", gpu_kernel="NA")
