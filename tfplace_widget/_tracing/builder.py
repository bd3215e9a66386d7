"""Graph mode's builder: run the user's function in a fresh ``tf.Graph`` and check what it
made and returned, before anything runs in a Session.

It refuses writes into graphs made outside the builder (so they are left as they were), tells
eager objects (which belong to no graph built here) from graph ones, and turns the returned
value into fetches, explaining any that a Session cannot fetch. Asked to (``mode="auto"``), it
stops the builder at its first call of a ``tf.function``, before that function traces anything:
such code is TF2 code, traced in function mode, and the function's first trace (which may make
its variables) happens there, not in a scratch graph.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .._model.errors import CallsTfFunction, TraceError, UsesEagerObjects
from .failures import first_lines


def build(
    fn: Callable[[], Any], graph: Any, device_scope: str | None, stop_at_tf_functions: bool = False
) -> Any:
    """Run ``fn`` in ``graph`` and return the fetches. With ``stop_at_tf_functions``, a call of
    a ``tf.function`` or of a concrete function raises :class:`CallsTfFunction`, before the
    function traces or adds anything."""
    import tensorflow as tf

    with graph.as_default(), _outer_graphs_guarded(graph, stop_at_tf_functions) as guard:
        refused = guard.refused
        try:
            if device_scope:
                with tf.device(device_scope):
                    result = fn()
            else:
                result = fn()
        except (Exception, SystemExit) as exc:  # sys.exit() in a builder ends no process
            if guard.called:  # stopped at a tf.function (whatever the builder made of it)
                raise CallsTfFunction(guard.called[0]) from None
            if refused:  # the builder failed because a write into an outer graph was refused
                raise _outer_graph_error(refused) from exc
            eager = _eager_detail(exc)
            if eager:
                raise UsesEagerObjects(
                    f"The graph builder uses eager objects made outside it ({eager}): trace it "
                    "as TF2 code with mode='function' (or 'auto').",
                    f"uses an eager tensor or variable made outside it ({eager})",
                ) from exc
            hint = _device_spec_hint(exc)
            raise TraceError(
                f"Your graph builder raised {type(exc).__name__}: {str(exc).rstrip('.')}.{hint} "
                "Fix the builder and run again (its traceback is chained above)."
            ) from exc
        if guard.called:  # the builder caught the stop and went on
            raise CallsTfFunction(guard.called[0])
        if refused:  # the builder caught the refusal and went on
            raise _outer_graph_error(refused)
    eager_result = _eager_tensor_in(result)
    if eager_result is not None:
        raise UsesEagerObjects(
            f"The graph builder returned {eager_result}, made outside it: trace it as TF2 "
            "code with mode='function' (or 'auto').",
            f"returned {eager_result}, made outside it",
        )
    if not graph.get_operations():
        if not _is_empty(result) and not _has_graph_object(result):
            raise TraceError(
                f"The graph builder returned {_returned(result)}, which TensorFlow cannot "
                "fetch, and made no TensorFlow op, so there is nothing to place. Create "
                "TensorFlow ops inside the function (tf.compat.v1 graph style) and return a "
                "Tensor, an Operation, or a nested list/tuple/dict of them."
            )
        if not _is_empty(result):
            _check_fetches(result, graph)  # a tensor of another graph: says so
        raise TraceError(
            "The graph builder built no ops, so there is nothing to place. Create TensorFlow "
            "ops inside the function (tf.compat.v1 graph style) and return the output."
        )
    if result is None:
        return _sink_ops(graph)
    return _check_fetches(result, graph)


# -- writes into graphs made outside the builder ----------------------------------------------
# While a builder runs, tf.Graph's mutators refuse writes (from the builder's thread) into a
# plain graph that existed before: ops, imports, names and collections. TensorFlow cannot
# remove an op from a graph once made, so the write is stopped before it happens and the outer
# graph stays exactly as it was. Graphs made during the build (and FuncGraphs, which TF itself
# makes and fills) are not guarded.
_GUARDED_METHODS = ("_check_not_finalized", "_mutation_lock", "unique_name")
_guard_lock = threading.Lock()
_guard_users = 0
_guard_originals: dict[Any, Any] = {}  # method name (or class, for __call__) -> original
_guard_state = threading.local()  # .build: _BuildGuard of this thread's running builder


class _BuildGuard:
    def __init__(self, graph: Any, stop_at_tf_functions: bool = False) -> None:
        self.graph = graph
        self.made: weakref.WeakSet = weakref.WeakSet()  # graphs made while the builder ran
        self.refused: list[tuple[Any, str]] = []  # (outer graph, what the builder tried)
        self.stop_at_tf_functions = stop_at_tf_functions
        self.called: list[str] = []  # the tf.functions the builder was stopped at


class _WritesOuterGraph(TraceError):
    """Raised inside the builder, from tf.Graph's mutators, at a write into an outer graph."""


