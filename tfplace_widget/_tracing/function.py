"""Run TF2 code (a ``tf.function``, a Keras model or training step, any callable) for real in
the eager runtime and trace where each op ran: the function-mode twin of ``tracer``.

Placement comes from the placed graphs of every function the call instantiates
(``context.enable_run_metadata()``), timing from the TF2 profiler (XSpace). The calls run copies
of the user's FunctionDefs under other names (``function_copies``), so TensorFlow instantiates
and records them afresh while the user's own instantiations stay in its kernel cache: the user's
next call costs what it would have without the trace. When the trace was a function's first
call, its first warm-up call runs the user's own function with the user's settings, so that it
is instantiated and its executor built as by the user's first call
(``FunctionCopies.start_warm_up``); where that cannot be, the function is instantiated for the
user with nothing run (``function_copies.instantiate_for_the_user``). What the
trace changes in TensorFlow's process-wide state (soft placement, Grappler options, run-metadata
collection) is restored before it returns; the user's own state (weights, optimizer slots,
iterators, RNG) changes only as the ``warmup + steps`` calls change it.
"""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .._model.errors import TraceError, attach_log, ran_out_message
from .._model.gc_pause import paused_gc
from .._model.trace import PlacementTrace
from .._sources.frames import frames_from_records
from .._sources.functions import entry_arity, function_display_name, rejoin_split_records
from .._sources.input_pipeline import input_pipeline_from_xspace
from .._sources.raw import function_protos
from .._sources.xla import xla_from_xspace
from .._sources.xspace import HOST_PLANE, parse_xspace, profile_start_us, records_from_xspace
from .._tfadapter.capture import capture_native_output
from .._tfadapter.origins import function_built_at
from .ctrl_c import cancelled_by_ctrl_c
from .function_copies import (
    UserCall,
    calls_run_copies,
    instantiate_for_the_user,
    is_copy,
    reachable_functions,
    variable_handles,
)
from .input_pipeline import (
    DatasetSources,
    add_input_stages,
    datasets_among,
    drop_foreign_partitions,
    input_notes,
    read_with_pipeline,
)
from .overrides import override_function_defs
from .profile_dir import profile_dir, start_profiler, written_xspace
from .xla import (
    JIT_NOT_RECORDED,
    JIT_SHOWN,
    add_xla_clusters,
    jit_note,
    launch_allocations,
    xla_compile_error,
    xla_notes,
    xla_origin,
)

_RUNTIME_STARTED_FIX = (
    "tf.config.set_logical_device_configuration(\n"
    "    tf.config.list_physical_devices('CPU')[0],\n"
    "    [tf.config.LogicalDeviceConfiguration()] * {count})"
)


def is_tf2_callable(fn: Any) -> bool:
    """A ``tf.function``, a Keras model or layer, or a bound method: TF2 code, not a builder."""
    return bool(tf2_kind(fn))


def tf2_kind(fn: Any) -> str:
    """What makes ``fn`` TF2 code (``"a tf.function"``, ``"a Keras model or layer"``,
    ``"a bound method"``), or ``""`` when nothing does before it runs."""
    if _is_tf_function(fn):
        return "a tf.function"
    if _is_keras_layer(fn):
        return "a Keras model or layer"
    return "a bound method" if inspect.ismethod(fn) else ""


