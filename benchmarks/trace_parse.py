"""Trace parser speed and memory: a large synthetic Kineto trace (gzip; 3 events per kernel: its op, launch and
kernel), parsed, matched and reported (predictions, alarms, text) on an A100.

Prints CPU seconds (process time: the machine is shared) and wall seconds per step, kernels/s, MB/s
(uncompressed JSON) and peak memory (ru_maxrss; tracemalloc of the parse). Figures only.

    .venv/bin/python benchmarks/trace_parse.py --kernels 333334   # a 1M-event trace
    .venv/bin/python benchmarks/trace_parse.py --kernels 100000 --baseline /tmp/pm-base   # and the ratio to an
        # older checkout's code on the same file, fresh processes in alternating order (--pairs, medians: the
        # machine is shared and the second of two back-to-back runs was seen slower whichever code it ran)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from perfmodel.specs import load_hardware
from perfmodel.traces import match_runs, parse_trace
from perfmodel.traces.report import format_trace_report, trace_report

GEMM = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel"
ELEMENTWISE = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
               "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, "
               "at::detail::Array<char*, 3>)")


def _events(step: int) -> list[dict[str, object]]:
    """One linear + add pair: 2 cpu_ops, 2 launches, 2 kernels (Kineto's layout, times in us)."""
    t = step * 100.0
    base = step * 10
    bf16 = "c10::BFloat16"
    return [
        {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": t, "dur": 40,
         "args": {"External id": base + 1, "Input Dims": [[8, 512, 1024], [4096, 1024], [4096]],
                  "Input type": [bf16, bf16, bf16]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 5, "dur": 4,
         "args": {"External id": base + 1, "correlation": base + 2}},
        {"ph": "X", "cat": "kernel", "name": GEMM, "pid": 0, "tid": 7, "ts": t + 20, "dur": 35.5,
         "args": {"External id": base + 1, "correlation": base + 2, "device": 0, "stream": 7,
                  "grid": [32, 16, 1], "block": [128, 1, 1]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": t + 50, "dur": 20,
         "args": {"External id": base + 3, "Input Dims": [[8, 512, 4096], [8, 512, 4096], []],
                  "Input type": [bf16, bf16, "Scalar"]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 55, "dur": 4,
         "args": {"External id": base + 3, "correlation": base + 4}},
        {"ph": "X", "cat": "kernel", "name": ELEMENTWISE, "pid": 0, "tid": 7, "ts": t + 60, "dur": 20.25,
         "args": {"External id": base + 3, "correlation": base + 4, "device": 0, "stream": 7,
                  "grid": [16384, 1, 1], "block": [128, 1, 1]}},
    ]


def write_trace(path: Path, kernels: int) -> int:
    """Write a gzip Kineto trace with ``kernels`` kernels; return its uncompressed size in bytes."""
    size = 0
    with gzip.open(path, "wt", compresslevel=1) as out:
        head = '{"schemaVersion": 1, "record_shapes": 1, "traceEvents": [\n'
        out.write(head)
        size += len(head)
        for step in range(kernels // 2):
            chunk = (",\n" if step else "") + ",\n".join(json.dumps(e) for e in _events(step))
            out.write(chunk)
            size += len(chunk)
        out.write("\n]}\n")
    return size + 4


def _steps_cpu_s(path: Path) -> dict[str, float]:
    """CPU seconds of parse, match and report of ``path`` and the peak RSS (MB), with the code on sys.path."""
    hardware = load_hardware("nvidia-a100-sxm4-80gb")
    cpu0 = time.process_time()
    parsed = parse_trace(path)
    cpu1 = time.process_time()
    result = match_runs(parsed)
    cpu2 = time.process_time()
    format_trace_report(trace_report(hardware, parsed, result))
    cpu3 = time.process_time()
    return {"parse": cpu1 - cpu0, "match": cpu2 - cpu1, "report": cpu3 - cpu2, "all": cpu3 - cpu0,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _baseline(path: Path, checkout: str) -> dict[str, float]:
    """``_steps_cpu_s`` with another checkout's ``perfmodel`` (a fresh process, PYTHONPATH first)."""
    env = {**os.environ, "PYTHONPATH": checkout}
    done = subprocess.run([sys.executable, __file__, "--steps-json", str(path)], env=env, capture_output=True,
                          text=True, check=True, cwd=checkout)
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kernels", type=int, default=500_000)
    parser.add_argument("--baseline", help="another checkout: its code's figures on the same file, and the ratios")
    parser.add_argument("--pairs", type=int, default=2, help="with --baseline: runs of each code, order alternating")
    parser.add_argument("--steps-json", help=argparse.SUPPRESS)  # internal: one file's figures as JSON
    args = parser.parse_args()
    if args.steps_json:
        print(json.dumps(_steps_cpu_s(Path(args.steps_json))))
        return
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "synthetic.pt.trace.json.gz"
        started = time.perf_counter()
        raw_bytes = write_trace(path, args.kernels)
        print(f"wrote {args.kernels:,} kernels: {raw_bytes / 1e6:.0f} MB JSON, {path.stat().st_size / 1e6:.0f} MB "
              f"gzip in {time.perf_counter() - started:.1f} s")
        if args.baseline:
            # alternating order (baseline, this, this, baseline, ...): on a shared machine the process run second
            # was seen 12 % slower whichever code it ran; the medians of each side are compared
            olds: list[dict[str, float]] = []
            news: list[dict[str, float]] = []
            for pair in range(args.pairs):
                for side in ((0, 1) if pair % 2 == 0 else (1, 0)):
                    if side == 0:
                        olds.append(_baseline(path, args.baseline))
                    else:
                        news.append(json.loads(subprocess.run(
                            [sys.executable, __file__, "--steps-json", str(path)], check=True, capture_output=True,
                            text=True).stdout.strip().splitlines()[-1]))
            old = {key: float(statistics.median(o[key] for o in olds)) for key in olds[0]}
            new = {key: float(statistics.median(n[key] for n in news)) for key in news[0]}
            print(f"CPU s, baseline -> this code (fresh processes, {args.pairs} pairs in alternating order, "
                  "medians): " + "; ".join(
                f"{step} {old[step]:.2f} -> {new[step]:.2f} ({new[step] / old[step]:.2f}x)" if old[step] > 0 else
                f"{step} {old[step]:.2f} -> {new[step]:.2f}" for step in ("parse", "match", "report", "all"))
                + f"; peak RSS {old['rss_mb']:.0f} -> {new['rss_mb']:.0f} MB")

        hardware = load_hardware("nvidia-a100-sxm4-80gb")
        cpu0, wall0 = time.process_time(), time.perf_counter()
        parsed = parse_trace(path)
        cpu1, wall1 = time.process_time(), time.perf_counter()
        result = match_runs(parsed)
        cpu2, wall2 = time.process_time(), time.perf_counter()
        text = format_trace_report(trace_report(hardware, parsed, result))
        cpu3, wall3 = time.process_time(), time.perf_counter()
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        events = len(parsed.kernels) * 3
        print(f"parse: {len(parsed.kernels):,} kernels ({events:,} events) in {cpu1 - cpu0:.2f} s CPU "
              f"({wall1 - wall0:.2f} s wall) = {len(parsed.kernels) / (cpu1 - cpu0):,.0f} kernels/s, "
              f"{raw_bytes / 1e6 / (cpu1 - cpu0):.1f} MB/s of JSON")
        print(f"match: {len(result.runs):,} runs, unmodelled share {result.unmodelled_time_share:.3f}, "
              f"{cpu2 - cpu1:.2f} s CPU ({wall2 - wall1:.2f} s wall)")
        print(f"report: {len(text.splitlines())} lines, {cpu3 - cpu2:.2f} s CPU ({wall3 - wall2:.2f} s wall)")
        print(f"parse + match + report: {cpu3 - cpu0:.2f} s CPU ({wall3 - wall0:.2f} s wall)")
        print(f"peak RSS (ru_maxrss, whole process so far): {rss_mb:.0f} MB")
        print(f"goal (a 1M-event trace in <= 20 s and <= 1 GB; this one {events / 1e6:.2f} M events): CPU "
              f"{'met' if cpu3 - cpu0 <= 20 else 'missed'} ({cpu3 - cpu0:.1f} s), wall "
              f"{'met' if wall3 - wall0 <= 20 else 'missed'} ({wall3 - wall0:.1f} s, load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores), memory {'met' if rss_mb <= 1024 else 'missed'} "
              f"({rss_mb:.0f} MB)")
        del parsed, result

        tracemalloc.start()
        parsed = parse_trace(path)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"parse peak Python allocations (tracemalloc): {peak / 1e6:.0f} MB = "
              f"{peak / len(parsed.kernels):.0f} B per kernel (JSON is {raw_bytes / len(parsed.kernels):.0f} B "
              f"per kernel incl. its op and launch)")
        print(f"pid {os.getpid()}: figures only, nothing asserted")


if __name__ == "__main__":
    main()
