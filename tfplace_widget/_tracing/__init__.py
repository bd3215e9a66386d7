"""The only code that runs TensorFlow: ``trace_placement`` (``tracer``: graph mode, and the
choice of runtime, ``mode_choice``), TF2 code (``function``, ``function_copies``, ``xla``),
clusters (``cluster``, ``local_cluster``, ``cluster_child``), the graph builder, overrides,
failures, options, ``predict`` (``predict_placement`` on a function) and ``dispatch`` (anything
``show_placement`` takes -> a trace)."""
