"""``./dev demo`` as a new user meets it: JupyterLab opens notebook 01 with no "get notified about
official Jupyter news?" toast over it, and what the user saves goes to a copy, leaving the
clone's ``notebooks/`` as they were (``git status`` clean).

The script runs as it is in a temporary clone (its ``dev`` and ``notebooks/``, ``.venv`` pointing
at this interpreter's environment) with JupyterLab's default settings, minus its install step:
this test runs in an environment that has everything.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .conftest import (
    ARTIFACTS,
    REPO,
    SCREENSHOTS,
    LabServer,
    _free_port,
    _isolated_jupyter_env,
    _stop,
    _wait_until_up,
)

NOTEBOOK = "notebooks/01_seed_experiment.ipynb"
TOAST_WAIT_S = 4.0  # the announcements plugin asks as soon as the app is restored (under 1 s)
SAVE_WAIT_S = 15.0


def _clone_without_install(clone: Path) -> None:
    script = (REPO / "dev").read_text()
    demo = script.replace("demo() {\n  ensure_python\n", "demo() {\n", 1)
    assert demo != script, "dev's demo() no longer starts with ensure_python: update this test"
    (clone / "dev").write_text(demo)
    (clone / "dev").chmod(0o755)
    shutil.copytree(
        REPO / "notebooks", clone / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints")
    )
    (clone / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)


def test_the_demo_shows_no_news_toast_and_saves_to_a_copy(tmp_path, chromium):
    clone = tmp_path / "clone"
    clone.mkdir()
    _clone_without_install(clone)
    tracked, listed = (clone / NOTEBOOK).read_bytes(), sorted(os.listdir(clone / "notebooks"))
    env = _isolated_jupyter_env(tmp_path / "jupyter", quiet=False)
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    port, token = _free_port(), secrets.token_hex(24)
    log_path = ARTIFACTS / "jupyter-demo-server.log"
    ARTIFACTS.mkdir(exist_ok=True)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(clone / "dev"), "demo", f"--port={port}", f"--ServerApp.token={token}"]
            + ["--ServerApp.port_retries=0"],
            cwd=clone,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = LabServer(clone / ".demo", port, token, process, log_path)
    try:
        _wait_until_up(server)
        context = chromium.new_context(viewport={"width": 1400, "height": 1000})
        try:
            page = context.new_page()
            page.goto(server.url(""))  # the URL the demo prints: its default_url, notebook 01
            page.locator(".jp-Notebook").first.wait_for(timeout=60_000)
            assert page.url.split("?")[0].endswith("/lab/tree/" + NOTEBOOK), page.url
            page.wait_for_timeout(TOAST_WAIT_S * 1000)
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "demo-opened.png"))
            toasts = page.locator(".Toastify__toast").all_inner_texts()
            assert toasts == [], f"a toast covers the notebook: {toasts}"
            copy = clone / ".demo" / NOTEBOOK
            saved_before = copy.stat().st_mtime_ns
            page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
            page.keyboard.press("Control+s")
            deadline = time.monotonic() + SAVE_WAIT_S
            while copy.stat().st_mtime_ns == saved_before and time.monotonic() < deadline:
                time.sleep(0.2)
            assert copy.stat().st_mtime_ns != saved_before, "the save went elsewhere"
        finally:
            context.close()
    finally:
        _stop(process)
    assert (clone / NOTEBOOK).read_bytes() == tracked, "the demo wrote into the tracked notebook"
    assert sorted(os.listdir(clone / "notebooks")) == listed  # no checkpoints, no saved files
