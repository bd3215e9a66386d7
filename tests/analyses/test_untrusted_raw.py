"""A ``.tfplace`` whose ``raw/`` protos were crafted (issue 31, Medium 4): predictions read what
they need of a function-mode trace from ``raw/functions.json`` under the limits of every member,
never parsing ``raw/function_graphs.pb``. Real TensorFlow, in a fresh process bounded in time."""

from __future__ import annotations

import json

import pytest
from helpers import run_python

# Processes, sockets, signals and files, not where TensorFlow puts an op: CI runs them once,
# with oneDNN's default (.ci/run's oneDNN-off run leaves out the lifecycle marker).
pytestmark = pytest.mark.lifecycle

CRAFTED_FUNCTION_GRAPHS = r"""
import json, resource, zipfile
import tensorflow as tf
from tfplace_widget import PlacementTrace, predict_placement, trace_placement

weights = tf.Variable([1.0, 2.0])
@tf.function
def step(x):
    return weights * x

trace_placement(step, tf.constant([1.0, 2.0])).save(OUT + "/real.tfplace")

def varint(value):
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))

def field(number, payload):  # a length-delimited field
    return varint(number << 3 | 2) + varint(len(payload)) + payload

resource_arg = field(2, b"_Arg") + field(5, field(1, b"T") + field(2, b"\x30\x14"))  # type: 20
graph = field(1, resource_arg) * 2_000_000  # GraphDef.node: 34 MB, 2 million nodes
crafted = field(4, field(1, graph))  # RunMetadata.function_graphs[0].partition_graphs[0]
with zipfile.ZipFile(OUT + "/real.tfplace") as real, zipfile.ZipFile(
    OUT + "/crafted.tfplace", "w", zipfile.ZIP_DEFLATED
) as out:
    for name in real.namelist():
        data = crafted if name.endswith("function_graphs.pb") else real.read(name)
        out.writestr(name, data)
    for name, data in EXTRA.items():
        out.writestr(name, data)

def predicted(path):
    trace = predict_placement(PlacementTrace.load(path), gpus=1)
    return trace.ops[["op", "device", "reason"]].values.tolist()

real = predicted(OUT + "/real.tfplace")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
crafted_prediction = predicted(OUT + "/crafted.tfplace")
print("RESULT" + json.dumps({
    "real": real,
    "crafted": crafted_prediction,
    "grew_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024,
}))
"""


# A record that the traced step was Keras's (_tracing/keras.py): predictions then ask what XLA
# would compile (_analyses/predict/keras_xla.py), from the record, not raw/function_graphs.pb.
KERAS_RECORD = {"raw/keras_xla.json": b'{"model": "m", "step": "train_step", "requested": true}'}


@pytest.mark.parametrize(
    "extra",
    [
        {},
        KERAS_RECORD,
    ],
    ids=["plain", "keras-record"],
)
def test_crafted_function_graphs_are_not_parsed(tmp_path, extra) -> None:
    code = f"OUT = {str(tmp_path)!r}\nEXTRA = {extra!r}\n{CRAFTED_FUNCTION_GRAPHS}"
    result = json.loads(run_python(code, timeout=120).stdout.split("RESULT", 1)[1])
    # main parsed and walked the 2 million nodes: 5 s and 700 MB here (4 GB at the member limit)
    assert result["grew_mb"] < 100, result["grew_mb"]
    # what the prediction knows of the variable (its handle's dtypes) is the trace's own record
    assert result["crafted"] == result["real"]
    reason = {op: reason for op, _, reason in result["real"]}["readvariableop_resource"]
    assert reason.startswith("A function argument: a variable's handle"), reason
