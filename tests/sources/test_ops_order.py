"""The ops frame's row order (by first start, then name, then device) as ``np.lexsort`` of the
names as ``str`` gives it, where only the rows that share a start are sorted by name."""

from __future__ import annotations

import numpy as np

from tfplace_widget._sources.frames import _start_name_order


def _lexsort(start: np.ndarray, op: np.ndarray, device: np.ndarray) -> np.ndarray:
    return np.lexsort((device.astype(str), op.astype(str), start))


def test_order_equals_lexsort_with_ties_and_never_run_ops() -> None:
    rng = np.random.default_rng(7)
    n = 5000
    start = rng.integers(0, 800, n).astype(float)  # many ops in the same µs
    start[rng.random(n) < 0.3] = np.inf  # never run: all tied at the end
    op = np.array([f"op_{i}" for i in rng.integers(0, 3000, n)], dtype=object)
    device = np.array([f"/device:CPU:{i}" for i in rng.integers(0, 4, n)], dtype=object)
    assert np.array_equal(_start_name_order(start, op, device), _lexsort(start, op, device))


def test_order_of_distinct_starts_and_of_integers() -> None:
    start = np.array([5, 3, 9, 1], dtype=np.int64)
    op = np.array(["d", "c", "b", "a"], dtype=object)
    device = np.array(["x", "x", "y", "y"], dtype=object)
    assert _start_name_order(start, op, device).tolist() == [3, 1, 0, 2]
    tied = np.zeros(4, dtype=np.int64)  # one tie group: by name, then device
    same_op = np.array(["b", "a", "b", "a"], dtype=object)
    assert _start_name_order(tied, same_op, device).tolist() == [1, 3, 0, 2]
    assert _start_name_order(tied[:0], same_op[:0], device[:0]).tolist() == []
