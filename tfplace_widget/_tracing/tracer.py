"""``trace_placement``: check the options, pick the mode, and run a graph builder in a Session
with a full trace (the only module that talks to a Session; TF2 code goes to function_tracer).

Graph mode builds in a fresh ``tf.Graph`` (``builder``) and runs in a session closed on exit,
so the user's default graph, eager context and ``tf.config`` are left as they were; a failed
run is explained by ``run_errors``.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import re
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .._model.devices import parse_device
from .._model.errors import CallsTfFunction, ClusterError, TraceError, UsesEagerObjects, attach_log
from .._model.trace import PlacementTrace
from .._sources.raw import raw_protos
from .._sources.run_metadata import build_trace
from .._tfadapter.capture import CapturedText, capture_native_output, import_tensorflow
from .._tfadapter.graphfacts import facts_from_graph
from .._tfadapter.origins import graph_built_at
from . import mode_choice
from .builder import build, describe, fed_fetches
from .cluster import cluster_target, parse_cluster
from .cluster_tf2 import trace_on_local_cluster
from .failures import Phase, explain_run_error
from .graph_xla import jit_requested, launched_a_cluster, profiled_run
from .local_cluster import EXPOSED_NOTE, GraphJob, RemoteRunError, run_on_local_cluster
from .options import CPU_COUNT_RULE, MAX_DEVICES_PER_TYPE, is_device_count, normalize_device_count
from .overrides import apply_to_graph, check_overrides
from .recipe import remember
from .tf2_call import as_tf2

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
    "overrides",
    "cluster",
    "target",
)
MAX_STEPS = 1000
MAX_TIMEOUT_S = 7 * 24 * 3600  # a week: anything longer is a typo, not a trace
# After Ctrl-C closes the session, how long to wait for the cancelled run to return before
# giving control back anyway (the run then ends on its own; its session is closed).
CANCEL_WAIT_S = 1.0
_POLL_S = 0.1


def trace_placement(fn: Callable[..., Any], *args: Any, **options: Any) -> PlacementTrace:
    """Run ``fn`` for real with a full trace and explain where each op was placed (``_traced``
    says how); the trace remembers, in memory only, how it was made (``recipe``), so that
    ``trace.try_fix`` can run the same code again with a fix."""
    return traced_again(fn, args, options, None)


def traced_again(
    fn: Callable[..., Any],
    args: tuple,
    options: Mapping[str, Any],
    outputs: list[Any] | None,
) -> PlacementTrace:
    """``trace_placement(fn, *args, **options)``, with what its traced steps returned put in
    ``outputs`` (each traced call's for TF2 code, the last step's fetches for a graph builder),
    for ``try_fix``; the trace's recipe keeps the resources its calls handed to functions
    (TF2 code: ``user_state``)."""
    handed: dict[int, Any] = {}
    trace = _traced(fn, *args, _outputs=outputs, _handed=handed, **options)
    remember(trace, fn, args, options, handed)
    return trace


def _traced(
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
    overrides: Mapping[str, str] | None = None,
    cluster: Any = None,
    target: str | None = None,
    _outputs: list[Any] | None = None,
    _handed: dict[int, Any] | None = None,
    **unknown: Any,
) -> PlacementTrace:
    """Run ``fn`` for real with a full trace and explain where each op was placed.

    TF2 code (``mode="function"``): ``fn(*args, **fn_kwargs)`` runs in the eager runtime, a
    ``tf.function``, Keras model or layer, a Keras training method, or any callable (run as
    ``tf.function(fn)``). A TF1 graph builder (``mode="graph"``): ``fn()`` builds ops in a
    fresh graph and returns the fetches (or ``None`` to run every sink op), run in a Session
    with this process's devices (as ``tf.compat.v1.Session()``) unless ``device_count`` or
    ``config`` says otherwise. ``mode="auto"`` picks ``function`` for a tf.function, a Keras
    model or layer, a bound method, or when arguments are given, and when a zero-argument
    ``fn`` calls a tf.function or uses eager objects made outside it (``trace.mode_reason``
    says which ran and why). ``warmup`` untraced calls, then ``steps`` traced ones: a call
    with side effects (a training step) runs ``warmup + steps`` times. See docs/guide/ for the
    other options. ``overrides={"C": "/cpu:0", "tower_1/*": "/gpu:1"}`` sets the requested
    device of the ops named (or matched by the glob) before placement, as ``tf.device`` would;
    a pattern that matches no op raises ``ValueError``. ``cluster="local:worker=2,ps=1"`` runs
    a graph builder on servers tfplace starts, in a process no other host can reach
    (``local_cluster``);
    ``cluster=tf.train.ClusterSpec(...)`` with ``target="grpc://host:port"`` on servers you
    run. With ``mode="function"`` (or ``fn`` given as ``"module:function"``) and a local
    cluster, ``fn`` is a setup run on every task with its ``TF_CONFIG``: it makes a
    ``MultiWorkerMirroredStrategy`` and returns the step to trace (``cluster_tf2``). Bad argument types (a non-callable ``fn``, a ``device_count`` that is not a
    dict, a ``config`` that is not a ``ConfigProto``, an unknown keyword option, which names the
    closest one) raise ``TypeError``; bad values ``ValueError``; a failed trace ``TraceError``.
    """
    check_option_names(unknown, "trace_placement")
    plan = parse_cluster(cluster, target)
    across_tasks = plan is not None and plan.local and (mode == "function" or isinstance(fn, str))
    if not across_tasks or callable(fn):  # a setup may be given as "module:function"
        _check_fn(fn)
    _check_arguments(device_count, steps, timeout_s, device_scope, warmup)
    overrides = check_overrides(overrides)
    if plan is not None and not plan.local and device_count is not None:
        raise ClusterError(
            "device_count sets the devices of servers tfplace starts (cluster='local:...'); "
            "your servers' devices are set where you start them: tf.distribute.Server(..., "
            "config=tf.compat.v1.ConfigProto(device_count={'CPU': 2})). Leave device_count out."
        )
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
        "overrides": overrides,
        "outputs": _outputs,
        "handed": _handed,
    }
    graph_only = {
        "feed_dict": feed_dict,
        "timeout_s": timeout_s,
        "config": config,
        "cluster": cluster,
        "target": target,
    }
    if across_tasks:  # TF2 code on every task of a local cluster
        _no_graph_options({**graph_only, "cluster": None, "target": None}, "function")
        reason = (
            f"mode={mode!r} with cluster={cluster!r}: traced as TF2 code on every task, each "
            "a process of its own with its TF_CONFIG."
        )
        task_options = {
            k: v
            for k, v in function_options.items()
            if k not in ("device_count", "outputs", "handed")
        }
        return trace_on_local_cluster(
            fn,
            args,
            fn_kwargs,
            plan,
            device_count=device_count,
            options=task_options,
            reason=reason,
        )
    reason = mode_choice.tf2_before_building(fn, mode, args, fn_kwargs)
    if reason:
        _no_graph_options(graph_only, "auto-picked function" if mode == "auto" else "function")
        return as_tf2(fn, args, fn_kwargs, function_options, startup_log, reason)
    if args or fn_kwargs:
        raise ValueError(
            "mode='graph' calls the graph builder with no arguments; pass arguments only to TF2 "
            "code (mode='function' or 'auto')."
        )
    graph = tf.Graph()
    graph_options = [name for name, value in graph_only.items() if value is not None]
    try:  # auto mode with no graph-only option: a tf.function call makes it TF2 code
        stop = mode == "auto" and not graph_options
        fetches = build(fn, graph, device_scope, stop_at_tf_functions=stop)
        apply_to_graph(graph, overrides)
    except CallsTfFunction as exc:
        reason = mode_choice.calls_tf_function(fn, exc.function)
        return as_tf2(fn, (), None, function_options, startup_log, reason)
    except UsesEagerObjects as exc:
        if mode == "graph":  # the builder's own exception (if any) stays chained
            raise TraceError(
                f"The graph builder {exc.detail}. An eager tensor or variable made outside the "
                "builder belongs to no graph, and to none built here: trace_placement runs the "
                "builder in a fresh graph of its own, whose Session cannot use it. Create it "
                "inside the builder (e.g. tf.constant(...) there), or trace the code as TF2 "
                "with mode='function' (mode='auto' does that by itself)."
            ) from exc.__cause__
        _no_graph_options(graph_only, "function (picked because the builder uses eager objects)")
        reason = mode_choice.uses_eager_objects(fn, exc.detail)
        return as_tf2(fn, (), None, function_options, startup_log, reason)
    reason = mode_choice.graph_mode(fn, mode, graph_options)
    session_config = _session_config(config, device_count, soft_placement, optimize)
    mode_lines = [reason]
    if config is None and device_count is None and plan is None:
        mode_lines.append(mode_choice.runtime_devices(session_config))
    feeds = _resolve_feeds(graph, feed_dict)
    notes = fed_fetches(fetches, feeds, graph)
    captured = None
    servers_log = ""
    try:
        with contextlib.ExitStack() as stack:
            local = plan is not None and plan.local
            running = stack.enter_context(cluster_target(plan)) if plan and not local else None
            xla_profile, xla_line = None, ""
            with capture_native_output() as captured:
                if local:
                    kept, devices, servers_log = _run_on_local_cluster(
                        plan,
                        device_count,
                        graph,
                        fetches,
                        session_config,
                        feeds,
                        steps,
                        warmup,
                        timeout_s,
                    )
                else:
                    kept, devices, (xla_profile, xla_line) = _run(
                        graph,
                        fetches,
                        session_config,
                        feeds,
                        steps,
                        warmup,
                        timeout_s,
                        captured,
                        target=running.target if running else "",
                        outputs=_outputs,
                    )
    except (TraceError, KeyboardInterrupt) as exc:
        if captured is not None:  # what TensorFlow printed before it failed is not lost
            printed = startup_log + captured.text + getattr(exc, "cluster_log", "")
            attach_log(exc, printed, recent=captured.text)
        raise
    if servers_log.startswith(EXPOSED_NOTE):  # said on the terminal, not only in trace.log
        warning = servers_log.split("\n", 1)[0].replace("tfplace: ", "tfplace: warning: ", 1)
        print(warning, file=sys.stderr, flush=True)
    graph_def = graph.as_graph_def()  # once, for the facts and for trace.raw
    facts = facts_from_graph(graph, graph_def=graph_def)
    name = getattr(fn, "__name__", type(fn).__name__)
    log = (
        startup_log
        + captured.text
        + xla_line
        + servers_log
        + "".join(f"tfplace: {note}\n" for note in [*mode_lines, *notes] if note)
    )
    metadatas = [step.message for step in kept]
    trace = build_trace(
        metadatas,
        facts,
        available_devices=devices,
        log=log,
        source=name,
        xla_profile=xla_profile,
        built_at=graph_built_at(graph.get_operations()),
        serialized=[step.data for step in kept],
    )
    # kept by trace.save: the bytes TensorFlow returned, not serialized a second time
    trace.raw, dropped = raw_protos(kept, graph_def)
    trace.log += dropped
    trace.mode = "graph"
    trace.mode_reason = reason
    trace.notes = notes
    return trace


def _check_config(config: Any) -> None:
    import tensorflow as tf

    if not isinstance(config, tf.compat.v1.ConfigProto):
        raise TypeError(
            f"config must be a tf.compat.v1.ConfigProto, not {type(config).__name__}: e.g. "
            "config=tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1), or leave it out."
        )


def _no_graph_options(options: Mapping[str, Any], mode: str) -> None:
    given = [name for name, value in options.items() if value is not None]
    if given:
        raise ValueError(
            f"{', '.join(given)} only apply to a TF1 graph builder (mode='graph'), and this "
            f"call is traced as TF2 code (mode={mode}). Pass tensors as arguments instead of "
            "feed_dict; leave timeout_s and config out. Across a cluster, TF2 code "
            "(MultiWorkerMirroredStrategy) is traced from a setup function run on every task: "
            "trace_placement(setup, cluster='local:worker=2', mode='function'), where setup, "
            "a function of a module, makes the strategy and the model and returns the step to "
            "trace (ParameterServerStrategy is not traced yet); servers you run "
            "(cluster=tf.train.ClusterSpec) take graph builders only."
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


def _check_fn(fn: Any) -> None:
    if not callable(fn):
        raise TypeError(
            f"trace_placement needs a function to run (a tf.function, a Keras model, or a "
            f"function that builds ops), not {type(fn).__name__}. Wrap your code in "
            "`def build(): ...; return output` and pass `build`."
        )


def _check_arguments(
    device_count: Any, steps: Any, timeout_s: Any, device_scope: Any, warmup: Any = 1
) -> None:
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
            if not is_device_count(count, kind):
                rule = (
                    CPU_COUNT_RULE
                    if kind.upper() == "CPU"
                    else f"a whole number from 0 to {MAX_DEVICES_PER_TYPE}"
                )
                raise ValueError(f"device_count[{kind!r}] must be {rule}, not {count!r}.")
    if device_scope is not None:
        if not isinstance(device_scope, str):
            raise ValueError(
                f"device_scope must be a device string like '/cpu:1', not {device_scope!r}."
            )
        parse_device(device_scope)  # raises a ValueError that names the fix


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
    target: str = "",
    outputs: list[Any] | None = None,
) -> tuple[list, list[str], tuple[Any, str]]:
    """Initialise the variables, run ``warmup`` untraced steps and ``steps`` traced ones;
    ``target`` is a cluster's ``grpc://`` address ("" runs in this process). Returns each
    traced step's RunMetadata (as :class:`_Kept`, with its bytes), the session's devices and,
    when the steps launched an auto-clustered XLA cluster, the profile of one more run
    (``graph_xla``). ``outputs`` (a list) gets what the last traced step fetched."""
    import tensorflow as tf

    v1 = tf.compat.v1
    options, plain = _run_options(timeout_s)
    metadatas: list[_Kept] = []
    session = v1.Session(target, graph=graph, config=config)
    try:
        devices = [d.name for d in session.list_devices()]
        init = _init_ops(graph)

        # Which run failed, for the message: ("init", 0), ("warmup", i) or ("step", i).
        phase = Phase()
        found: list[tuple[Any, str]] = []  # the XLA profile of the profiled run, its log line

        def runs() -> None:
            # With the feeds: a variable's initial value may come from a fed placeholder.
            session.run(init, feed_dict=feeds, options=plain)
            for phase.index in range(warmup):  # untraced
                phase.name = "warmup"
                session.run(fetches, feed_dict=feeds, options=plain)
            for phase.index in range(steps):
                phase.name = "step"
                metadata = _Kept(v1.RunMetadata())
                got = session.run(fetches, feed_dict=feeds, options=options, run_metadata=metadata)
                metadatas.append(metadata)
            if outputs is not None and steps:
                outputs.append(got)
            if jit_requested(config) and launched_a_cluster([m.data for m in metadatas]):
                phase.name, phase.index = "step", steps  # one more step, profiled
                found.append(
                    profiled_run(lambda: session.run(fetches, feed_dict=feeds, options=plain))
                )

        try:
            _run_interruptibly(runs, session, captured)
        except Exception as exc:
            raise _explained(exc, devices, config, feeds, timeout_s, phase, warmup, steps) from exc
    finally:
        session.close()
    return metadatas, devices, found[0] if found else (None, "")


def _run_options(timeout_s: float | None) -> tuple[Any, Any]:
    """RunOptions of the traced steps (full trace, partition graphs) and of the others."""
    import tensorflow as tf

    v1 = tf.compat.v1
    options = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE, output_partition_graphs=True)
    plain = v1.RunOptions()
    if timeout_s is not None:
        options.timeout_in_ms = plain.timeout_in_ms = max(1, int(timeout_s * 1000))
    return options, plain


def _init_ops(graph: Any) -> list:
    """The ops that initialise the graph's variables and tables (run once, untraced)."""
    import tensorflow as tf

    v1 = tf.compat.v1
    with graph.as_default():
        return [
            v1.global_variables_initializer(),
            v1.local_variables_initializer(),
            v1.tables_initializer(),
        ]


