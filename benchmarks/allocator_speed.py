"""glibc's allocator thresholds (``perfmodel/allocator.py``) off and on, in fresh processes that alternate: the
all-distinct table (``predict_columns``, ``--rows`` rows, best of 3) and distinct JSON dicts (``predict_many``,
``--dicts``, best of 5), ops per CPU second, minor page faults per call, and resident memory (the process's
high-water mark and what it holds after the last result is freed). Prints each pair's on / off ratio and their
median: the machine's load moves both sides of a pair alike.

    python benchmarks/allocator_speed.py [--pairs 3] [--rows 100000] [--dicts 10000] [--hardware ID]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import predict_speed

import perfmodel
from perfmodel import allocator, columnar
from perfmodel.search import gemm_kernel


def _status_kb(field: str) -> int:
    """A ``/proc/self/status`` field in kB (0 where there is none)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def child(hardware: str, rows: int, dicts: int) -> dict[str, Any]:
    """One process's figures (the allocator as this process's environment set it on import)."""
    hw = perfmodel.load_hardware(hardware)
    gemm_kernel.load()
    table = predict_speed.distinct_table(rows)
    many = predict_speed._distinct_mix(predict_speed.mixed_ops(dicts))
    columnar.predict_columns(hw, {k: v[:1000] for k, v in table.items()})
    perfmodel.predict_many(hw, many[:500])
    cpu0 = time.process_time()
    figures: dict[str, Any] = {"allocator": allocator.outcome()}
    calls: list[tuple[str, int, int, Callable[[], perfmodel.CostBatch]]] = [
        ("columns", rows, 3, lambda: columnar.predict_columns(hw, table)),
        ("dicts", dicts, 5, lambda: perfmodel.predict_many(hw, many))]
    for name, count, repeats, call in calls:
        best, faults = 0.0, []
        for _ in range(repeats):
            minflt = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            start = time.process_time()
            batch = call()
            best = max(best, count / (time.process_time() - start))
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - minflt)
            del batch
        figures[name] = best
        figures[name + "_faults"] = statistics.median(faults)
    figures["cpu_s"] = time.process_time() - cpu0
    figures["hwm_kb"] = _status_kb("VmHWM")
    figures["rss_kb"] = _status_kb("VmRSS")  # after the last result was freed
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hardware", default="nvidia-h100-sxm5-80gb")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dicts", type=int, default=10_000)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.hardware, args.rows, args.dicts)))
        return
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    loads = [os.getloadavg()[0]]
    for p in range(args.pairs):
        for mode in (("off", "on") if p % 2 == 0 else ("on", "off")):
            env = dict(os.environ, **{allocator.DISABLE: "0" if mode == "off" else "1"})
            out = subprocess.run([sys.executable, __file__, "--child", "--hardware", args.hardware, "--rows",
                                  str(args.rows), "--dicts", str(args.dicts)], env=env, check=True,
                                 capture_output=True, text=True).stdout
            runs[mode].append(json.loads(out.strip().splitlines()[-1]))
            loads.append(os.getloadavg()[0])
    print(f"{args.pairs} pairs of fresh processes, order alternating; load average {min(loads):.1f}-{max(loads):.1f} "
          f"on {os.cpu_count()} cores; rates in ops per CPU second")
    print(f"allocator: off = {runs['off'][0]['allocator']}, on = {runs['on'][0]['allocator']}")
    for name, label in (("columns", f"predict_columns, {args.rows:,} rows all distinct"),
                        ("dicts", f"predict_many, {args.dicts:,} distinct JSON dicts")):
        pairs = [(off[name], on[name]) for off, on in zip(runs["off"], runs["on"], strict=True)]
        ratios = [on / off for off, on in pairs]
        print(f"{label}: off / on " + ", ".join(f"{off:,.0f} / {on:,.0f}" for off, on in pairs)
              + f"; ratios {', '.join(f'{r:.3f}' for r in ratios)}, median {statistics.median(ratios):.3f}")
        print(f"  minor faults per call, median: off {statistics.median(r[name + '_faults'] for r in runs['off']):,.0f}"
              f", on {statistics.median(r[name + '_faults'] for r in runs['on']):,.0f}")
    for key, label in (("hwm_kb", "resident high-water mark"), ("rss_kb", "resident after the last result freed")):
        off = statistics.median(r[key] for r in runs["off"])
        on = statistics.median(r[key] for r in runs["on"])
        print(f"{label}: off {off / 1024:,.1f} MiB, on {on / 1024:,.1f} MiB (on - off: "
              f"{(on - off) * 1024 / args.rows:,.0f} B per table row)")
    cpu = {mode: statistics.median(r["cpu_s"] for r in runs[mode]) for mode in runs}
    print(f"CPU seconds of the timed calls per process, median: off {cpu['off']:.2f}, on {cpu['on']:.2f}")


if __name__ == "__main__":
    main()
