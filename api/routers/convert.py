"""Core objects to JSON bytes (orjson: inf and nan become null, numpy-free Python floats)."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
from fastapi import Response

from perfmodel.cost import Cost


def finite(value: Any) -> Any:
    """Replace inf/nan by None, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def cost_json(cost: Cost, calibration: str | int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = finite(cost.to_dict())
    out["calibration"] = calibration
    return out


def json_bytes(value: Any) -> bytes:
    """Serialise a response body (numpy arrays included); non-finite floats become null."""
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


def json_response(body: bytes, status_code: int = 200) -> Response:
    return Response(content=body, status_code=status_code, media_type="application/json")


def op_key(op: dict[str, Any]) -> bytes:
    """A canonical key for a raw op dict (sorted keys), for caches and de-duplication."""
    try:
        return orjson.dumps(op, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # what orjson cannot write (an integer beyond 64 bits): the op is refused later, by name
        return json.dumps(op, sort_keys=True, default=repr).encode()
