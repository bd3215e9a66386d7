"""Benchmarks for tfplace_widget: ``python -m benchmarks`` (full) or ``--quick`` (1k/10k only).

Everything runs in one process: generated graphs of 1k, 10k and 100k ops over four CPU devices
(``graphs.py``), traced for real; the conversion of their RunMetadata to a ``PlacementTrace``
next to TensorFlow's own ``timeline.py`` on the same RunMetadata; ``trace_placement``'s overhead
beyond the traced ``session.run``; the panel (build, one search keystroke, bytes of widget state
sent to the browser); peak memory. Results go to ``benchmarks/RESULTS.md``.
"""
