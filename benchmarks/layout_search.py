"""Layout search speed and result: every layout of a model on N devices, CPU seconds (one process).

    .venv/bin/python benchmarks/layout_search.py [--model llama-3.1-405b] [--hardware nvidia-h100-sxm5-80gb]
        [--devices 16384] [--global-batch 2048] [--seq-len 8192] [--top 5]

Prints the layouts costed, the CPU seconds (time.process_time: the machine is shared, wall time is
not the figure), how many fit, the reasons the others do not, and the fastest layouts.
"""

from __future__ import annotations

import argparse
import time

from perfmodel.graph.llm_config import bundled
from perfmodel.roofline import resolve_hardware
from perfmodel.training.layout import TrainingSetup
from perfmodel.training.search import fastest, search_layouts
from perfmodel.units import format_bytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="llama-3.1-405b")
    parser.add_argument("--hardware", default="nvidia-h100-sxm5-80gb")
    parser.add_argument("--devices", type=int, default=16384)
    parser.add_argument("--global-batch", type=int, default=2048)
    parser.add_argument("--seq-len", type=int, default=8192)
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()
    cfg, hw = bundled(args.model), resolve_hardware(args.hardware)
    setup = TrainingSetup(seq_len=args.seq_len, global_batch=args.global_batch)
    start = time.process_time()
    search_layouts(cfg, hw, 8, TrainingSetup(seq_len=128, global_batch=8))  # lazy imports, device tables
    first_s = time.process_time() - start
    start = time.process_time()
    result = search_layouts(cfg, hw, args.devices, setup)
    cpu_s = time.process_time() - start
    print(f"{args.model} on {args.devices} x {args.hardware}, global batch {args.global_batch} x {args.seq_len} tokens")
    print(f"layouts costed: {result.count}; fit: {len(result.ranked())}; CPU {cpu_s:.2f} s "
          f"({result.count / cpu_s:,.0f} layouts/s; a first 8-device search before it, with the lazy imports and "
          f"device tables: {first_s:.2f} s)")
    for reason, n in sorted(result.reason_counts().items(), key=lambda kv: -kv[1]):
        print(f"  ruled out by {reason}: {n}")
    print(f"{'tp':>3} {'cp':>3} {'pp':>4} {'dp':>5} {'zero':>4} {'recompute':>9} {'mb':>3} {'v':>2} "
          f"{'schedule':>8} {'step s':>8} {'MFU':>6} {'memory':>9}")
    for row in fastest(result, args.top):
        lay = row["layout"]
        print(f"{lay['tp']:>3} {lay['cp']:>3} {lay['pp']:>4} {lay['dp']:>5} {lay['zero']:>4} {lay['recompute']:>9} "
              f"{lay['micro_batch']:>3} {lay['virtual_stages']:>2} {lay['schedule']:>8} {row['step_s']:>8.3f} "
              f"{row['mfu'] or 0:>6.1%} {format_bytes(row['memory_bytes']['total']):>9}")


if __name__ == "__main__":
    main()
