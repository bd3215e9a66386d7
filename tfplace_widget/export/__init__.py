"""Writing a :class:`~tfplace_widget.model.trace.PlacementTrace` out, and reading it back.

Pure data code, no widget import:

- ``archive``: ``trace.save(path)`` / ``PlacementTrace.load(path)``, one ``.tfplace`` file (a
  zip of JSON documents and the raw protos) that keeps everything the panel shows;
- ``chrome``: ``trace.to_chrome_trace(path)``, trace-event JSON for Perfetto UI and
  chrome://tracing;
- ``tables``: ``trace.to_frames()``, ``to_csv(folder)`` and ``to_parquet(folder)``.
"""

from .output import TraceWriteError

__all__ = ["TraceWriteError"]
