"""Writing a :class:`~tfplace_widget.model.trace.PlacementTrace` out (reading is ``sources``).

Pure data code, no widget import:

- ``archive``: ``trace.save(path)``, one ``.tfplace`` file (a zip of JSON documents and the raw
  protos) that keeps everything the panel shows (``sources.tfplace`` reads it back);
- ``chrome_trace``: ``trace.to_chrome_trace(path)``, trace-event JSON for Perfetto UI and
  chrome://tracing;
- ``tables``: ``trace.to_frames()``, ``to_csv(folder)`` and ``to_parquet(folder)``;
- ``html``: ``trace.to_html(path)``, the static report.
"""

from .output import TraceWriteError

__all__ = ["TraceWriteError"]
