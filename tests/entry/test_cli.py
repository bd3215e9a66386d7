"""``tfplace`` (issue 14): show, export and run, through ``main([...])`` in-process and through
the installed console script and ``python -m tfplace_widget`` in subprocesses.

Real inputs only: the vendored GPU traces, a builder file written here and traced for real in a
Session on two CPUs (``--cpus 2``), the ``.tfplace`` it saves, and its prediction. Subprocesses
that import TensorFlow are few and shared (one ``tfplace run``), so the file stays fast.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pandas as pd
import pytest
from helpers import run_python

from tfplace_widget import PlacementTrace
from tfplace_widget._cli import main, parse_expectations
from tfplace_widget.examples import GPU_TRACES

GPU_01 = GPU_TRACES / "ikhlestov-tensorflow-profiling" / "GPU_timeline_01.json"
MERGED = GPU_TRACES / "ikhlestov-tensorflow-profiling" / "GPU_timeline_03_merged_5_runs.json"
RIPTIDE = GPU_TRACES / "riptide" / "timeline.ctf.json"
ALL_GPU_TRACES = sorted(p for p in GPU_TRACES.rglob("*.json"))

# Graph mode on two CPUs: tower_0/C pinned to CPU:1 (the stand-in GPU); tower_1 has a float32
# MatMul (a GPU kernel) and an int32 one (none: it would stay on the CPU beside a GPU), its
# operands 31x31 (a Const, under tf.ones' 1,000 elements) so that it takes a fifth or more of
# the step, well above the 1% a material finding needs under any load (4x4: 4-13%);
# "folded" is ones + 1, which Grappler folds into a Const with --optimize.
BUILDER = textwrap.dedent(
    """
    import tensorflow as tf

    def build():
        with tf.device("/cpu:0"):
            a = tf.ones((1000,), name="A")
            b = tf.ones((1000,), name="B")
        with tf.device("/cpu:1"):
            c = tf.add(a, b, name="tower_0/C")
        x = tf.ones((4, 4), name="tower_1/x")
        y = tf.matmul(x, x, name="tower_1/y")
        i = tf.ones((31, 31), tf.int32, name="tower_1/i")
        n = tf.matmul(i, i, name="tower_1/n")
        folded = tf.add(tf.ones((8,), name="eight"), 1.0, name="folded")
        return [c, y, n, folded]

    def on_gpu():
        with tf.device("/gpu:0"):
            return tf.ones((4,), name="wants_gpu") * 2.0

    def fails():
        raise RuntimeError("the builder broke")

    def on_ps():
        v1 = tf.compat.v1
        setter = v1.train.replica_device_setter(ps_tasks=1, worker_device="/job:worker/task:0")
        with v1.device(setter):
            w = tf.Variable(tf.ones((10, 10)), name="w")
            y = tf.matmul(tf.ones((2, 10)), w, name="y")
        with tf.device("/job:worker/task:1"):
            return tf.reduce_sum(y, name="z")

    @tf.function
    def tf2_step():
        x = tf.ones((4, 4), name="x")
        return tf.matmul(x, x, name="tower_2/y")

    NOT_A_FUNCTION = 42
    """
)


def cli(capsys: pytest.CaptureFixture, *argv: object) -> tuple[int, str, str]:
    """``main(argv)`` in-process: (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    """The single ``tfplace: error: ...`` line of ``err`` (fails when there is more)."""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tfplace: error: "), err
    assert "Traceback" not in err
    return lines[0]


def columns_start_together(block: list[str], names: list[str]) -> None:
    """In an aligned table (header + rows), each left-aligned column ``names[i]`` starts at
    the same offset in the header as in every row."""
    header = block[0]
    for name in names:
        start = header.index(name)
        for row in block[1:]:
            assert row[start - 2 : start] == "  " and row[start] != " ", (row, name)


def section(out: str, title: str) -> list[str]:
    """The lines of the block that starts with the line beginning ``title`` (up to a blank)."""
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(title))
    block = []
    for line in lines[first + 1 :]:
        if not line.strip():
            break
        block.append(line)
    return block


@pytest.fixture(autouse=True)
def _keep_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """``tfplace run file.py:f`` puts the file's folder on ``sys.path`` (as ``python file.py``
    would): fine for a command, undone here after each in-process test."""
    monkeypatch.setattr(sys, "path", list(sys.path))


@pytest.fixture(scope="module")
def builder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("builder") / "towers.py"
    path.write_text(BUILDER)
    return path


