"""Build the user's graph and run it with a full trace: the only module that talks to a Session.

Everything happens in a fresh ``tf.Graph`` and a session closed on exit, so the user's default
graph, eager context and ``tf.config`` are left as they were.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import re
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .capture import CapturedText, capture_native_output, import_tensorflow
from .devices import parse_device, short_device
from .errors import TraceError, attach_log, ran_out_message
from .frames import build_trace
from .function_tracer import is_tf2_callable, trace_function
from .graphfacts import facts_from_graph
from .options import normalize_device_count
from .trace import PlacementTrace

MODES = ("auto", "graph", "function")
TRACE_OPTIONS = (
    "fn_kwargs",
    "mode",
    "device_count",
    "soft_placement",
    "optimize",
    "device_scope",
    "feed_dict",
    "steps",
    "warmup",
    "timeout_s",
    "config",
)
MAX_STEPS = 1000
MAX_DEVICES_PER_TYPE = 64
MAX_TIMEOUT_S = 7 * 24 * 3600  # a week: anything longer is a typo, not a trace
# After Ctrl-C closes the session, how long to wait for the cancelled run to return before
# giving control back anyway (the run then ends on its own; its session is closed).
CANCEL_WAIT_S = 1.0
_POLL_S = 0.1


def trace_placement(
    fn: Callable[..., Any],
    *args: Any,
    fn_kwargs: Mapping[str, Any] | None = None,
    mode: str = "auto",
    device_count: Mapping[str, int] | None = None,
    soft_placement: bool = True,
    optimize: bool = False,
    device_scope: str | None = None,
    feed_dict: Mapping[Any, Any] | None = None,
    steps: int = 1,
    warmup: int = 1,
    timeout_s: float | None = None,
    config: Any = None,
    **unknown: Any,
) -> PlacementTrace:
    """Run ``fn`` for real with a full trace and explain where each op was placed.

    TF2 code (``mode="function"``): ``fn(*args, **fn_kwargs)`` runs in the eager runtime, a
    ``tf.function``, Keras model or layer, a Keras training method, or any callable (run as
    ``tf.function(fn)``). A TF1 graph builder (``mode="graph"``): ``fn()`` builds ops in a
    fresh graph and returns the fetches (or ``None`` to run every sink op), run in a Session.
    ``mode="auto"`` picks ``function`` for a tf.function, a Keras model or layer, a bound
    method, or when arguments are given, and falls back to it when ``fn`` uses eager objects
    made outside it. ``warmup`` untraced calls come first, then ``steps`` traced ones: a call
    with side effects (a training step) runs ``warmup + steps`` times. See the README for the
    other options. Bad argument types (a non-callable ``fn``, a ``device_count`` that is not a
    dict, a ``config`` that is not a ``ConfigProto``, an unknown keyword option, which names the
    closest one) raise ``TypeError``; bad values ``ValueError``; a failed trace ``TraceError``.
    """
    check_option_names(unknown, "trace_placement")
    _check_arguments(fn, device_count, steps, timeout_s, device_scope, warmup)
    if device_count is not None:
        device_count = normalize_device_count(device_count)  # 'cpu' == 'CPU'; conflicts raise
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, MODES))}, not {mode!r}.")
    if fn_kwargs is not None and not isinstance(fn_kwargs, Mapping):
        raise TypeError(
            f"fn_kwargs must be a dict of keyword arguments for fn, not {type(fn_kwargs).__name__}."
        )
    tf, startup_log = import_tensorflow()  # CUDA probing etc. on first import
    if config is not None:
        _check_config(config)
    function_options = {
        "device_count": device_count,
        "soft_placement": soft_placement,
        "optimize": optimize,
        "device_scope": device_scope,
        "steps": steps,
        "warmup": warmup,
    }
    graph_only = {"feed_dict": feed_dict, "timeout_s": timeout_s, "config": config}
    if mode == "function" or (mode == "auto" and (args or fn_kwargs or is_tf2_callable(fn))):
        _no_graph_options(graph_only, "auto-picked function" if mode == "auto" else "function")
        trace = trace_function(fn, args, fn_kwargs, **function_options, note=startup_log)
        return trace
    if args or fn_kwargs:
        raise ValueError(
            "mode='graph' calls the graph builder with no arguments; pass arguments only to TF2 "
            "code (mode='function' or 'auto')."
        )
    graph = tf.Graph()
    try:
        fetches = _build(fn, graph, device_scope)
    except _UsesEagerObjects as exc:
        if mode == "graph":  # the builder's own exception (if any) stays chained
            raise TraceError(
                f"The graph builder {exc.detail}. An eager tensor or variable made outside the "
                "builder belongs to no graph, and to none built here: trace_placement runs the "
                "builder in a fresh graph of its own, whose Session cannot use it. Create it "
                "inside the builder (e.g. tf.constant(...) there), or trace the code as TF2 "
                "with mode='function' (mode='auto' does that by itself)."
            ) from exc.__cause__
        _no_graph_options(graph_only, "function (picked because the builder uses eager objects)")
        note = (
            f"tfplace: building {getattr(fn, '__name__', 'fn')} in a fresh graph failed because "
            f"it uses eager objects made outside it ({exc.detail}); traced it as TF2 code "
            "(mode='function') instead."
        )
        return trace_function(fn, (), None, **function_options, note=startup_log + note)
    session_config = _session_config(config, device_count, soft_placement, optimize)
    feeds = _resolve_feeds(graph, feed_dict)
    notes = _fed_fetches(fetches, feeds, graph)
    captured = None
    try:
        with capture_native_output() as captured:
            metadatas, devices = _run(
                graph, fetches, session_config, feeds, steps, warmup, timeout_s, captured
            )
    except (TraceError, KeyboardInterrupt) as exc:
        if captured is not None:  # what TensorFlow printed before it failed is not lost
            attach_log(exc, startup_log + captured.text, recent=captured.text)
        raise
    facts = facts_from_graph(graph)
    name = getattr(fn, "__name__", type(fn).__name__)
    log = startup_log + captured.text + "".join(f"tfplace: {note}\n" for note in notes)
    trace = build_trace(metadatas, facts, available_devices=devices, log=log, source=name)
    trace.mode = "graph"
    trace.notes = notes
    return trace


def _check_config(config: Any) -> None:
    import tensorflow as tf

    if not isinstance(config, tf.compat.v1.ConfigProto):
        raise TypeError(
            f"config must be a tf.compat.v1.ConfigProto, not {type(config).__name__}: e.g. "
            "config=tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1), or leave it out."
        )


class _UsesEagerObjects(TraceError):
    """The graph builder touched eager tensors, variables or models made outside it."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


