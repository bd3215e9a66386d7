"""End-to-end harness: a real JupyterLab server, driven in Debian's headless Chromium by Playwright.

Fixtures
- ``jupyter_lab`` (session): a JupyterLab server on a free localhost port with a random token,
  serving a temporary copy of ``notebooks/`` (as ``<root>/notebooks``), with its own Jupyter
  config, data, settings and workspace folders and nothing that calls out to the network.
  Write extra notebooks into ``jupyter_lab.root``. Always stopped at the end of the session.
- ``chromium`` (session): Debian's ``/usr/bin/chromium``, headless, through Playwright's sync API.
- ``lab`` (per test): a fresh 1400x1000 page with helpers: ``lab.open_notebook(path)``,
  ``lab.run_all_cells()``, ``lab.wait_for_kernel_idle()``, ``lab.cell_outputs()``,
  ``lab.screenshot(name)`` (into ``artifacts/screenshots/``). A failing test leaves
  ``artifacts/screenshots/FAILED-<test>.png`` behind.
- ``jupyter_notebook7`` (session) and ``notebook7`` (per test): the same for Notebook 7 (the
  ``jupyter notebook`` app, ``/notebooks/<path>`` pages, an empty root), with ``NotebookPage``,
  ``LabPage``'s helpers for Notebook's page. Its server log is
  ``artifacts/jupyter-notebook7-server.log``.
- ``frontend`` (per test, parametrized ``[lab]``, ``[notebook7]``): the test's page in each
  supported frontend; ``frontend.server.root`` is where its notebooks go.

Every wait is bounded. Tests here get the ``browser`` marker; they are skipped only when
``/usr/bin/chromium`` is missing outside CI (``./dev test`` installs it; in CI they always run).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
# A %%tfplace cell (the seed experiment's C on /cpu:1, A and B left to the placer), shared by the
# browser tests that need a panel made by the magic.
MAGIC_PANEL_CELL = """%%tfplace --cpus 2
import tensorflow as tf
a = tf.ones((1000,), name="A")
b = tf.ones((1000,), name="B")
with tf.device("/cpu:1"):
    c = tf.add(a, b, name="C")
