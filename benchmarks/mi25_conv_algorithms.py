"""MI25 (MIOpen 1.3) DeepBench forward convolutions by the algorithm MIOpen reported: the model's median
predicted / measured and median |error| per algorithm under a convolution share (``conv_matrix_efficiency``), and
the MI25 cell with the direct forwards at another share (docs/accuracy.md, twelfth pass, branch conv15).

    PYTHONPATH=$PWD python benchmarks/mi25_conv_algorithms.py [--shares 0.6 0.65]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import measured_data as md

import perfmodel
from perfmodel.efficiency import defaults_for
from perfmodel.specs import load_hardware

HW = "amd-mi25"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shares", nargs="*", type=float, default=[0.6, 0.65])
    args = parser.parse_args()
    rows = [r for r in md.deepbench() if r.label == "conv2d" and r.hardware == HW]
    raw = [r for r in md._read("deepbench_conv.csv") if "MI25" in r["hardware"] and md._number(r["fwd_ms"])]
    if len(raw) != len(rows):
        raise SystemExit(f"{len(raw)} sheet rows against {len(rows)} model rows")
    algorithm = np.array([r["fwd_algorithm"] for r in raw])
    measured = np.array([r.measured_s for r in rows])
    base = defaults_for(load_hardware(HW))
    ops = [r.op for r in rows]

    def ratio(share: float) -> np.ndarray:
        defaults = dataclasses.replace(base, conv_matrix_efficiency=share)
        time_s = perfmodel.predict_many(HW, ops, timing="kernel", defaults=defaults).time_s
        out: np.ndarray = np.asarray(time_s) / measured
        return out

    print(f"{HW}: {len(rows)} forward rows; matrix_efficiency {base.matrix_efficiency}, "
          f"vector_efficiency {base.vector_efficiency}")
    for share in args.shares:
        r = ratio(share)
        for name in sorted(set(algorithm)):
            sel = algorithm == name
            print(f"conv share {share:.2f}  {name:28s} {int(sel.sum()):3d} rows  pred/meas {np.median(r[sel]):.2f}  "
                  f"|err| {100 * np.median(np.abs(r[sel] - 1)):.1f} %")
        print(f"conv share {share:.2f}  all {100 * np.median(np.abs(r - 1)):.1f} % (bias {np.median(r):.2f})")
    direct = algorithm == "ConvolutionFwdAlgoDirect"
    last = ratio(args.shares[-1])
    for share in (base.matrix_efficiency, base.vector_efficiency):
        r = np.where(direct, ratio(share), last)
        print(f"conv share {args.shares[-1]:.2f}, direct at {share:.2f}: all {100 * np.median(np.abs(r - 1)):.1f} % "
              f"(bias {np.median(r):.2f}), direct bias {np.median(r[direct]):.2f}")


if __name__ == "__main__":
    main()
