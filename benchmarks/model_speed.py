"""Whole-model estimate speed and sweep throughput (printed figures, not asserts).

    python benchmarks/model_speed.py [--variants 200]

1. Llama-3-70B prefill (8 x 2048 tokens) and decode (batch 8, KV 4096) on 8 H100s (TP=8),
   with the full GEMM schedule search per distinct op: build + fuse + cost + schedule + JSON.
2. A sweep of hardware variants (DRAM bandwidth, matrix peak, SMEM, clock) x one workload:
   serial in this process, 2 local processes, and a 2-worker Dask LocalCluster on loopback.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from perfmodel.graph import LlmWorkload, Parallelism, build_llm, bundled, estimate
from perfmodel.graph.sweep import SweepSpec, run_sweep

H100 = "nvidia-h100-sxm5-80gb"


def time_estimates(repeats: int = 5) -> None:
    cfg = bundled("llama-3-70b")
    par = Parallelism(tp=8, devices_per_node=8)
    for phase in ("prefill", "decode"):
        workload = LlmWorkload(phase=phase, batch=8, prompt_tokens=2048, kv_len=4096)
        best = float("inf")
        first = 0.0
        for i in range(repeats):
            t0 = time.perf_counter()
            graph = build_llm(cfg, workload, par)
            est = estimate(graph, H100, space="full")
            est.to_json()
            elapsed = time.perf_counter() - t0
            first = elapsed if i == 0 else first
            best = min(best, elapsed)
        print(f"llama-3-70b {phase:7} on 8x H100 (TP=8), full search: {len(graph)} nodes, "
              f"{len(est.batch)} distinct ops; first {first * 1e3:.0f} ms, best of {repeats} {best * 1e3:.0f} ms; "
              f"step {est.step_time_s * 1e3:.2f} ms")


def sweep_spec(variants: int) -> SweepSpec:
    return SweepSpec.from_json({
        "base": H100, "mode": "random", "samples": variants, "seed": 0,
        "axes": {"levels.dram.bandwidth_bytes_per_s": ["x0.5", "x0.75", "x1", "x1.5", "x2", "x3"],
                 "engines.*.peak_flops_per_s": ["x0.5", "x1", "x1.5", "x2", "x4"],
                 "levels.SMEM.capacity_bytes": ["x0.5", "x1", "x2"],
                 "clock_hz": ["x0.8", "x1", "x1.2"], "devices": [4, 8]},
        "workloads": [{"model": "llama-3-70b", "phase": "decode", "batch": 8, "kv_len": 4096}]})


def time_sweeps(variants: int) -> None:
    spec = sweep_spec(variants)
    serial = run_sweep(spec)
    print(f"sweep {variants} variants x 1 workload, serial (1 process): {serial['elapsed_s']:.2f} s, "
          f"{serial['evaluations_per_s']:.0f} variant-workloads/s")
    local = run_sweep(spec, workers=2)
    print(f"sweep, 2 local processes: {local['elapsed_s']:.2f} s, {local['evaluations_per_s']:.0f}/s")
    from distributed import Client, LocalCluster

    t0 = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:  # type: ignore[no-untyped-call]
        started = time.perf_counter() - t0
        dask = run_sweep(spec, client=client)
        warm = run_sweep(spec, client=client)
    print(f"sweep, Dask LocalCluster 2 workers (loopback): {dask['elapsed_s']:.2f} s, "
          f"{dask['evaluations_per_s']:.0f}/s with cold workers (imports, graph build); warm "
          f"{warm['elapsed_s']:.2f} s, {warm['evaluations_per_s']:.0f}/s (cluster start {started:.1f} s not included)")
    same = [r["time_s"] for r in dask["rows"]] == [r["time_s"] for r in serial["rows"]]
    print(f"Dask results identical to serial: {same}; Pareto front: {len(dask['pareto'][dask['rows'][0]['label']])} "
          "variants")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variants", type=int, default=200)
    args = parser.parse_args()
    time_estimates()
    time_sweeps(args.variants)


if __name__ == "__main__":
    main()
