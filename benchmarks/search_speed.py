"""Search speed: candidates, evaluations and CPU time per search, on one core.

For GEMM, attention, conv and layernorm on an H100, a TPU v5p and generic-npu: the space size,
candidates evaluated (after pruning), the median CPU time per search over repeats (cache off) and
candidate evaluations per second. Then GEMM costing alone, compiled kernel against the numpy
reference in the same run (the machine is shared: the ratio is the steadier figure), and a batch
of 1,000 distinct GEMM-like ops searched. Times are CPU seconds (``time.process_time``).

    python benchmarks/search_speed.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import perfmodel
from perfmodel.machine import tables
from perfmodel.search import gemm_kernel
from perfmodel.search.gemm_cost import gemm_costs, gemm_costs_numpy
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


def cpu_median_s(call: Callable[[], object], repeats: int) -> float:
    """Median CPU seconds of ``call`` over ``repeats`` runs (after one warm-up run)."""
    call()
    times = []
    for _ in range(repeats):
        start = time.process_time()
        call()
        times.append(time.process_time() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    start = time.process_time()
    gemm_kernel.load()  # a long-running process loads the compiled kernels once
    print(f"compiled kernels loaded in {time.process_time() - start:.2f} s CPU (once per process)\n")
    print(f"{'device':<24} {'op':<28} {'space':>6} {'evaluated':>9} {'median ms':>10} {'evals/s':>12}")
    for device in DEVICES:
        hw = perfmodel.load_hardware(device)
        for label, op in OPS.items():
            result = perfmodel.search(hw, op, cache=False)
            median = cpu_median_s(lambda: perfmodel.search(hw, op, cache=False), args.repeats)  # noqa: B023
            print(f"{device:<24} {label:<28} {result.space_size:>6} {result.evaluated:>9} {median * 1e3:>10.2f} "
                  f"{result.evaluated / median:>12,.0f}")

    hw = perfmodel.load_hardware("nvidia-h100-sxm5-80gb")
    t = tables(hw)
    space = full_space(t)
    one = np.ones(1)
    shape = (one, one * 8192, one * 8192, one * 8192, one * 2.0, one * t.matrix_peak[4], one * 4e8)
    compiled = cpu_median_s(lambda: gemm_costs(t, space, *shape), 20)
    reference = cpu_median_s(lambda: gemm_costs_numpy(t, space, *shape), 20)
    print(f"\nGEMM costing alone ({space.size} candidates, every field): compiled {compiled * 1e3:.2f} ms "
          f"({space.size / compiled:,.0f}/s), numpy {reference * 1e3:.2f} ms ({space.size / reference:,.0f}/s), "
          f"{reference / compiled:.1f}x")
    from perfmodel.search.gemm_scoring import score_compiled

    scalars = tuple(float(x[0]) for x in shape)
    scoring = cpu_median_s(lambda: score_compiled(t, space, *scalars), 50)
    print(f"search's scoring pass (prune, cost, reject counts, Pareto front; compiled): {scoring * 1e3:.2f} ms, "
          f"{space.size / scoring:,.0f} candidates/s")
    op = OPS["gemm 8192x8192x8192"]
    searched = cpu_median_s(lambda: perfmodel.search(hw, op, cache=False), 50)
    os.environ["PERFMODEL_NO_JIT"] = "1"
    numpy_search = cpu_median_s(lambda: perfmodel.search(hw, op, cache=False), 20)
    del os.environ["PERFMODEL_NO_JIT"]
    print(f"one GEMM search ({op['m']}^3, {space.size} candidates, top-k, Pareto, winner re-evaluated): "
          f"{searched * 1e3:.2f} ms; numpy path {numpy_search * 1e3:.2f} ms, {numpy_search / searched:.1f}x")
    print(f"goals (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores): costing >= 20 M candidates/s: "
          f"search's scoring pass {'met' if space.size / scoring >= 20e6 else 'missed'} "
          f"({space.size / scoring / 1e6:.1f} M/s), every field {'met' if space.size / compiled >= 20e6 else 'missed'} "
          f"({space.size / compiled / 1e6:.1f} M/s); one GEMM search <= 1 ms: "
          f"{'met' if searched <= 1e-3 else 'missed'} ({searched * 1e3:.2f} ms)")
    batch = [{"kind": "matmul", "m": 16 * (1 + i % 512), "n": 1024 + 64 * (i % 7), "k": 4096 + 128 * (i // 512),
              "dtype": "bf16"} for i in range(1000)]
    start = time.process_time()
    evaluated = sum(perfmodel.search(hw, op, cache=False).evaluated for op in batch)
    one_by_one = time.process_time() - start
    start = time.process_time()
    perfmodel.predict_many(hw, batch, space="full")
    batched = time.process_time() - start
    print(f"\n1,000 distinct GEMMs on {hw.id}: search() one by one {one_by_one:.2f} s "
          f"({evaluated:,} evaluations, {evaluated / one_by_one:,.0f}/s, with top-k and Pareto); "
          f"predict_many(space='full') {batched:.2f} s")


if __name__ == "__main__":
    main()
