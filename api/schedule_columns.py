"""The fast path of POST /schedules/rank: a body of candidate objects straight into columns.

10,000 candidate objects through pydantic (one TypedDict each) cost more server CPU than ranking them.
``RankRequest``'s wrap validator (api.schedule_schemas) first tries ``gather_candidates``: the objects are
checked as a batch (only known field names, values JSON numbers or null) and gathered into one list per
field, and only the rest of the request (hardware, op, layout) goes through pydantic. Anything the batch
check does not accept (a string or a bool for a size, an unknown field, a row that is not an object, too
many candidates) goes through the full validation instead, so every 422 names the candidate index and
field exactly as before. The body is decoded by orjson (``OrjsonRoute``; stdlib ``json`` where orjson
refuses the text, so ``NaN`` literals and malformed JSON answer as before).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import numpy as np
import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute

from perfmodel.tuners.candidates import ScheduleError

TILE_FIELDS = ("tile_m", "tile_n", "tile_k", "tile_q", "tile_kv")
NUMBER_TYPES = frozenset({int, float, type(None)})
Columns = dict[str, Any]


class OrjsonRequest(Request):
    """A request whose JSON body is decoded by orjson (stdlib json where orjson refuses the text)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = orjson.loads(body)
            except orjson.JSONDecodeError:  # NaN / Infinity literals, lone surrogates, or not JSON: as before
                self._json = json.loads(body)
        return self._json


class OrjsonRoute(APIRoute):
    """An APIRoute that hands its endpoint an ``OrjsonRequest`` (FastAPI's custom request class pattern)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(OrjsonRequest(request.scope, request.receive))

        return route


def gather_candidates(data: Any, fields: tuple[str, ...], max_count: int) -> dict[str, list[Any]] | None:
    """``data["candidates"]``'s values per field (in ``fields`` order, only the fields some candidate gives)
    where every candidate is an object of known fields with number or null values; None otherwise (the
    caller then validates field by field)."""
    if type(data) is not dict:
        return None
    rows = data.get("candidates")
    if type(rows) is not list or not rows or len(rows) > max_count or data.get("columns") is not None:
        return None
    if not set(map(type, rows)) <= {dict}:
        return None
    present = set().union(*rows)
    if not present <= set(fields):
        return None
    gathered: dict[str, list[Any]] = {}
    for name in fields:
        if name in present:
            values = [row.get(name) for row in rows]
            if not set(map(type, values)) <= NUMBER_TYPES:
                return None
            gathered[name] = values
    return gathered


def to_columns(values_by_field: Mapping[str, list[Any]]) -> Columns:
    """Per field a float64 array, null as NaN (the field's default); a tile size missing from some
    candidates while others give it is a ScheduleError naming the first such candidate."""
    out: Columns = {}
    for name, values in values_by_field.items():
        column = np.array(values, dtype=np.float64)
        if name in TILE_FIELDS:
            missing = [i for i in np.flatnonzero(np.isnan(column)).tolist() if values[i] is None]
            if missing:
                raise ScheduleError(f"candidates.{missing[0]}.{name}", "missing while other candidates give it")
        out[name] = column
    return out