@pytest.fixture(scope="module")
def saved(builder: Path, tf, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tfplace run towers.py:build --cpus 2 -o run.tfplace``, in-process."""
    out = tmp_path_factory.mktemp("saved") / "run.tfplace"
    path = list(sys.path)
    try:
        assert main(["run", f"{builder}:build", "--cpus", "2", "-o", str(out)]) == 0
    finally:
        sys.path[:] = path
    return out


@pytest.fixture(scope="module")
def predicted_file(saved: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tfplace_widget import PlacementTrace, predict_placement

    out = tmp_path_factory.mktemp("predicted") / "predicted.tfplace"
    predict_placement(PlacementTrace.load(saved), gpus=1).save(out)
    return out


def console_script() -> str:
    script = Path(sys.executable).with_name("tfplace")
    assert script.exists(), (
        f"{script} is missing: the console script appears after `pip install -e . --no-deps`"
    )
    return str(script)


# -- the console script and python -m ------------------------------------------------------------
@pytest.fixture(scope="module")
def run_subprocess(builder: Path, tmp_path_factory: pytest.TempPathFactory):
    """One real `tfplace run` through the installed console script (the only subprocess here
    that imports TensorFlow): two expectations, one of them failing on the predicted GPU."""
    out = tmp_path_factory.mktemp("subprocess") / "sub.tfplace"
    done = subprocess.run(
        [
            console_script(),
            "run",
            f"{builder}:build",
            "--cpus",
            "2",
            "-o",
            str(out),
            "--expect-device",
            "tower_0/*=CPU:1",
            "--expect-device",
            "tower_1/*=GPU",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=builder.parent,
    )
    return done, out


TF2_FUNCTION = textwrap.dedent(
    """
    import tensorflow as tf

    @tf.function
    def step():
        with tf.device("/cpu:1"):
            c = tf.multiply(tf.ones((10,)), 2.0, name="C")
        return tf.add(c, 1.0, name="A")
    """
)
# What TensorFlow prints when its runtime starts (after the import): CUDA probing, e.g.
# "failed call to cuInit", where the wheel has CUDA support; each line's message after "] ".
RUNTIME_START_LINES = (
    "import os, sys\n"
    "import tensorflow as tf\n"
    "sys.stderr.flush()\n"
    "os.write(2, b'-- runtime --\\n')\n"
    "tf.config.list_physical_devices('CPU')\n"
)


def test_run_of_tf2_code_keeps_the_runtimes_start_up_lines_in_the_log_not_the_terminal(tmp_path):
    (tmp_path / "tf2_step.py").write_text(TF2_FUNCTION)
    out = tmp_path / "tf2.tfplace"
    done = subprocess.run(
        [console_script(), "run", "tf2_step.py:step", "--cpus", "2", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    printed = run_python(RUNTIME_START_LINES).stderr.split("-- runtime --\n", 1)[1]
    log = PlacementTrace.load(out).log
    for line in printed.splitlines():
        assert line.split("] ", 1)[-1] in log, (line, log[-3000:])


def test_console_script_is_registered():
    entries = [e for e in metadata.entry_points(group="console_scripts") if e.name == "tfplace"]
    assert [e.value for e in entries] == ["tfplace_widget._cli:main"], (
        "the tfplace console script is not installed: pip install -e . --no-deps"
    )


def test_console_script_run_saves_summarises_and_fails_on_the_predicted_gpu(run_subprocess):
    done, out = run_subprocess
    assert done.returncode == 1, done.stderr
    # TensorFlow's start-up lines went to the trace's log: stderr is the one verdict line.
    assert done.stderr.splitlines() == [
        "tfplace: 2 ops are not on the expected device (checked against "
        "predict_placement(trace, gpus=1)), e.g. tower_1/i on CPU:0 (tower_1/*=GPU)"
    ]
    stdout = done.stdout
    assert "towers.py" in stdout.splitlines()[0] or "build" in stdout.splitlines()[0]
    assert "graph builder, run in a Session" in stdout
    assert f"Saved the trace: {out}" in stdout
    assert "No GPU in this trace: checking against predict_placement(trace, gpus=1)" in stdout
    checks = section(stdout, "Expected devices")
    assert re.match(r"^\s+ok\s+tower_0/\*=CPU:1\s+1 op$", checks[1]), checks
    assert re.match(r"^\s+FAIL\s+tower_1/\*=GPU\s+2 of 4 ops elsewhere$", checks[2]), checks
    offending = section(stdout, "Not on GPU (tower_1/*=GPU)")
    assert [line.split()[0] for line in offending[1:]] == ["tower_1/i", "tower_1/n"]
    assert "MatMul has no GPU kernel" in offending[2]
    from tfplace_widget import PlacementTrace

    trace = PlacementTrace.load(out)
    assert trace.mode == "graph" and trace.device_of("tower_0/C").endswith("CPU:1")
    assert "oneDNN" in trace.log or "cpu_feature_guard" in trace.log  # the start-up, kept


def test_python_m_show_a_gpu_trace_without_tensorflow():
    done = subprocess.run(
        [sys.executable, "-m", "tfplace_widget", "show", str(GPU_01), "--search", "MatMul"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "error::DeprecationWarning:tfplace_widget"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "\033[" not in done.stdout  # not a terminal: no colours
    assert 'Ops matching "MatMul" (2 of 14)' in done.stdout


def test_help_is_instant_it_imports_neither_tensorflow_nor_pandas():
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tfplace_widget", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert "show" in done.stdout and "export" in done.stdout and "run" in done.stdout
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines()}
    assert not {name for name in imported if name.split(".")[0] in ("tensorflow", "pandas")}


def test_show_of_a_file_that_needs_no_prediction_does_not_import_tensorflow(
    predicted_file, tmp_path
):
    """A predicted trace and a recorded GPU trace say everything ``show`` prints (findings
    included): TensorFlow, seconds to import, is not loaded. Only a CPU trace's findings, a
    prediction for a GPU machine, read TensorFlow's kernel registry."""
    gpu = tmp_path / "gpu.tfplace"
    PlacementTrace.from_chrome_trace(GPU_01).save(gpu)
    for path in (predicted_file, gpu):
        code = (
            "import sys\n"
            "from tfplace_widget._cli import main\n"
            f"assert main(['show', {str(path)!r}]) == 0\n"
            "print('tensorflow' in sys.modules, file=sys.stderr)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Findings:" in done.stdout, done.stdout
        assert done.stderr.splitlines()[-1] == "False", (path, done.stderr[-2000:])


def show_without_tensorflow(path: Path) -> str:
    """``tfplace show path`` in a fresh process: its stdout, after asserting that TensorFlow
    was not imported."""
    code = (
        "import sys\n"
        "from tfplace_widget._cli import main\n"
        f"assert main(['show', {str(path)!r}]) == 0\n"
        "print('tensorflow' in sys.modules, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1] == "False", (path, done.stderr[-2000:])
    return done.stdout


def test_show_of_a_cpu_trace_does_not_import_tensorflow(capsys, saved, tmp_path):
    """A CPU trace's findings are about a GPU machine: their prediction reads TensorFlow's
    registries. ``tfplace run`` saves the findings it found with TensorFlow loaded, so ``show``
    prints the same ones; a file saved without them gets the findings its kernel columns
    support, and no claim that needs the registry (the cast to make: not said)."""
    code, with_tf, _ = cli(capsys, "show", saved)  # in this process, TensorFlow is loaded
    assert code == 0
    findings = section(with_tf, "Findings:")
    assert any("Cast to float32 before the MatMul (tower_1/n)" in line for line in findings)
    assert section(show_without_tensorflow(saved), "Findings:") == findings

    bare = tmp_path / "no_findings.tfplace"
    trace = PlacementTrace.load(saved)
    trace.__dict__.pop("_findings_cache", None)
    trace.save(bare)
    without = section(show_without_tensorflow(bare), "Findings:")
    fallback = [line for line in without if "cpu_fallback" in line]
    assert len(fallback) == 1
    assert "tower_1/n (MatMul): int32 MatMul has no GPU kernel" in fallback[0]
    assert "Cast to" not in "\n".join(without)
    kinds = [line.split()[1] for line in without[1:]]
    assert kinds == [line.split()[1] for line in findings[1:]]


def test_console_script_errors_are_one_line_and_debug_adds_the_traceback(tmp_path):
    missing = tmp_path / "missing.json"
    done = subprocess.run(
        [console_script(), "show", str(missing)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "missing.json" in one_error_line(done.stderr)
    debug = subprocess.run(
        [console_script(), "show", str(missing), "--debug"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert debug.returncode == 2
    assert "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.splitlines()[-1] == one_error_line(done.stderr)


# -- show -----------------------------------------------------------------------------------------
def test_show_a_real_gpu_trace(capsys):
    code, out, err = cli(capsys, "show", GPU_01, "--search", "MatMul")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"{GPU_01}: 14 ops on 2 devices (loaded from a file)"
    devices = section(out, "Devices")
    assert devices[0].split() == ["device", "ops", "busy", "full", "name"]
    assert devices[1].split()[:2] == ["GPU:0", "13"]
    assert devices[2].split()[:2] == ["CPU:0", "1"]
    assert devices[1].endswith("/job:localhost/replica:0/task:0/device:GPU:0")
    assert "How placed: 0 explicit, 0 implicit, 3 runtime, 11 unknown" in lines
    transfers = section(out, "Transfers: 1 (sizes not recorded)")
    assert transfers[1].split() == ["GPU:0", "CPU:0", "1"]
    findings = section(out, "Findings: 1 (worst first)")
    assert findings[1].split()[:2] == ["info", "costly_transfer"]
    ops = section(out, 'Ops matching "MatMul" (2 of 14)')
    assert [row.split()[0] for row in ops[1:]] == ["MatMul", "edge_22_MatMul"]
    columns_start_together(ops, ["type", "device", "how"])
    columns_start_together(devices, ["full name"])


@pytest.mark.parametrize("path", ALL_GPU_TRACES, ids=lambda p: p.parent.name + "/" + p.name)
def test_show_every_vendored_gpu_trace(capsys, path):
    from tfplace_widget import PlacementTrace

    trace = PlacementTrace.from_chrome_trace(path)
    code, out, err = cli(capsys, "show", path, "--limit", "0", "--findings", "0")
    assert (code, err) == (0, "")
    counted = rf": {len(trace.ops):,} ops? on {len(trace.devices)} devices? \("
    assert re.search(counted, out.splitlines()[0]), out.splitlines()[0]
    listed = section(out, "Ops (")
    assert len(listed) == 1 + len(trace.ops)  # --limit 0: every op
    found = len(trace.findings)
    assert f"Findings: {found or 'none'}" in out


def test_show_the_merged_runs_finding_and_a_glob_search(capsys):
    code, out, _ = cli(capsys, "show", MERGED, "--search", "*MatMul*", "--findings", "8")
    assert code == 0
    assert "merged_runs" in out
    code, out, _ = cli(capsys, "show", RIPTIDE, "--search", "gradients/*MatMul*")
    ops = section(out, 'Ops matching "gradients/*MatMul*"')
    assert [row.split()[0] for row in ops[1:]] == ["gradients/MatMul_grad/MatMul_1"]


def test_show_limit_and_colour(capsys):
    code, out, _ = cli(capsys, "show", RIPTIDE, "--limit", "3")
    assert code == 0
    ops = section(out, "Ops (the first 3 of 50; --limit 0 lists all)")
    assert len(ops) == 4
    assert "\033[" not in out  # captured stdout is not a terminal
    code, out, _ = cli(capsys, "--color", "always", "show", RIPTIDE)
    assert code == 0 and "\033[1mDevices\033[0m" in out


def test_show_a_saved_trace(capsys, saved):
    code, out, err = cli(capsys, "show", saved, "--search", "tower_")
    assert (code, err) == (0, "")
    assert "(graph builder, run in a Session)" in out.splitlines()[0]
    assert "How placed: " in out and " explicit" in out
    devices = section(out, "Devices")
    assert [row.split()[0] for row in devices[1:]] == ["CPU:0", "CPU:1"]
    assert "Transfers: 3 (12.0 kB)" in out
    assert "cpu_fallback" in out  # the int32 MatMul: no GPU kernel
    ops = section(out, 'Ops matching "tower_"')
    rows = {row.split()[0]: row for row in ops[1:]}
    assert rows["tower_0/C"].split()[1:4] == ["AddV2", "CPU:1", "explicit"]
    assert "Requested /device:CPU:1" in rows["tower_0/C"]


@pytest.mark.parametrize("suffix", [".pb", ".pbtxt"])
def test_show_a_run_metadata_file(capsys, saved, tmp_path, tf, suffix):
    from google.protobuf import text_format

    from tfplace_widget import PlacementTrace

    data = PlacementTrace.load(saved).raw["run_metadata_0.pb"]
    path = tmp_path / f"step{suffix}"
    if suffix == ".pb":
        path.write_bytes(data)
    else:
        proto = tf.compat.v1.RunMetadata.FromString(data)
        path.write_text(text_format.MessageToString(proto))
    code, out, err = cli(capsys, "show", path, "--search", "tower_0/C")
    assert (code, err) == (0, "")
    ops = section(out, 'Ops matching "tower_0/C"')
    rows = {row.split()[0]: row.split() for row in ops[1:]}
    assert rows["tower_0/C"][1:4] == ["AddV2", "CPU:1", "unknown"]  # no graph: no request


def test_show_a_prediction(capsys, predicted_file):
    code, out, err = cli(capsys, "show", predicted_file, "--search", "tower_1/")
    assert (code, err) == (0, "")
    assert "(predicted, not run)" in out.splitlines()[0]
    assert "Predicted copies:" in out
    ops = section(out, 'Ops matching "tower_1/"')
    devices = {row.split()[0]: row.split()[2] for row in ops[1:]}
    assert devices["tower_1/y"] == "GPU:0" and devices["tower_1/n"] == "CPU:0"


# -- --html -----------------------------------------------------------------------------------------
def test_show_html_writes_the_report(capsys, tmp_path):
    pytest.importorskip("tfplace_widget._export.html", reason="the HTML report has not landed")
    report = tmp_path / "report.html"
    code, out, err = cli(capsys, "show", GPU_01, "--html", report, "--search", "MatMul")
    assert (code, err) == (0, "")
    assert f"\nWrote the HTML report: {report}" in out
    assert "\\n" not in out  # a blank line before it, not an escaped newline
    page = report.read_text()
    assert page.lstrip().lower().startswith("<!doctype html")
    # The report's data is this trace's, with the search filled in, as the library writes it.
    from tfplace_widget import PlacementTrace
    from tfplace_widget._export.html import report_html

    data = report_data_of(page)
    assert data["search"] == "MatMul"
    assert data == report_data_of(
        report_html(PlacementTrace.from_chrome_trace(GPU_01), search="MatMul")
    )


def report_data_of(page: str) -> dict:
    """The JSON document of an HTML report (its gzip+base64 ``tfplace-data`` script), but the
    timeline's ``uirevision`` (a counter that differs from one figure to the next)."""
    import base64

    found = re.search(r"<script id='tfplace-data'[^>]*gzip\+base64[^>]*>([^<]+)</script>", page)
    assert found, "no tfplace-data script in the report"
    data = json.loads(gzip.decompress(base64.b64decode(found.group(1))))
    data["figure"]["layout"].pop("uirevision", None)
    return data


def test_show_html_without_the_report_module_is_a_clear_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tfplace_widget._export.html", None)  # as if not there
    report = tmp_path / "report.html"
    code, out, err = cli(capsys, "show", GPU_01, "--html", report)
    assert code == 2 and out == ""
    assert "--html needs the HTML report (tfplace_widget._export.html)" in one_error_line(err)
    assert not report.exists()


def test_show_html_to_an_unwritable_path(capsys, tmp_path):
    pytest.importorskip("tfplace_widget._export.html", reason="the HTML report has not landed")
    code, _, err = cli(capsys, "show", GPU_01, "--html", tmp_path / "no" / "report.html")
    assert code == 2
    assert "does not exist" in one_error_line(err)


# -- export -----------------------------------------------------------------------------------------
def test_export_chrome_gz_reads_back(capsys, saved, tmp_path):
    from tfplace_widget import PlacementTrace

    out_path = tmp_path / "step.json.gz"
    code, out, err = cli(capsys, "export", saved, "--chrome", out_path)
    assert (code, err) == (0, "")
    assert out.strip() == f"Wrote the Chrome trace: {out_path}"
    document = json.loads(gzip.decompress(out_path.read_bytes()))
    assert {e["ph"] for e in document["traceEvents"]} >= {"X", "M"}
    back = PlacementTrace.from_chrome_trace(out_path)
    original = PlacementTrace.load(saved)
    assert set(back.ops["op"]) == set(original.events["op"])
    code, out, err = cli(capsys, "show", out_path, "--search", "tower_0/C")  # gzipped JSON
    assert (code, err) == (0, "")
    assert section(out, 'Ops matching "tower_0/C"')[1].split()[:3] == [
        "tower_0/C",
        "AddV2",
        "CPU:1",
    ]


def test_export_a_gpu_trace_to_chrome_and_csv_at_once(capsys, tmp_path):
    code, out, err = cli(
        capsys, "export", GPU_01, "--chrome", tmp_path / "t.json", "--csv", tmp_path / "tables"
    )
    assert (code, err) == (0, "")
    assert len(out.splitlines()) == 2
    ops = pd.read_csv(tmp_path / "tables" / "ops.csv", keep_default_na=False, na_values=[""])
    assert len(ops) == 14 and "MatMul" in set(ops["op"])
    assert sorted(p.name for p in (tmp_path / "tables").iterdir()) == [
        "events.csv",
        "ops.csv",
        "transfers.csv",
    ]
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]


def test_export_parquet(capsys, saved, tmp_path):
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        code, out, err = cli(capsys, "export", saved, "--parquet", tmp_path / "pq")
        assert code == 2 and out == ""
        assert "--parquet needs pyarrow" in one_error_line(err)
        assert not (tmp_path / "pq").exists()
        return
    code, out, err = cli(capsys, "export", saved, "--parquet", tmp_path / "pq")
    assert (code, err) == (0, "")
    assert len(pd.read_parquet(tmp_path / "pq" / "ops.parquet")) > 0


def test_export_parquet_without_pyarrow(capsys, saved, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if it were not installed
    code, _, err = cli(capsys, "export", saved, "--parquet", tmp_path / "pq")
    assert code == 2
    assert "pip install 'tfplace_widget[parquet]'" in one_error_line(err)


def test_export_needs_a_format(capsys, saved):
    code, _, err = cli(capsys, "export", saved)
    assert code == 2
    assert "--chrome OUT.json.gz, --csv DIR or --parquet DIR" in one_error_line(err)


def test_export_a_prediction_to_chrome_is_refused(capsys, predicted_file, tmp_path):
    code, _, err = cli(capsys, "export", predicted_file, "--chrome", tmp_path / "p.json")
    assert code == 2
    assert "no events to draw" in one_error_line(err)
    assert not (tmp_path / "p.json").exists()


# -- bad input: one line, exit 2 --------------------------------------------------------------------
def _bad_inputs(tmp: Path) -> dict[str, tuple[Path, str]]:
    (tmp / "garbage.json").write_text("this is not json")
    (tmp / "garbage.pb").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00garbage")
    (tmp / "notzip.tfplace").write_text("not a zip")
    (tmp / "empty.json").write_text("")
    (tmp / "folder").mkdir()
    return {
        "missing": (tmp / "missing.tfplace", "No such file or directory"),
        "json": (tmp / "garbage.json", "is not a Chrome-trace JSON"),
        "binary": (tmp / "garbage.pb", "is not a RunMetadata"),
        "tfplace": (tmp / "notzip.tfplace", "is not a .tfplace file"),
        "empty": (tmp / "empty.json", "empty.json"),
        "folder": (tmp / "folder", "is a folder, not a trace file"),
    }


@pytest.mark.parametrize("kind", ["missing", "json", "binary", "tfplace", "empty", "folder"])
@pytest.mark.parametrize("command", ["show", "export"])
def test_bad_input_files(capsys, tmp_path, kind, command, tf):
    path, words = _bad_inputs(tmp_path)[kind]
    extra = ["--csv", str(tmp_path / "out")] if command == "export" else []
    code, out, err = cli(capsys, command, path, *extra)
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert words in line and path.name in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("where", "words"),
    [
        ("missing-folder", "does not exist"),
        ("a-folder", "It is a folder"),
        ("below-a-file", "does not exist"),
    ],
)
def test_export_to_unwritable_outputs(capsys, tmp_path, where, words):
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "file").write_text("x")
    target = {
        "missing-folder": tmp_path / "nope" / "t.json",
        "a-folder": tmp_path / "a-folder",
        "below-a-file": tmp_path / "file" / "t.json",
    }[where]
    code, out, err = cli(capsys, "export", GPU_01, "--chrome", target)
    assert code == 2 and out == ""
    assert words in one_error_line(err)


def test_export_csv_into_a_file(capsys, tmp_path):
    (tmp_path / "file").write_text("x")
    code, _, err = cli(capsys, "export", GPU_01, "--csv", tmp_path / "file")
    assert code == 2
    assert "it is a file, not a folder" in one_error_line(err)


def test_usage_errors_are_one_line(capsys):
    for argv, words in [
        ([], "the following arguments are required: COMMAND"),
        (["show"], "the following arguments are required: FILE"),
        (["frobnicate"], "invalid choice"),
        (["show", str(GPU_01), "--limit", "-1"], "expected 0 or more"),
        (["run", "x.py:f"], "-o/--output"),
    ]:
        code, out, err = cli(capsys, *argv)
        assert code == 2 and out == "", argv
        lines = err.splitlines()
        assert len(lines) == 1 and words in lines[0] and "--help" in lines[0], (argv, err)


@pytest.mark.parametrize(
    ("raised", "code", "words"),
    [
        (
            RuntimeError("boom"),
            3,
            "internal error, please report it with the --debug output: RuntimeError: boom "
            "(--debug shows the traceback)",
        ),
        (KeyboardInterrupt(), 130, "interrupted"),
    ],
)
def test_a_bug_or_ctrl_c_is_still_one_line(capsys, monkeypatch, raised, code, words):
    import tfplace_widget._cli.commands as cli_module

    def fail(*args, **kwargs):
        raise raised

    monkeypatch.setattr(cli_module, "print_summary", fail)
    got, _, err = cli(capsys, "show", GPU_01)
    assert got == code
    assert one_error_line(err) == f"tfplace: error: {words}"
    got, _, err = cli(capsys, "show", GPU_01, "--debug")
    assert got == code and "Traceback (most recent call last)" in err
    assert err.splitlines()[-1] == f"tfplace: error: {words}".replace(
        " (--debug shows the traceback)", ""
    )


def test_help_and_version(capsys):
    code, out, _ = cli(capsys, "--help")
    assert code == 0 and "Exit codes: 0 done, 1 an --expect-device check failed" in out
    code, out, _ = cli(capsys, "run", "--help")
    assert code == 0 and "--expect-device PATTERN=DEVICE" in out
    code, out, _ = cli(capsys, "--version")
    assert code == 0 and out.startswith("tfplace_widget ")


# -- run --------------------------------------------------------------------------------------------
def test_run_prints_the_summary_and_saves(capsys, builder, tmp_path):
    out_path = tmp_path / "t.tfplace"
    code, out, err = cli(
        capsys, "run", f"{builder}:build", "--cpus", "2", "-o", out_path, "--search", "folded"
    )
    assert (code, err) == (0, "")
    assert "(graph builder, run in a Session)" in out.splitlines()[0]
    assert out.rstrip().endswith(f"Saved the trace: {out_path}")
    ops = {row.split()[0]: row.split()[1] for row in section(out, 'Ops matching "folded"')[1:]}
    assert ops["folded"] == "AddV2"  # Grappler off: runs as written
    assert "Ops (" not in out  # without --search, run lists no ops


def test_run_options_reach_the_trace(capsys, builder, tmp_path):
    from tfplace_widget import PlacementTrace

    scoped = tmp_path / "scoped.tfplace"
    argv = ["run", f"{builder}:build", "--cpus", "2", "--device-scope", "/cpu:1", "-o", scoped]
    code, _, err = cli(capsys, *argv, "--steps", "2", "--warmup", "0")
    assert (code, err) == (0, "")
    trace = PlacementTrace.load(scoped)
    assert trace.device_of("tower_1/x").endswith("CPU:1")  # the outer scope
    assert trace.device_of("A").endswith("CPU:0")  # its own request wins
    assert set(trace.ops.loc[trace.ops["op"] == "folded", "runs"]) == {2}
    assert set(trace.ops.loc[trace.ops["op"] == "folded", "type"]) == {"AddV2"}

    optimized = tmp_path / "optimized.tfplace"
    code, _, err = cli(capsys, "run", f"{builder}:build", "--optimize", "-o", optimized)
    assert (code, err) == (0, "")
    trace = PlacementTrace.load(optimized)
    assert set(trace.ops.loc[trace.ops["op"] == "folded", "type"]) == {"Const"}  # ones + 1


def test_run_tf2_code(capsys, builder, tmp_path):
    from tfplace_widget import PlacementTrace

    out_path = tmp_path / "tf2.tfplace"
    code, out, err = cli(capsys, "run", f"{builder}:tf2_step", "-o", out_path, "--search", "y")
    assert (code, err) == (0, "")
    assert "(TF2 code, run in the eager runtime)" in out.splitlines()[0]
    assert PlacementTrace.load(out_path).mode == "function"
    code, out, _ = cli(capsys, "show", out_path, "--expect-device", "tower_2/y=GPU")
    assert code == 0 and "predict_placement(trace, gpus=1)" in out


def test_run_on_a_local_cluster_checks_tasks(capsys, builder, tmp_path):
    from tfplace_widget import PlacementTrace

    out_path = tmp_path / "ps.tfplace"
    argv = ["run", f"{builder}:on_ps", "--mode", "graph", "--cluster", "local:worker=2,ps=1"]
    expect = ["--expect-device", "w=/job:ps/task:0", "--expect-device", "z=/job:worker/task:1"]
    code, out, err = cli(capsys, *argv, "--cpus", "2", "-o", out_path, *expect)
    assert (code, err) == (0, ""), err
    assert "Expected devices (checked against the trace)" in out
    trace = PlacementTrace.load(out_path)
    assert len(trace.devices) == 6  # --cpus counts per task
    assert trace.device_of("w") == "/job:ps/replica:0/task:0/device:CPU:0"
    assert trace.transfers["cross_task"].any()
    # y asked for worker 0: a check that wants it on the ps job fails, naming where it ran.
    code, out, err = cli(capsys, "show", out_path, "--expect-device", "y=/job:ps")
    assert code == 1 and "/job:worker/task:0/CPU:0" in out, out


def test_run_no_soft_refuses_a_gpu_request(capsys, builder, tmp_path):
    out_path = tmp_path / "t.tfplace"
    code, out, err = cli(capsys, "run", f"{builder}:on_gpu", "--no-soft", "-o", out_path)
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert "Cannot place op" in line and "/device:GPU:0: with soft placement off" in line
    assert not out_path.exists()
    code, out, err = cli(capsys, "run", f"{builder}:on_gpu", "-o", out_path)  # soft: moved
    assert (code, err) == (0, "") and out_path.exists()


def test_run_a_module_function_from_the_working_directory(capsys, builder, tmp_path, monkeypatch):
    (tmp_path / "towers_module.py").write_text(BUILDER)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    code, _, err = cli(capsys, "run", "towers_module:build", "--cpus", "2", "-o", "m.tfplace")
    assert (code, err) == (0, "")
    assert (tmp_path / "m.tfplace").exists()
    sys.modules.pop("towers_module", None)


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ("{builder}", "Expected MODULE_OR_FILE:FUNCTION"),
        ("{builder}:", "Expected MODULE_OR_FILE:FUNCTION"),
        ("{folder}/missing.py:build", "No such file"),
        ("no_such_module_here:build", "No module named 'no_such_module_here'"),
        ("{builder}:nope", "has no 'nope'. It defines: build, fails, on_gpu, on_ps, tf2_step"),
        ("{builder}:NOT_A_FUNCTION", "is a int, not a function"),
        ("{folder}/broken.py:build", "Importing"),
        ("{builder}:fails", "the builder broke"),
    ],
)
def test_run_bad_targets(capsys, builder, tmp_path, target, words):
    (builder.parent / "broken.py").write_text("def build(:\n")
    spec = target.format(builder=builder, folder=builder.parent)
    code, out, err = cli(capsys, "run", spec, "--cpus", "2", "-o", tmp_path / "t.tfplace")
    assert code == 2 and out == ""
    assert words in one_error_line(err)
    assert not (tmp_path / "t.tfplace").exists()


@pytest.mark.parametrize("where", ["missing-folder", "a-folder", "below-a-file"])
def test_run_to_an_unwritable_output_fails_before_tracing(capsys, builder, tmp_path, where):
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "file").write_text("x")
    target = {
        "missing-folder": tmp_path / "nope" / "t.tfplace",
        "a-folder": tmp_path / "a-folder",
        "below-a-file": tmp_path / "file" / "t.tfplace",
    }[where]
    # A builder that would fail: the output is refused before anything is imported or run.
    code, out, err = cli(capsys, "run", f"{builder}:fails", "-o", target)
    assert code == 2 and out == ""
    assert "Cannot write the trace to" in one_error_line(err)


# -- --expect-device --------------------------------------------------------------------------------
def test_expectations_parse():
    gpu, short, full, lower = parse_expectations(
        ["tower_*=GPU", "loss=GPU:1", "a=b=/job:localhost/replica:0/task:0/device:CPU:0", "x=cpu"]
    )
    assert (gpu.pattern, gpu.spec.type, gpu.spec.index) == ("tower_*", "GPU", None)
    assert (short.spec.type, short.spec.index) == ("GPU", 1)
    assert (full.pattern, full.spec.type, full.spec.index) == ("a=b", "CPU", 0)
    assert lower.spec.type == "CPU"


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("tower_*", "expected PATTERN=DEVICE"),
        ("=GPU", "expected PATTERN=DEVICE"),
        ("tower_*=", "expected PATTERN=DEVICE"),
        ("tower_*=/replica:0", "names no device type or task"),
        ("tower_*=GPU:x", "--expect-device 'tower_*=GPU:x'"),
    ],
)
def test_bad_expectations_fail_before_anything_runs(capsys, value, words):
    code, out, err = cli(capsys, "show", GPU_01, "--expect-device", value)
    assert code == 2 and out == ""
    assert words in one_error_line(err)


