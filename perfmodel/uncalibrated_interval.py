"""Intervals of the uncalibrated model: how far off it is on a device it was never fitted on.

Each op class has a 10-90 % band of measured / predicted time taken from the leave-one-device-out
residuals of the dev set (``benchmarks/lodo.py --write-intervals`` writes the table next to this module):
every device's rows are predicted with defaults fitted on the other devices only, and the band's
quantiles weigh each device equally. A prediction's interval is ``time_s`` times the band of its class;
a class without measured rows gets the band pooled over all classes (``POOLED``), a class measured on
fewer than ``MIN_DEVICES`` devices the union of its band and the pooled one (one or two devices cannot show
how far a new device lands), and one on more its own band plus the spread of a new device's median about its
devices' mean that their own spread does not show (``shifted_band``, docs/model.md): rule "shifted", shipped.
Rule "conformal" (``conformal_bands``: the class's centre plus a new device's spread shrunk to its family's,
times the pooled quantiles of every (class, device) cell scored as a device nobody fitted, at conformal levels)
and rule "symmetric" (a class on fewer than ``MIN_DEVICES`` devices takes ``symmetric_band``, the 80 % quantile of
its |log ratio| either side of the prediction, instead of the union) are kept for comparison
(``benchmarks/uncalibrated_bands.py``), not shipped.
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


def symmetric_band(ratio: FloatArray, devices: Sequence[str]) -> tuple[float, float]:
    """exp(-q), exp(q): q the (high - low) QUANTILES level (0.8) of |log ratio|, every device weighing the same.

    Centred on the prediction itself (ratio 1), not on the class's devices: the defaults are fitted across devices,
    so a new device's bias is as likely either side, and each device's |log ratio| counts its bias in both
    directions (split conformal's absolute-residual score; docs/model.md, "Uncalibrated intervals").
    """
    _, inverse, counts = np.unique(np.asarray(devices), return_inverse=True, return_counts=True)
    level = QUANTILES[1] - QUANTILES[0]
    q = float(weighted_quantiles(np.abs(np.log(ratio)), 1.0 / counts[inverse], [level])[0])
    return float(np.exp(-q)), float(np.exp(q))


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


# Classes whose devices differ for the same reasons (the matrix units; the memory stream; the links): a class's
# between-device spread is shrunk to its family's pooled one (``device_spread``)
FAMILIES = {"matmul": "matrix", "conv2d": "matrix", "conv2d_bwd": "matrix", "allreduce": "collective",
            "sendrecv": "collective"}  # every other class: "memory"
PRIOR_DEVICES = 1.0  # the prior's weight in the shrunk spread, in devices (nu_0)
# the shipped rule first. "shifted": the eleventh pass's (union with the pooled band below MIN_DEVICES devices);
# "conformal": hierarchical scale and pooled conformal levels (``conformal_bands``), tried in the twelfth pass and
# not shipped (docs/accuracy.md: it moves matmul, conv2d and rmsnorm out of 75-85 % of a new device's rows);
# "symmetric": "shifted" with ``symmetric_band`` instead of the union below MIN_DEVICES devices, tried in the
# thirteenth pass and not shipped (docs/accuracy.md: all-reduce 86 -> 58 %, one vendor out conv2d_bwd 79 -> 60 %)
# "selected": each class's rule among those chosen by nested leave-one-device-out on its training devices
# (``uncalibrated_select``, the fourteenth pass); "urn": a class below ``uncalibrated_urn.URN_BELOW`` devices mixed
# with the other classes' residuals at the Polya urn's weights; "jackknife": jackknife+ over its devices (both the
# fifteenth pass, not shipped; ``uncalibrated_urn``)
RULES = ("shifted", "conformal", "symmetric", "selected", "urn", "jackknife")
FINITE_SAMPLE = True
Z_10_90 = 2.0 * 1.2815515655446004  # width of the normal's 10-90 % range, in standard deviations


@dataclass(frozen=True)
class ClassFit:
    """One class's centre and scale of log(measured / predicted) for a device not among its ``devices``."""

    centre: float  # mean of its devices' median log ratios
    scale: float  # sqrt(tau_c^2 (1 + 1/K) + omega_c^2): a new device's spread about ``centre``
    devices: int


def _cells(log_ratio: FloatArray, cls: np.ndarray[Any, Any], dev: np.ndarray[Any, Any]
           ) -> tuple[list[tuple[str, str]], FloatArray, FloatArray, list[np.ndarray[Any, np.dtype[np.intp]]]]:
    """Per (class, device) cell: its key, median log ratio, within-device variance (the 10-90 % range read as a
    normal's) and row indices."""
    class_names, class_code = np.unique(cls.astype(str), return_inverse=True)
    device_names, device_code = np.unique(dev.astype(str), return_inverse=True)
    pairs, inverse = np.unique(class_code * device_names.size + device_code, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(pairs.size + 1))
    keys, medians, within, rows = [], [], [], []
    for i, pair in enumerate(pairs.tolist()):
        idx = order[bounds[i]:bounds[i + 1]]
        values = log_ratio[idx]
        q10, q50, q90 = np.percentile(values, [10, 50, 90])
        c, d = str(class_names[pair // device_names.size]), str(device_names[pair % device_names.size])
        keys.append((c, d))
        medians.append(q50)
        within.append(((q90 - q10) / Z_10_90) ** 2)
        rows.append(idx)
    return keys, np.array(medians), np.array(within), rows


def device_spread(keys: Sequence[tuple[str, str]], medians: FloatArray, within: FloatArray,
                  skip_device: str | None = None) -> dict[str, ClassFit]:
    """Per class, its centre and a new device's scale from the cells not on ``skip_device``.

    Each cell's log ratio = class centre + device effect (variance tau_c^2) + within-device scatter (omega_c^2).
    The class's K devices give the centre (mean of their medians) and s_c^2 (their medians' sample variance, K - 1
    degrees of freedom); tau_c^2 = (nu_0 tau_0^2 + (K - 1) s_c^2) / (nu_0 + K - 1) (the normal variance's
    conjugate update), tau_0^2 the pooled s^2 of the family's other classes (weighed by their degrees of freedom;
    of every other class where those have none): borrowed from the others, the class's own not counted twice. A
    new device lands tau_c^2 (1 + 1/K) from the K devices' mean (the prediction variance of a new draw), plus its
    own rows' scatter omega_c^2 (the mean over the class's cells).
    """
    by_class: dict[str, list[int]] = {}
    for i, (c, d) in enumerate(keys):
        if d != skip_device:
            by_class.setdefault(c, []).append(i)
    sums: dict[str, list[float]] = {}
    spread: dict[str, tuple[float, int]] = {}
    for c, idx in by_class.items():
        k = len(idx)
        s2 = float(np.var(medians[idx], ddof=1)) if k > 1 else 0.0
        spread[c] = (s2, k)
        for family in (FAMILIES.get(c, "memory"), POOLED):
            total = sums.setdefault(family, [0.0, 0.0])
            total[0] += (k - 1) * s2
            total[1] += k - 1
    out = {}
    for c, idx in by_class.items():
        s2, k = spread[c]
        prior = 0.0
        for family in (FAMILIES.get(c, "memory"), POOLED):  # the family's other classes; else every other class
            dof = sums[family][1] - (k - 1)
            if dof > 0:
                prior = (sums[family][0] - (k - 1) * s2) / dof
                break
        tau2 = (PRIOR_DEVICES * prior + (k - 1) * s2) / (PRIOR_DEVICES + k - 1)
        omega2 = float(np.mean(within[idx]))
        out[c] = ClassFit(float(np.mean(medians[idx])), float(np.sqrt(tau2 * (1 + 1 / k) + omega2)), k)
    return out


def conformal_levels(groups: int) -> tuple[float, float]:
    """The QUANTILES with the finite-sample correction for ``groups`` exchangeable held-out groups: the upper at
    (1 - a)(1 + 1/n), the lower at 1 minus that (split conformal's ceil((1 - a)(n + 1)) / n per tail; the test
    group weighing 1 / (n + 1) like each of the n, Lee, Barber & Willett 2023)."""
    low, high = QUANTILES
    if not FINITE_SAMPLE:
        return low, high
    return max(0.0, 1 - (1 - low) * (1 + 1 / groups)), min(1.0, high * (1 + 1 / groups))


def conformal_scores(log_ratio: FloatArray, cls: np.ndarray[Any, Any], dev: np.ndarray[Any, Any]
                     ) -> tuple[FloatArray, FloatArray, int]:
    """Every row's z = (log ratio - centre) / scale of its class fitted without its device's rows (every class),
    as the band is used on a device nobody fitted; weights: each (class, device) cell the same (CDF pooling,
    Dunn, Wasserman & Ramdas 2023), and how many cells scored."""
    keys, medians, within, rows = _cells(log_ratio, cls, dev)
    z, w = [], []
    cells = 0
    for device in sorted({d for _, d in keys}):
        fits = device_spread(keys, medians, within, skip_device=device)
        for (c, d), idx in zip(keys, rows, strict=True):
            if d != device or c not in fits or fits[c].scale <= 0:
                continue
            z.append((log_ratio[idx] - fits[c].centre) / fits[c].scale)
            w.append(np.full(idx.size, 1.0 / idx.size))
            cells += 1
    if not cells:
        return np.zeros(0), np.zeros(0), 0
    return np.concatenate(z), np.concatenate(w), cells


def conformal_bands(ratio: FloatArray, classes: Sequence[str], devices: Sequence[str],
                    left_out: np.ndarray[Any, np.dtype[np.bool_]] | None = None
                    ) -> dict[str, tuple[float, float, int]]:
    """Every class's band from the rows not ``left_out``: exp(centre + scale * [z_lo, z_hi]).

    ``centre`` and ``scale`` come from the class's devices (``device_spread``); z_lo and z_hi are the pooled
    quantiles of the held-out scores of every (class, device) cell (``conformal_scores``: each scored as a device
    nobody fitted, with the class's other devices), at the finite-sample levels (``conformal_levels``). Without
    any cell to score (one device in all) z is the normal's +-1.28.
    """
    cls, dev = np.asarray(classes), np.asarray(devices)
    kept = np.isfinite(ratio) & (ratio > 0) & (True if left_out is None else ~left_out)
    if not kept.any():
        return {}
    log_ratio = np.log(ratio[kept])
    z, w, groups = conformal_scores(log_ratio, cls[kept], dev[kept])
    if groups:
        z_low, z_high = weighted_quantiles(z, w, conformal_levels(groups))
    else:
        z_low, z_high = -Z_10_90 / 2, Z_10_90 / 2
    keys, medians, within, _ = _cells(log_ratio, cls[kept], dev[kept])
    return {c: (float(np.exp(f.centre + f.scale * z_low)), float(np.exp(f.centre + f.scale * z_high)), f.devices)
            for c, f in device_spread(keys, medians, within).items()}


def class_band(ratio: FloatArray, classes: Sequence[str], devices: Sequence[str], name: str,
               left_out: np.ndarray[Any, np.dtype[np.bool_]] | None = None, rule: str = RULES[0]
               ) -> tuple[float, float, int] | None:
    """The band of class ``name`` from the rows not ``left_out``, and how many devices it rests on (None: no rows).

    ``POOLED`` (a class without rows): the device-balanced quantiles of every row. Rule "shifted" (shipped): a
    class on at least MIN_DEVICES devices its device-balanced log ratios plus the device effect its K devices do
    not show (``shifted_band``), one on fewer the union of its band and the pooled one. Rule "conformal":
    ``conformal_bands``; rule "symmetric": "shifted" with ``symmetric_band`` below MIN_DEVICES (neither shipped).
    """
    if rule not in RULES:
        raise ValueError(f"rule {rule!r}: one of {RULES}")
    cls, dev = np.asarray(classes), np.asarray(devices)
    kept = np.isfinite(ratio) & (ratio > 0) & (True if left_out is None else ~left_out)
    mine = kept & ((cls == name) if name != POOLED else True)
    if not mine.any():
        return None
    low, high = device_balanced_band(ratio[mine], dev[mine].tolist())
    count = len(set(dev[mine].tolist()))
    if name == POOLED:
        return low, high, count
    if rule == "conformal":
        return conformal_bands(ratio, classes, devices, left_out)[name]
    if rule == "selected":
        from perfmodel.uncalibrated_select import selected_bands  # it builds on this module
        return selected_bands(ratio, classes, devices, left_out).get(name)
    if rule in ("urn", "jackknife"):
        from perfmodel import uncalibrated_urn as urn  # it builds on this module

        if rule == "jackknife" and count < urn.URN_BELOW:
            jack = urn.jackknife_band(np.log(ratio[mine]), dev[mine].tolist())
            if jack is not None:
                return (*jack, count)
        if count < urn.URN_BELOW and (rule == "urn" or urn.JACKKNIFE_ONE_DEVICE == "urn"):
            return (*urn.urn_band(np.log(ratio[kept]), cls[kept].tolist(), dev[kept].tolist(), name), count)
    if rule == "symmetric" and count < MIN_DEVICES:
        return (*symmetric_band(ratio[mine], dev[mine].tolist()), count)
    if count >= MIN_DEVICES:
        log_ratio = np.log(ratio)
        shifts, weights = device_shifts(log_ratio[kept], cls[kept].tolist(), dev[kept].tolist())
        own, _ = device_shifts(log_ratio[mine], cls[mine].tolist(), dev[mine].tolist())
        low, high = shifted_band(log_ratio[mine], dev[mine].tolist(), shifts, weights, own)
    else:
        pooled_low, pooled_high = device_balanced_band(ratio[kept], dev[kept].tolist())
        low, high = min(low, pooled_low), max(high, pooled_high)
    return low, high, count


def build_bands(ratio: FloatArray, classes: Sequence[str], devices: Sequence[str], rule: str = RULES[0]
                ) -> dict[str, ClassBand]:
    """The table from held-out ratios (measured / predicted, each predicted without its own device).

    Coverage is measured the same way the band is used: each device's rows against the band built without
    that device (None where no other device has the class), as a share of rows and as the mean of the devices'
    shares (``device_coverage``). The band without a device is rebuilt whole from the other devices' rows,
    the conformal levels and the family spreads included: the rule chosen on N - 1 devices, checked on the Nth.
    """
    cls, dev = np.asarray(classes), np.asarray(devices)
    ok = np.isfinite(ratio) & (ratio > 0)
    names = [*sorted(set(cls[ok].tolist())), POOLED]
    cache: dict[str | None, dict[str, tuple[float, float, int] | None]] = {}

    def band_of(name: str, device: str | None) -> tuple[float, float, int] | None:
        if device not in cache:
            left_out = None if device is None else dev == device
            table: dict[str, tuple[float, float, int] | None] = {
                POOLED: class_band(ratio, classes, devices, POOLED, left_out)}
            if rule == "conformal":
                table.update(conformal_bands(ratio, classes, devices, left_out))
            elif rule == "selected":
                from perfmodel.uncalibrated_select import selected_bands
                table.update({n: b for n, b in selected_bands(ratio, classes, devices, left_out).items()
                              if n != POOLED})
            else:
                table.update({n: class_band(ratio, classes, devices, n, left_out, rule) for n in names[:-1]})
            cache[device] = table
        return cache[device].get(name)

    out: dict[str, ClassBand] = {}
    for name in names:
        mine = ok & ((cls == name) if name != POOLED else True)
        band = band_of(name, None)
        assert band is not None
        inside, counted, shares = 0, 0, []
        for device in sorted(set(dev[mine].tolist())):
            without = band_of(name, device)
            if without is None or (name != POOLED and not (mine & (dev != device)).any()):
                continue
            held = ratio[mine & (dev == device)]
            hits = int(np.sum((held >= without[0]) & (held <= without[1])))
            inside, counted = inside + hits, counted + held.size
            shares.append(hits / held.size)
        out[name] = ClassBand(band[0], band[1], int(mine.sum()), band[2], inside / counted if counted else None,
                              float(np.mean(shares)) if shares else None)
    return out


def write_bands(bands: dict[str, ClassBand], source: str, path: Path = TABLE_PATH, rule: str = RULES[0]) -> None:
    """Store the table (JSON) with a line saying how it was made."""
    classes = {name: {"low_ratio": round(b.low_ratio, 4), "high_ratio": round(b.high_ratio, 4), "rows": b.rows,
                      "devices": b.devices, "coverage": None if b.coverage is None else round(b.coverage, 3),
                      "device_coverage": None if b.device_coverage is None else round(b.device_coverage, 3)}
               for name, b in bands.items()}
    table = {"quantiles": list(QUANTILES), "source": source, "rule": rule, "classes": classes}
    path.write_text(json.dumps(table, indent=1) + "\n")
    load_bands.cache_clear()
