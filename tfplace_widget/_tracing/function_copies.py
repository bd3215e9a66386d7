"""Function mode's traced calls run copies of the user's FunctionDefs, registered in the eager
context under other names, so that the user's own instantiated functions stay cached.

TensorFlow instantiates a function (placement, Grappler, executors: about 0.4 s for 300 ops,
25 s for a MobileNetV2 training step) once per eager kernel-cache key, and records its placed
graph (``enable_run_metadata``) only then. The key is the function's name, its call attrs (the
ConfigProto: soft placement, Grappler options) and its inputs' devices. A trace needs an
instantiation it can record: clearing the kernel cache for it (``clear_kernel_cache``) dropped
the user's instantiations too, and the user's next call paid a new one. While
:func:`calls_run_copies` is active, ``Context.call_function`` (how every eager ``tf.function``
call reaches TensorFlow) runs ``<name>_tfplace_copy<n>`` instead of ``<name>``: the same body,
with the functions it calls (``PartitionedCall``'s ``f``, loop bodies, branches...) copied and
renamed too, so TensorFlow instantiates it afresh and records it, and leaves the user's entries
alone. Removing the copies afterwards (``remove_function``) drops exactly their cached kernels.

When the trace was a function's first call, the user's own function has no instantiation with
the user's settings yet, and the user's next call would pay it (25 s for that training step).
:func:`instantiate_for_the_user` makes it for them after the trace, with nothing run: each
function the trace called is called once more as the user calls it (its name, the same inputs,
the user's settings and device) under a cancellation manager cancelled beforehand. TensorFlow
instantiates the function and caches its kernel, then refuses to start it ("Function was
cancelled before it was started"): no op runs, so no variable, iterator or RNG moves. A
function already instantiated costs a cache lookup. Not so a function XLA compiles: its call is
one XlaLaunch kernel that runs in spite of the cancelled manager, so it is never called again
(the traced calls ran the user's own, with the user's Grappler settings).

Instantiated is not yet ready to run: TensorFlow builds a function's executor (the graph copied,
its runtime optimizations, one kernel per node: about 1.5 ms for 300 ops) at its first run, after
the cancellation check, so a cancelled call cannot build it, and nothing else reachable from
Python does. Only a real run of the user's own function does. So, when the trace is a function's
first call (its FunctionDef did not exist before the trace, so nothing has instantiated it), its
first warm-up call runs the user's own function with the user's settings, unrecorded, as the
user's own first call would have (:meth:`FunctionCopies.start_warm_up`): the user's next call finds
it instantiated and its executor built. Its copy is then instantiated for the traced calls
without running (recorded: the trace's placed graph), and builds its executor in the first traced
call, before its first op starts. No call is added: a training step still runs ``warmup + steps``
times.

A top-level function that TensorFlow renames when it is called (the experimental small-constant
and summary optimizers fold arguments into ``<name>`` + a suffix) is called as it is. So is a
function XLA compiles (``_XlaMustCompile``: ``jit_compile=True``, a Keras step on a GPU): XLA
keys its compiled programs by the function's name, so a copy would be compiled again (0.5 s
for 300 ops on XLA:CPU), and there is no placed graph to record anyway: the trace reads the
cluster from the profile and the function's FunctionDef (``tracing.xla``).
"""

from __future__ import annotations

import contextlib
import itertools
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from .._model.records import HandedVariable
from .user_state import Handed, note_handed

COPY_MARK = "_tfplace_copy"
_FUNCTION_ATTRS = ("f", "body", "cond", "then_branch", "else_branch", "branches")
# FunctionDef attrs under which TensorFlow calls a function by a name derived from its own.
_RENAMED_WHEN_CALLED = ("runtime_constant_optimization", "disable_summaries_at_runtime")


def original_name(fname: str) -> str:
    """The user's function a copy's name stands for (``fname`` itself when not a copy)."""
    return re.sub(rf"{COPY_MARK}\d+", "", fname)


def is_copy(fname: str) -> bool:
    """Whether ``fname`` names one of the copies (not a function of the user's)."""
    return COPY_MARK in fname


def xla_compiled(fdef: Any) -> bool:
    """Whether XLA compiles the function as a whole (``_XlaMustCompile``: ``jit_compile=True``)."""
    return "_XlaMustCompile" in fdef.attr and bool(fdef.attr["_XlaMustCompile"].b)


def reachable_functions(ctx: Any, names: Iterable[str]) -> list[str]:
    """``names`` and every function they call (``PartitionedCall``'s ``f``, loop bodies,
    branches...), transitively, as far as the eager context has their FunctionDefs."""
    pending = list(names)
    found: list[str] = []
    while pending:
        fname = pending.pop()
        if fname in found:
            continue
        found.append(fname)
        try:
            fdef = ctx.get_function_def(fname)
        except Exception:  # a function of another library: nothing to follow
            continue
        for node in fdef.node_def:
            for attr in _FUNCTION_ATTRS:
                if attr in node.attr:
                    value = node.attr[attr]
                    pending += [value.func.name] if value.func.name else []
                    pending += [f.name for f in value.list.func]
    return found


