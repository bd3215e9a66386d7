"""``.tfplace`` files: format version 1 (frames as column-wise JSON) against version 2 (typed
arrays, dictionary-encoded text), side by side in one process (issue 35).

``python -m benchmarks.save_load [--sizes 10000,100000,1000000] [--repeats 3] [--protos DIR]``
(``--quick``: 10k ops, one repeat; ``--baseline DIR``: main's save and load against the tree's,
on the pickled traces of ``benchmarks/scale.py``: ``side_by_side``) traces the benchmark graph
(``benchmarks/graphs.py``, as ``benchmarks/convert.py`` does; ``--protos`` keeps and reuses the
traced protos), converts it once, then saves and loads the trace in both formats, interleaved,
repeat by repeat: the wall time (the best of the repeats), the file's size (and its frames'
members, compressed and as read), and, in one more call each traced by ``tracemalloc``
(``measure.python_peak``: numpy, pandas and every Python object; not timed), the peak memory
each call allocates.

``v2`` is the writer of the tree run (format version 3 since ``maps.json``: run it with
``PYTHONPATH`` on an older checkout for the version-2 writer, side by side). "Frames packed / read" count the ``frames/`` members only, not
``maps/`` nor ``facts.json`` or ``inputs.json``.

Version 1 is the writer of today with each frame written as ``frame_json`` writes it (the
version-1 members ``frames/<name>.json`` with the values inline); version 2 reads those too, as
it reads any version-1 file. A 1M-op trace past a limit of version 1 (``frames/ops.json`` over
``MAX_MEMBER_BYTES``) is measured with the limits raised, and said so.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from typing import Any

from benchmarks import convert
from benchmarks.measure import fmt_bytes, python_peak, time_cpu_once


@contextlib.contextmanager
def version_1() -> Iterator[None]:
    """Save as format version 1 did: every frame one JSON document, its values inline."""
    from tfplace_widget._tfplace_format import frame_json, writer

    def as_json(frame: Any, name: str, what: str) -> tuple[dict, dict, int]:
        return frame_json.frame_to_json(frame, what), {}, 0

    saved = writer.frame_to_members
    writer.frame_to_members = as_json
    try:
        yield
    finally:
        writer.frame_to_members = saved


@contextlib.contextmanager
def limits_raised(raise_them: bool) -> Iterator[None]:
    from tfplace_widget._sources import limits as shared
    from tfplace_widget._tfplace_format import limits

    saved = (shared.MAX_MEMBER_BYTES, shared.MAX_JSON_VALUES, limits.MAX_ARCHIVE_BYTES)
    if raise_them:
        shared.MAX_MEMBER_BYTES, shared.MAX_JSON_VALUES = 4 << 30, 10**9
        limits.MAX_ARCHIVE_BYTES = 16 << 30
    try:
        yield
    finally:
        shared.MAX_MEMBER_BYTES, shared.MAX_JSON_VALUES, limits.MAX_ARCHIVE_BYTES = saved


CHILD = r"""
import os, sys, threading, time
from tfplace_widget import PlacementTrace
from tfplace_widget._sources import limits as shared
from tfplace_widget._tfplace_format import limits
if sys.argv[2] == "raised":
    shared.MAX_MEMBER_BYTES, shared.MAX_JSON_VALUES = 4 << 30, 10**9
    limits.MAX_ARCHIVE_BYTES = 16 << 30
page = os.sysconf("SC_PAGE_SIZE")
def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * page
before, peak, done = rss(), [0], threading.Event()
def sample():
    while not done.is_set():
        peak[0] = max(peak[0], rss())
        time.sleep(0.002)
sampler = threading.Thread(target=sample)
sampler.start()
trace = PlacementTrace.load(sys.argv[1])
done.set()
sampler.join()
print(before, max(peak[0], rss()))
"""


def load_rss(path: str, raised: bool) -> tuple[int, int]:
    """RSS of a fresh process (``import tfplace_widget``) before it loads ``path``, and its
    peak while loading (sampled every 2 ms): what opening the file costs a new kernel."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, path, "raised" if raised else "as is"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    before, after = done.stdout.split()
    return int(before), int(after)


def sizes_of(path: str) -> dict[str, int]:
    """The file, and its frames' members (``frames/...``) compressed and as read."""
    with zipfile.ZipFile(path) as archive:
        frames = [i for i in archive.infolist() if i.filename.startswith("frames/")]
        return {
            "file": os.path.getsize(path),
            "frames packed": sum(i.compress_size for i in frames),
            "frames read": sum(i.file_size for i in frames),
        }


def equal(a: Any, b: Any) -> None:
    import pandas as pd

    for name in ("ops", "events", "transfers"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)