def trace_function(
    fn: Callable[..., Any],
    args: tuple = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    device_count: Mapping[str, int] | None = None,
    soft_placement: bool = True,
    optimize: bool = False,
    device_scope: str | None = None,
    steps: int = 1,
    warmup: int = 1,
    note: str = "",
    overrides: Mapping[str, str] | None = None,
    outputs: list[Any] | None = None,
    handed: dict[int, Any] | None = None,
    wait_for_peers: Callable[[str], None] = lambda phase: None,
) -> PlacementTrace:
    """Call ``fn(*args, **kwargs)`` ``warmup`` times untraced and ``steps`` times traced
    (with ``overrides``, the traced calls run the functions the warm-up instantiated, their
    requests rewritten); ``outputs`` (a list) gets what each traced call returned, ``handed``
    (a dict) every resource a call handed to a function (``user_state.note_handed``).
    ``wait_for_peers`` (a task of a cluster) is called with ``"start"`` before the profiler
    starts and ``"stop"`` before it stops, and returns when every task has got there."""
    import tensorflow as tf

    if overrides and warmup < 1:
        raise ValueError(
            "overrides in function mode need warmup >= 1: the untraced call finds the function "
            "bodies to rewrite before the traced calls run them."
        )
    log = [note] if note else []
    log += _starting_devices(device_count)
    call, name, notes = _callable(fn, args, dict(kwargs or {}))
    captured = None
    user_calls: dict[str, UserCall] = {}
    sources = DatasetSources(datasets_among([*args, *dict(kwargs or {}).values()]))
    users_soft = tf.config.get_soft_device_placement() == bool(soft_placement)
    warm_up_as_the_user = _warms_up_as_the_user(fn, device_scope, overrides, users_soft)
    try:
        with (
            capture_native_output() as captured,
            _tf_settings(soft_placement, optimize) as as_the_user,
            profile_dir() as logdir,
        ):
            graphs, space, marked_ns = _run(
                call,
                device_scope,
                steps,
                warmup,
                logdir,
                notes,
                overrides,
                as_the_user,
                user_calls,
                sources,
                warm_up_as_the_user=warm_up_as_the_user,
                outputs=outputs,
                handed=handed,
                wait_for_peers=wait_for_peers,
            )
        if _calls_the_users_functions(fn):  # with the user's settings back: see the function
            instantiate_for_the_user(user_calls.values(), keep_device=not device_scope)
    except (TraceError, KeyboardInterrupt) as exc:
        if captured is not None:  # what the failed calls printed is not lost
            failed_log = "\n".join(line for line in [*log, captured.text] if line)
            attach_log(exc, failed_log, recent=captured.text)
        raise
    log.append(captured.text)
    devices = [d.name for d in tf.config.list_logical_devices()]
    with paused_gc():
        parsed = parse_xspace(space)  # read twice below, parsed once
        records = records_from_xspace(parsed)
        xla = xla_from_xspace(space) if b"hlo_module" in space else None
        pipeline = input_pipeline_from_xspace(parsed)
        on_data = pipeline.records_on_threads(records)
        timed = {op for index, op in enumerate(records.op) if index not in on_data}
        graphs = _graphs_that_ran(_unique_graphs(graphs, timed, optimize), timed, notes)
        definitions = _function_def_names(graphs, preferred=name)
        names = _function_names(definitions)
        executed, facts, display_of, data = read_with_pipeline(
            graphs,
            names,
            device_scope or "",
            records,
            on_data,
            pipeline,
            devices,
            sources,
            placement_log=captured.text,
            definitions=definitions,
            handles=variable_handles(definitions, user_calls),
        )
        executed.built_at = function_built_at(executed.made_by)  # the user's lines
        launches = launch_allocations(records, xla)  # their op is in no placed graph
        _place_records(records, display_of, executed.device)
        origin = xla_origin(records, xla, launches)
        trace = frames_from_records(
            records, origin, executed, facts, available_devices=devices, source=name
        )
        add_input_stages(trace, data)
        if xla is not None:
            add_xla_clusters(trace, xla, origin, device_scope, _xla_why(fn), launches)
        zero = origin[0] if origin else min(records.start, default=None)  # as the frames'
        if zero is not None and zero < marked_ns // 2000:  # TF 2.16: from the profile's start
            start_us = profile_start_us(parsed, marked_ns)
            zero = None if start_us is None else zero + start_us
        trace.raw = function_protos(space, graphs, names, device_scope, zero)  # kept by save
    if trace.xla.empty:  # e.g. TensorFlow 2.16: no instruction events in its profile
        notes = [n.replace(JIT_SHOWN, JIT_NOT_RECORDED) for n in notes]
    if not notes:
        notes += xla_notes(graphs, executed.type, shown=not trace.xla.empty)
    notes += input_notes(trace, pipeline)
    trace.mode = "function"
    trace.notes = notes
    trace.log = "\n".join(line for line in log + notes if line)
    return trace


