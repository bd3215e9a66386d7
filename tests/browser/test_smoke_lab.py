"""Smoke test of the browser harness: JupyterLab and Notebook 7 render ipywidgets and prints in
headless Chromium (the ``frontend`` fixture runs it in each).

If this fails, every other browser test in that frontend will too: look here first.
"""

from __future__ import annotations

import nbformat
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def test_lab_runs_a_notebook_and_renders_a_widget(frontend):
    lab = frontend
    folder = lab.server.root / "smoke"
    folder.mkdir(exist_ok=True)
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    notebook.cells = [
        nbformat.v4.new_code_cell(
            'import ipywidgets as widgets\nwidgets.Button(description="hello")'
        ),
        nbformat.v4.new_code_cell("print(1 + 1)"),
    ]
    nbformat.write(notebook, folder / "smoke.ipynb")

    lab.open_notebook("smoke/smoke.ipynb")
    lab.run_all_cells()

    button = lab.page.locator(".jupyter-widgets.widget-button", has_text="hello")
    button.wait_for(state="visible", timeout=30_000)
    assert button.count() == 1
    outputs = lab.cell_outputs()
    assert outputs[1] == "2", outputs
    assert lab.errors() == []
    path = lab.screenshot(f"smoke_{lab.server.app}")  # smoke_lab.png, smoke_notebook7.png
    assert path.stat().st_size > 10_000
