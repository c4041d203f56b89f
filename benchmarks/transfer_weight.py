"""How much of a correction carries to kernels it was not fitted on? The evidence for ``BORROWED_WEIGHT``.

Eight transfers between measured devices of one vendor (Vidur A100 <-> A40, DeepBench V100 / P100 /
T4 in every direction): each source calibrated on its scoreboard fit rows, the target seeded with
no runs of its own, scored on the target's held-out rows. For each weight w (share of the
source's log-time correction applied; 0 = the model, 1 = all of it) the mean over target classes
of the median abs % error; then, leaving each transfer out, the weight the other seven choose and
what it gives on the one left out, under two rules: no worse than the model on the others' rows pooled, and
no worse on each other transfer's GEMM-like and other rows (``TRANSFER_WEIGHT`` is the weight no worse than
none on every transfer and part: 0 today). Intervals: a transferred class carries the uncalibrated model's band of
its op class (``perfmodel.uncalibrated_interval``); here that table is rebuilt per target from the dev set's
leave-one-device-out residuals (``benchmarks/lodo.py``'s folds) *without the target device's rows*, so no band saw the
device it is scored on. For comparison, the fixed band used before (10-90 % of the other transfers' residuals)
leaving each transfer out.

``--fallbacks`` also leaves each op class out of its scoreboard setup's fit (it then takes the
device's pooled fit) and each variant out (it takes its class's fit), scored on its held-out rows.

    python benchmarks/transfer_weight.py [--fallbacks]     # ~12 min CPU (+8 with --fallbacks; 32 first-runs draws)
    python benchmarks/transfer_weight.py --device-scale    # the first-runs table with one scale per device (before
                                                           # calibration/target_band.py's per-class scales)
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lodo
from measured_data import Row, all_rows
from scoreboard import fit_mask
from transfer_runs import first_runs, print_first_runs

import perfmodel
from perfmodel import uncalibrated_interval
from perfmodel.calibration import Calibration, build, fit_calibration, model, predict_calibrated, target_band
from perfmodel.calibration.classes import class_key, parent_key
from perfmodel.collectives import devices_per_node
from perfmodel.ops import make_op
from perfmodel.uncalibrated_interval import POOLED, ClassBand, band_key, class_band

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


GEMM_LABELS = ("matmul", "conv2d", "conv2d_bwd")


Bands = dict[str, ClassBand]


def lodo_bands_without() -> Callable[[str], Bands]:
    """``target -> the uncalibrated band table`` built from the dev set's leave-one-device-out residuals of every
    device but ``target`` (as ``lodo.py --write-intervals`` builds the shipped table from all of them)."""
    known = set(perfmodel.list_hardware())
    rows = [r for r in [*all_rows(), *lodo.extra_collectives()] if r.hardware in known and lodo._buildable(r)]
    devices = np.array([r.hardware for r in rows])
    folds = lodo.run_folds(rows, devices)
    ratio = np.array([r.measured_s for r in rows]) / folds.predicted
    classes = [band_key(make_op(r.op)) for r in rows]

    def without(target: str) -> Bands:
        out = {}
        for name in [*sorted(set(classes)), POOLED]:
            band = class_band(ratio, classes, devices.tolist(), name, left_out=devices == target)
            if band is not None:
                out[name] = ClassBand(band[0], band[1], 0, band[2], None)
        return out
    return without


def source_calibration(rows: list[Row], mask: np.ndarray[Any, np.dtype[np.bool_]], dataset: str,
                       source: str) -> Calibration:
    """The source device's calibration on its scoreboard fit rows (device time)."""
    fit = [r for r, m in zip(rows, mask, strict=True)
           if m and r.dataset == dataset and r.hardware == source and r.timing == "kernel"]
    return fit_calibration(source, [(r.op, r.measured_s) for r in fit])


