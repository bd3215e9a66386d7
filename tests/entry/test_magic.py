"""%load_ext tfplace_widget and %%tfplace, through IPython's own test shell."""

from __future__ import annotations

import subprocess
import sys

import pytest
from IPython.testing import globalipapp

from tfplace_widget import PlacementPanel, show_placement, trace_placement

CELL = """
import tensorflow as tf
a = tf.ones((10,), name="A")
with tf.device("/cpu:1"):
    c = tf.add(a, a, name="C")
c
"""


@pytest.fixture(scope="module")
def ip():
    shell = globalipapp.get_ipython()  # the shell, whichever test file started it
    shell.run_line_magic("load_ext", "tfplace_widget")
    yield shell
    shell.run_line_magic("unload_ext", "tfplace_widget")


def test_load_ext_adds_the_names_and_the_magic(ip):
    assert ip.user_ns["show_placement"] is show_placement
    assert ip.user_ns["trace_placement"] is trace_placement
    assert "tfplace" in ip.magics_manager.magics["cell"]


def test_cell_magic_returns_the_panel_with_the_cell_as_builder(ip):
    panel = ip.run_cell_magic("tfplace", "--cpus 2", CELL)
    assert isinstance(panel, PlacementPanel)
    ops = panel.trace.ops.set_index("op")
    assert ops.loc["C", "device"].endswith("CPU:1") and ops.loc["C", "how"] == "explicit"
    # A (a small Const, no inputs) asked for nothing: the placer puts such a generator with
    # its only consumer, so it lands on CPU:1 too, and the reason says why.
    assert ops.loc["A", "device"].endswith("CPU:1") and ops.loc["A", "how"] == "implicit"
    assert "consumers" in ops.loc["A", "reason"]
    # names the cell defines land in the user's namespace (tensors of the traced graph)
    assert ip.user_ns["c"].name == "C:0"
    assert "__tfplace_fetch__" not in ip.user_ns


def test_magic_flags_reach_the_tracer(ip):
    panel = ip.run_cell_magic(
        "tfplace",
        "--cpus 3 --device-scope /cpu:2 --optimize",
        "import tensorflow as tf\ntf.constant(1.0, name='K')",
    )
    assert len(panel.trace.devices) == 3
    assert panel.device_scope.value == "/cpu:2" and panel.optimize.value
    assert panel.trace.device_of("K").endswith("CPU:2")
    with pytest.raises(Exception, match="Cannot place op"):
        ip.run_cell_magic(
            "tfplace",
            "--no-soft --device-scope /gpu:0",
            "import tensorflow as tf\ntf.constant(1.0)",
        )


def test_magic_runs_the_cell_across_a_local_cluster(ip):
    cell = (
        "import tensorflow as tf\n"
        "with tf.device('/job:ps/task:0'):\n"
        "    w = tf.Variable(tf.ones((4, 4)), name='w')\n"
        "tf.reduce_sum(w, name='total')"
    )
    panel = ip.run_cell_magic("tfplace", "--cluster local:worker=1,ps=1", cell)
    try:
        assert panel.trace.device_of("w") == "/job:ps/replica:0/task:0/device:CPU:0"
        # total asked for nothing: it runs on the chief, worker 0, and reads w over the network
        assert panel.trace.device_of("total") == "/job:worker/replica:0/task:0/device:CPU:0"
        assert panel.trace.transfers["cross_task"].any()
        assert list(panel.chips.task_chip_of) == ["/job:ps/task:0", "/job:worker/task:0"]
    finally:
        panel.close()


def test_cell_without_a_last_expression_runs_every_sink(ip):
    panel = ip.run_cell_magic(
        "tfplace",
        "",
        "import tensorflow as tf\nx = tf.constant(2.0, name='X')\ny = tf.square(x, name='Y')",
    )
    assert "Y" in set(panel.trace.ops["op"])


def test_unload_removes_everything(ip):
    ip.run_line_magic("unload_ext", "tfplace_widget")
    try:
        assert "tfplace" not in ip.magics_manager.magics["cell"]
        assert "show_placement" not in ip.user_ns and "trace_placement" not in ip.user_ns
    finally:
        ip.run_line_magic("load_ext", "tfplace_widget")


LOAD_IN_A_FRESH_SHELL = """
import sys
from IPython.core.interactiveshell import InteractiveShell
from tfplace_widget import _magics as magics
magics.warm_up = lambda: None  # the background import is what this test keeps out
shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "tfplace_widget")
assert "tfplace" in shell.magics_manager.magics["cell"], "no magic"
slow = ["tensorflow", "pandas", "plotly", "plotly.io", "nbformat", "jsonschema"]
print(sorted(name for name in slow if name in sys.modules))
"""


def test_load_ext_returns_without_importing_tensorflow_pandas_or_plotly():
    """What made %load_ext take 1.8 s (plotly.io -> nbformat -> jsonschema's grammars) and what
    would make it take longer (TensorFlow, pandas) is imported in the background, not by the
    load itself. benchmarks/startup.py times it (0.14 s here against 1.8 s before)."""
    out = subprocess.run(
        [sys.executable, "-c", LOAD_IN_A_FRESH_SHELL],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.strip() == "[]", out.stderr[-2000:]


WARM_UP_IN = {
    "a thread (no event loop)": """
import sys
from tfplace_widget import _magics as magics
magics.warm_up().join(timeout=60)
print('tfplace_widget._widgets.panel' in sys.modules)
""",
    "the event loop (a kernel)": """
import asyncio, sys
from tfplace_widget import _magics as magics
async def cell():
    magics.warm_up()  # scheduled on the loop, as %load_ext does in a kernel
    print('tfplace_widget._widgets.panel' in sys.modules, end=' ')  # not yet: the cell returns first
    await asyncio.sleep(0.2)
asyncio.run(cell())
print('tfplace_widget._widgets.panel' in sys.modules)
""",
}


@pytest.mark.parametrize("where", list(WARM_UP_IN))
def test_the_warm_up_imports_the_panel_after_load_returns(where):
    out = subprocess.run(
        [sys.executable, "-c", WARM_UP_IN[where]],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    expected = "True" if "thread" in where else "False True"
    assert out.stdout.strip() == expected, out.stderr[-2000:]


def test_load_ext_sends_plotlys_code_before_the_first_panel(ip):
    from ipywidgets.widgets.widget import _instances

    from tfplace_widget._widgets.bundle_holder import PlotlyBundle, holder

    holder().close()  # as in a kernel that has not loaded the extension yet
    ip.run_line_magic("unload_ext", "tfplace_widget")
    ip.run_line_magic("load_ext", "tfplace_widget")
    opened = [w for w in _instances.values() if isinstance(w, PlotlyBundle) and w.comm is not None]
    assert len(opened) == 1


TF2_SETUP = """
import tensorflow as tf

@tf.function
def scaled(v):
    return tf.multiply(v, 3.0, name="scale")

x = tf.ones((4,))
"""


def test_cell_magic_traces_a_tf2_cell_whose_last_expression_is_the_call(ip):
    ip.run_cell(TF2_SETUP)
    panel = ip.run_cell_magic("tfplace", "", "scaled(x)")
    assert isinstance(panel, PlacementPanel)
    trace = panel.trace
    assert trace.mode == "function"
    assert "traced it as TF2 code" in trace.log
    ops = trace.ops.set_index("op")
    # the cell became one tf.function calling `scaled`: its op keeps its name under the call
    scale = ops[ops.index.str.endswith("scale")]
    assert len(scale) == 1 and scale["function"].iloc[0] == "scaled"
    assert scale["runs"].iloc[0] == 1
