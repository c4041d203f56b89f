"""Intervals of the uncalibrated model: how far off it is on a device it was never fitted on.

Each op class has a 10-90 % band of measured / predicted time taken from the leave-one-device-out
residuals of the dev set (``benchmarks/lodo.py --write-intervals`` writes the table next to this module):
every device's rows are predicted with defaults fitted on the other devices only, and the band's
quantiles weigh each device equally. A prediction's interval is ``time_s`` times the band of its class;
a class without measured rows gets the band pooled over all classes (``POOLED``), a class measured on
fewer than ``MIN_DEVICES`` devices the union of its band and the pooled one (one or two devices cannot show
how far a new device lands), and one on more its own band plus the spread of a new device's median about its
devices' mean that their own spread does not show (``shifted_band``, docs/model.md).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from perfmodel.ops.base import FloatArray, Op

TABLE_PATH = Path(__file__).with_name("uncalibrated_intervals.json")
POOLED = "all"
QUANTILES = (0.1, 0.9)
MIN_DEVICES = 3  # a class band from fewer devices is widened by the pooled band


@dataclass(frozen=True)
class ClassBand:
    """The band of one op class (ratios measured / predicted) and what it rests on."""

    low_ratio: float
    high_ratio: float
    rows: int  # held-out rows it was taken from
    devices: int  # devices those rows come from
    coverage: float | None  # share of held-out rows inside the band built without their own device
    # the same, each held-out device weighing the same (its own share, averaged over devices): what a new device
    # can expect; the row share above is the largest device's (A100: 6,141 of 7,421 elementwise rows)
    device_coverage: float | None = None


def band_key(op: Op) -> str:
    """The class an op's band is looked up by: its kind, ``_bwd`` for a training pass (``conv2d_bwd``)."""
    pass_ = getattr(op, "pass_", "forward")
    return op.kind if pass_ == "forward" else f"{op.kind}_bwd"


@functools.cache
def load_bands(path: Path = TABLE_PATH) -> dict[str, ClassBand]:
    """The stored table: class -> band."""
    data = json.loads(path.read_text())
    if list(data["quantiles"]) != list(QUANTILES):
        raise ValueError(f"{path}: quantiles {data['quantiles']}, expected {list(QUANTILES)}")
    return {name: ClassBand(**fields) for name, fields in data["classes"].items()}


def interval_s(ops: Sequence[Op], time_s: FloatArray, bands: dict[str, ClassBand] | None = None) -> FloatArray:
    """Per op, [low, high] seconds: ``time_s`` times its class's band (n x 2)."""
    table = load_bands() if bands is None else bands
    pooled = table[POOLED]
    codes: dict[str, int] = {}  # each op's class numbered, then its band's row taken at once (not one row per op)
    index = np.fromiter((codes.setdefault(key, len(codes)) for key in map(band_key, ops)), dtype=np.intp,
                        count=len(ops))
    bands_of = [table.get(key, pooled) for key in codes]
    pairs = np.array([(band.low_ratio, band.high_ratio) for band in bands_of], dtype=float).reshape(-1, 2)
    ratios = pairs[index]
    out: FloatArray = np.asarray(time_s, dtype=float)[:, None] * ratios
    return out


def weighted_quantiles(values: FloatArray, weights: FloatArray, quantiles: Sequence[float]) -> FloatArray:
    """Quantiles of ``values`` with ``weights`` (midpoint rule: each value sits at the middle of its weight)."""
    if values.size == 0:
        raise ValueError("no values to take quantiles of")
    order = np.argsort(values)
    v, w = values[order], weights[order]
    position = (np.cumsum(w) - 0.5 * w) / w.sum()
    out: FloatArray = np.interp(np.asarray(quantiles, dtype=float), position, v)
    return out


def device_balanced_band(ratio: FloatArray, devices: Sequence[str]) -> tuple[float, float]:
    """The QUANTILES of ``ratio`` (measured / predicted), every device weighing the same in all."""
    _, inverse, counts = np.unique(np.asarray(devices), return_inverse=True, return_counts=True)
    weights = 1.0 / counts[inverse]
    low, high = weighted_quantiles(np.log(ratio), weights, QUANTILES)
    return float(np.exp(low)), float(np.exp(high))


def device_shifts(log_ratio: FloatArray, classes: Sequence[str], devices: Sequence[str]
                  ) -> tuple[FloatArray, FloatArray]:
    """How far a device's median lands from the other devices' mean, per (class, device) cell, in one device's spread.

    For a class on K >= 2 devices with medians m_d, each d gives m_d - mean(m_others) (variance sigma^2 K / (K - 1)
    if the device effects have variance sigma^2), times sqrt((K - 1) / K): a draw of the device effect. Returns the
    draws and their weights (1 / K: every class weighs the same).
    """
    cls, dev = np.asarray(classes), np.asarray(devices)
    draws: list[float] = []
    weights: list[float] = []
    for name in sorted(set(cls.tolist())):
        mine = cls == name
        medians = np.array([np.median(log_ratio[mine & (dev == d)]) for d in sorted(set(dev[mine].tolist()))])
        k = medians.size
        if k < 2:
            continue
        others = (medians.sum() - medians) / (k - 1)
        draws += ((medians - others) * np.sqrt((k - 1) / k)).tolist()
        weights += [1.0 / k] * k
    return np.array(draws), np.array(weights)


