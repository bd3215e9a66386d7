"""``trace.ops["source"]``: every op of real code points at the line of the user's that made it
(``source_scenarios.py``, run in a process of its own with the default oneDNN setting and with
``TF_ENABLE_ONEDNN_OPTS=0``), and ops TensorFlow's runtime added have an empty source."""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

SCRIPT = Path(__file__).with_name("source_scenarios.py")
_MARK = re.compile(r"#\s*line:\s*(\w+)")
RUNTIME_TYPES = {"_Arg", "_Retval", "_Send", "_Recv", "_HostSend", "_HostRecv"}


def marks() -> dict[str, int]:
    """``# line: <mark>`` -> the line it is on, in the scenario script."""
    found = {}
    for number, text in enumerate(SCRIPT.read_text().splitlines(), start=1):
        match = _MARK.search(text)
        if match:
            found[match.group(1)] = number
    return found


LINES = marks()
# The marked lines each scenario's ops may come from: its own statements, and the line that
# traced it (the function's outputs: TensorFlow's Identity of the result, made by the call).
ALLOWED = {
    "tf_function": {"matmul", "cond", "call_scaled", "scaled", "trace_step"},
    "sequential": {"trace_sequential"},
    "subclassed": {"net_hidden", "net_out", "trace_subclassed"},
    "train_step": {
        "trained_call",
        "train_forward",
        "train_loss",
        "train_gradient",
        "train_apply",
        "trace_fit",
    },
    "graph_builder": {"graph_a", "graph_b", "graph_total"},
}
# Ops whose line is known exactly (names as the trace shows them).
EXACT = {
    "tf_function": {
        "product": "matmul",
        "Greater": "cond",
        "cond/then/cond/add": "cond",
        "cond/else/cond/sub": "cond",
        "PartitionedCall/Relu": "scaled",
        "PartitionedCall/mul": "scaled",
    },
    "subclassed": {"net_1/mul": "net_out"},
    "train_step": {
        "StatefulPartitionedCall/sub": "train_loss",
        "StatefulPartitionedCall/Square": "train_loss",
        "StatefulPartitionedCall/Mean": "train_loss",
    },
    "graph_builder": {"a": "graph_a", "b": "graph_b", "total": "graph_total"},
}


def _run(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("source") / "ops.pickle"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
        cwd=str(SCRIPT.parent),
    )
    assert run.returncode == 0, run.stderr[-4000:]
    with open(out, "rb") as handle:
        return pickle.load(handle)


@pytest.fixture(scope="module", params=["default", "onednn_off"])
def scenarios(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    env = {"TF_ENABLE_ONEDNN_OPTS": "0"} if request.param == "onednn_off" else {}
    return _run(tmp_path_factory, env)


def _line(source: str) -> tuple[str, int]:
    """``("source_scenarios.py", 42)`` of ``source_scenarios.py:42 in step``."""
    where = source.split(" in ", 1)[0]
    path, _, line = where.rpartition(":")
    return path, int(line)


@pytest.mark.parametrize("scenario", sorted(ALLOWED))
def test_every_op_points_at_its_line(scenarios: dict[str, pd.DataFrame], scenario: str) -> None:
    ops = scenarios[scenario]
    allowed = {LINES[mark]: mark for mark in ALLOWED[scenario]}
    pointed = set()
    for op, op_type, source, path in ops[["op", "type", "source", "source_path"]].itertuples(
        index=False
    ):
        assert not pd.isna(source), f"{op} ({op_type}): no source recorded"
        if source == "":
            # The runtime's: arguments, results, lowered control flow, the graph's _SOURCE.
            assert (
                op_type in RUNTIME_TYPES
                or op.startswith(("Func/", "_"))
                or op_type
                in {
                    "Switch",
                    "Merge",
                    "NoOp",
                    "Identity",
                }
            ), f"{op} ({op_type}) has no source"
            assert path == ""
            continue
        file, line = _line(source)
        assert file == SCRIPT.name, f"{op}: {source}"
        assert line in allowed, f"{op} ({op_type}): {source} is none of {allowed}"
        assert path == f"{SCRIPT}:{line}", path
        pointed.add(allowed[line])
    for op, mark in EXACT.get(scenario, {}).items():
        row = ops[ops["op"] == op]
        assert len(row) == 1, f"{op} not in {sorted(ops['op'])}"
        assert _line(row["source"].iloc[0])[1] == LINES[mark], (op, row["source"].iloc[0])
    # The statements that make ops of their own are all pointed at (not only the calls that
    # traced, or train_forward: its ops are the model's call's).
    assert (
        ALLOWED[scenario] - {"trace_step", "trace_fit", "trace_subclassed", "train_forward"}
        <= pointed
    )


def test_layers_point_at_the_line_that_called_them(scenarios: dict[str, pd.DataFrame]) -> None:
    """A subclassed model's layer ops point at the line of ``call`` that called the layer; a
    custom train_step's forward ops at the model's ``call``, its updates at the optimizer's."""
    ops = scenarios["subclassed"].set_index("op")
    hidden = ops[ops.index.str.contains("MatMul")]["source"].map(lambda s: _line(s)[1])
    assert set(hidden) == {LINES["net_hidden"], LINES["net_out"]}
    fit = scenarios["train_step"]
    by_type = dict(zip(fit["type"], fit["source"].map(lambda s: s and _line(s)[1]), strict=False))
    assert by_type["BiasAdd"] == LINES["trained_call"]
    assert by_type["AssignSubVariableOp"] == LINES["train_apply"]
    assert by_type["BiasAddGrad"] == LINES["train_gradient"]


def test_runtime_ops_have_an_empty_source(scenarios: dict[str, pd.DataFrame]) -> None:
    for name, ops in scenarios.items():
        runtime = ops[ops["type"].isin(RUNTIME_TYPES)]
        assert len(runtime), name
        assert (runtime["source"] == "").all(), runtime[["op", "source"]]


def test_a_notebook_cell_is_named_as_ipython_names_it():
    """In a kernel, an op made in a cell points at ``In[N]:line`` (IPython's name for the cell
    in tracebacks), not at the kernel's temporary file."""
    from helpers import execute_in_kernel, stream_texts

    _, outputs = execute_in_kernel(
        "import tensorflow as tf\n"
        "def build():\n"
        "    a = tf.ones((4,), name='A')\n"
        "    return tf.add(a, a, name='C')",
        "from tfplace_widget import trace_placement\n"
        "print(trace_placement(build).ops.set_index('op').loc['C', 'source'])",
    )
    assert stream_texts(outputs)[-1].strip().splitlines()[-1] == "In[1]:4 in build"
