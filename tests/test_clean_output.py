"""A trace in a real kernel leaves the cell clean: TF's logging goes into the panel's log."""

from __future__ import annotations

from conftest import execute_in_kernel, stream_texts

SETUP = "import tensorflow as tf\n%load_ext tfplace_widget"
TRACE = """
def build():
    a = tf.ones((10,), name="A")
    with tf.device("/cpu:1"):
        return tf.add(a, a, name="C")
panel = show_placement(build, device_count={"CPU": 2})
import time
time.sleep(1)  # ipykernel forwards what reaches fds 1 and 2 from a thread: let it arrive
print("log has placement lines:", "C: (AddV2)" in panel.trace.log)
panel
"""


def test_tracing_in_a_kernel_writes_nothing_under_the_cell():
    _, outputs = execute_in_kernel(SETUP, TRACE)
    # Only the cell's own print: no placement log, no "Device mapping", no profiler noise.
    assert stream_texts(outputs) == ["log has placement lines: True\n"]
    views = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(views) == 1
