"""Readers of recorded traces: each turns one format into flat :class:`Records` (timed
executions) and an :class:`Executed` graph (where each node ran), the common form that
``frames`` turns into DataFrames.

- ``run_metadata``: a graph-mode ``RunMetadata`` (step_stats and partition graphs);
- ``chrome``: Chrome-trace JSON written by TensorFlow's ``timeline.py``;
- ``xspace``: the TF2 profiler's XSpace (host ops and GPU stream kernels);
- ``functions``: the placed graphs of instantiated ``tf.function``s (function mode);
- ``xla``: the HLO modules and executed instructions of XLA clusters in an XSpace;

each within ``limits``, the bounds on what a file from someone else can make them hold. A saved
``.tfplace`` file is read by ``tfplace_format``.
"""

from .._model.records import Executed, Records

__all__ = ["Executed", "Records"]
