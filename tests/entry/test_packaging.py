"""A clone alone is the whole project: no file outside it is needed, and the metadata agrees."""

from __future__ import annotations

import re
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
    assert [p.name for p in folders] == [
        "ikhlestov-tensorflow-profiling",
        "kittibox",
        "riptide",
        "tensorflow-profiler-bert",
    ]
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


def test_extras_split_test_browser_lint_and_docs_and_dev_has_them_all():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert {"test", "browser", "lint", "docs", "dev"} <= set(extras)
    assert extras["dev"] == ["tfplace_widget[test,browser,lint,docs]"]
    assert not any(name.startswith(("jupyterlab", "playwright")) for name in extras["test"])


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The files of the wheel built from the checkout (once per module), by name."""
    folder = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(folder), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = folder.glob("tfplace_widget-*.whl")
    with zipfile.ZipFile(built) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_the_wheel_ships_the_browsers_javascript_and_css(wheel):
    """Every file of ``tfplace_widget/_static/`` (the widgets' and the HTML report's JavaScript
    and CSS) is tracked, so a clone has it, and is in the wheel as it is in the checkout."""
    static = ROOT / "tfplace_widget" / "_static"
    files = sorted(p for p in static.iterdir() if p.suffix in (".js", ".css"))
    assert {"table.js", "findings.js", "timeline.js", "search.js", "report.css"} <= {
        p.name for p in files
    }
    assert set(files) <= set(tracked_files()), "git add the new files of tfplace_widget/_static/"
    for path in files:
        name = f"tfplace_widget/_static/{path.name}"
        assert name in wheel, f"{name} is not in the wheel"
        assert wheel[name] == path.read_bytes(), f"{name} differs in the wheel"
    assert "tfplace_widget/_static/__init__.py" in wheel


def test_the_wheel_ships_every_vendored_trace_with_its_licence(wheel):
    """The recorded GPU traces (Chrome traces and the TF2 profile) are in the wheel as they are
    in the checkout, each folder's licence beside them: notebooks open them from the package."""
    files = sorted(p for p in GPU_TRACES.rglob("*") if p.is_file() and p.suffix != ".pyc")
    assert any(p.name.endswith(".xplane.pb") for p in files)
    for path in files:
        name = f"tfplace_widget/examples/gpu_traces/{path.relative_to(GPU_TRACES).as_posix()}"
        assert name in wheel, f"{name} is not in the wheel"
        assert wheel[name] == path.read_bytes(), f"{name} differs in the wheel"


def test_the_wheel_registers_the_console_script_and_the_pytest_plugin(wheel):
    """Installed, the wheel gives the ``tfplace`` command and the ``tfplace`` pytest plugin."""
    import configparser

    (name,) = [n for n in wheel if n.endswith(".dist-info/entry_points.txt")]
    entry_points = configparser.ConfigParser()
    entry_points.read_string(wheel[name].decode())
    assert dict(entry_points["console_scripts"]) == {"tfplace": "tfplace_widget._cli:main"}
    assert dict(entry_points["pytest11"]) == {"tfplace": "tfplace_widget._testing.plugin"}
    assert "tfplace_widget/_testing/plugin.py" in wheel


def test_the_package_index_page_has_no_link_it_cannot_follow(wheel):
    """A package index shows the wheel's long description on its own page, where a link or an
    image relative to the repository (``docs/panel.png``) is broken: the description is a short
    Markdown page whose links and images, if any, are absolute URLs."""
    (name,) = [n for n in wheel if n.endswith(".dist-info/METADATA")]
    headers, _, description = wheel[name].decode().partition("\n\n")
    assert "Description-Content-Type: text/markdown" in headers.splitlines()
    assert "show_placement" in description and len(description) < 5000, len(description)
    targets = re.findall(r"\]\(([^)\s]+)", description) + re.findall(
        r"(?:src|href)=[\"']([^\"']+)", description
    )
    assert [t for t in targets if not t.startswith(("https://", "http://"))] == []
