"""The REST API's interactive docs, ``/docs`` (Swagger UI 5) and ``/redoc`` (Redoc 2), served from the assets
the installed ``fastapi-offline`` package ships, under ``/docs-assets``: no CDN, so both pages work offline, and
under the dashboard's Content-Security-Policy (``script-src 'self'``: the initialiser is the static file
``web/static/api-docs.js``, no inline script)."""

from __future__ import annotations

from html import escape
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
ASSETS_PREFIX = "/docs-assets"
INIT_JS = "/static/api-docs.js"


def docs_page(title: str, openapi_url: str, redoc: bool = False) -> str:
    """Swagger UI's page (or Redoc's): the bundle's CSS and JS, then the initialiser, all from this server."""
    if redoc:
        head, root, bundle = "", "redoc", "redoc.standalone.js"
    else:
        head = f'<link rel="stylesheet" href="{ASSETS_PREFIX}/swagger-ui.css">\n'
        root, bundle = "swagger-ui", "swagger-ui-bundle.js"
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)} – REST API</title>
{head}<link rel="icon" type="image/png" href="{ASSETS_PREFIX}/favicon.png">
</head>
<body>
<div id="{root}" data-openapi-url="{escape(openapi_url)}"></div>
<script src="{ASSETS_PREFIX}/{bundle}"></script>
<script src="{INIT_JS}"></script>
</body>
</html>
"""


def mount_api_docs(app: FastAPI) -> None:
    """``/docs``, ``/redoc`` and their assets, on an app built with ``docs_url=None, redoc_url=None``; none of
    them is in the OpenAPI schema."""
    openapi_url = app.openapi_url or "/openapi.json"
    swagger_html, redoc_html = (docs_page(app.title, openapi_url, redoc) for redoc in (False, True))

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return HTMLResponse(swagger_html)

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return HTMLResponse(redoc_html)

    app.mount(ASSETS_PREFIX, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
