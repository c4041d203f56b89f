"""One-time work of a server process done at start, in a background thread, not by the first page request: the
plotly classes and validators the charts use (plotly imports them lazily, ~0.25 s CPU), the bundled spec
library (35 YAML files) and the compiled page templates. Once per process; a failure is only logged (the first
request then pays as before)."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)
_started = threading.Event()


def warm_up() -> None:
    """Build an empty figure of every chart type and layout part the pages use, load the spec library and
    compile every template; the caches these fill are process-wide."""
    import plotly.graph_objects as go  # type: ignore[import-untyped]

    from perfmodel.specs import library
    from web.plotting import base_layout
    from web.templating import TEMPLATES_DIR, templates

    library()
    fig = go.Figure([go.Scatter(x=[1.0], y=[1.0]), go.Scattergl(x=[1.0], y=[1.0]), go.Bar(x=[1.0], y=[1.0]),
                     go.Heatmap(z=[[1.0]]), go.Sunburst(), go.Treemap(), go.Waterfall()])
    base_layout(fig, "warm-up", "x", "y", subtitle="warm-up")
    fig.update_layout(shapes=[{"type": "line", "x0": 0, "x1": 1, "y0": 0, "y1": 1}],
                      annotations=[{"text": "warm-up", "x": 0, "y": 0}])
    fig.to_json(validate=False, engine="orjson")
    for path in sorted(TEMPLATES_DIR.glob("*.html")):
        templates.env.get_template(path.name)


def _run() -> None:
    try:
        warm_up()
    except Exception:  # a warm-up that fails costs only the first request its time
        log.exception("dashboard warm-up failed")


def start_warm_up() -> None:
    """``warm_up`` in a daemon thread, the first time this process asks (later calls do nothing)."""
    if not _started.is_set():
        _started.set()
        threading.Thread(target=_run, name="perfmodel-dashboard-warm-up", daemon=True).start()
