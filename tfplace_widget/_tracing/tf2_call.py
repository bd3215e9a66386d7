"""``as_tf2``: TF2 code traced in this process (``function.trace_function``), one trace at a
time, with what Keras would compile on a GPU; for ``trace_placement`` and for each task of a
TF2 trace across a local cluster (``cluster_worker``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from .._analyses.predict.keras_xla import RAW_NAME
from .._model.errors import TraceError
from .._model.trace import PlacementTrace
from .function import trace_function
from .keras import keras_record, step_record

# One TF2 trace at a time per process (see as_tf2); .active: this thread's trace is running.
_TF2_TRACE_LOCK = threading.Lock()
_tf2_tracing = threading.local()


def as_tf2(
    fn: Callable[..., Any],
    args: tuple,
    kwargs: Mapping[str, Any] | None,
    options: dict[str, Any],
    startup_log: str,
    reason: str,
) -> PlacementTrace:
    """``fn`` traced as TF2 code (function mode); ``reason`` (why) leads its log. A Keras
    step's trace records how Keras would compile it on a GPU (read before the run).

    One TF2 trace at a time in the process: TensorFlow's profiler and its function library are
    the process's, so a second thread waits for the first trace to finish (its ops, not the
    other's); a trace started from inside one (re-entrantly, in the same thread) is refused."""
    note = f"{startup_log}tfplace: {reason}"
    if getattr(_tf2_tracing, "active", False):
        raise TraceError(
            "Another trace is running in this thread: trace_placement (or show_placement) was "
            "called from inside the code it traces. Trace the outer call only, or call it after "
            "that trace has finished."
        )
    with _TF2_TRACE_LOCK:
        _tf2_tracing.active = True
        try:
            keras = keras_record(fn)
            trace = trace_function(fn, args, kwargs, **options, note=note)
        finally:
            _tf2_tracing.active = False
    trace.mode_reason = reason
    trace.raw.update(keras)
    compiled = step_record(trace)  # what XLA would compile, from this run's own graphs
    if compiled is not None:
        trace.raw[RAW_NAME] = compiled
    return trace
