"""How much of a correction carries to kernels it was not fitted on? The evidence for ``BORROWED_WEIGHT``.

Eight transfers between measured devices of one vendor (Vidur A100 <-> A40, DeepBench V100 / P100 /
T4 in every direction): each source calibrated on its scoreboard fit rows, the target seeded with
no runs of its own, scored on the target's held-out rows. For each weight w (share of the
source's log-time correction applied; 0 = the model, 1 = all of it) the mean over target classes
of the median abs % error; then, leaving each transfer out, the weight the other seven choose and
what it gives on the one left out (0.3 in seven of the eight).

``--fallbacks`` also leaves each op class out of its scoreboard setup's fit (it then takes the
device's pooled fit) and each variant out (it takes its class's fit), scored on its held-out rows.

    python benchmarks/transfer_weight.py [--fallbacks]     # about 2 min (10 with --fallbacks)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measured_data import Row, all_rows
from scoreboard import fit_mask

import perfmodel
from perfmodel.calibration import Calibration, fit_calibration, model, predict_calibrated
from perfmodel.calibration.classes import class_key, parent_key
from perfmodel.collectives import devices_per_node
from perfmodel.ops import make_op

WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
DEEPBENCH = ("nvidia-v100-sxm2-32gb", "nvidia-p100-sxm2-16gb", "nvidia-t4")
TRANSFERS = [("vidur", "nvidia-a100-sxm4-80gb", "nvidia-a40"), ("vidur", "nvidia-a40", "nvidia-a100-sxm4-80gb"),
             *(("deepbench", a, b) for a in DEEPBENCH for b in DEEPBENCH if a != b)]


def fallbacks(rows: list[Row], mask: np.ndarray[Any, np.dtype[np.bool_]], variants: bool) -> None:
    """Leave each class (or variant) out of its setup's fit; its held-out rows then use the device's
    pooled fit (or the class's fit) at each weight."""
    known = set(perfmodel.list_hardware())
    per_node = {hw: devices_per_node(perfmodel.load_hardware(hw)) for hw in known}
    keys = [class_key(make_op(r.op), per_node[r.hardware]) if r.hardware in known else "" for r in rows]
    setups: dict[tuple[str, str, str], list[int]] = {}
    for i, r in enumerate(rows):
        if r.hardware in known:
            setups.setdefault((r.dataset, r.hardware, r.timing), []).append(i)
    table: list[list[float]] = []
    for (_, hw, timing), idx in sorted(setups.items()):
        present = sorted({keys[i] for i in idx})
        left_out = ([{k} for k in present if parent_key(k) is not None] if variants else
                    [{k for k in present if (parent_key(k) or k) == c} for c in sorted({parent_key(k) or k
                                                                                        for k in present})])
        for out in left_out:
            fit = [i for i in idx if mask[i] and keys[i] not in out]
            test = [i for i in idx if not mask[i] and keys[i] in out]
            parents = {parent_key(k) for k in out}
            if len(test) < 5 or len(fit) < 6 or (variants and not any(parent_key(keys[i]) in parents for i in fit)):
                continue
            cal = fit_calibration(hw, [(rows[i].op, rows[i].measured_s) for i in fit], timing=timing)  # type: ignore[arg-type]
            ops = [rows[i].op for i in test]
            measured = np.array([rows[i].measured_s for i in test])
            line = []
            for weight in WEIGHTS:
                model.BORROWED_WEIGHT = weight
                predicted = predict_calibrated(hw, ops, cal).time_s
                line.append(float(np.median(np.abs(predicted / measured - 1.0) * 100.0)))
            table.append(line)
    errors = np.array(table)
    what = "variants on their class's fit" if variants else "op classes on the device's pooled fit"
    print(f"{len(errors)} {what}: mean held-out median abs % error")
    print("  weight: " + "  ".join(f"{w:>5.2f}" for w in WEIGHTS))
    print("  error:  " + "  ".join(f"{v:>5.1f}" for v in errors.mean(axis=0)))


def main() -> None:
    rows = all_rows()
    mask = fit_mask(rows)
    if "--fallbacks" in sys.argv:
        fallbacks(rows, mask, variants=False)
        fallbacks(rows, mask, variants=True)
    sources: dict[tuple[str, str], Calibration] = {}
    medians: dict[tuple[tuple[str, str, str], str], list[float]] = {}
    for dataset, source, target in TRANSFERS:
        if (dataset, source) not in sources:
            fit = [r for r, m in zip(rows, mask, strict=True)
                   if m and r.dataset == dataset and r.hardware == source and r.timing == "kernel"]
            sources[(dataset, source)] = fit_calibration(source, [(r.op, r.measured_s) for r in fit])
        test = [r for r, m in zip(rows, mask, strict=True)
                if not m and r.dataset == dataset and r.hardware == target and r.timing == "kernel"]
        measured = np.array([r.measured_s for r in test])
        labels = np.array([r.label for r in test])
        for weight in WEIGHTS:
            model.BORROWED_WEIGHT = weight
            seeded = fit_calibration(target, [], base=sources[(dataset, source)])
            predicted = predict_calibrated(target, [r.op for r in test], seeded).time_s
            for label in sorted(set(labels)):
                sel = labels == label
                ape = np.abs(predicted[sel] / measured[sel] - 1.0) * 100.0
                medians.setdefault(((dataset, source, target), label), []).append(float(np.median(ape)))
    keys = list(medians)
    table = np.array([medians[k] for k in keys])
    print(f"{len(TRANSFERS)} transfers, {len(keys)} target classes: mean over classes of held-out median abs % error")
    print("  weight: " + "  ".join(f"{w:>5.2f}" for w in WEIGHTS))
    print("  error:  " + "  ".join(f"{v:>5.1f}" for v in table.mean(axis=0)))
    print("leave one transfer out: the weight the others choose, and on the one left out (mean class median %)")
    for transfer in TRANSFERS:
        out = np.array([k[0] == transfer for k in keys])
        chosen = int(np.argmin(table[~out].mean(axis=0)))
        left = table[out]
        print(f"  {transfer[1]:>22} -> {transfer[2]:<22} ({transfer[0]:<9}) w = {WEIGHTS[chosen]:.2f}: "
              f"{left[:, chosen].mean():5.1f}   (model {left[:, 0].mean():5.1f}, all of it {left[:, -1].mean():5.1f})")


if __name__ == "__main__":
    main()
