"""Speed of ``perfmodel compare`` on two large traces: a real Kineto trace (ResNet-50 training steps on a V100)
repeated until it has ``--kernels`` kernels, the second copy with 2 % noise on every kernel and a 5 % slowdown of
the kernels of every convolution call of one input shape. Prints the parse time, the compare time (grouping, tests,
predictions) and what the comparison found. Figures only.

    .venv/bin/python benchmarks/compare_speed.py --kernels 100000
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from perfmodel.compare import diff_sides, side_from_parsed
from perfmodel.specs import load_hardware
from perfmodel.traces import parse_trace

SOURCE = Path(__file__).resolve().parents[1] / "tests" / "data" / "traces" / \
    "kineto_resnet50_num_workers_0__worker0.1623143566756.pt.trace.json.gz"
ID_STRIDE = 10_000_000
SLOWED_OP = "aten::cudnn_convolution"


def _shift(event: dict[str, Any], copy_index: int, span_us: float) -> dict[str, Any]:
    out = copy.copy(event)
    if "ts" in out:
        out["ts"] = out["ts"] + copy_index * span_us
    args = out.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in ("correlation", "External id", "external id", "Ev Idx", "Python id", "Python parent id"):
            if isinstance(args.get(key), int):
                args[key] += copy_index * ID_STRIDE
        out["args"] = args
    return out


def build(kernels: int, noise: float, slow: float, seed: int, path: Path) -> int:
    data = json.loads(gzip.decompress(SOURCE.read_bytes()))
    events = [e for e in data["traceEvents"] if isinstance(e, dict)]
    per_copy = sum(e.get("cat") in ("Kernel", "kernel", "Memcpy", "Memset", "gpu_memcpy", "gpu_memset")
                   for e in events)
    times = [e["ts"] + e.get("dur", 0) for e in events if isinstance(e.get("ts"), int | float)]
    span = max(times) - min(times) + 1000.0
    rng = random.Random(seed)
    convs = [e for e in events if e.get("name") == SLOWED_OP and "dur" in e]
    shape = convs[0].get("args", {}).get("Input Dims") if convs else None
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in convs if e.get("args", {}).get("Input Dims") == shape]
    slowed = {e["args"]["correlation"] for e in events if str(e.get("cat", "")).lower() in ("runtime", "cuda_runtime")
              and "correlation" in e.get("args", {}) and any(a <= e["ts"] <= b for a, b in spans)}
    out: list[dict[str, Any]] = []
    copies = max(1, -(-kernels // max(per_copy, 1)))
    for c in range(copies):
        for event in events:
            shifted = _shift(event, c, span)
            if str(event.get("cat", "")).lower() == "kernel" and "dur" in event:
                factor = 1.0 + rng.gauss(0.0, noise)
                if event.get("args", {}).get("correlation") in slowed:
                    factor *= slow
                shifted["dur"] = event["dur"] * factor
            out.append(shifted)
    path.write_bytes(gzip.compress(json.dumps({**data, "traceEvents": out}).encode(), compresslevel=1))
    return copies * per_copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kernels", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        base_path, new_path = Path(folder, "base.json.gz"), Path(folder, "new.json.gz")
        count = build(args.kernels, 0.0, 1.0, 1, base_path)
        build(args.kernels, 0.02, 1.05, 2, new_path)
        hw = load_hardware("nvidia-v100-sxm2-32gb")
        t0, c0 = time.perf_counter(), time.process_time()
        base, new = parse_trace(base_path, "base"), parse_trace(new_path, "new")
        t1, c1 = time.perf_counter(), time.process_time()
        base_side, new_side = side_from_parsed(base, "base"), side_from_parsed(new, "new")
        t2, c2 = time.perf_counter(), time.process_time()
        result = diff_sides(base_side, new_side, hw)
        t3, c3 = time.perf_counter(), time.process_time()
    print(f"{count:,} device activities per trace ({len(base.kernels):,} records parsed)")
    print(f"CPU s (process time; the machine is shared): parse both {c1 - c0:.2f}; match and group both "
          f"{c2 - c1:.2f}; diff {c3 - c2:.2f}; compare after parsing {c3 - c1:.2f}; all {c3 - c0:.2f}")
    print(f"wall s: parse both {t1 - t0:.2f}; match and group both {t2 - t1:.2f}; diff {t3 - t2:.2f}; "
          f"all {t3 - t0:.2f}")
    verdicts: dict[str, int] = {}
    for g in result.groups:
        verdicts[g.verdict] = verdicts.get(g.verdict, 0) + 1
    print(f"{len(result.groups)} groups: {verdicts}")
    for g in result.regressions[:5]:
        print(f"  regression {g.name} {g.key[2][:80]}: {g.change_pct:+.1f}% ({g.base_calls} calls)")


if __name__ == "__main__":
    main()
