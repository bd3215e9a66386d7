"""The real-code oracle: the tool against TensorFlow itself, on programs users know.

``tests/real_code/corpus/`` holds TF code reproducing keras-io examples and tensorflow/docs
guides (``tests/real_code/NOTICE.md`` says which). ``tests/real_code/oracle.py`` runs each in a
process of its own with two logical CPUs: once as its user runs it, with TensorFlow's
placement log (fd 2, captured at C level) and partition graphs recorded, then through
``trace_placement``, ``predict_placement(trace, gpus=1)`` and ``trace.findings``. The tests
here assert that every device the trace reports is TensorFlow's, every ``how`` follows the
placer rule the graph shows, the prediction refuses nothing that runs and keeps CPU-only
resources on the CPU, and no finding states a false cause or an impossible fix. For the XLA
programs, the clusters are held against XLA's own optimized HLO (dumped by the oracle's
process, ``XLA_FLAGS=--xla_dump_to``) and the placement log's line for the jit function.

The other direction too: every op TensorFlow's placer placed in the traced call's functions
has a row (``checks.completeness_check`` says precisely which graphs count), and so has every
op of the ``tf.data`` functions the call ran (``checks.pipeline_check``); the ``gpu_kernel``
column and every finding's "no GPU kernel" agree with the kernel registry; and a fix names
only ops the user's own code made (``authorship``: TensorFlow's creation stack of each op).
Findings of the trace and of the prediction are both held, and tabled per kind (cause true?
fix applicable? material?).

By default a subset runs (one process, about 12 s); ``TFPLACE_REAL_CODE=all`` runs the whole
corpus, one process per program (a few minutes). The tables go to the test output and to
``artifacts/real-code-agreement.md`` (``real-code-agreement-onednn-off.md`` when run with
``TF_ENABLE_ONEDNN_OPTS=0``).

Known failures on which issue 30's items are being fixed are marked ``xfail(strict=True)`` per
program and check (``KNOWN``), so that each turns into a failure the day it is fixed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parents[1] / "real_code"
ORACLE = HERE / "oracle.py"
ONEDNN = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") != "0"  # TF's default on x86: on
ARTIFACT = (
    HERE.parents[1]
    / "artifacts"
    / ("real-code-agreement.md" if ONEDNN else "real-code-agreement-onednn-off.md")
)
CORPUS = sorted(p.stem for p in (HERE / "corpus").glob("*.py"))
DEFAULT = [
    "gpu_guide",
    "function_calls",
    "mnist_convnet",
    "tf_data",
    "text_classification",
    "tf1_graph",
    "xla_jit_compile",  # about 3 s; mnist_convnet_xla (about 14 s) runs with the rest
    "text_pipeline",  # model.fit, tf.data, py_function, a lookup table: about +4 s
]
XLA_PROGRAMS = ["mnist_convnet_xla", "xla_jit_compile"]
EVERYTHING = os.environ.get("TFPLACE_REAL_CODE", "").lower() == "all"
SELECTED = CORPUS if EVERYTHING else DEFAULT
if EVERYTHING:  # the whole corpus, one process per program: minutes, more than CI's 600 s cap
    pytestmark = pytest.mark.timeout(3600)
CHECKS = ("runs", "devices", "how", "prediction", "cpu_resources", "findings")

sys.path.insert(0, str(HERE))
import report  # noqa: E402


def _cases(check: str, names: list[str] = CORPUS) -> list[Any]:
    cases = []
    for name in names:
        marks = []
        if name not in SELECTED:
            marks.append(
                pytest.mark.skip(reason="not in the default subset: TFPLACE_REAL_CODE=all")
            )
        known = KNOWN.get((check, name))
        if known is not None and known[0] in ("always", "onednn" if ONEDNN else "off"):
            marks.append(pytest.mark.xfail(strict=True, reason=known[1]))
        cases.append(pytest.param(name, marks=marks, id=name))
    return cases


# (check, program) -> (when: "always" | "onednn" | "off", why): failures seen on main (none
# now: tf1_graph's constants replaced by ReplicateConstantsPass have their rows).
KNOWN: dict[tuple[str, str], tuple[str, str]] = {}


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The oracle's results for the selected programs (subprocesses; see the module doc)."""
    folder = tmp_path_factory.mktemp("real_code")
    groups = [[name] for name in SELECTED] if EVERYTHING else [SELECTED]
    results: dict[str, dict[str, Any]] = {}
    for index, names in enumerate(groups):
        out = folder / f"oracle-{index}.json"
        run = subprocess.run(
            [sys.executable, str(ORACLE), str(out), *names],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert run.returncode == 0, run.stderr[-4000:]
        results.update(json.loads(out.read_text()))
    return results


def result(oracle: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    entry = oracle[name]
    assert "error" not in entry, entry["error"]
    assert "tool_error" not in entry, (
        f"TensorFlow ran {name}; the tool raised {entry['tool_error']}"
    )
    return entry


# -- the corpus --------------------------------------------------------------------------------
def test_corpus_is_real_code_with_its_sources_named():
    notice = (HERE / "NOTICE.md").read_text()
    assert len(CORPUS) >= 10
    for name in CORPUS:
        text = (HERE / "corpus" / f"{name}.py").read_text()
        doc = " ".join(text.split('"""')[1].split())
        source = re.search(r"(?:Reproduces|Follows) (\S+) (\S+) \(commit ([0-9a-f]{40})", doc)
        assert source, f"{name}: its docstring names no repository, path and commit"
        repo, path, commit = source.groups()
        assert f"`{name}.py` | {repo} | {path}" in notice and commit in notice, name
        # Nothing is downloaded when the corpus runs.
        code = text.split('"""', 2)[2]
        assert not re.search(r"keras\.datasets|get_file\(|weights=\"imagenet\"", code), name


# -- the oracle ----------------------------------------------------------------------------
def test_agreement_table(oracle, capsys):
    """Prints the agreement and findings tables and saves them for the README."""
    assert set(oracle) == set(SELECTED)
    text = (
        f"## Agreement with TensorFlow, per corpus program (oneDNN {'on' if ONEDNN else 'off'})"
        "\n\n"
        + report.agreement_table(oracle)
        + "\n\n## Findings per kind over the corpus (trace and prediction)\n\n"
        + report.findings_summary(oracle)
        + "\n\n## Findings listed per kind (columns: corpus programs; c: false cause, f: fix "
        + "the user cannot apply, m: not material)\n\n"
        + report.findings_table(oracle)
        + "\n\n## Fixes tried with trace.try_fix (the code run again with each fix)\n\n"
        + report.fixes_table(oracle)
        + "\n\n## The step's memory against TensorFlow's allocator (get_memory_info)\n\n"
        + report.memory_table(oracle)
        + "\n\n## XLA clusters against XLA's dumped HLO and the placement log\n\n"
        + report.xla_table(oracle)
        + "\n\n## Disagreements\n\n"
        + (report.disagreements(oracle) or "none")
        + "\n"
    )
    ARTIFACT.parent.mkdir(exist_ok=True)
    ARTIFACT.write_text(text)
    with capsys.disabled():
        print("\n" + text)


@pytest.mark.parametrize("name", _cases("runs"))
def test_the_tool_traces_what_tensorflow_runs(oracle, name):
    result(oracle, name)


@pytest.mark.parametrize("name", _cases("devices"))
def test_every_device_is_the_one_tensorflow_used(oracle, name):
    """Per op: ``trace.ops.device`` = the placement log's device = the partition graph's."""
    entry = result(oracle, name)
    devices = entry["devices"]
    if name in XLA_PROGRAMS:  # an XLA cluster has no placed graph: see test_xla_*
        _xla(entry)
        assert entry["xla"]["devices"][1] > 0
    else:
        assert devices["partition"][1] > 0 and devices["log"][1] > 0
    assert devices["disagreements"] == []
    # Every op the tool shows is one TF ran (aside from constants, which eager code runs as
    # no op, and the Identity/NoOp plumbing of a tf.function the tool wraps a callable in).
    lost = {k: n for k, n in devices["unmapped"].items() if k.startswith("no eager")}
    assert not {k.split()[2] for k in lost} - {"Const", "Identity", "NoOp"}, lost


@pytest.mark.parametrize("name", _cases("how"))
def test_every_how_follows_the_rule_the_graph_shows(oracle, name):
    """``explicit`` only with a request, ``colocated`` for ``_class`` and resource readers..."""
    how = result(oracle, name)["how"]
    assert how["disagreements"] == [], how["disagreements"][:10]


@pytest.mark.parametrize("name", _cases("prediction"))
def test_the_prediction_refuses_nothing_that_runs_on_gpus(oracle, name):
    errors = result(oracle, name)["prediction"]["errors"]
    assert errors == [], errors[:5]


@pytest.mark.parametrize("name", _cases("cpu_resources"))
def test_cpu_only_resources_stay_on_the_cpu(oracle, name):
    """Iterators, lookup tables, and variables the user keeps on a CPU, with their readers."""
    wrong = result(oracle, name)["prediction"]["cpu_wrong"]
    assert wrong == [], wrong[:10]


@pytest.mark.parametrize("name", _cases("complete"))
def test_every_op_tensorflow_placed_in_the_step_has_a_row(oracle, name):
    """Every op of the traced call's functions in TensorFlow's placement log (the graphs the
    run metadata records, nested calls inlined; not the eager ops around them, nor the
    one-time variable initializer of a function's first call) is a row of the trace, or is
    named by the row that replaced it (an op oneDNN merged into a ``_Mkl*`` kernel: a row of
    its name and type as built, on the logged device)."""
    complete = result(oracle, name)["completeness"]
    assert complete["missing"] == [], (complete["missing_types"], complete["missing"][:10])


@pytest.mark.parametrize("name", _cases("pipeline"))
def test_every_input_pipeline_op_tensorflow_placed_has_a_row(oracle, name):
    """Every op of a ``tf.data`` function TensorFlow placed while the call ran (``map``
    functions, ``tf.py_function``'s ``EagerPyFunc``) has a row on the logged device."""
    pipeline = result(oracle, name)["pipeline"]
    assert pipeline["missing"] == [], (sorted(set(pipeline["functions"])), pipeline["missing"][:10])
    assert pipeline["disagreements"] == []


@pytest.mark.parametrize("name", _cases("kernels"))
def test_gpu_kernel_column_is_the_kernel_registry(oracle, name):
    kernels = result(oracle, name)["kernels"]
    assert kernels["disagreements"] == [], kernels["disagreements"][:10]


def _flagged(entry: dict[str, Any], checks: set[str]) -> list[dict]:
    return [f for f in entry["findings"]["flagged"] if checks & set(f["check"].split(", "))]


@pytest.mark.parametrize("name", _cases("causes"))
def test_findings_state_true_causes(oracle, name):
    """No finding of the trace or the prediction contradicts the kernel registry or TF's graph
    (a "no GPU kernel" the registry has, a variable that is an iterator, a result that feeds no
    ``_Retval``), nor speaks of a GPU as present on a CPU-only run."""
    flagged = _flagged(result(oracle, name), {"false cause", "present tense"})
    assert flagged == [], flagged[:5]


@pytest.mark.parametrize("name", _cases("fixes"))
def test_fixes_name_only_what_the_user_writes(oracle, name):
    """A fix names only ops the user's own code made (not Keras's step, layers or optimizer,
    TensorFlow's gradients, nor runtime ops like a function's output ``Identity``), and asks
    nothing impossible (a cast of a string)."""
    flagged = _flagged(result(oracle, name), {"fix impossible", "fix not the user's"})
    assert flagged == [], flagged[:5]


@pytest.mark.parametrize("name", _cases("memory"))
def test_a_tf2_steps_memory_peak_is_the_allocators(oracle, name):
    """TF2 code: the bytes the host allocator held before the traced call plus the step's
    peak in trace.memory are TensorFlow's own peak for the call (get_memory_info), or at
    most it where a tf.data pipeline allocates its next batches beside the step; an XLA
    cluster's buffers count, under the cluster's name. Graph mode, an XLA program whose
    profile recorded no XLA instruction (TF 2.16: no cluster to hold its buffers) and an
    allocator that keeps no stats (oneDNN off) are not compared: said so."""
    memory = result(oracle, name)["memory"]
    if not memory["compared"]:
        why = (
            "the allocator keeps no stats"
            if not memory["stats"]
            else "this TensorFlow's profile has no XLA instruction: the trace knows no "
            "cluster to hold XLA's buffers"
            if memory.get("xla_unrecorded")
            else "graph mode"
        )
        pytest.skip(f"not compared: {why}")
    assert memory["agrees"], memory


@pytest.mark.parametrize("name", _cases("fixes"))
def test_every_fix_tried_keeps_the_outputs_and_tensorflow_accepts_it(oracle, name):
    """Each fix a finding carries, run by ``try_fix``: TensorFlow places the ops as asked (its
    own placement log agrees with the "after" trace), the step's outputs stay equal where they
    are compared, and a fix counts as verified only with its finding gone and fewer copies
    (a prediction's, for a GPU machine, compares no outputs: nothing ran with it). An edit
    that overrides cannot simulate is offered untried, and says so."""
    for trial in result(oracle, name)["fixes"]:
        if not trial["simulable"]:
            assert trial["edit"], trial
            continue
        assert trial["tf_log_agrees"] is not False, trial
        assert trial["outputs_equal"] is not False, trial
        if trial["verified"]:
            assert trial["finding_gone"], trial
            assert trial["outputs_equal"] or trial["predicted"], trial
            before, after = trial["copies"]
            assert after < before, trial


@pytest.mark.parametrize("name", _cases("material"))
def test_every_listed_finding_is_material(oracle, name):
    """Every finding ``trace.findings`` lists (of the trace and of the prediction) is about
    at least 1% of the traced calls' op time or of the bytes their ops output (what does not
    change with the load: a toy step's copy of a few bytes), and no repeat; the others are left
    out."""
    flagged = _flagged(result(oracle, name), {"not material"})
    assert flagged == [], flagged[:5]


# -- XLA: the clusters against XLA's dumped HLO ----------------------------------------------
def _xla(entry: dict[str, Any]) -> dict[str, Any]:
    xla = entry["xla"]
    if xla.get("no_instructions"):
        pytest.skip(
            "this TensorFlow's profile has no XLA instruction events (as on TF 2.16), so "
            "trace.xla is empty: nothing to hold against XLA's HLO"
        )
    return xla


def _wrong(xla: dict[str, Any], *prefixes: str) -> list[dict]:
    return [d for d in xla["disagreements"] if d["what"].startswith(prefixes)]


@pytest.mark.parametrize("name", _cases("xla_device", XLA_PROGRAMS))
def test_xla_cluster_runs_on_the_device_tensorflow_logged(oracle, name):
    """Every op of the cluster and every instruction row: the device of the placement log's
    ``Executing op __inference_<f>_N in device D`` (``/CPU:1`` for ``xla_jit_compile``)."""
    xla = _xla(result(oracle, name))
    agree, compared = xla["devices"]
    assert compared > 0 and _wrong(xla, "device") == [] and agree == compared


@pytest.mark.parametrize("name", _cases("xla_hlo", XLA_PROGRAMS))
def test_xla_instructions_and_ops_are_the_ones_xla_compiled(oracle, name):
    """Every ``trace.xla`` instruction is in XLA's optimized module with its kind; each op's
    ``xla_op`` and each row's ``tf_ops`` are named there by that instruction (or what it
    calls); every TF op the HLO names is in ``trace.ops``; no op without an ``xla_op`` is
    named by an executed instruction. For a tf.function, the dumped module is the one TF's
    ``experimental_get_compiler_ir(stage="optimized_hlo")`` gives too."""
    xla = _xla(result(oracle, name))
    assert xla["instructions"] > 0 and xla["ops_with_instruction"] > 0
    assert xla["hlo_op_names"] > 0
    assert _wrong(xla, "instruction", "kind", "tf_ops", "xla_op", "op XLA", "module") == []
    assert xla["executed_not_listed"] == []
    if name == "xla_jit_compile":  # Keras' step function is no tf.function the user holds
        assert xla["compiler_ir"]["instructions"] > 0
        assert xla["compiler_ir"]["differences"] == []


@pytest.mark.parametrize("name", _cases("xla_findings", XLA_PROGRAMS))
def test_xla_findings_agree_with_the_hlo_and_the_compiles(oracle, name):
    """``xla_time`` names the longest instruction (one of XLA's) with its share of
    ``trace.xla``; a fixed-shape step XLA compiled once has no ``xla_recompile``, and a
    ``jit_compile`` step no ``xla_outside``."""
    entry = result(oracle, name)
    xla = _xla(entry)
    assert entry["findings"]["by_kind"].get("xla_time", 0) >= 1
    assert all(m["compiled"] == 1 for m in xla["modules"].values()), xla["modules"]
    assert xla["findings"] == []
