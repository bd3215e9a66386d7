"""The ``source`` and ``source_path`` columns of ``trace.ops``: where the user's code made each
op, from the frames the tracers recorded (``Executed.built_at``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..model.records import BuiltAt, Executed

# Op types only TensorFlow's runtime adds (function arguments and results, copies between
# devices): never the user's, even where a node def of the same name has a stack.
RUNTIME_TYPES = frozenset(
    {"_Arg", "_Retval", "_Send", "_Recv", "_HostSend", "_HostRecv", "_DeviceArg", "_DeviceRetval"}
)


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
) -> tuple[Any, Any]:
    """``(source, source_path)`` of the ops ``names`` (of ``types``). ``source`` is ""
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
    return pd.array(source, dtype="string"), pd.array(path, dtype="string")
