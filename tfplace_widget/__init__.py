"""tfplace_widget: see where TensorFlow placed every op, why, and when it ran.

Thin on purpose: TensorFlow, pandas and plotly load on first use, so ``%load_ext`` is instant.
``show_placement`` and ``trace_placement`` are the entry points themselves, importing their
implementation on first call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .model.errors import TraceError
from .model.version import __version__ as __version__

if TYPE_CHECKING:  # pragma: no cover
    from .analyses.compare import PlacementDiff
    from .model.trace import PlacementTrace
    from .widgets.comparison import ComparisonView
    from .widgets.panel import PlacementPanel

__all__ = [
    "PlacementDiff",
    "PlacementPanel",
    "PlacementTrace",
    "TraceError",
    "compare",
    "load_ipython_extension",
    "predict_placement",
    "show_comparison",
    "show_placement",
    "trace_placement",
    "unload_ipython_extension",
]

_LAZY = {
    "PlacementDiff": ("analyses.compare", "PlacementDiff"),
    "PlacementTrace": ("model.trace", "PlacementTrace"),
    "PlacementPanel": ("widgets.panel", "PlacementPanel"),
}


def show_placement(fn_or_trace: Any, *args: Any, **options: Any) -> PlacementPanel:
    """Trace ``fn(*args)`` (or take a trace, RunMetadata or trace file) and show the panel.

    ``fn`` is TF2 code (a tf.function, a Keras model, ``model.train_on_batch``, any callable)
    or a TF1 graph builder; options are those of :func:`trace_placement`, keyword-only.
    """
    from .widgets.panel import show_placement as show

    return show(fn_or_trace, *args, **options)


def trace_placement(fn: Any, *args: Any, **options: Any) -> PlacementTrace:
    """Run ``fn`` for real with a full trace and explain where each op was placed.

    See :func:`tfplace_widget.tracing.tracer.trace_placement` for the options (keyword-only).
    """
    from .tracing.tracer import trace_placement as trace

    return trace(fn, *args, **options)


def predict_placement(fn_or_trace: Any, gpus: int = 1, **trace_options: Any) -> PlacementTrace:
    """Predict where TensorFlow would place every op on this machine plus ``gpus`` GPUs.

    Traces ``fn`` here first (the options of :func:`trace_placement`; positional arguments in
    ``args=``) or takes a trace made with its graph. See
    :func:`tfplace_widget.tracing.predict.predict_placement`.
    """
    from .tracing.predict import predict_placement as predict

    return predict(fn_or_trace, gpus, **trace_options)


def compare(a: Any, b: Any) -> PlacementDiff:
    """What changed from placement ``a`` to ``b``: moved ops, added and removed transfers,
    busy time per device, and a summary. ``a`` and ``b`` are traces, or anything
    :func:`show_placement` accepts (a function is traced with the default options). See
    :func:`tfplace_widget.analyses.compare.compare`.
    """
    from .analyses.compare import compare as diff
    from .tracing.dispatch import as_trace

    return diff(a, b, trace=as_trace)


def show_comparison(a: Any, b: Any, **kwargs: Any) -> ComparisonView:
    """Show ``compare(a, b)``: both timelines on the same lanes and time axis, the moved ops
    outlined in both, the diff table and its summary. ``a``/``b``: traces or anything
    :func:`show_placement` takes. See :func:`tfplace_widget.widgets.comparison.show_comparison`.
    """
    from .widgets.comparison import show_comparison as show

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
    """``%load_ext tfplace_widget``: add ``show_placement``, ``trace_placement`` and ``%%tfplace``."""
    from .magics import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext tfplace_widget``: remove what loading added."""
    from .magics import unload

    unload(ipython)
