"""Published end-to-end training throughputs against the model: achieved TFLOP/s per device, each in its
source's FLOP convention (perfmodel/training/published.py lists the runs and sources).

    .venv/bin/python benchmarks/training_throughput.py [--breakdown [NAME ...]]

Prints a markdown table (docs/accuracy.md keeps the latest) and the median and worst |error|; with
``--breakdown``, the predicted step part by part beside the published step instead, for the runs whose names
contain one of the NAMEs (default: "Llama 3").
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

from perfmodel.search.fa2_tiles import add_switch_arguments, apply_switch_arguments
from perfmodel.training import attention_memory
from perfmodel.training.breakdown import markdown, step_breakdown
from perfmodel.training.published import (
    RUNS,
    TABLE_CONVENTIONS,
    implied_attention_tflops,
    predict,
    published_bounds,
)

FA_PUBLISHED = Path(__file__).parent / "data" / "flash_attention_published.csv"


def published_attention_tflops(kernel: str, seq_len: int = 16384, head_dim: int = 128) -> float:
    """A published H100 attention kernel's forward + backward rate in useful (causal) TFLOP/s: its causal forward
    and its backward (the FA3 paper's Fig. 6 is non-causal only; it stands in) at the longest published shape,
    weighted as training runs them (the backward 2.5 x the forward's FLOPs): 3.5 / (1/fwd + 2.5/bwd)."""
    with FA_PUBLISHED.open() as f:
        rows = [r for r in csv.DictReader(f) if r["kernel"] == kernel and int(r["seq_len"]) == seq_len
                and int(r["head_dim"]) == head_dim]
    fwd = next(float(r["tflops"]) for r in rows if r["pass"] == "forward" and r["causal"] == "1")
    bwd = next(float(r["tflops"]) for r in rows if r["pass"] == "backward")
    return 3.5 / (1.0 / fwd + 2.5 / bwd)


def breakdown(names: list[str]) -> None:
    """The step breakdown of every run whose name contains one of ``names``."""
    print(markdown([step_breakdown(r) for r in RUNS if any(n in r.name for n in names)]))
    rates = ", ".join(f"{k.upper()} {published_attention_tflops(k):.0f}" for k in ("fa2", "fa3"))
    print(f"\npublished H100 attention, forward + backward at 16K tokens, head dim 128 (causal forward, "
          f"non-causal backward; FA3 paper Figs. 5-6, benchmarks/data/flash_attention_published.csv), useful "
          f"TFLOP/s: {rates}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--breakdown", nargs="*", metavar="NAME",
                        help='the step by part for the runs whose names contain NAME (default: "Llama 3")')
    add_switch_arguments(parser)  # the fa15 FlashAttention-2 experiments (docs/accuracy.md), all off by default
    parser.add_argument("--no-attention-buffers", action="store_true",
                        help="leave the attention backward's working buffers out of the memory (the figures before "
                             "the fifteenth pass)")
    args = parser.parse_args()
    apply_switch_arguments(args)
    attention_memory.COUNTED["on"] = not args.no_attention_buffers
    if args.breakdown is not None:
        breakdown(args.breakdown or ["Llama 3"])
        return
    print("| run | device x count | convention | layout (searched: mb, v, recompute) | published TFLOP/s | "
          "predicted | error |")
    print("|---|---|---|---|---|---|---|")
    errors = []
    causal_notes = []
    bound_notes = []
    for run in RUNS:
        p = predict(run)
        bounds = published_bounds(run)
        if bounds is not None:
            low, high = bounds
            bound_notes.append(f"{p['name']}: {low:.1f} to {high:.1f} TFLOP/s, error "
                               f"{p['predicted_tflops'] / high - 1.0:+.1%} to {p['predicted_tflops'] / low - 1.0:+.1%}")
        if p["predicted_tflops_causal"] is not None:
            causal_notes.append(f"{p['name']}: {p['predicted_tflops_causal']:.1f} "
                                f"({p['predicted_tflops_causal'] / run.published_tflops - 1.0:+.1%})")
        lay = p["layout"]
        errors.append(abs(p["error"]))
        flag = "" if p["fits"] else " (does not fit in the model)"
        print(f"| {p['name']} | {run.hardware} x {run.devices} | {run.convention} | tp{lay['tp']} pp{lay['pp']} "
              f"cp{lay['cp']} dp{lay['dp']} ZeRO-{lay['zero']} {lay['recompute']} mb{lay['micro_batch']} "
              f"v{lay['virtual_stages']}{flag} | {p['published_tflops']:.1f} | {p['predicted_tflops']:.1f} | "
              f"{p['error']:+.1%} |")
    within = sum(e <= 0.15 for e in errors)
    print(f"\nmedian |error| {statistics.median(errors):.1%}, worst {max(errors):.1%}, "
          f"within 15 %: {within} of {len(errors)}")
    if causal_notes:
        print("\nthe same steps counted with causal attention (6N + 6·L·H·Q·T; the source states no convention): "
              + "; ".join(causal_notes))
    if bound_notes:
        print("\nthe published TFLOP/s that the source's rounded TFLOP/s (to 10) and MFU (to 1 % of the BF16 dense "
              "peak) both allow: " + "; ".join(bound_notes))
    long = next(r for r in RUNS if r.name == "Llama 3 405B, 16K GPUs, 131K context")
    short = next(r for r in RUNS if r.name == "Llama 3 405B, 16K GPUs")
    implied = ", ".join(f"{c} {implied_attention_tflops(long, short, c):.0f}" for c in TABLE_CONVENTIONS)
    print(f"\nLlama 3 Table 4's own rows (131K vs 8K context on 16K GPUs, the same tokens per GPU): the causal "
          f"attention TFLOP/s per GPU they imply if the table counted in each convention (published figures only): "
          f"{implied}")


if __name__ == "__main__":
    main()
