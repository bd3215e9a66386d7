"""A trace in a real kernel leaves the cell clean: TF's logging goes into the panel's log."""

from __future__ import annotations

from helpers import execute_in_kernel, stream_texts

SETUP = "import tensorflow as tf\n%load_ext tfplace_widget"
TRACE = """
def build():
    a = tf.ones((10,), name="A")
    with tf.device("/cpu:1"):
        return tf.add(a, a, name="C")
panel = show_placement(build, device_count={"CPU": 2})
import os, time
# A control written to fds 1 and 2 after the trace: ipykernel forwards each fd in order, so once
# the controls are under the cell, whatever the trace wrote to the fds would be there too.
os.write(1, b"control: fd 1\\n")
os.write(2, b"control: fd 2\\n")
time.sleep(1)  # ipykernel forwards what reaches fds 1 and 2 from a thread: let it arrive
print("log has placement lines:", "C: (AddV2)" in panel.trace.log)
panel
"""


def test_tracing_in_a_kernel_writes_nothing_under_the_cell():
    _, outputs = execute_in_kernel(SETUP, TRACE)
    texts = "".join(stream_texts(outputs))
    # The controls arrived, so forwarding works and the wait was long enough ...
    assert "control: fd 1" in texts and "control: fd 2" in texts, texts
    # ... and besides them only the cell's own print: no placement log, no "Device mapping",
    # no profiler noise.
    rest = [line for line in texts.splitlines() if not line.startswith("control: fd")]
    assert rest == ["log has placement lines: True"]
    views = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(views) == 1