def _no_graph_options(options: Mapping[str, Any], mode: str) -> None:
    given = [name for name, value in options.items() if value is not None]
    if given:
        raise ValueError(
            f"{', '.join(given)} only apply to a TF1 graph builder (mode='graph'), and this "
            f"call is traced as TF2 code (mode={mode}). Pass tensors as arguments instead of "
            "feed_dict; leave timeout_s and config out."
        )


def check_option_names(options: Mapping[str, Any], caller: str) -> None:
    """``TypeError`` (as Python's own for an unexpected keyword argument) for the first name in
    ``options`` that is not a trace option, naming the closest one."""
    unknown = [name for name in options if name not in TRACE_OPTIONS]
    if unknown:
        name = unknown[0]
        close = difflib.get_close_matches(name, TRACE_OPTIONS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise TypeError(
            f"Unknown option {name!r} for {caller}.{hint} Options: {', '.join(TRACE_OPTIONS)}."
        )


def _check_arguments(
    fn: Any, device_count: Any, steps: Any, timeout_s: Any, device_scope: Any, warmup: Any = 1
) -> None:
    if not callable(fn):
        raise TypeError(
            f"trace_placement needs a function to run (a tf.function, a Keras model, or a "
            f"function that builds ops), not {type(fn).__name__}. Wrap your code in "
            "`def build(): ...; return output` and pass `build`."
        )
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"steps must be a whole number from 1 to {MAX_STEPS}, not {steps!r}.")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or not 0 <= warmup <= MAX_STEPS:
        raise ValueError(
            f"warmup must be a whole number from 0 to {MAX_STEPS} (untraced calls before the "
            f"traced ones), not {warmup!r}."
        )
    if timeout_s is not None and (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, (int, float))
        or not math.isfinite(timeout_s)
        or not 0 < timeout_s <= MAX_TIMEOUT_S
    ):
        raise ValueError(
            f"timeout_s must be a positive number of seconds, at most {MAX_TIMEOUT_S} (a week), "
            f"or None for no limit, not {timeout_s!r}."
        )
    if device_count is not None:
        if not isinstance(device_count, Mapping):
            raise TypeError(
                f"device_count must be a dict like {{'CPU': 2}}, not {type(device_count).__name__}."
            )
        for kind, count in device_count.items():
            if not isinstance(kind, str) or not re.fullmatch(r"[A-Za-z_]+", kind):
                raise ValueError(f"device_count keys are device types like 'CPU', not {kind!r}.")
            if (
                isinstance(count, bool)
                or not isinstance(count, int)
                or not (0 <= count <= MAX_DEVICES_PER_TYPE)
            ):
                raise ValueError(
                    f"device_count[{kind!r}] must be a whole number from 0 to "
                    f"{MAX_DEVICES_PER_TYPE}, not {count!r}."
                )
        cpus = [count for kind, count in device_count.items() if kind.upper() == "CPU"]
        if cpus and min(cpus) < 1:
            raise ValueError(
                "device_count['CPU'] must be at least 1: TensorFlow needs a CPU device."
            )
    if device_scope is not None:
        if not isinstance(device_scope, str):
            raise ValueError(
                f"device_scope must be a device string like '/cpu:1', not {device_scope!r}."
            )
        parse_device(device_scope)  # raises a ValueError that names the fix


