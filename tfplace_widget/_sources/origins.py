"""The ``source`` and ``source_path`` columns of ``trace.ops``: where the user's code made each
op, from the frames the tracers recorded (``Executed.built_at``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from .._model.records import BuiltAt, Executed

# Op types only TensorFlow's runtime adds (function arguments and results, copies between
# devices): never the user's, even where a node def of the same name has a stack.
RUNTIME_TYPES = frozenset(
    {"_Arg", "_Retval", "_Send", "_Recv", "_HostSend", "_HostRecv", "_DeviceArg", "_DeviceRetval"}
)


def source_text(
    built: BuiltAt, cwd: str, cell_of: Callable[[str], str | None] = lambda path: None
) -> str:
    """``train.py:42 in train_step``: the file relative to ``cwd`` when under it, else its
    name; a notebook cell as IPython names it in tracebacks (``In[5]:3 in step``: ``cell_of``
    gives ``In[5]`` for the kernel's file of that cell)."""
    path = cell_of(built.path) or built.path
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
    elif not any(built.values()):  # no stack recorded at all (an imported graph's ops)
        # "" for a runtime op or one not built, else missing; both columns the same
        runtime = RUNTIME_TYPES
        source = [
            "" if op_type in runtime or name not in built else None
            for name, op_type in zip(names, types, strict=True)
        ]
        column = pd.array(source, dtype="string")
        return column, column.copy()
    else:
        cwd = os.getcwd() if cwd is None else cwd
        cell_of = notebook_cells()
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
                texts[frame] = (source_text(frame, cwd, cell_of), f"{frame.path}:{frame.line}")
            text, where = texts[frame]
            source.append(text)
            path.append(where)
    return pd.array(source, dtype="string"), pd.array(path, dtype="string")


def notebook_cells() -> Callable[[str], str | None]:
    """``path -> "In[5]"`` for the files of the cells IPython ran in this process (the names
    its tracebacks give: ``CachingCompiler.format_code_name``), None for other files; None
    for every file outside IPython."""
    ipython = sys.modules.get("IPython")  # only where IPython already runs: nothing imported
    shell = ipython.get_ipython() if ipython is not None else None
    name_of = getattr(getattr(shell, "compile", None), "format_code_name", None)
    if name_of is None:
        return lambda path: None

    def cell_of(path: str) -> str | None:
        try:
            named = name_of(path)
        except Exception:  # an IPython whose compiler names otherwise: the file's name
            return None
        return named[1] if named else None

    return cell_of
