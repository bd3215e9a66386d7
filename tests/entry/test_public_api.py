"""The public API is ``tfplace_widget.__all__`` (issue 32): every name in it resolves, every
exception the package can raise to a user is in it, and everything else is visibly internal (a
top-level module or subpackage whose name starts with ``_``)."""

from __future__ import annotations

import ast
import builtins
import importlib
from pathlib import Path

import tfplace_widget

PACKAGE = Path(tfplace_widget.__file__).parent
# The top level a user may import: the package itself, ``python -m tfplace_widget``, and the
# vendored GPU traces (data the notebooks and the guide open, with ``gpu_trace(name)``).
PUBLIC_MODULES = {"__init__", "__main__", "examples"}
# Exceptions that never reach a user, each with the code that stops it.
INTERNAL_ERRORS = {
    "CliError": "the tfplace command's own bad input: main() prints it and exits 2",
    "ExpectationError": "a bad --expect-device: the command line turns it into a CliError",
    "RemoteRunError": "a failed run in a cluster's child: the tracer raises TF's own error",
    "MissingRegistryError": "an analysis called without TensorFlow's registry, which every "
    "public entry point hands in (predict_placement, the readers' facts)",
}


def exception_classes() -> dict[str, str]:
    """Class name -> module, for every class defined in the package that derives (by the
    names of its bases, followed through the package) from a Python exception."""
    bases: dict[str, list[str]] = {}
    where: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = [ast.unparse(b).rpartition(".")[2] for b in node.bases]
                where[node.name] = module

    def is_exception(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name in seen:
            return False
        builtin = getattr(builtins, name, None)
        if isinstance(builtin, type) and issubclass(builtin, BaseException):
            return True
        return any(is_exception(base, seen | {name}) for base in bases.get(name, []))

    return {name: where[name] for name in bases if is_exception(name)}


def test_every_public_name_resolves():
    assert len(set(tfplace_widget.__all__)) == len(tfplace_widget.__all__)
    for name in tfplace_widget.__all__:
        assert getattr(tfplace_widget, name) is not None, name


def test_every_exception_a_user_can_catch_is_public():
    found = exception_classes()
    assert {"TraceError", "TraceFileNotFound", "SearchError", "ClusterError"} <= set(found)
    public = {name for name in found if not name.startswith("_")} - set(INTERNAL_ERRORS)
    missing = sorted(public - set(tfplace_widget.__all__))
    assert not missing, f"exception classes not exported by tfplace_widget: {missing}"
    for name in public:
        error = getattr(tfplace_widget, name)
        assert issubclass(error, Exception), name
        module = importlib.import_module(found[name])
        assert getattr(module, name) is error, f"{name} is defined twice"
    assert set(INTERNAL_ERRORS) <= set(found), "an internal error is gone: update the list"


def test_everything_but_the_public_api_is_private():
    top = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.parent.name for p in PACKAGE.glob("*/__init__.py")
    }
    public = sorted(name for name in top - PUBLIC_MODULES if not name.startswith("_"))
    assert not public, f"top-level modules not named as internal (start with _): {public}"
    assert top >= PUBLIC_MODULES
