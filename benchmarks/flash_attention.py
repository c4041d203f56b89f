"""Published FlashAttention-2 / -3 throughput on H100 against the model (nothing fitted on these rows).

    .venv/bin/python benchmarks/flash_attention.py [--fa2-library-tiles] [--fa2-forward-overlap] [--mma-sync-share X]

Reads benchmarks/data/flash_attention_published.csv (FA3 paper figures, H100 SXM5, fp16/bf16) and prints
the median |error| and bias of the predicted TFLOP/s per kernel, pass and mask. FA3 rows are the device as
specified (wgmma: warp-specialised kernels, the softmax partly under the MMAs); FA2 rows the same device with
synchronous warp-level MMA (``mma_scope: warp``), FlashAttention-2's mma.sync. FLOPs as the source counts them:
4·b·s²·h·d, halved under a causal mask, x2.5 for the backward.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

from perfmodel.dtypes import DType
from perfmodel.hardware import Hardware
from perfmodel.ops.attention import Attention
from perfmodel.roofline import predict_many
from perfmodel.search.fa2_tiles import add_switch_arguments, apply_switch_arguments, mma_sync_engines
from perfmodel.specs import load_hardware, parse_spec

DATA = Path(__file__).parent / "data" / "flash_attention_published.csv"


def _device(gpu: str, kernel: str) -> Hardware:
    """FA3 runs on the device as specified; FA2 with warp-level (mma.sync) matrix instructions."""
    hw = load_hardware(gpu)
    if kernel == "fa3":
        return hw
    data = hw.model_dump(mode="json")
    if not any(e.get("mma_scope") for e in data["engines"]):
        return hw  # no matrix-instruction scope in the spec (older checkouts): the device as it is
    mma_sync_engines(data["engines"])  # warp scope (and fa2_tiles.MMA_SYNC_SHARE's peak, where set)
    data.update(id=f"{gpu}-mma-sync", derived_from=gpu)
    return parse_spec(data, f"{gpu} with mma.sync")


def rows() -> list[dict[str, object]]:
    """Each published row with the model's TFLOP/s and the signed error (predicted / published − 1)."""
    with DATA.open() as f:
        table = list(csv.DictReader(f))
    out: list[dict[str, object]] = []
    groups: dict[tuple[str, str], list[dict[str, str]]] = {}
    for r in table:
        groups.setdefault((r["gpu"], r["kernel"]), []).append(r)
    for (gpu, kernel), group in groups.items():
        ops = [Attention(batch=int(r["batch"]), heads=int(r["heads"]), seq_q=int(r["seq_len"]),
                         seq_kv=int(r["seq_len"]), head_dim=int(r["head_dim"]), dtype=DType.BF16,
                         causal=r["causal"] == "1", pass_=r["pass"]) for r in group]  # type: ignore[arg-type]
        times = predict_many(_device(gpu, kernel), ops)
        for r, op, cost in zip(group, ops, times, strict=True):
            flops = 4.0 * op.batch * op.seq_q ** 2 * op.heads * op.head_dim / (2.0 if op.causal else 1.0)
            flops *= 2.5 if op.pass_ == "backward" else 1.0
            predicted = flops / cost.time_s / 1e12
            out.append({**r, "predicted_tflops": predicted, "error": predicted / float(r["tflops"]) - 1.0})
    return out


def summary(results: list[dict[str, object]]) -> dict[tuple[str, str, str], tuple[float, float, int]]:
    """(kernel, pass, causal) -> (median |error|, median signed error, rows)."""
    by: dict[tuple[str, str, str], list[float]] = {}
    for r in results:
        by.setdefault((str(r["kernel"]), str(r["pass"]), str(r["causal"])), []).append(float(r["error"]))  # type: ignore[arg-type]
    return {k: (statistics.median(abs(e) for e in v), statistics.median(v), len(v)) for k, v in sorted(by.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_switch_arguments(parser)  # the fa15 experiments (docs/accuracy.md), all off by default
    apply_switch_arguments(parser.parse_args())
    results = rows()
    print("| kernel | pass | causal | rows | median abs. error | median bias |\n|---|---|---|---:|---:|---:|")
    for (kernel, pass_, causal), (med, bias, n) in summary(results).items():
        print(f"| {kernel} | {pass_} | {causal} | {n} | {med:.1%} | {bias:+.1%} |")
    errs = [abs(float(r["error"])) for r in results]  # type: ignore[arg-type]
    print(f"\nall {len(errs)} rows: median |error| {statistics.median(errs):.1%}")


if __name__ == "__main__":
    main()
