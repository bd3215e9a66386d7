"""TensorFlow's op and kernel registries, read in one place, each lookup cached once.

Every question this package asks of TensorFlow's registries goes through here: an op type's
``OpDef`` (:func:`registered_op_def`), its registered ``KernelDef``s with their device types,
priorities, constraints and host-memory args (:func:`registered_kernels`), and the facts by op
type read from them (kernel priorities per device type, output counts, ref and resource
outputs, the GPU kernels' dtypes for a cast). The per-node-def matching of kernels against a
node's attrs is :mod:`.kernels`'; the placer replay is :mod:`tfplace_widget._analyses.predict`.
An op type TensorFlow does not know (a library's op this process never loaded) has no
``OpDef`` and no kernels here. Moved together from _model/kernels.py, _model/graphfacts.py,
_sources/functions.py, analyses/predict.py and _analyses/findings/fallbacks.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .._model.kernels import SYMBOLIC_DEVICE_TYPES
from .capture import capture_native_output, import_tensorflow
from .probe import identity_follows_its_input

LABEL_ATTR = "_kernel"  # a node def's kernel label attr


# ---------------------------------------------------------------------------------------------
# OpDefs
# ---------------------------------------------------------------------------------------------
@lru_cache(maxsize=4096)
def registered_op_def(op_type: str) -> Any:
    """The ``OpDef`` TensorFlow registered for ``op_type``; None when it knows no such op."""
    import_tensorflow()  # a first import's start-up lines go to no cell (capture.py)
    from tensorflow.python.framework import op_def_registry

    try:
        return op_def_registry.get(op_type)
    except Exception:
        return None


@lru_cache(maxsize=4096)
def op_outputs(op_type: str) -> tuple[int | None, bool, bool]:
    """``(fixed output count or None, single output is ref/resource, is a dataset op)``."""
    op_def = registered_op_def(op_type)
    if op_def is None:
        return None, False, False
    args = list(op_def.output_arg)
    count: int | None = len(args)
    if any(a.number_attr or a.type_list_attr for a in args):
        count = None
    resource = len(args) == 1 and (args[0].is_ref or args[0].type == 20)  # DT_RESOURCE
    dataset = len(args) == 1 and args[0].type == 21 and _is_dataset_name(op_type)  # DT_VARIANT
    return count, resource, dataset


def _is_dataset_name(op_type: str) -> bool:
    """``DatasetOpKernel::IsDatasetOp``'s name test."""
    name = op_type
    if name.startswith("__wrapped__"):
        name = name[len("__wrapped__") :].split("_")[0] or name
    if name == "DatasetFromGraph" or name.endswith("Dataset"):
        return True
    stripped = name.rstrip("0123456789")
    return stripped != name and stripped.endswith("DatasetV")


def is_ref_output(op_type: str) -> bool:
    """Whether ``op_type``'s single output is a ref (``VariableV2``)."""
    op_def = registered_op_def(op_type)
    return bool(op_def and len(op_def.output_arg) == 1 and op_def.output_arg[0].is_ref)


@lru_cache(maxsize=4096)
def may_output_resource_or_ref(op_type: str) -> bool:
    """False only when ``op_type``'s registered OpDef rules out resource and ref outputs.

    Ref outputs come only from ``is_ref`` output args (type attrs cannot hold ref types);
    a type attr can hold ``resource`` unless its ``allowed_values`` leave it out. Unknown
    types (functions in the graph's library, custom ops) are checked on the graph.
    """
    from tensorflow.core.framework import types_pb2

    op_def = registered_op_def(op_type)
    if op_def is None:
        return True
    attrs = {a.name: a for a in op_def.attr}
    for arg in op_def.output_arg:
        if arg.is_ref or arg.type == types_pb2.DT_RESOURCE:
            return True
        for attr_name in (arg.type_attr, arg.type_list_attr):
            if not attr_name:
                continue
            attr = attrs.get(attr_name)
            allowed = attr.allowed_values.list.type if attr is not None else ()
            if not allowed or types_pb2.DT_RESOURCE in allowed:
                return True
    return False


# ---------------------------------------------------------------------------------------------
# KernelDefs
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Kernel:
    """One registered ``KernelDef``, parsed."""

    device_type: str
    label: str
    priority: int
    constraints: tuple[tuple[str, str, frozenset], ...]  # (attr, kind, allowed values)
    host_memory_args: frozenset[str]


