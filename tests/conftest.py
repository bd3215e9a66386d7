"""Shared fixtures: TensorFlow imported once, the seed experiment traced once per session.

Every trace here is a real ``tf.compat.v1.Session`` run with FULL_TRACE on two real CPU
devices (``device_count={"CPU": 2}``); ``/cpu:1`` stands in for the GPU of the seed question.
What tests share besides fixtures is in ``helpers.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from helpers import SEED_N, TWO_CPUS


@pytest.fixture(scope="session")
def tf() -> Any:
    """TensorFlow, imported once (it takes seconds)."""
    import tensorflow

    return tensorflow


@pytest.fixture(scope="session")
def trace_placement(tf: Any) -> Callable[..., Any]:
    from tfplace_widget import trace_placement

    return trace_placement


def _seed_builders(tf: Any) -> dict[str, Callable[[], Any]]:
    """The two builders of seed-question.md, with ``/cpu:1`` in place of ``/gpu:0``."""
    n = SEED_N

    def inputs_cpu() -> Any:  # inputs pinned to CPU:0, the add pinned to the "GPU"
        with tf.device("/cpu:0"):
            a = tf.ones((n,), name="A")
            b = tf.ones((n,), name="B")
        with tf.device("/cpu:1"):
            c = tf.add(a, b, name="C")
        return c

    def inputs_none() -> Any:  # inputs with no device, the add pinned to the "GPU"
        a = tf.ones((n,), name="A")
        b = tf.ones((n,), name="B")
        with tf.device("/cpu:1"):
            c = tf.add(a, b, name="C")
        return c

    return {"inputs_cpu": inputs_cpu, "inputs_none": inputs_none}


@pytest.fixture(scope="session")
def seed_builders(tf: Any) -> dict[str, Callable[[], Any]]:
    return _seed_builders(tf)


@pytest.fixture(scope="session")
def seed_cpu(trace_placement: Any, seed_builders: dict) -> Any:
    """``inputs_cpu`` traced with Grappler off (the graph runs as built)."""
    return trace_placement(seed_builders["inputs_cpu"], device_count=TWO_CPUS)


@pytest.fixture(scope="session")
def seed_none(trace_placement: Any, seed_builders: dict) -> Any:
    """``inputs_none`` traced with Grappler off."""
    return trace_placement(seed_builders["inputs_none"], device_count=TWO_CPUS)


@pytest.fixture(scope="session")
def seed_cpu_steps3(trace_placement: Any, seed_builders: dict) -> Any:
    """``inputs_cpu`` traced for three steps."""
    return trace_placement(seed_builders["inputs_cpu"], device_count=TWO_CPUS, steps=3)
