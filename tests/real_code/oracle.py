"""Run corpus programs and compare the tool with TensorFlow itself, in a process of its own.

Two logical CPUs are configured, TensorFlow's placement log turned on and XLA told to dump
the optimized HLO of every program it compiles (``xla_truth``) before the runtime starts
(none of these can change later). Per program: its set-up code runs, then its traced call
runs once as its user runs it, with TensorFlow's placement log and partition graphs recorded
(``ground_truth``), then the tool traces the same call (``trace_placement``, default options),
predicts one GPU (``predict_placement(trace, gpus=1)``) and lists findings; ``checks`` and
``claims`` compare them, and ``xla_truth`` (for a spec with ``"xla": True``) the XLA clusters
with XLA's own dumped HLO. A spec's ``options={"device_scope": D}`` has the user's call run
under ``tf.device(D)``, as the tool's trace is. The results (plain data) go to a JSON file.

Usage: ``python tests/real_code/oracle.py OUT.json PROGRAM [PROGRAM ...]``
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "corpus")]

import authorship  # noqa: E402
import xla_truth  # noqa: E402

XLA_DUMP = tempfile.mkdtemp(prefix="tfplace-xla-dump-")
os.environ["XLA_FLAGS"] = " ".join(
    filter(None, [os.environ.get("XLA_FLAGS", ""), xla_truth.DUMP_FLAGS.format(XLA_DUMP)])
)

import tensorflow as tf  # noqa: E402

tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2
)
tf.debugging.set_log_device_placement(True)

import checks  # noqa: E402
import claims  # noqa: E402
import ground_truth  # noqa: E402
from mapping import map_rows  # noqa: E402

from tfplace_widget import TraceError, predict_placement, trace_placement  # noqa: E402

KERAS_STEPS = ("train_on_batch", "test_on_batch", "predict_on_batch", "fit")
USER_CODE = (str(HERE / "corpus") + "/", str(Path(__file__).resolve()))
_SEEN_GRAPHS: list = []  # tf.function graphs of programs run before in this process


def run_program(name: str) -> dict[str, Any]:
    """Everything the test asserts on for one corpus program."""
    module = importlib.import_module(name)
    started = time.perf_counter()
    spec = module.program()
    try:
        return _compare(name, module, spec, started)
    finally:
        if "teardown" in spec:
            spec["teardown"]()


def _compare(name: str, module: Any, spec: dict, started: float) -> dict[str, Any]:
    options = dict(spec.get("options", {}))
    if "builder" in spec:
        fn, args = spec["builder"], ()
        run = ground_truth.run_graph(fn, options["device_count"]["CPU"])
        expected_mode = "graph"
    else:
        fn, args = spec["fn"], tuple(spec.get("args", ()))
        kwargs = spec.get("kwargs", {})
        scope = options.get("device_scope")

        def call() -> None:
            with tf.device(scope) if scope else contextlib.nullcontext():
                fn(*args, **kwargs)

        run = ground_truth.run_function(call)
        expected_mode = "function"
        if kwargs:
            options["fn_kwargs"] = kwargs
    truths, eager_ops = run.truths, run.eager_ops
    before = allocator_stats(reset=True)
    try:
        trace = trace_placement(fn, *args, **options)
    except TraceError as exc:  # TF ran it (above); the tool could not trace it
        return {"program": name, "tool_error": f"{type(exc).__name__}: {exc}"[:2000]}
    after = allocator_stats()
    predicted = predict_placement(trace, gpus=1)
    mapping = map_rows(trace, truths)
    framework_only = getattr(fn, "__name__", "") in KERAS_STEPS
    authors = authorship.collect(USER_CODE, _SEEN_GRAPHS)
    authors.writes_inputs = bool(re.search(r"\bInput\(", Path(module.__file__).read_text()))
    return {
        "program": name,
        "source": source_of(module),
        "mode": trace.mode,
        "expected_mode": expected_mode,
        "ops": len(trace.ops),
        "devices": checks.device_check(trace, mapping, eager_ops, truths),
        "how": checks.how_check(trace, mapping),
        "prediction": claims.prediction_check(predicted, mapping, spec.get("cpu_only", [])),
        "completeness": checks.completeness_check(trace, mapping, truths),
        "pipeline": checks.pipeline_check(
            trace, mapping, run.dataset_blocks, authors.dataset_functions
        ),
        "kernels": claims.kernel_column_check(trace, mapping),
        "findings": claims.findings_check(trace, predicted, mapping, framework_only, authors),
        "xla": _xla_check(trace, fn, args, eager_ops, options.get("device_scope"))
        if spec.get("xla")
        else None,
        "onednn": onednn_on(),
        "memory": checks.memory_check(trace, before, after, bool(spec.get("xla"))),
        # last: trying a fix runs the program's call again (a training step trains on)
        "fixes": fix_trials(trace),
        "seconds": round(time.perf_counter() - started, 1),
    }


def fix_trials(trace: Any) -> list[dict[str, Any]]:
    """Every fix the tool offers (a finding of ``trace.findings`` with overrides), tried with
    ``trace.try_fix``: what it measured (issue 33). An edit overrides cannot simulate
    (``not_simulable``) is counted, untried."""
    trials = []
    for _, row in trace.findings.iterrows():
        fix = row["fix"] or {}
        if fix.get("not_simulable"):
            trials.append({"kind": row["kind"], "edit": fix["edit"], "simulable": False})
            continue
        if not fix.get("overrides"):
            continue
        effect = trace.try_fix(row)
        trials.append(
            {
                "kind": row["kind"],
                "edit": effect.edit,
                "verified": effect.verified,
                "why": effect.why,
                "finding_gone": effect.finding_gone,
                "copies": list(effect.copies),
                "moved": len(effect.moved),
                "outputs_equal": effect.outputs_equal,
                "tf_log_agrees": effect.tf_log_agrees,
                "predicted": effect.predicted,
                "simulable": True,
            }
        )
    return trials


def _xla_check(
    trace: Any, fn: Any, args: tuple, eager_ops: list, scope: str | None
) -> dict[str, Any]:
    """``xla_truth``'s check of the trace's clusters; for a tf.function, the dumped module it
    used is also held against TF's ``experimental_get_compiler_ir`` (compiled after the check,
    so its own dumped module is no candidate)."""
    result = xla_truth.xla_check(trace, xla_truth.dumped_modules(XLA_DUMP), eager_ops)
    if hasattr(fn, "experimental_get_compiler_ir") and not result.get("no_instructions"):
        with tf.device(scope) if scope else contextlib.nullcontext():
            text = fn.experimental_get_compiler_ir(*args)(stage="optimized_hlo")
        result["compiler_ir"] = xla_truth.compiler_ir_check(
            result, text, xla_truth.dumped_modules(XLA_DUMP)
        )
    return result


def allocator_stats(reset: bool = False) -> dict[str, int] | None:
    """TensorFlow's own count of the host allocator's bytes (``get_memory_info``: in use now,
    and the peak since ``reset``), or None where that allocator keeps none (oneDNN off)."""
    try:
        if reset:
            tf.config.experimental.reset_memory_stats("CPU:0")
        return tf.config.experimental.get_memory_info("CPU:0")
    except ValueError:  # "Allocator stats not available for device 'CPU:0'"
        return None


def onednn_on() -> bool:
    """Whether TensorFlow runs with oneDNN's rewrites (its default on x86 unless
    ``TF_ENABLE_ONEDNN_OPTS=0``)."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


_SOURCE = re.compile(r"(?:Reproduces|Follows) (\S+) (\S+) \(commit ([0-9a-f]{40})")


def source_of(module: Any) -> str:
    """``repo path @ commit`` of the public program a corpus module reproduces."""
    match = _SOURCE.search(" ".join(module.__doc__.split()))
    return f"{match.group(1)} {match.group(2)} @ {match.group(3)[:10]}" if match else "?"


def main(out: str, names: list[str]) -> None:
    results = {}
    for name in names:
        try:
            results[name] = run_program(name)
        except Exception:  # the test shows it, named
            results[name] = {"program": name, "error": traceback.format_exc()}
    Path(out).write_text(json.dumps(results, indent=1, default=str))
    shutil.rmtree(XLA_DUMP, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