# -- devices ---------------------------------------------------------------------------------
def ensure_devices(device_count: Mapping[str, int] | None) -> list[str]:
    """Make ``device_count`` CPUs exist as logical devices; lines for the log.

    Logical devices can only be configured before TensorFlow's runtime starts; after that a
    different count is an error that shows the line to put at the top of the notebook.
    """
    if not device_count:
        return []
    import tensorflow as tf

    lines = []
    for kind, count in device_count.items():
        kind = kind.upper()
        if kind != "CPU":
            visible = len(tf.config.list_logical_devices(kind))
            if visible != count:
                raise TraceError(
                    f"device_count={{'{kind}': {count}}} cannot be applied to TF2 code: this "
                    f"process has {visible} {kind} device(s), and only CPUs can be split into "
                    "logical devices here. Use tf.config.set_visible_devices(...) at the top of "
                    "the notebook, before TensorFlow starts."
                )
            continue
        have = tf.config.list_logical_devices("CPU") if _runtime_started() else None
        if have is not None:
            if len(have) != count:
                raise TraceError(
                    f"device_count={{'CPU': {count}}} needs {count} logical CPUs, but "
                    f"TensorFlow's runtime already started with {len(have)}, and logical "
                    "devices can only be set before it starts. Put this at the top of the "
                    "notebook (restart the kernel first):\n\n"
                    + _RUNTIME_STARTED_FIX.format(count=count)
                )
            continue
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
        )
        lines.append(
            f"tfplace: configured {count} logical CPUs "
            "(tf.config.set_logical_device_configuration), as device_count asked; TensorFlow "
            "keeps them for the rest of this process."
        )
    return lines


def _starting_devices(device_count: Mapping[str, int] | None) -> list[str]:
    """:func:`ensure_devices`, with what TensorFlow prints as its runtime starts (CUDA probing:
    ``failed call to cuInit``) kept for the trace's log instead of the terminal or the cell."""
    starting = None
    try:
        with capture_native_output() as starting:
            lines = ensure_devices(device_count)
    except TraceError as exc:
        if starting is not None:
            attach_log(exc, starting.text)
        raise
    return [line for line in (starting.text.rstrip("\n"), *lines) if line]


def _runtime_started() -> bool:
    from tensorflow.python.eager import context

    return context.context()._context_handle is not None


# -- the call --------------------------------------------------------------------------------
def _is_tf_function(fn: Any) -> bool:
    return hasattr(fn, "get_concrete_function") and hasattr(fn, "python_function")


def _is_keras_layer(fn: Any) -> bool:
    """A Keras layer or model, the user's own subclasses (defined in ``__main__`` or any module)
    included: Keras's ``Layer`` is among its classes."""
    return any(
        cls.__name__ == "Layer" and (cls.__module__ or "").startswith(_KERAS_MODULES)
        for cls in type(fn).__mro__
    )


_KERAS_MODULES = ("keras", "tf_keras", "tensorflow")


def _callable(fn: Any, args: tuple, kwargs: dict) -> tuple[Callable[[], Any], str, list[str]]:
    """``(call with no arguments, display name, notes)`` for what the user gave."""
    import tensorflow as tf

    notes: list[str] = []
    if _is_tf_function(fn):
        name = getattr(fn, "__name__", "tf.function")
        if getattr(fn, "_jit_compile", None) is True:
            notes.append(jit_note(name, keras=False))
        return (lambda: fn(*args, **kwargs)), name, notes
    if _is_keras_layer(fn):
        # model(x) is never XLA-compiled (only Keras's train/test/predict steps are).
        name = getattr(fn, "name", type(fn).__name__)

        def forward(*a: Any, **k: Any) -> Any:
            return fn(*a, **k)

        forward.__name__ = name if name.isidentifier() else "forward"
        traced = tf.function(forward)
        return (lambda: traced(*args, **kwargs)), name, notes
    owner = getattr(fn, "__self__", None)
    if inspect.ismethod(fn) and _is_keras_layer(owner):
        # train_on_batch & co. convert results to numpy: they run eagerly and call
        # their own tf.functions (the training step), which are traced.
        if getattr(owner, "jit_compile", False) is True:
            notes.append(jit_note(getattr(owner, "name", "the model")))
        name = f"{getattr(owner, 'name', type(owner).__name__)}.{fn.__name__}"
        return (lambda: fn(*args, **kwargs)), name, notes
    name = getattr(fn, "__name__", type(fn).__name__)
    wrapped = tf.function(fn)
    return (lambda: _call_plain(wrapped, name, args, kwargs)), name, notes


