"""Which runtime ``trace_placement`` runs the user's code in, and why, in one sentence for
``trace.log`` and the panel header (``trace.mode_reason``).

The aim is that the device reported for an op is the one the user gets by calling the code.
TF2 code (a ``tf.function``, a Keras model, arguments, a zero-argument function that calls a
``tf.function``, or one using eager objects made outside it) runs in the eager runtime
(function mode); a zero-argument builder of plain ops runs in a Session (graph mode), which gets
the devices a plain ``tf.compat.v1.Session()`` would: the eager runtime's logical devices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .function import tf2_kind


def name_of(fn: Any) -> str:
    """The name the reasons call ``fn`` by (a Keras model by its ``name``, as the trace)."""
    name = getattr(fn, "__name__", None) or getattr(fn, "name", None)
    return name if isinstance(name, str) and name else type(fn).__name__


def tf2_before_building(
    fn: Any, mode: str, args: Sequence[Any], kwargs: Mapping[str, Any] | None
) -> str:
    """Why ``fn`` is traced as TF2 code without a graph build first; ``""`` when a build in a
    fresh graph decides (``mode="graph"``, or a zero-argument plain callable in auto mode)."""
    if mode == "function":
        return "mode='function', as passed: traced as TF2 code in the eager runtime."
    if mode != "auto":
        return ""
    kind = tf2_kind(fn)
    if kind:
        return f"auto: function mode because {name_of(fn)} is {kind}."
    if args or kwargs:
        return (
            f"auto: function mode because arguments were given to {name_of(fn)} (a graph "
            "builder takes none)."
        )
    return ""


def calls_tf_function(fn: Any, function: str) -> str:
    """Why a zero-argument function that calls a tf.function is traced as TF2 code."""
    return (
        f"auto: function mode because {name_of(fn)} calls the tf.function {function}, whose "
        "body a Session would run as one opaque call: tfplace stopped it at that call (before "
        "anything traced) and traced it as TF2 code."
    )


def uses_eager_objects(fn: Any, detail: str) -> str:
    """Why a builder that touched eager objects made outside it is traced as TF2 code."""
    return (
        f"auto: function mode because building {name_of(fn)} in a fresh graph failed: it "
        f"{detail}; traced it as TF2 code (mode='function') instead."
    )


def graph_mode(fn: Any, mode: str, graph_options: Sequence[str]) -> str:
    """Why ``fn`` runs as a TF1 graph builder in a Session (``graph_options``: the graph-only
    options given, which keep auto mode from looking for tf.function calls)."""
    if mode == "graph":
        return "mode='graph', as passed: run as a TF1 graph builder in a Session."
    if graph_options:
        options = ", ".join(graph_options)
        kind = "a graph-builder option" if len(graph_options) == 1 else "graph-builder options"
        verb = "is" if len(graph_options) == 1 else "are"
        return (
            f"auto: graph mode because {options} {verb} {kind}: {name_of(fn)} ran as a TF1 graph "
            "builder in a Session."
        )
    return (
        f"auto: graph mode because {name_of(fn)} takes no arguments, is no tf.function or Keras "
        "model, and calls no tf.function: run as a TF1 graph builder in a Session "
        "(mode='function' traces it as TF2 code)."
    )


def runtime_devices(config: Any) -> str:
    """Give the Session ``config`` the devices of this process's eager runtime, as
    ``tf.compat.v1.Session()`` with no config gets them (``tf.config``'s logical and visible
    devices, e.g. two logical CPUs); a log line when they are not one per physical device."""
    import tensorflow as tf
    from tensorflow.python.eager import context

    runtime = context.context().config
    config.device_count.clear()
    config.device_count.update(runtime.device_count)
    growth = config.gpu_options.allow_growth
    config.gpu_options.CopyFrom(runtime.gpu_options)  # visible and virtual (logical) GPUs
    if not config.gpu_options.experimental.virtual_devices:  # those have memory limits
        config.gpu_options.allow_growth = growth or runtime.gpu_options.allow_growth
    if "pluggable_device_options" in config.DESCRIPTOR.fields_by_name:  # TF 2.17 and newer
        config.pluggable_device_options.CopyFrom(runtime.pluggable_device_options)
    counts = dict(runtime.device_count)
    if all(len(tf.config.list_physical_devices(kind)) == n for kind, n in counts.items()):
        return ""
    words = " and ".join(
        f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in sorted(counts.items()) if n
    )
    return (
        f"the Session has this process's devices ({words}, as tf.config set them), as "
        "tf.compat.v1.Session() would: pass device_count to choose others."
    )
