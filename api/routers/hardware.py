"""GET /hardware, GET /hardware/{id}, POST /hardware (custom devices and what-if variants)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends, HTTPException

from api.deps import get_state, require_read, require_write
from api.schemas import HardwareDetail, HardwareList
from api.state import AppState, UnknownHardware
from perfmodel.hardware import Hardware
from perfmodel.specs import derive_variant, library, parse_spec

router = APIRouter(tags=["hardware"])


def _summary(h: Hardware, origin: str) -> dict[str, Any]:
    return {"id": h.id, "name": h.name, "vendor": h.vendor, "kind": h.kind, "units": h.units, "origin": origin,
            "content_hash": h.content_hash}


@router.get("/hardware", response_model=HardwareList, dependencies=[Depends(require_read)])
def list_devices(state: AppState = Depends(get_state)) -> dict[str, Any]:
    """Bundled devices, then the custom ones stored by users."""
    items = [_summary(h, "bundled") for h in sorted(library().values(), key=lambda h: h.id)]
    for row in state.store.list_hardware():
        try:
            items.append(_summary(state.hardware(row.id)[0], "custom"))
        except (UnknownHardware, ValueError):
            continue
    return {"items": items}


@router.get("/hardware/{hardware_id}", response_model=HardwareDetail, dependencies=[Depends(require_read)])
def get_device(hardware_id: str, state: AppState = Depends(get_state)) -> dict[str, Any]:
    hardware, origin = state.hardware(hardware_id)
    return {"id": hardware.id, "origin": origin, "content_hash": hardware.content_hash,
            "spec": hardware.model_dump(mode="json")}


@router.post("/hardware", response_model=HardwareDetail, status_code=201, dependencies=[Depends(require_write)])
def add_device(
    body: dict[str, Any] = Body(..., examples=[{"base": "nvidia-h100-sxm5-80gb", "id": "h100-hbm-x1.5",
                                                "overrides": {"levels.dram.bandwidth_bytes_per_s": "x1.5"}}]),
    state: AppState = Depends(get_state),
) -> dict[str, Any]:
    """Store a custom device (a full spec) or a what-if variant ``{"base", "id", "overrides"}``."""
    if set(body) <= {"base", "id", "overrides"} and "base" in body:
        if not isinstance(body.get("id"), str) or not isinstance(body.get("overrides", {}), dict):
            raise HTTPException(422, "a variant needs 'id' (string) and 'overrides' (object)")
        base, _ = state.hardware(str(body["base"]))
        hardware = derive_variant(base, body["id"], body.get("overrides", {}))
    else:
        hardware = parse_spec(body, "request body")
    if hardware.id in library():
        raise HTTPException(409, f"{hardware.id!r} is a bundled device: bundled specs are read-only")
    if state.store.get_hardware(hardware.id) is not None:
        raise HTTPException(409, f"hardware {hardware.id!r} already exists")
    spec = hardware.model_dump(mode="json")
    state.store.add_hardware(hardware.id, spec, hardware.derived_from, hardware.content_hash)
    state.forget(hardware.id)
    return {"id": hardware.id, "origin": "custom", "content_hash": hardware.content_hash, "spec": spec}
