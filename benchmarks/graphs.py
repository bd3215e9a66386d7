"""Generated workloads: chains of tiny ops spread over several CPU devices, with transfers.

The graph is written as a ``GraphDef`` (fast for 100k ops) and imported with
``tf.graph_util.import_graph_def``, so it is an ordinary graph to TensorFlow and to the tool.

Shape: ``chains`` chains of scalar ``AddV2`` ops. Each step adds a per-device constant
``one_K``; the device a chain asks for moves to the next CPU every ``hop`` steps, so about one
edge in ``hop`` crosses devices (a ``_Send``/``_Recv`` pair). Every ``unplaced_every``-th op asks
for no device (the placer decides). The chains fan in to one ``AddN`` on CPU:0, the fetch.
Tensors are scalars, so run time is dominated by the number of ops, not by arithmetic.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

FETCH = "sum"


def make_graph_def(
    n_ops: int, devices: int = 4, chains: int = 16, hop: int = 8, unplaced_every: int = 5
) -> Any:
    """A ``GraphDef`` of exactly ``n_ops`` nodes (``n_ops >= devices + 2 * chains + 1``)."""
    from tensorflow.core.framework import graph_pb2, types_pb2

    floor = devices + 2 * chains + 1
    if n_ops < floor:
        raise ValueError(f"n_ops must be at least {floor} for {chains} chains, not {n_ops}.")
    graph_def = graph_pb2.GraphDef()

    def const(name: str, device: str, value: float) -> str:
        node = graph_def.node.add()
        node.name, node.op, node.device = name, "Const", device
        node.attr["dtype"].type = types_pb2.DT_FLOAT
        tensor = node.attr["value"].tensor
        tensor.dtype = types_pb2.DT_FLOAT
        tensor.tensor_shape.SetInParent()
        tensor.float_val.append(value)
        return name

    ones = [const(f"one_{k}", f"/device:CPU:{k}", 1.0) for k in range(devices)]
    adds = n_ops - devices - chains - 1
    tails = []
    for c in range(chains):
        x = const(f"c{c}/start", f"/device:CPU:{c % devices}", 0.0)
        length = adds // chains + (1 if c < adds % chains else 0)
        for j in range(length):
            k = (c + j // hop) % devices
            node = graph_def.node.add()
            node.name, node.op = f"c{c}/add{j}", "AddV2"
            node.device = "" if j % unplaced_every == unplaced_every - 1 else f"/device:CPU:{k}"
            node.input.extend([x, ones[k]])
            node.attr["T"].type = types_pb2.DT_FLOAT
            x = node.name
        tails.append(x)
    node = graph_def.node.add()
    node.name, node.op, node.device = FETCH, "AddN", "/device:CPU:0"
    node.input.extend(tails)
    node.attr["T"].type = types_pb2.DT_FLOAT
    node.attr["N"].i = len(tails)
    return graph_def


def builder(graph_def: Any) -> Callable[[], Any]:
    """A graph builder for ``trace_placement``: imports ``graph_def``, returns the fetch."""

    def build() -> Any:
        import tensorflow as tf

        tf.graph_util.import_graph_def(graph_def, name="")
        return tf.compat.v1.get_default_graph().get_tensor_by_name(f"{FETCH}:0")

    build.__name__ = f"chains_{len(graph_def.node)}"
    return build


def session_config(devices: int) -> Any:
    """The exact ConfigProto ``trace_placement(device_count={"CPU": devices})`` uses."""
    from tfplace_widget._tracing import tracer

    return tracer._session_config(None, {"CPU": devices}, True, False)


@contextlib.contextmanager
def quiet_fds() -> Iterator[None]:
    """Send fds 1 and 2 (TensorFlow's native logging) to /dev/null for the block."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in saved:
            os.dup2(null, fd)
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        os.close(null)


@dataclass
class BareRun:
    """TensorFlow alone, configured like ``trace_placement``: the overhead baseline."""

    run_metadata: Any
    graph: Any
    seconds: dict[str, float]


def bare_traced_run(graph_def: Any, config: Any, steps: int = 1) -> BareRun:
    """Build (import), open a Session, initialise, one warm-up run, one FULL_TRACE run, close.

    The same steps and ConfigProto as ``trace_placement``, without its capture, graph facts
    and frames. Native output goes to /dev/null (the tool captures it to a file instead).
    ``steps > 1``: that many FULL_TRACE runs in the one session, ``run_metadata`` their list
    (several traced steps of one graph, as a user tracing a training loop has).
    """
    import tensorflow as tf

    v1 = tf.compat.v1
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    fetch = graph.get_tensor_by_name(f"{FETCH}:0")
    t1 = time.perf_counter()
    seconds["build"] = t1 - t0
    options = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE, output_partition_graphs=True)
    metadatas = [v1.RunMetadata() for _ in range(steps)]
    with quiet_fds():
        session = v1.Session(graph=graph, config=config)
        try:
            session.list_devices()
            with graph.as_default():
                init = [
                    v1.global_variables_initializer(),
                    v1.local_variables_initializer(),
                    v1.tables_initializer(),
                ]
            session.run(init)
            t2 = time.perf_counter()
            session.run(fetch)  # warm-up, untraced
            t3 = time.perf_counter()
            for metadata in metadatas:
                session.run(fetch, options=options, run_metadata=metadata)
            t4 = time.perf_counter()
        finally:
            session.close()
    t5 = time.perf_counter()
    seconds["session+init"] = (t2 - t1) + (t5 - t4)
    seconds["warm-up run"] = t3 - t2
    seconds["traced run"] = t4 - t3
    seconds["total"] = t5 - t0
    return BareRun(metadatas[0] if steps == 1 else metadatas, graph, seconds)