def test_expect_on_a_real_gpu_trace_checks_the_trace(capsys):
    code, out, err = cli(
        capsys, "show", GPU_01, "--expect-device", "MatMul=GPU", "--expect-device", "Mat*=GPU:0"
    )
    assert (code, err) == (0, "")
    assert "Expected devices (checked against the trace)" in out
    assert "predict_placement" not in out
    code, out, err = cli(capsys, "show", GPU_01, "--expect-device", "random_normal*=CPU")
    assert code == 1
    offending = section(out, "Not on CPU (random_normal*=CPU)")
    assert {row.split()[1] for row in offending[1:]} == {"GPU:0"}
    assert err.startswith("tfplace: ") and len(err.splitlines()) == 1 and "error" not in err


def test_expect_lists_at_most_50_offending_ops(capsys):
    from tfplace_widget import PlacementTrace

    path = GPU_TRACES / "kittibox" / "timeline_01.json"
    ops = PlacementTrace.from_chrome_trace(path).ops
    on_gpu = int(
        (ops["how"].astype(str) != "runtime").sum()
        - (ops.loc[ops["how"].astype(str) != "runtime", "device"].str.contains("CPU").sum())
    )
    assert on_gpu > 50
    code, out, err = cli(capsys, "show", path, "--expect-device", "*=CPU")
    assert code == 1
    offending = section(out, "Not on CPU (*=CPU)")
    assert len(offending) == 1 + 50 + 1
    assert offending[-1] == f"  ... and {on_gpu - 50:,} more"
    assert f"tfplace: {on_gpu:,} ops are not on the expected device" in err