def measure(entry: dict[str, Any], what: str, fn: Any, traced: bool) -> Any:
    """Call ``fn`` timed (wall and CPU seconds), or traced by tracemalloc (its peak)."""
    if traced:
        entry[f"{what}_peak"], result = python_peak(fn)
        return result
    wall, cpu, result = time_cpu_once(fn)
    entry[what].append(wall)
    entry[f"{what}_cpu"].append(cpu)
    return result


def run(
    n_ops: int, repeats: int, protos: str | None, formats: tuple[str, ...] = ("v1", "v2")
) -> dict[str, Any]:
    from tfplace_widget import PlacementTrace, TraceError

    metadata, graph = convert.traced_protos(n_ops, protos)
    trace = PlacementTrace.from_run_metadata(metadata, graph)
    del metadata, graph
    folder = tempfile.mkdtemp(prefix="tfplace_bench_")
    paths = {v: os.path.join(folder, f"{v}.tfplace") for v in formats}
    notes: list[str] = []
    raised = False
    with version_1():
        try:
            if "v1" in paths:
                trace.save(paths["v1"])
        except ValueError as exc:
            notes.append(f"version 1 refuses to save it ({str(exc).split(': ', 1)[1][:140]})")
            raised = True
    result: dict[str, Any] = {"n_ops": n_ops, "rows": len(trace.ops), "notes": notes}
    for version in formats:
        result[version] = {"save": [], "load": [], "save_cpu": [], "load_cpu": []}
    with limits_raised(raised):
        for repeat in range(repeats + 1):  # the last one traced by tracemalloc, not timed
            traced = repeat == repeats
            for version, path in paths.items():
                entry = result[version]
                with version_1() if version == "v1" else contextlib.nullcontext():
                    measure(entry, "save", lambda p=path: trace.save(p), traced)
                try:
                    loaded = measure(entry, "load", lambda p=path: PlacementTrace.load(p), traced)
                except TraceError as exc:
                    notes.append(f"{version} does not load: {exc}")
                    continue
                equal(trace, loaded)
                del loaded
    if raised:
        notes.append("version 1 measured with the limits raised")
    for version, path in paths.items():
        result[version].update(sizes_of(path))
        result[version]["rss"] = load_rss(path, raised)
        os.remove(path)
    os.rmdir(folder)
    return result


def side_by_side(pickled: str, baseline: str, repeats: int) -> str:
    """The baseline's save and load (``--baseline DIR``, imported as ``tfplace_baseline``:
    ``benchmarks.findings_side``) against the tree's, on one pickled trace, alternated repeat by
    repeat in this one process (the garbage collector run before each call, outside the
    timing): the median [range] of CPU and wall seconds, the files' sizes, the load average.
    The tree's file is checked to load equal (``check_exact``) to the trace saved, and so is
    the baseline's read by the tree."""
    import copy
    import dataclasses
    import gc
    import importlib
    import pickle
    import statistics
    from pathlib import Path

    from benchmarks.findings_side import BASELINE, import_baseline
    from benchmarks.measure import time_cpu_once
    from tfplace_widget import PlacementTrace, _services

    import_baseline(Path(baseline))
    base = sys.modules[BASELINE]
    with open(pickled, "rb") as handle:
        trace = pickle.load(handle)
    theirs = copy.copy(trace)  # the same frames and maps; its facts of the baseline's class
    if trace.facts is not None:
        kind = type(trace.facts)
        module = importlib.import_module(kind.__module__.replace("tfplace_widget", BASELINE, 1))
        fields = dataclasses.fields(trace.facts)
        theirs.facts = getattr(module, kind.__name__)(
            **{f.name: getattr(trace.facts, f.name) for f in fields}
        )
    folder = tempfile.mkdtemp(prefix="tfplace_side_")
    versions = {
        "main": (
            importlib.import_module(f"{BASELINE}._services").save,
            base.PlacementTrace,
            theirs,
        ),
        "tree": (_services.save, PlacementTrace, trace),
    }
    paths = {version: os.path.join(folder, f"{version}.tfplace") for version in versions}
    times: dict[str, dict[str, list[float]]] = {v: {} for v in versions}
    for repeat in range(repeats):
        for version in list(versions)[:: 1 if repeat % 2 == 0 else -1]:
            save, cls, saved = versions[version]
            path, got = paths[version], times[version]
            gc.collect()
            wall, cpu, _ = time_cpu_once(
                lambda: save(saved, path, overwrite=True, findings=None)  # noqa: B023
            )
            got.setdefault("save CPU", []).append(cpu)
            got.setdefault("save wall", []).append(wall)
            gc.collect()
            wall, cpu, loaded = time_cpu_once(lambda: cls.load(path))  # noqa: B023
            got.setdefault("load CPU", []).append(cpu)
            got.setdefault("load wall", []).append(wall)
            del loaded
    lines = [f"{pickled} ({len(trace.ops):,} op rows), {repeats} repeats, load {os.getloadavg()}"]
    for version, got in times.items():
        cells = [
            f"{k} {statistics.median(v):.3f} [{min(v):.3f}-{max(v):.3f}]" for k, v in got.items()
        ]
        lines.append(
            f"{version}: {'; '.join(cells)}; file {os.path.getsize(paths[version]):,} bytes"
        )
    for version in versions:
        _same_trace(PlacementTrace.load(paths[version]), trace)
        lines.append(f"{version}'s file read by the tree: equal to the trace saved")
        os.remove(paths[version])
    os.rmdir(folder)
    return "\n".join(lines)


