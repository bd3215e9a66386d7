"""What the tests share besides fixtures (those are in conftest.py): device names, the
checkout, ops by name, running code in a fresh process or a real kernel. Tests import it as
``helpers`` (pytest.ini's pythonpath has tests/)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

# The real GPU traces recorded by other people, found through the package (its data, with their
# licences), so the suite also runs against an installed wheel from a copy of tests/.
from tfplace_widget.examples import GPU_TRACES  # noqa: F401 (the tests import it from here)

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
TWO_CPUS = {"CPU": 2}
SEED_N = 1000  # the seed uses 10**6; from 1000 elements on, the placement does not depend on n


# The checkout these tests came from; a copy of tests/ outside it has no pyproject.toml beside.
REPO = Path(__file__).resolve().parents[1]  # tests/helpers.py
needs_source_tree = pytest.mark.skipif(
    not (REPO / "pyproject.toml").is_file(),
    reason=f"needs the source tree (pyproject.toml, notebooks/, benchmarks/): {REPO} is not one",
)


# Ctrl-C tests rely on Python's own SIGINT handler (KeyboardInterrupt). A process started with
# SIGINT ignored (under nohup, as a background job `./dev test &`, on some CI runners) passes
# SIG_IGN on to every child, and Python leaves it ignored: a SIGINT, even
# ``_thread.interrupt_main()``, then does nothing. So a test of Ctrl-C installs the handler it
# relies on, in its own process (``python_ctrl_c``) and first thing in a child script
# (``CTRL_C_AS_AT_A_TERMINAL``); its children start with SIGINT ignored (``ignore_sigint``, a
# Popen preexec_fn), so that the background case is the one always tested.
CTRL_C_AS_AT_A_TERMINAL = (
    "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
)


def ignore_sigint() -> None:
    """A ``preexec_fn``: the child starts as under ``nohup`` (SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def python_ctrl_c() -> Iterator[None]:
    """Python's default SIGINT handler in this process for the block (Ctrl-C and
    ``_thread.interrupt_main()`` raise KeyboardInterrupt), whatever it was started with."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def conflicting_colocation() -> Any:
    """Graph builder: a read colocated with an anchor on CPU:1, but pinned by its variable's
    resource edge to CPU:2 (soft placement drops the colocation; without it TF refuses)."""
    import tensorflow as tf

    with tf.device("/cpu:1"):
        anchor = tf.constant(1.0, name="anchor")
    with tf.device("/cpu:2"):
        weights = tf.Variable(1.0, name="weights")
    with tf.compat.v1.colocate_with(anchor.op):
        return tf.add(weights.read_value(), anchor, name="mixed")


def instantiations(call: Any) -> int:
    """How many functions TensorFlow instantiated during ``call()``: it records a placed graph
    (``RunMetadata.function_graphs``) for every instantiation, and for nothing it runs from
    its kernel cache."""
    from tensorflow.python.eager import context

    ctx = context.context()
    ctx.enable_run_metadata()
    ctx.export_run_metadata()
    try:
        call()
        return len(ctx.export_run_metadata().function_graphs)
    finally:
        ctx.disable_run_metadata()
        ctx.disable_graph_collection()


def executors_built(call: Any) -> tuple[int | None, Any]:
    """How many executors TensorFlow's function runtime built during ``call()``, and what
    ``call()`` returned. TensorFlow builds a function's executor (its graph optimized for the
    run, one kernel per node) at the function's first run, not at its instantiation, and counts
    each in its own test counter (``flr_executor``, labels ``default`` and
    ``single_threaded``); ``None`` where this TensorFlow has no reader of that counter."""
    try:
        from tensorflow.python.framework import test_util

        deltas = [test_util.TestDelta("flr_executor", k) for k in ("default", "single_threaded")]
    except (ImportError, AttributeError):
        return None, call()
    returned = call()
    return sum(delta.Get() for delta in deltas), returned


def op_row(trace: Any, name: str) -> pd.Series:
    """The single ``ops`` row of ``name`` (fails if there is none or several)."""
    rows = trace.ops[trace.ops["op"] == name]
    assert len(rows) == 1, f"{name!r}: {len(rows)} rows in {sorted(trace.ops['op'])}"
    return rows.iloc[0]


def raw_chrome_events(path: Path) -> list[dict]:
    """The ``X`` events of a Chrome trace, each with its lane (``<device>`` of ``<device> Compute``)."""
    document = json.loads(path.read_text())
    events = document["traceEvents"]
    lanes = {
        e["pid"]: e["args"]["name"][: -len(" Compute")]
        for e in events
        if e.get("ph") == "M"
        and e.get("name") == "process_name"
        and e["args"]["name"].endswith(" Compute")
    }
    return [dict(e, lane=lanes[e["pid"]]) for e in events if e.get("ph") == "X"]


@contextlib.contextmanager
def kernels_forward_native_output() -> Iterator[None]:
    """Kernels started in the block forward native output (fds 1 and 2) into their cells, as
    under JupyterLab: ipykernel stops doing so when it inherits pytest's PYTEST_CURRENT_TEST,
    so that variable is left out of their environment."""
    current = os.environ.pop("PYTEST_CURRENT_TEST", None)
    try:
        yield
    finally:
        if current is not None:
            os.environ["PYTEST_CURRENT_TEST"] = current


def execute_in_kernel(*cells: str, timeout: int = 180) -> list[list[dict]]:
    """Run ``cells`` in a fresh python3 kernel, as JupyterLab would; each cell's outputs
    (native output included, see ``kernels_forward_native_output``)."""
    import nbclient
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    with kernels_forward_native_output():
        nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3").execute()
    return [cell.outputs for cell in nb.cells]


def stream_texts(outputs: list[dict]) -> list[str]:
    """The text of a cell's stdout/stderr outputs."""
    return [o["text"] for o in outputs if o["output_type"] == "stream"]