def _build(fn: Callable[[], Any], graph: Any, device_scope: str | None) -> Any:
    import tensorflow as tf

    with graph.as_default(), _outer_graphs_guarded(graph) as refused:
        try:
            if device_scope:
                with tf.device(device_scope):
                    result = fn()
            else:
                result = fn()
        except Exception as exc:
            if refused:  # the builder failed because a write into an outer graph was refused
                raise _outer_graph_error(refused) from exc
            eager = _eager_detail(exc)
            if eager:
                raise _UsesEagerObjects(
                    f"The graph builder uses eager objects made outside it ({eager}): trace it "
                    "as TF2 code with mode='function' (or 'auto').",
                    f"uses an eager tensor or variable made outside it ({eager})",
                ) from exc
            hint = _device_spec_hint(exc)
            raise TraceError(
                f"Your graph builder raised {type(exc).__name__}: {str(exc).rstrip('.')}.{hint} "
                "Fix the builder and run again (its traceback is chained above)."
            ) from exc
        if refused:  # the builder caught the refusal and went on
            raise _outer_graph_error(refused)
    eager_result = _eager_tensor_in(result)
    if eager_result is not None:
        raise _UsesEagerObjects(
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
_guard_originals: dict[str, Any] = {}
_guard_state = threading.local()  # .build: _BuildGuard of this thread's running builder


class _BuildGuard:
    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self.made: weakref.WeakSet = weakref.WeakSet()  # graphs made while the builder ran
        self.refused: list[tuple[Any, str]] = []  # (outer graph, what the builder tried)


class _WritesOuterGraph(TraceError):
    """Raised inside the builder, from tf.Graph's mutators, at a write into an outer graph."""


def _guarded(name: str) -> Callable[..., Any]:
    original = _guard_originals[name]
    if name == "__init__":

        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            build = getattr(_guard_state, "build", None)
            if build is not None:
                build.made.add(self)

        return init

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        build = getattr(_guard_state, "build", None)
        writes = name != "unique_name" or kwargs.get("mark_as_used", args[1:2] != (False,))
        if build is not None and writes and _is_outer(self, build):
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
def _outer_graphs_guarded(graph: Any) -> Iterator[list[tuple[Any, str]]]:
    """While the block runs, this thread cannot write into plain graphs made before it (but
    ``graph``); yields the list of refused writes, ``(graph, what)``."""
    global _guard_users
    from tensorflow.python.framework import ops

    with _guard_lock:
        if _guard_users == 0:
            for name in ("__init__", *_GUARDED_METHODS):
                _guard_originals[name] = ops.Graph.__dict__[name]
            for name in ("__init__", *_GUARDED_METHODS):
                setattr(ops.Graph, name, _guarded(name))
        _guard_users += 1
    previous = getattr(_guard_state, "build", None)
    build = _guard_state.build = _BuildGuard(graph)
    try:
        yield build.refused
    finally:
        _guard_state.build = previous
        with _guard_lock:
            _guard_users -= 1
            if _guard_users == 0:
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
            return _first_lines(text, 1).strip().rstrip(".")
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
            f"The graph builder returned {_describe(item)}, which TensorFlow cannot fetch. "
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


def _fed_fetches(fetches: Any, feeds: Mapping[Any, Any], graph: Any) -> list[str]:
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


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} (a {type(value).__name__})"


