"""The HLO instructions of a graph-mode step's auto-clustered XLA clusters: one more run of the
step, under the TF2 profiler.

FULL_TRACE's step_stats time a cluster only as a whole (its ``_XlaRun``), and the TF2 profiler
cannot run beside it ("Another profiling session active"); a plain ``session.run`` under
``tf.profiler.experimental.start`` records one event per executed HLO instruction, with the
module that names each instruction's TF ops. So after the traced steps, when they launched a
cluster, the tracer's own session runs the step once more under the profiler
(``sources.xla_graph`` places those instructions at the traced step's ``xla_run``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import Any

from .._sources.xla import XlaProfile, xla_from_xspace
from .profile_dir import written_xspace

# What marks a traced step that launched an auto-clustered cluster, in its RunMetadata bytes.
_LAUNCH = b"_XlaRun"


def jit_requested(config: Any) -> bool:
    """Whether the session may auto-cluster: ``global_jit_level`` ON, ``set_jit`` or
    ``TF_XLA_FLAGS=--tf_xla_auto_jit``."""
    import tensorflow as tf

    level = config.graph_options.optimizer_options.global_jit_level if config else 0
    return (
        level > 0
        or bool(tf.config.optimizer.get_jit())
        or ("tf_xla_auto_jit" in os.environ.get("TF_XLA_FLAGS", ""))
    )


def launched_a_cluster(serialized: Sequence[bytes | None]) -> bool:
    """Whether a traced step's RunMetadata (as TensorFlow returned it) ran a cluster."""
    return any(data is not None and _LAUNCH in data for data in serialized)


def profiled_run(run: Any) -> tuple[XlaProfile | None, str]:
    """``run()`` (one plain ``session.run`` of the step) under the TF2 profiler: the XLA
    profile, or ``None`` and a line for the log saying why there is none (the trace itself
    does not fail for it: the traced steps are done)."""
    import tensorflow as tf

    with tempfile.TemporaryDirectory(prefix="tfplace-xla-") as logdir:
        try:
            tf.profiler.experimental.start(logdir)
        except tf.errors.AlreadyExistsError:
            return None, (
                "tfplace: another TensorFlow profiler session is running, so the XLA "
                "clusters' HLO instructions were not timed (stop it to see them).\n"
            )
        try:
            run()
        except Exception as exc:  # e.g. an input pipeline with no element left for it
            first = (str(exc).strip().splitlines() or [""])[0]
            return None, (
                "tfplace: the XLA clusters' HLO instructions were not timed: one more run of "
                f"the step, under the TF2 profiler, failed ({type(exc).__name__}: {first}).\n"
            )
        finally:
            tf.profiler.experimental.stop()
        space = written_xspace(logdir)
        if space is None:
            return None, "tfplace: the TF2 profiler wrote no trace of the XLA clusters.\n"
        profile = xla_from_xspace(space)
    return profile, (
        "tfplace: the XLA clusters' HLO instructions (trace.xla) were timed in one more run of "
        "the step under the TF2 profiler (FULL_TRACE records none), placed at the traced "
        "step's xla_run.\n"
    )
