"""ipywidgets and anywidget only: the panel (layout, ``panel_state``, ``panel_actions``), the
comparison view, the op table, the timeline, chips, findings, the plotly.js holder; their
JavaScript and CSS are files in ``tfplace_widget/_static/``."""