c"""
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]
VIEWPORT = {"width": 1400, "height": 1000}
SERVER_START_TIMEOUT_S = 60
SERVER_STOP_TIMEOUT_S = 15
PAGE_TIMEOUT_MS = 30_000
KERNEL_TIMEOUT_S = 120
HERE = Path(__file__).resolve().parent
IN_CI = os.environ.get("CI", "").lower() not in ("", "0", "false", "no")

# The notebook shown in the main area, and its kernel status as drawn in its toolbar.
_NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden)"
_STATUS = f"{_NOTEBOOK} .jp-Notebook-ExecutionIndicator"
_PROMPTS_JS = f"""() => Array.from(
    document.querySelectorAll('{_NOTEBOOK} .jp-CodeCell .jp-InputArea-prompt'),
    (e) => e.textContent.trim())"""


# -------------------------------------------------------------------------------------------
# Marker and skip
# -------------------------------------------------------------------------------------------
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = None
    missing = [
        name for name in ("playwright", "jupyterlab") if importlib.util.find_spec(name) is None
    ]
    if missing and not IN_CI:
        skip = pytest.mark.skip(
            reason=f"{' and '.join(missing)} not installed: install the `browser` extra "
            '(pip install -e ".[browser]") or run `./dev test`; in CI these tests never skip.'
        )
    elif not CHROMIUM.exists() and not IN_CI:
        skip = pytest.mark.skip(
            reason=f"Debian's chromium is not installed at {CHROMIUM}: run `./dev test`, which "
            "installs it (apt-get install chromium); in CI these tests never skip."
        )
    for item in items:
        if HERE not in Path(str(item.path)).resolve().parents:
            continue
        item.add_marker(pytest.mark.browser)
        if skip is not None:
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    report = yield
    setattr(item, f"_report_{report.when}", report)  # read by the ``lab`` fixture's teardown
    return report


# -------------------------------------------------------------------------------------------
# JupyterLab server
# -------------------------------------------------------------------------------------------
@dataclass
class LabServer:
    """A running JupyterLab server; ``root`` is the folder it serves (a temporary copy)."""

    root: Path
    port: int
    token: str
    process: subprocess.Popen
    log_path: Path
    app: str = "lab"  # a key of FRONTEND_APPS

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "lab") -> str:
        """``http://127.0.0.1:PORT/<path>?token=...`` (``path`` is URL-quoted)."""
        sep = "&" if "?" in path else "?"
        return f"{self.base_url}/{quote(path.lstrip('/'), safe='/?=&')}{sep}token={self.token}"

    def notebook_url(self, path: str | os.PathLike, workspace: str | None = None) -> str:
        """The URL that opens ``path`` (relative to ``root``, or absolute inside it): in Lab, in
        ``workspace`` when given (a workspace reopens only the notebooks opened in it), or in
        Notebook 7 (``/notebooks/<path>``) on a Notebook 7 server."""
        if self.app == "notebook7":
            return self.url(f"notebooks/{self.relative(path)}")
        lab = f"lab/workspaces/{workspace}" if workspace else "lab"
        return self.url(f"{lab}/tree/{self.relative(path)}")

    def relative(self, path: str | os.PathLike) -> str:
        p = Path(path)
        if p.is_absolute():
            p = p.resolve().relative_to(self.root)
        return p.as_posix()

    def api(self, path: str, timeout_s: float = 5, method: str = "GET") -> dict | list | None:
        """``method`` ``/api/<path>`` with the token; the decoded JSON (None for no content)."""
        request = urllib.request.Request(
            f"{self.base_url}/api/{path.lstrip('/')}",
            headers={"Authorization": f"token {self.token}"},
            method=method,
        )
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shut_down_sessions_except(self, kernels: set[str]) -> None:
        """Shut down every session (and its kernel) whose kernel is not in ``kernels``."""
        for session in self.api("sessions") or []:
            if session["kernel"]["id"] not in kernels:
                with contextlib.suppress(urllib.error.URLError, OSError):
                    self.api(f"sessions/{session['id']}", timeout_s=30, method="DELETE")

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _isolated_jupyter_env(base: Path, quiet: bool = True) -> dict[str, str]:
    """Environment for the server and its kernels: own Jupyter/IPython dirs, this checkout first
    on PYTHONPATH (kernels import this tfplace_widget), and (``quiet``) Lab settings that keep
    popups away; without them, Lab's settings are its defaults, as for a new user."""
    dirs = {
        "JUPYTER_CONFIG_DIR": base / "config",
        "JUPYTER_DATA_DIR": base / "data",
        "JUPYTER_RUNTIME_DIR": base / "runtime",
        "JUPYTERLAB_SETTINGS_DIR": base / "lab-settings",
        "JUPYTERLAB_WORKSPACES_DIR": base / "lab-workspaces",
        "IPYTHONDIR": base / "ipython",
    }
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    if quiet:
        notification = dirs["JUPYTERLAB_SETTINGS_DIR"] / "@jupyterlab" / "apputils-extension"
        notification.mkdir(parents=True)
        (notification / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False})
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "IPYTHON"))}
    env.update({k: str(v) for k, v in dirs.items()})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def write_notebook(path: Path, cells: list[str]) -> Path:
    """Write a Python 3 notebook of code ``cells`` to ``path`` (a test or benchmark input)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="session")
def jupyter_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    base = tmp_path_factory.mktemp("jupyter")
    root = base / "root"
    root.mkdir()
    if (REPO / "notebooks").is_dir():
        shutil.copytree(
            REPO / "notebooks",
            root / "notebooks",
            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"),
        )
    ARTIFACTS.mkdir(exist_ok=True)
    with running_lab(base, root, ARTIFACTS / "jupyter-lab-server.log") as server:
        yield server


# The frontends the tests drive: the module ``python -m`` starts, and its app's config class
# (``expose_app_in_browser`` puts ``window.jupyterapp`` in the page for the helpers).
FRONTEND_APPS = {"lab": ("jupyterlab", "LabApp"), "notebook7": ("notebook", "JupyterNotebookApp")}


@contextlib.contextmanager
def running_lab(base: Path, root: Path, log_path: Path, app: str = "lab") -> Iterator[LabServer]:
    """Start JupyterLab (or, with ``app="notebook7"``, Notebook 7: the same server with Notebook's
    pages, loading JupyterLab's server extension too) serving ``root``, with its own config under
    ``base``; always stop it."""
    module, app_class = FRONTEND_APPS[app]
    port, token = _free_port(), secrets.token_hex(24)
    command = [
        sys.executable,
        "-m",
        module,
        "--no-browser",
        "--allow-root",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.token={token}",
        f"--ServerApp.root_dir={root}",
        # Nothing leaves the machine: no news feed, no update check, no PyPI extension manager.
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
        # window.jupyterapp: lets helpers read state the page does not draw.
        f"--{app_class}.expose_app_in_browser=True",
    ]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            cwd=root,
            env=_isolated_jupyter_env(base),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = LabServer(root, port, token, process, log_path, app)
    try:
        _wait_until_up(server)
        yield server
    finally:
        _stop(process)


def _wait_until_up(server: LabServer) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(
                f"JupyterLab exited with code {server.process.returncode} before answering.\n"
                f"Its log ({server.log_path}):\n{server.log_tail()}"
            )
        try:
            server.api("status", timeout_s=2)
            return
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last_error = exc
            time.sleep(0.25)
    pytest.fail(
        f"JupyterLab did not answer /api/status within {SERVER_START_TIMEOUT_S} s "
        f"(last error: {last_error}).\nIts log ({server.log_path}):\n{server.log_tail()}"
    )


def _stop(process: subprocess.Popen) -> None:
    """Terminate the server (it shuts its kernels down), then kill it and any leftover kernel."""
    import psutil

    try:
        children = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        children = []
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(SERVER_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.kill()


# -------------------------------------------------------------------------------------------
# Chromium and the page helpers
# -------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def chromium() -> Iterator:
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `./dev test` installs Debian's chromium.")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS, timeout=60_000
        )
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class LabPage:
    """A Playwright page on the ``jupyter_lab`` server, with the steps a user takes."""

    page: object  # playwright.sync_api.Page
    server: LabServer
    console_errors: list[str] = field(default_factory=list)
    # This test's own Lab workspace: a reload restores this test's notebooks only, not every
    # notebook earlier tests left open (their kernels and widgets all restoring at once).
    workspace: str = field(default_factory=lambda: f"test-{secrets.token_hex(4)}")

    def open_notebook(self, path: str | os.PathLike, timeout_s: float = KERNEL_TIMEOUT_S) -> None:
        """Open a notebook (path relative to the server root) and wait for its kernel to be idle."""
        name = Path(self.server.relative(path)).name
        self.page.goto(self.server.notebook_url(path, self.workspace), timeout=PAGE_TIMEOUT_MS * 2)
        tab = self.page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")
        tab.filter(has_text=name).wait_for(timeout=PAGE_TIMEOUT_MS * 2)
        self.page.locator(f"{_NOTEBOOK} .jp-Cell").first.wait_for(timeout=PAGE_TIMEOUT_MS)
        self._accept_kernel_dialog()
        self.wait_for_kernel_idle(timeout_s)

    def _accept_kernel_dialog(self) -> None:
        """A notebook without kernel metadata asks which kernel to start: take the default."""
        dialog = self.page.locator(".jp-Dialog")
        with contextlib.suppress(Exception):
            dialog.wait_for(timeout=1_000)
            if "kernel" in dialog.inner_text(timeout=1_000).lower():
                dialog.locator(".jp-mod-accept").click(timeout=5_000)

    def run_all_cells(self, timeout_s: float = KERNEL_TIMEOUT_S) -> None:
        """Run > Run All Cells from the menu bar, then wait until every cell has finished."""
        before = self.page.evaluate(_PROMPTS_JS)
        self.page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
        label = self.page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$"))
        self.page.locator(".lm-Menu-item:not(.lm-mod-disabled)", has=label).click()
        # Started: some prompt changed ("[ ]:" -> "[*]:" or a new count).
        self.page.wait_for_function(
            f"(before) => JSON.stringify(({_PROMPTS_JS})()) !== JSON.stringify(before)",
            arg=before,
            timeout=PAGE_TIMEOUT_MS,
        )
        self.wait_for_kernel_idle(timeout_s)

    def wait_for_kernel_idle(self, timeout_s: float = KERNEL_TIMEOUT_S) -> None:
        """Wait until the notebook's kernel reports idle and no cell shows ``[*]``."""
        self.page.wait_for_function(
            f"""() => {{
                const status = document.querySelector('{_STATUS}');
                const prompts = ({_PROMPTS_JS})();
                return status !== null && status.dataset.status === 'idle'
                    && !prompts.some((p) => p.includes('*'));
            }}""",
            timeout=timeout_s * 1000,
            polling=250,
        )

    def cell_outputs(self) -> list[str]:
        """The text of each cell's output area, in order ("" for a cell without output)."""
        return self.page.evaluate(
            f"""() => Array.from(document.querySelectorAll('{_NOTEBOOK} .jp-Cell'), (cell) => {{
                const out = cell.querySelector('.jp-OutputArea');
                return out ? out.innerText.trim() : '';
            }})"""
        )

    def errors(self) -> list[str]:
        """Text of the stderr outputs in the notebook: tracebacks, warnings, native logs."""
        return self.page.locator(
            f'{_NOTEBOOK} .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
        ).all_inner_texts()

    def screenshot(self, name: str, **options) -> Path:
        """Save a PNG of the page into ``artifacts/screenshots/<name>.png``; return its path."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
        self.page.screenshot(path=str(path), **options)
        return path


@pytest.fixture
def lab(jupyter_lab: LabServer, chromium, request: pytest.FixtureRequest) -> Iterator[LabPage]:
    with _helper_page(chromium, LabPage, jupyter_lab, request) as helper:
        yield helper


def _write_failure_notes(name: str, helper: LabPage) -> None:
    """``artifacts/FAILED-<test>.txt``: the page's console errors and the server log's tail,
    whole (the assertion's repr of the page cuts them short)."""
    ARTIFACTS.mkdir(exist_ok=True)
    text = "\n".join(
        [
            "console errors:",
            *helper.console_errors,
            "",
            "server log (tail):",
            helper.server.log_tail(200),
        ]
    )
    path = ARTIFACTS / f"FAILED-{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.txt"
    path.write_text(text, errors="replace")
    print(f"\n{path}:\n{text[-6000:]}")


# -------------------------------------------------------------------------------------------
# Notebook 7: the same server with Notebook's pages, and a page helper for them
# -------------------------------------------------------------------------------------------
# The kernel of the notebook on the page, from the app (the toolbar's execution indicator says
# "idle" while there is no kernel yet, and Run All then asks for one).
_NB7_KERNEL_STATUS_JS = """() => {
    const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const kernel = panel && panel.sessionContext && panel.sessionContext.session
        && panel.sessionContext.session.kernel;
    return kernel ? kernel.status + '/' + kernel.connectionStatus : null;
}"""


@pytest.fixture(scope="session")
def jupyter_notebook7(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """A Notebook 7 server (``jupyter notebook``) on a free localhost port with a random token,
    with its own Jupyter dirs, serving an empty temporary folder (``.root``: tests write their
    notebooks there); always stopped at the end of the session. Without the ``notebook``
    package (an older ``browser`` extra) its tests skip, saying so, except in CI."""
    if importlib.util.find_spec("notebook") is None and not IN_CI:
        pytest.skip('notebook (Notebook 7) not installed: pip install -e ".[browser]"')
    base = tmp_path_factory.mktemp("notebook7")
    root = base / "root"
    root.mkdir()
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / "jupyter-notebook7-server.log"
    with running_lab(base, root, log_path, app="notebook7") as server:
        yield server


class NotebookPage(LabPage):
    """``LabPage`` for Notebook 7's notebook page (``/notebooks/<path>``): one notebook per page,
    no dock tabs (its name is the page header's ``#jp-title``). Cells, outputs, the toolbar's
    execution indicator and the Run menu are JupyterLab's, so the other helpers are inherited."""

    def open_notebook(self, path: str | os.PathLike, timeout_s: float = KERNEL_TIMEOUT_S) -> None:
        """Open a notebook and wait until its kernel has started and is idle."""
        name = Path(self.server.relative(path)).name
        self.page.goto(self.server.notebook_url(path), timeout=PAGE_TIMEOUT_MS * 2)
        title = self.page.locator("#jp-title")
        title.filter(has_text=Path(name).stem).wait_for(timeout=PAGE_TIMEOUT_MS * 2)
        self.page.locator(f"{_NOTEBOOK} .jp-Cell").first.wait_for(timeout=PAGE_TIMEOUT_MS)
        self._accept_kernel_dialog()
        self.wait_for_kernel_idle(timeout_s)

    def wait_for_kernel_idle(self, timeout_s: float = KERNEL_TIMEOUT_S) -> None:
        """Wait until the page's kernel exists, is connected and idle, and ``LabPage``'s own
        check (indicator idle, no ``[*]``) holds."""
        self.page.wait_for_function(
            f"() => ({_NB7_KERNEL_STATUS_JS})() === 'idle/connected'",
            timeout=timeout_s * 1000,
            polling=250,
        )
        super().wait_for_kernel_idle(timeout_s)


@pytest.fixture
def notebook7(
    jupyter_notebook7: LabServer, chromium, request: pytest.FixtureRequest
) -> Iterator[NotebookPage]:
    """A fresh 1400x1000 page on the Notebook 7 server, with ``LabPage``'s helpers; a failing
    test leaves ``artifacts/screenshots/FAILED-<test>.png``."""
    with _helper_page(chromium, NotebookPage, jupyter_notebook7, request) as helper:
        yield helper


@contextlib.contextmanager
def _helper_page(chromium, cls: type[LabPage], server: LabServer, request) -> Iterator[LabPage]:
    """A new browser context and page wrapped in ``cls``, collecting console errors; closed
    after the test (a failed one leaves a screenshot and its console and server log in
    ``artifacts/``), and the kernels the test started shut down."""
    context = chromium.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    helper = cls(page, server)
    page.on("pageerror", lambda exc: helper.console_errors.append(str(exc)))
    page.on(
        "console",
        lambda msg: helper.console_errors.append(msg.text) if msg.type == "error" else None,
    )
    kernels_before = {kernel["id"] for kernel in server.api("kernels") or []}
    try:
        yield helper
    finally:
        report = getattr(request.node, "_report_call", None)
        if report is not None and report.failed:
            with contextlib.suppress(Exception):
                helper.screenshot(f"FAILED-{request.node.name}")
            _write_failure_notes(request.node.name, helper)
        context.close()
        # Nothing a test starts outlives it: its kernels (TensorFlow and panels each) go.
        server.shut_down_sessions_except(kernels_before)


@pytest.fixture(params=["lab", "notebook7"])
def frontend(request: pytest.FixtureRequest) -> LabPage:
    """The test's page in each supported frontend: the ``lab`` page in JupyterLab, then the
    ``notebook7`` page in Notebook 7 (write notebooks into ``frontend.server.root``)."""
    return request.getfixturevalue(request.param)