def test_expect_gpu_without_a_gpu_checks_the_prediction(capsys, saved):
    code, out, err = cli(capsys, "show", saved, "--expect-device", "tower_1/y=GPU")
    assert (code, err) == (0, "")
    assert "No GPU in this trace: checking against predict_placement(trace, gpus=1)" in out
    code, out, err = cli(capsys, "show", saved, "--expect-device", "tower_1/n=GPU:0")
    assert code == 1
    (row,) = section(out, "Not on GPU:0 (tower_1/n=GPU:0)")[1:]
    assert row.split()[:3] == ["tower_1/n", "CPU:0", "implicit"]
    assert "MatMul has no GPU kernel" in row
    assert "e.g. tower_1/n on CPU:0 (tower_1/n=GPU:0)" in err


def test_expect_gpu_1_predicts_two_gpus(capsys, saved):
    code, out, _ = cli(capsys, "show", saved, "--expect-device", "tower_1/y=GPU:1")
    assert code == 1  # the placer takes GPU:0
    assert "predict_placement(trace, gpus=2)" in out


def test_expect_cpu_and_gpu_together_are_checked_on_one_placement(capsys, saved):
    # tower_1/x is on CPU:0 here, but on the GPU machine it goes to GPU:0 with its MatMul.
    code, out, _ = cli(
        capsys,
        "show",
        saved,
        "--expect-device",
        "tower_1/y=GPU",
        "--expect-device",
        "tower_1/x=CPU",
    )
    assert code == 1
    offending = section(out, "Not on CPU (tower_1/x=CPU)")
    assert offending[1].split()[:2] == ["tower_1/x", "GPU:0"]


