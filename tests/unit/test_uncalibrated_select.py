"""Rule "selected": each class's interval rule chosen by nested leave-one-device-out on its training devices."""

from __future__ import annotations

import numpy as np
import pytest

from perfmodel.uncalibrated_interval import POOLED, build_bands, class_band, symmetric_band
from perfmodel.uncalibrated_select import (
    CANDIDATES,
    candidate_bands,
    closest,
    nested_coverage,
    selected_bands,
    selected_rules,
)


def _data(seed: int) -> tuple[np.ndarray, list[str], list[str]]:
    """matmul on five devices (device effects 0.3 in log), softmax on two, ratios log-normal about them."""
    rng = np.random.default_rng(seed)
    ratio: list[float] = []
    classes: list[str] = []
    devices: list[str] = []
    for name, count in (("matmul", 5), ("softmax", 2)):
        for d in range(count):
            n = 40
            ratio += np.exp(rng.normal(0.3 * rng.normal(), 0.2, n)).tolist()
            classes += [name] * n
            devices += [f"d{d}"] * n
    return np.array(ratio), classes, devices


def test_closest_takes_the_rule_nearest_80_percent_and_the_earlier_on_a_tie() -> None:
    assert closest({"shifted": [1.0, 0.9], "symmetric": [0.8, 0.82], "pooled": [0.5]}) == "symmetric"
    assert closest({"shifted": [0.7], "symmetric": [0.9]}) == "shifted"  # both 0.1 away: the shipped one
    assert closest({}) == CANDIDATES[0]


def test_nested_coverage_scores_each_training_device_against_the_others_band() -> None:
    ratio, classes, devices = _data(1)
    dev, cls = np.array(devices), np.array(classes)
    left_out = dev == "d4"
    nested = nested_coverage(ratio, classes, devices, left_out)
    # matmul: four training devices, each scored once per rule; softmax: two, each against the other's band
    assert all(len(shares) == 4 for shares in nested["matmul"].values())
    assert all(len(shares) == 2 for shares in nested["softmax"].values())
    mine = (cls == "softmax") & (dev == "d0")
    other = (cls == "softmax") & (dev == "d1")
    low, high = symmetric_band(ratio[other], devices=["d1"] * int(other.sum()))
    expected = float(np.mean((ratio[mine] >= low) & (ratio[mine] <= high)))
    assert nested["softmax"]["symmetric"][0] == pytest.approx(expected)


def test_the_held_out_device_never_chooses_its_rule_or_band() -> None:
    ratio, classes, devices = _data(2)
    left_out = np.array(devices) == "d1"
    rules = selected_rules(ratio, classes, devices, left_out)
    bands = selected_bands(ratio, classes, devices, left_out)
    moved = ratio.copy()
    moved[left_out] *= 7.0  # the held-out device's rows anywhere at all
    assert selected_rules(moved, classes, devices, left_out) == rules
    assert selected_bands(moved, classes, devices, left_out) == bands


def test_a_class_with_one_training_device_takes_the_rule_chosen_over_every_class() -> None:
    ratio, classes, devices = _data(3)
    left_out = np.array(devices) == "d0"  # softmax keeps d1 alone: nothing of its own to score a rule on
    nested = nested_coverage(ratio, classes, devices, left_out)
    assert "softmax" not in nested
    pooled = {rule: [s for per in nested.values() for s in per.get(rule, [])] for rule in CANDIDATES}
    assert selected_rules(ratio, classes, devices, left_out)["softmax"] == closest(pooled)


def test_each_class_gets_the_band_of_its_chosen_rule_and_build_bands_checks_it_held_out() -> None:
    ratio, classes, devices = _data(4)
    none = np.zeros(ratio.size, dtype=bool)
    rules = selected_rules(ratio, classes, devices, none)
    candidates = candidate_bands(ratio, classes, devices, none)
    bands = selected_bands(ratio, classes, devices)
    for name, rule in rules.items():
        assert bands[name] == candidates[rule][name]
    assert bands[POOLED] == class_band(ratio, classes, devices, POOLED)
    table = build_bands(ratio, classes, devices, rule="selected")
    assert (table["matmul"].low_ratio, table["matmul"].high_ratio) == bands["matmul"][:2]
    cls, dev = np.array(classes), np.array(devices)
    shares = []
    for d in sorted(set(devices)):
        band = selected_bands(ratio, classes, devices, dev == d)["matmul"]
        held = ratio[(cls == "matmul") & (dev == d)]
        shares.append(np.mean((held >= band[0]) & (held <= band[1])))
    assert table["matmul"].device_coverage == pytest.approx(np.mean(shares))
    assert class_band(ratio, classes, devices, "softmax", rule="selected") == bands["softmax"]