def run_python(code: str, timeout: float = 180) -> Any:
    """Run ``code`` in a fresh interpreter (nothing imported yet) and return the finished
    process; a failure shows the end of its stderr."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def run_script_results(script: Path, out: Path, *args: str, timeout: float = 600) -> Any:
    """Run a test script in a process of its own (``python script out *args``) and return what
    it pickled into ``out``; a failure shows the end of its stderr."""
    import pickle

    argv = [str(script), str(out), *args]
    done = run_python(
        f"import runpy, sys; sys.argv = {argv!r}; "
        f"runpy.run_path({str(script)!r}, run_name='__main__')",
        timeout=timeout,
    )
    assert done.returncode == 0
    with open(out, "rb") as handle:
        return pickle.load(handle)


def tfplace_members(path: Path | str, frames_as_json: bool = True) -> dict[str, bytes]:
    """The members of the ``.tfplace`` file at ``path``; with ``frames_as_json``, its frames as
    JSON documents with their values inline (as format version 1 wrote them, and later
    versions still read them) and their typed arrays left out, and ``trace.inputs`` and the
    facts' maps as JSON objects in ``inputs.json`` and ``facts.json`` (as format version 2 wrote
    them, without ``maps.json``), so that a test can change one value."""
    import zipfile

    from tfplace_widget._tfplace_format.frame_arrays import ArrayReader, frame_from_members
    from tfplace_widget._tfplace_format.frame_json import frame_to_json

    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    if not frames_as_json:
        return members
    frames = [
        n[len("frames/") : -len(".json")] for n in members if re.match(r"frames/\w+\.json$", n)
    ]
    arrays = dict(members)
    for name in frames:
        reader = ArrayReader(
            name, arrays.__getitem__, lambda n: json.loads(arrays[n]), lambda *_: None
        )
        frame = frame_from_members(json.loads(arrays[f"frames/{name}.json"]), reader)
        members[f"frames/{name}.json"] = json.dumps(frame_to_json(frame, name)).encode()
    inside = tuple(f"frames/{name}/" for name in frames)
    if "maps.json" in members:
        _maps_as_json(members)
        inside += ("maps/", "maps.json")
    return {n: data for n, data in members.items() if not n.startswith(inside)}


def _maps_as_json(members: dict[str, bytes]) -> None:
    """``maps.json`` and its arrays (format version 3) written as version 2 wrote them."""
    from tfplace_widget._tfplace_format.facts_json import MAPS, put_maps
    from tfplace_widget._tfplace_format.frame_arrays import ArrayReader
    from tfplace_widget._tfplace_format.map_arrays import PREFIX, maps_from_members

    arrays = ArrayReader(
        "", members.__getitem__, lambda n: json.loads(members[n]), lambda *_: None, PREFIX
    )
    kinds = {"inputs": "names", **MAPS}
    maps = maps_from_members(json.loads(members["maps.json"]), kinds, arrays, lambda *_: None)
    members["inputs.json"] = json.dumps(maps.pop("inputs")).encode()
    if "facts.json" in members:
        facts = json.loads(members["facts.json"])
        put_maps(facts, maps)
        members["facts.json"] = json.dumps(facts).encode()
