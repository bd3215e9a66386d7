"""Which ops the user's own code wrote: TensorFlow's record of where each op was created.

Every op of a ``tf.function`` graph keeps the Python stack that created it
(``Operation.traceback``). Walking it from the innermost frame outwards past TensorFlow's own
code and the Keras functions a user calls as TensorFlow ops (``keras.ops``, ``keras.random``,
the backend), the first frame left says who made the op: the corpus program's file (the user
wrote it, e.g. ``tf.concat`` in a ``train_step``, or a lookup in a layer of their own), or
Keras's layers, models, trainers, optimizers, losses and metrics, or TensorFlow's gradient and
function machinery (the framework made it: a user cannot put a ``tf.device`` or a cast inside
those). Ops with no Python frame of their own (arguments, runtime copies) are no one's the
user writes either.
"""

from __future__ import annotations

import gc
import os
import re
from dataclasses import dataclass, field

from ground_truth import function_name

# Code that turns a user's call into ops: skipped on the way out to the caller.
_TRANSPARENT = re.compile(
    r"/(tensorflow/(python/(ops/(?![a-z_]+_grad\.py)|framework/|util/|autograph/|types/|"
    r"profiler/|data/ops/|eager/(?!backprop)|module/)|core/function/)|keras/src/(ops/|random/|"
    r"api/|backend/common/|backend/tensorflow/(?!trainer))|tfplace_widget/)"
)
# Past those, every frame that is not the user's is the framework making ops of its own for
# the user's request (Keras's layers, trainer, optimizers; TensorFlow's gradients and
# strategies): a user cannot put a ``tf.device`` or a cast inside those.


@dataclass
class Authorship:
    """``(function, op name)`` -> where the op was made: ``"user:LINE"`` or the framework's
    first frame (``"keras/src/layers/core/dense.py"``)."""

    made_at: dict[tuple[str, str], str] = field(default_factory=dict)
    # The graphs of tf.data transformations' functions (``Dataset_map_tokenize``): the names
    # of their ops (arguments aside), to find the placer's blocks of those functions.
    dataset_functions: dict[str, set[str]] = field(default_factory=dict)
    # The program's own code makes its model's inputs (``keras.Input``/``layers.Input``): a
    # fix that asks for another dtype there asks the user to change their own line.
    writes_inputs: bool = False

    def writer(self, key: tuple[str, ...]) -> str | None:
        """Where the op at a node def's key (functions down to its body, its name) was made;
        ``None`` when no graph of that function is known."""
        if len(key) < 2:
            return None
        return self.made_at.get((function_name(key[-2]), key[-1]))

    def by_user(self, key: tuple[str, ...]) -> bool:
        return (self.writer(key) or "").startswith("user:")


def collect(user_paths: tuple[str, ...], seen: list) -> Authorship:
    """Every op of every ``tf.function`` graph made since the last call (``seen`` holds the
    graphs already looked at, so that programs run in one process keep apart), by its maker;
    frames in files whose path starts with one of ``user_paths`` are the user's (the corpus
    programs, and the oracle where it makes the user's call; the tool's own wrapper of a
    plain callable is transparent). A function's arguments are the caller's inputs (the
    user's data, even where Keras made them the step's arguments); its captures are values
    made outside it, no op the user writes in it."""
    from tensorflow.python.framework.func_graph import FuncGraph

    known = {id(g) for g in seen}
    graphs = [o for o in gc.get_objects() if isinstance(o, FuncGraph) and id(o) not in known]
    seen.extend(graphs)
    result = Authorship()
    for graph in graphs:
        function = function_name(graph.name)
        if graph.name.startswith("Dataset_"):  # its ops, without the arguments
            names = {op.name for op in graph.get_operations() if op.type != "Placeholder"}
            result.dataset_functions.setdefault(graph.name, set()).update(names)
        for op in graph.get_operations():
            made = _maker(op.type, op.traceback or [], user_paths)
            key = (function, op.name)
            # Several traces of one function: the user's word wins (the same line made it).
            if not result.made_at.get(key, "").startswith("user:"):
                result.made_at[key] = made
    return result


def _maker(op_type: str, frames: list, user_paths: tuple[str, ...]) -> str:
    frames = list(frames)
    if op_type == "Placeholder":  # a function's argument: the caller's input, or a capture
        if any(f.filename.endswith("capture/capture_container.py") for f in frames):
            return "a value the function captures"
        return "user:input"
    for frame in reversed(frames):  # innermost first
        filename = frame.filename
        if not filename.startswith("/"):  # a script run by a relative path
            filename = os.path.abspath(filename)
        if filename.startswith(user_paths):
            return f"user:{filename.rsplit('/', 1)[-1]}:{frame.lineno}"
        if not _TRANSPARENT.search(filename):
            return filename.split("site-packages/")[-1]
    return "no frame"