@dataclass(frozen=True)
class OpKernels:
    """An op type's registered kernels and its ``OpDef``."""

    kernels: tuple[Kernel, ...]
    constrained: tuple[str, ...]  # attr names any kernel constrains
    op_def: Any  # the registered OpDef, or None
    # The attrs a node's facts depend on: the constrained ones, the number/type-list attrs that
    # set how many inputs and outputs an arg expands to (host-memory indices), the label.
    key_attrs: tuple[str, ...] = ()


@lru_cache(maxsize=4096)
def registered_kernels(op_type: str) -> OpKernels | None:
    """The op type's kernels and OpDef; None when TensorFlow does not know the op type. XLA's
    compilation kernels (:data:`SYMBOLIC_DEVICE_TYPES`, :func:`xla_jit_kernels`) are left
    out: the registry holds them only once XLA compiled something in this process, and the
    facts read from these kernels must not depend on that."""
    import_tensorflow()  # a first import's start-up lines go to no cell (capture.py)
    return _read_kernels(op_type, SYMBOLIC_DEVICE_TYPES, keep=False)


def _read_kernels(op_type: str, device_types: frozenset, keep: bool = True) -> OpKernels | None:
    """The op type's kernels of ``device_types`` (with ``keep=False``: of the others) as
    registered now, and its OpDef; None when TensorFlow does not know the op type."""
    from tensorflow.python.framework import kernels

    op_def = registered_op_def(op_type)
    try:
        registered = kernels.get_registered_kernels_for_op(op_type).kernel
    except Exception:  # an op of a library or a custom op this process never loaded
        return None
    if op_def is None and not registered:
        return None
    parsed = []
    for kernel in registered:
        if (kernel.device_type in device_types) != keep:
            continue
        constraints = []
        for constraint in kernel.constraint:
            allowed = constraint.allowed_values.list
            for kind in ("type", "s", "i", "b"):
                values = getattr(allowed, kind)
                if len(values):
                    constraints.append((constraint.name, kind, frozenset(values)))
                    break
        parsed.append(
            Kernel(
                device_type=kernel.device_type,
                label=kernel.label,
                priority=kernel.priority,
                constraints=tuple(constraints),
                host_memory_args=frozenset(kernel.host_memory_arg),
            )
        )
    constrained = tuple(sorted({name for k in parsed for name, _, _ in k.constraints}))
    lists = []
    if op_def is not None:
        for arg in (*op_def.input_arg, *op_def.output_arg):
            if arg.number_attr or arg.type_list_attr:
                lists.append(arg.number_attr or arg.type_list_attr)
    key_attrs = tuple(dict.fromkeys((*constrained, *lists, LABEL_ATTR)))
    return OpKernels(tuple(parsed), constrained, op_def, key_attrs)


@lru_cache(maxsize=4096)
def xla_jit_kernels(op_type: str) -> OpKernels | None:
    """The op type's XLA compilation kernels (``XLA_GPU_JIT``, ``XLA_CPU_JIT``: the ops XLA can
    compile, with their dtype constraints) and OpDef; None when TensorFlow does not know the
    op type. XLA adds them to TensorFlow's kernel registry on its first compilation
    (``XlaOpRegistry::RegisterCompilationKernels``), so the registry lists none before one:
    :func:`xla_kernels_registered` compiles a one-op function first (without running it).
    The CPU wheel registers ``XLA_GPU_JIT`` too (its GPU backend's op filter included)."""
    xla_kernels_registered()
    return _read_kernels(op_type, SYMBOLIC_DEVICE_TYPES)


@lru_cache(maxsize=1)
def xla_kernels_registered() -> bool:
    """Make XLA register its compilation kernels, once: ``x + 1`` compiled to HLO with
    ``experimental_get_compiler_ir`` (nothing runs; about 0.1 s). Idempotent in TensorFlow:
    a process that compiled with XLA already has them."""
    tf, _ = import_tensorflow()
    compiled = tf.function(lambda x: x + 1.0, jit_compile=True)
    with capture_native_output():  # XLA's start-up lines (CUDA probing) are no cell's
        try:
            compiled.experimental_get_compiler_ir(tf.TensorSpec([], tf.float32))(stage="hlo")
        except (TypeError, ValueError):  # a TensorFlow whose compiler IR takes tensors only
            compiled(tf.constant(1.0))
    return True


@lru_cache(maxsize=4096)
def registered_device_types(op_type: str) -> frozenset:
    """Device types with a kernel registered for ``op_type`` (``DEFAULT`` included, whatever
    the attrs); empty when the op type is unknown here."""
    op_kernels = registered_kernels(op_type)
    return frozenset(k.device_type for k in op_kernels.kernels) if op_kernels else frozenset()


