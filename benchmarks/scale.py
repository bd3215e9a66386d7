"""Findings, ``predict_placement``, ``compare`` and the search at 10k, 100k and 1M ops, next to
a baseline version of the package (issue 35).

``python -m benchmarks.scale --baseline DIR [--sizes 10000,100000] [--repeats 3] [--timeout S]
[--steps findings,predict,compare,search] [--trace-steps N] [--trace-only]``

``--trace-steps N``: the trace is N traced runs of the graph in one session (``trace_<ops>x<N>.pkl``),
as ten traced steps of a training loop give; ``--trace-only``: make that trace and print the
conversion's seconds next to ``timeline.py``'s over the same step_stats, nothing else.

``DIR`` holds the baseline's package, e.g. ``git archive main tfplace_widget | tar -x -C DIR``
(``--new DIR2``: this version's, from a snapshot made the same way, else this checkout's).
For each size, the generated chains graph (``benchmarks/graphs.py``: 4 CPUs, one op in five
with no request, so that a machine with a GPU would run about one op in five there and bounce
the rest back: thousands of predicted ping-pongs) is traced once by TensorFlow in a process of
its own and the ``PlacementTrace`` kept (pickled in ``--cache``). Then, per step and size, one
child process per version, this one and the baseline, alternating, each importing TensorFlow
first (as a kernel that traced has) and timing, ``--repeats`` times:

- ``findings``: ``find_findings(trace)`` (what ``trace.findings`` computes, its cache aside;
  up to 50,000 op rows the answers compared include ``immaterial=True``'s, every finding);
- ``predict``: ``predict_placement(trace, gpus=1)``, the first prediction of the trace (the
  device-independent cache on its graph facts dropped before each call);
- ``compare``: ``compare(trace, prediction)``;
- ``search``: one keystroke's filter as the panel runs it (``filter_ops`` over
  ``searchable(ops["op"])``), for a text, two globs and a regex.

``--synthetic-search``: the search alone, over ``N`` names shaped like the generated graph's
(``c7/add123``) in a frame of their own, no TensorFlow trace: a million names costs seconds.

Each step is timed in wall-clock time and, as ``STEP (CPU)``, in the child's CPU time
(``time.process_time``: all its threads), which a loaded machine changes less.

A step whose child does not finish in ``--timeout`` seconds is reported as ``> timeout``. The
answers are checked equal (``pandas.testing.assert_frame_equal`` on the findings, the predicted
ops and the diff's ops; the search masks) wherever both versions finished. Each version runs in
its own process (two versions of one package cannot share one), one after the other, on the
same pickled trace: the ratio is of medians, taken at the same time on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEVICES = 4
STEPS = ("findings", "predict", "compare", "search")
QUERIES = (("c7", False), ("c7/*1", False), ("*/add1*9", False), (r"c7/add1\d+$", True))

_TRACE = """
import gc, pickle, sys, time
from benchmarks import graphs
from tfplace_widget import PlacementTrace
n, path, steps, vs_timeline = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
graph_def = graphs.make_graph_def(n, devices={devices})
run = graphs.bare_traced_run(graph_def, graphs.session_config({devices}), steps=steps)
gc.collect()
start, cpu = time.perf_counter(), time.process_time()
trace = PlacementTrace.from_run_metadata(run.run_metadata, graph=run.graph)
print("PlacementTrace", time.perf_counter() - start, time.process_time() - cpu)
with open(path, "wb") as out:
    pickle.dump(trace, out, protocol=5)
print(len(trace.ops), len(trace.events), len(trace.transfers))
if vs_timeline:  # TensorFlow's timeline.py over the same step_stats, one Timeline per step
    from tensorflow.python.client import timeline
    del trace
    metadatas = run.run_metadata if steps > 1 else [run.run_metadata]
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    for metadata in metadatas:
        timeline.Timeline(metadata.step_stats, run.graph).generate_chrome_trace_format()
    print("timeline.py", time.perf_counter() - start, time.process_time() - cpu)