class UserCall(NamedTuple):
    """A call of the user's function as the trace's code made it (its first): enough to make
    the same call again (:func:`instantiate_for_the_user`)."""

    name: Any  # as ``Context.call_function`` got it (str or bytes)
    inputs: Any
    num_outputs: int
    device: str  # the calling thread's device scope (``Context.device_name``)
    # the variables the function captured, by their handles (:func:`captured_variable_names`)
    variables: Mapping[int, tuple[Any, str, int]] = {}


def variable_handles(
    definitions: list[str | None], calls: Mapping[str, UserCall]
) -> list[list[HandedVariable | None]]:
    """Per entry (its FunctionDef name in ``definitions``), the variable each input of its
    call hands out (``calls``: each function's call in the last traced call), None for an input
    that is no resource handle, nothing for a function whose call was not seen. A variable's
    handle is one EagerTensor, given to every function that captured it (a concrete function's
    ``captured_inputs``, its FunctionDef's trailing resource arguments): by its identity, the
    variables are numbered in the order they are met, and named as the call's ``variables``
    name them."""
    import tensorflow as tf

    numbers: dict[int, str] = {}
    found: list[list[HandedVariable | None]] = []
    for fname in definitions:
        call = calls.get(fname) if fname else None
        inputs = list(call.inputs) if call is not None else []
        found.append(
            [
                _named(numbers.setdefault(id(tensor), f"handle {len(numbers)}"), tensor, call)
                if getattr(tensor, "dtype", None) == tf.resource
                else None
                for tensor in inputs
            ]
        )
    return found


def _named(identity: str, handle: Any, call: UserCall | None) -> HandedVariable:
    known = call.variables.get(id(handle)) if call is not None else None
    if known is None or known[0] is not handle:
        return HandedVariable(identity, "")
    return HandedVariable(identity, known[1], known[2])


def captured_variable_names(function: Any) -> dict[int, tuple[Any, str, int]]:
    """The variables the calling function captured, by their handles: id of a handle -> the
    handle, the variable's name as TensorFlow names it (``tf.Variable.name`` less the ``:0`` of
    its handle's output; Keras 3 names a variable by its path, ``dense/kernel``) and its bytes
    (its shape's elements times its dtype's size; 0 when its shape is not fully known).
    ``function``: the one that called ``Context.call_function`` (an ``AtomicFunction``, from
    its ``call_flat``), whose graph keeps the variables it reads; {} for anything else (a
    variable's handle then goes unnamed: its holder's op name is shown)."""
    graph = getattr(function, "_cached_graph", None)  # not ``graph``: that would build one
    try:
        variables = list(getattr(graph, "variables", ()))
    except AssertionError:  # a variable it reads was deleted: the call will say so
        return {}
    found = {}
    for variable in variables:
        handle = getattr(variable, "handle", None)
        name = getattr(variable, "name", None)
        if handle is not None and isinstance(name, str):
            found[id(handle)] = (handle, name.removesuffix(":0"), _bytes(variable))
    return found


