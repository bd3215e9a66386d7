"""The package's house rules (issue 22): imports go only downward through the layers (the
import-linter contract in pyproject.toml), no import cycle (imports inside functions count),
small modules, and a short top level. A violation fails here, in CI's ``./dev test``."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tfplace_widget

PACKAGE = Path(tfplace_widget.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"
MAX_MODULE_LINES = 800
MAX_TOP_LEVEL_MODULES = 12

needs_source_tree = pytest.mark.skipif(
    not PYPROJECT.is_file(), reason="the contract lives in the source tree's pyproject.toml"
)


def lint_imports(parent: Path, config: Path) -> subprocess.CompletedProcess:
    """import-linter on the ``tfplace_widget`` found under ``parent``, with ``config``."""
    code = (
        "import sys\nfrom importlinter.cli import lint_imports\n"
        "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))"
    )
    env = {**os.environ, "PYTHONPATH": str(parent)}
    return subprocess.run(
        [sys.executable, "-c", code, str(config)],
        cwd=parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@needs_source_tree
def test_the_layer_contract_is_kept():
    result = lint_imports(PACKAGE.parent, PYPROJECT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


@needs_source_tree
def test_an_upward_import_breaks_the_contract(tmp_path):
    """The contract is not vacuous: the model layer importing a widget, even lazily inside a
    function, is reported with the chain that does it."""
    copy = tmp_path / "tfplace_widget"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    devices = copy / "_model" / "devices.py"
    devices.write_text(
        devices.read_text() + "\n\ndef _upward():\n    from .._widgets import table  # noqa\n"
    )
    shutil.copy(PYPROJECT, tmp_path / "pyproject.toml")
    result = lint_imports(tmp_path, tmp_path / "pyproject.toml")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "tfplace_widget._model is not allowed to import tfplace_widget._widgets" in result.stdout
    assert "tfplace_widget._model.devices -> tfplace_widget._widgets.table" in result.stdout


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str, package: Path = PACKAGE) -> bool:
    relative = package.parent / Path(*name.split("."))
    return relative.is_dir() or relative.with_suffix(".py").is_file()


def package_imports(path: Path, package: Path = PACKAGE) -> set[str]:
    """The package modules ``path`` imports anywhere: at module level, inside functions (run
    when called) and in ``if TYPE_CHECKING:`` blocks (read by type checkers)."""
    name = module_name(path, package)
    parent = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = parent.split(".")[: len(parent.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("tfplace_widget"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if is_module(sub, package) else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("tfplace_widget"))
    found.discard(name)
    return found


def import_cycles(package: Path) -> list[list[str]]:
    """Every cycle among the imports of the modules under ``package``, each as a closed chain."""
    graph = {module_name(p, package): package_imports(p, package) for p in package.rglob("*.py")}
    done: set[str] = set()
    cycles: list[list[str]] = []

    def walk(node: str, stack: list[str]) -> None:
        if node in stack:
            cycles.append([*stack[stack.index(node) :], node])
            return
        if node in done:
            return
        for target in sorted(graph.get(node, ())):
            walk(target, [*stack, node])
        done.add(node)

    for module in sorted(graph):
        walk(module, [])
    return cycles


def test_no_import_cycle():
    """No cycle among the package's imports, those inside functions included: a lazy import
    hides a cycle from the import system, not from a reader."""
    cycles = import_cycles(PACKAGE)
    assert not cycles, "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path):
    """The model's graph facts importing the trace when called (the trace imports them at
    module level) is a cycle within one layer, which the layer contract allows: the cycle
    check reports it."""
    copy = tmp_path / "tfplace_widget"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    facts = copy / "_model" / "graphfacts.py"
    facts.write_text(
        facts.read_text() + "\n\ndef _late():\n    from .trace import PlacementTrace  # noqa\n"
    )
    assert import_cycles(copy) == [
        [
            "tfplace_widget._model.trace",
            "tfplace_widget._model.graphfacts",
            "tfplace_widget._model.trace",
        ]
    ]


def test_modules_stay_small_and_the_top_level_short():
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


@needs_source_tree
def test_the_package_map_names_every_subpackage_once():
    """The architecture page's package map (docs/architecture.md, between its package-map
    markers) has one line per subpackage of the tree, and names none that is not there."""
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    start, end = page.index("<!-- package-map"), page.index("<!-- /package-map -->")
    lines = [line.strip() for line in page[start:end].splitlines()[1:]]
    mapped = [line.split("`")[1].rstrip("/") for line in lines if line.startswith("- `")]
    on_disk = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    subpackages = [name for name in mapped if not name.endswith(".py")]
    assert sorted(subpackages) == on_disk
    assert len(set(subpackages)) == len(subpackages)


# -- TensorFlow has two doors (issue 32) ----------------------------------------------------------
TENSORFLOW_DOORS = ("tfplace_widget._tfadapter", "tfplace_widget._tracing")


def tensorflow_imports(package: Path) -> dict[str, list[int]]:
    """Module name -> the lines where it imports TensorFlow, for every module under
    ``package``: import statements anywhere in it (inside functions too), and
    ``importlib.import_module``/``__import__`` of a ``tensorflow`` name."""

    def is_tensorflow(name: str) -> bool:
        return name == "tensorflow" or name.startswith("tensorflow.")

    found: dict[str, list[int]] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                hit = any(is_tensorflow(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                hit = not node.level and is_tensorflow(node.module or "")
            elif isinstance(node, ast.Call) and node.args:
                called = ast.unparse(node.func)
                first = node.args[0]
                hit = (
                    called.endswith(("import_module", "__import__"))
                    and isinstance(first, ast.Constant)
                    and isinstance(first.value, str)
                    and is_tensorflow(first.value)
                )
            else:
                hit = False
            if hit:
                found.setdefault(name, []).append(node.lineno)
    return found


def test_only_the_adapter_and_tracing_import_tensorflow():
    """TensorFlow's process, registries and protos are the adapter's (``_tfadapter/``), the user's
    code runs in ``_tracing/``: no other module imports TensorFlow, not even inside a function."""
    found = tensorflow_imports(PACKAGE)
    outside = {m: lines for m, lines in found.items() if not m.startswith(TENSORFLOW_DOORS)}
    assert not outside, f"modules outside {TENSORFLOW_DOORS} import tensorflow: {outside}"
    assert {m.rpartition(".")[0] for m in found} == set(TENSORFLOW_DOORS)


def test_an_import_of_tensorflow_inside_a_function_is_found(tmp_path):
    """The check reads every import, not only the module-level ones."""
    module = tmp_path / "tfplace_widget" / "_analyses" / "late.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        "import importlib\n\n\n"
        "def dtypes():\n"
        "    from tensorflow.python.framework import dtypes\n\n"
        "    return dtypes\n\n\n"
        "def tf():\n"
        "    return importlib.import_module('tensorflow')\n"
    )
    assert tensorflow_imports(tmp_path / "tfplace_widget") == {
        "tfplace_widget._analyses.late": [5, 11]
    }


# -- the analyses run no TensorFlow: its registries are handed in (issue 32) -----------------------
ADAPTER = "tfplace_widget._tfadapter"
NO_ADAPTER = ("_analyses", "_explain")


def imported(node: ast.AST, package: str) -> list[str]:
    """The modules an import statement ``node`` of a module of ``package`` names (relative
    imports resolved); ``[]`` for any other node."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if not node.level:
        return [node.module or ""]
    head = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
    if node.module:
        return [f"{head}.{node.module}"]
    return [f"{head}.{alias.name}" for alias in node.names]


