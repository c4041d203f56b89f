"""Best achievable matmul per device: the model's throughput on each device's published best GEMM.

The published figures are Maximum Achievable Matmul FLOPS (MAMF, stas00/ml-engineering's
``mamf-finder.py``: torch.mm over a grid of shapes, the best shape's mean TFLOP/s), one row per device
in ``benchmarks/data/best_gemm_mamf.csv`` with its source. The model predicts that very shape (bf16,
full schedule search); the ratio model / published should be within 15 % (issue 24).

    python benchmarks/best_gemm.py
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import perfmodel

TABLE = Path(__file__).resolve().parent / "data" / "best_gemm_mamf.csv"
GOAL = 0.15


@dataclass(frozen=True)
class PublishedGemm:
    hardware: str
    dtype: str
    m: int
    n: int
    k: int
    tflops: float
    theory_tflops: float
    source: str


def published() -> list[PublishedGemm]:
    with TABLE.open(newline="") as handle:
        return [PublishedGemm(r["hardware"], r["dtype"], int(r["m"]), int(r["n"]), int(r["k"]), float(r["tflops"]),
                              float(r["theory_tflops"]), r["source"]) for r in csv.DictReader(handle)]


def spec_peak_tflops(row: PublishedGemm) -> float:
    """The bf16 (row dtype) matrix peak of the spec the row is attributed to, TFLOP/s: it should be the peak the
    published row states (its ``theory_tflops``), else the row measured another SKU or clock than the spec's."""
    hw = perfmodel.load_hardware(row.hardware)
    return max(v for e in hw.engines for d, v in e.peak_flops_per_s.items() if d.value == row.dtype) / 1e12


def model_tflops(row: PublishedGemm) -> tuple[float, str]:
    """The model's TFLOP/s on the published shape and what bounds it."""
    cost = perfmodel.predict(row.hardware, {"kind": "matmul", "m": row.m, "n": row.n, "k": row.k,
                                            "dtype": row.dtype})
    return 2.0 * row.m * row.n * row.k / cost.time_s / 1e12, cost.bound


def main() -> None:
    print(f"{'device':<24} {'shape MxNxK':<18} {'published':>9} {'model':>7} {'ratio':>6}  "
          f"{'peak row/spec':>13}  bound")
    misses = 0
    for row in published():
        tflops, bound = model_tflops(row)
        ratio = tflops / row.tflops
        misses += abs(ratio - 1.0) > GOAL
        peaks = f"{row.theory_tflops:.0f}/{spec_peak_tflops(row):.0f}"
        print(f"{row.hardware:<24} {f'{row.m}x{row.n}x{row.k}':<18} {row.tflops:>9.1f} {tflops:>7.1f} "
              f"{ratio:>6.2f}  {peaks:>13}  {bound}")
    print(f"\n{misses} of {len(published())} devices outside ±{GOAL * 100:.0f} % of their published best GEMM")


if __name__ == "__main__":
    main()
