"""One search keystroke of the panel at a million rows, this version next to a baseline's
``search.py``, in one process (issue 35: under 100 ms for text, glob and regex).

``python -m benchmarks.search_keystroke --baseline FILE [--rows 1000000] [--repeats 5]``

``FILE`` is the baseline's ``tfplace_widget/_rendering/search.py``, e.g.
``git show main:tfplace_widget/_rendering/search.py > /tmp/search_main.py``; it is loaded as a
module of this package (it imports only ``_model.errors``), so both run on the same frames in
the same process, interleaved. No TensorFlow trace (a million-op trace takes over 10 GB to
build): frames of ``--rows`` op names shaped like a Keras model's
(``model/block_3/dense_12/MatMul``), in three layouts:

- ``all distinct``: every row its own name, as ``trace.ops`` of a one-step trace of a
  million-op graph has them (one row per op and device);
- ``10 steps``: a tenth as many distinct names, each on ten rows (an op per step, as
  ``trace.events`` has them);
- ``generated graph``: the names of ``benchmarks/graphs.py`` (``c7/add123``), all distinct,
  the queries ``benchmarks/scale.py`` times.

Per frame, once (``TableState.show``): ``searchable(ops["op"])``; per keystroke, what
``TableState.mask`` runs: ``filter_ops(ops, text, regex=..., case=..., lowered=...)``. Medians
of ``--repeats``; each answer checked equal to the baseline's.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from tfplace_widget._rendering import search

# (text, regex, case): a text, globs, regexes with a text every match holds, and without one
QUERIES = {
    "keras": (
        ("dense_12", False, False),
        ("*/dense_12/*", False, False),
        ("model/block_3*matmul", False, False),
        (r"dense_1\d/MatMul$", True, False),
        (r"(MatMul|Conv2D)$", True, False),
        (r"^model/block_(3|7)/", True, False),
        (r"^model/block_(3|7)/", True, True),
        (r"_\d{3}/", True, False),
    ),
    "generated": (
        ("c7", False, False),
        ("c7/*1", False, False),
        ("*/add1*9", False, False),
        (r"c7/add1\d+$", True, False),
        ("7", False, False),
        (r"\d{3}$", True, False),
        (r"^c[0-3]/", True, False),
    ),
}
TYPES = ("MatMul", "BiasAdd", "Relu", "AddV2", "Mul", "ReadVariableOp", "Identity", "Conv2D")


def keras_names(distinct: int) -> list[str]:
    """``distinct`` names like a Keras model's ops: 20 blocks of layers of eight op types."""
    return [
        f"model/block_{i % 20}/dense_{i // 160}/{TYPES[(i // 20) % len(TYPES)]}"
        for i in range(distinct)
    ]


def frames(rows: int) -> dict[str, pd.DataFrame]:
    def frame(names: list[str]) -> pd.DataFrame:
        return pd.DataFrame({"op": pd.Series(names, dtype=object), "device": "CPU:0"})

    steps = keras_names(rows // 10)
    return {
        "all distinct": frame(keras_names(rows)),
        "10 steps": frame(steps * 10),
        "generated graph": frame([f"c{i % 16}/add{i // 16}" for i in range(rows)]),
    }


def load_baseline(path: Path):
    """The baseline's search module, as a module of this package (its relative imports)."""
    spec = importlib.util.spec_from_file_location("tfplace_widget._rendering._baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def timed(fn: Callable[..., object], *args, **kwargs) -> tuple[float, object]:
    gc.collect()
    start = time.perf_counter()
    answer = fn(*args, **kwargs)
    return time.perf_counter() - start, answer


def measure(baseline, rows: int, repeats: int) -> list[dict]:
    results = []
    for layout, ops in frames(rows).items():
        queries = QUERIES["generated" if layout == "generated graph" else "keras"]
        built = {}
        for name, module in (("new", search), ("old", baseline)):
            seconds, built[name] = timed(module.searchable, ops["op"])
            results.append({"frame": layout, "query": "searchable (once per trace)", name: seconds})
        for text, regex, case in queries:
            times: dict[str, list[float]] = {"new": [], "old": []}
            answers = {}
            for _ in range(repeats):
                for name, module in (("new", search), ("old", baseline)):
                    seconds, answers[name] = timed(
                        module.filter_ops, ops, text, regex=regex, case=case, lowered=built[name]
                    )
                    times[name].append(seconds)
            kind = "regex" if regex else ("glob" if search.is_glob(text) else "text")
            label = f"`{text}` ({kind}{', match case' if case else ''})"
            results.append(
                {
                    "frame": layout,
                    "query": label,
                    "new": statistics.median(times["new"]),
                    "old": statistics.median(times["old"]),
                    "hits": int(answers["new"].sum()),
                    "answers": "equal"
                    if np.array_equal(answers["new"], answers["old"])
                    else "DIFFERENT",
                }
            )
            print(results[-1], flush=True)
    return results


def table(results: list[dict], rows: int) -> str:
    merged: dict[tuple[str, str], dict] = {}
    for r in results:
        merged.setdefault((r["frame"], r["query"]), {}).update(r)
    lines = [
        f"| frame ({rows:,} rows) | keystroke | baseline | this version | rows found | answers |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for (frame, query), r in merged.items():
        query = query.replace("|", "\\|")  # a regex's branches: not the table's columns
        lines.append(
            f"| {frame} | {query} | {r['old'] * 1000:.0f} ms | {r['new'] * 1000:.0f} ms "
            f"| {r.get('hits', '')} | {r.get('answers', '-')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(table(measure(load_baseline(args.baseline), args.rows, args.repeats), args.rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