@lru_cache(maxsize=4096)
def device_type_priorities(op_type: str) -> dict[str, int]:
    """The highest kernel priority per device type (``DEFAULT`` included) for ``op_type``, as
    the placer sorts device types by it; empty when the op type is unknown. Read, not changed."""
    op_kernels = registered_kernels(op_type)
    best: dict[str, int] = {}
    for kernel in op_kernels.kernels if op_kernels else ():
        best[kernel.device_type] = max(best.get(kernel.device_type, 0), kernel.priority)
    return best


def op_type_has_kernel(op_type: str, device_type: str) -> bool | None:
    """Whether any kernel of ``op_type`` (whatever its attrs) serves ``device_type``; None when
    the op type is unknown here. For traces without node defs: a necessary condition only."""
    op_kernels = registered_kernels(op_type)
    if op_kernels is None:
        return None
    types = {k.device_type for k in op_kernels.kernels}
    return device_type in types or ("DEFAULT" in types and device_type not in SYMBOLIC_DEVICE_TYPES)


def gpu_host_memory_outputs(op_type: str) -> bool | None:
    """Whether some GPU kernel of ``op_type`` keeps an output in host memory (int32 ``Add``,
    ``Shape``, int32 ``Const``...); None when the op type is unknown here. Per op type: for
    traces without node defs, where the dtype is not known."""
    op_kernels = registered_kernels(op_type)
    if op_kernels is None or op_kernels.op_def is None:
        return None
    outputs = {arg.name for arg in op_kernels.op_def.output_arg}
    return any(
        k.device_type in ("GPU", "DEFAULT") and k.host_memory_args & outputs
        for k in op_kernels.kernels
    )


def gpu_cast_options(op_type: str, attrs: dict[str, str]) -> set[str]:
    """The dtypes a cast could give ``op_type`` with ``attrs`` (type attr -> dtype names,
    "int32" or "int32,float32") for a GPU kernel: of the unlabelled GPU kernels that differ
    from the node in one type attr only, the dtypes they allow for it; empty when none (or
    the op type is unknown)."""
    registered = registered_kernels(op_type)
    if registered is None or not attrs:
        return set()
    from tensorflow.python.framework import dtypes

    def name(enum: int) -> str:
        try:
            return dtypes.as_dtype(enum).name
        except TypeError:
            return ""

    options: set[str] = set()
    for kernel in registered.kernels:
        if kernel.device_type != "GPU" or kernel.label:
            continue
        if any(kind != "type" for _, kind, _ in kernel.constraints):
            continue  # an attr the facts do not hold: cannot tell whether it matches
        wrong = [
            {name(v) for v in allowed}
            for attr, _, allowed in kernel.constraints
            if attr in attrs and not set(attrs[attr].split(",")) <= {name(v) for v in allowed}
        ]
        if len(wrong) == 1:
            options |= wrong[0]
    return options


class Registry:
    """This process's op and kernel registries, as the one object handed in with facts read
    from them (``GraphFacts.registry``) and by the prediction's entry points: the analyses'
    :class:`~tfplace_widget._model.kernel_registry.KernelRegistry`, answered by this module's
    functions. Pickled by name, so a trace sent to another process carries a reference, not a
    module."""

    def device_type_priorities(self, op_type: str) -> dict[str, int]:
        """:func:`device_type_priorities`."""
        return device_type_priorities(op_type)

    def registered_device_types(self, op_type: str) -> frozenset:
        """:func:`registered_device_types`."""
        return registered_device_types(op_type)

    def op_outputs(self, op_type: str) -> tuple[int | None, bool, bool]:
        """:func:`op_outputs`."""
        return op_outputs(op_type)

    def is_ref_output(self, op_type: str) -> bool:
        """:func:`is_ref_output`."""
        return is_ref_output(op_type)

    def gpu_host_memory_outputs(self, op_type: str) -> bool | None:
        """:func:`gpu_host_memory_outputs`."""
        return gpu_host_memory_outputs(op_type)

    def gpu_cast_options(self, op_type: str, attrs: dict[str, str]) -> set[str]:
        """:func:`gpu_cast_options`."""
        return gpu_cast_options(op_type, attrs)

    def identity_follows_its_input(self) -> bool:
        """:func:`~.probe.identity_follows_its_input` (a Session on two CPUs, once)."""
        return identity_follows_its_input()

    def __reduce__(self) -> str:
        return "REGISTRY"


REGISTRY = Registry()
