"""What the panel, the HTML report and the CLI all show, without widgets: device colours, the
panel's HTML parts and the static snapshot, the timeline figure, search, the text report, and the
one array encoder for plotly.js."""
