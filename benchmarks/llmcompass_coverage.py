"""LLMCompass's calibrated coverage on the scoreboard's split, by kind of scored row, with the band switches tried.

Fits each LLMCompass setup (device, timing) on the scoreboard's fit rows exactly as ``accuracy.py --scoreboard``
does (the data set's rows only: its split does not depend on the other data sets) and prints, per scored row,
its class, whether it is in calibrated range, unvaried (beyond its class's data only through a shape number the fit
never varied) or beyond otherwise, its log(measured / calibrated), its band and how far along it the row sits
(|r| / the edge on its side). ~10 s CPU a split (docs/accuracy.md, fifteenth pass, cov22).

    python benchmarks/llmcompass_coverage.py [--swap] [--rows] [--bridge] [--unbiased-ranks] [--unvaried-in-range]
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from typing import Any

import numpy as np
from measured_data import Row, all_rows
from scoreboard import fit_mask

import perfmodel
from perfmodel.calibration import bands, bands_apply, distance, fit_calibration, predict_calibrated
from perfmodel.calibration.classes import class_key
from perfmodel.calibration.shape import op_features
from perfmodel.collectives import devices_per_node
from perfmodel.ops import make_op


def kind(entry: Any, op: dict[str, Any], in_range: bool) -> str:
    """'in range', 'unvaried' (a shape number its class's fit held at one value, changed) or 'beyond'."""
    if in_range:
        return "in range"
    if entry is None or not entry.shape_range:
        return "beyond"
    low, high = (np.array(v, dtype=float) for v in entry.shape_range)
    numbers = op_features(make_op(op))[-low.size :]
    moved = (low == high) & (np.abs(np.array(numbers) - low) > 1e-9)
    return "unvaried" if bool(moved.any()) else "beyond"


def score(rows: list[Row], swap: bool) -> list[tuple[str, str, str, float, float, float, bool]]:
    """Per scored row: hardware, class, kind, log residual, band low and high (log, around the calibrated time),
    inside."""
    mask = fit_mask(rows) != swap
    setups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        setups[(r.hardware, r.timing)].append(i)
    out = []
    for (hw, timing), idx in sorted(setups.items()):
        fit = [rows[i] for i in idx if mask[i]]
        test = [rows[i] for i in idx if not mask[i]]
        cal = fit_calibration(hw, [(r.op, r.measured_s) for r in fit], timing=timing)  # type: ignore[arg-type]
        got = predict_calibrated(hw, [r.op for r in test], cal)
        assert got.interval_s is not None and got.in_calibrated_range is not None
        per_node = devices_per_node(perfmodel.load_hardware(hw))
        for j, r in enumerate(test):
            key = class_key(make_op(r.op), per_node)
            lo, hi = np.log(got.interval_s[j] / got.time_s[j])
            residual = math.log(r.measured_s / float(got.time_s[j]))
            inside = bool(got.interval_s[j, 0] <= r.measured_s <= got.interval_s[j, 1])
            out.append(
                (
                    hw,
                    key,
                    kind(cal.classes.get(key), r.op, bool(got.in_calibrated_range[j])),
                    residual,
                    float(lo),
                    float(hi),
                    inside,
                )
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--swap", action="store_true", help="the scoreboard's swapped split")
    parser.add_argument("--rows", action="store_true", help="print every scored row")
    parser.add_argument("--bridge", action="store_true", help="distance.BRIDGE on")
    parser.add_argument("--unbiased-ranks", action="store_true", help="bands.UNBIASED_RANKS on")
    parser.add_argument("--unvaried-in-range", action="store_true", help="bands_apply.UNVARIED_KEEP_IN_RANGE on")
    args = parser.parse_args()
    distance.BRIDGE, bands.UNBIASED_RANKS = args.bridge, args.unbiased_ranks
    bands_apply.UNVARIED_KEEP_IN_RANGE = args.unvaried_in_range
    scored = score([r for r in all_rows() if r.dataset == "llmcompass"], args.swap)
    if args.rows:
        for hw, key, what, r, lo, hi, inside in scored:
            print(f"{hw:<22} {key:<32} {what:<9} r {r:+.3f} band {lo:+.3f} {hi:+.3f} {'in' if inside else 'OUT'}")
    for what in ("in range", "unvaried", "beyond"):
        chosen = [s for s in scored if s[2] == what]
        along = sorted(
            abs(s[3] / (s[5] if s[3] > 0 else s[4])) if (s[5] if s[3] > 0 else s[4]) else math.inf for s in chosen
        )
        if chosen:
            print(
                f"{what:<9} {sum(s[6] for s in chosen):>3} of {len(chosen):>3} inside; |r| / edge sorted: "
                + " ".join(f"{v:.2f}" for v in along)
            )
    print(
        f"llmcompass {'swapped' if args.swap else 'default'}: {sum(s[6] for s in scored)} of {len(scored)} "
        f"inside, {np.mean([s[6] for s in scored]):.3f}"
    )


if __name__ == "__main__":
    main()
