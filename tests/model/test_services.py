"""``PlacementTrace``'s findings, save, load, exports and readers go through the port
``model.services`` (the model imports nothing above it), which importing the package fills in."""

from __future__ import annotations

import pytest
from helpers import GPU_TRACES

import tfplace_widget
from tfplace_widget import PlacementTrace
from tfplace_widget._model import services

CHROME_TRACE = next(GPU_TRACES.glob("*/*.json"))


def test_importing_the_package_installs_its_services():
    assert services.services() is tfplace_widget._services


def test_a_method_called_without_services_says_what_is_missing(monkeypatch, tmp_path):
    trace = PlacementTrace.from_chrome_trace(CHROME_TRACE)
    saved = trace.save(tmp_path / "t.tfplace")
    monkeypatch.setattr(services, "_installed", None)
    calls = {
        "findings": lambda: trace.findings,
        "save": lambda: trace.save(tmp_path / "u.tfplace"),
        "load": lambda: PlacementTrace.load(saved),
        "to_frames": trace.to_frames,
        "from_chrome_trace": lambda: PlacementTrace.from_chrome_trace(CHROME_TRACE),
    }
    for name, call in calls.items():
        with pytest.raises(RuntimeError, match=r"not installed: import tfplace_widget") as error:
            call()
        assert "tfplace_widget._services" in str(error.value), name
    assert not (tmp_path / "u.tfplace").exists()
