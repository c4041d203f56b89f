"""Peak matmul FLOP/s per dtype (torch.mm / torch._int_mm on the CPU) and per-op dispatch overhead."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from perfmodel.measure.timing import best_of_s, torch_threads

# perfmodel dtype name -> torch dtype, in the order they are measured
DTYPES: dict[str, torch.dtype] = {
    "fp64": torch.float64, "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
    "int8": torch.int8,
}


@dataclass(frozen=True)
class PeakResult:
    """Best matmul rate of one dtype (FLOP/s, ops/s for int8), or why there is none."""

    dtype: str
    flops_per_s: float | None
    size: int  # n of the n×n×n product that gave the best rate (0 if none)
    repeats: int
    kernel: str  # the torch call
    note: str  # why absent, or what to know about the number


def _operands(dtype: torch.dtype, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    if dtype == torch.int8:
        return (torch.randint(-64, 64, (n, n), dtype=torch.int8),
                torch.randint(-64, 64, (n, n), dtype=torch.int8))
    return torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)


def _call(dtype: torch.dtype, a: torch.Tensor, b: torch.Tensor) -> Callable[[], object]:
    if dtype == torch.int8:  # int8 x int8 -> int32, the path quantized linear layers take
        return lambda: torch._int_mm(a, b)
    return lambda: torch.mm(a, b)


def peak_flops(name: str, threads: int, quick: bool = False) -> PeakResult:
    """Square products n = 256, 512, ... best of N each; the best rate over the sizes.

    256 and 512 always run (small sizes can take a slow path); a larger size only if it should
    take < 0.25 s (0.03 s quick) at the best rate so far,
    so a dtype with no fast kernel (fp16 GEMM on CPUs without AVX512-FP16/AMX-FP16) costs little.
    """
    dtype = DTYPES[name]
    kernel = "torch._int_mm (int8 x int8 -> int32)" if dtype == torch.int8 else f"torch.mm ({dtype})"
    repeats = 3 if quick else 5
    cap_s = 0.03 if quick else 0.25
    best_rate, best_n, largest = 0.0, 0, 0
    with torch_threads(threads):
        for n in (256, 512, 1024, 2048, 4096):
            expected_s = 2.0 * n**3 / best_rate if best_rate else 0.0
            if expected_s > 1.0 or (n > 512 and expected_s > cap_s):  # 256 and 512 always, unless hopeless
                break
            try:
                a, b = _operands(dtype, n)
                call = _call(dtype, a, b)
                call()  # warm-up: packing buffers, oneDNN primitive creation
            except (RuntimeError, NotImplementedError) as exc:
                reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
                return PeakResult(name, None, 0, 0, kernel, f"not measurable here: {reason}")
            rate = 2.0 * n**3 / best_of_s(call, repeats)
            largest = n
            if rate > best_rate:
                best_rate, best_n = rate, n
    return PeakResult(name, best_rate, best_n, repeats, kernel,
                      f"best of {repeats} per size over n = 256..{largest}, {threads} threads")


def best_peak(a: PeakResult, b: PeakResult) -> PeakResult:
    """The better of two measurements of one dtype (rounds taken at different times)."""
    if (b.flops_per_s or 0.0) > (a.flops_per_s or 0.0):
        return b
    return a


def dispatch_overhead_s(quick: bool = False) -> tuple[float, str]:
    """Wall time of one tiny torch op (``torch.add`` on 1-element tensors), best of N loops (s)."""
    x = torch.ones(1)
    calls = 200 if quick else 2000
    repeats = 3 if quick else 7

    def loop() -> None:
        for _ in range(calls):
            torch.add(x, x)

    seconds = best_of_s(loop, repeats) / calls
    return seconds, (f"wall time per call of torch.add on two 1-element fp32 tensors: {calls} calls in a Python "
                     f"loop, best of {repeats} loops (includes the Python call, not a profiler's own cost)")
