"""The ``.tfplace`` format: one place for everything about a saved trace file.

- ``layout``: what the file holds (its members, manifest, version) and the names the reader and
  the writer share;
- ``reader``: ``read(path)``, a file's parts checked and upgraded (``PlacementTrace.load`` builds
  the trace from them), and ``is_archive``;
- ``writer``: ``save(trace, path, ...)`` (``trace.save``);
- ``schema``: the columns and dtypes a file's frames must have (the names from
  ``model.columns``);
- ``frame_json``, ``facts_json``: the JSON codecs of the frames and of ``trace.facts``;
- ``upgrades``: files written by older versions, read as a trace made now;
- ``limits``: the bounds on an archive as a whole (each member's are ``sources.limits``).

It does not import ``model.trace``: the trace is handed in (``writer.Savable``) and built by
its caller, so that ``PlacementTrace.save``/``load`` delegate here without a cycle.
"""
