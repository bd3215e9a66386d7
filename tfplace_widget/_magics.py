"""``%load_ext tfplace_widget``: the ``%%tfplace`` cell magic and the names it adds.

The cell body is the graph builder: it runs inside the trace's fresh graph, in the user's
namespace (so the tensors it defines are there afterwards), and its last expression, if any,
is what gets fetched. The magic returns the panel, so the panel is the cell's output.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import importlib
import threading
from typing import Any

from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from ._tracing.options import cpu_count_argument

_FETCH = "__tfplace_fetch__"
_NAMES = ("show_placement", "trace_placement")


@magic_arguments()
@argument(
    "--cpus", type=cpu_count_argument, default=None, help="number of CPU devices (device_count CPU)"
)
@argument("--no-soft", action="store_true", help="turn soft placement off")
@argument("--optimize", action="store_true", help="let Grappler optimize the graph")
@argument("--device-scope", default=None, help="an outer tf.device around the cell, e.g. /cpu:1")
@argument(
    "--cluster",
    default=None,
    help="run across a local TensorFlow cluster, e.g. local:worker=2,ps=1 (--cpus per task)",
)
def tfplace(line: str, cell: str) -> Any:
    """Trace the cell's ops and show where TensorFlow placed them."""
    from IPython import get_ipython

    from ._widgets.panel import show_placement

    args = parse_argstring(tfplace, line)
    shell = get_ipython()
    builder = _builder_from_cell(cell, shell.user_ns)
    options: dict[str, Any] = {"soft_placement": not args.no_soft, "optimize": args.optimize}
    if args.cpus is not None:
        options["device_count"] = {"CPU": args.cpus}
    if args.device_scope:
        options["device_scope"] = args.device_scope
    if args.cluster:
        options.update(cluster=args.cluster, mode="graph")  # a cell is a graph builder
    return show_placement(builder, **options)


def _builder_from_cell(cell: str, namespace: dict) -> Any:
    """A function that runs ``cell`` in ``namespace`` and returns its last expression."""
    tree = ast.parse(cell, filename="<%%tfplace cell>")
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        tree.body[-1] = ast.Assign(targets=[ast.Name(id=_FETCH, ctx=ast.Store())], value=last.value)
        ast.copy_location(tree.body[-1], last)
    ast.fix_missing_locations(tree)
    code = compile(tree, "<%%tfplace cell>", "exec")

    def cell_builder() -> Any:
        namespace.pop(_FETCH, None)
        exec(code, namespace)
        return namespace.pop(_FETCH, None)

    cell_builder.__name__ = "%%tfplace cell"
    return cell_builder


def load(ipython: Any, names: dict[str, Any]) -> None:
    """Register ``%%tfplace``, put ``names`` (the package's ``show_placement`` and
    ``trace_placement``, handed in by its ``load_ipython_extension``) in the user's namespace,
    send plotly.js, and import the panel (pandas, ipywidgets: about half a second) right after
    the cell.
    """
    from ._tfadapter.capture import capture_tensorflow_import
    from ._widgets.bundle_holder import bundle_available, holder

    capture_tensorflow_import()  # TensorFlow's start-up lines go to the first trace's log
    ipython.register_magic_function(tfplace, magic_kind="cell", magic_name="tfplace")
    ipython.push(dict(names))
    # Send plotly.js now: the page loads it (about a second) while the user writes the first
    # cell, instead of while that cell's panel waits to be drawn.
    if bundle_available():
        holder()
    warm_up()


_warm_up: Any = None


def warm_up() -> Any:
    """Import the panel's modules once per process, soon after ``%load_ext`` returns, so that
    the first ``show_placement`` made a moment later does not pay for them (about 0.5 s, most
    of it pandas).

    In a kernel it runs on the kernel's event loop right after the cell (the main thread is
    idle then, and an import there takes half the time it takes in a thread); elsewhere in a
    background thread. TensorFlow is left alone: the user imports it when they choose (with
    its start-up lines captured, ``capture_tensorflow_import``). Returns the scheduled handle
    or the thread.
    """
    global _warm_up
    if _warm_up is None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop in this thread: not a kernel running a cell
            _warm_up = threading.Thread(target=_import_panel, name="tfplace-warm-up", daemon=True)
            _warm_up.start()
        else:
            _warm_up = loop.call_later(0.05, _import_panel)
    return _warm_up


def _import_panel() -> None:
    with contextlib.suppress(Exception):  # an import error shows when the panel is used
        importlib.import_module("tfplace_widget._widgets.panel")


def unload(ipython: Any, names: dict[str, Any]) -> None:
    """Undo :func:`load`: drop the magic and ``names`` (those of them the user kept)."""
    from ._tfadapter.capture import stop_capturing_tensorflow_import

    stop_capturing_tensorflow_import()

    ipython.magics_manager.magics["cell"].pop("tfplace", None)
    for name, value in names.items():
        if ipython.user_ns.get(name) is value:
            del ipython.user_ns[name]
