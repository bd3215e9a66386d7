"""Which device types have a kernel for a node def, decided the way TensorFlow decides it.

TensorFlow's pip wheel registers its GPU kernels even on a machine without a GPU, so "would this
op run on a GPU?" has an exact answer here. The op type alone is not enough: about a third of
node defs whose type has a GPU kernel have none for their dtypes (int32 ``MatMul``). This module
reads the registered ``KernelDef``s of an op type and matches them against the node's attrs
(defaults filled from its ``OpDef``) as ``FindKernelRegistration`` does
(core/framework/op_kernel.cc, kernel_def_util.cc):

- a kernel matches when every constraint holds: a type attr (or each type of a type list) in the
  allowed types, a string/int/bool attr among the allowed values; its label must equal the node's
  ``_kernel`` attr ("" when absent);
- among the matches of one device type the highest ``priority`` wins;
- when no kernel of that device type matches, a ``DEFAULT`` kernel serves it, unless the type is
  one of XLA's JIT compilation types (TF's "symbolic execution devices").

Facts are cached per (op type, constrained attr values, label): a trace of 100k nodes has a few
hundred distinct keys. The registered kernels themselves, and the facts by op type alone (kernel
priorities, host-memory outputs), are read by :mod:`.registry`. ``tests/tfadapter/test_kernels.py``
compares the result with TensorFlow's own lookup (``TryFindKernelClass``) for node defs of every
registered op type.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from typing import Any

from .._model.kernels import KERNEL_DEVICE_TYPES, UNKNOWN, KernelFacts
from . import registry
from .registry import LABEL_ATTR as _LABEL_ATTR
from .registry import (  # noqa: F401  (facts by op type: the registry's, importable from here too)
    SYMBOLIC_DEVICE_TYPES,
    Kernel,
    OpKernels,
    device_type_priorities,
    gpu_host_memory_outputs,
    op_type_has_kernel,
    registered_device_types,
)


def kernel_facts(node_def: Any, attrs: Any = None) -> KernelFacts:
    """The :class:`KernelFacts` of a TensorFlow ``NodeDef`` (cached per op type and the attrs
    any of its kernels constrains). ``attrs``: the node's ``attr`` map when the caller holds
    it already (reading it again from the proto is a new map view each time)."""
    op = node_def.op
    op_kernels = registry.registered_kernels(op)
    if op_kernels is None:
        return UNKNOWN
    if attrs is None:
        attrs = node_def.attr  # ("in" then [] : a protobuf map's .get is ten times slower here)
    key = [op]
    for name in op_kernels.key_attrs:
        if name in attrs:
            # A set type is its own key (an int: the AttrValue holds that and nothing else, as
            # its serialization would say); other values by their serialization.
            value = attrs[name]
            key.append(value.type or value.SerializeToString())
        else:
            key.append(None)
    key = tuple(key)
    facts = _cache.get(key)
    if facts is None:
        facts = _cache[key] = _facts(node_def, op_kernels)
    return facts


_cache: dict[tuple, KernelFacts] = {}


def kernel_facts_of(nodes: Sequence[Any], ops: Sequence[str], attrs: Sequence[Any]) -> list:
    """``[kernel_facts(node, attr) for ...]`` over a graph's node defs, their op types and
    attr maps (read by the caller already): the same facts, with the cache keys made per op
    type, one attr column at a time, instead of one call and key loop per node."""
    facts: list = [UNKNOWN] * len(nodes)
    rows_of: dict[str, list[int]] = {}
    for row, op in enumerate(ops):
        rows_of.setdefault(op, []).append(row)
    cache = _cache
    for op, rows in rows_of.items():
        op_kernels = registry.registered_kernels(op)
        if op_kernels is None:
            continue
        maps = [attrs[row] for row in rows]
        columns = []
        for name in op_kernels.key_attrs:
            # "in" then []: a protobuf map's .get is ten times slower here
            values = [a[name] if name in a else None for a in maps]  # noqa: SIM401
            # as in kernel_facts: a set type by its enum value, other values serialized
            columns.append([None if v is None else v.type or v.SerializeToString() for v in values])
        for row, key in zip(rows, zip(repeat(op), *columns), strict=True):
            found = cache.get(key)
            if found is None:
                found = cache[key] = _facts(nodes[row], op_kernels)
            facts[row] = found
    return facts


def _facts(node_def: Any, op_kernels: OpKernels) -> KernelFacts:
    attrs = _attrs_with_defaults(node_def, op_kernels.op_def)
    label = attrs[_LABEL_ATTR].s.decode() if _LABEL_ATTR in attrs else ""
    served = [t for t in KERNEL_DEVICE_TYPES if _match(op_kernels, t, attrs, label) is not None]
    gpu = _match(op_kernels, "GPU", attrs, label)
    host_inputs = host_outputs = ()
    if gpu is not None:
        inputs, outputs = _arg_names(op_kernels.op_def, attrs)
        host_inputs = tuple(i for i, arg in enumerate(inputs) if arg in gpu.host_memory_args)
        host_outputs = tuple(i for i, arg in enumerate(outputs) if arg in gpu.host_memory_args)
        args = len(inputs) + len(outputs)
        gpu_kernel = "host" if args and len(host_inputs) + len(host_outputs) == args else "yes"
    elif any(k.device_type in ("GPU", "DEFAULT") for k in op_kernels.kernels):
        gpu_kernel = "dtype"
    else:
        gpu_kernel = "no"
    described = " ".join(
        f"{name}={_describe(attrs[name])}"
        for name in op_kernels.constrained
        if name in attrs and _describe(attrs[name])
    )
    return KernelFacts(" ".join(sorted(served)), gpu_kernel, host_inputs, host_outputs, described)


def _describe(value: Any) -> str:
    """A type attr's value as dtype names ("int32", "float32,int64"); "" for other attrs."""
    from tensorflow.python.framework import dtypes

    which = value.WhichOneof("value")
    types = [value.type] if which == "type" else list(value.list.type) if which == "list" else []
    try:
        return ",".join(dtypes.as_dtype(t).name for t in types)
    except TypeError:  # an invalid enum value
        return ""


