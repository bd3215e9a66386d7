"""Where the user's code made each op: the innermost frame of the user's own code on the Python
stack TensorFlow kept for it.

TensorFlow keeps the stack that built every op: a ``tf.Graph`` op's ``op.traceback``, and per
registered function (a ``tf.function``'s FuncGraph, its ``while``/``cond`` bodies, the functions
it calls) a ``GraphDebugInfo`` (``context.get_graph_debug_info``) naming each node def's stack.
Of a stack, the innermost frame outside installed packages (``site-packages``,
``dist-packages``: TensorFlow, Keras, absl...), Python's standard library and this package is
the user's line. The stacks are read once per function, innermost frame first, stopping at the
first frame of the user's.
"""

from __future__ import annotations

import functools
import os
import sysconfig
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._model.records import BuiltAt

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STDLIB_DIRS = tuple(
    {
        os.path.join(os.path.realpath(sysconfig.get_paths()[key]), "")
        for key in ("stdlib", "platstdlib")
    }
    | {os.path.join(sysconfig.get_paths()[key], "") for key in ("stdlib", "platstdlib")}
)
_INSTALLED = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")


@functools.lru_cache(maxsize=4096)
def is_user_file(path: str) -> bool:
    """Whether a frame in ``path`` is the user's own code: not an installed package's
    (``site-packages``/``dist-packages``), Python's standard library, this package or Python's
    frozen modules. Notebook cells and scripts are the user's."""
    if not path or path.startswith("<frozen "):
        return False
    if any(part in path for part in _INSTALLED):
        return False
    return not path.startswith(_PACKAGE_DIR) and not path.startswith(_STDLIB_DIRS)


def graph_built_at(operations: Iterable[Any]) -> dict[str, BuiltAt | None]:
    """Name -> the user's frame, of ``tf.Graph`` operations (their ``op.traceback``; None for
    an op with no stack, as those ``tf.graph_util.import_graph_def`` made). TensorFlow's own
    filter (``get_user_frames``, in C++) drops its frames; the few left are searched here."""
    names: list[str] = []
    frames: list[BuiltAt | None] = []
    user = is_user_file
    for op in operations:
        stack = op.traceback
        found = None
        if stack:
            for frame in reversed(stack.get_user_frames()):
                if user(frame.filename):
                    found = BuiltAt(frame.filename, frame.lineno, frame.name)
                    break
        names.append(op.name)
        frames.append(found)
    return dict(zip(names, frames, strict=True))  # the stores in one C loop


def function_built_at(
    made_by: Mapping[str, tuple[str | None, str]],
    debug_info_of: Callable[[str], Any] | None = None,
) -> dict[str, BuiltAt | None]:
    """Executed name -> the user's frame, for nodes ``made_by`` names as ``(FunctionDef name,
    node def name)``; ``debug_info_of(function name)`` is its ``GraphDebugInfo`` (called once
    per function; by default the eager runtime's, ``context.get_graph_debug_info``). A
    function the runtime no longer knows, or a node it has no stack for, gives None."""
    if debug_info_of is None:
        from tensorflow.python.eager import context

        debug_info_of = context.context().get_graph_debug_info
    frames_of: dict[str | None, Callable[[str], BuiltAt | None]] = {}
    built: dict[str, BuiltAt | None] = {}
    for name, (definition, node) in made_by.items():
        lookup = frames_of.get(definition)
        if lookup is None:
            lookup = frames_of[definition] = _stacks(definition, debug_info_of)
        built[name] = lookup(node)
    return built


def _stacks(definition: str | None, debug_info_of: Callable[[str], Any]) -> Any:
    """node def name -> its user frame, of one function's GraphDebugInfo (memoised)."""
    try:
        info = debug_info_of(definition) if definition else None
    except Exception:  # a function removed since, or a runtime without it: not recorded
        info = None
    if info is None or not info.name_to_trace_id:
        return lambda node: None
    files = info.files
    user = [is_user_file(path) for path in files]
    frames, traces = info.frames_by_id, info.traces_by_id
    found: dict[int, BuiltAt | None] = {}

    def lookup(node: str) -> BuiltAt | None:
        trace_id = info.name_to_trace_id.get(node)
        if trace_id is None:
            return None
        if trace_id not in found:
            found[trace_id] = None
            for frame_id in reversed(traces[trace_id].frame_id):
                frame = frames[frame_id]
                if frame.file_index < len(user) and user[frame.file_index]:
                    found[trace_id] = BuiltAt(files[frame.file_index], frame.line, frame.func)
                    break
        return found[trace_id]

    return lookup
