"""Rule "urn" of the uncalibrated intervals: a class's residuals mixed with the pooled ones, the Polya urn's weights.

A new device of a class measured on K devices is, under a Dirichlet-process prior on the devices' residual
distributions (Blackwell & MacQueen, *Ferguson distributions via Polya urn schemes*, Ann. Statist. 1 (1973) 353-355),
like one of the K with probability K / (K + alpha) and a fresh draw from the base measure with alpha / (K + alpha).
The band is the QUANTILES of that predictive mixture: the class's device-balanced log ratios (each device 1 / (K +
alpha)) and the base measure (alpha / (K + alpha)): every other class's held-out log ratios, each (class, device)
cell weighing the same (``OTHERS_ONLY``), optionally mirrored about the prediction (``MIRROR``). It is split
conformal's finite-sample correction (the test group's mass 1 / (K + 1) at +infinity, Lee, Barber & Willett 2023)
with that mass put on the prior predictive instead. Tried in the fifteenth pass (docs/accuracy.md, branch ints16;
docs/model.md, "Rule "urn""), not shipped: ``RULES[0]`` is still "shifted".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from perfmodel.ops.base import FloatArray

ALPHA = 1.0  # the urn's concentration: the base measure's weight, in devices
# the base mirrored about the prediction (ratio 1: each row -r); "centre": its median B only (r - 2B); "vendor": each
# row less its vendor's median plus every training vendor's median either sign
MIRROR: bool | str = False
OTHERS_ONLY = True  # the base measure from the other classes only (the class's own rows not counted twice)
MIRROR_OWN = False  # the class's own part symmetrised too
JACKKNIFE_ONE_DEVICE = "union"  # rule "jackknife" on a class of one device: the shifted rule's union, or "urn"
URN_BELOW = 3  # classes on fewer devices take the urn; the others keep the shifted band (a large value: every class)
BoolArray = np.ndarray[Any, np.dtype[np.bool_]]


def _cell_weights(cls: np.ndarray[Any, Any], dev: np.ndarray[Any, Any]) -> FloatArray:
    """Per row 1 / (its (class, device) cell's rows x the cells): every cell weighing the same, summing to 1."""
    keys = np.char.add(np.char.add(cls.astype(str), "\x00"), dev.astype(str))
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    out: FloatArray = 1.0 / (counts[inverse] * counts.size)
    return out


def urn_band(log_ratio: FloatArray, classes: Sequence[str], devices: Sequence[str], name: str) -> tuple[float, float]:
    """The QUANTILES (as ratios) of class ``name``'s urn mixture over the given rows (all of them training rows)."""
    from perfmodel.uncalibrated_interval import QUANTILES, weighted_quantiles

    cls, dev = np.asarray(classes), np.asarray(devices)
    mine = cls == name
    _, inverse, counts = np.unique(dev[mine], return_inverse=True, return_counts=True)
    k = counts.size
    base = ~mine if OTHERS_ONLY and (~mine).any() else np.ones(cls.size, dtype=bool)
    base_values, base_weights = log_ratio[base], _cell_weights(cls[base], dev[base])
    if MIRROR == "vendor":
        base_values, base_weights = _vendor_mirrored(base_values, base_weights, dev[base])
    elif MIRROR:
        centre = float(weighted_quantiles(base_values, base_weights, [0.5])[0]) if MIRROR == "centre" else 0.0
        # "centre": the base's median bias B reflected, its shape kept (r - 2B); else each row about 1x (-r)
        mirrored = base_values - 2 * centre if MIRROR == "centre" else -base_values
        base_values = np.concatenate([base_values, mirrored])
        base_weights = np.concatenate([base_weights, base_weights]) / 2
    own_values, own_weights = log_ratio[mine], 1.0 / (counts[inverse] * (k + ALPHA))
    if MIRROR_OWN:
        own_values, own_weights = np.concatenate([own_values, -own_values]), np.concatenate([own_weights] * 2) / 2
    values = np.concatenate([own_values, base_values])
    weights = np.concatenate([own_weights, base_weights * ALPHA / (k + ALPHA)])
    low, high = weighted_quantiles(values, weights, QUANTILES)
    return float(np.exp(low)), float(np.exp(high))


def _vendor_mirrored(values: FloatArray, weights: FloatArray, devices: np.ndarray[Any, Any]
                     ) -> tuple[FloatArray, FloatArray]:
    """``values`` less their vendor's median, plus each training vendor's median either sign (equal weights)."""
    from perfmodel.uncalibrated_interval import weighted_quantiles

    vendor = np.array([d.split("-")[0] for d in devices.astype(str).tolist()])
    names = sorted(set(vendor.tolist()))
    medians = {v: float(weighted_quantiles(values[vendor == v], weights[vendor == v], [0.5])[0]) for v in names}
    within = values - np.array([medians[v] for v in vendor.tolist()])
    shifts = [s * medians[v] for v in names for s in (1.0, -1.0)]
    out_values = np.concatenate([within + shift for shift in shifts])
    out_weights = np.concatenate([weights] * len(shifts)) / len(shifts)
    return out_values, out_weights


def jackknife_band(log_ratio: FloatArray, devices: Sequence[str]) -> tuple[float, float] | None:
    """Jackknife+ over devices (Barber et al. 2021, its leave-one-out fits a device's): each device d's rows scored
    |r - mu_-d| about the mean mu_-d of the other devices' medians; the band's ends are the QUANTILES of mu_-d -
    |score| and mu_-d + |score|, each device weighing the same. None below two devices (no other device's centre)."""
    from perfmodel.uncalibrated_interval import QUANTILES, weighted_quantiles

    dev = np.asarray(devices)
    names = sorted(set(dev.tolist()))
    if len(names) < 2:
        return None
    medians = {d: float(np.median(log_ratio[dev == d])) for d in names}
    total = sum(medians.values())
    centre = np.array([(total - medians[d]) / (len(names) - 1) for d in dev.tolist()])
    score = np.abs(log_ratio - centre)
    _, inverse, counts = np.unique(dev, return_inverse=True, return_counts=True)
    weights = 1.0 / counts[inverse]
    low = float(weighted_quantiles(centre - score, weights, [QUANTILES[0]])[0])
    high = float(weighted_quantiles(centre + score, weights, [QUANTILES[1]])[0])
    return float(np.exp(low)), float(np.exp(high))