def test_expect_leaves_runtime_ops_out(capsys, saved):
    # tower_0/C's _Send/_Recv (tower_0/C/_N) are on CPU:0 and CPU:1: not the user's ops.
    code, out, _ = cli(capsys, "show", saved, "--expect-device", "tower_0/*=CPU:1")
    assert code == 0
    assert re.search(r"ok\s+tower_0/\*=CPU:1\s+1 op$", out, re.M)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("nothing_*=CPU", "no op matches 'nothing_*'"),
        ("tower_1/y=CPU:7", "no device 'CPU:7' in the trace"),
        ("tower_1/y=TPU", "no TPU device"),
    ],
)
def test_expectations_that_cannot_be_checked_are_bad_input(capsys, saved, value, words):
    code, _, err = cli(capsys, "show", saved, "--expect-device", value)
    assert code == 2
    assert words in one_error_line(err)


def test_expect_gpu_on_a_trace_without_its_graph_says_so(capsys, tmp_path):
    from tfplace_widget import PlacementTrace

    path = tmp_path / "cpu_only.json"
    cpu_only = GPU_TRACES / "ikhlestov-tensorflow-profiling" / "CPU_timeline_01.json"
    path.write_bytes(cpu_only.read_bytes())
    assert not any("GPU" in d for d in PlacementTrace.from_chrome_trace(path).devices)
    code, _, err = cli(capsys, "show", path, "--expect-device", "MatMul=GPU")
    assert code == 2
    assert "no graph facts" in one_error_line(err)


