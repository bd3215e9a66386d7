"""tfplace_widget: see where TensorFlow placed every op, why, and when it ran.

The public API is what ``__all__`` names; every other module is internal. Every exception a user
can catch is here. ``examples`` (the vendored GPU traces) is the one public subpackage.

Thin on purpose: TensorFlow, pandas and plotly load on first use, so ``%load_ext`` is instant.
``show_placement`` and ``trace_placement`` are the entry points themselves, importing their
implementation on first call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import _services
from ._model.errors import (
    CallsTfFunction,
    ClusterError,
    FrameFormatError,
    PlacementAssertionError,
    SearchError,
    TraceError,
    TraceFileNotFound,
    TraceWriteError,
    UsesEagerObjects,
)
from ._model.services import install as _install_services
from ._model.version import __version__ as __version__

_install_services(_services)  # PlacementTrace's save, load, exports, findings and readers

if TYPE_CHECKING:  # pragma: no cover
    from ._analyses.compare import PlacementDiff
    from ._analyses.fix_effect import FixEffect
    from ._model.devices import task_of
    from ._model.trace import PlacementTrace
    from ._tfadapter.capture import capture_native_output
    from ._widgets.comparison import ComparisonView
    from ._widgets.panel import PlacementPanel

__all__ = [
    "CallsTfFunction",
    "ClusterError",
    "ComparisonView",
    "FixEffect",
    "FrameFormatError",
    "PlacementAssertionError",
    "PlacementDiff",
    "PlacementPanel",
    "PlacementTrace",
    "SearchError",
    "TraceError",
    "TraceFileNotFound",
    "TraceWriteError",
    "UsesEagerObjects",
    "assert_placement",
    "capture_native_output",
    "compare",
    "load_ipython_extension",
    "predict_placement",
    "show_comparison",
    "show_placement",
    "task_of",
    "trace_placement",
    "unload_ipython_extension",
]

_LAZY = {
    "ComparisonView": ("_widgets.comparison", "ComparisonView"),
    "FixEffect": ("_analyses.fix_effect", "FixEffect"),
    "PlacementDiff": ("_analyses.compare", "PlacementDiff"),
    "PlacementTrace": ("_model.trace", "PlacementTrace"),
    "PlacementPanel": ("_widgets.panel", "PlacementPanel"),
    "capture_native_output": ("_tfadapter.capture", "capture_native_output"),
    "task_of": ("_model.devices", "task_of"),
}


def show_placement(fn_or_trace: Any, *args: Any, **options: Any) -> PlacementPanel:
    """Trace ``fn(*args)`` (or take a trace, RunMetadata or trace file) and show the panel.

    Args:
        fn_or_trace: TF2 code (a ``tf.function``, a Keras model, ``model.train_on_batch``,
            any callable) or a TF1 graph builder, run as ``trace_placement`` runs it; or an
            already made ``PlacementTrace``, a ``RunMetadata``, or a trace file path
            (``.tfplace``, Chrome-trace ``.json``/``.json.gz``, a TF2 profile's ``.xplane.pb``,
            a RunMetadata's ``.pb``/``.pbtxt``).
        *args: Positional arguments passed to ``fn`` (TF2 code).
        **options: Keyword-only: the options of ``trace_placement``, and ``compare_to=`` (a
            trace, or anything this function takes) to open the panel on a comparison.
            Unknown options raise ``TypeError``.

    Returns:
        The panel widget; ``panel.trace`` is the ``PlacementTrace`` it shows.
    """
    from ._widgets.panel import show_placement as show

    return show(fn_or_trace, *args, **options)


def trace_placement(fn: Any, *args: Any, **options: Any) -> PlacementTrace:
    """Run ``fn`` for real with a full trace and explain where each op was placed.

    Args:
        fn: TF2 code (a ``tf.function``, a Keras model or layer, a bound method such as
            ``model.train_on_batch`` or ``model.fit``, any callable), run in the eager
            runtime as ``fn(*args, **fn_kwargs)``; or a TF1 graph builder (no arguments),
            run in a fresh ``tf.Graph`` and ``tf.compat.v1.Session``, which returns the
            fetches (or ``None``: every sink op).
        *args: Positional arguments passed to ``fn``.
        **options: Keyword-only: ``fn_kwargs`` (keyword arguments for ``fn``), ``mode``
            (``"auto"``, ``"function"``, ``"graph"``), ``device_count`` (e.g.
            ``{"CPU": 2}``), ``soft_placement``, ``optimize`` (Grappler on), ``device_scope``
            (an outer ``tf.device``), ``steps`` and ``warmup`` (traced and untraced calls: a
            training step runs ``warmup + steps`` times), ``overrides`` (``{op or glob:
            device}`` requests set before placement), and for graph builders only
            ``feed_dict``, ``timeout_s``, ``config``, ``cluster`` and ``target``. The user
            guide's "Without the panel" page describes each.

    Returns:
        The trace: ``ops``, ``events``, ``transfers``, ``findings``, ``device_of(name)``.

    Raises:
        TraceError: The code failed or cannot be traced (the original exception chained;
            ``error.log`` keeps what it printed).
        ValueError: A bad option value, such as an override pattern that matches no op.
        TypeError: An argument of the wrong type or an unknown option.
    """
    from ._tracing.tracer import trace_placement as trace

    return trace(fn, *args, **options)


def predict_placement(fn_or_trace: Any, gpus: int = 1, **trace_options: Any) -> PlacementTrace:
    """Predict where TensorFlow would place every op on this machine plus ``gpus`` GPUs.

    Args:
        fn_or_trace: A function, traced here first as ``trace_placement`` traces it, or a
            ``PlacementTrace`` made with its graph (``trace_placement``, or
            ``from_run_metadata(..., graph=)``).
        gpus: How many GPUs to add (``GPU:0`` ... ``GPU:gpus-1``) to the trace's devices.
        **trace_options: The options of ``trace_placement`` for a function (its positional
            arguments in ``args=``), and ``soft_placement=``.

    Returns:
        A ``PlacementTrace`` with ``predicted == True``: ``ops.device`` is where the placer
        would put each node, ``how``/``reason`` say why, ``transfers`` lists the predicted
        copies and ``events`` is empty.

    Raises:
        ValueError: A trace without its graph, or a bad option value.
    """
    from ._tracing.predict import predict_placement as predict

    return predict(fn_or_trace, gpus, **trace_options)


def assert_placement(
    fn_or_trace: Any,
    *args: Any,
    expect: Mapping[str, str] | None = None,
    max_copies: int | None = None,
    allow_cpu_fallback: bool = True,
    **trace_options: Any,
) -> PlacementTrace:
    """Check where ``fn(*args)`` puts its ops; raise ``PlacementAssertionError`` if not as asked.

    Traces once (``trace_placement``, which puts back every TensorFlow setting it changes: a
    training loop that calls this before its first step pays nothing in the later ones), then
    checks the placement. On a machine without a device type the check is about (a GPU
    named in ``expect``, or ``allow_cpu_fallback=False``), it checks the prediction
    ``predict_placement(trace, gpus=N)`` instead, and its message and result say so. The same
    check as ``tfplace run/show --expect-device``.

    Args:
        fn_or_trace: What ``trace_placement`` takes (TF2 code or a graph builder), traced here
            with ``*args`` and ``**trace_options``; or a ``PlacementTrace`` or trace file.
        *args: Positional arguments passed to ``fn``.
        expect: Op-name globs to devices, ``{"*dense*": "GPU", "loss": "CPU:0"}``, by the rules
            of ``--expect-device`` (whole name, case-sensitive; ops the runtime adds are left
            out; a device type, short name, task or full name). Each glob must match an op.
        max_copies: The most copies between devices the step may make (``trace.transfers``:
            each tensor sent from one device to another, the fetch of a result included).
        allow_cpu_fallback: ``False``: fail on any ``cpu_fallback`` finding (an op on the CPU
            of a GPU machine for a reason of its own, e.g. no GPU kernel), also one under the
            findings' 1% materiality line. Default ``True``: only what you ask is checked.
        **trace_options: Keyword-only: the options of ``trace_placement`` (``device_count``,
            ``fn_kwargs``, ``steps``, ``soft_placement``...; for a trace only
            ``soft_placement``, the prediction's).

    Returns:
        The placement checked, for further checks: the trace, or the prediction
        (``predicted`` True) on a machine without the device.

    Raises:
        PlacementAssertionError: A check failed (an ``AssertionError``: pytest reports a failed
            assertion); the message lists the offending ops (op, type, device, expected,
            source line when the trace has one, reason), the copies and the fallbacks.
        ValueError: Nothing to check, a glob that matches no op, a device the placement has
            none of, or a bad option value.
        TraceError: The code failed or cannot be traced.
    """
    from ._testing.assertion import assert_placement as check

    __tracebackhide__ = True  # pytest's report ends at the user's call
    return check(
        fn_or_trace,
        *args,
        expect=expect,
        max_copies=max_copies,
        allow_cpu_fallback=allow_cpu_fallback,
        **trace_options,
    )


def compare(a: Any, b: Any) -> PlacementDiff:
    """What changed from placement ``a`` to ``b``.

    Args:
        a: The first placement: a ``PlacementTrace``, or anything ``show_placement`` takes (a
            function is traced with the default options, a path is read).
        b: The second placement, the same way.

    Returns:
        A ``PlacementDiff``: ``ops`` (one row per op in either, with its status: same, moved,
        replaced, only_a, only_b), ``transfers``, ``devices`` (busy time per device),
        ``summary`` and ``moved``.
    """
    from ._analyses.compare import compare as diff
    from ._tracing.dispatch import as_trace

    return diff(a, b, trace=as_trace)


def show_comparison(a: Any, b: Any, **kwargs: Any) -> ComparisonView:
    """Show ``compare(a, b)``: both timelines on the same lanes and time axis, the moved ops
    outlined in both, the diff table and its summary.

    Args:
        a: The first placement: a ``PlacementTrace`` or anything ``show_placement`` takes.
        b: The second placement, the same way.
        **kwargs: Keyword-only: ``labels``, the names of the two sides on screen (default
            ``("a", "b")``).

    Returns:
        The comparison view widget; its ``diff`` is ``compare(a, b)``.
    """
    from ._widgets.comparison import show_comparison as show

    return show(a, b, **kwargs)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(f".{module}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tfplace_widget' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext tfplace_widget``: add ``show_placement``, ``trace_placement`` and ``%%tfplace``.

    Args:
        ipython: The IPython shell loading the extension.
    """
    from ._magics import load

    load(ipython, _magic_names())


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext tfplace_widget``: remove what loading added.

    Args:
        ipython: The IPython shell unloading the extension.
    """
    from ._magics import unload

    unload(ipython, _magic_names())


def _magic_names() -> dict[str, Any]:
    """What ``%load_ext`` adds to the user's namespace: this module's own entry points (handed
    to ``magics``, which does not import the package root)."""
    return {"show_placement": show_placement, "trace_placement": trace_placement}
