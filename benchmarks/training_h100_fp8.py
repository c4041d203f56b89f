"""NVIDIA's published DGX-H100 FP8 pretraining throughputs against the training model: tokens/s per GPU, which
needs no FLOP convention, and the clock share that would close each row (as ``--breakdown`` of
training_throughput.py does for Llama 3's BF16 rows). A diagnostic beside training_throughput.py, not part of its
table: the sources give the layout but not the recomputation, so it is searched (none / selective / full, the
fastest that fits), and FP8 training's own kernels (casts, amax) are the model's FP8 GEMM path's.

    .venv/bin/python benchmarks/training_h100_fp8.py

Source: NVIDIA/NeMo ``docs/source/performance/performance_summary.md`` (container NeMo 24.07, DGX-H100, FP8):
model, GPUs, global batch, micro-batch, sequence length, TP, PP, CP, VP, tokens/s/GPU (figures only).
"""

from __future__ import annotations

import statistics
from typing import Any

from perfmodel.graph.llm_config import LlmConfig, bundled
from perfmodel.roofline import resolve_hardware
from perfmodel.training.layout import TrainingSetup
from perfmodel.training.search import SearchSpace, search_layouts

NEMO_2407 = "NVIDIA/NeMo docs/source/performance/performance_summary.md, NeMo 24.07, DGX-H100, FP8"
LLAMA2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
             "max_position_embeddings": 4096}  # meta-llama/Llama-2-7b-hf config.json
LLAMA2_70B = {"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
              "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 32000,
              "max_position_embeddings": 4096}  # meta-llama/Llama-2-70b-hf config.json
# name, model, GPUs, global batch, micro-batch, sequence, tp, pp, cp, vp, published tokens/s/GPU
ROWS: tuple[tuple[str, str | dict[str, Any], int, int, int, int, int, int, int, int, float], ...] = (
    ("GPT3-175B", "gpt3-175b", 128, 256, 1, 2048, 4, 8, 1, 6, 726.0),
    ("LLAMA2-7B", LLAMA2_7B, 8, 128, 1, 4096, 1, 1, 1, 1, 16847.0),
    ("LLAMA2-70B", LLAMA2_70B, 64, 128, 1, 4096, 4, 4, 1, 20, 1707.0),
    ("LLAMA3-8B", "llama-3-8b", 8, 128, 1, 8192, 1, 1, 2, 1, 12036.0),
    ("LLAMA3-70B", "llama-3-70b", 64, 128, 1, 8192, 4, 4, 2, 5, 1533.0),
)


def predict(row: tuple[str, str | dict[str, Any], int, int, int, int, int, int, int, int, float]) -> dict[str, Any]:
    """The fastest fitting layout's tokens/s per GPU, its error, and the clock share that would close it."""
    name, model, gpus, batch, micro, seq, tp, pp, cp, vp, published = row
    cfg = bundled(model) if isinstance(model, str) else LlmConfig.from_hf(model, name)
    dp = gpus // (tp * pp * cp)
    setup = TrainingSetup(seq_len=seq, global_batch=batch, precision="fp8", grad_bytes=4.0,
                          sequence_parallel=tp > 1, dropout=False, flash_attention=True, cp_attention="ring")
    space = SearchSpace(tp=(tp,), pp=(pp,), cp=(cp,), ep=(1,), zero=(1 if dp > 1 else 0,),
                        recompute=("none", "selective", "full"), micro_batch=(micro,), virtual_stages=(vp,),
                        schedules=("1f1b",))
    result = search_layouts(cfg, resolve_hardware("nvidia-h100-sxm5-80gb"), gpus, setup, space)
    ranked = result.ranked()
    if not ranked:
        raise ValueError(f"{name}: no layout fits: {sorted(set(result.reasons))[:2]}")
    i, t = ranked[0], result.times
    step = float(t.step_s[i])
    tokens = batch * seq / step / gpus
    m = float(t.microbatches[i])
    bubble = (pp - 1) / (vp * m) if pp > 1 else 0.0
    kernels = (float(t.compute_s[i]) + float(t.recompute_s[i])) * (1.0 + bubble)
    published_step = batch * seq / (published * gpus)
    return {"name": name, "published": published, "predicted": tokens, "error": tokens / published - 1.0,
            "recompute": result.layout(i).to_json()["recompute"],
            "clock_share": kernels / (kernels + published_step - step)}


def main() -> None:
    print(f"source: {NEMO_2407}\n")
    print("| run | recompute (searched) | published tokens/s/GPU | predicted | error | clock share to close |")
    print("|---|---|---:|---:|---:|---:|")
    errors = []
    for row in ROWS:
        p = predict(row)
        errors.append(p["error"])
        print(f"| {p['name']} | {p['recompute']} | {p['published']:.0f} | {p['predicted']:.0f} | {p['error']:+.1%} | "
              f"{p['clock_share']:.3f} |")
    print(f"\nmedian error {statistics.median(errors):+.1%}")


if __name__ == "__main__":
    main()