# Escapes a crafted name sends a terminal: the clipboard (OSC 52), the window title (OSC 0),
# clear the screen, and a carriage return that overwrites the line with a verdict of its own.
HOSTILE = "\x1b]52;c;ZXZpbA==\x07\x1b]0;pwned\x07\x1b[2J\x9b2J\r\x1b[2Ktfplace: ALL OK\u202e"


def _hostile_trace(tmp_path: Path) -> Path:
    """GPU_01 with its MatMul named and typed with terminal escapes (a crafted file)."""
    document = json.loads(GPU_01.read_text())
    for event in document["traceEvents"]:
        if event.get("ph") == "X" and event.get("args", {}).get("name") == "MatMul":
            event["args"].update(name="MatMul" + HOSTILE, op="MatMul" + HOSTILE)
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize("color", ["never", "always"])
def test_names_from_a_file_send_no_escape_to_the_terminal(capsys, tmp_path, color):
    """Issue 31: ``tfplace show`` printed names as they were, also with ``--color never``."""
    path = _hostile_trace(tmp_path)
    code, out, err = cli(
        capsys, "show", path, "--search", "MatMul*", "--expect-device", "MatMul*=CPU",
        "--color", color,
    )  # fmt: skip
    assert code == 1
    own_styles = re.compile(r"\x1b\[(?:0|[0-9;]+)m")
    assert color == "never" or own_styles.search(out)  # the tool's colours stay
    for text in (own_styles.sub("", out) if color == "always" else out, err):
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", text), repr(text)
    assert "MatMul\\x1b]52;c;ZXZpbA==\\x07" in out  # shown as what it is
    assert err.count("\n") == 1 and "\\r\\x1b[2Ktfplace: ALL OK\\u202e on GPU:0" in err
    assert err.startswith("tfplace: 1 op is not on the expected device")


