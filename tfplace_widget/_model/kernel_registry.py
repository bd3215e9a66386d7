"""The questions the analyses ask of TensorFlow's op and kernel registries, as an interface.

The placer replay, the reasons of a run, the copies' causes and the findings' casts depend on
what TensorFlow registered (kernels per device type and their priorities, an op's outputs,
host-memory arguments) and on what this TensorFlow's placer does where versions differ. The
analyses do not import TensorFlow to learn it: whoever runs TensorFlow hands in an object with
these answers (:class:`KernelRegistry`), :class:`tfplace_widget._tfadapter.registry.Registry`
for this process's registries, and graph facts read in this process carry it
(``GraphFacts.registry``). Facts loaded from a file carry none: a question only TensorFlow can
answer then raises :class:`MissingRegistryError` instead of being asked of whatever TensorFlow
the process happens to import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class KernelRegistry(Protocol):
    """What TensorFlow's registries (and its placer) say, by op type: the answers are TF's."""

    def device_type_priorities(self, op_type: str) -> Mapping[str, int]:
        """The highest kernel priority per device type (``DEFAULT`` included); empty for an
        op type TensorFlow does not know."""
        ...

    def registered_device_types(self, op_type: str) -> frozenset:
        """Device types with a kernel for ``op_type`` (``DEFAULT`` included, whatever the
        attrs); empty for an unknown op type (no claim)."""
        ...

    def op_outputs(self, op_type: str) -> tuple[int | None, bool, bool]:
        """``(fixed output count or None, single output is ref/resource, is a dataset op)``."""
        ...

    def is_ref_output(self, op_type: str) -> bool:
        """Whether ``op_type``'s single output is a ref (``VariableV2``)."""
        ...

    def gpu_host_memory_outputs(self, op_type: str) -> bool | None:
        """Whether some GPU kernel of ``op_type`` keeps an output in host memory; None for an
        unknown op type."""
        ...

    def gpu_cast_options(self, op_type: str, attrs: dict[str, str]) -> set[str]:
        """The dtypes a cast could give ``op_type`` with ``attrs`` for a GPU kernel."""
        ...

    def identity_follows_its_input(self) -> bool:
        """Whether this TensorFlow's placer puts a lone Identity on its input's device
        (``MatchIdentityOperation``; TensorFlow 2.16's has no such step)."""
        ...


class MissingRegistryError(ValueError):
    """A question only TensorFlow's registries answer, asked with none handed in."""


def require_registry(registry: Any, facts: Any, what: str) -> KernelRegistry:
    """``registry``, else the one ``facts`` were read with (``GraphFacts.registry``); raises
    :class:`MissingRegistryError` naming ``what`` needs it when there is neither."""
    found = registry if registry is not None else getattr(facts, "registry", None)
    if found is None:
        raise MissingRegistryError(
            f"{what} needs TensorFlow's op and kernel registries, and none was handed in: these "
            "facts were not read in this process (a trace loaded from a file, or without its "
            "graph). Pass registry=tfplace_widget._tfadapter.registry.REGISTRY (this process's "
            "TensorFlow), or use predict_placement(trace), which hands it in."
        )
    return found