def _explained(
    exc: Exception,
    devices: list[str],
    config: Any,
    feeds: dict,
    timeout_s: float | None,
    phase: Phase,
    warmup: int,
    steps: int,
) -> TraceError:
    """A failed run's exception as the ``TraceError`` that names the cause and the fix."""
    return explain_run_error(
        exc,
        devices,
        timeout_s,
        soft=config.allow_soft_placement,
        fed=bool(feeds),
        operation_timeout_ms=config.operation_timeout_in_ms,
        phase=phase,
        warmup=warmup,
        steps=steps,
    )


def _run_on_local_cluster(
    plan: Any,
    device_count: Mapping[str, int] | None,
    graph: Any,
    fetches: Any,
    config: Any,
    feeds: dict,
    steps: int,
    warmup: int,
    timeout_s: float | None,
) -> tuple[list, list[str], str]:
    """``_run`` on a local cluster: the same runs, made by the Session in the cluster's own
    process (``local_cluster``). Returns the steps' RunMetadata, the devices and its log."""
    import tensorflow as tf

    options, plain = _run_options(timeout_s)
    init, phase = _init_ops(graph), Phase()
    protos = {"config": config, "traced": options, "plain": plain}
    try:
        job = GraphJob.of(graph, fetches, feeds, init, steps, warmup, **protos)
    except (ValueError, TypeError) as exc:  # a fetch Session.run would refuse
        raise _explained(exc, [], config, feeds, timeout_s, phase, warmup, steps) from exc
    try:
        run = run_on_local_cluster(plan, device_count, job)
    except RemoteRunError as failed:
        phase.name, phase.index = failed.phase
        exc = failed.exception(graph)
        error = _explained(exc, failed.devices, config, feeds, timeout_s, phase, warmup, steps)
        error.cluster_log = failed.log  # type: ignore[attr-defined]
        raise error from exc
    kept = []
    for data in run.steps:
        kept.append(_Kept(tf.compat.v1.RunMetadata()))
        kept[-1].ParseFromString(data)
    return kept, run.devices, f"{run.note}tfplace: the local cluster's servers printed:\n{run.log}"


class _Kept:
    """A ``RunMetadata`` for ``session.run`` that keeps the serialized bytes TensorFlow fills
    it from (``Session.run`` only calls ``ParseFromString`` on it), so that ``trace.raw``
    needs no second serialization (about 10 ms per step at 10k ops). ``message`` is the
    parsed proto; ``SerializeToString`` gives those bytes (the same message, in TensorFlow's
    own field order), as ``raw_protos`` asks."""

    __slots__ = ("message", "data")

    def __init__(self, message: Any) -> None:
        self.message = message
        self.data: bytes | None = None

    def ParseFromString(self, data: bytes) -> int:  # noqa: N802 (protobuf's name)
        self.data = bytes(data)
        return self.message.ParseFromString(self.data)

    def SerializeToString(self) -> bytes:  # noqa: N802
        return self.data if self.data is not None else self.message.SerializeToString()


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
                f"feed_dict keys are placeholders or their names, not {describe(key)}. "
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
