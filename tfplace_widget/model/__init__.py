"""The model and its facts, the package's bottom layer: the :class:`PlacementTrace` and its
frames (``trace``, ``frames``, ``columns``, ``records``, ``xla``), why each op went where it did
(``reasons``), device names (``devices``), the graph as built (``graphfacts``) and kernel facts
(``kernels``) as plain data, the questions the analyses ask of TensorFlow's registries
(``kernel_registry``: answered by whoever runs it), with ``errors`` and ``version``. Runs no
TensorFlow (reading these facts from it is :mod:`tfplace_widget.tfadapter`'s) and imports no
other layer;
``PlacementTrace``'s methods delegate upward when called (a facade)."""
