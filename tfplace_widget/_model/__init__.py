"""The model and its facts, the package's bottom layer: the :class:`PlacementTrace` and its
frames (``trace``, ``frames``, ``columns``, ``records``, ``xla``), why each op went where it did
(``reasons``), device names (``devices``), the graph as built (``graphfacts``) and kernel facts
(``kernels``) as plain data, the questions the analyses ask of TensorFlow's registries
(``kernel_registry``: answered by whoever runs it), with ``errors`` and ``version``. Runs no
TensorFlow (reading these facts from it is :mod:`tfplace_widget._tfadapter`'s) and imports no
other layer, not even inside a function: what ``PlacementTrace``'s methods need from above
(findings, save, load, exports, readers) is the port ``services``, which the package root
fills in."""
