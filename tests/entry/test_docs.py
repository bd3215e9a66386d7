"""The documentation site (mkdocs.yml, docs/) builds with ``mkdocs build --strict``: every page,
the API reference generated from the docstrings of ``tfplace_widget.__all__``, the benchmark
results and the gallery, where the cheapest example notebook (04, a recorded GPU trace: about
2 s) is executed and shown with its panel's static snapshot. ``./dev docs`` executes all nine
(about a minute). A broken link or a broken API reference fails the strict build.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, needs_source_tree

pytestmark = [
    needs_source_tree,
    pytest.mark.skipif(
        shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None,
        reason="mkdocs is not installed: pip install -e '.[docs]' (./dev setup installs it)",
    ),
]
EXECUTED = "04_real_gpu_trace"
README_LINES = 200


def build_site(config: Path, out: Path, notebooks: str, cache: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config`` into ``out``, executing ``notebooks`` (prefixes)."""
    env = dict(
        os.environ,
        TFPLACE_DOCS_NOTEBOOKS=notebooks,
        TFPLACE_DOCS_CACHE=str(cache),
        NO_MKDOCS_2_WARNING="1",
    )
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = build_site(REPO / "mkdocs.yml", out, EXECUTED[:2], out.parent / "nb-cache")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return out


def page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text(encoding="utf-8")


def test_the_api_reference_documents_every_public_name_and_its_parameters(site):
    import tfplace_widget

    api = page(site, "api")
    for name in tfplace_widget.__all__:
        assert f'id="tfplace_widget.{name}"' in api, name
    # Google-style Args sections, rendered as parameter tables by mkdocstrings.
    for function, parameters in {
        "trace_placement": ["fn", "*args", "**options"],
        "show_placement": ["fn_or_trace", "*args", "**options"],
        "predict_placement": ["fn_or_trace", "gpus", "**trace_options"],
        "compare": ["a", "b"],
        "show_comparison": ["a", "b", "**kwargs"],
        "assert_placement": [
            "fn_or_trace",
            "*args",
            "expect",
            "max_copies",
            "allow_cpu_fallback",
            "**trace_options",
        ],
    }.items():
        start = api.index(f'id="tfplace_widget.{function}"')
        section = api[start : api.index('class="doc doc-heading"', start + 50)]
        assert "Parameters:" in section, function
        for parameter in parameters:
            assert f"<code>{parameter}</code>" in section, (function, parameter)


def test_the_gallery_shows_an_executed_notebook_with_its_panel_snapshot(site):
    executed = page(site, f"gallery/{EXECUTED}")
    assert f"src='../{EXECUTED}.html'" in executed  # the notebook, in an iframe
    assert "tfplace-gallery-note" not in executed
    notebook = (site / "gallery" / f"{EXECUTED}.html").read_text(encoding="utf-8")
    assert "tfplace-snapshot-chips" in notebook and "<svg" in notebook
    others = sorted(p.stem for p in (REPO / "notebooks").glob("[0-9]*.ipynb"))
    assert len(others) == 9
    for name in others:
        assert name in page(site, "gallery"), name
        if name != EXECUTED:  # rendered without outputs, and says so
            assert "tfplace-gallery-note" in page(site, f"gallery/{name}"), name


def test_the_readme_is_a_front_door_whose_links_reach_the_site(site):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_LINES
    pages = re.findall(r"\]\(docs/([\w/-]+)\.md\)", readme)
    assert len(pages) >= 15
    for name in pages:
        assert (site / name / "index.html").is_file() or name == "index", name
    results = (REPO / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    first_section = re.search(r"^## (.+)$", results, re.M).group(1)
    assert first_section in page(site, "benchmarks")


def test_a_broken_link_or_api_reference_fails_the_strict_build(tmp_path):
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "docs", copy / "docs")
    shutil.copy(REPO / "mkdocs.yml", copy / "mkdocs.yml")
    (copy / "benchmarks").mkdir()
    shutil.copy(REPO / "benchmarks" / "RESULTS.md", copy / "benchmarks" / "RESULTS.md")
    (copy / "tfplace_widget").symlink_to(REPO / "tfplace_widget")
    (copy / "notebooks").mkdir()
    assert build_site(copy / "mkdocs.yml", tmp_path / "ok", "none", tmp_path).returncode == 0
    with (copy / "docs" / "security.md").open("a") as f:
        f.write(
            "\nSee [the missing page](guide/no-such-page.md) and [this][tfplace_widget.nothing].\n"
        )
    done = build_site(copy / "mkdocs.yml", tmp_path / "broken", "none", tmp_path)
    assert done.returncode != 0
    assert "guide/no-such-page.md" in done.stderr
    assert "tfplace_widget.nothing" in done.stderr