class FunctionCopies:
    """The copies registered for one trace, by round: ``new_round`` starts a set under new
    names (the traced calls after overrides run a rewritten set, never instantiated before)."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self._round = 0
        self._copy_of: dict[str, str] = {}  # this round: original name -> copy's name
        self._added: list[str] = []  # every copy registered, all rounds
        self._original_of: dict[str, str] = {}  # every copy's name -> the user's function
        self._xla_compiled: dict[str, bool] = {}
        self.xla_called: set[str] = set()  # the user's XLA functions called eagerly
        self.user_calls: dict[str, UserCall] = {}  # each function called: its first call
        self.handed: dict[int, Handed] = {}  # every resource a call handed (user_state)
        self._defined_before: frozenset[str] | None = None  # during start_warm_up's block
        self._ran_as_the_user: dict[str, UserCall] = {}  # warm-up calls of the user's own
        self._copy_run: set[str] = set()  # functions whose copy a call ran
        self._recorded: list[Any] = []  # run metadata collected before each own call
        self._as_the_user: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext

    def renamed(self, fname: str) -> str:
        """The copy the call of ``fname`` runs (made on first use), or ``fname`` itself."""
        copy = self._copy_of.get(fname)
        if copy is None:
            if not self._copyable_call(fname):
                return fname
            self.add(reachable_functions(self._ctx, [fname]))
            copy = self._copy_of.get(fname, fname)
        return copy

    def xla_compiled(self, fname: str) -> bool:
        """Whether ``fname`` is a function of the user's that XLA compiles (never copied)."""
        known = self._xla_compiled.get(fname)
        if known is None:
            try:
                known = xla_compiled(self._ctx.get_function_def(fname))
            except Exception:  # not in the eager context
                known = False
            self._xla_compiled[fname] = known
        return known

    def runs_as_the_user(self, fname: str) -> bool:
        """Whether this call of ``fname`` runs the user's own function (see
        :meth:`start_warm_up`): its first call in the warm-up, when the trace defined it."""
        return (
            self._defined_before is not None
            and fname not in self._defined_before
            and fname not in self._ran_as_the_user
            and fname not in self._copy_run
            and self._copyable_call(fname)
        )

    @contextlib.contextmanager
    def start_warm_up(
        self, as_the_user: Callable[[], contextlib.AbstractContextManager]
    ) -> Iterator[None]:
        """For the block (the warm-up calls), the first call of each function the trace defines
        runs the user's own function, with the user's settings (``as_the_user()``) and
        unrecorded; then each such function's copy is instantiated, not run (see the module's
        docstring)."""
        self._defined_before = frozenset(self._ctx.list_function_names())
        self._as_the_user = as_the_user
        try:
            yield
        finally:
            self._defined_before = None
        ahead = [
            call._replace(name=self.renamed(fname))
            for fname, call in self._ran_as_the_user.items()
            if fname not in self._copy_run
        ]
        instantiate_without_running(ahead)

    def call_as_the_user(self, call: UserCall, run: Callable[[], Any]) -> Any:
        """``run()``, the call of the user's own function, with the user's settings and outside
        the run metadata the trace collects (TensorFlow's records of it are dropped)."""
        self._ran_as_the_user[_text(call.name)] = call
        self._recorded.append(self._ctx.export_run_metadata())
        self._ctx.disable_graph_collection()  # drops what it collected: nothing, just exported
        try:
            with self._as_the_user():
                return run()
        finally:
            self._ctx.enable_run_metadata()

    def copy_ran(self, fname: str) -> None:
        self._copy_run.add(fname)

    def with_recorded(self, metadata: Any) -> Any:
        """``metadata`` (the run metadata collected last) after what was collected before each
        call run as the user's own."""
        if not self._recorded:
            return metadata
        merged = self._recorded[0]
        for piece in [*self._recorded[1:], metadata]:
            merged.MergeFrom(piece)
        self._recorded = []
        return merged

    def new_round(self) -> None:
        self._round += 1
        self._copy_of = {}

    def add(self, names: Iterable[str], rewrite: Callable[[list[Any]], None] | None = None) -> None:
        """Register copies of the FunctionDefs ``names`` (those not copied this round yet),
        their calls among them renamed; ``rewrite`` may change the copies' nodes first."""
        fdefs = []
        for fname in names:
            if fname in self._copy_of or is_copy(fname):
                continue
            try:
                fdef = self._ctx.get_function_def(fname)
            except Exception:  # not in the eager context: calls to it stay as they are
                continue
            if xla_compiled(fdef):  # XLA's compiled program is found by the name: keep it
                continue
            fdefs.append(fdef)
            self._copy_of[fname] = f"{fname}{COPY_MARK}{self._round}"
            self._original_of[self._copy_of[fname]] = fname
        if rewrite is not None:
            rewrite(fdefs)
        for fdef in reversed(fdefs):  # callees (found last) first
            fdef.signature.name = self._copy_of[fdef.signature.name]
            _rename_calls(fdef, self._copy_of)
            self._ctx.add_function_def(fdef)
            self._added.append(fdef.signature.name)

    def restore_names(self, function_graphs: Iterable[Any]) -> None:
        """Name the user's functions again where recorded graphs (``RunMetadata``'s
        ``function_graphs``) name a copy: the calls' ``f``, bodies and branches."""
        if not self._original_of:
            return
        for entry in function_graphs:
            for graph_def in (
                entry.pre_optimization_graph,
                entry.post_optimization_graph,
                *entry.partition_graphs,
            ):
                for node in graph_def.node:
                    _rename_node_calls(node, self._original_of)
                    debug = node.experimental_debug_info.original_func_names
                    for index, name in enumerate(debug):
                        debug[index] = self._original_of.get(name, name)
                for fdef in graph_def.library.function:
                    name = fdef.signature.name
                    fdef.signature.name = self._original_of.get(name, name)
                    _rename_calls(fdef, self._original_of)

    def remove(self) -> None:
        """Unregister every copy; TensorFlow drops their cached kernels with them."""
        for fname in reversed(self._added):
            with contextlib.suppress(Exception):  # never mask the trace's own error
                self._ctx.remove_function(fname)
        self._added = []
        self._copy_of = {}

    def _copyable_call(self, fname: str) -> bool:
        if is_copy(fname):
            return False
        try:
            fdef = self._ctx.get_function_def(fname)
        except Exception:
            return False
        return not any(attr in fdef.attr for attr in _RENAMED_WHEN_CALLED)