def _warms_up_as_the_user(
    fn: Any, device_scope: str | None, overrides: Any, users_soft_placement: bool
) -> bool:
    """Whether the warm-up's first call of a function the trace defines runs the user's own
    function (``FunctionCopies.start_warm_up``): for the user's own functions, called as the
    user calls them (no ``device_scope``; the trace's soft placement the user's, which is in
    the call's ConfigProto, so in TensorFlow's cache key), and not when the warm-up's recorded
    instantiations name the bodies ``overrides`` rewrites."""
    return (
        _calls_the_users_functions(fn)
        and not device_scope
        and not overrides
        and users_soft_placement
    )


def _calls_the_users_functions(fn: Any) -> bool:
    """Whether the traced calls call the user's own ``tf.function``s (a tf.function, a Keras
    model's ``train_on_batch`` & co.), which the user calls again, rather than one made for the
    trace around a model or a plain callable (:func:`_callable`)."""
    return _is_tf_function(fn) or (
        inspect.ismethod(fn) and _is_keras_layer(getattr(fn, "__self__", None))
    )


def _call_plain(wrapped: Any, name: str, args: tuple, kwargs: dict) -> Any:
    try:
        return wrapped(*args, **kwargs)
    except Exception as exc:
        if not _tracing_error(exc):
            raise
        raise TraceError(
            f"{name} ran as tf.function({name}) so that its ops are placed and timed, and "
            f"that failed: {_error_line(exc)}. Code inside cannot call "
            ".numpy(), print tensors with print() or branch on tensor values in Python. Make "
            "those parts TensorFlow ops (tf.print, tf.cond), or pass the tf.function (or the "
            "Keras model) that does the TensorFlow work instead."
        ) from exc


def _tracing_error(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}"
    return any(
        hint in text
        for hint in (
            "numpy()",
            "OperatorNotAllowedInGraphError",
            "symbolic tf.Tensor",
            "Tensor.numpy",
            "graph execution",
            "not allowed in Graph",
            "Using a symbolic",
        )
    ) or type(exc).__name__ in ("OperatorNotAllowedInGraphError", "NotImplementedError")


def _xla_why(fn: Any) -> str:
    """Why the call's XLA clusters are XLA, for the ops' reasons."""
    owner = getattr(fn, "__self__", None)
    if inspect.ismethod(fn) and _is_keras_layer(owner):
        return (
            "Keras compiled the step with jit_compile=True; Keras 3's default, "
            "jit_compile='auto', does so whenever a GPU is visible"
        )
    if _is_tf_function(fn) and getattr(fn, "_jit_compile", None) is True:
        return "tf.function(jit_compile=True)"
    return "a tf.function with jit_compile=True"


def _error_line(exc: BaseException) -> str:
    """``Type: what went wrong``, without saying the type twice."""
    line = _first_line(exc)
    return line if line.startswith(type(exc).__name__) else f"{type(exc).__name__}: {line}"


