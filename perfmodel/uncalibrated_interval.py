"""Intervals of the uncalibrated model: how far off it is on a device it was never fitted on.

Each op class has a 10-90 % band of measured / predicted time taken from the leave-one-device-out
residuals of the dev set (``benchmarks/lodo.py --write-intervals`` writes the table next to this module):
every device's rows are predicted with defaults fitted on the other devices only, and the band's
quantiles weigh each device equally. A prediction's interval is ``time_s`` times the band of its class;
a class without measured rows gets the band pooled over all classes (``POOLED``), and a class measured on
fewer than ``MIN_DEVICES`` devices the union of its band and the pooled one (one or two devices cannot show
how far a new device lands).
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


def class_band(ratio: FloatArray, classes: Sequence[str], devices: Sequence[str], name: str,
               left_out: np.ndarray[Any, np.dtype[np.bool_]] | None = None) -> tuple[float, float, int] | None:
    """The band of class ``name`` from the rows not ``left_out``, and how many devices it rests on (None: no rows).

    A class measured on fewer than MIN_DEVICES devices cannot show how far devices differ: its band is widened
    to cover the band pooled over all classes as well (the union of the two).
    """
    cls, dev = np.asarray(classes), np.asarray(devices)
    kept = np.isfinite(ratio) & (ratio > 0) & (True if left_out is None else ~left_out)
    mine = kept & ((cls == name) if name != POOLED else True)
    if not mine.any():
        return None
    low, high = device_balanced_band(ratio[mine], dev[mine].tolist())
    count = len(set(dev[mine].tolist()))
    if count < MIN_DEVICES and name != POOLED:
        pooled_low, pooled_high = device_balanced_band(ratio[kept], dev[kept].tolist())
        low, high = min(low, pooled_low), max(high, pooled_high)
    return low, high, count


def build_bands(ratio: FloatArray, classes: Sequence[str], devices: Sequence[str]) -> dict[str, ClassBand]:
    """The table from held-out ratios (measured / predicted, each predicted without its own device).

    Coverage is measured the same way the band is used: each device's rows against the band built without
    that device (None where no other device has the class).
    """
    cls, dev = np.asarray(classes), np.asarray(devices)
    ok = np.isfinite(ratio) & (ratio > 0)
    out: dict[str, ClassBand] = {}
    for name in [*sorted(set(cls[ok].tolist())), POOLED]:
        mine = ok & ((cls == name) if name != POOLED else True)
        band = class_band(ratio, classes, devices, name)
        assert band is not None
        inside, counted = 0, 0
        for device in sorted(set(dev[mine].tolist())):
            without = class_band(ratio, classes, devices, name, left_out=dev == device)
            if without is None or (name != POOLED and not (mine & (dev != device)).any()):
                continue
            held = ratio[mine & (dev == device)]
            inside += int(np.sum((held >= without[0]) & (held <= without[1])))
            counted += held.size
        out[name] = ClassBand(band[0], band[1], int(mine.sum()), band[2], inside / counted if counted else None)
    return out


def write_bands(bands: dict[str, ClassBand], source: str, path: Path = TABLE_PATH) -> None:
    """Store the table (JSON) with a line saying how it was made."""
    classes = {name: {"low_ratio": round(b.low_ratio, 4), "high_ratio": round(b.high_ratio, 4), "rows": b.rows,
                      "devices": b.devices, "coverage": None if b.coverage is None else round(b.coverage, 3)}
               for name, b in bands.items()}
    path.write_text(json.dumps({"quantiles": list(QUANTILES), "source": source, "classes": classes}, indent=1) + "\n")
    load_bands.cache_clear()
