"""Where plotly's Python package keeps plotly.js, found without importing plotly or any widget
library: the kernel's holder sends that file, and the HTML report embeds it."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def plotly_js_path() -> Path:
    """``plotly/package_data/plotly.min.js`` (the file plotly's own HTML export embeds)."""
    spec = importlib.util.find_spec("plotly")
    folders = list(spec.submodule_search_locations or []) if spec else []
    folder = Path(folders[0]) if folders else Path("plotly-is-not-installed")
    return folder / "package_data" / "plotly.min.js"