def _bytes(variable: Any) -> int:
    try:
        return int(variable.shape.num_elements() or 0) * int(variable.dtype.size)
    except (AttributeError, TypeError, ValueError):
        return 0


def _rename_calls(fdef: Any, new_name: dict[str, str]) -> None:
    for node in fdef.node_def:
        _rename_node_calls(node, new_name)


def _rename_node_calls(node: Any, new_name: dict[str, str]) -> None:
    for attr in _FUNCTION_ATTRS:
        if attr in node.attr:
            value = node.attr[attr]
            if value.func.name in new_name:
                value.func.name = new_name[value.func.name]
            for func in value.list.func:
                if func.name in new_name:
                    func.name = new_name[func.name]


@contextlib.contextmanager
def calls_run_copies(
    as_the_user: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
) -> Iterator[FunctionCopies]:
    """For the block, every eager call of a FunctionDef runs a copy of it (see the module's
    docstring); the copies are removed after it. An eager call of a function XLA compiles runs
    the user's own, inside ``as_the_user()`` (the user's settings: XLA's key for a top-level
    call has the call's ConfigProto in it)."""
    from tensorflow.python.eager import context

    ctx = context.context()
    copies = FunctionCopies(ctx)
    shadowed = ctx.__dict__.get("call_function")  # an instance attribute set by someone else
    original = ctx.call_function

    def call_function(name: Any, tensor_inputs: Any, num_outputs: int) -> Any:
        text = _text(name)
        note_handed(copies.handed, text, tensor_inputs)
        if copies.xla_compiled(text):  # already the user's own call: not made again after
            copies.xla_called.add(text)
            with as_the_user():
                return original(name, tensor_inputs, num_outputs)
        call = UserCall(name, tensor_inputs, num_outputs, ctx.device_name)
        if text not in copies.user_calls:  # its first call, kept with the variables it captured
            caller = sys._getframe(1).f_locals.get("self")  # AtomicFunction.call_flat's
            copies.user_calls[text] = call._replace(variables=captured_variable_names(caller))
        if copies.runs_as_the_user(text):
            return copies.call_as_the_user(call, lambda: original(name, tensor_inputs, num_outputs))
        copy = copies.renamed(text)
        if copy != text:
            copies.copy_ran(text)
            name = copy.encode("utf-8") if isinstance(name, bytes) else copy
        return original(name, tensor_inputs, num_outputs)

    ctx.call_function = call_function
    try:
        yield copies
    finally:
        if shadowed is None:
            del ctx.call_function
        else:
            ctx.call_function = shadowed
        copies.remove()


def instantiate_for_the_user(calls: Iterable[UserCall], keep_device: bool = True) -> None:
    """Have TensorFlow instantiate and cache each call's function as the user's own call of it
    would (the settings in force, the call's device; with ``keep_device=False`` the device in
    force now, e.g. without the trace's ``device_scope``), without running it (see
    :func:`instantiate_without_running`). Call it with the user's settings restored and
    run-metadata collection off."""
    instantiate_without_running(calls, keep_device)


def instantiate_without_running(calls: Iterable[UserCall], keep_device: bool = True) -> None:
    """Make each call, with the settings in force, under a cancellation manager cancelled
    beforehand (see the module's docstring), given to this call only
    (``cancellation.context()`` would cancel every thread's calls): TensorFlow instantiates and
    caches the function (recording it if run metadata is on), and runs nothing."""
    from tensorflow.python.eager import cancellation, context, execute
    from tensorflow.python.framework import errors

    ctx = context.context()
    cancelled = cancellation.CancellationManager()
    cancelled.start_cancel()
    for call in calls:
        device = ctx.device(call.device or None) if keep_device else contextlib.nullcontext()
        # Any error but the expected refusal means the function cannot be made ahead (the
        # next call will say why, as it would have): nothing to do here.
        with device, contextlib.suppress(errors.OpError):
            # What Context.call_function does under a cancellation context.
            attrs = tuple(itertools.chain(*ctx.function_call_options.as_attrs().items()))
            execute.execute_with_cancellation(
                _text(call.name),
                num_outputs=call.num_outputs,
                inputs=call.inputs,
                attrs=attrs,
                ctx=ctx,
                cancellation_manager=cancelled,
            )


def _text(name: Any) -> str:
    return name.decode("utf-8") if isinstance(name, bytes) else name
