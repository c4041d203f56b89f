"""The web dashboard, served by the same app as the API: server-rendered pages with plotly charts built in
Python, plotly.js served from the installed plotly package (no CDN, works offline)."""

from __future__ import annotations

from pathlib import Path

import plotly  # type: ignore[import-untyped]
from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from web.cache import ViewCache
from web.pages_analysis import router as analysis
from web.pages_hardware import router as hardware
from web.pages_models import router as models
from web.pages_tools import router as tools
from web.templating import STATIC_DIR
from web.warmup import start_warm_up

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def mount_dashboard(app: FastAPI) -> None:
    """Mount the pages (``/``, ``/hardware``, ``/compare``, ``/roofline``, ``/runs``, ``/upload``, ``/tiling``,
    ``/whatif``, ``/models``, ``/sweeps``), ``/ui/api/whatif`` and ``/static`` on ``app``; none of them is in the
    OpenAPI schema."""
    app.state.dashboard_cache = ViewCache()
    start_warm_up()  # plotly classes, spec library, templates: loaded by a thread, not by the first page request

    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly_js() -> FileResponse:
        return FileResponse(PLOTLY_JS, media_type="text/javascript",
                            headers={"Cache-Control": "public, max-age=86400, stale-while-revalidate=604800",
                                     "ETag": f'"plotly-{plotly.__version__}"'})

    for router in (analysis, hardware, tools, models):
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
