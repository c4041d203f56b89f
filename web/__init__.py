"""Web dashboard (plotly). Filled in by the dashboard issue."""
