"""The ``tf.device`` the user wrote around each variable a ``ParameterServerStrategy`` setup
creates, and who opened each device scope of the step's graph, recorded in the coordinator's
process while the setup runs and the step is traced (issue 36).

``ParameterServerStrategy``'s variable creator opens its own device scope,
``/job:ps/task:<creation index mod ps tasks>/device:CPU:0``, inside the user's, so the variable
lands where the strategy deals it whatever ``tf.device`` is around it (tensorflow#56416,
#24326, #42701). Neither the variable nor the step's graph keeps the user's request: it lives
only while the scope is open. So, while the setup runs, each eager device scope entered on a
thread is noted with the file and line of its ``with`` (TensorFlow's own, whose ``__enter__``
and ``__exit__`` are wrapped in this process only, then restored), and a variable creator,
outside the strategy's, reads the scopes of the user's own files open when each variable is
made.

In the step's graph, each op keeps the device scopes open at its creation with the file and
line that opened them (``_device_assignments``), but TensorFlow 2.21 records its own
``ops.py`` for every ``tf.device``, the user's too. While the step is traced, each scope pushed
on a graph's device stack gets the file and line of the frame that entered it (the first
outside TensorFlow's device-scope machinery): the user's own file (or autograph's copy of it),
or the strategy's (``mirrored_run.py`` for ``strategy.run``'s replica device).

The coordinator is a process of tfplace's, made for the trace: nothing of the user's process
is touched.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def users_requests() -> Iterator[dict[str, dict[str, Any]]]:
    """While open: per variable made (its name without ``:0``), the innermost ``tf.device``
    of the user's own code open around its creation: ``{"device", "file", "line"}``. Empty
    when this TensorFlow has no eager device scope to follow."""
    import tensorflow as tf
    from tensorflow.python.eager import context

    scope = getattr(context, "_EagerDeviceContext", None)
    found: dict[str, dict[str, Any]] = {}
    if scope is None:
        yield found
        return
    opened: list[tuple[Any, int, str, str, int]] = []
    lock = threading.Lock()  # the coordinator's threads open scopes too
    enter, leave = scope.__enter__, scope.__exit__

    def entering(self: Any) -> Any:
        caller = sys._getframe(1)  # the frame whose `with` opened it
        where = (caller.f_code.co_filename, caller.f_lineno)
        with lock:
            opened.append((self, threading.get_ident(), str(self._device_name), *where))
        return enter(self)

    def leaving(self: Any, *info: Any) -> Any:
        with lock:
            for index in range(len(opened) - 1, -1, -1):
                if opened[index][0] is self:
                    del opened[index]
                    break
        return leave(self, *info)

    def creator(next_creator: Any, **kwargs: Any) -> Any:
        variable = next_creator(**kwargs)
        me = threading.get_ident()
        with lock:
            now = list(opened)
        users = [
            {"device": device, "file": path, "line": line}
            for _, thread, device, path, line in now
            if thread == me and device and not is_library(path)
        ]
        if users:
            found[variable.name.split(":")[0]] = users[-1]
        return variable

    scope.__enter__, scope.__exit__ = entering, leaving
    try:
        with tf.variable_creator_scope(creator):
            yield found
    finally:
        scope.__enter__, scope.__exit__ = enter, leave


def _library_dirs() -> tuple[str, ...]:
    """The folders of TensorFlow, Keras and tfplace: a scope opened in their files is not the
    user's."""
    import tensorflow as tf

    modules = [tf, sys.modules.get("keras"), sys.modules.get("tfplace_widget")]
    return tuple(
        os.path.dirname(os.path.realpath(module.__file__)) + os.sep
        for module in modules
        if module is not None and getattr(module, "__file__", None)
    )


# Frames of TensorFlow's device-scope machinery between a `with` and the stack it pushes on.
_MACHINERY = ("ops.py", "contextlib.py", "tf_contextlib.py", "traceable_stack.py")


@contextlib.contextmanager
def scope_openers() -> Iterator[bool]:
    """While open: every object pushed on a graph's device or colocation stack carries the
    file and line of the frame that opened its scope. Yields whether it could (TensorFlow
    has the stack this follows)."""
    try:
        from tensorflow.python.framework import traceable_stack
    except ImportError:
        yield False
        return
    stack = getattr(traceable_stack, "TraceableStack", None)
    push = getattr(stack, "push_obj", None)
    if push is None:
        yield False
        return

    def pushing(self: Any, obj: Any, offset: int = 0) -> Any:
        result = push(self, obj, offset + 1)  # TensorFlow's caller, past this frame
        frame = sys._getframe(1)
        while frame is not None and os.path.basename(frame.f_code.co_filename) in _MACHINERY:
            frame = frame.f_back
        if frame is not None and self._stack:
            self._stack[-1].filename = frame.f_code.co_filename
            self._stack[-1].lineno = frame.f_lineno
        return result

    stack.push_obj = pushing
    try:
        yield True
    finally:
        stack.push_obj = push


def is_library(path: str) -> bool:
    """Whether ``path`` is a file of TensorFlow, Keras or tfplace (not the user's)."""
    return os.path.realpath(path).startswith(_library_dirs())
