"""Each published training run's layer GEMMs: the model's rate on them beside the device's published best GEMM.

Issue 29 (train16). For every run of ``perfmodel/training/published.py``, the layout the table predicts with
(searched where the source leaves it out), the model's FLOP-weighted TFLOP/s over one layer's GEMMs on one
device (``training.gemm_ceiling``), and its share of the device's best GEMM in the Maximum Achievable Matmul
FLOPS table (``data/best_gemm_mamf.csv``) and of the spec's dense peak. Then one experiment, printed and not
shipped: the H100 rows re-costed with the H100's matrix engine at the clock share that would put its training
GEMMs at the A100 rows' median share of their device's measured best (this takes a constant from the H100's own
measurement, which the uncalibrated model does not do).

    PYTHONPATH=. python benchmarks/training_gemm_ceiling.py
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from pathlib import Path

from perfmodel.dtypes import DType
from perfmodel.roofline import resolve_hardware
from perfmodel.training.gemm_ceiling import layer_gemm_tflops, with_sustained_share
from perfmodel.training.published import RUNS, PublishedRun, predict, search

MAMF = Path(__file__).parent / "data" / "best_gemm_mamf.csv"


def measured_best() -> dict[str, float]:
    """Each device's best bf16 GEMM as published (TFLOP/s)."""
    with MAMF.open() as f:
        return {r["hardware"]: float(r["tflops"]) for r in csv.DictReader(f) if r["dtype"] == "bf16"}


A100, H100 = "nvidia-a100-sxm4-80gb", "nvidia-h100-sxm5-80gb"


@dataclass(frozen=True)
class CeilingRow:
    """One run: the layout it is predicted with, the model's layer-GEMM rate and its shares."""

    run: PublishedRun
    layout: str
    tflops: float
    best_tflops: float  # the device's measured best GEMM
    peak_tflops: float  # the spec's dense bf16 peak

    @property
    def share(self) -> float:
        return self.tflops / self.best_tflops


def ceiling_rows() -> list[CeilingRow]:
    """Every published run's layer-GEMM rate in the layout the table predicts with."""
    best = measured_best()
    rows = []
    for run in RUNS:
        result, i, _ = search(run)
        lay = result.layout(i).to_json()
        rate = layer_gemm_tflops(run, int(lay["tp"]), int(lay["cp"]), int(lay["micro_batch"]))
        peak = (resolve_hardware(run.hardware).peak_flops_per_s(DType.BF16) or float("nan")) / 1e12
        rows.append(CeilingRow(run, f"tp{lay['tp']} cp{lay['cp']} mb{lay['micro_batch']}", rate,
                               best[run.hardware], peak))
    return rows


def median_shares(rows: list[CeilingRow]) -> dict[str, float]:
    """Each device's median share of its measured best over its rows."""
    devices = {r.run.hardware for r in rows}
    return {d: statistics.median(r.share for r in rows if r.run.hardware == d) for d in sorted(devices)}


def main() -> None:
    rows = ceiling_rows()
    print("| run | device | layout | model layer GEMMs, TFLOP/s | of the measured best | of the spec peak |")
    print("|---|---|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r.run.name} | {r.run.hardware} | {r.layout} | {r.tflops:.1f} | {r.share:.3f} (of "
              f"{r.best_tflops:.1f}) | {r.tflops / r.peak_tflops:.3f} |")
    medians = median_shares(rows)
    for device, median in medians.items():
        values = [r.share for r in rows if r.run.hardware == device]
        print(f"\n{device}: share of the measured best, median {median:.3f} (range {min(values):.3f}-"
              f"{max(values):.3f}, {len(values)} rows)")
    clock_share = medians[A100] / medians[H100]
    hw = resolve_hardware(H100)
    variant = with_sustained_share(hw, clock_share)
    mhz = (hw.clock_hz or 0.0) / 1e6
    print(f"\nexperiment (not shipped): the H100's matrix engine at {clock_share:.3f} of {mhz:.0f} MHz "
          f"({clock_share * mhz:.0f} MHz), which puts its training GEMMs at the A100 rows' "
          "median share of the measured best:")
    for run in RUNS:
        if run.hardware != H100:
            continue
        before, after = predict(run), predict(run, variant)
        causal = after["predicted_tflops_causal"]
        print(f"- {run.name}: {before['predicted_tflops']:.1f} -> {after['predicted_tflops']:.1f} TFLOP/s, error "
              f"{before['error']:+.1%} -> {after['error']:+.1%}"
              + (f" (causal count {causal / run.published_tflops - 1.0:+.1%})" if causal is not None else ""))


if __name__ == "__main__":
    main()
