"""Measure this host in full (not quick): the table, how long it took, and the spec's predictions.

    python benchmarks/host_measure.py            # measurement table + prediction vs measured torch time
    python benchmarks/host_measure.py --suite    # also time the profiled op suite (writes var/measure/)

Timings on a shared machine are noisy: every figure is a best of N.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

import perfmodel
from perfmodel.measure import format_measurement, host_spec, measure_host, run_suite, suite_cases
from perfmodel.measure.sysinfo import usable_threads
from perfmodel.measure.timing import best_of_s, torch_threads
from perfmodel.specs import parse_spec

COMPARE = ("mm 1024x1024x1024 fp32", "mm 2048x2048x2048 fp32", "mm 1024x1024x1024 bf16", "mm 32x4096x1024 fp32",
           "add (4096, 4096) fp32", "add (512, 512) fp32", "gelu (4096, 4096) fp32", "softmax (4096, 1024) fp32",
           "layer_norm (4096, 4096) fp32", "contiguous (4096, 4096) fp32", "sum (4096, 4096) fp32",
           "embedding 32000x1024[8192]", "conv2d 1x64x56x56 k3 -> 64 fp32")


def compare(hw: perfmodel.Hardware, rounds: int = 3) -> None:
    """Predicted (kernel timing, warm cache) vs wall time of the same torch call: best of 5 calls in
    each of ``rounds`` rounds over the list (a shared host: a burst of other load spoils one round)."""
    cases = {c.name: c for c in suite_cases()}
    measured = dict.fromkeys(COMPARE, float("inf"))
    with torch.no_grad(), torch_threads(usable_threads()):
        for _ in range(rounds):
            for name in COMPARE:
                call = cases[name].make()
                call()
                measured[name] = min(measured[name], best_of_s(call, 5))
                del call
    print(f"\n{'op':<34} {'measured ms':>12} {'predicted ms':>13} {'ratio':>6}  bound")
    for name in COMPARE:
        cost = perfmodel.predict(hw, cases[name].op, warm_cache=True)
        print(f"{name:<34} {measured[name] * 1e3:12.3f} {cost.time_s * 1e3:13.3f} "
              f"{cost.time_s / measured[name]:6.2f}  {cost.bound}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", action="store_true", help="also run the profiled op suite")
    parser.add_argument("--out", type=Path, default=Path("var/measure"))
    args = parser.parse_args()
    started = time.perf_counter()
    measurement = measure_host(quick=False)
    print(format_measurement(measurement))
    print(f"\nmeasure_host took {time.perf_counter() - started:.1f} s")
    hw = parse_spec(host_spec(measurement), "measured host")
    compare(hw)
    if args.suite:
        started = time.perf_counter()
        trace = run_suite(args.out)
        print(f"\nsuite: {len(suite_cases())} op instances, {time.perf_counter() - started:.1f} s -> {trace}")


if __name__ == "__main__":
    main()