def _transfer_rows(rows: list[Row], mask: np.ndarray[Any, np.dtype[np.bool_]],
                   bands_without: Callable[[str], Bands],
                   sources: dict[tuple[str, str], Calibration] | None = None) -> dict[str, np.ndarray[Any, Any]]:
    """Every transfer's held-out target rows at every weight: transfer id, label, GEMM-like, abs % error,
    log(measured / predicted) and inside the interval (rows x weights for the last three), the uncalibrated band
    table (which a transferred class's interval is) built without the target device."""
    shipped = uncalibrated_interval.load_bands
    sources = {} if sources is None else sources  # (data set, source device) -> its calibration, filled here
    out: dict[str, list[Any]] = {"transfer": [], "label": [], "gemm": [], "ape": [], "log_residual": [], "inside": []}
    for t, (dataset, source, target) in enumerate(TRANSFERS):
        if (dataset, source) not in sources:
            sources[(dataset, source)] = source_calibration(rows, mask, dataset, source)
        test = [r for r, m in zip(rows, mask, strict=True)
                if not m and r.dataset == dataset and r.hardware == target and r.timing == "kernel"]
        measured = np.array([r.measured_s for r in test])
        ape, log_residual, inside = [], [], []
        table = bands_without(target)
        for weight in WEIGHTS:
            model.TRANSFER_WEIGHT = weight
            seeded = fit_calibration(target, [], base=sources[(dataset, source)])
            uncalibrated_interval.load_bands = lambda path=None, table=table: table  # type: ignore[assignment]
            try:
                batch = predict_calibrated(target, [r.op for r in test], seeded)
            finally:
                uncalibrated_interval.load_bands = shipped
            assert batch.interval_s is not None
            ape.append(np.abs(batch.time_s / measured - 1.0) * 100.0)
            log_residual.append(np.log(measured / batch.time_s))
            inside.append((measured >= batch.interval_s[:, 0]) & (measured <= batch.interval_s[:, 1]))
        out["transfer"] += [t] * len(test)
        out["label"] += [r.label for r in test]
        out["gemm"] += [r.label in GEMM_LABELS for r in test]
        for name, values in (("ape", ape), ("log_residual", log_residual), ("inside", inside)):
            out[name].append(np.column_stack(values))
    return {k: np.concatenate(v) if k in ("ape", "log_residual", "inside") else np.array(v) for k, v in out.items()}


def _device_scale(*args: Any) -> tuple[float | None, dict[str, float]]:
    """``target_band.target_scales`` without the per-class scales (one scale per device)."""
    return target_band.target_scales(*args)[0], {}