"""

_STEP = """
import gc, json, pickle, sys, time
import tensorflow  # noqa: F401  (a kernel that traced has it; the registry reads it)
step, path, repeats, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if step == "synthetic":  # the panel's search over N names of the generated graph's shape
    import pandas as pd
    from types import SimpleNamespace
    names = pd.Series([f"c{{i % 16}}/add{{i // 16}}" for i in range(int(path))], dtype=object)
    trace = SimpleNamespace(ops=pd.DataFrame({{"op": names, "device": "CPU:0", "type": "AddV2"}}))
    step = "search"
else:
    with open(path, "rb") as f:
        trace = pickle.load(f)
import tfplace_widget
from tfplace_widget._analyses.findings import find_findings
from tfplace_widget._analyses.predict.cache import _drop_facts_cache
from tfplace_widget._rendering.search import filter_ops, searchable
queries = {queries!r}
times, answer = {{}}, None

def timed(name, fn):
    global answer
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    answer = fn()
    times.setdefault(name, []).append(time.perf_counter() - start)
    times.setdefault(f"{{name}} (CPU)", []).append(time.process_time() - cpu)

for _ in range(repeats):
    if step == "findings":
        timed("findings", lambda: find_findings(trace))
        if len(trace.ops) <= 50_000:  # the immaterial ones too, where that is cheap
            answer = (answer, find_findings(trace, immaterial=True))
    elif step == "predict":
        _drop_facts_cache(trace.facts)
        timed("predict", lambda: tfplace_widget.predict_placement(trace, gpus=1))
        answer = answer.ops
    elif step == "compare":
        prediction = tfplace_widget.predict_placement(trace, gpus=1)
        timed("compare", lambda: tfplace_widget.compare(trace, prediction))
        answer = answer.ops
    elif step == "search":
        lowered = searchable(trace.ops["op"])
        masks = []
        for text, regex in queries:
            timed(f"search {{text}}", lambda: filter_ops(trace.ops, text, regex=regex, lowered=lowered))
            masks.append(answer)
        answer = masks
with open(out, "wb") as f:
    pickle.dump(answer, f, protocol=5)
print(tfplace_widget.__file__)
print(json.dumps(times))
"""


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(REPO)])
    return env


def trace_name(n_ops: int, steps: int = 1) -> str:
    """The pickle's file name: ``trace_N.pkl`` for one traced step, ``trace_Nx10.pkl`` for ten."""
    return f"trace_{n_ops}.pkl" if steps == 1 else f"trace_{n_ops}x{steps}.pkl"


