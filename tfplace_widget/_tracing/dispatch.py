"""One entry for "anything ``show_placement`` accepts" -> a ``PlacementTrace``.

A trace as it is, a trace file (a saved ``.tfplace`` trace, by its suffix or zip content; a
Chrome trace JSON; a TF2 profile's ``.xplane.pb``; or a RunMetadata), a RunMetadata proto, or a function traced with
``trace_placement`` and the given options. Used by ``compare`` and ``show_placement``; no widgets here.
"""

from __future__ import annotations

import os
from typing import Any

from .._model.trace import PlacementTrace
from .._sources.files import trace_format
from .._tfplace_format.reader import is_archive


def as_trace(fn_or_trace: Any, *args: Any, **options: Any) -> PlacementTrace:
    """The :class:`PlacementTrace` of ``fn_or_trace`` (traced now when it is a function)."""
    if isinstance(fn_or_trace, PlacementTrace):
        _no_options_for("a PlacementTrace", options)
        return fn_or_trace
    if isinstance(fn_or_trace, (str, os.PathLike)):
        _no_options_for("a trace file", options)
        path = os.fspath(fn_or_trace)
        if is_archive(path):
            return PlacementTrace.load(path)
        if trace_format(path) == "chrome":
            return PlacementTrace.from_chrome_trace(path)
        if trace_format(path) == "xspace":
            return PlacementTrace.from_xspace(path)
        return PlacementTrace.from_run_metadata(path)
    if type(fn_or_trace).__name__ == "RunMetadata":
        _no_options_for("a RunMetadata", options)
        return PlacementTrace.from_run_metadata(fn_or_trace)
    if callable(fn_or_trace):
        from .tracer import trace_placement

        return trace_placement(fn_or_trace, *args, **options)
    raise TypeError(
        "Expected a function to trace (a tf.function, a Keras model, or a graph builder), a "
        f"PlacementTrace, a RunMetadata or a trace file path, not {type(fn_or_trace).__name__}."
    )


def is_traced(value: Any) -> bool:
    """Whether ``as_trace`` takes ``value`` as already traced (a trace, a trace file or a
    RunMetadata proto), rather than as a function to trace."""
    return isinstance(value, (PlacementTrace, str, os.PathLike)) or (
        type(value).__name__ == "RunMetadata"
    )


def _no_options_for(what: str, options: dict[str, Any]) -> None:
    if options:
        raise ValueError(
            f"Options ({', '.join(options)}) only apply when tracing a function; {what} is "
            "already traced. Pass the graph-builder function instead to trace with options."
        )
