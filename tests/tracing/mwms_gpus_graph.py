"""TensorFlow's own step of the ``MultiWorkerMirroredStrategy`` custom-loop tutorial
(``mwms_programs.tutorial_step``) as the strategy builds it on a worker with N GPUs: the
strategy made with a cluster resolver that reports N GPUs (``num_accelerators``, which
``CollectiveAllReduceExtended._initialize_local_devices`` reads), the step's concrete function
traced, not run (on this machine, without GPUs, its replicas fall back onto one CPU and their
all-reduces wait for each other: a call of it hung for the 120 s it was given). What the graph
holds is written as JSON for ``test_cluster_tf2.test_more_gpus_per_worker_are_refused...``.

Usage: ``python tests/tracing/mwms_gpus_graph.py OUT.json N``
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import tensorflow as tf
from tensorflow.python.distribute.cluster_resolver import SimpleClusterResolver
from tensorflow.python.eager import context

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mwms_programs  # noqa: E402

gpus = int(sys.argv[2])
resolver = SimpleClusterResolver(tf.train.ClusterSpec({}), num_accelerators={"GPU": gpus})
strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
made = []  # (variable, the device the strategy makes it under), one row per copy


def record(next_creator: Any, **kwargs: Any) -> Any:
    made.append((kwargs.get("name"), context.context().device_name))
    return next_creator(**kwargs)


with tf.variable_creator_scope(record):
    step, iterator = mwms_programs.tutorial_step(strategy, num_workers=1, build_optimizer=True)
graph = step.get_concrete_function(iterator).graph
group_sizes = {
    op.name: int(tf.make_ndarray(op.inputs[1].op.get_attr("value")).ravel()[0])
    for op in graph.get_operations()
    if op.type == "CollectiveReduceV2"
}
Path(sys.argv[1]).write_text(
    json.dumps(
        {
            "worker_devices": list(strategy.extended.worker_devices),
            "replicas": strategy.num_replicas_in_sync,
            "ops": [(op.name, op.type, op.device) for op in graph.get_operations()],
            "group_sizes": group_sizes,
            "variables": made,
        }
    )
)
