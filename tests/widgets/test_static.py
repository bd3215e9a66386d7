"""The browser's code as files (``tfplace_widget/_static/``): what the widgets send is the files.

Without ``ANYWIDGET_HMR`` a widget's ``_esm``/``_css`` is the file's text (anywidget keeps every
instance of a widget whose ``_esm`` is a path alive); with ``ANYWIDGET_HMR=1`` it is the path,
which anywidget reads, and re-sends when the file is saved.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import weakref

from tfplace_widget import _static as static
from tfplace_widget._widgets.bundle_holder import PlotlyBundle, bundle, fill_js
from tfplace_widget._widgets.findings import FindingsList
from tfplace_widget._widgets.table import OpTable
from tfplace_widget._widgets.timeline import TimelineWidget


def test_each_widget_sends_its_files():
    table, findings = OpTable(), FindingsList()
    try:
        assert table._esm == static.text("table.js")
        assert table._css.startswith(static.text("table.css"))
        assert table._css.endswith("\n" + static.text("chips.css"))  # after the colour rules
        assert findings._esm == static.text("findings.js")
        assert findings._css == static.text("findings.css")
    finally:
        table.close()
        findings.close()
    entry = static.text("bundle_entry.js")
    assert PlotlyBundle._esm == fill_js(entry + "\n" + static.text("holder.js"))
    timeline = fill_js(
        entry + "\n" + static.text("timeline.js"), digest=bundle().digest, wait_ms=60_000
    )
    assert TimelineWidget._esm == timeline
    assert "$DIGEST" not in timeline and json.dumps(bundle().digest) in timeline
    assert TimelineWidget._css == static.text("timeline.css")


def test_a_closed_widget_is_freed_without_hmr():
    table = OpTable()
    alive = weakref.ref(table)
    table.close()
    del table
    gc.collect()
    assert alive() is None, "a closed OpTable is still held (by an _esm file watch?)"


CHECK_HMR = """
import json, sys
from anywidget._file_contents import FileContents
from tfplace_widget._widgets.findings import FindingsList
from tfplace_widget._widgets.table import OpTable
from tfplace_widget._widgets.timeline import TimelineWidget
found = {}
for name, value in [("table_esm", OpTable._esm), ("findings_esm", FindingsList._esm),
                    ("findings_css", FindingsList._css), ("timeline_css", TimelineWidget._css)]:
    found[name] = [type(value).__name__, str(value)]
found["sent"] = FindingsList()._esm
print(json.dumps(found))
"""


def test_anywidget_hmr_gets_the_files_paths():
    env = {**os.environ, "ANYWIDGET_HMR": "1"}
    done = subprocess.run(
        [sys.executable, "-c", CHECK_HMR],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    files = {
        "table_esm": "table.js",
        "findings_esm": "findings.js",
        "findings_css": "findings.css",
        "timeline_css": "timeline.css",
    }
    for key, name in files.items():
        assert found[key] == ["FileContents", static.text(name)], key
    assert found["sent"] == static.text("findings.js")
