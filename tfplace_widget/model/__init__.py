"""The model and its facts, the package's bottom layer: the :class:`PlacementTrace` and its
frames (``trace``, ``frames``, ``columns``, ``records``, ``xla``), why each op went where it did
(``reasons``), device names (``devices``), the graph as built (``graphfacts``), kernel facts
(``kernels``) and the one reader of TensorFlow's op and kernel registries (``registry``), with
``errors``, ``capture`` (TensorFlow's native output, its import) and ``version``. Imports no
other layer; ``PlacementTrace``'s methods delegate upward when called (a facade)."""
