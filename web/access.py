"""What a page may read, and the devices it can show (bundled first, then custom ones)."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from api.deps import bearer_token, token_valid
from api.state import AppState, UnknownHardware
from perfmodel.hardware import Hardware
from perfmodel.specs import SpecError, library

TOKEN_COOKIE = "perfmodel_token"


def app_state(request: Request) -> AppState:
    state: AppState = request.app.state.perfmodel
    return state


def can_read(request: Request) -> bool:
    """Reads are open unless PERFMODEL_READ_REQUIRES_TOKEN=1; then a bearer header or the token cookie that
    the dashboard's token field sets (SameSite=Strict) must hold a valid token."""
    state = app_state(request)
    if not state.settings.read_requires_token:
        return True
    return token_valid(state, bearer_token(request) or request.cookies.get(TOKEN_COOKIE))


@dataclass(frozen=True)
class Device:
    hardware: Hardware
    origin: str


def devices(state: AppState) -> list[Device]:
    """Every device the service knows: bundled by id, then the stored ones that still parse."""
    found = [Device(h, "bundled") for h in sorted(library().values(), key=lambda h: h.id)]
    for row in state.store.list_hardware():
        try:
            found.append(Device(state.hardware(row.id)[0], "custom"))
        except (UnknownHardware, SpecError, ValueError):
            continue
    return found


def device(state: AppState, hardware_id: str) -> Hardware | None:
    """One device, or None when no bundled or stored device has this id."""
    try:
        return state.hardware(hardware_id)[0]
    except (UnknownHardware, SpecError, ValueError):
        return None
