"""MkDocs hook: the example notebooks as gallery pages, rendered with their outputs.

The notebooks in ``notebooks/`` are stored without outputs. At build time each is executed
(nbclient, one fresh ``python3`` kernel, in a temporary copy of the folder so that nothing is
written into the clone) and converted with nbconvert's ``lab`` HTML template, as
``jupyter nbconvert --to html`` converts it, into ``gallery/<name>.html``; the page
``gallery/<name>/`` shows that file in an iframe, so that neither the theme's style sheet nor
JupyterLab's touches the other. The widget state is not stored, so each panel shows its static
snapshot (``text/html`` beside the widget view), as GitHub and nbviewer show a notebook saved
from JupyterLab.

``TFPLACE_DOCS_NOTEBOOKS`` picks which notebooks run: ``all`` (the default), ``none``, or
name prefixes separated by commas (``01,04``). The others are rendered without outputs,
with a note that says so, so that every gallery link resolves in every build. Executed
notebooks are cached in ``.docs-cache/`` (git ignores it), keyed by the notebook and the
package's source, so a rebuild re-runs only what changed (``TFPLACE_DOCS_CACHE`` moves it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from html import escape as html_escape
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
PACKAGE = ROOT / "tfplace_widget"
CACHE = Path(os.environ.get("TFPLACE_DOCS_CACHE") or ROOT / ".docs-cache" / "notebooks")
SELECT_ENV = "TFPLACE_DOCS_NOTEBOOKS"
CELL_TIMEOUT_S = 300
PLACEHOLDER = "<!-- tfplace-notebook -->"

_notes: dict[str, str] = {}  # gallery page path -> a note when not executed


def _notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9]*.ipynb"))


def _selected(path: Path) -> bool:
    choice = os.environ.get(SELECT_ENV, "all").strip()
    if choice == "all":
        return True
    if choice in ("", "none"):
        return False
    return any(path.name.startswith(prefix.strip()) for prefix in choice.split(","))


def _title(path: Path) -> str:
    import nbformat

    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip().replace("`", "")
    return path.stem


def _page(path: Path) -> str:
    return f"gallery/{path.stem}.md"


def _source_key(path: Path) -> str:
    digest = hashlib.sha256(path.read_bytes())
    for source in sorted(PACKAGE.rglob("*")):
        if source.is_file() and source.suffix in (".py", ".js", ".css", ".json"):
            digest.update(str(source.relative_to(PACKAGE)).encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def _executed(path: Path, key: str):
    """The notebook with its outputs: from the cache, or run now."""
    import nbformat
    from nbclient import NotebookClient

    cached = CACHE / f"{path.stem}-{key}.ipynb"
    if cached.is_file():
        return nbformat.read(cached, as_version=4)
    notebook = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tfplace-docs-") as folder:
        shutil.copytree(NOTEBOOKS, folder, dirs_exist_ok=True)
        NotebookClient(
            notebook,
            timeout=CELL_TIMEOUT_S,
            kernel_name="python3",
            store_widget_state=False,  # nbconvert then shows each panel's static snapshot
            resources={"metadata": {"path": folder}},
        ).execute()
    print(f"gallery: executed {path.name} in {time.perf_counter() - started:.1f} s")
    CACHE.mkdir(parents=True, exist_ok=True)
    for old in CACHE.glob(f"{path.stem}-*.ipynb"):
        old.unlink()
    nbformat.write(notebook, cached)
    return notebook


def _html(path: Path) -> tuple[str, str]:
    """A note when the notebook was not executed, and its whole HTML page."""
    import nbformat
    from nbconvert import HTMLExporter

    if _selected(path):
        notebook = _executed(path, _source_key(path))
        note = ""
    else:
        notebook = nbformat.read(path, as_version=4)
        note = (
            "<p class='tfplace-gallery-note'>This build did not execute this notebook "
            f"({SELECT_ENV}); <code>./dev docs</code> renders it with its outputs.</p>"
        )
    page, _ = HTMLExporter(template_name="lab").from_notebook_node(notebook)
    return note, page


def on_config(config):
    """Fill the nav's Gallery section with one page per notebook."""
    pages = [{"Overview": "gallery/index.md"}]
    pages += [{_title(path): _page(path)} for path in _notebooks()]
    for entry in config.nav:
        if isinstance(entry, dict) and "Gallery" in entry:
            entry["Gallery"] = pages
    return config


def on_files(files, config):
    """Add the gallery pages (generated: nothing is written into docs/)."""
    from mkdocs.structure.files import File

    lines = [
        "# Gallery",
        "",
        "The example notebooks of `notebooks/`, executed when this site was built and shown with",
        "their outputs. Each panel is its static snapshot (the header, the device chips, the",
        "findings, the first rows of the table and the timeline); open the notebook in JupyterLab",
        "(`./dev demo`) for the live panel.",
        "",
    ]
    for path in _notebooks():
        lines.append(f"- [{_title(path)}]({path.stem}.md)")
        note, html = _html(path)
        _notes[_page(path)] = note
        files.append(File.generated(config, f"gallery/{path.stem}.html", content=html))
        files.append(
            File.generated(
                config, _page(path), content=f"---\nhide:\n  - toc\n---\n\n{PLACEHOLDER}\n"
            )
        )
    files.append(File.generated(config, "gallery/index.md", content="\n".join(lines) + "\n"))
    return files


def on_page_content(html, page, config, files):
    """The notebook's iframe goes in after Markdown, so that Markdown never reads it."""
    src_uri = page.file.src_uri
    if src_uri not in _notes:
        return html
    name = Path(src_uri).stem
    notebook = files.get_file_from_path(f"gallery/{name}.html")
    frame = (
        f"{_notes[src_uri]}<p class='tfplace-gallery-source'>Source: "
        f"<code>notebooks/{name}.ipynb</code> (<a href='{notebook.url_relative_to(page.file)}'>"
        "open the page on its own</a>)</p>"
        f"<iframe class='tfplace-notebook' title='{html_escape(page.title)}' "
        f"src='{notebook.url_relative_to(page.file)}' loading='eager' "
        "onload='this.style.height = this.contentDocument.documentElement.scrollHeight + 32 + \"px\"'>"
        "</iframe>"
    )
    return html.replace(PLACEHOLDER, frame)