def _session_config(
    config: Any, device_count: Mapping[str, int] | None, soft_placement: bool, optimize: bool
) -> Any:
    import tensorflow as tf
    from tensorflow.core.protobuf import rewriter_config_pb2

    v1 = tf.compat.v1
    result = v1.ConfigProto()
    if config is not None:
        _check_config(config)
        result.CopyFrom(config)
    if device_count is not None:
        result.device_count.clear()
        for kind, count in device_count.items():
            result.device_count[kind.upper()] = count
    result.allow_soft_placement = bool(soft_placement)
    result.log_device_placement = True
    result.gpu_options.allow_growth = True
    if not optimize:
        result.graph_options.optimizer_options.opt_level = v1.OptimizerOptions.L0
        result.graph_options.optimizer_options.do_constant_folding = False
        result.graph_options.optimizer_options.do_function_inlining = False
        result.graph_options.rewrite_options.disable_meta_optimizer = True
        result.graph_options.rewrite_options.constant_folding = (
            rewriter_config_pb2.RewriterConfig.OFF
        )
    return result


def _run(
    graph: Any,
    fetches: Any,
    config: Any,
    feeds: dict,
    steps: int,
    warmup: int,
    timeout_s: float | None,
    captured: CapturedText | None = None,
) -> tuple[list, list[str]]:
    """Initialise the variables, run ``warmup`` untraced steps and ``steps`` traced ones."""
    import tensorflow as tf

    v1 = tf.compat.v1
    options = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE, output_partition_graphs=True)
    plain = v1.RunOptions()
    if timeout_s is not None:
        options.timeout_in_ms = plain.timeout_in_ms = max(1, int(timeout_s * 1000))
    metadatas = []
    session = v1.Session(graph=graph, config=config)
    try:
        devices = [d.name for d in session.list_devices()]
        with graph.as_default():
            init = [v1.global_variables_initializer(), v1.local_variables_initializer()]
            init.append(v1.tables_initializer())

        # Which run failed, for the message: ("init", 0), ("warmup", i) or ("step", i).
        phase = _Phase()

        def runs() -> None:
            # With the feeds: a variable's initial value may come from a fed placeholder.
            session.run(init, feed_dict=feeds, options=plain)
            for phase.index in range(warmup):  # untraced
                phase.name = "warmup"
                session.run(fetches, feed_dict=feeds, options=plain)
            for phase.index in range(steps):
                phase.name = "step"
                metadata = v1.RunMetadata()
                session.run(fetches, feed_dict=feeds, options=options, run_metadata=metadata)
                metadatas.append(metadata)

        try:
            _run_interruptibly(runs, session, captured)
        except Exception as exc:
            raise _explain_run_error(
                exc,
                devices,
                timeout_s,
                soft=config.allow_soft_placement,
                fed=bool(feeds),
                operation_timeout_ms=config.operation_timeout_in_ms,
                phase=phase,
                warmup=warmup,
                steps=steps,
            ) from exc
    finally:
        session.close()
    return metadatas, devices


class _Phase:
    """The run in progress: variable initialisation, warm-up step ``index`` or traced step."""

    def __init__(self) -> None:
        self.name = "init"
        self.index = 0


