"""POST /schedules/rank speed: server CPU time to rank 10,000 explicit GEMM schedules (and attention ones).

A uvicorn server (one process) is started; each request is sent pre-encoded and the server process's
CPU time (user + sys from /proc, so the load of other processes on the box does not count) is read
before and after it: parsing, validation, costing, reasons and serialisation. Also the library call
alone (``rank_schedules``, ``time.process_time``). Medians over ``--repeats``.

    python benchmarks/schedule_rank_speed.py [--candidates 10000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

import httpx
import numpy as np
from api_load import cpu_seconds, start_server, wait_idle

from perfmodel.tuners.ranking import rank_schedules

H100 = "nvidia-h100-sxm5-80gb"
GEMM = {"kind": "matmul", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"}
ATTENTION = {"kind": "attention", "batch": 8, "heads": 32, "kv_heads": 8, "seq_q": 4096, "seq_kv": 4096,
             "head_dim": 128, "causal": True, "dtype": "bf16"}


def gemm_columns(count: int, seed: int = 0) -> dict[str, list[int]]:
    """Random Triton/CUTLASS-like GEMM schedules (some too big for SMEM or spilling: they get reasons)."""
    rng = np.random.default_rng(seed)
    return {"tile_m": rng.choice([16, 32, 64, 128, 256], count).tolist(),
            "tile_n": rng.choice([16, 32, 64, 128, 256], count).tolist(),
            "tile_k": rng.choice([16, 32, 64, 128], count).tolist(), "stages": rng.integers(1, 6, count).tolist(),
            "split_k": rng.choice([1, 2, 4, 8], count).tolist(), "group_m": rng.choice([1, 4, 8], count).tolist(),
            "warps": rng.choice([2, 4, 8], count).tolist()}


def attention_columns(count: int, seed: int = 0) -> dict[str, list[int]]:
    rng = np.random.default_rng(seed)
    return {"tile_q": rng.choice([32, 64, 128, 256], count).tolist(),
            "tile_kv": rng.choice([32, 64, 128, 256], count).tolist(), "stages": rng.integers(1, 4, count).tolist(),
            "split_kv": rng.choice([1, 2, 4], count).tolist(), "warps": rng.choice([4, 8], count).tolist()}


def server_figures(port: int, pid: int, body: dict[str, Any], repeats: int) -> tuple[float, float, int]:
    """Mean server CPU s (the /proc clock ticks 10 ms: a mean resolves finer) and median wall s per
    request, response bytes."""
    cpu, wall = [], []
    size = 0
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
        for attempt in range(repeats + 1):
            before, start = cpu_seconds(pid), time.perf_counter()
            response = client.post("/api/v1/schedules/rank", json=body)
            elapsed, used = time.perf_counter() - start, cpu_seconds(pid) - before
            response.raise_for_status()
            size = len(response.content)
            if attempt:  # the first request warms the caches
                cpu.append(used)
                wall.append(elapsed)
    return statistics.mean(cpu), statistics.median(wall), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--candidates", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--port", type=int, default=8931)
    args = parser.parse_args()
    n = args.candidates
    cases = {"gemm 4096^3 bf16": (GEMM, gemm_columns(n)), "attention 8x32x4096 causal": (ATTENTION,
                                                                                            attention_columns(n))}
    print(f"{n:,} candidates per request; server CPU ms: the server process's user+sys, mean of {args.repeats}; "
          "wall and library: medians")
    print(f"{'case':<28} {'library CPU ms':>14}")
    for name, (op, cols) in cases.items():
        rank_schedules(H100, op, cols)
        times = []
        for _ in range(args.repeats):
            start = time.process_time()
            rank_schedules(H100, op, cols)
            times.append(time.process_time() - start)
        print(f"{name:<28} {1e3 * statistics.median(times):>14.1f}")
    with tempfile.TemporaryDirectory() as data_dir:
        server = start_server(args.port, 1, data_dir)
        try:
            print(f"server idle after {wait_idle(server.pid):.1f} s (background JIT load)")
            print(f"{'case':<28} {'request':<8} {'response':<8} {'server CPU ms':>13} {'wall ms':>8} {'bytes':>10}")
            for name, (op, cols) in cases.items():
                rows = [dict(zip(cols, values, strict=True)) for values in zip(*cols.values(), strict=True)]
                for form, payload in (("objects", {"candidates": rows}), ("columns", {"columns": cols})):
                    for layout in ("rows", "columns"):
                        body = {"hardware": H100, "op": op, **payload, "layout": layout}
                        cpu, wall, size = server_figures(args.port, server.pid, body, args.repeats)
                        print(f"{name:<28} {form:<8} {layout:<8} {1e3 * cpu:>13.1f} {1e3 * wall:>8.1f} {size:>10,}")
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
