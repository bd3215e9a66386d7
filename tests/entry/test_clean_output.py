"""A trace in a real kernel leaves the cell clean: TF's logging goes into the panel's log."""

from __future__ import annotations

import re
import subprocess
import sys

from helpers import execute_in_kernel, run_python, stream_texts

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


# The README's first example as a new user runs it: %load_ext first, then their own imports.
README_SETUP = """%load_ext tfplace_widget
import numpy as np
import tensorflow as tf

@tf.function
def f(x):
    a = tf.add(x, 1.0, name="A")
    with tf.device("/cpu:1"):
        c = tf.multiply(a, a, name="C")
    return c"""
README_TRACE = """x = np.ones((1000,), np.float32)
panel = show_placement(f, x, device_count={"CPU": 2})
print(panel.trace.device_of("C"))
print("start-up lines in the log:", "cpu_feature_guard" in panel.trace.log or "port.cc" in panel.trace.log)"""


def test_tensorflows_start_up_lines_stay_out_of_the_cell_that_imports_it_after_load_ext():
    """TensorFlow's import (oneDNN, CPU features, CUDA probing from C++) and its runtime's start
    (``failed call to cuInit`` without a GPU) wrote red lines under the cell; after
    ``%load_ext`` the import is captured, and the first trace's log keeps those lines."""
    setup, trace = execute_in_kernel(README_SETUP, README_TRACE)
    assert stream_texts(setup) == []
    assert "".join(stream_texts(trace)).splitlines() == [
        "/job:localhost/replica:0/task:0/device:CPU:1",
        "start-up lines in the log: True",
    ]


RESPECTS_LOG_LEVEL = """
import os, sys
from tfplace_widget._tfadapter import capture
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"  # the user's own choice
print(capture.capture_tensorflow_import(), end=" ")
del os.environ["TF_CPP_MIN_LOG_LEVEL"]
print(capture.capture_tensorflow_import(), end=" ")
capture.stop_capturing_tensorflow_import()
print(any(type(f).__name__ == "_TensorFlowImport" for f in sys.meta_path), "tensorflow" in sys.modules)
"""


def test_a_user_who_set_tf_cpp_min_log_level_keeps_tensorflows_output_as_it_is():
    """Nothing is captured when the user chose what TensorFlow logs; unloading undoes it."""
    assert run_python(RESPECTS_LOG_LEVEL).stdout.split() == ["False", "True", "False", "False"]


FAILED_IMPORT = """
import sys
from tfplace_widget._tfadapter import capture
if sys.argv[1] == "captured":
    assert capture.capture_tensorflow_import()
sys.modules["numpy"] = None  # TensorFlow's import fails after its C++ library has logged
try:
    import tensorflow
except ImportError as exc:
    print("ImportError:", exc)
"""


def _logged_lines(stderr: str) -> list[str]:
    """TensorFlow's log lines without their time stamps and thread ids."""
    return [re.sub(r"^([IWEF])\d{4} [\d:.]+\s+\d+ ", r"\1 ", line) for line in stderr.splitlines()]


def test_a_failed_tensorflow_import_still_shows_what_it_wrote():
    runs = {
        how: subprocess.run(
            [sys.executable, "-c", FAILED_IMPORT, how],
            capture_output=True,
            text=True,
            timeout=180,
            check=True,
        )
        for how in ("captured", "as_it_is")
    }
    assert runs["captured"].stdout == runs["as_it_is"].stdout
    assert "ImportError: import of numpy halted" in runs["captured"].stdout
    assert _logged_lines(runs["captured"].stderr) == _logged_lines(runs["as_it_is"].stderr)
