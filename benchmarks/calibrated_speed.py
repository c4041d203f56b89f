"""Calibrated prediction of ops that do not repeat: ``predict_calibrated`` against ``predict_many`` of the same ops
(the ratio, measured alternately in one run), and where its time goes (each stage's CPU time: its functions timed;
cProfile's per-call cost inflates the Python-heavy stages several times over, so its shares mislead here).

Calibration: fitted on Vidur's A100 runs (fp16: GEMMs, norms, elementwise chains, gathers; local corrections,
distance bands, residual trees). Two tables of ``--ops`` ops, no two alike (``predict_speed._distinct_mix``: the mix
of ``predict_speed.mixed_ops`` with one size of row i grown by i):

- ``no op repeated``: that mix (bf16 / fp16 / fp8 / fp32; about 3 % of its rows in a class fitted here: the rest
  take the device's or a class's borrowed curve);
- ``fitted classes``: the same rows in fp16 (about half of them in a class fitted here: local correction, distance
  band and trees on each of those).

Rates are ops per CPU second (``time.process_time``), best of ``--repeats``; the ratio is the median of the
alternate pairs. The compiled kernels are loaded first, as a long-running process does.

    python benchmarks/calibrated_speed.py [--ops 10000] [--repeats 7] [--no-split]
"""

from __future__ import annotations

import argparse
import importlib
import time
from typing import Any

import numpy as np

import perfmodel
from perfmodel.ops import make_op

# stage -> the functions (module, attribute; current and earlier names, for a before/after) whose CPU time it is
STAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "uncalibrated prediction (predict_many)": (("perfmodel.calibration.model", "predict_many"),
                                               ("perfmodel.calibration.model", "predict_built")),
    "telling ops apart (distinct_ops)": (("perfmodel.calibration.model", "distinct_ops"),
                                         ("perfmodel.calibration.model", "probably_distinct")),
    "class keys": (("perfmodel.calibration.model", "class_keys"), ("perfmodel.calibration.model", "class_codes")),
    "shape numbers": (("perfmodel.calibration.shape", "shape_matrix"),),
    "local correction": (("perfmodel.calibration.model", "local_log_factor"),),
    "distance band": (("perfmodel.calibration.model", "distance_band"),),
    "residual trees: the ops' fields": (("perfmodel.calibration.model", "op_fields"),
                                        ("perfmodel.calibration.boost", "field_matrix"),
                                        ("perfmodel.calibration.boost", "_matrix")),
    "residual trees: the walk": (("perfmodel.calibration.trees", "TreeEnsemble.predict"),),
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


def _timed(spent: dict[str, float], stage: str, function: Any) -> Any:
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[stage] += time.process_time() - start
    return timed


def stage_split(hw: str, ops: list[Any], cal: Any, repeats: int) -> None:
    """CPU time of each stage (``STAGES``: the functions wrapped with a timer; ~1 µs per call added, which counts
    for the per-op ``op_fields`` of earlier versions) over ``repeats`` calls of ``predict_calibrated``, as shares."""
    from perfmodel.calibration import predict_calibrated

    spent = dict.fromkeys(STAGES, 0.0)
    undo = []
    for stage, places in STAGES.items():
        for module_name, attribute in places:
            owner: Any = importlib.import_module(module_name)
            *path, name = attribute.split(".")
            for part in path:
                owner = getattr(owner, part)
            if hasattr(owner, name):
                undo.append((owner, name, getattr(owner, name)))
                setattr(owner, name, _timed(spent, stage, getattr(owner, name)))
    try:
        start = time.process_time()
        for _ in range(repeats):
            predict_calibrated(hw, ops, cal)
        whole = time.process_time() - start
    finally:
        for owner, name, function in reversed(undo):
            setattr(owner, name, function)
    print(f"    where the time goes (CPU, {repeats} calls, {whole / repeats * 1e3:.1f} ms each):")
    for stage, seconds in spent.items():
        print(f"    {stage:42s} {seconds / repeats * 1e3:6.1f} ms {seconds / whole:6.1%}")
    rest = whole - sum(spent.values())
    print(f"    {'the rest (curve, bands, notes, numpy glue)':42s} {rest / repeats * 1e3:6.1f} ms {rest / whole:6.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-split", action="store_true", help="skip the stage split")
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
        if not args.no_split:
            stage_split(hw, ops, cal, 3)


def _keys(ops: list[Any]) -> list[str]:
    from perfmodel.calibration.classes import class_key

    return [class_key(op, 8) for op in ops]


if __name__ == "__main__":
    main()
