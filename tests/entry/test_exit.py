"""A panel or comparison still open when Python exits leaves nothing on stderr."""

from __future__ import annotations

import pytest
from helpers import GPU_TRACES, run_python

# Processes, sockets, signals and files, not where TensorFlow puts an op: CI runs them once,
# with oneDNN's default (.ci/run's oneDNN-off run leaves out the lifecycle marker).
pytestmark = pytest.mark.lifecycle

SCRIPT = """
from tfplace_widget import show_comparison, show_placement
panel = show_placement({path!r})
view = show_comparison({path!r}, {path!r})
"""


def test_open_panels_at_exit_print_no_traceback():
    path = str(GPU_TRACES / "riptide" / "timeline.ctf.json")
    done = run_python(SCRIPT.format(path=path))
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr


def test_findings_of_a_loaded_trace_keep_tensorflows_start_up_lines_off_stderr(seed_cpu, tmp_path):
    """The first TensorFlow import in a process prints C++ start-up lines; the analyses import
    it through capture.import_tensorflow, so they land in no cell (here: not on stderr)."""
    path = tmp_path / "seed.tfplace"
    seed_cpu.save(path)
    script = (
        "from tfplace_widget import PlacementTrace, predict_placement\n"
        f"trace = PlacementTrace.load({str(path)!r})\n"
        "trace.__dict__.pop('_findings_cache', None)\n"
        "from tfplace_widget._analyses.findings import find_findings\n"
        "find_findings(trace)\n"
        "predict_placement(trace, gpus=1)\n"
        "import sys; assert 'tensorflow' in sys.modules\n"
    )
    done = run_python(script)
    assert "oneDNN" not in done.stderr and "cpu_feature_guard" not in done.stderr, done.stderr
