"""Would a transferred class's band be more honest split by the op's roofline regime on the target? (issue 22 goal 3)

A class transferred to a device without runs of its own carries the uncalibrated model's band of its op class
(``perfmodel.uncalibrated_interval``): 10-90 % of the dev set's leave-one-device-out residuals, devices weighing
the same. Its coverage per target runs 0.69 (P100) to 0.99 (A100). This script scores band rules that use what
the model knows of the op on the target before any run there: which bound its predicted time (``CostBatch.bound``)
as a regime, read from the device's own spec tables (``perfmodel.machine.tables``), not from engine names:

- ``matrix``: a matrix engine that runs no vector work (tensor cores, matrix cores), so devices without them
  (P100, MI25) and their fp32 GEMMs fall in ``vector``;
- ``vector``: the vector or special-function engines;
- ``latency``: the fixed launch floor; ``memory``: a memory level or link (DRAM, L2, LLC, the network).

Rules (each band built from every device but the target: leave-one-device-out, as the shipped table is):

- ``class``: today's band of the op class (fewer than 3 devices: its union with the pooled band);
- ``regime>=N``: the band of (class, regime) where N or more other devices have rows of it, else ``class``;
- ``hull>=N``: the union of the ``class`` and (class, regime) bands;
- ``matrix engine``: the class's band from the other devices that do (or do not) have a matrix engine as the
  target does (two or more of them; else ``class``);
- ``envelope`` / ``envelope regime``: the lowest 10 % and highest 90 % quantile of any one other device's rows.

Scored two ways: every device's rows with its leave-one-device-out prediction (``lodo.run_folds``), and each
transfer target's held-out scoreboard rows (``scoreboard.fit_mask``; kernel timing) with the shipped model's
time, which is what a transferred class predicts at ``TRANSFER_WEIGHT`` 0 (so ``transfer_weight.py``'s figure
for every source of that target).

    python benchmarks/transfer_bands.py [--cache /tmp/folds.pkl]   # about 6-10 min (the folds), seconds cached
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lodo
from measured_data import Row, all_rows
from scoreboard import fit_mask

import perfmodel
from perfmodel.machine import tables
from perfmodel.ops import make_op
from perfmodel.uncalibrated_interval import MIN_DEVICES, band_key, device_balanced_band

Mask = np.ndarray[Any, np.dtype[np.bool_]]
TARGETS = {"nvidia-a40": "vidur", "nvidia-a100-sxm4-80gb": "vidur", "nvidia-p100-sxm2-16gb": "deepbench",
           "nvidia-t4": "deepbench", "nvidia-v100-sxm2-32gb": "deepbench"}  # transfer_weight.TRANSFERS' targets
Band = tuple[float, float]


def regime_of(hardware: str, bound: list[str]) -> list[str]:
    """Per row, the regime its bound name falls in on ``hardware`` (from the device's matrix and vector paths)."""
    t = tables(perfmodel.load_hardware(hardware))
    vector = {p.engine for p in t.vector_paths} | {t.special_engine}
    matrix = {p.engine for p in t.matrix_paths} - vector
    return ["matrix" if b in matrix else "vector" if b in vector else "latency" if b == "latency" else "memory"
            for b in bound]


def has_matrix_engine(hardware: str) -> bool:
    """Whether the spec declares a matrix engine that runs no vector work (tensor cores, matrix cores)."""
    t = tables(perfmodel.load_hardware(hardware))
    return bool({p.engine for p in t.matrix_paths} - {p.engine for p in t.vector_paths} - {t.special_engine})


def residuals(rows: list[Row], cache: Path | None) -> dict[str, Any]:
    """Leave-one-device-out and shipped predictions, class, regime and held-out flag of every dev-set row."""
    if cache is not None and cache.exists():
        data: dict[str, Any] = pickle.loads(cache.read_bytes())
        return data
    devices = np.array([r.hardware for r in rows])
    folds = lodo.run_folds(rows, devices)
    regime = np.empty(len(rows), dtype=object)
    for hw in sorted(set(devices.tolist())):
        for timing in sorted({r.timing for r in rows if r.hardware == hw}):
            idx = [i for i, r in enumerate(rows) if r.hardware == hw and r.timing == timing]
            batch = perfmodel.predict_many(hw, [rows[i].op for i in idx], timing=timing)  # type: ignore[arg-type]
            regime[idx] = regime_of(hw, batch.bound.tolist())
    data = {"lodo": folds.predicted, "shipped": folds.shipped, "regime": regime.astype(str)}
    if cache is not None:
        cache.write_bytes(pickle.dumps(data))
    return data


def rules(ratio: np.ndarray[Any, Any], cls: np.ndarray[Any, Any], reg: np.ndarray[Any, Any],
          dev: np.ndarray[Any, Any]) -> dict[str, Callable[[str, str, str], Band]]:
    """Rule name -> (target, class, regime) -> band of ratios, built without the target's rows."""
    ok = np.isfinite(ratio) & (ratio > 0)

    def balanced(mask: Mask) -> Band:
        return device_balanced_band(ratio[mask], dev[mask].tolist())

    def by_class(target: str, c: str, _: str) -> Band:
        keep = ok & (dev != target)
        pooled, mine = balanced(keep), keep & (cls == c)
        if not mine.any():
            return pooled
        low, high = balanced(mine)
        if len(set(dev[mine].tolist())) < MIN_DEVICES:
            low, high = min(low, pooled[0]), max(high, pooled[1])
        return low, high

    matrix_engine = {d: has_matrix_engine(d) for d in set(dev.tolist())}
    feature = np.array([matrix_engine[d] for d in dev.tolist()])

    def same_feature(target: str, c: str, r: str) -> Band:
        mine = ok & (dev != target) & (cls == c) & (feature == matrix_engine[target])
        return by_class(target, c, r) if len(set(dev[mine].tolist())) < 2 else balanced(mine)

    def by_regime(need: int, hull: bool) -> Callable[[str, str, str], Band]:
        def band(target: str, c: str, r: str) -> Band:
            base = by_class(target, c, r)
            mine = ok & (dev != target) & (cls == c) & (reg == r)
            if len(set(dev[mine].tolist())) < need:
                return base
            low, high = balanced(mine)
            return (min(low, base[0]), max(high, base[1])) if hull else (low, high)
        return band

    def envelope(split: bool) -> Callable[[str, str, str], Band]:
        def band(target: str, c: str, r: str) -> Band:
            mine = ok & (dev != target) & (cls == c) & ((reg == r) if split else True)
            others = sorted(set(dev[mine].tolist()))
            if len(others) < 2:
                return by_class(target, c, r)
            q = np.array([np.quantile(np.log(ratio[mine & (dev == d)]), [0.1, 0.9]) for d in others])
            return float(np.exp(q[:, 0].min())), float(np.exp(q[:, 1].max()))
        return band

    return {"class (today)": by_class, "regime>=2": by_regime(2, False), "regime>=3": by_regime(3, False),
            "hull>=2": by_regime(2, True),
            "matrix engine": same_feature, "envelope": envelope(False), "envelope regime": envelope(True)}


def coverage(band: Callable[[str, str, str], Band], target: str, rows: Mask, ratio: np.ndarray[Any, Any],
             cls: np.ndarray[Any, Any], reg: np.ndarray[Any, Any]) -> float:
    """Share of ``rows`` (all on ``target``) inside the band the rule gives their (class, regime)."""
    inside = 0
    for key in sorted(set(zip(cls[rows].tolist(), reg[rows].tolist(), strict=True))):
        mine = rows & (cls == key[0]) & (reg == key[1])
        low, high = band(target, *key)
        inside += int(np.sum((ratio[mine] >= low) & (ratio[mine] <= high)))
    return inside / max(int(rows.sum()), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, help="pickle of the folds' predictions (written if absent)")
    args = parser.parse_args()
    known = set(perfmodel.list_hardware())
    scored = all_rows()
    held = fit_mask(scored) == 0
    pairs = [(r, bool(h)) for r, h in zip(scored, held, strict=True)] + [(r, False) for r in lodo.extra_collectives()]
    kept = [(r, h) for r, h in pairs if r.hardware in known and lodo._buildable(r)]
    rows = [r for r, _ in kept]
    data = residuals(rows, args.cache)
    measured = np.array([r.measured_s for r in rows])
    dev, reg = np.array([r.hardware for r in rows]), np.asarray(data["regime"])
    cls = np.array([band_key(make_op(r.op)) for r in rows])
    lodo_ratio, shipped_ratio = measured / data["lodo"], measured / data["shipped"]
    transfer_rows = {t: np.array([h and r.dataset == s and r.timing == "kernel" and r.hardware == t for r, h in kept])
                     for t, s in TARGETS.items()}
    ok = np.isfinite(lodo_ratio) & (lodo_ratio > 0)
    devices = sorted(set(dev.tolist()))
    print("rows per (device, regime): " + "; ".join(
        f"{d} " + ", ".join(f"{r} {int(np.sum((dev == d) & (reg == r)))}" for r in sorted(set(reg[dev == d].tolist())))
        for d in devices))
    lodo_bands = rules(lodo_ratio, cls, reg, dev)
    print("\nleave-one-device-out coverage per device (its rows, its fold's prediction, bands without it):")
    print(f"  {'rule':<16} " + " ".join(f"{d[:14]:>14}" for d in devices))
    for name, band in lodo_bands.items():
        print(f"  {name:<16} " + " ".join(f"{coverage(band, d, ok & (dev == d), lodo_ratio, cls, reg):>14.2f}"
                                          for d in devices))
    print("\ntransfer targets' held-out scoreboard rows (shipped model's time, bands without the target):")
    print(f"  {'rule':<16} " + " ".join(f"{t[:14]:>14}" for t in TARGETS))
    for name, band in lodo_bands.items():
        print(f"  {name:<16} " + " ".join(f"{coverage(band, t, transfer_rows[t], shipped_ratio, cls, reg):>14.2f}"
                                          for t in TARGETS))


if __name__ == "__main__":
    main()
