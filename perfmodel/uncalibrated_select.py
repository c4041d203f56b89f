"""Rule "selected" of the uncalibrated intervals: each class's band rule chosen by nested leave-one-device-out.

For the devices a band is built from (the training devices), every candidate rule in ``CANDIDATES`` is scored by
leaving each of the class's training devices out in turn, rebuilding the candidate's band from the other training
devices only, and counting that device's rows inside it; a rule's nested coverage is the mean of those shares
(each training device weighing the same, as in the band's own quantiles). The class takes the rule whose nested
coverage is closest to the band's nominal 80 % (ties: the earlier rule in ``CANDIDATES``, the shipped one first).
A class with fewer than two training devices has no device to score on its own; it takes the rule whose nested
coverage over every scorable class's cells is closest to 80 % (``POOLED_SELECTION``). This is model selection by
cross-validation on the training devices (docs/model.md, "Uncalibrated intervals"); the device the band is
checked on never chooses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from perfmodel.ops.base import FloatArray
from perfmodel.uncalibrated_interval import (
    FAMILIES,
    POOLED,
    QUANTILES,
    class_band,
    conformal_bands,
    device_balanced_band,
    symmetric_band,
)

# candidate rules, the shipped one first: "shifted" (its union with the pooled band below MIN_DEVICES devices),
# "symmetric" (``symmetric_band`` at any device count), "conformal" (``conformal_bands``), "pooled" (the band pooled
# over every class, device-balanced)
CANDIDATES = ("shifted", "symmetric", "conformal", "pooled")
TARGET = QUANTILES[1] - QUANTILES[0]  # the nominal coverage, 0.8
POOLED_SELECTION = True  # a class with < 2 training devices takes the rule chosen over every class's cells
SELECT_MIN_DEVICES = 2  # training devices a class needs to choose its own rule (else the pooled choice)
POOL_WEIGHT = "cell"  # in the pooled choice each (class, device) cell weighs the same ("class": each class)
GROUPING = "class"  # whose nested shares choose a class's rule: its own ("class"), its family's, or every class's
Band = tuple[float, float, int]
BoolArray = np.ndarray[Any, np.dtype[np.bool_]]


def candidate_bands(ratio: FloatArray, classes: Sequence[str], devices: Sequence[str], left_out: BoolArray
                    ) -> dict[str, dict[str, Band]]:
    """Rule -> class -> band, each built from the rows not ``left_out`` (every class present there)."""
    cls, dev = np.asarray(classes), np.asarray(devices)
    kept = np.isfinite(ratio) & (ratio > 0) & ~left_out
    names = sorted(set(cls[kept].tolist()))
    if not names:
        return {rule: {} for rule in CANDIDATES}
    pooled = device_balanced_band(ratio[kept], dev[kept].tolist())
    pooled_band = (*pooled, len(set(dev[kept].tolist())))
    out: dict[str, dict[str, Band]] = {"shifted": {}, "symmetric": {}, "pooled": {}}
    for name in names:
        mine = kept & (cls == name)
        count = len(set(dev[mine].tolist()))
        shifted = class_band(ratio, classes, devices, name, left_out, "shifted")
        assert shifted is not None
        out["shifted"][name] = shifted
        out["symmetric"][name] = (*symmetric_band(ratio[mine], dev[mine].tolist()), count)
        out["pooled"][name] = (pooled_band[0], pooled_band[1], count)
    out["conformal"] = conformal_bands(ratio, classes, devices, left_out)
    return out


def nested_coverage(ratio: FloatArray, classes: Sequence[str], devices: Sequence[str], left_out: BoolArray
                    ) -> dict[str, dict[str, list[float]]]:
    """Class -> rule -> the shares of each training device's rows inside that rule's band rebuilt without it."""
    cls, dev = np.asarray(classes), np.asarray(devices)
    kept = np.isfinite(ratio) & (ratio > 0) & ~left_out
    out: dict[str, dict[str, list[float]]] = {}
    for device in sorted(set(dev[kept].tolist())):
        inner = candidate_bands(ratio, classes, devices, left_out | (dev == device))
        held = kept & (dev == device)
        for name in sorted(set(cls[held].tolist())):
            rows = ratio[held & (cls == name)]
            if not (kept & (dev != device) & (cls == name)).any():
                continue  # no other training device has the class: nothing to score it on
            for rule in CANDIDATES:
                band = inner[rule].get(name)
                if band is None:
                    continue
                share = float(np.mean((rows >= band[0]) & (rows <= band[1])))
                out.setdefault(name, {}).setdefault(rule, []).append(share)
    return out


def closest(scores: dict[str, list[float]]) -> str:
    """The rule whose mean share is closest to TARGET (the earlier in CANDIDATES on a tie)."""
    scored = [(round(abs(float(np.mean(scores[r])) - TARGET), 9), i, r)  # rounded: 0.7 and 0.9 tie
              for i, r in enumerate(CANDIDATES) if scores.get(r)]
    return min(scored)[2] if scored else CANDIDATES[0]


def selected_rules(ratio: FloatArray, classes: Sequence[str], devices: Sequence[str], left_out: BoolArray
                   ) -> dict[str, str]:
    """Class -> its rule, chosen on the rows not ``left_out`` by nested leave-one-device-out."""
    cls = np.asarray(classes)
    kept = np.isfinite(ratio) & (ratio > 0) & ~left_out
    nested = nested_coverage(ratio, classes, devices, left_out)
    pooled_scores: dict[str, list[float]] = {}
    for per_rule in nested.values():
        for rule, shares in per_rule.items():
            pooled_scores.setdefault(rule, []).extend(shares if POOL_WEIGHT == "cell" else [float(np.mean(shares))])
    fallback = closest(pooled_scores) if POOLED_SELECTION else CANDIDATES[0]
    nested = {name: per_rule for name, per_rule in nested.items()
              if max(len(shares) for shares in per_rule.values()) >= SELECT_MIN_DEVICES}
    if GROUPING != "class":
        groups: dict[str, dict[str, list[float]]] = {}
        for name, per_rule in nested.items():
            for rule, shares in per_rule.items():
                groups.setdefault(_group(name), {}).setdefault(rule, []).extend(shares)
        return {name: closest(groups[_group(name)]) if _group(name) in groups else fallback
                for name in sorted(set(cls[kept].tolist()))}
    return {name: closest(nested[name]) if name in nested else fallback for name in sorted(set(cls[kept].tolist()))}


def _group(name: str) -> str:
    """The group whose nested shares choose ``name``'s rule under ``GROUPING``."""
    return FAMILIES.get(name, "memory") if GROUPING == "family" else POOLED


def selected_bands(ratio: FloatArray, classes: Sequence[str], devices: Sequence[str],
                   left_out: BoolArray | None = None) -> dict[str, Band]:
    """Every class's band from the rows not ``left_out``, each by the rule ``selected_rules`` gives it."""
    mask = np.zeros(ratio.size, dtype=bool) if left_out is None else np.asarray(left_out, dtype=bool)
    rules = selected_rules(ratio, classes, devices, mask)
    bands = candidate_bands(ratio, classes, devices, mask)
    out = {name: bands[rule][name] for name, rule in rules.items() if name in bands[rule]}
    pooled = class_band(ratio, classes, devices, POOLED, mask)
    if pooled is not None:
        out[POOLED] = pooled
    return out
