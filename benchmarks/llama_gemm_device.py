"""Llama 3 405B's per-GPU GEMMs (tp = 8, one 8,192-token micro-batch) on a real H100, sustained, with clocks.

Issue 29: the model predicts Llama 3 405B's published H100 training steps ~20 % fast, and the missing time scales
with compute. This script measures what the model cannot settle from datasheets: each layer GEMM's forward,
input-gradient and weight-gradient shape (bf16, fp32 accumulate) run back to back for ``--seconds`` each, so the
board reaches its power-limited steady state, with the SM clock and board power sampled through NVML meanwhile;
beside each, the model's prediction for the same shape. On a machine without CUDA it prints the model's side only.

    python benchmarks/llama_gemm_device.py [--seconds 20]
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

import perfmodel

HIDDEN, FFN, HEADS, KV_HEADS, HEAD_DIM, TP, TOKENS = 16384, 53248, 128, 8, 128, 8, 8192
# (name, out features, in features) of each weight shard on one tp rank (column- or row-parallel)
SHARDS = (("qkv", (HEADS + 2 * KV_HEADS) * HEAD_DIM // TP, HIDDEN), ("o", HIDDEN, HEADS * HEAD_DIM // TP),
          ("gate_up", 2 * FFN // TP, HIDDEN), ("down", HIDDEN, FFN // TP))


def passes() -> list[tuple[str, int, int, int]]:
    """(label, m, n, k) of the forward, input-gradient and weight-gradient GEMM of every shard."""
    out = []
    for name, n_out, n_in in SHARDS:
        out += [(f"{name} fwd", TOKENS, n_out, n_in), (f"{name} dgrad", TOKENS, n_in, n_out),
                (f"{name} wgrad", n_out, n_in, TOKENS)]
    return out


def model_tflops(m: int, n: int, k: int) -> float:
    p = perfmodel.predict("nvidia-h100-sxm5-80gb", {"kind": "matmul", "m": m, "n": n, "k": k, "dtype": "bf16"})
    return 2.0 * m * n * k / p.time_s / 1e12


def measure(m: int, n: int, k: int, seconds: float) -> tuple[float, float, float]:
    """(TFLOP/s, mean SM clock MHz, mean board W) of torch.mm over ``seconds`` of back-to-back calls."""
    import pynvml  # type: ignore[import-not-found]
    import torch

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(10):
        torch.mm(a, b)
    torch.cuda.synchronize()
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    samples: list[tuple[int, int]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append((pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                            pynvml.nvmlDeviceGetPowerUsage(handle)))
            time.sleep(0.1)

    thread = threading.Thread(target=sample)
    thread.start()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(20):
            torch.mm(a, b)
        calls += 20
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    done.set()
    thread.join()
    steady = samples[len(samples) // 2:] or samples
    clock = sum(s[0] for s in steady) / max(len(steady), 1)
    watts = sum(s[1] for s in steady) / max(len(steady), 1) / 1e3
    return 2.0 * m * n * k * calls / elapsed / 1e12, clock, watts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="sustained run per GEMM (s)")
    args = parser.parse_args()
    try:
        import torch

        device: Any = torch.cuda.is_available()
    except ImportError:
        device = False
    print("| GEMM | m x n x k | model TFLOP/s | measured TFLOP/s | SM clock MHz | board W |")
    print("|---|---|---:|---:|---:|---:|")
    for label, m, n, k in passes():
        row = f"| {label} | {m} x {n} x {k} | {model_tflops(m, n, k):.0f} |"
        if device:
            tflops, clock, watts = measure(m, n, k, args.seconds)
            row += f" {tflops:.0f} | {clock:.0f} | {watts:.0f} |"
        else:
            row += " - | - | - |"
        print(row)


if __name__ == "__main__":
    main()
