"""The ``source``, ``source_path`` and ``layer`` columns of ``trace.ops``: where the user's code
made each op, from the frames the tracers recorded (``Executed.built_at``) and the traced Keras
model's layer names (``Executed.layers``)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import pandas as pd

from ..model.records import BuiltAt, Executed

# Op types only TensorFlow's runtime adds (function arguments and results, copies between
# devices): never the user's, even where a node def of the same name has a stack.
RUNTIME_TYPES = frozenset(
    {"_Arg", "_Retval", "_Send", "_Recv", "_HostSend", "_HostRecv", "_DeviceArg", "_DeviceRetval"}
)
_UNIQUIFIED = re.compile(r"^(.+)_\d+$")


def source_text(built: BuiltAt, cwd: str) -> str:
    """``train.py:42 in train_step``: the file relative to ``cwd`` when under it, else its
    name (a notebook cell's is the kernel's temporary file)."""
    path = built.path
    if os.path.isabs(path):
        relative = os.path.relpath(path, cwd) if path.startswith(cwd + os.sep) else ""
        path = relative or os.path.basename(path)
    return f"{path}:{built.line} in {built.function}"


def source_columns(
    names: Sequence[str], types: Sequence[str], executed: Executed, cwd: str | None = None
) -> tuple[pd.array, pd.array, pd.array]:
    """``(source, source_path, layer)`` of the ops ``names`` (of ``types``). ``source`` is ""
    for an op TensorFlow's runtime added, missing where the trace recorded no stack for it."""
    n = len(names)
    built = executed.built_at
    if not built:
        source: list = [None] * n
        path: list = [None] * n
    else:
        cwd = os.getcwd() if cwd is None else cwd
        source, path = [], []
        texts: dict[BuiltAt, tuple[str, str]] = {}
        for name, op_type in zip(names, types, strict=True):
            if op_type in RUNTIME_TYPES or name not in built:
                source.append("")
                path.append("")
                continue
            frame = built[name]
            if frame is None:
                source.append(None)
                path.append(None)
                continue
            if frame not in texts:
                texts[frame] = (source_text(frame, cwd), f"{frame.path}:{frame.line}")
            text, where = texts[frame]
            source.append(text)
            path.append(where)
    layers = executed.layers
    layer = [None] * n if layers is None else [layer_path(name, layers) for name in names]
    return (
        pd.array(source, dtype="string"),
        pd.array(path, dtype="string"),
        pd.array(layer, dtype="string"),
    )


def layer_path(name: str, layers: frozenset[str]) -> str:
    """The layers named in op ``name``'s scopes (Keras names an op's scope after the layer
    that made it: ``sequential/dense_1/MatMul`` -> ``sequential/dense_1``; TensorFlow makes a
    scope used again unique with ``_<n>``, ``dense_1_2`` is ``dense_1`` called again), "" for
    an op outside every layer. Gradients are their layer's (``gradient_tape/sequential/...``)."""
    path: list[str] = []
    for scope in name.split("/")[:-1]:
        layer = scope if scope in layers else None
        if layer is None:
            match = _UNIQUIFIED.match(scope)
            if match and match.group(1) in layers:
                layer = match.group(1)
        if layer is not None:
            path.append(layer)
        elif path:
            break
    return "/".join(path)