def has_kernel(node_def: Any, device_type: str) -> bool:
    """Whether a kernel of any ``device_type`` (``XLA_CPU``, ``TPU``...) serves this node def."""
    return _served(registry.registered_kernels(node_def.op), node_def, device_type)


def has_xla_kernel(node_def: Any, device_type: str = "XLA_GPU_JIT") -> bool:
    """Whether XLA can compile this node def for ``device_type`` (``XLA_GPU_JIT``: in a
    ``jit_compile=True`` function on a GPU): a compilation kernel of that type matches its
    attrs (:func:`~.registry.xla_jit_kernels`). Cached per op type and the attrs its
    compilation kernels constrain, as :func:`kernel_facts` is."""
    op_kernels = registry.xla_jit_kernels(node_def.op)
    if op_kernels is None:
        return False
    attrs = node_def.attr
    key = (node_def.op, device_type) + tuple(
        (attrs[name].type or attrs[name].SerializeToString()) if name in attrs else None
        for name in op_kernels.key_attrs
    )
    found = _xla_cache.get(key)
    if found is None:
        found = _xla_cache[key] = _served(op_kernels, node_def, device_type)
    return found


_xla_cache: dict[tuple, bool] = {}


def _served(op_kernels: OpKernels | None, node_def: Any, device_type: str) -> bool:
    """Whether one of ``op_kernels`` of ``device_type`` matches the node def's attrs."""
    if op_kernels is None:
        return False
    attrs = _attrs_with_defaults(node_def, op_kernels.op_def)
    label = attrs[_LABEL_ATTR].s.decode() if _LABEL_ATTR in attrs else ""
    return _match(op_kernels, device_type, attrs, label) is not None


def _match(op_kernels: OpKernels, device_type: str, attrs: Any, label: str) -> Kernel | None:
    """The kernel TensorFlow would pick for ``device_type``: the highest-priority match of that
    type, else (for a non-symbolic type) the highest-priority matching ``DEFAULT`` kernel."""
    for wanted in (device_type, "DEFAULT"):
        if wanted == "DEFAULT" and device_type in SYMBOLIC_DEVICE_TYPES:
            return None
        best = None
        for kernel in op_kernels.kernels:
            if kernel.device_type != wanted or kernel.label != label:
                continue
            if _attrs_match(kernel, attrs) and (best is None or kernel.priority > best.priority):
                best = kernel
        if best is not None:
            return best
    return None


def _attrs_match(kernel: Kernel, attrs: Any) -> bool:
    for name, kind, allowed in kernel.constraints:
        if name not in attrs:
            return False  # TensorFlow reports an error; no kernel of this def serves the node
        value = attrs[name]
        if kind == "type":
            which = value.WhichOneof("value")
            values = [value.type] if which == "type" else list(value.list.type)
        elif kind == "s":
            values = [value.s]
        elif kind == "i":
            values = [value.i]
        else:
            values = [value.b]
        if not all(v in allowed for v in values):
            return False
    return True


def _attrs_with_defaults(node_def: Any, op_def: Any) -> dict[str, Any]:
    """The node's attrs, with the OpDef's defaults for those it leaves out (as TF fills them)."""
    attrs = dict(node_def.attr)
    if op_def is not None:
        for attr in op_def.attr:
            if attr.name not in attrs and attr.HasField("default_value"):
                attrs[attr.name] = attr.default_value
    return attrs


def _arg_names(op_def: Any, attrs: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The arg name of each input and each output index (list args expanded)."""
    if op_def is None:
        return [], []

    def expand(args: Any) -> list[str]:
        names = []
        for arg in args:
            if arg.number_attr:
                count = attrs[arg.number_attr].i if arg.number_attr in attrs else 1
            elif arg.type_list_attr:
                value = attrs.get(arg.type_list_attr)
                count = len(value.list.type) if value is not None else 1
            else:
                count = 1
            names.extend([arg.name] * count)
        return names

    return expand(op_def.input_arg), expand(op_def.output_arg)