def _function_classes() -> tuple[type, type]:
    """``tf.function``'s class and a concrete function's: what a builder calls TF2 code by."""
    from tensorflow.python.eager.polymorphic_function.concrete_function import ConcreteFunction
    from tensorflow.python.eager.polymorphic_function.polymorphic_function import Function

    return Function, ConcreteFunction


def _stopped_at(original: Callable[..., Any]) -> Callable[..., Any]:
    """A function's ``__call__`` that, from a builder asked to stop at tf.functions, records
    the function and raises before it traces (no scratch-graph trace, no variables made)."""
    from .._sources.functions import function_display_name

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        build = getattr(_guard_state, "build", None)
        if build is None or not build.stop_at_tf_functions:
            return original(self, *args, **kwargs)
        name = getattr(self, "__name__", None) or getattr(self, "name", b"tf.function")
        name = function_display_name(name.decode() if isinstance(name, bytes) else str(name))
        build.called.append(name)
        raise CallsTfFunction(name)

    return call


def _guarded(name: str) -> Callable[..., Any]:
    original = _guard_originals[name]
    if name == "__init__":

        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            build = getattr(_guard_state, "build", None)
            if build is not None:
                build.made.add(self)

        return init

    if name == "_check_not_finalized":  # once per op made or imported: kept lean

        def check(self: Any) -> Any:
            build = getattr(_guard_state, "build", None)
            if build is not None and self is not build.graph and _is_outer(self, build):
                what = _attempted_write(name, (), sys._getframe(1))
                build.refused.append((self, what))
                raise _WritesOuterGraph(
                    f"trace_placement refused to let the graph builder add {what} to a graph "
                    "made outside it."
                )
            return original(self)

        return check

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        build = getattr(_guard_state, "build", None)
        if build is None or self is build.graph:  # the builder's own graph: never refused
            return original(self, *args, **kwargs)
        writes = name != "unique_name" or kwargs.get("mark_as_used", args[1:2] != (False,))
        if writes and _is_outer(self, build):
            what = _attempted_write(name, args, sys._getframe(1))
            build.refused.append((self, what))
            raise _WritesOuterGraph(
                f"trace_placement refused to let the graph builder add {what} to a graph made "
                "outside it."
            )
        return original(self, *args, **kwargs)

    return method


def _is_outer(graph: Any, build: _BuildGuard) -> bool:
    from tensorflow.python.framework.func_graph import FuncGraph

    return not (graph is build.graph or graph in build.made or isinstance(graph, FuncGraph))


def _attempted_write(method: str, args: tuple, caller: Any) -> str:
    """What the builder was adding, from the mutator called and the TF function calling it."""
    where = caller.f_code.co_name
    names = caller.f_locals
    if method == "unique_name" and args:
        return f"the name {args[0]!r} (an op or name scope)"
    if where == "_create_op_internal":
        op_type, name = names.get("op_type"), names.get("name")
        return f"the op {name or op_type!r} ({op_type})" if op_type else "an op"
    if where in ("add_to_collection", "clear_collection"):
        return f"an entry of the collection {names.get('name')!r}"
    if where == "_add_function":
        return "a function definition"
    if "import" in where:
        return "imported ops (tf.graph_util.import_graph_def)"
    return f"ops ({where})"


@contextlib.contextmanager
def _outer_graphs_guarded(graph: Any, stop_at_tf_functions: bool = False) -> Iterator[_BuildGuard]:
    """While the block runs, this thread cannot write into plain graphs made before it (but
    ``graph``), and with ``stop_at_tf_functions`` cannot call a tf.function; yields the guard
    (``refused``: the refused writes, ``(graph, what)``; ``called``: the functions stopped)."""
    global _guard_users
    from tensorflow.python.framework import ops

    functions = _function_classes()
    with _guard_lock:
        if _guard_users == 0:
            for name in ("__init__", *_GUARDED_METHODS):
                _guard_originals[name] = ops.Graph.__dict__[name]
            for name in ("__init__", *_GUARDED_METHODS):
                setattr(ops.Graph, name, _guarded(name))
            for cls in functions:
                _guard_originals[cls] = cls.__dict__["__call__"]
                cls.__call__ = _stopped_at(cls.__dict__["__call__"])
        _guard_users += 1
    previous = getattr(_guard_state, "build", None)
    build = _guard_state.build = _BuildGuard(graph, stop_at_tf_functions)
    try:
        yield build
    finally:
        _guard_state.build = previous
        with _guard_lock:
            _guard_users -= 1
            if _guard_users == 0:
                for cls in functions:
                    cls.__call__ = _guard_originals.pop(cls)
                for name, original in _guard_originals.items():
                    setattr(ops.Graph, name, original)
                _guard_originals.clear()