def main() -> None:
    if "--device-scale" in sys.argv:
        setattr(build, "target_scales", _device_scale)  # noqa: B010 (build imports it by name)
    rows = all_rows()
    mask = fit_mask(rows)
    if "--fallbacks" in sys.argv:
        fallbacks(rows, mask, variants=False)
        fallbacks(rows, mask, variants=True)
    stored = model.TRANSFER_WEIGHT
    bands_without = lodo_bands_without()
    sources: dict[tuple[str, str], Calibration] = {}
    got = _transfer_rows(rows, mask, bands_without, sources)
    model.TRANSFER_WEIGHT = stored
    classes = sorted({(int(t), str(label)) for t, label in zip(got["transfer"], got["label"], strict=True)})
    table = np.array([np.median(got["ape"][(got["transfer"] == t) & (got["label"] == label)], axis=0)
                      for t, label in classes])
    print(f"{len(TRANSFERS)} transfers, {len(classes)} target classes: mean over classes of held-out median abs % "
          "error")
    print("  weight:      " + "  ".join(f"{w:>5.2f}" for w in WEIGHTS))
    print("  error:       " + "  ".join(f"{v:>5.1f}" for v in table.mean(axis=0)))
    for part, sel in (("GEMM-like", got["gemm"]), ("other", ~got["gemm"])):
        print(f"  {part:<9} rows: " + "  ".join(f"{v:>5.1f}" for v in np.median(got["ape"][sel], axis=0))
              + f"   (median over {int(sel.sum())} rows)")
    print("  inside 10-90 %: " + "  ".join(f"{v:>5.2f}" for v in got["inside"].mean(axis=0)))
    parts = {}  # (transfer, part) -> held-out median abs % error at each weight
    for t in range(len(TRANSFERS)):
        for name, of_part in (("GEMM-like", got["gemm"]), ("other", ~got["gemm"])):
            if ((got["transfer"] == t) & of_part).any():
                parts[(t, name)] = np.median(got["ape"][(got["transfer"] == t) & of_part], axis=0)
    print("held-out median abs % error per transfer and part at each weight:")
    for (t, name), medians in parts.items():
        print(f"  {TRANSFERS[t][1]:>22} -> {TRANSFERS[t][2]:<22} {name:<9} " + "  ".join(f"{v:>5.1f}" for v in medians))
    for rule, text in (("pooled", "no worse than the model on the others' GEMM-like and other rows pooled"),
                       ("each", "no worse than the model on each other transfer's GEMM-like and other rows")):
        print(f"leave one transfer out: the weight the others choose (the lowest mean class median among the weights "
              f"{text}), and on the one left out:")
        for t, transfer in enumerate(TRANSFERS):
            others, one = got["transfer"] != t, got["transfer"] == t
            if rule == "pooled":
                allowed = [j for j in range(len(WEIGHTS)) if all(
                    np.median(got["ape"][others & part, j]) <= np.median(got["ape"][others & part, 0])
                    for part in (got["gemm"], ~got["gemm"]) if (others & part).any())]
            else:
                allowed = [j for j in range(len(WEIGHTS)) if all(
                    medians[j] <= medians[0] for (u, _), medians in parts.items() if u != t)]
            rows_out = np.array([c[0] != t for c in classes])
            chosen = min(allowed, key=lambda j: float(table[rows_out, j].mean()))
            line = "; ".join(f"{name} median {np.median(got['ape'][one & part, 0]):.1f} -> "
                             f"{np.median(got['ape'][one & part, chosen]):.1f} %"
                             for name, part in (("GEMM-like", got["gemm"]), ("other", ~got["gemm"]))
                             if (one & part).any())
            print(f"  {transfer[1]:>22} -> {transfer[2]:<22} ({transfer[0]:<9}) w = {WEIGHTS[chosen]:.2f}: {line}; "
                  f"inside {got['inside'][one, chosen].mean():.2f}")
    never_worse = [j for j in range(len(WEIGHTS)) if all(m[j] <= m[0] for m in parts.values())]
    print("weights no worse than none on every transfer and part: "
          + ", ".join(f"{WEIGHTS[j]:.2f}" for j in never_worse))
    j = WEIGHTS.index(stored) if stored in WEIGHTS else 0
    residual = got["log_residual"][:, j]
    print(f"at the stored TRANSFER_WEIGHT {WEIGHTS[j]:.2f}: GEMM-like median "
          f"{np.median(got['ape'][got['gemm'], 0]):.1f} % (no transfer) -> "
          f"{np.median(got['ape'][got['gemm'], j]):.1f} %, "
          f"other {np.median(got['ape'][~got['gemm'], 0]):.1f} -> {np.median(got['ape'][~got['gemm'], j]):.1f} %; "
          f"rows inside their interval {got['inside'][:, j].mean():.2f}")
    print(f"per transfer, rows inside their interval at {WEIGHTS[j]:.2f} (the uncalibrated band of the op's class, "
          "its table built without the target device), and inside a fixed band (10-90 % of the other transfers' log "
          "residuals, per transfer equally weighted: the transfer band before):")
    for t, transfer in enumerate(TRANSFERS):
        others = got["transfer"] != t
        band = _weighted_band(residual[others], got["transfer"][others])
        one = residual[got["transfer"] == t]
        print(f"  {transfer[1]:>22} -> {transfer[2]:<22} inside {got['inside'][got['transfer'] == t, j].mean():.2f}; "
              f"fixed band [{band[0]:+.3f}, {band[1]:+.3f}]: inside {((one >= band[0]) & (one <= band[1])).mean():.2f}")
    print_first_runs(first_runs(rows, mask, bands_without, sources, TRANSFERS))


def _weighted_band(residual: np.ndarray[Any, Any], transfer: np.ndarray[Any, Any]) -> tuple[float, float]:
    """10 % and 90 % quantiles of ``residual``, each transfer's rows weighing the same in all."""
    order = np.argsort(residual)
    counts = np.bincount(transfer)
    weight = (1.0 / counts[transfer])[order]
    cumulative = np.cumsum(weight) / weight.sum()
    values = residual[order]
    low, high = (min(int(np.searchsorted(cumulative, q)), values.size - 1) for q in (0.1, 0.9))
    return float(values[low]), float(values[high])


if __name__ == "__main__":
    main()
