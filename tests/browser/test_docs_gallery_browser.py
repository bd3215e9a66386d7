"""The documentation site's gallery page of an executed notebook, opened in Chromium from a
local server: the notebook (nbconvert's page, in an iframe) shows its panel as its static
snapshot (chips, table and timeline), visible and not empty. Builds the site as ``tests/entry/test_docs.py`` does (notebook 04 only).
"""

from __future__ import annotations

import functools
import http.server
import threading

import pytest
from helpers import REPO
from test_docs import EXECUTED, build_site

from .conftest import SCREENSHOTS

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def served_site(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed: pip install -e '.[docs]'")
    out = tmp_path / "site"
    done = build_site(REPO / "mkdocs.yml", out, EXECUTED[:2], tmp_path / "nb-cache")
    assert done.returncode == 0, done.stderr[-6000:]
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_gallery_page_shows_the_notebooks_panel_snapshot(served_site, chromium):
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(f"{served_site}/gallery/{EXECUTED}/")
        snapshot = page.frame_locator("iframe.tfplace-notebook").locator(".tfplace-snapshot").first
        snapshot.wait_for(state="visible", timeout=30_000)
        snapshot.scroll_into_view_if_needed()
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "docs-gallery.png"))
        snapshot.screenshot(path=str(SCREENSHOTS / "docs-gallery-snapshot.png"))
        box = snapshot.bounding_box()
        chips = snapshot.locator(".tfplace-snapshot-chip")
        bars = snapshot.locator("svg rect")
        rows = snapshot.locator("tbody tr")
        seen = (chips.count(), bars.count(), rows.count())
        title = page.title()
    finally:
        context.close()
    assert "Reading a real GPU trace" in title
    assert box is not None and box["width"] > 400 and box["height"] > 200, box
    assert seen[0] >= 2 and seen[1] >= 4 and seen[2] >= 10, seen  # chips, bars, rows
