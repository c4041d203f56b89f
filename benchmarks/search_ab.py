"""One GEMM search, two checkouts alternating: CPU ms per ``perfmodel.search`` (cache off) in each.

The machine is shared, so the two trees run one after the other, ``--pairs`` times, each in its own
process (median and 10th percentile of ``--repeats`` searches per op), and the ratio of the medians is
printed per pair. Times are CPU seconds (``time.process_time``), compiled kernels loaded first.

    python benchmarks/search_ab.py /path/to/base-checkout [/path/to/this-checkout] [--pairs 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = """
import json, statistics, time
import perfmodel
from perfmodel.search import gemm_kernel
gemm_kernel.load()
OPS = {"h100 8192^3 bf16": ("nvidia-h100-sxm5-80gb", {"kind": "matmul", "m": 8192, "n": 8192, "k": 8192}),
       "h100 1x4096x4096": ("nvidia-h100-sxm5-80gb", {"kind": "matmul", "m": 1, "n": 4096, "k": 4096}),
       "tpu-v5p 8192^3": ("google-tpu-v5p", {"kind": "matmul", "m": 8192, "n": 8192, "k": 8192})}
out = {}
for label, (device, op) in OPS.items():
    hw, op = perfmodel.load_hardware(device), {**op, "dtype": "bf16"}
    for _ in range(30):
        perfmodel.search(hw, op, cache=False)
    times = []
    for _ in range(REPEATS):
        start = time.process_time()
        perfmodel.search(hw, op, cache=False)
        times.append(time.process_time() - start)
    times.sort()
    out[label] = (statistics.median(times) * 1e3, times[len(times) // 10] * 1e3)
print(json.dumps(out))
"""


def run(tree: Path, repeats: int) -> dict[str, list[float]]:
    """The child's figures (label -> [median ms, p10 ms]) in checkout ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", CHILD.replace("REPEATS", str(repeats))], cwd=tree, env=env,
                          capture_output=True, text=True, check=True)
    figures: dict[str, list[float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("base", type=Path)
    parser.add_argument("tree", type=Path, nargs="?", default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=300)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; CPU ms per search, median (p10): base -> this tree, ratio")
    for pair in range(args.pairs):
        base, tree = run(args.base, args.repeats), run(args.tree, args.repeats)
        cells = [f"{label}: {b[0]:.3f} ({b[1]:.3f}) -> {tree[label][0]:.3f} ({tree[label][1]:.3f}) "
                 f"{tree[label][0] / b[0]:.2f}x" for label, b in base.items()]
        print(f"pair {pair + 1}: " + " | ".join(cells))


if __name__ == "__main__":
    main()
