"""Reasons in words for each ranked schedule: why it cannot run, or what bounds it and how it fills the device."""

from __future__ import annotations

from typing import Any

import numpy as np

from perfmodel.hardware import Hardware
from perfmodel.machine import MachineTables
from perfmodel.ops.base import FloatArray
from perfmodel.units import format_bytes


def _pad_name(t: MachineTables) -> str:
    return t.scratchpad.name if t.scratchpad is not None else "scratchpad"


def engine_reasons(t: MachineTables, codes: list[str], cols: dict[str, FloatArray], footprint_bytes: FloatArray,
                   k: float, tile_k: FloatArray, registers_bytes: FloatArray | None = None) -> list[str]:
    """Words for the search engine's rejections (codes of ``gemm_cost.REJECT_REASONS``, '' = costed)."""
    unit = t.hardware.unit_name
    sram = format_bytes(t.scratchpad_bytes_per_unit)
    out = [""] * len(codes)
    words: dict[float, str] = {}
    for i, code in enumerate(codes):
        if not code:
            continue
        if code in ("smem", "scratchpad"):
            size = float(footprint_bytes[i])
            word = words.get(size) or words.setdefault(size, format_bytes(size))
            out[i] = f"on-chip footprint {word} exceeds the {sram} of {_pad_name(t)} on one {unit}"
        elif code == "registers":
            need = (registers_bytes[i] if registers_bytes is not None
                    else 2.0 * cols["tile_m"][i] * cols["tile_n"][i] * 4.0)
            out[i] = (f"fp32 accumulators need {format_bytes(need)} of registers, more than the "
                      f"{format_bytes(t.register_bytes_per_unit)} of one {unit}")
        elif code == "useless_split":
            split = cols["split_k"][i]
            out[i] = (f"split_k {split:g}: each slice holds {np.ceil(k / split):g} of K = {k:g}, shorter than one "
                      f"{tile_k[i]:g}-element K-step")
        elif code == "mma_granularity":
            out[i] = (f"tile {cols['tile_m'][i]:g}x{cols['tile_n'][i]:g} is not a multiple of the "
                      f"{t.mma_m}x{t.mma_n} matrix instruction")
        elif code:
            out[i] = f"rejected by the cost model ({code})"
    return out


def valid_reasons(hw: Hardware, t: MachineTables, rejected: list[str], bound: list[str],
                  bound_code: np.ndarray[Any, np.dtype[np.intp]], waves: FloatArray, costed: dict[str, FloatArray],
                  time_s: FloatArray, best_s: float, cols: dict[str, FloatArray]) -> list[str]:
    """One line per candidate: the rejection, or 'bound by X, W waves (T tiles, R per unit on U units),
    footprint F of S SMEM, r x the best'."""
    sram = format_bytes(t.scratchpad_bytes_per_unit)
    pad = _pad_name(t)
    unit = hw.unit_name
    footprints = costed["footprint_bytes"]
    values, inverse = np.unique(footprints, return_inverse=True)  # few distinct footprints: format each once
    words = [format_bytes(v) for v in values.tolist()]
    with np.errstate(invalid="ignore"):
        relative = (time_s / best_s).tolist()
    tiles, resident, wave = costed["tiles"].tolist(), costed["resident"].tolist(), waves.tolist()
    rounded = cols.get("tile_k")
    effective = costed.get("tile_k_effective")
    changed = (np.nonzero(effective != rounded)[0].tolist()
               if rounded is not None and effective is not None else [])
    # candidates share tiles, occupancy and footprints: word each distinct head once (numpy finds them)
    key = np.zeros(len(rejected), dtype=np.int64)
    for part in (bound_code, costed["tiles"], costed["resident"], inverse):
        levels, codes = np.unique(part, return_inverse=True)
        key = key * len(levels) + codes.reshape(-1)
    firsts, which = np.unique(key, return_index=True, return_inverse=True)[1:]
    heads = [f"bound by {bound[i]}; {wave[i]:.2f} waves ({tiles[i]:g} tiles, {resident[i]:g} resident per {unit} "
             f"on {hw.units}); footprint {words[inverse[i]]} of {sram} {pad}; " for i in firsts.tolist()]
    out = [why or f"{heads[k]}{r:.3g}x the best" for why, k, r in zip(rejected, which.reshape(-1).tolist(), relative,
                                                                      strict=True)]
    for i in changed:
        if not rejected[i] and rounded is not None and effective is not None:
            out[i] += f"; tile_k {rounded[i]:g} rounds up to {effective[i]:g} (the matrix instruction's K)"
    return out
