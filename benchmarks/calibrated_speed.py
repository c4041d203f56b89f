"""Calibrated prediction of ops that do not repeat: ``predict_calibrated`` against ``predict_many`` of the same ops
(the ratio, measured alternately in one run), and where its time goes (cProfile: each stage's share).

Calibration: fitted on Vidur's A100 runs (fp16: GEMMs, norms, elementwise chains, gathers; local corrections,
distance bands, residual trees). Two tables of ``--ops`` ops, no two alike (``predict_speed._distinct_mix``: the mix
of ``predict_speed.mixed_ops`` with one size of row i grown by i):

- ``no op repeated``: that mix (bf16 / fp16 / fp8 / fp32; about 3 % of its rows in a class fitted here: the rest
  take the device's or a class's borrowed curve);
- ``fitted classes``: the same rows in fp16 (about half of them in a class fitted here: local correction, distance
  band and trees on each of those).

Rates are ops per CPU second (``time.process_time``), best of ``--repeats``; the ratio is the median of the
alternate pairs. The compiled kernels are loaded first, as a long-running process does.

    python benchmarks/calibrated_speed.py [--ops 10000] [--repeats 7] [--no-profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from typing import Any

import numpy as np

import perfmodel
from perfmodel.ops import make_op

# stage -> functions whose cumulative time it is (names of the current and earlier versions, for a before/after)
STAGES: dict[str, tuple[str, ...]] = {
    "uncalibrated prediction (predict_many)": ("predict_many",),
    "class keys": ("class_keys", "class_codes"),
    "shape numbers": ("shape_matrix",),
    "local correction": ("local_log_factor",),
    "distance band": ("distance_band",),
    "residual trees: the ops' fields": ("op_fields", "field_matrix", "_matrix"),
    "residual trees: the walk": ("TreeEnsemble.predict",),
    "telling ops apart (distinct_ops)": ("distinct_ops",),
}


def tables(count: int) -> dict[str, list[Any]]:
    from predict_speed import _distinct_mix, mixed_ops

    rows = _distinct_mix(mixed_ops(count))
    fp16 = [{**d, "dtype": "fp16"} if "dtype" in d else d for d in rows]
    return {"no op repeated": [make_op(d) for d in rows], "fitted classes": [make_op(d) for d in fp16]}


def calibration() -> Any:
    from measured_data import vidur

    from perfmodel.calibration import fit_calibration

    hw = "nvidia-a100-sxm4-80gb"
    return fit_calibration(hw, [(r.op, r.measured_s) for r in vidur() if r.hardware == hw])


def _cumulative(stats: pstats.Stats, name: str) -> float:
    """Cumulative seconds of the functions called ``name`` (``Class.method`` matches a method of that class's
    file by its line's function name only)."""
    func = name.split(".")[-1]
    total = 0.0
    for (_, _, function), row in stats.stats.items():  # type: ignore[attr-defined]
        if function == func:
            total += row[3]
    return total


def profile(hw: str, ops: list[Any], cal: Any) -> None:
    from perfmodel.calibration import predict_calibrated

    profiler = cProfile.Profile()
    profiler.enable()
    predict_calibrated(hw, ops, cal)
    profiler.disable()
    stats = pstats.Stats(profiler)
    whole = _cumulative(stats, "predict_calibrated")
    parts = {stage: sum(_cumulative(stats, n) for n in names) for stage, names in STAGES.items()}
    print(f"    cProfile of one call: {whole * 1e3:.0f} ms profiled")
    for stage, seconds in parts.items():
        print(f"    {stage:42s} {seconds / whole:6.1%}")
    rest = whole - sum(parts.values())
    print(f"    {'the rest (curve, bands, notes, numpy glue)':42s} {rest / whole:6.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    from perfmodel.calibration import predict_calibrated
    from perfmodel.search import gemm_kernel

    gemm_kernel.load()
    hw = "nvidia-a100-sxm4-80gb"
    cal = calibration()
    for name, ops in tables(args.ops).items():
        predict_calibrated(hw, ops[:200], cal)  # warm the per-device tables (and load the compiled loops)
        best, plain, ratios = 0.0, 0.0, []
        for _ in range(args.repeats):
            start = time.process_time()
            perfmodel.predict_many(hw, ops, timing="host" if cal.timing == "host" else "kernel", space=cal.space)
            uncalibrated = len(ops) / (time.process_time() - start)
            start = time.process_time()
            predict_calibrated(hw, ops, cal)
            calibrated = len(ops) / (time.process_time() - start)
            best, plain = max(best, calibrated), max(plain, uncalibrated)
            ratios.append(calibrated / uncalibrated)
        fitted = np.mean([str(k) in cal.classes for k in _keys(ops)])
        print(f"{name} ({len(ops):,} ops, {fitted:.0%} in a class fitted here): calibrated {best:,.0f} ops/s, "
              f"uncalibrated {plain:,.0f} ops/s; calibrated / uncalibrated median {float(np.median(ratios)):.2f} "
              f"(worst {min(ratios):.2f}, best {max(ratios):.2f}; goal >= 0.5)")
        if not args.no_profile:
            profile(hw, ops, cal)


def _keys(ops: list[Any]) -> list[str]:
    from perfmodel.calibration.classes import class_key

    return [class_key(op, 8) for op in ops]


if __name__ == "__main__":
    main()
