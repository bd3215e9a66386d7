"""A TF2 trace whose process is killed (SIGKILL) leaves its profile folder behind; the next
trace removes it, and nothing that is not such a folder of a dead process (issue 31, Low).
Real TensorFlow, in processes of their own bounded in time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tfplace_widget

# Processes, sockets, signals and files, not where TensorFlow puts an op: CI runs them once,
# with oneDNN's default (.ci/run's oneDNN-off run leaves out the lifecycle marker).
pytestmark = pytest.mark.lifecycle

CHECKOUT = Path(tfplace_widget.__file__).resolve().parents[1]  # the package under test

KILLED = r"""
import os, sys, time
import tensorflow as tf
from tfplace_widget import trace_placement

def step(x):
    open(sys.argv[1], "w").close()  # the trace is running: its profile folder exists
    time.sleep(120)
    return x * 2.0

trace_placement(step, tf.constant(1.0), mode="function")
"""

NEXT = r"""
import tensorflow as tf
from tfplace_widget import trace_placement

assert len(trace_placement(tf.function(lambda x: x + 1.0), tf.constant(1.0)).ops)
"""


def _python(code: str, *args: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, cwd=CHECKOUT)


def test_a_killed_traces_profile_folder_is_removed_by_the_next_trace(tmp_path):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {**os.environ, "TMPDIR": str(temporary), "PYTHONPATH": str(CHECKOUT)}
    started = tmp_path / "started"
    killed = _python(KILLED, str(started), env=env)
    try:
        deadline = time.monotonic() + 120
        while not started.exists():
            assert killed.poll() is None and time.monotonic() < deadline, "the trace never ran"
            time.sleep(0.05)
        left = [p.name for p in temporary.iterdir() if p.name.startswith("tfplace-profile-")]
        assert left, list(temporary.iterdir())
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait(30)
    # Not ours to remove: a folder of a live process, a file, and another program's folder.
    mine = temporary / f"tfplace-profile-{os.getpid()}-abc"
    others = [mine, temporary / "tfplace-profile-notes", temporary / "tfplace-profile-1x"]
    for path in others:
        path.mkdir()
    (temporary / "tfplace-profile-2-file").write_text("")
    after = _python(NEXT, env=env)
    assert after.wait(120) == 0
    kept = sorted(p.name for p in temporary.iterdir() if p.name.startswith("tfplace-profile-"))
    assert kept == sorted([*(p.name for p in others), "tfplace-profile-2-file"])


def test_remove_stale_takes_only_folders_of_dead_processes(tmp_path):
    from tfplace_widget._tracing.profile_dir import remove_stale

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    pid = int(dead.stdout)
    gone = tmp_path / f"tfplace-profile-{pid}-x1y2"
    gone.mkdir()
    (gone / "plugins").mkdir()
    (tmp_path / "target").mkdir()
    (tmp_path / f"tfplace-profile-{pid}-link").symlink_to(tmp_path / "target")
    living = tmp_path / f"tfplace-profile-{os.getppid()}-a"
    living.mkdir()
    assert remove_stale(str(tmp_path)) == [str(gone)]
    assert (tmp_path / "target").is_dir() and living.is_dir()
