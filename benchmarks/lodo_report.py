"""The leave-one-device-out run's report (``benchmarks/lodo.py``): per class x device error and bias with the
held-out 10-90 % interval coverage, the collectives by message size, and the band table it writes for the
uncalibrated model (``perfmodel/uncalibrated_intervals.json``)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from lodo_network import _in_scope
from measured_data import Row

from perfmodel.ops import make_op
from perfmodel.uncalibrated_interval import band_key, build_bands, class_band, write_bands

BANDS = (("< 1 MiB", 0.0, 2.0**20), ("1-64 MiB", 2.0**20, 2.0**26 + 1), ("> 64 MiB", 2.0**26 + 1, float("inf")))


@dataclasses.dataclass
class Folds:
    """A leave-one-out run's predictions of every row, held out and shipped, and each fold's fitted defaults."""

    predicted: np.ndarray  # held-out prediction of every row (its fold's fitted defaults)
    shipped: np.ndarray  # prediction with the shipped defaults
    fitted: dict[str, dict[str, float]]  # fold -> fitted value per default


def intervals(rows: Sequence[Row], fold_of: np.ndarray, predicted: np.ndarray, measured: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per row, [low, high]: its prediction times the 10-90 % band of its class built without its fold's rows
    (``perfmodel.uncalibrated_interval.class_band``: devices weigh the same; nan where no other fold has it)."""
    labels = [r.label for r in rows]
    devices = [r.hardware for r in rows]
    label_array = np.array(labels)
    ratio = measured / predicted
    low, high = np.full(len(rows), np.nan), np.full(len(rows), np.nan)
    for fold in set(fold_of):
        for label in np.unique(label_array[fold_of == fold]):
            if not ((fold_of != fold) & (label_array == label)).any():
                continue
            band = class_band(ratio, labels, devices, str(label), left_out=fold_of == fold)
            if band is None:
                continue
            mine = (fold_of == fold) & (label_array == label)
            low[mine], high[mine] = predicted[mine] * band[0], predicted[mine] * band[1]
    return low, high


def write_intervals(rows: Sequence[Row], folds: Folds, path: Path) -> list[str]:
    """Store the uncalibrated model's band table from the held-out predictions; lines saying what it holds."""
    measured = np.array([r.measured_s for r in rows])
    classes = [band_key(make_op(r.op)) for r in rows]
    bands = build_bands(measured / folds.predicted, classes, [r.hardware for r in rows])
    source = (f"benchmarks/lodo.py --write-intervals: {len(rows)} dev-set rows on "
              f"{len({r.hardware for r in rows})} devices, each predicted with defaults fitted without its device")
    write_bands(bands, source, path)
    out = [f"\nwrote {path}: 10-90 % band of measured/predicted per class (coverage: leave-one-device-out, "
           "of rows / mean over devices)"]
    out += [f"  {name:<12} x{b.low_ratio:.2f} .. x{b.high_ratio:.2f}  rows {b.rows:>5}  devices {b.devices}  "
            f"coverage {_share(b.coverage)} / {_share(b.device_coverage)}" for name, b in bands.items()]
    return out


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f} %"


def table(rows: Sequence[Row], folds: Folds, fold_of: np.ndarray, markdown: bool) -> list[str]:
    measured = np.array([r.measured_s for r in rows])
    low, high = intervals(rows, fold_of, folds.predicted, measured)
    cells: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        cells[(row.label, row.hardware)].append(i)
    head = ("op class", "device", "rows", "shipped med %", "p90 %", "bias", "LODO med %", "p90 %", "bias",
            "10-90% cov.")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] if markdown else [
        f"{head[0]:<12} {head[1]:<24} {head[2]:>5} {head[3]:>13} {head[4]:>6} {head[5]:>5} {head[6]:>10} "
        f"{head[7]:>6} {head[8]:>5} {head[9]:>13}"]
    for (label, hw), idx in sorted(cells.items()):
        s, p, m = folds.shipped[idx], folds.predicted[idx], measured[idx]
        se, pe = np.abs(s / m - 1) * 100, np.abs(p / m - 1) * 100
        known = np.isfinite(low[idx])
        cov = f"{np.mean((m[known] >= low[idx][known]) & (m[known] <= high[idx][known])) * 100:.0f} %" \
            if known.any() else "-"
        values = (label, hw, str(len(idx)), f"{np.median(se):.1f}", f"{np.percentile(se, 90):.1f}",
                  f"{np.median(s / m):.2f}", f"{np.median(pe):.1f}", f"{np.percentile(pe, 90):.1f}",
                  f"{np.median(p / m):.2f}", cov)
        out.append("| " + " | ".join(values) + " |" if markdown else
                   f"{values[0]:<12} {values[1]:<24} {values[2]:>5} {values[3]:>13} {values[4]:>6} {values[5]:>5} "
                   f"{values[6]:>10} {values[7]:>6} {values[8]:>5} {values[9]:>13}")
    labels = np.array([r.label for r in rows])
    hardware = np.array([r.hardware for r in rows])
    out.append("")
    for label in sorted(set(labels)):
        sel = labels == label
        pe = np.abs(folds.predicted[sel] / measured[sel] - 1) * 100
        known = sel & np.isfinite(low)
        inside = (measured[known] >= low[known]) & (measured[known] <= high[known])
        share = float(np.mean(inside)) * 100 if known.any() else float("nan")
        # each device weighing the same: the mean of the held-out devices' own shares
        per_device = [float(np.mean((measured[m] >= low[m]) & (measured[m] <= high[m]))) * 100
                      for m in (known & (hardware == hw) for hw in sorted(set(hardware[known].tolist()))) if m.any()]
        device_share = float(np.mean(per_device)) if per_device else float("nan")
        out.append(f"{label:<12} all devices  rows {int(sel.sum()):>5}  LODO median {np.median(pe):5.1f} %  "
                   f"p90 {np.percentile(pe, 90):6.1f} %  10-90 % interval coverage {share:5.1f} % "
                   f"(mean over devices {device_share:5.1f} %)")
    return out


def bands(rows: Sequence[Row], folds: Folds) -> list[str]:
    """All-reduce and send/recv by message size: shipped and leave-one-out median |error| and bias."""
    measured = np.array([r.measured_s for r in rows])
    out = ["", f"{'collective':<10} {'rows':<24} {'band':<9} {'n':>4} {'shipped med %':>13} {'bias':>5} "
               f"{'LODO med %':>10} {'bias':>5}"]
    for kind in ("allreduce", "sendrecv"):
        for scope in ("all", "network known", "one node", "across nodes", "across, unknown network"):
            for band, low, high in BANDS:
                sel = np.array([r.label == kind and low <= float(r.op["bytes"]) < high and _in_scope(r, scope)
                                for r in rows])
                if not sel.any():
                    continue
                s, p, m = folds.shipped[sel], folds.predicted[sel], measured[sel]
                out.append(f"{kind:<10} {scope:<24} {band:<9} {int(sel.sum()):>4} "
                           f"{np.median(np.abs(s / m - 1)) * 100:>13.1f} {np.median(s / m):>5.2f} "
                           f"{np.median(np.abs(p / m - 1)) * 100:>10.1f} {np.median(p / m):>5.2f}")
    return out