def adapter_imports(package: Path, subpackages: tuple[str, ...]) -> dict[str, list[int]]:
    """Module name -> the lines where it imports from ``tfplace_widget._tfadapter`` (absolute or
    relative, anywhere in the module: inside functions too), for the modules of ``subpackages``
    of ``package``."""
    found: dict[str, list[int]] = {}
    paths = sorted(p for sub in subpackages for p in (package / sub).rglob("*.py"))
    for path in paths:
        dotted = ".".join(path.relative_to(package.parent).with_suffix("").parts)
        name = dotted.removesuffix(".__init__")
        home = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        lines = [
            node.lineno
            for node in ast.walk(tree)
            if any(t == ADAPTER or t.startswith(f"{ADAPTER}.") for t in imported(node, home))
        ]
        if lines:
            found[name] = lines
    return found


def test_the_analyses_and_the_explainer_import_nothing_from_the_adapter():
    """Predictions, findings, copies and reasons get TensorFlow's kernel and placer facts
    handed in (``model.kernel_registry.KernelRegistry``: the trace's facts carry this process's
    registry, ``predict_placement`` hands it in): ``_analyses/`` and ``_explain/`` import nothing
    from ``_tfadapter/``, not even inside a function."""
    assert all((PACKAGE / sub).is_dir() for sub in NO_ADAPTER), NO_ADAPTER  # not vacuous
    found = adapter_imports(PACKAGE, NO_ADAPTER)
    assert not found, f"modules of {NO_ADAPTER} importing {ADAPTER}: {found}"


LAZY_ADAPTER_IMPORTS = """\
from .._model import devices


def lookup():
    from .._tfadapter.registry import REGISTRY

    return REGISTRY


def probe():
    from .. import _tfadapter
    import tfplace_widget._tfadapter.probe

    return _tfadapter, tfplace_widget
"""


def test_an_import_from_the_adapter_inside_a_function_is_found(tmp_path):
    """The check reads relative and absolute imports, inside functions too."""
    package = tmp_path / "tfplace_widget"
    (package / "_explain").mkdir(parents=True)
    (package / "_explain" / "late.py").write_text(LAZY_ADAPTER_IMPORTS)
    found = adapter_imports(package, NO_ADAPTER)
    assert found == {"tfplace_widget._explain.late": [5, 11, 12]}