def shifted_band(log_ratio: FloatArray, devices: Sequence[str], shifts: FloatArray, shift_weights: FloatArray,
                 own: FloatArray) -> tuple[float, float]:
    """The QUANTILES of a class's device-balanced log ratios plus a device effect for a device not among its K.

    The class's K devices spread their medians as sigma^2 (K - 1) / K about their mean; a new device lands
    sigma^2 (1 + 1 / K) from it. The missing variance, 2 sigma^2 / K, is added as ``shifts`` (the pooled draws,
    ``device_shifts``) times sqrt(2 / K), rescaled to this class's own spread shrunk to the pooled one with one
    pseudo-device (sigma_c^2 = (sigma_0^2 + (K - 1) s_c^2) / K; ``own``: the class's own draws).
    """
    _, inverse, counts = np.unique(np.asarray(devices), return_inverse=True, return_counts=True)
    k = counts.size
    pooled_var = float(np.sum(shift_weights * shifts**2) / np.sum(shift_weights))
    class_var = (pooled_var + (k - 1) * float(np.mean(own**2))) / k
    scale = np.sqrt(2.0 / k * class_var / pooled_var) if pooled_var > 0 else 0.0
    total = (shifts[:, None] * scale + log_ratio[None, :]).ravel()
    weights = (shift_weights[:, None] * (1.0 / counts[inverse])[None, :]).ravel()
    low, high = weighted_quantiles(total, weights, QUANTILES)
    return float(np.exp(low)), float(np.exp(high))


def class_band(ratio: FloatArray, classes: Sequence[str], devices: Sequence[str], name: str,
               left_out: np.ndarray[Any, np.dtype[np.bool_]] | None = None) -> tuple[float, float, int] | None:
    """The band of class ``name`` from the rows not ``left_out``, and how many devices it rests on (None: no rows).

    A class on at least MIN_DEVICES devices: its device-balanced log ratios plus the device effect its K devices
    do not show (``shifted_band``). One measured on fewer cannot show how far devices differ: its band is widened
    to cover the band pooled over all classes as well (the union of the two).
    """
    cls, dev = np.asarray(classes), np.asarray(devices)
    kept = np.isfinite(ratio) & (ratio > 0) & (True if left_out is None else ~left_out)
    mine = kept & ((cls == name) if name != POOLED else True)
    if not mine.any():
        return None
    low, high = device_balanced_band(ratio[mine], dev[mine].tolist())
    count = len(set(dev[mine].tolist()))
    if count >= MIN_DEVICES and name != POOLED:
        log_ratio = np.log(ratio)
        shifts, weights = device_shifts(log_ratio[kept], cls[kept].tolist(), dev[kept].tolist())
        own, _ = device_shifts(log_ratio[mine], cls[mine].tolist(), dev[mine].tolist())
        low, high = shifted_band(log_ratio[mine], dev[mine].tolist(), shifts, weights, own)
    elif count < MIN_DEVICES and name != POOLED:
        pooled_low, pooled_high = device_balanced_band(ratio[kept], dev[kept].tolist())
        low, high = min(low, pooled_low), max(high, pooled_high)
    return low, high, count


def build_bands(ratio: FloatArray, classes: Sequence[str], devices: Sequence[str]) -> dict[str, ClassBand]:
    """The table from held-out ratios (measured / predicted, each predicted without its own device).

    Coverage is measured the same way the band is used: each device's rows against the band built without
    that device (None where no other device has the class), as a share of rows and as the mean of the devices'
    shares (``device_coverage``).
    """
    cls, dev = np.asarray(classes), np.asarray(devices)
    ok = np.isfinite(ratio) & (ratio > 0)
    out: dict[str, ClassBand] = {}
    for name in [*sorted(set(cls[ok].tolist())), POOLED]:
        mine = ok & ((cls == name) if name != POOLED else True)
        band = class_band(ratio, classes, devices, name)
        assert band is not None
        inside, counted, shares = 0, 0, []
        for device in sorted(set(dev[mine].tolist())):
            without = class_band(ratio, classes, devices, name, left_out=dev == device)
            if without is None or (name != POOLED and not (mine & (dev != device)).any()):
                continue
            held = ratio[mine & (dev == device)]
            hits = int(np.sum((held >= without[0]) & (held <= without[1])))
            inside, counted = inside + hits, counted + held.size
            shares.append(hits / held.size)
        out[name] = ClassBand(band[0], band[1], int(mine.sum()), band[2], inside / counted if counted else None,
                              float(np.mean(shares)) if shares else None)
    return out


def write_bands(bands: dict[str, ClassBand], source: str, path: Path = TABLE_PATH) -> None:
    """Store the table (JSON) with a line saying how it was made."""
    classes = {name: {"low_ratio": round(b.low_ratio, 4), "high_ratio": round(b.high_ratio, 4), "rows": b.rows,
                      "devices": b.devices, "coverage": None if b.coverage is None else round(b.coverage, 3),
                      "device_coverage": None if b.device_coverage is None else round(b.device_coverage, 3)}
               for name, b in bands.items()}
    path.write_text(json.dumps({"quantiles": list(QUANTILES), "source": source, "classes": classes}, indent=1) + "\n")
    load_bands.cache_clear()
