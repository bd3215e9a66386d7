"""What the commands read: a trace file (``tfplace show``/``export``) and the builder a
``tfplace run MODULE_OR_FILE:FUNCTION`` names, each refused with one line naming it."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import CliError, one_line

if TYPE_CHECKING:  # pragma: no cover
    from .._model.trace import PlacementTrace


def load_trace(path: str) -> PlacementTrace:
    """The trace in ``path`` (anything ``show_placement`` opens), or a one-line error naming it."""
    from .._model.errors import TraceError
    from .._tracing.dispatch import as_trace

    if os.path.isdir(path):
        raise CliError(f"{path!r} is a folder, not a trace file.")
    try:
        return as_trace(path)
    except (TraceError, KeyboardInterrupt):
        raise
    except Exception as exc:  # a reader's own error: the file is not what its name says
        raise CliError(
            f"Cannot read {path!r} as a trace ({type(exc).__name__}: {one_line(exc)}). "
            "tfplace reads .tfplace files, Chrome trace JSON and RunMetadata (.pb, .pbtxt)."
        ) from exc


def load_builder(target: str) -> Callable[..., Any]:
    """The function ``target`` names: ``path/to/file.py:name`` or ``package.module:name``
    (``name`` may be dotted: ``Model.build``). The file runs as a module named after it, not
    as ``__main__``; its folder (or, for a module, the working directory) goes first on
    ``sys.path`` so that its own imports work as with ``python file.py``."""
    import importlib
    import importlib.util

    where, colon, name = target.rpartition(":")
    if not colon or not where or not name:
        raise CliError(
            f"Expected MODULE_OR_FILE:FUNCTION (e.g. model.py:build or mypkg.model:build), "
            f"not {target!r}."
        )
    is_file = where.endswith(".py") or os.sep in where or "/" in where or os.path.isfile(where)
    try:
        if is_file:
            path = os.path.abspath(where)
            if not os.path.isfile(path):
                raise CliError(f"No such file: {where!r} (in {os.getcwd()!r}).")
            folder = os.path.dirname(path)
            if folder not in sys.path:
                sys.path.insert(0, folder)
            module_name = "_tfplace_" + re.sub(r"\W", "_", os.path.basename(path)[:-3] or "main")
            spec = importlib.util.spec_from_file_location(module_name, path)
            if spec is None or spec.loader is None:
                raise CliError(f"Cannot import {where!r}: not a Python file.")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path and "" not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(where)
    except CliError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and where.startswith(exc.name):
            raise CliError(
                f"No module named {exc.name!r} (from {os.getcwd()!r}); a file path must end in "
                ".py, e.g. model.py:build."
            ) from exc
        raise CliError(f"Importing {where!r} failed: {one_line(exc, True)}") from exc
    except (Exception, SystemExit) as exc:  # the user's module: any error is bad input
        raise CliError(f"Importing {where!r} failed: {one_line(exc, True)}") from exc
    found: Any = module
    for part in name.split("."):
        if not hasattr(found, part):
            callables = sorted(
                n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
            )
            hint = f" It defines: {', '.join(callables[:12])}." if callables else ""
            raise CliError(f"{where!r} has no {name!r}.{hint}")
        found = getattr(found, part)
    if not callable(found):
        raise CliError(f"{where}:{name} is a {type(found).__name__}, not a function.")
    return found