def _outer_graph_error(refused: list[tuple[Any, str]]) -> TraceError:
    outer, what = refused[0]
    count = len(outer.get_operations())
    more = f" (and {len(refused) - 1} more write(s))" if len(refused) > 1 else ""
    return TraceError(
        f"The graph builder writes into a tf.Graph made outside it: it tried to add {what}"
        f"{more} to {outer!r}, which holds {count} op(s). trace_placement builds the graph in a "
        "fresh tf.Graph of its own and leaves every other graph as it was, so the write was "
        "refused and that graph is unchanged. Build every op in the default graph inside the "
        "builder: drop `with graph.as_default():` and `graph.create_op(...)` for a graph made "
        "before the call."
    )


_EAGER_HINTS = (
    "capture an EagerTensor",
    "EagerTensor",
    "eager execution",
    "Tensor.graph is undefined",
    "outside of the current graph",
    "must be from the same graph",
)


def _eager_detail(exc: BaseException) -> str:
    """What in ``exc`` says the builder touched eager objects ("" when it does not)."""
    text = str(exc)
    for hint in _EAGER_HINTS:
        if hint in text:
            return first_lines(text, 1).strip().rstrip(".")
    return ""


def _is_empty(value: Any) -> bool:
    """``None``, or containers holding nothing else."""
    if value is None:
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_empty(v) for v in value)
    if isinstance(value, Mapping):
        return all(_is_empty(v) for v in value.values())
    return False


def _has_graph_object(value: Any) -> bool:
    """Whether ``value`` holds a Tensor, Operation, Variable or composite tensor (of any graph)."""
    if isinstance(value, (list, tuple)):
        return any(_has_graph_object(v) for v in value)
    if isinstance(value, Mapping):
        return any(_has_graph_object(v) for v in value.values())
    return isinstance(value, _fetchable_types())


def _fetchable_types() -> tuple[type, ...]:
    """What a Session fetches besides lists, tuples and dicts of it: Tensors, Operations,
    Variables, and composite tensors (SparseTensor, RaggedTensor, IndexedSlices)."""
    import tensorflow as tf
    from tensorflow.python.framework.composite_tensor import CompositeTensor

    return (tf.Tensor, tf.Operation, tf.Variable, CompositeTensor)


def _returned(value: Any) -> str:
    """``int 42``: a returned value by type and (short) repr."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _eager_tensor_in(value: Any) -> str | None:
    """A short description of the first eager tensor or variable in ``value`` (``None`` if none):
    it belongs to no graph, so a Session cannot fetch it."""
    if isinstance(value, (list, tuple)):
        found = (_eager_tensor_in(v) for v in value)
    elif isinstance(value, Mapping):
        found = (_eager_tensor_in(v) for v in value.values())
    else:
        return _eager_description(value) if _is_eager(value) else None
    return next((item for item in found if item is not None), None)


def _eager_description(value: Any) -> str:
    """``the eager tensor <tf.Tensor shape=(2,) dtype=float32>``: without reading the value
    (which copies it, and for a Keras variable warns under NumPy 2)."""
    import tensorflow as tf

    dtype = getattr(value, "dtype", "?")
    shape = f"shape={tuple(getattr(value, 'shape', ()))} dtype={getattr(dtype, 'name', dtype)}"
    if isinstance(value, tf.Variable):
        return f"the eager variable <tf.Variable {value.name!r} {shape}>"
    if "Variable" in type(value).__name__:  # Keras 3
        name = getattr(value, "path", None) or getattr(value, "name", "?")
        return f"the eager variable <Keras Variable {name!r} {shape}>"
    kind = "tf.Tensor" if type(value).__name__ == "EagerTensor" else type(value).__name__
    return f"the eager tensor <{kind} {shape}>"


def _is_eager(value: Any) -> bool:
    import tensorflow as tf

    if type(value).__name__ == "EagerTensor":
        return True
    if type(value).__module__.startswith("keras") and any(  # Keras 3: always made eagerly
        cls.__name__ in ("Variable", "KerasVariable") for cls in type(value).__mro__
    ):
        return True
    if isinstance(value, tf.Variable):
        return not hasattr(value, "graph") or _graph_of(value) is None
    if isinstance(value, _fetchable_types()[3]):  # composite: eager if a component is
        parts = tf.nest.flatten(value, expand_composites=True)
        return any(type(part).__name__ == "EagerTensor" for part in parts)
    return False


def _graph_of(item: Any) -> Any:
    """The graph of a Tensor, Operation, Variable or composite tensor (``None``: eager)."""
    import tensorflow as tf

    if isinstance(item, _fetchable_types()[3]):  # RaggedTensor has no .graph: its parts do
        graphs = {id(g): g for g in map(_graph_of, tf.nest.flatten(item, expand_composites=True))}
        return next(iter(graphs.values())) if len(graphs) == 1 else None
    try:
        return item.graph
    except (AttributeError, RuntimeError):
        return None


def _device_spec_hint(exc: BaseException) -> str:
    """A fix for a malformed ``tf.device`` string, when TF's device-spec parser raised ``exc``."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith("device_spec.py"):
            return (
                " A tf.device(...) string in the builder is malformed: use a form like '/cpu:0', "
                "'/gpu:1' or '/job:localhost/replica:0/task:0/device:CPU:0'."
            )
        tb = tb.tb_next
    return ""


