"""The FastAPI app factory: ``uvicorn --factory api.main:create_app`` (add ``--http
api.http_protocol:CombinedWritesProtocol`` for one socket write per small response; ``perfmodel serve`` does)."""

from __future__ import annotations

import gc
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from api.deps import READ_SCHEME
from api.limits import BodySizeLimit, ResponseHeaders
from api.response_cache import CachedResponses
from api.routers import advice as advice_router
from api.routers import calibrations, comparisons, graphs, hardware, jobs, predict, runs, schedules, trace_diffs, traces
from api.routers import training as training_router
from api.schemas import ErrorOut
from api.settings import Settings
from api.state import AppState, UnknownHardware
from perfmodel import __version__
from perfmodel.device_names import similar_ids
from perfmodel.ops import OpError
from perfmodel.search import gemm_kernel
from perfmodel.specs import SpecError, library
from perfmodel.store import NotFound, Store, StoreError
from perfmodel.store.errors import InvalidValue
from web import mount_dashboard
from web.api_docs import mount_api_docs
from web.stored_runs import start_reading

API_PREFIX = "/api/v1"


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the service: migrate the database, load the hardware library, mount the routers."""
    settings = settings or Settings()
    store = Store(settings.resolved_database_url())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store.migrate()
        library()  # parse the bundled hardware now, not on the first request
        # the compiled schedule kernels load in the background (~1-2 s of CPU; requests use numpy meanwhile)
        threading.Thread(target=gemm_kernel.load, name="perfmodel-jit-load", daemon=True).start()
        gc.freeze()  # long-lived objects leave the collector's scans (fewer pauses under load)
        gc.set_threshold(*settings.gc_thresholds)
        jobs = app.state.perfmodel.jobs
        jobs.start()  # jobs a previous process left queued or running are marked interrupted
        columns = start_reading(store)  # the stored runs' chart columns, read now, not by the first page
        try:
            yield
        finally:
            jobs.stop()
            columns.join(timeout=60)
            store.dispose()  # no pooled connection outlives the app (tests drop their databases after it)

    app = FastAPI(title="perfmodel", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Roofline performance model: predictions, schedule search, hardware, measured runs.")
    app.state.perfmodel = AppState(settings=settings, store=store)
    errors: dict[int | str, dict[str, Any]] = {
        code: {"model": ErrorOut, "description": text} for code, text in (
            (401, "missing or invalid bearer token"), (404, "unknown hardware or run"),
            (409, "conflict: the id exists or is a bundled device"), (413, "request body too large"),
            (422, "invalid input: the field and the reason"))}
    for module in (hardware, predict, schedules, runs, comparisons, calibrations, jobs, graphs, traces, trace_diffs,
                   training_router, advice_router):
        app.include_router(module.router, prefix=API_PREFIX, responses=errors)
    _errors(app)
    mount_dashboard(app)
    mount_api_docs(app)  # Swagger UI from the installed swagger-ui-bundle, offline

    @app.get(f"{API_PREFIX}/health", tags=["meta"])
    def health() -> dict[str, str]:
        return {"status": "ok", "model_version": __version__}

    app.add_middleware(CachedResponses, state=app.state.perfmodel, path=f"{API_PREFIX}/predict")
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes,
                       upload_limits={f"{API_PREFIX}{path}": settings.max_upload_bytes
                                      for path in ("/traces", *graphs.UPLOAD_PATHS)})
    app.add_middleware(ResponseHeaders, version=__version__)
    _document_access(app, settings)
    return app


# what FastAPI answers 400 (bytes that are not UTF-8 JSON, broken multipart); JSON text with a syntax error is
# the 422 that names the character (was described as a 400 too: a client keyed on it never saw one)
MALFORMED_BODY = ("malformed body: not UTF-8 text, or broken multipart form data (JSON with a syntax error is a 422 "
                  "naming the character)")


def _document_access(app: FastAPI, settings: Settings) -> None:
    """Make the OpenAPI say what the service does: a body that is not JSON or form data is a 400; writes (bearer
    security) can get 401 and the read-only 403; reads declare bearer security and 401 only when
    PERFMODEL_READ_REQUIRES_TOKEN=1."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}}
        for item in schema.get("paths", {}).values():
            for operation in item.values():
                responses = operation.setdefault("responses", {})
                if "requestBody" in operation:
                    responses["400"] = {"description": MALFORMED_BODY, **error}
                schemes = {name for requirement in operation.get("security", []) for name in requirement}
                if READ_SCHEME in schemes and settings.read_requires_token:
                    operation["security"] = [{"HTTPBearer": []}]
                elif schemes and READ_SCHEME not in schemes:
                    responses["403"] = {"description": "the service is read-only (PERFMODEL_READ_ONLY=1)", **error}
                else:
                    operation.pop("security", None)
                    responses.pop("401", None)
        schemes_defined = schema.get("components", {}).get("securitySchemes", {})
        read_scheme = schemes_defined.pop(READ_SCHEME, None)
        if read_scheme is not None:
            schemes_defined.setdefault("HTTPBearer", read_scheme)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


REQUEST_FIELDS = ("config", "model", "devices", "dims")  # GraphError nodes that are fields of a request body


def _errors(app: FastAPI) -> None:
    """Bad input is a 4xx naming the field and the reason, never a 500."""

    def reply(status: int, detail: str, field: str | None = None) -> JSONResponse:
        return JSONResponse({"detail": detail, "field": field, "model_version": __version__}, status_code=status)

    @app.exception_handler(UnknownHardware)
    async def unknown_hardware(_: Request, exc: UnknownHardware) -> JSONResponse:
        asked = str(exc.args[0])
        near = similar_ids(asked, library())
        hint = f"did you mean {', '.join(near)}? " if near else ""
        return reply(404, f"unknown hardware {asked!r}: {hint}GET {API_PREFIX}/hardware lists them", "hardware")

    @app.exception_handler(OpError)
    async def bad_op(_: Request, exc: OpError) -> JSONResponse:
        return reply(422, str(exc), f"op.{exc.field}")

    @app.exception_handler(SpecError)
    async def bad_spec(_: Request, exc: SpecError) -> JSONResponse:
        return reply(422, str(exc), exc.field)

    @app.exception_handler(NotFound)
    async def not_found(_: Request, exc: NotFound) -> JSONResponse:
        return reply(404, str(exc))

    @app.exception_handler(StoreError)
    async def conflict(_: Request, exc: StoreError) -> JSONResponse:
        return reply(409, str(exc))

    @app.exception_handler(InvalidValue)
    async def unstorable(_: Request, exc: InvalidValue) -> JSONResponse:
        """Bad input the store refused (a lone surrogate in a custom device's name): 422 naming the field."""
        return reply(422, str(exc), str(exc).split(":", 1)[0])

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        if first.get("type") == "json_invalid":  # its loc is ("body", character position), not a field
            position = [p for p in first.get("loc", ()) if isinstance(p, int)]
            at = f" at character {position[0]}" if position else ""
            ctx = first.get("ctx")
            why = ctx.get("error") if isinstance(ctx, dict) else None
            return reply(422, f"body: malformed JSON{at}" + (f" ({why})" if why else ""), "body")
        field = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or None
        return reply(422, f"{field or 'body'}: {first.get('msg')}", field)

    @app.exception_handler(ValueError)
    async def value_error(_: Request, exc: ValueError) -> JSONResponse:
        node = getattr(exc, "node", None)  # a GraphError about a request field (not a graph node) names it
        return reply(422, str(exc), node if node in REQUEST_FIELDS else None)
