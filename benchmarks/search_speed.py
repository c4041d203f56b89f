"""Search speed: candidates, evaluations and time per search, on one core.

For GEMM, attention, conv and layernorm on an H100, a TPU v5p and generic-npu: the space size,
candidates evaluated (after pruning), the median search time over repeats (cache off) and
candidate evaluations per second. Then a batch of 1,000 distinct GEMM-like ops searched.

    python benchmarks/search_speed.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

import perfmodel
from perfmodel.machine import tables
from perfmodel.search.gemm_cost import gemm_costs
from perfmodel.search.gemm_space import full_space

DEVICES = ("nvidia-h100-sxm5-80gb", "google-tpu-v5p", "generic-npu")
OPS: dict[str, dict[str, Any]] = {
    "gemm 8192x8192x8192": {"kind": "matmul", "m": 8192, "n": 8192, "k": 8192, "dtype": "bf16"},
    "attention 8x32x4096 causal": {"kind": "attention", "batch": 8, "heads": 32, "kv_heads": 8, "seq_q": 4096,
                                   "seq_kv": 4096, "head_dim": 128, "causal": True, "dtype": "bf16"},
    "conv 32x256x56x56 3x3": {"kind": "conv2d", "batch": 32, "in_channels": 256, "out_channels": 256,
                              "height": 56, "width": 56, "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "bf16"},
    "layernorm 16384x8192": {"kind": "layernorm", "shape": [16384, 8192], "dtype": "bf16"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"{'device':<24} {'op':<28} {'space':>6} {'evaluated':>9} {'median ms':>10} {'evals/s':>12}")
    for device in DEVICES:
        hw = perfmodel.load_hardware(device)
        for label, op in OPS.items():
            perfmodel.search(hw, op, cache=False)  # warm the device tables
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                result = perfmodel.search(hw, op, cache=False)
                times.append(time.perf_counter() - start)
            median = statistics.median(times)
            print(f"{device:<24} {label:<28} {result.space_size:>6} {result.evaluated:>9} {median * 1e3:>10.2f} "
                  f"{result.evaluated / median:>12,.0f}")

    hw = perfmodel.load_hardware("nvidia-h100-sxm5-80gb")
    t = tables(hw)
    space = full_space(t)
    one = np.ones(1)
    shape = (one, one * 8192, one * 8192, one * 8192, one * 2.0, one * t.matrix_peak[4], one * 4e8)
    gemm_costs(t, space, *shape)
    times = []
    for _ in range(20):
        start = time.perf_counter()
        gemm_costs(t, space, *shape)
        times.append(time.perf_counter() - start)
    raw = statistics.median(times)
    print(f"\nGEMM costing alone (gemm_costs, {space.size} candidates): {raw * 1e3:.2f} ms, "
          f"{space.size / raw:,.0f} candidate evaluations/s")
    batch = [{"kind": "matmul", "m": 16 * (1 + i % 512), "n": 1024 + 64 * (i % 7), "k": 4096 + 128 * (i // 512),
              "dtype": "bf16"} for i in range(1000)]
    start = time.perf_counter()
    evaluated = sum(perfmodel.search(hw, op, cache=False).evaluated for op in batch)
    one_by_one = time.perf_counter() - start
    start = time.perf_counter()
    perfmodel.predict_many(hw, batch, space="full")
    batched = time.perf_counter() - start
    print(f"\n1,000 distinct GEMMs on {hw.id}: search() one by one {one_by_one:.2f} s "
          f"({evaluated:,} evaluations, {evaluated / one_by_one:,.0f}/s, with top-k and Pareto); "
          f"predict_many(space='full') {batched:.2f} s")


if __name__ == "__main__":
    main()
