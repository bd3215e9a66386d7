"""A trace in a real kernel leaves the cell clean: TF's logging goes into the panel's log."""

from __future__ import annotations

import nbclient
import nbformat

SETUP = "import tensorflow as tf\n%load_ext tfplace_widget"
TRACE = """
def build():
    a = tf.ones((10,), name="A")
    with tf.device("/cpu:1"):
        return tf.add(a, a, name="C")
panel = show_placement(build, device_count={"CPU": 2})
print("log has placement lines:", "C: (AddV2)" in panel.trace.log)
panel
"""


def test_tracing_in_a_kernel_writes_nothing_under_the_cell():
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(SETUP), nbformat.v4.new_code_cell(TRACE)]
    nbclient.NotebookClient(nb, timeout=180, kernel_name="python3").execute()
    outputs = nb.cells[1].outputs
    streams = [o for o in outputs if o["output_type"] == "stream"]
    # Only the cell's own print: no placement log, no "Device mapping", no profiler noise.
    assert [s["text"] for s in streams] == ["log has placement lines: True\n"]
    views = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(views) == 1