def _sink_ops(graph: Any) -> list:
    """Ops nothing consumes, minus variable initializers (run once, untraced, before)."""
    consumed = set()
    for op in graph.get_operations():
        consumed.update(t.op.name for t in op.inputs)
        consumed.update(c.name for c in op.control_inputs)
    variables = graph.get_collection("variables") + graph.get_collection("local_variables")
    consumed.update(v.initializer.name for v in variables)
    checks = tuple(f"{v.op.name}/IsInitialized/" for v in variables)
    return [
        op
        for op in graph.get_operations()
        if op.name not in consumed and not (checks and op.name.startswith(checks))
    ]


def _check_fetches(result: Any, graph: Any) -> Any:
    def check(item: Any) -> None:
        if isinstance(item, _fetchable_types()):
            if _graph_of(item) is not graph:
                raise TraceError(
                    f"The builder returned {_name_of(item)!r}, which belongs to another graph. "
                    "Create every op inside the builder function, not before it."
                )
            return
        if isinstance(item, (list, tuple)):
            for sub in item:
                check(sub)
            return
        if isinstance(item, Mapping):
            for sub in item.values():
                check(sub)
            return
        raise TraceError(
            f"The graph builder returned {describe(item)}, which TensorFlow cannot fetch. "
            "Return a Tensor, an Operation, or a nested list/tuple/dict of them "
            "(or None to run every op with no consumers)."
        )

    check(result)
    return result


def _name_of(item: Any) -> str:
    import tensorflow as tf

    name = getattr(item, "name", None)
    if isinstance(name, str):
        return name
    parts = tf.nest.flatten(item, expand_composites=True)  # a composite tensor: its parts
    return ", ".join(getattr(part, "name", "?") for part in parts)


def fed_fetches(fetches: Any, feeds: Mapping[Any, Any], graph: Any) -> list[str]:
    """Notes for fetched tensors that are also fed: the Session hands back the fed value and
    runs nothing for them. ``TraceError`` when that leaves no op to run at all."""
    import tensorflow as tf

    if not feeds:
        return []
    fed = {key.name for key in feeds if isinstance(key, tf.Tensor)}
    fetched = tf.nest.flatten(fetches, expand_composites=True)
    tensors = [item for item in fetched if isinstance(item, tf.Tensor)]
    skipped = [t.name for t in tensors if t.name in fed]
    if not skipped:
        return []
    names = ", ".join(repr(name) for name in skipped)
    if len(skipped) == len(fetched):
        placeholders = [
            op.name for op in graph.get_operations() if op.type.startswith("Placeholder")
        ]
        raise TraceError(
            f"feed_dict feeds {names}, which the builder also returns as its fetch"
            f"{'es' if len(skipped) > 1 else ''}: a Session hands a fed value straight back and "
            "runs no op for it, so nothing would run and there is nothing to place. Leave it "
            "out of feed_dict and feed the placeholders it is computed from (placeholders in "
            f"the graph: {', '.join(placeholders) or 'none'}), or return a tensor computed from "
            "the fed one."
        )
    return [
        f"{names} {'is' if len(skipped) == 1 else 'are'} fetched and fed (feed_dict): the "
        "Session handed the fed value back without running the ops that compute it, so they "
        "are not in this trace."
    ]


def describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} (a {type(value).__name__})"
