"""Per-op-class error of each stored calibration, asked of the service's own comparisons endpoint in process
(the calibration issue owns how a calibration is applied; the dashboard only reads its answer)."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import Request

from web.access import TOKEN_COOKIE, app_state

MAX_SHOWN = 5


async def calibration_summaries(request: Request, hardware_id: str) -> tuple[list[dict[str, Any]], str | None]:
    """(calibrations with their summaries, a message if the service cannot compare calibrations)."""
    store = app_state(request).store
    lister = getattr(store, "list_calibrations", None)
    calibrations = lister(hardware_id) if lister else []
    if not calibrations:
        return [], None
    headers = {}
    token = request.cookies.get(TOKEN_COOKIE)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    out: list[dict[str, Any]] = []
    transport = httpx.ASGITransport(app=request.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://dashboard", timeout=60.0) as client:
        for calibration in calibrations[-MAX_SHOWN:]:
            response = await client.get("/api/v1/comparisons", headers=headers, params={
                "hardware": hardware_id, "calibration": str(calibration.id), "limit": 100_000})
            if response.status_code != 200:
                detail = _detail(response)
                return out, f"calibration {calibration.id}: the comparisons endpoint answered " \
                            f"{response.status_code} ({detail})"
            out.append({"id": calibration.id, "created_at": calibration.created_at,
                        "notes": calibration.notes, "summary": response.json().get("summary", [])})
    return out, None


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    return str(body.get("detail", body))[:300] if isinstance(body, dict) else str(body)[:300]