def _run_interruptibly(runs: Callable[[], None], session: Any, captured: Any) -> None:
    """``runs()`` in a worker thread, so that Ctrl-C (``KeyboardInterrupt``) stops it.

    ``session.run`` blocks in C++, where Python never sees a signal: a blocking dequeue would
    wait forever and a long while_loop run to its end. Here the calling thread only waits, and
    on ``KeyboardInterrupt`` closes the session, which cancels the running step (TensorFlow's
    ``Session::Close`` cancels every step in flight), waits up to ``CANCEL_WAIT_S`` for the
    worker to return, and re-raises. The worker's exception, if any, is re-raised here.
    """
    outcome: dict[str, BaseException] = {}
    done = threading.Event()

    def work() -> None:
        try:
            with captured.include_this_thread() if captured else contextlib.nullcontext():
                runs()
        except BaseException as exc:  # handed to the waiting thread
            outcome["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=work, name="tfplace-session-run", daemon=True)
    worker.start()
    try:
        # Poll: a signal sent from another thread (or _thread.interrupt_main) only raises
        # KeyboardInterrupt when this thread runs Python code again.
        while not done.wait(_POLL_S):
            pass
    except KeyboardInterrupt:
        session.close()
        done.wait(CANCEL_WAIT_S)
        raise
    if "error" in outcome:
        error = outcome.pop("error")
        try:
            raise error
        finally:
            del error


def _resolve_feeds(graph: Any, feed_dict: Mapping[Any, Any] | None) -> dict:
    if feed_dict is None:
        return {}
    if not isinstance(feed_dict, Mapping):
        raise ValueError(
            f"feed_dict must be a dict {{placeholder or its name: value}}, not "
            f"{type(feed_dict).__name__}."
        )
    feeds = {}
    for key, value in feed_dict.items():
        if isinstance(key, str):
            name = key if ":" in key else f"{key}:0"
            try:
                key = graph.get_tensor_by_name(name)
            except (KeyError, ValueError) as exc:
                placeholders = [
                    op.name for op in graph.get_operations() if op.type.startswith("Placeholder")
                ]
                raise TraceError(
                    f"feed_dict names {key!r}, but the graph has no such tensor. "
                    f"Placeholders in the graph: {', '.join(placeholders) or 'none'}."
                ) from exc
        elif not hasattr(key, "graph"):
            raise ValueError(
                f"feed_dict keys are placeholders or their names, not {_describe(key)}. "
                "Write feed_dict={'x': value} or {x_placeholder: value}."
            )
        elif getattr(key, "graph", graph) is not graph:
            raise TraceError(
                f"feed_dict key {getattr(key, 'name', key)!r} belongs to another graph: feed the "
                "placeholder by its name (e.g. {'x': value}), since trace_placement builds a "
                "fresh graph."
            )
        feeds[key] = value
    return feeds


_MISSING_FEED = re.compile(r"must feed a value for placeholder tensor '([^']+)'")
_CANNOT_ASSIGN = re.compile(r"Cannot assign a device for operation ([^:\s]+)")
_DEVICE_SPEC = re.compile(r"device specification (\S+)|was explicitly assigned to (\S+)")
_GROUP_DEVICE = re.compile(
    r"colocated with a group of nodes that required incompatible device '([^']+)'"
)
_CANNOT_COLOCATE = re.compile(
    r"Cannot colocate nodes \{\{colocation_node ([^}]+)\}\} and \{\{colocation_node ([^}]+)\}\}: "
    r"([^\n\[]*)"
)
_MALFORMED = re.compile(r"Malformed device specification '([^']*)' in node: \{name:'([^']+)'")


def _explain_run_error(
    exc: Exception,
    devices: list[str],
    timeout_s: float | None,
    *,
    soft: bool = False,
    fed: bool = False,
    operation_timeout_ms: int = 0,
    phase: _Phase | None = None,
    warmup: int = 0,
    steps: int = 1,
) -> TraceError:
    import tensorflow as tf

    message = str(exc)
    available = ", ".join(short_device(d) for d in devices) or "none"
    if isinstance(exc, tf.errors.OutOfRangeError) and phase is not None:
        return _ran_out(exc, phase, warmup, steps)
    if isinstance(exc, tf.errors.DeadlineExceededError):
        # RunOptions.timeout_in_ms (timeout_s) wins over the session's default, the config's
        # operation_timeout_in_ms; with neither, an op itself gave up.
        if timeout_s is not None:
            return TraceError(
                f"The run took longer than timeout_s={timeout_s} s and was stopped. Raise "
                "timeout_s, or make the graph smaller."
            )
        if operation_timeout_ms > 0:
            return TraceError(
                f"The run took longer than operation_timeout_in_ms={operation_timeout_ms} "
                f"({operation_timeout_ms / 1000:g} s) of the ConfigProto passed as config, and "
                "was stopped. Raise config.operation_timeout_in_ms (or pass timeout_s=..., "
                "which overrides it), or make the graph smaller."
            )
        return TraceError(
            f"An op of the run gave up with DeadlineExceededError: {_first_lines(message)} "
            "Fix the op it names in the builder."
        )
    missing = _MISSING_FEED.search(message)
    if missing:
        why = (
            " (a variable's initial value reads it: initializers run once, untraced, before "
            "the steps)"
            if phase is not None and phase.name == "init"
            else ""
        )
        return TraceError(
            f"Placeholder {missing.group(1)!r} needs a value{why}: pass "
            f"feed_dict={{{missing.group(1)!r}: value}}."
        )
    malformed = _MALFORMED.search(message)
    if malformed:
        return TraceError(
            f"Op {malformed.group(2)!r} asks for the device {malformed.group(1)!r}, which "
            "TensorFlow cannot parse. Fix its tf.device(...) string: use a form like '/cpu:0', "
            "'/gpu:1' or '/job:localhost/replica:0/task:0/device:CPU:0'. The devices here are "
            f"{available}."
        )
    cannot = _CANNOT_ASSIGN.search(message)
    if cannot:
        spec = _DEVICE_SPEC.search(message)
        wanted = next((g for g in spec.groups() if g), "?") if spec else "?"
        group = _GROUP_DEVICE.search(message)
        if group:  # its own request is fine; a colocated op (or a variable) asked for this
            wanted = group.group(1) + (
                ", the device its colocation group asks for (tf.compat.v1.colocate_with, "
                "or a variable and its reads)"
            )
        why = (
            "soft placement is on, but it only drops a request's device type and index, so "
            "TensorFlow still cannot place it"
            if soft
            else "with soft placement off, TensorFlow needs that device"
        )
        fix = "" if soft else ", or pass soft_placement=True to let TF move it"
        return TraceError(
            f"Cannot place op {cannot.group(1)!r} on {wanted.strip('.,')}: {why}, and the "
            f"devices here are {available}. Request one of those{fix}.\n\n"
            f"TensorFlow said: {_first_lines(message)}"
        )
    conflict = _CANNOT_COLOCATE.search(message)
    if conflict:
        first, second, detail = conflict.groups()
        fix = "" if soft else ", or pass soft_placement=True to let TF settle it"
        return TraceError(
            f"TensorFlow must put {first!r} and {second!r} on one device "
            "(tf.compat.v1.colocate_with, or a variable and its reads), but their device "
            f"requests conflict: {detail.strip().rstrip('.')}. The devices here are "
            f"{available}. Make the requests agree{fix}.\n\n"
            f"TensorFlow said: {_first_lines(message)}"
        )
    if fed and (isinstance(exc, (ValueError, TypeError)) or "Unsupported object type" in message):
        return TraceError(
            f"TensorFlow rejected a feed_dict value: {_first_lines(message)} Check feed_dict "
            "values (shape and dtype must match each placeholder)."
        )
    if isinstance(exc, (ValueError, TypeError, tf.errors.InvalidArgumentError)):
        hint = (
            " Check feed_dict values (shape and dtype must match each placeholder), or fix"
            if fed
            else " Fix"
        )
        return TraceError(
            f"TensorFlow rejected the run: {_first_lines(message)}{hint} the op it names "
            "in the builder."
        )
    if isinstance(exc, tf.errors.AlreadyExistsError) and "profiling session" in message:
        return TraceError(
            "Another trace is in its traced run in this process, and TensorFlow's profiler "
            "records one run at a time. Trace again when it has finished (or interrupt it)."
        )
    return TraceError(f"The traced run failed with {type(exc).__name__}: {_first_lines(message)}")


def _ran_out(exc: Any, phase: _Phase, warmup: int, steps: int) -> TraceError:
    """An input (dataset iterator, queue) ran out: which run it ran out in, and the fix."""
    node_def = getattr(exc, "node_def", None)
    op, op_type = getattr(node_def, "name", "") or "?", getattr(node_def, "op", "")
    what = "dataset" if "Iterator" in op_type else "queue" if "Queue" in op_type else "input"
    where = f" (OutOfRangeError at {op!r})"
    story = ran_out_message(what, phase.name, phase.index, warmup, steps, where=where)
    return TraceError(f"{story}\n\nTensorFlow said: {_first_lines(str(exc), 3)}")


def _first_lines(message: str, limit: int = 6) -> str:
    # Graph execution errors open with "Detected at node 'X' defined at (most recent call
    # last):" and the Python stack that built X (in a notebook: runpy, ipykernel, ...); skip
    # that stack so the lines kept are TensorFlow's own message.
    lines = [
        line
        for line in message.strip().splitlines()
        if line.strip() and not _DEFINED_AT.match(line)
    ]
    return "\n".join(lines[:limit])


_DEFINED_AT = re.compile(
    r"\s*(Detected at node .* defined at \(most recent call last\):|File \"|Graph execution error:"
    r"|Original stack trace for )"
)
