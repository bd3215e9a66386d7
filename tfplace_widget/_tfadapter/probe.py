"""What this TensorFlow's placer does where versions differ, asked of TensorFlow itself.

Moved out of the former ``analyses/predict.py`` unchanged.
"""

from __future__ import annotations

from functools import lru_cache

from .capture import capture_native_output, import_tensorflow


@lru_cache(maxsize=1)
def identity_follows_its_input() -> bool:
    """Whether this TensorFlow's placer puts a lone Identity with no request on its input's
    device (``MatchIdentityOperation``; TensorFlow 2.16's placer has no such step). Asked of
    TensorFlow itself, once: a variable's read on CPU:1 and an Identity of it, placed by a real
    Session on two CPUs (its partition graphs say where the Identity went)."""
    tf, _ = import_tensorflow()
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/cpu:1"):
            handle = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[], shared_name="probe")
        init = tf.raw_ops.AssignVariableOp(resource=handle, value=tf.constant(1.0))
        read = tf.raw_ops.ReadVariableOp(resource=handle, dtype=tf.float32)
        probe = tf.identity(read, name="probe_identity")
        out = tf.math.negative(probe)
    config = tf.compat.v1.ConfigProto(device_count={"CPU": 2}, allow_soft_placement=True)
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    options = tf.compat.v1.RunOptions(output_partition_graphs=True)
    metadata = tf.compat.v1.RunMetadata()
    # What TensorFlow logs as it runs (MLIR pass notes) is the probe's, for no cell or terminal.
    with capture_native_output(), tf.compat.v1.Session(graph=graph, config=config) as session:
        session.run(init)
        session.run(out, options=options, run_metadata=metadata)
    for partition in metadata.partition_graphs:
        for node in partition.node:
            if node.name == "probe_identity":
                return node.device.endswith("CPU:1")
    raise RuntimeError("the placer probe's Identity is in no partition graph")
