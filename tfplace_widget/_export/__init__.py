"""Writing a :class:`~tfplace_widget._model.trace.PlacementTrace` out for other tools (a
``.tfplace`` file, ``trace.save``, is ``tfplace_format``'s).

Pure data code, no widget import:

- ``chrome_trace``: ``trace.to_chrome_trace(path)``, trace-event JSON for Perfetto UI and
  chrome://tracing;
- ``tables``: ``trace.to_frames()``, ``to_csv(folder)`` and ``to_parquet(folder)``;
- ``html``: ``trace.to_html(path)``, the static report.
"""
