"""SCALE-Sim as an external oracle for perfmodel's systolic-array compute cycles.

SCALE-Sim (``pip install scalesim``, v3.0; Samajdar et al., ISPASS 2020, MIT licence) builds the
cycle-by-cycle operand demand of a GEMM on a rows x cols array for the OS / WS / IS dataflows; the
number of rows of its demand matrix is the compute cycle count without memory stalls. We run its
compute model in memory (no trace files) and compare:

- ``perfmodel.systolic.array_cycles`` for every dataflow, and
- the GEMM cost model's own weight-stationary path (``perfmodel.search.gemm_cost``: one unbuffered
  schedule streaming all M rows, on a one-core NPU with that array, no DMA or latency) -- the cycles
  ``predict`` charges for a systolic machine.

Over arrays 8x8 to 256x256 (and rectangular ones), GEMMs of multiples and non-multiples of the array.
A case whose SCALE-Sim run would build more than MAX_FOLDS folds is skipped (its demand matrices
grow with every fold): bounded work.

    python benchmarks/scalesim_oracle.py
"""

from __future__ import annotations

import dataclasses
import itertools
import time

import numpy as np

from perfmodel.efficiency import IDEAL
from perfmodel.machine import tables
from perfmodel.search.gemm_cost import gemm_costs
from perfmodel.search.gemm_space import GemmCandidates
from perfmodel.specs import derive_variant
from perfmodel.systolic import DATAFLOWS, Dataflow, array_cycles

ARRAYS = ((8, 8), (16, 16), (32, 32), (64, 64), (128, 128), (256, 256), (8, 32), (32, 8), (128, 32))
SHAPES = ((64, 64, 64), (100, 70, 50), (256, 512, 128), (1000, 64, 300), (33, 257, 129), (512, 512, 512),
          (4096, 128, 256), (7, 300, 1000))
MAX_FOLDS = 600


def folds(dataflow: Dataflow, m: int, n: int, k: int, rows: int, cols: int) -> int:
    r, c = {"os": (m, n), "ws": (k, n), "is": (k, m)}[dataflow]
    return -(-r // rows) * -(-c // cols)


def scalesim_cycles(dataflow: Dataflow, m: int, n: int, k: int, rows: int, cols: int) -> int:
    """SCALE-Sim's compute cycles: rows of its ifmap demand matrix (one row per cycle)."""
    from scalesim.compute.systolic_compute_is import systolic_compute_is  # type: ignore[import-untyped]
    from scalesim.compute.systolic_compute_os import systolic_compute_os  # type: ignore[import-untyped]
    from scalesim.compute.systolic_compute_ws import systolic_compute_ws  # type: ignore[import-untyped]
    from scalesim.scale_config import scale_config  # type: ignore[import-untyped]

    config = scale_config()
    config.array_rows, config.array_cols = rows, cols
    config.valid_conf_flag = True
    ifmap = np.arange(m * k, dtype=np.float64).reshape(m, k)  # addresses; values do not matter
    weights = np.arange(k * n, dtype=np.float64).reshape(k, n) + ifmap.size
    ofmap = np.arange(m * n, dtype=np.float64).reshape(m, n) + ifmap.size + weights.size
    compute = {"os": systolic_compute_os, "ws": systolic_compute_ws, "is": systolic_compute_is}[dataflow]()
    extra = {"ifmap_op_mat_original": ifmap} if dataflow == "ws" else {}
    compute.set_params(config_obj=config, ifmap_op_mat=ifmap, filter_op_mat=weights, ofmap_op_mat=ofmap, **extra)
    demand, _, _ = compute.get_demand_matrices()
    return int(demand.shape[0])


def gemm_path_cycles(m: int, n: int, k: int, rows: int, cols: int) -> float:
    """Cycles the GEMM cost model charges on a one-core NPU with a rows x cols weight-stationary array:
    one unbuffered schedule (BM = M, BN = cols, BK = rows), IDEAL defaults, free DMA."""
    hw = derive_variant("generic-npu", f"npu-{rows}x{cols}", {"units": 1})
    clock = float(hw.clock_hz or 1.0)
    t = dataclasses.replace(tables(hw), defaults=IDEAL, mma_m=rows, mma_n=cols, mma_k=rows,
                            dma_bandwidth_bytes_per_s=1e30, dma_latency_s=0.0)
    one = np.ones(1)
    space = GemmCandidates(bm=one * m, bn=one * cols, bk_bytes=one * rows * 2.0, stages=one, split=one, group=one)
    peak = np.array([2.0 * rows * cols * clock])
    costs = gemm_costs(t, space, one, one * m, one * n, one * k, one * 2.0, peak, one * 0.0)
    return float((costs.compute_s[0, 0] - t.latency_s(t.dram)) * clock)


@dataclasses.dataclass(frozen=True)
class Case:
    dataflow: Dataflow
    m: int
    n: int
    k: int
    rows: int
    cols: int
    scalesim: int
    model: float
    gemm_path: float | None  # weight-stationary only

    @property
    def error(self) -> float:
        return abs(self.model / self.scalesim - 1.0)

    @property
    def path_error(self) -> float:
        return abs(self.gemm_path / self.scalesim - 1.0) if self.gemm_path is not None else 0.0


def run(arrays: tuple[tuple[int, int], ...] = ARRAYS, shapes: tuple[tuple[int, int, int], ...] = SHAPES,
        dataflows: tuple[Dataflow, ...] = DATAFLOWS) -> tuple[list[Case], int]:
    """Every (dataflow, array, shape) within MAX_FOLDS: the cases and the number skipped."""
    cases, skipped = [], 0
    for dataflow, (rows, cols), (m, n, k) in itertools.product(dataflows, arrays, shapes):
        if folds(dataflow, m, n, k, rows, cols) > MAX_FOLDS:
            skipped += 1
            continue
        oracle = scalesim_cycles(dataflow, m, n, k, rows, cols)
        model = float(array_cycles(m, n, k, rows, cols, dataflow))
        path = gemm_path_cycles(m, n, k, rows, cols) if dataflow == "ws" else None
        cases.append(Case(dataflow, m, n, k, rows, cols, oracle, model, path))
    return cases, skipped


def main() -> None:
    start = time.perf_counter()
    cases, skipped = run()
    print(f"{'df':<3} {'array':>8} {'M x N x K':>18} {'SCALE-Sim':>10} {'model':>10} {'err %':>6} {'GEMM path':>10}")
    for c in cases:
        path = f"{c.gemm_path:>10.0f}" if c.gemm_path is not None else f"{'-':>10}"
        print(f"{c.dataflow:<3} {c.rows:>3}x{c.cols:<4} {c.m:>6}x{c.n:>5}x{c.k:>5} {c.scalesim:>10} "
              f"{c.model:>10.0f} {c.error * 100:>6.2f} {path}")
    for df in DATAFLOWS:
        errors = [c.error for c in cases if c.dataflow == df]
        print(f"{df}: {len(errors)} cases, max |error| {max(errors) * 100:.2f} %")
    paths = [c.path_error for c in cases if c.gemm_path is not None]
    print(f"GEMM cost path (ws, unbuffered): {len(paths)} cases, max |error| {max(paths) * 100:.2f} %")
    print(f"{skipped} cases skipped (more than {MAX_FOLDS} folds); {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
