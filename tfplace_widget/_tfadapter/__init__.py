"""The TensorFlow adapter: this package's one door to TensorFlow's process, registries and protos.

Importing TensorFlow with its start-up lines captured and the process's fds redirected while it
writes (:mod:`.capture`), its op and kernel registries (:mod:`.registry`, :mod:`.kernels`), the
graph facts read from a ``tf.Graph`` (:mod:`.graphfacts`), the placer probe (:mod:`.probe`) and
TensorFlow's protobuf classes (:mod:`.protos`). Only this package and ``_tracing/`` import
TensorFlow (tests/entry/test_layers.py checks it); the layers above get facts from here.
"""
