"""A clone alone is the whole project: no file outside it is needed, and the metadata agrees."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from helpers import REPO, needs_source_tree

import tfplace_widget
from tfplace_widget.examples import GPU_TRACES, gpu_trace

pytestmark = needs_source_tree  # a clone, its git files and pyproject.toml
ROOT = REPO
tomllib = pytest.importorskip("tomllib")  # Python 3.11+


def tracked_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / name for name in listed]


def test_no_code_reads_the_shared_folder_beside_the_clone():
    code = [
        p
        for p in tracked_files()
        if (p.suffix in (".py", ".ipynb") or p.name in ("dev", "run")) and p != Path(__file__)
    ]
    readers = [
        str(p.relative_to(ROOT))
        for p in code
        if p.is_file() and ("shared/fixtures" in p.read_text() or "../shared" in p.read_text())
    ]
    assert readers == []


def test_every_vendored_trace_folder_keeps_its_licence_and_origin():
    folders = sorted(p for p in GPU_TRACES.iterdir() if p.is_dir())
    assert [p.name for p in folders] == ["ikhlestov-tensorflow-profiling", "kittibox", "riptide"]
    readme = (GPU_TRACES / "README.md").read_text()
    for folder in folders:
        assert (folder / "LICENSE").read_text().strip(), folder
        assert folder.name in readme
    assert gpu_trace("riptide/timeline.ctf.json").is_file()


def test_version_and_licence_come_from_one_place():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert tfplace_widget.__version__ == metadata.version("tfplace_widget") == project["version"]
    assert project["license"] == {"text": "MIT"}
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert (ROOT / "tfplace_widget" / "py.typed").exists()


def test_extras_split_test_browser_and_lint_and_dev_has_them_all():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert {"test", "browser", "lint", "dev"} <= set(extras)
    assert extras["dev"] == ["tfplace_widget[test,browser,lint]"]
    assert not any(name.startswith(("jupyterlab", "playwright")) for name in extras["test"])


def test_the_wheel_ships_the_browsers_javascript_and_css(tmp_path):
    """Every file of ``tfplace_widget/static/`` (the widgets' and the HTML report's JavaScript
    and CSS) is tracked, so a clone has it, and is in the wheel as it is in the checkout."""
    static = ROOT / "tfplace_widget" / "static"
    files = sorted(p for p in static.iterdir() if p.suffix in (".js", ".css"))
    assert {"table.js", "findings.js", "timeline.js", "search.js", "report.css"} <= {
        p.name for p in files
    }
    assert set(files) <= set(tracked_files()), "git add the new files of tfplace_widget/static/"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("tfplace_widget-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name: archive.read(name) for name in archive.namelist()}
    for path in files:
        name = f"tfplace_widget/static/{path.name}"
        assert name in shipped, f"{name} is not in the wheel"
        assert shipped[name] == path.read_bytes(), f"{name} differs in the wheel"
    assert "tfplace_widget/static/__init__.py" in shipped