def _same_trace(loaded: Any, trace: Any) -> None:
    """Every frame equal (``check_exact``), and the inputs, devices and graph facts."""
    import dataclasses

    import pandas as pd

    for name in ("ops", "events", "transfers", "xla", "memory"):
        pd.testing.assert_frame_equal(getattr(loaded, name), getattr(trace, name), check_exact=True)
    assert loaded.inputs == trace.inputs and loaded.devices == trace.devices
    if trace.facts is not None:  # by value: the baseline's classes are others
        for field in dataclasses.fields(trace.facts):
            if field.name == "kernels":
                assert {op: dataclasses.astuple(k) for op, k in loaded.facts.kernels.items()} == {
                    op: dataclasses.astuple(k) for op, k in trace.facts.kernels.items()
                }
            else:
                assert getattr(loaded.facts, field.name) == getattr(trace.facts, field.name)


def render(results: list[dict[str, Any]]) -> str:
    """Best of the repeats, wall (process CPU) seconds; sizes; peaks."""
    lines = [
        "| ops (op rows) | format | save: wall (CPU) | load: wall (CPU) | file | frames packed "
        "| frames read | peak memory: save | load | RSS of a fresh process: peak while "
        "loading (before) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def seconds(e: dict[str, Any], what: str) -> str:
        if not e[what]:
            return "n/a"
        return f"{min(e[what]):.2f} s ({min(e[what + '_cpu']):.2f} s)"

    for r in results:
        for version in (v for v in ("v1", "v2") if v in r):
            e = r[version]
            lines.append(
                f"| {r['n_ops']:,} ({r['rows']:,}) | {version} | {seconds(e, 'save')} "
                f"| {seconds(e, 'load')} | {fmt_bytes(e['file'])} "
                f"| {fmt_bytes(e['frames packed'])} | {fmt_bytes(e['frames read'])} "
                f"| {fmt_bytes(e.get('save_peak', 0))} | {fmt_bytes(e.get('load_peak', 0))} "
                f"| {fmt_bytes(e['rss'][1])} ({fmt_bytes(e['rss'][0])}) |"
            )
    notes = [f"- {r['n_ops']:,} ops: {note}" for r in results for note in r["notes"]]
    return "\n".join(lines + ([""] + notes if notes else []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[10_000, 100_000, 1_000_000],
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--protos", help="keep/reuse the traced protos in this folder")
    parser.add_argument("--quick", action="store_true", help="10k ops, one repeat")
    parser.add_argument("--json", help="also write the raw numbers to this file")
    parser.add_argument(
        "--formats", default="v1,v2", help="v1, v2 or both (one at a time at 1M ops: memory)"
    )
    parser.add_argument(
        "--baseline",
        help="DIR holding main's tfplace_widget (git archive main tfplace_widget | tar -x -C DIR):"
        " its save and load against the tree's, on the pickled traces (--pickled)",
    )
    parser.add_argument(
        "--pickled",
        default="/tmp/tfplace_scale/trace_{n}.pkl",
        help="with --baseline: the pickled trace of each size (benchmarks/scale.py's)",
    )
    args = parser.parse_args(argv)
    sizes, repeats = ([10_000], 1) if args.quick else (args.sizes, args.repeats)
    if args.baseline:
        for n_ops in sizes:
            print(side_by_side(args.pickled.format(n=n_ops), args.baseline, repeats), flush=True)
        return 0
    results = []
    for n_ops in sizes:
        print(f"{n_ops:,} ops: tracing, then timing", file=sys.stderr, flush=True)
        formats = tuple(args.formats.split(","))
        results.append(run(n_ops, repeats, args.protos, formats))
        print(render(results[-1:]), file=sys.stderr, flush=True)
    print(render(results))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
