"""The user's TensorFlow state a TF2 trace's calls reach, for ``try_fix`` to run the code again
from the same state each time and leave it as it found it.

Every ``tf.function`` call hands its resources to the runtime as inputs (a variable it captured
or was given: its handle; a tf.data iterator; a lookup table): :func:`note_handed` records them
as the calls are made (``function_copies``' hook on ``Context.call_function``). A variable's
handle carries its dtype (``_handle_data``), so its value can be read and assigned through the
handle alone, whoever holds the variable (a model's weights, an optimizer's slots and iteration
counter, Keras 3's ``SeedGenerator`` states, a ``tf.random.Generator``'s).
:class:`KeptState` reads those values before ``try_fix`` runs anything and writes them back
before each run and after the last, bit for bit.

What it cannot put back is said, never ignored: a resource that is not a variable and outlives
a run (a tf.data iterator's position moves with every call), and a variable it had no value of
(made or first used during the runs). Python state and the state random ops keep in their
kernels are invisible here: ``try_fix`` finds them by running the code as it is twice from the
same variables (``_tracing/fixes.py``). Variables that only eager ops outside any
``tf.function`` read or write are not seen either.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

# Ops that only read a lookup table: a table they reach needs no restoring.
_READS_A_TABLE = ("LookupTableFind", "LookupTableSize", "LookupTableExport")
_CALLS = ("PartitionedCall", "StatefulPartitionedCall")


class Handed(NamedTuple):
    """A resource a call handed to a function: a variable's handle (``handle``, with its
    ``dtype``), or a weak reference to another resource's (``ref``: an iterator's handle would
    keep the iterator, its buffers and threads alive); the function and the input's index."""

    handle: Any
    dtype: Any
    ref: Callable[[], Any] | None
    function: str
    index: int


def note_handed(handed: dict[int, Handed], function: str, inputs: Iterable[Any]) -> None:
    """Record in ``handed`` (by the handle's identity) each resource among a call's ``inputs``
    not recorded yet."""
    for index, tensor in enumerate(inputs):
        if id(tensor) not in handed and _is_resource(tensor):
            dtype = variable_dtype(tensor)
            if dtype is not None:
                handed[id(tensor)] = Handed(tensor, dtype, None, function, index)
            else:
                handed[id(tensor)] = Handed(None, None, weakref.ref(tensor), function, index)


def variable_dtype(handle: Any) -> Any:
    """The dtype of the variable behind ``handle``, or None when it is no variable's (an
    iterator's, a table's: no dtype in its handle data)."""
    from tensorflow.python.framework import dtypes

    data = getattr(handle, "_handle_data", None)
    if data is None or not data.is_set or not data.shape_and_type:
        return None
    dtype = data.shape_and_type[0].dtype
    if dtype in (0, dtypes.variant.as_datatype_enum):  # DT_INVALID; a TensorList, a dataset
        return None
    return dtypes.as_dtype(dtype)


