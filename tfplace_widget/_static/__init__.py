"""The package's JavaScript and CSS, as plain files shipped in the wheel (no build step).

- ``table.js``/``table.css``, ``findings.js``/``findings.css``: the op table and the findings
  list (anywidget ``_esm``/``_css``; the HTML report runs the same two, see
  :func:`page_script`); ``chips.css``: the device chips' shared rules;
- ``bundle_entry.js``, ``holder.js``, ``timeline.js``/``timeline.css``: the plotly.js holder and
  the timeline (``$NAME`` placeholders filled by ``bundle_holder.fill_js``);
- ``search.js``, ``format.js``, ``report.js``/``report.css``: the HTML report's script (the
  panel's search rules and ``format_us`` in JavaScript, each checked with the Python on one
  file of cases, ``tests/search_cases.json`` and ``tests/format_cases.json``; then the page,
  which drives ``table.js`` and ``findings.js``) and its style sheet (after ``table.css`` and
  ``findings.css``);
- ``snapshot.css``: the style sheet of the panel's static snapshot (``rendering.snapshot``, the
  ``text/html`` that nbconvert and GitHub show where no widget is drawn; no script).

Every file is read as UTF-8 text; ``tests/js/`` runs the ones that hold logic under node.
"""

from __future__ import annotations

import os
import pathlib

FOLDER = pathlib.Path(__file__).resolve().parent


def path(name: str) -> pathlib.Path:
    """The file ``name`` of this folder."""
    return FOLDER / name


def text(name: str) -> str:
    """The contents of the file ``name``."""
    return path(name).read_text(encoding="utf-8")


def widget_source(name: str) -> str | pathlib.Path:
    """``name`` as an anywidget ``_esm``/``_css``: its path when ``ANYWIDGET_HMR=1`` (anywidget
    re-sends a saved file to open widgets), its text otherwise: anywidget 0.11 keeps every
    instance of a widget whose ``_esm`` is a path alive (held by the file's change signal)."""
    if os.environ.get("ANYWIDGET_HMR") == "1":
        return path(name)
    return text(name)


def page_script(name: str, as_name: str) -> str:
    """The module ``name`` as a page's classic script runs it (the HTML report wraps its
    scripts in one async function, where ``export`` is a syntax error): ``const as_name``, the
    object the module's last line, ``export default ...;``, hands anywidget, made by the
    module's text in a scope of its own (two modules' own names never clash in the page)."""
    code = text(name)
    body, _, last = code.rstrip("\n").rpartition("\n")
    if not last.startswith("export default ") or "\nexport " in body:
        raise ValueError(f"{name} must end with its one export, 'export default ...;'")
    exported = last.removeprefix("export default ").rstrip().removesuffix(";")
    return f"const {as_name} = (() => {{\n{body}\nreturn {exported};\n}})();\n"