def test_show_search_with_a_glob_of_several_stars_on_a_long_name_answers(tmp_path):
    """Issue 31: ``tfplace show --search '*/*/*/MatMul'`` on a trace with one op name of
    10,000 characters (a 4 KB file) did not finish in minutes: a child bounded in time."""
    document = json.loads(GPU_01.read_text())
    event = next(e for e in document["traceEvents"] if e.get("ph") == "X")
    event["args"]["name"] = "a/" * 5000
    path = tmp_path / "long.json"
    path.write_text(json.dumps(document))
    command = [sys.executable, "-m", "tfplace_widget", "show", str(path), "--search"]
    try:
        done = subprocess.run(
            [*command, "*/*/*/MatMul"], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("tfplace show --search did not answer within 60 s")
    assert done.returncode == 0, done.stderr[-2000:]
    assert 'Ops matching "*/*/*/MatMul"' in done.stdout


def test_one_long_name_does_not_pad_every_line_of_show(capsys, tmp_path):
    """Issue 31: one 50 MB op name padded every line of ``tfplace show`` to 50 MB (524 MB of
    output from a 157 KB file); here 1 MB: every line stays short, the name cut with "…"."""
    document = json.loads(GPU_01.read_text())
    event = next(e for e in document["traceEvents"] if e.get("ph") == "X")
    event["args"]["name"] = "n" * 1_000_000
    path = tmp_path / "long.json"
    path.write_text(json.dumps(document))
    code, out, _ = cli(capsys, "show", path, "--limit", "0")
    assert code == 0
    lines = out.splitlines()
    assert max(map(len, lines)) < 2000, sorted(map(len, lines))[-3:]
    assert any("nnnnnnnn…" in line for line in lines)


@pytest.mark.parametrize("mode", ["graph", "function"])
def test_run_of_code_calling_sys_exit_is_an_error_saying_so(capsys, tmp_path, mode, tf):
    """Issue 31: a builder calling ``sys.exit(5)`` while traced ended ``tfplace run`` with exit
    code 5 and nothing on stderr; and the one error line pointed at a traceback "chained
    above" that only --debug shows."""
    path = tmp_path / f"exits_{mode}.py"
    path.write_text(
        "import sys\nimport tensorflow as tf\n\n\ndef build(*args):\n"
        "    tf.constant(1.0, name='before')\n    sys.exit(5)\n"
    )
    target = f"{path}:build"
    code, _, err = cli(capsys, "run", target, "--mode", mode, "-o", tmp_path / "t.tfplace")
    assert code == 2
    line = one_error_line(err)
    assert "SystemExit: 5" in line and "(--debug shows the traceback)" in line, line
    assert "chained above" not in line
    code, _, err = cli(
        capsys, "run", target, "--mode", mode, "-o", tmp_path / "t.tfplace", "--debug"
    )
    assert code == 2 and "Traceback" in err and "\nSystemExit: 5\n" in err


def test_show_finds_the_ops_a_line_of_the_users_code_made(capsys, seed_cpu, tmp_path):
    """``tfplace show --search conftest.py:N`` lists the op that line made, with its source;
    the panel's op details say it too, and that the runtime made a copy."""
    from tfplace_widget._rendering.html_parts import RUNTIME_SOURCE, details_html

    source = seed_cpu.ops.set_index("op").loc["C", "source"]  # conftest.py:NN in inputs_cpu
    line = source.split(" in ")[0]
    path = tmp_path / "seed.tfplace"
    seed_cpu.save(path)
    code, out, _ = cli(capsys, "show", path, "--search", line)
    assert code == 0
    listed = section(out, f'Ops matching "{line}"')
    assert any(row.split()[:1] == ["C"] and row.rstrip().endswith(source) for row in listed), listed
    assert not any(row.split()[:1] in (["A"], ["B"]) for row in listed)
    assert "<code class='tfplace-source'" in details_html(seed_cpu, "C")
    assert source in details_html(seed_cpu, "C")
    recv = seed_cpu.ops.loc[seed_cpu.ops["type"] == "_Recv", "op"].iloc[0]
    assert RUNTIME_SOURCE in details_html(seed_cpu, recv)


def run_trying_fixes(capsys: pytest.CaptureFixture, builder: Path, tmp_path: Path) -> str:
    """``tfplace run BUILDER:build --cpus 2 -o ... --try-fixes``: its output (it succeeds)."""
    out_path = tmp_path / "t.tfplace"
    code, out, err = cli(
        capsys, "run", f"{builder}:build", "--cpus", "2", "-o", out_path, "--try-fixes"
    )
    assert (code, err) == (0, "")
    return out


def test_run_try_fixes_tries_each_fix_and_prints_what_it_changed(capsys, builder, tmp_path):
    """Issue 33: A and B (CPU:0) copied to tower_0/C (CPU:1); the fix puts them on CPU:1,
    and the run again with it shows the two copies gone (the fetch of tower_0/C stays)."""
    out = run_trying_fixes(capsys, builder, tmp_path)
    tried = section(out, "Fixes, each tried alone:")
    assert tried[0].startswith(
        "  put A, B on CPU:1 with tower_0/C: change the tf.device('/CPU:0') around the lines "
        "that make them (towers.py:6 in build, towers.py:7 in build) to tf.device('/CPU:1'). "
        "-> verified: the finding is gone, copies 3 -> 1"
    )
    together = section(out, "Verified fixes together, against the code as it is:")
    assert "  copies: 3 -> 1" in together
    assert "  outputs:  -> equal" in together


STRINGS_BUILDER = """import tensorflow as tf


def build():
    x = tf.ones((1000,), name="x")
    text = tf.strings.as_string(x, name="as_str")
    return tf.reduce_sum(tf.strings.to_number(text, name="to_num") * 2.0, name="out")
"""


def test_run_try_fixes_lists_the_edits_it_cannot_try(capsys, tmp_path):
    """String ops in the step: their fix is an edit at their lines (into dataset.map), which
    no overrides simulate: listed as such, and nothing is tried."""
    path = tmp_path / "strings.py"
    path.write_text(STRINGS_BUILDER)
    out = run_trying_fixes(capsys, path, tmp_path)
    edits = section(out, "Edits to make in your code (no overrides simulate them: not tried):")
    assert edits[0].startswith(
        "  move the calls that make as_str, to_num (strings.py:6 in build, strings.py:7 in "
        "build) into the input pipeline (dataset.map)"
    )
    assert "Fixes: no finding has a placement fix to try." in out
