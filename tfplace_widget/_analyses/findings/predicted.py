"""Where each op of a trace would run on a machine with one GPU, for the findings' view
(``Context._build_view``): the placer's prediction from this process's kernel registry, its
columns read as plain lists."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd


def predict_with_module(
    context: Any, facts: Any
) -> tuple[list[str], list[str], list[str], Callable[[], list[str]]] | None:
    """``predict_devices`` (one GPU, soft placement): every placer rule replayed, about 0.1 s
    per 100k nodes; its ops (a name of several rows is left to ``Context._view_of_prediction``),
    devices, hows, and its reasons (read when asked). None without facts read from this
    process's registry (the placer reads its op and kernel registries: facts loaded from a file
    are another process's, and ``tfplace show`` of a saved trace does not import TensorFlow,
    seconds, for them), or when the prediction fails: then the kernel columns and resource
    groups the trace holds alone decide (``_predict_here``)."""
    if getattr(facts, "registry", None) is None:
        return None
    from ..predict.devices import master_task, predicted_devices
    from ..predict.result import predicted_columns

    # predict_placement's device set: a GPU on every task (each task of a cluster is a machine
    # of its own), and the session's own task first among equals.
    devices = predicted_devices(context.trace.devices, 1)
    try:
        columns = predicted_columns(
            facts,
            devices,
            soft_placement=True,
            local_task=master_task(context.trace),
            registry=facts.registry,
        )
    except Exception:  # a prediction that fails must not cost the other findings
        return None
    # the reasons are read for the colocated CPU ops alone (none in most traces): when asked
    reasons = functools.partial(_strings, columns["reason"])
    return (
        list(columns["op"]),
        _strings(columns["predicted_device"]),
        _strings(columns["how"]),
        reasons,
    )


def _strings(values: Any) -> list[str]:
    """A column of ``predict_devices``' as its frame's ``str`` would read it (NA as ``"nan"``):
    values that are all ``str`` as they are, with no ``str`` call per value (three million at a
    million ops) and no frame made; others through the frame's column."""
    listed = values.tolist() if isinstance(values, np.ndarray) else list(values)
    if set(map(type, listed)) <= {str}:
        return listed
    column = pd.DataFrame({"column": values})["column"]
    if isinstance(column.dtype, pd.StringDtype) and not column.hasnans:
        return column.tolist()
    return list(map(str, column.tolist()))