def _first_line(exc: BaseException) -> str:
    """The line that says what went wrong (tf.function puts it last, after "in user code")."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if lines and lines[0].startswith("in user code"):
        return lines[-1].rstrip(".")
    # Graph execution errors open with a header and the Python stack that built the node.
    lines = [line for line in lines if not _TF_ERROR_NOISE.match(line)]
    return lines[0].rstrip(".") if lines else type(exc).__name__


_TF_ERROR_NOISE = re.compile(
    r"(Graph execution error:|Detected at node .* defined at|File \"|Detected unsupported)"
)


@contextlib.contextmanager
def _tf_settings(
    soft_placement: bool, optimize: bool
) -> Iterator[Callable[[], contextlib.AbstractContextManager]]:
    """Soft placement and Grappler as asked for the traced calls; restored exactly after.

    The eager kernel cache is left alone: the traced calls run copies of the user's functions,
    which TensorFlow instantiates with these settings (``function_copies``). Only the kernels of
    ops run eagerly on their own (TensorFlow's one-op ``__wrapped__<Op>`` functions) are
    dropped on entry, so that the calls instantiate, and record, them again; that costs a
    millisecond or two per op type, and the user's next eager ops reuse the new kernels.
    Yields what puts the user's Grappler settings back for one call (an XLA function's, whose
    compiled program XLA finds by the call's ConfigProto; the user's own first call of a
    function, which TensorFlow caches under those settings).
    """
    import tensorflow as tf
    from tensorflow.python.eager import context

    ctx = context.context()
    soft = tf.config.get_soft_device_placement()
    # set_experimental_options only merges keys into this dict: keep a copy to put back.
    optimizer = dict(ctx._optimizer_experimental_options)

    def use_optimizer(options: dict) -> None:
        ctx._optimizer_experimental_options = options
        ctx._thread_local_data.function_call_options = None  # rebuilt from the options

    @contextlib.contextmanager
    def as_the_user() -> Iterator[None]:
        traced = ctx._optimizer_experimental_options
        use_optimizer(dict(optimizer))
        try:
            yield
        finally:
            use_optimizer(traced)

    try:
        tf.config.set_soft_device_placement(bool(soft_placement))
        if not optimize:
            tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
        _drop_eager_op_kernels(ctx)
        yield as_the_user
    finally:
        tf.config.set_soft_device_placement(soft)
        use_optimizer(optimizer)


def _drop_eager_op_kernels(ctx: Any) -> None:
    """Unregister TensorFlow's one-op functions of eager ops (re-made on their next use), and
    with them their cached kernels (``remove_function`` drops a function's kernels only)."""
    for fname in ctx.list_function_names():
        if fname.startswith("__wrapped__"):
            with contextlib.suppress(Exception):
                ctx.remove_function(fname)


def _run(
    call: Callable[[], Any],
    device_scope: str | None,
    steps: int,
    warmup: int,
    logdir: str,
    notes: list[str],
    overrides: Mapping[str, str] | None = None,
    as_the_user: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
    user_calls: dict[str, UserCall] | None = None,
    sources: DatasetSources | None = None,
    warm_up_as_the_user: bool = False,
    outputs: list[Any] | None = None,
    handed: dict[int, Any] | None = None,
    wait_for_peers: Callable[[str], None] = lambda phase: None,
) -> tuple[list, bytes, int]:
    """Run the calls; return the placed function graphs, the profiler's XSpace bytes and the
    epoch's ns as its clock mark began (``start_profiler``).
    ``user_calls`` receives the first call of each function the last traced call made;
    ``sources`` the functions there were before the traced calls; ``warm_up_as_the_user``:
    see ``FunctionCopies.start_warm_up``; ``outputs``, ``handed``, ``wait_for_peers``: see
    ``trace_function``."""
    import tensorflow as tf
    from tensorflow.python.eager import context

    ctx = context.context()
    scope = tf.device(device_scope) if device_scope else contextlib.nullcontext()
    ctx.enable_run_metadata()
    ctx.export_run_metadata()  # drop what an earlier, failed trace left collected
    try:
        with scope, calls_run_copies(as_the_user) as copies:
            warming = copies.start_warm_up(as_the_user) if warm_up_as_the_user and warmup else None
            with warming or contextlib.nullcontext():
                for index in range(warmup):
                    _user_call(call, ("warmup", index, warmup, steps))
            if overrides:  # the warm-up's instantiations name the bodies to rewrite
                warm = rejoin_split_records(ctx.export_run_metadata().function_graphs)
                called = _reachable_functions(warm)
                # and the functions it called: its records may begin with what was collected
                # before (another function's instantiation), and a cached one records nothing
                called += [
                    f for f in reachable_functions(ctx, list(copies.user_calls)) if f not in called
                ]
                called += reachable_functions(ctx, copies.xla_called)
                xla = [ctx.get_function_def(f) for f in called if copies.xla_compiled(f)]
                copies.new_round()  # rewritten copies under new names, never instantiated
                copies.add(called, lambda fdefs: override_function_defs(fdefs, overrides, xla))
            if sources is not None:
                sources.snapshot()
            wait_for_peers("start")  # the traced calls' collectives meet traced calls
            try:
                marked_ns = start_profiler(logdir)
            except tf.errors.AlreadyExistsError as exc:
                raise TraceError(
                    "Another TensorFlow profiler session is running in this process, and "
                    "there can be only one. Stop it (tf.profiler.experimental.stop()) and "
                    "trace again."
                ) from exc
            try:
                for index in range(steps):
                    copies.user_calls.clear()  # the last call's functions: the next call's
                    got = _user_call(call, ("step", index, warmup, steps))
                    if outputs is not None:
                        outputs.append(got)
                wait_for_peers("stop")  # every task's traced calls ran in its profiled window
            finally:
                tf.profiler.experimental.stop()
        metadata = copies.with_recorded(ctx.export_run_metadata())
        copies.restore_names(metadata.function_graphs)
        if user_calls is not None:
            user_calls.update(copies.user_calls)
        if handed is not None:
            handed.update(copies.handed)
    finally:
        if sources is not None:
            sources.close()
        ctx.export_run_metadata()  # on failure too: nothing collected here outlives the trace
        ctx.disable_run_metadata()
        # enable_run_metadata also turned on graph collection, which disabling run metadata
        # leaves on: every later instantiation would keep its graphs in memory.
        ctx.disable_graph_collection()
    space = written_xspace(logdir)
    if space is None:
        raise TraceError(
            "The TensorFlow profiler wrote no trace (no .xplane.pb), so the ops cannot be "
            "timed. Check that the profiler works here: tf.profiler.experimental.start(dir)."
        )
    graphs = rejoin_split_records(metadata.function_graphs)  # another thread cut them
    if not graphs and not notes:  # with notes: XLA compiled the call, no op was placed alone
        raise TraceError(
            "The call ran no TensorFlow op, so there is nothing to place. Pass a function "
            "that runs TensorFlow ops (a tf.function, a Keras model, or code using tf.*)."
        )
    return graphs, space, marked_ns


def _user_call(call: Callable[[], Any], run: tuple[str, int, int, int]) -> Any:
    """``call()``; its failure as a TraceError that says how to fix it. ``run`` is
    ``(phase, index, warmup, steps)``: which call this is, for inputs that run out."""
    import tensorflow as tf

    interrupted = None
    try:
        with cancelled_by_ctrl_c() as interrupted:
            return call()
    except TraceError:
        raise
    except (Exception, SystemExit) as exc:  # sys.exit() in the traced code ends no process
        if interrupted is not None and interrupted.is_set():
            raise KeyboardInterrupt from exc  # Ctrl-C cancelled the call
        placement = _placement_error(exc) or xla_compile_error(exc)
        if placement:
            raise TraceError(placement) from exc
        if isinstance(exc, (tf.errors.OutOfRangeError, StopIteration)):
            phase, index, warmup, steps = run
            raise TraceError(
                ran_out_message(
                    "iterator",
                    phase,
                    index,
                    warmup,
                    steps,
                    unit="call",
                    where=f" ({type(exc).__name__})",
                )
            ) from exc
        raise TraceError(
            f"Your function raised {_error_line(exc)}. Fix it and trace "
            "again (its traceback is chained above)."
        ) from exc


def _placement_error(exc: BaseException) -> str:
    """A message with the fix when ``exc`` says a request could not be placed ("" if not)."""
    import tensorflow as tf

    text = str(exc)
    if "Unable to find any devices for spec" not in text and "Cannot assign a device" not in text:
        return ""
    devices = ", ".join(d.name.split("device:")[-1] for d in tf.config.list_logical_devices())
    return (
        f"TensorFlow could not place an op where it was asked to ({_first_line(exc)}): soft "
        f"placement is off, and the devices here are {devices}. Request one of those, or pass "
        "soft_placement=True to let TensorFlow move it."
    )


def _unique_graphs(function_graphs: Any, timed: set[str], optimize: bool) -> list:
    """One entry per function: the instantiation that ran, when TF recorded several.

    TF can record a function twice with the same pre-optimisation graph (e.g. instantiated
    with the user's Grappler settings and again with ours). Keep the one whose nodes the
    profiler saw most; on a tie the one Grappler changed least (``optimize=False``) or most.
    """
    groups: dict[bytes, list] = {}
    for graph in function_graphs:
        key = graph.pre_optimization_graph.SerializeToString(deterministic=True)
        groups.setdefault(key, []).append(graph)

    def score(graph: Any) -> tuple[int, int]:
        names = [node.name for part in graph.partition_graphs for node in part.node]
        size = len(names) if not optimize else -len(names)
        return sum(name in timed for name in names), size

    return [max(group, key=score) for group in groups.values()]


def _graphs_that_ran(graphs: list, timed: set[str], notes: list[str]) -> list:
    """The graphs with an op the profiler saw in the traced calls (not only in warm-up).

    Profiler events name executed nodes only, and small graphs (a variable initialiser, an
    eager op) share names with the step: a name counts for the largest graph holding it.
    """
    by_size = sorted(graphs, key=lambda g: -sum(len(p.node) for p in g.partition_graphs))
    claimed: set[str] = set()
    ran = []
    for graph in by_size:
        names = {node.name for part in graph.partition_graphs for node in part.node}
        if (names & timed) - claimed:
            ran.append(graph)
        claimed |= names
    if not ran and notes:  # XLA ran the step: the graphs recorded are warm-up set-up only
        return []
    return ran or graphs  # only untimed ops (Const, Identity...): keep what was recorded


def _function_names(definitions: list[str | None]) -> list[str]:
    """The tf.function each entry's FunctionDef is; ``eager`` for an op run eagerly alone."""
    return [
        "eager" if fname == "" else function_display_name(fname or "function")
        for fname in definitions
    ]


def _function_def_names(graphs: list, preferred: str = "") -> list[str | None]:
    """The FunctionDef name each entry instantiated: ``""`` for an op run eagerly on its own,
    ``None`` when no function the eager context knows matches.

    Entries carry no name: match their node names against the functions the eager context
    knows (``__inference_<python name>_<n>``). TF 2.21 can leave the nodes of a function whose
    instantiation failed in the next recorded graph: the match takes the known function inside
    the entry named ``preferred`` (the traced callable's name), else the largest, and the entry
    is cleaned of the other nodes.
    """
    from tensorflow.python.eager import context

    ctx = context.context()
    known: dict[frozenset, list[str]] | None = None  # node names -> functions with them
    names: list[str | None] = []
    for graph in graphs:
        pre = graph.pre_optimization_graph
        nodes = frozenset(n.name for n in pre.node if n.op not in ("_Arg", "_Retval"))
        if len(nodes) <= 1:
            names.append("")
            continue
        if known is None:
            known = {}
            for fname in ctx.list_function_names():
                if fname.startswith("__inference_") and not is_copy(fname):
                    with contextlib.suppress(Exception):
                        fdef = ctx.get_function_def(fname)
                        body = frozenset(n.name for n in fdef.node_def)
                        known.setdefault(body, []).append(fname)
        args = entry_arity(graph)  # how many inputs its function takes
        match = _named(known[nodes], preferred, args) if nodes in known else None
        if match is None:
            inside = [body for body in known if body <= nodes]
            if inside:
                # The called function, not a larger one a failed instantiation left behind.
                ranked = [(_is_called(known[b], preferred), len(b), b) for b in inside]
                body = max(ranked, key=lambda r: r[:2])[2]
                match = _named(known[body], preferred, args)
                _keep_only(pre, body)
                leftover = frozenset().union(*inside) - body
                drop_foreign_partitions(graph, nodes - body)
                for partition in graph.partition_graphs:
                    _drop_leftovers(partition, leftover)
        names.append(match)
    return names


def _reachable_functions(graphs: list) -> list[str]:
    """The FunctionDefs the recorded calls instantiated, and every function those call
    (``PartitionedCall``'s ``f``, loop bodies, branches...), by name."""
    from tensorflow.python.eager import context

    names = [name for name in _function_def_names(graphs) if name]
    return reachable_functions(context.context(), names)


def _keep_only(graph_def: Any, body: frozenset) -> None:
    """Drop nodes of ``graph_def`` that are not ``body``'s (the last node of a name wins)."""
    last: dict[str, Any] = {}
    for node in graph_def.node:
        if node.name in body or node.op in ("_Arg", "_Retval"):
            last[node.name] = node
    kept = [type(node)() for node in last.values()]
    for copy, node in zip(kept, last.values(), strict=True):
        copy.CopyFrom(node)
    del graph_def.node[:]
    graph_def.node.extend(kept)


def _is_called(fnames: list[str], preferred: str) -> bool:
    """Whether one of these functions (same node names) is the one the user called."""
    return any(function_display_name(f) == preferred for f in fnames)


def _named(fnames: list[str], preferred: str, args: int) -> str:
    """Of functions with the same node names, the one called ``preferred``, else one of ``args``
    inputs (Keras's training and evaluation steps differ only in theirs), else the first."""
    if len(fnames) == 1:  # (FunctionDefs read only to tell several apart)
        return fnames[0]
    from tensorflow.python.eager import context

    inputs = {f: len(context.context().get_function_def(f).signature.input_arg) for f in fnames}
    return min(fnames, key=lambda f: (function_display_name(f) != preferred, inputs[f] != args))


def _drop_leftovers(graph_def: Any, leftover: frozenset) -> None:
    """Drop from a partition graph the nodes of another function that a failed instantiation
    left behind: those named in ``leftover``, their lowered control flow (``Func/<node>/...``)
    and the copies of their outputs (``<node>/_<n>``)."""

    def stale(name: str) -> bool:
        if name in leftover:
            return True
        head, sep, tail = name.rpartition("/_")
        if sep and tail.isdigit() and head in leftover:  # a _Send/_Recv of a leftover's output
            return True
        if name.startswith("Func/"):  # lowered control flow: Func/<its functional op>/...
            path = name[5:]
            while path:
                if path in leftover:
                    return True
                path = path.rpartition("/")[0]
        return False

    kept = [node for node in graph_def.node if not stale(node.name)]
    if len(kept) < len(graph_def.node):
        copies = [type(node)() for node in kept]
        for copy, node in zip(copies, kept, strict=True):
            copy.CopyFrom(node)
        del graph_def.node[:]
        graph_def.node.extend(copies)


def _place_records(records: Any, display_of: dict[str, str], device_of: dict[str, str]) -> None:
    """Name host records as the user wrote the ops and put them on their placed device.

    Host (CPU) op events do not say which device they ran for; the placed graph does. An
    event of an op that no recorded function placed (none is expected) is dropped.
    """
    keep = []
    for index, (op, lane) in enumerate(zip(records.op, records.lane, strict=True)):
        display = display_of.get(op, op)
        device = device_of.get(display)
        if lane == HOST_PLANE:
            if device is None:
                continue
            records.lane[index] = device
        records.op[index] = display
        keep.append(index)
    if len(keep) != len(records.op):
        records.keep(keep)
