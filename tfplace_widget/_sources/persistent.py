"""Persistent memory: the tensors a device holds from before a traced step to after it, which
none of the step's allocation records holds (they were allocated before it).

Two sources, each TensorFlow's own:

- graph mode's ``step_stats``: a node's ``memory_stats.persistent_memory_size``, what its
  kernel recorded as persistent (``OpKernelContext::record_persistent_memory_allocation``):
  a ``Const``'s value, a ref variable's (``VariableV2``) buffer. The largest a node recorded
  in any run counts (a kernel records its tensor on every run);
- the placed graph, for resource variables, whose buffers no kernel of the step records
  (``VarHandleOp`` records 0): a ``VarHandleOp``'s ``shape`` and ``dtype`` attrs (graph
  mode), a function's resource ``_Arg``'s ``_handle_shapes`` and ``_handle_dtypes`` (TF2: the
  variables a ``tf.function`` captured), elements times the dtype's size. A shape not fully
  known counts nothing.

A variable two handles hand out is held once per device: a graph's ``VarHandleOp``s are the same
variable when they name the same resource (``container``, ``shared_name``:
:func:`variable_identity`), a function's resource ``_Arg``s when the calls gave them the same
handle (the tracer's record: ``Executed.variable_of``): Keras's ``model.fit`` with validation
captures the model's variables in its training and its evaluation step.
"""

from __future__ import annotations

from typing import Any

from .._tfadapter.protos import dtype_size

_DT_RESOURCE = 20
VARIABLE_HANDLES = frozenset({"VarHandleOp"})


def variable_bytes(node: Any) -> int:
    """The bytes of the resource variable(s) ``node`` (a ``NodeDef`` of a placed graph) hands
    out: a ``VarHandleOp``'s, or a resource ``_Arg``'s that carries its handle's shapes; 0 for
    any other node or a shape not fully known."""
    op = node.op
    attr = node.attr
    if op in VARIABLE_HANDLES:
        if "shape" not in attr or "dtype" not in attr:
            return 0
        return _tensor_bytes(attr["shape"].shape, attr["dtype"].type)
    if op != "_Arg" or "_handle_shapes" not in attr or attr["T"].type != _DT_RESOURCE:
        return 0
    shapes = attr["_handle_shapes"].list.shape
    types = attr["_handle_dtypes"].list.type if "_handle_dtypes" in attr else []
    if len(shapes) != len(types):
        return 0
    return sum(_tensor_bytes(s, t) for s, t in zip(shapes, types, strict=True))


def variable_identity(node: Any) -> str:
    """The resource a ``VarHandleOp`` (a ``NodeDef``) hands out, ``container/shared_name``;
    "" for any other node or a handle with no shared name (its own resource, by node name)."""
    if node.op not in VARIABLE_HANDLES or "shared_name" not in node.attr:
        return ""
    shared = node.attr["shared_name"].s.decode()
    if not shared:
        return ""
    container = node.attr["container"].s.decode() if "container" in node.attr else ""
    return f"{container}/{shared}"


def _tensor_bytes(shape: Any, dtype: int) -> int:
    if shape.unknown_rank:
        return 0
    elements = 1
    for dim in shape.dim:
        if dim.size < 0:
            return 0
        elements *= dim.size
    return elements * dtype_size(dtype)
