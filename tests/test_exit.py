"""A panel or comparison still open when Python exits leaves nothing on stderr."""

from __future__ import annotations

import subprocess
import sys

from conftest import GPU_TRACES

SCRIPT = """
from tfplace_widget import show_comparison, show_placement
panel = show_placement({path!r})
view = show_comparison({path!r}, {path!r})
"""


def test_open_panels_at_exit_print_no_traceback():
    path = str(GPU_TRACES / "riptide" / "timeline.ctf.json")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(path=path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr
