"""How a held-out run's error grows with the gap it sits in along a sweep, and what a band scaled to the scored
rows' gap would give the scoreboard (issue 22, docs/accuracy.md "Eleventh pass: ... (issue 22, branch calib13)").

The scoreboard fits every other size of a sweep (LLMCompass, all-reduce sweeps) and scores the sizes between: a
scored run sits mid-way in a gap of one fitted step. A k-fold (or leave-one-out) run held out of a sweep sits
mid-way in a gap of two fitted steps (its neighbours are fitted, itself is not), so its residual is drawn from a
farther geometry than the scored runs'. Here each small fitted class (``MIN_OPS``-``MAX_OPS`` distinct ops, sorted
by log bytes + log FLOPs: a sweep) is refitted (its chosen form, ``fit_with_cv``) without each interior contiguous
block of b = 1, 2, 3 ops and scored on the block: the gap is b + 1 fitted steps, a run d steps from the nearest
fitted op. Per class, the median |residual| at (gap, d) over that at (2, 1) (leave-one-out); the growth exponent p
in |r| ~ gap^p is log2 of the median over classes of the (4, 2) ratio (the mid-point of a gap twice leave-one-out's).
A band taken from leave-one-out residuals, carried to the scored mid-point of a one-step gap, is 2^-p times as wide:
the last lines score the scoreboard's in-range rows (every class's, so the figure is the rule's only where every
class is a sweep: LLMCompass) with their band times that factor (offline: nothing shipped).

    python benchmarks/sweep_gap.py [--dataset llmcompass] [--swap]   # ~1 minute
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measured_data import Row, all_rows
from scoreboard import fit_mask

import perfmodel
from perfmodel.calibration import curve, fit_calibration, predict_calibrated
from perfmodel.calibration.classes import class_keys
from perfmodel.calibration.fit import fit_forms, fit_with_cv
from perfmodel.collectives import devices_per_node
from perfmodel.ops import make_op

MIN_OPS, MAX_OPS = 8, 30  # a sweep class: enough ops for interior blocks of 3, few enough to refit each block
BLOCKS = (1, 2, 3)


def _setups(rows: list[Row], mask: np.ndarray[Any, np.dtype[np.bool_]]) -> dict[tuple[str, str], list[int]]:
    out: dict[tuple[str, str], list[int]] = defaultdict(list)
    known = set(perfmodel.list_hardware())
    for i, r in enumerate(rows):
        if r.hardware in known:
            out[(r.hardware, r.timing)].append(i)
    return out


def gap_ratios(rows: list[Row], mask: np.ndarray[Any, np.dtype[np.bool_]]) -> list[dict[tuple[int, int], float]]:
    """Per sweep class of every setup's fit rows: median |r| at (gap, d) over that at (2, 1); printed as it goes."""
    out = []
    for (hw, timing), idx in sorted(_setups(rows, mask).items()):
        fit = [rows[i] for i in idx if mask[i]]
        ops = [make_op(r.op) for r in fit]
        batch = perfmodel.predict_many(hw, ops, timing=timing, space="compact")  # type: ignore[arg-type]
        f = curve.features(batch)
        measured = np.array([r.measured_s for r in fit])
        keys = np.array(class_keys(ops, devices_per_node(perfmodel.load_hardware(hw))))
        for key in sorted(set(keys.tolist())):
            sel = np.flatnonzero((keys == key) & (batch.time_s > 0))
            distinct = {repr(fit[int(i)].op) for i in sel}
            if not MIN_OPS <= sel.size <= MAX_OPS or len(distinct) != sel.size:
                continue
            order = sel[np.argsort(f.log10_bytes[sel] + np.nan_to_num(f.log10_flops[sel]), kind="stable")]
            n = order.size
            form = fit_with_cv(f.take(order), measured[order], np.arange(n), 5, 0).form
            residuals: dict[tuple[int, int], list[float]] = defaultdict(list)
            for b in BLOCKS:
                for start in range(1, n - b):  # interior blocks: fitted ops on both sides
                    test, train = order[start:start + b], np.concatenate([order[:start], order[start + b:]])
                    theta = fit_forms(f.take(train), measured[train], None, [form])[form]
                    r = np.log(measured[test] / curve.time_s(theta, f.take(test)))
                    for j, value in enumerate(r.tolist()):
                        residuals[(b + 1, min(j + 1, b - j))].append(abs(value))
            base = float(np.median(residuals[(2, 1)]))
            if base <= 0:
                continue
            ratios = {gd: float(np.median(v)) / base for gd, v in residuals.items()}
            print(f"  {hw:<22} {timing:<6} {key:<32} ops {n:>2} form {form:<6} leave-one-out median |r| "
                  f"{base:.3f}; " + ", ".join(f"gap {g} d {d}: {v:.2f}" for (g, d), v in sorted(ratios.items())))
            out.append(ratios)
    return out


def scaled_coverage(rows: list[Row], mask: np.ndarray[Any, np.dtype[np.bool_]], factor: float) -> str:
    """The scored rows inside their interval with every in-range row's band (in log, about the prediction) times
    ``factor``: in range, beyond, all."""
    inside, in_range = [], []
    for (hw, timing), idx in sorted(_setups(rows, mask).items()):
        fit = [rows[i] for i in idx if mask[i]]
        test = [rows[i] for i in idx if not mask[i]]
        if not test:
            continue
        cal = fit_calibration(hw, [(r.op, r.measured_s) for r in fit], timing=timing)  # type: ignore[arg-type]
        batch = predict_calibrated(hw, [r.op for r in test], cal)
        assert batch.interval_s is not None and batch.in_calibrated_range is not None
        band = np.log(batch.interval_s / batch.time_s[:, None])
        band[batch.in_calibrated_range] *= factor
        r = np.log(np.array([t.measured_s for t in test]) / batch.time_s)
        inside.append((r >= band[:, 0]) & (r <= band[:, 1]))
        in_range.append(batch.in_calibrated_range)
    held, near = np.concatenate(inside), np.concatenate(in_range)
    return (f"in range {int(held[near].sum())}/{int(near.sum())}, beyond {int(held[~near].sum())}/"
            f"{int((~near).sum())}, all {held.mean():.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", default="llmcompass")
    parser.add_argument("--swap", action="store_true", help="the scoreboard's swapped halves")
    args = parser.parse_args()
    rows = [r for r in all_rows() if r.dataset == args.dataset]
    mask = fit_mask(rows) != args.swap
    print(f"{args.dataset}, {'swapped' if args.swap else 'default'} split: out-of-fold |residual| by gap "
          "(fitted steps) and distance d to the nearest fitted op, over leave-one-out's (gap 2, d 1)")
    ratios = gap_ratios(rows, mask)
    if not ratios:
        print("no sweep class")
        return
    cells = sorted({gd for r in ratios for gd in r})
    print("median over classes: " + ", ".join(
        f"gap {g} d {d}: {np.median([r[(g, d)] for r in ratios if (g, d) in r]):.2f}" for g, d in cells))
    mid = float(np.median([r[(4, 2)] for r in ratios if (4, 2) in r]))
    p = math.log2(mid) if mid > 0 else 0.0
    factor = 2.0 ** -max(p, 0.0)
    print(f"growth exponent p = log2 {mid:.2f} = {p:.2f}: a leave-one-out band carried to the scored mid-point of a "
          f"one-step gap is {factor:.2f} x as wide")
    for scale in (1.0, factor):
        print(f"scoreboard rows inside, in-range bands x {scale:.2f}: {scaled_coverage(rows, mask, scale)}")


if __name__ == "__main__":
    main()
