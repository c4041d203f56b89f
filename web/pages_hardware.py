"""Hardware pages: the catalog, one device's spec with its sources, and several devices compared."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from perfmodel.hardware import Hardware, Sourced
from web.access import app_state, device, devices
from web.ceilings import compute_roofs, memory_roofs
from web.plotting import figure_json, roofline_figure
from web.templating import render

router = APIRouter(include_in_schema=False)
DEFAULT_COMPARE = ("nvidia-h100-sxm5-80gb", "amd-mi300x", "google-tpu-v5p")
DEFAULT_DTYPES = ("bf16", "fp8_e4m3", "fp32")
MAX_COMPARED = 8


def _headline(hw: Hardware) -> dict[str, Any]:
    roofs = {r.dtype: r.peak_flops_per_s for r in compute_roofs(hw)}
    dram = hw.levels[0]
    return {"sixteen_bit": hw.best_sixteen_bit_flops_per_s(), "fp32": roofs.get("fp32"),
            "dram_bw": dram.bandwidth_bytes_per_s, "dram_bytes": dram.capacity_bytes}


@router.get("/hardware", response_class=HTMLResponse)
def catalog(request: Request, vendor: str = "", kind: str = "") -> HTMLResponse:
    found = devices(app_state(request))
    vendors = sorted({d.hardware.vendor for d in found})
    kinds = sorted({d.hardware.kind for d in found})
    shown = [d for d in found if (not vendor or d.hardware.vendor == vendor) and (not kind or d.hardware.kind == kind)]
    rows = [{"hw": d.hardware, "origin": d.origin, **_headline(d.hardware)} for d in shown]
    return render(request, "catalog.html", rows=rows, vendors=vendors, kinds=kinds, vendor=vendor, kind=kind,
                  total=len(found))


def _citations(block: Sourced, fields: list[str]) -> list[tuple[str, str]]:
    return [(f, block.citation(f)) for f in fields if f in block.sources] + [("(block)", block.source)]


@router.get("/hardware/{hardware_id}", response_class=HTMLResponse)
def spec_page(request: Request, hardware_id: str) -> HTMLResponse:
    state = app_state(request)
    hw = device(state, hardware_id)
    if hw is None:
        return render(request, "not_found.html", status_code=404, what=f"hardware {hardware_id!r}",
                      back="/hardware")
    fig = roofline_figure([hw], None, f"{hw.name}: roofline (every dtype, every level with a bandwidth)")
    return render(request, "device.html", hw=hw, figure=figure_json(fig), roofs=compute_roofs(hw),
                  mem=memory_roofs(hw), capacity=hw.level_capacity_bytes, headline=_headline(hw),
                  origin="bundled" if state.bundled(hw.id) else "custom")


@router.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request, ids: Annotated[list[str] | None, Query()] = None,
                 dtype: Annotated[list[str] | None, Query()] = None) -> HTMLResponse:
    state = app_state(request)
    everything = devices(state)
    chosen_ids = list(dict.fromkeys(ids or DEFAULT_COMPARE))[:MAX_COMPARED]
    chosen: list[Hardware] = []
    missing: list[str] = []
    for hardware_id in chosen_ids:
        hw = device(state, hardware_id)
        if hw is None:
            missing.append(hardware_id)
        else:
            chosen.append(hw)
    all_dtypes = sorted({r.dtype for hw in chosen for r in compute_roofs(hw)})
    dtypes = [d for d in (dtype or DEFAULT_DTYPES) if d in all_dtypes] or all_dtypes[:2]
    figure = None
    if chosen:
        fig = roofline_figure(chosen, dtypes, "Rooflines: " + ", ".join(hw.id for hw in chosen), labels=False,
                              height=600)
        figure = figure_json(fig)
    table = _side_by_side(chosen, all_dtypes)
    return render(request, "compare.html", devices=everything, chosen=chosen, chosen_ids=chosen_ids, missing=missing,
                  all_dtypes=all_dtypes, dtypes=dtypes, figure=figure, table=table, max_compared=MAX_COMPARED)


def _side_by_side(chosen: list[Hardware], dtypes: list[str]) -> list[tuple[str, str, list[Any]]]:
    """Rows of (label, format filter, one value per device)."""
    rows: list[tuple[str, str, list[Any]]] = [
        ("Vendor", "text", [h.vendor for h in chosen]), ("Kind", "text", [h.kind for h in chosen]),
        ("Compute units", "text", [f"{h.units} {h.unit_name}s" for h in chosen]),
        ("Clock", "hz", [h.clock_hz for h in chosen]), ("TDP", "watts", [h.tdp_w for h in chosen]),
    ]
    peaks = [{r.dtype: r.peak_flops_per_s for r in compute_roofs(h)} for h in chosen]
    rows += [(f"Peak {d}", "flops", [p.get(d) for p in peaks]) for d in dtypes]
    dram = [h.levels[0] for h in chosen]
    rows += [("DRAM capacity", "bytes", [lv.capacity_bytes for lv in dram]),
             ("DRAM bandwidth", "bw", [lv.bandwidth_bytes_per_s for lv in dram])]
    for d in ("bf16", "fp32"):
        rows.append((f"Ridge point {d} [FLOP/byte]", "num",
                     [p[d] / lv.bandwidth_bytes_per_s if d in p and lv.bandwidth_bytes_per_s else None
                      for p, lv in zip(peaks, dram, strict=True)]))
    rows.append(("On-chip levels", "text", [", ".join(lv.name for lv in h.levels[1:]) for h in chosen]))
    rows.append(("Link bandwidth / device", "bw",
                 [h.interconnect.link_bandwidth_bytes_per_s if h.interconnect else None for h in chosen]))
    return rows