class KeptState:
    """The values of the variables among ``handed`` as they were when made, kept in host memory,
    to put back (:meth:`restore`) before each run and after the last; what the runs reached that
    cannot be put back (:meth:`saw`, :attr:`unrestorable`)."""

    def __init__(self, handed: Mapping[int, Handed]) -> None:
        self._variables: dict[int, tuple[Any, Any]] = {}  # id -> (handle, dtype)
        self._values: dict[int, Any] = {}
        self._others: dict[int, Handed] = {}  # resources that are no variables, seen so far
        self._unknown: set[int] = set()  # variables first met in a run: no value kept
        self._persistent: dict[int, str] = {}  # non-variable resources seen in two runs
        for key, item in handed.items():
            if item.handle is None:
                self._others[key] = item
                continue
            value = _read(item.handle, item.dtype)
            if value is not None:  # a variable deleted since: nothing to keep
                self._variables[key] = (item.handle, item.dtype)
                self._values[key] = value

    @property
    def variables(self) -> int:
        """How many variables' values are kept."""
        return len(self._values)

    def restore(self) -> None:
        """Write the kept values back into their variables."""
        import tensorflow as tf
        from tensorflow.python.ops import gen_resource_variable_ops

        for key, (handle, dtype) in self._variables.items():
            gen_resource_variable_ops.assign_variable_op(
                handle, tf.constant(self._values[key], dtype=dtype)
            )

    def values(self) -> list[Any]:
        """The kept variables' values now, in a fixed order (host copies)."""
        return [_read(handle, dtype) for handle, dtype in self._variables.values()]

    def saw(self, handed: Mapping[int, Handed]) -> None:
        """Take note of the resources a run's calls handed to functions: a variable with no
        kept value, and a resource that is no variable met in an earlier run too (or before
        try_fix), cannot be put back."""
        for key, item in handed.items():
            if key in self._variables:
                continue
            if item.handle is not None:
                self._unknown.add(key)
                continue
            earlier = self._others.get(key)
            alive = item.ref() if item.ref is not None else None
            same = earlier is not None and earlier.ref is not None and earlier.ref() is alive
            if same and alive is not None and key not in self._persistent:
                kind = _resource_kind(item)
                if kind:
                    self._persistent[key] = kind
            if not same:
                self._others[key] = item

    @property
    def unrestorable(self) -> list[str]:
        """What the runs reached that could not be put back, in words (empty when nothing)."""
        said = []
        if self._persistent:
            kinds = sorted(set(self._persistent.values()))
            said.append(
                f"the code reads {len(self._persistent)} resource(s) that are not variables and "
                f"outlive a run ({', '.join(kinds)}): their state moves with every call and "
                "cannot be put back, so the runs did not start from the same state (and the "
                "runs moved it on)"
            )
        if self._unknown:
            said.append(
                f"{len(self._unknown)} variable(s) the trace had not seen were made or first "
                "used during the runs: their values before the runs are unknown, so they could "
                "not be put back"
            )
        return said

    def made_iterators(self) -> bool:
        """Whether the calls were handed a tf.data iterator made for one run only (as
        ``model.fit`` makes one for each call)."""
        return any(
            key not in self._persistent and _resource_kind(item) == "a tf.data iterator"
            for key, item in self._others.items()
        )


def _is_resource(tensor: Any) -> bool:
    import tensorflow as tf

    return getattr(tensor, "dtype", None) == tf.resource


def _read(handle: Any, dtype: Any) -> Any:
    """A host copy of the variable's value, or None when it is gone."""
    import numpy as np
    from tensorflow.python.framework import errors
    from tensorflow.python.ops import gen_resource_variable_ops

    try:
        value = gen_resource_variable_ops.read_variable_op(handle, dtype)
    except (errors.NotFoundError, errors.FailedPreconditionError, errors.InvalidArgumentError):
        return None
    return np.array(value, copy=True)


def _resource_kind(item: Handed) -> str:
    """What a resource that is no variable is, from the ops of the function it was handed to
    that use it: "" for a lookup table only read (nothing to put back)."""
    from tensorflow.python.eager import context

    kinds = _consumers(context.context(), item.function, item.index, depth=0)
    if kinds and all(kind.startswith(_READS_A_TABLE) for kind in kinds):
        return ""
    if any("Iterator" in kind for kind in kinds):
        return "a tf.data iterator"
    return f"a resource read by {', '.join(sorted(kinds))}" if kinds else "a resource"


def _consumers(ctx: Any, function: str, index: int, depth: int) -> set[str]:
    """The op types in ``function`` (and the functions it calls) that take its ``index``-th
    input."""
    try:
        fdef = ctx.get_function_def(function)
        arg = fdef.signature.input_arg[index].name
    except Exception:  # not in the eager context: unknown
        return set()
    found: set[str] = set()
    for node in fdef.node_def:
        for position, name in enumerate(node.input):
            if name.split(":")[0] != arg:
                continue
            if node.op in _CALLS and depth < 8:
                found |= _consumers(ctx, node.attr["f"].func.name, position, depth + 1)
            else:
                found.add(node.op)
    return found