def trace_file(n_ops: int, cache: Path, steps: int = 1, vs_timeline: bool = False) -> Path:
    """The pickled trace of ``steps`` traced runs, in one session, of the generated graph of
    ``n_ops`` ops (traced once, then reused). ``vs_timeline``: print the conversion's wall and
    CPU seconds next to ``timeline.py``'s over the same step_stats (a new trace only)."""
    path = cache / trace_name(n_ops, steps)
    if not path.exists():
        code = _TRACE.format(devices=DEVICES)
        args = [str(n_ops), str(path), str(steps), "1" if vs_timeline else "0"]
        done = subprocess.run(
            [sys.executable, "-c", code, *args],
            env=_env(REPO),
            check=True,
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        print(done.stdout, end="", flush=True)
    return path


def run_step(
    tree: Path, step: str, trace: Path, repeats: int, timeout: float, out: Path
) -> dict[str, list[float]] | None:
    """One version's times for ``step`` (None when it took longer than ``timeout``)."""
    code = _STEP.format(queries=QUERIES)
    # -P: the working directory (this checkout) must not shadow the baseline's package
    args = [sys.executable, "-P", "-c", code, step, str(trace), str(repeats), str(out)]
    try:
        done = subprocess.run(
            args, env=_env(tree), cwd=REPO, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None
    if done.returncode:
        raise RuntimeError(f"{step} failed in {tree}:\n{done.stderr[-3000:]}")
    package, times = done.stdout.strip().splitlines()[-2:]
    if not Path(package).is_relative_to(tree):
        raise RuntimeError(f"{step}: ran the package in {package}, not the one in {tree}")
    return json.loads(times)


def same_answers(step: str, new: Path, old: Path) -> str:
    """``equal`` when both versions' answers are, else what differs."""
    import numpy as np
    import pandas as pd

    with open(new, "rb") as f:
        a = pickle.load(f)
    with open(old, "rb") as f:
        b = pickle.load(f)
    try:
        if step == "search":
            assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
        elif isinstance(a, tuple):
            for x, y in zip(a, b, strict=True):
                pd.testing.assert_frame_equal(x, y)
        else:
            pd.testing.assert_frame_equal(a, b)
    except AssertionError as exc:
        return f"DIFFERENT: {str(exc)[:200]}"
    return "equal"


def measure(
    sizes: list[int],
    baseline: Path,
    repeats: int,
    timeout: float,
    cache: Path,
    new_tree: Path,
    synthetic: bool | None = None,
    steps: tuple[str, ...] = STEPS,
    trace_steps: int = 1,
) -> list[dict[str, Any]]:
    rows = []
    for n_ops in sizes:
        started = time.perf_counter()
        trace = trace_file(n_ops, cache, trace_steps) if synthetic is None else Path(str(n_ops))
        print(f"[{n_ops:,} ops] trace ready ({time.perf_counter() - started:.0f} s)", flush=True)
        for step in steps if synthetic is None else ("synthetic",):
            outs = {v: cache / f"answer_{v}_{step}_{n_ops}.pkl" for v in ("new", "old")}
            new = run_step(new_tree, step, trace, repeats, timeout, outs["new"])
            old = run_step(baseline, step, trace, repeats, timeout, outs["old"])
            step = "search" if step == "synthetic" else step
            check = same_answers(step, outs["new"], outs["old"]) if new and old else "-"
            for name in new or old or {step: []}:
                row = {
                    "ops": n_ops,
                    "step": name,
                    "new": statistics.median(new[name]) if new else None,
                    "old": statistics.median(old[name]) if old else None,
                    "answers": check,
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def _s(seconds: float | None, timeout: float) -> str:
    if seconds is None:
        return f"> {timeout:.0f} s"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def table(rows: list[dict[str, Any]], timeout: float) -> str:
    lines = [
        "| step | ops | baseline | this version | baseline / this | answers |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        ratio = f"{r['old'] / r['new']:.1f}x" if r["old"] and r["new"] else "-"
        lines.append(
            f"| {r['step']} | {r['ops']:,} | {_s(r['old'], timeout)} | {_s(r['new'], timeout)} "
            f"| {ratio} | {r['answers']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/tfplace_scale"))
    parser.add_argument(
        "--synthetic-search",
        action="store_const",
        const=True,
        help="search only, over N generated names per size (no TensorFlow trace: 1M is cheap)",
    )
    parser.add_argument(
        "--steps", default=",".join(STEPS), help="which of them (comma-separated; default all)"
    )
    parser.add_argument(
        "--new", type=Path, default=REPO, help="this version's package's folder (a snapshot)"
    )
    parser.add_argument(
        "--trace-steps", type=int, default=1, help="traced runs of the graph in one trace"
    )
    parser.add_argument(
        "--trace-only", action="store_true", help="trace (and time against timeline.py), no steps"
    )
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.trace_only:
        for n_ops in sizes:
            print(trace_file(n_ops, args.cache, args.trace_steps, vs_timeline=True))
        return 0
    rows = measure(
        sizes,
        args.baseline.resolve(),
        args.repeats,
        args.timeout,
        args.cache,
        args.new.resolve(),
        args.synthetic_search,
        tuple(args.steps.split(",")),
        args.trace_steps,
    )
    print(table(rows, args.timeout))
    return 0


if __name__ == "__main__":
    sys.exit(main())
