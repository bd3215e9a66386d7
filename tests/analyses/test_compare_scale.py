"""compare(a, b) at a million ops (issue 35): the diff is found on integer codes, each name
hashed and placed once, with the same rows and order as before."""

from __future__ import annotations

import copy
import re
import sys
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tfplace_widget._analyses import compare as compare_module
from tfplace_widget._analyses.compare import compare


@pytest.fixture(scope="module")
def two_runs(tf: Any, trace_placement: Any) -> tuple[Any, Any]:
    """The same chains on 2 CPUs, once with an extra cross-device edge built first (every
    _Send/_Recv counter of the rest renumbered), and C moved."""

    def build(extra: bool, c_on: str) -> Any:
        def graph() -> Any:
            if extra:
                with tf.device("/cpu:1"):
                    early = tf.ones((4,), name="early")
                tf.identity(early, name="early_back")
            x = tf.ones((8,), name="A")
            with tf.device("/cpu:1"):
                y = tf.add(x, x, name="B")
            with tf.device(c_on):
                z = tf.multiply(y, 2.0, name="C")
            return tf.identity(z, name="out")

        return graph

    a = trace_placement(build(False, "/cpu:0"), device_count={"CPU": 2})
    b = trace_placement(build(True, "/cpu:1"), device_count={"CPU": 2})
    return a, b


def test_the_diff_is_found_without_merging_grouping_or_sorting_the_frames(two_runs, monkeypatch):
    """A merge, groupby or sort_values over two 1.75M-row op frames hashes and compares every
    name several times (9.2 s of CPU at 1M ops); compare's own code calls none of them."""
    calls = []

    def recording(name: str, original: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if sys._getframe(1).f_globals.get("__name__") == compare_module.__name__:
                calls.append(name)
            return original(*args, **kwargs)

        return wrapper

    for cls in (pd.DataFrame, pd.Series):
        for name in ("merge", "groupby", "sort_values", "duplicated"):
            if hasattr(cls, name):
                monkeypatch.setattr(cls, name, recording(name, getattr(cls, name)))
    diff = compare(*two_runs)
    assert calls == []
    assert "C" in set(diff.moved["op"])  # with its constant operand, C/y
    runtime = diff.ops[diff.ops["type"].isin(["_Send", "_Recv"])]
    assert set(runtime["status"]) >= {"only_b"} and "moved" not in set(runtime["status"])


def test_the_diff_lists_ops_in_pythons_order_of_names_nuls_and_non_ascii_too(two_runs):
    """Names are placed by numpy's C string sort, which numpy 2.4 gets wrong for a NUL inside
    a name: those keep Python's order (as ``sort_values`` gave)."""
    a, b = two_runs
    odd = ["Z/x\x001", "Z/x\x000", "Z/x", "ä/b", "a/B", "a/b\x00", "Ω"]
    renamed = copy.copy(b)
    ops = b.ops.copy()
    names = ops["op"].astype(object).to_numpy().copy()
    names[: len(odd)] = odd
    ops["op"] = pd.Series(names, dtype=b.ops["op"].dtype)
    renamed.ops = ops
    for first, second in ((a, renamed), (renamed, a)):
        diff = compare(first, second)
        for status, rows in diff.ops.groupby("status", observed=True, sort=False):
            listed = list(rows["op"])
            assert listed == sorted(listed), status
        assert set(odd) <= set(diff.ops["op"])


def test_a_runtime_counter_is_found_as_the_regex_finds_it():
    """``_served`` reads the counter by ``rpartition``, not one regex call per name."""
    from tfplace_widget._analyses.compare import _served

    pattern = re.compile(r"/_\d+$")
    rng = np.random.default_rng(0)
    alphabet = np.array(["/", "_", "1", "a", "\u0663", "\u00b2", "/_"], dtype=object)
    names = ["a/_1", "a/_1/_2", "a/_", "/_12", "1", "", "a/_\u0661\u0662", "a/_\u00b2"]
    names += ["".join(rng.choice(alphabet, rng.integers(0, 8))) for _ in range(5000)]
    for batch in (names, [*names, "a/_1\n", "b\n/_2", None]):
        found, served = _served(batch)
        for name, hit, base in zip(batch, found, served, strict=True):
            match = pattern.search(name) if isinstance(name, str) else None
            assert hit == (match is not None), name
            assert base == (pattern.sub("", name) if match else name), name
