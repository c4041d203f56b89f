"""Reproduce LLMCompass's measured GPT-3 175B layer (TP=4 shard, A100) op by op.

The measurements are host wall clock around each PyTorch op (launch and synchronisation
included), so the graph is costed with ``timing="host"``, unfused attention (the measured
Q·Kᵀ, softmax and A·V kernels) and no fusion pass. The measured Q_K_V is three separate
[*, 12288] x [12288, 3072] GEMMs; the graph runs one fused QKV GEMM of the same FLOPs and bytes.

Bounds, and why: large prefill GEMMs are the best-modelled ops (±25 %); every prefill op is
within ±50 % (the batched Q·Kᵀ with K = 128 is the worst, ~45 % low); the prefill layer total
within ±15 %. Decode ops are tiny and include 10-50 µs of PyTorch eager overhead that no
device model sees (layernorm and GELU on 8 x 12288 elements measure 48 µs): decode GEMMs are
held to ±45 % and the decode layer total to ±35 %.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from perfmodel.graph import LlmWorkload, Parallelism, build_llm, bundled, estimate

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "llmcompass_gpt3_layer_breakdown_a100.csv"
NODE = {"Q_K_V": "qkv_proj", "Q_mul_K": "qk_matmul", "A_mul_V": "av_matmul", "Wo_proj": "o_proj",
        "W1_proj": "fc1", "W2_proj": "fc2", "Softmax": "softmax", "LayerNorm_MHA": "input_norm",
        "LayerNorm_FFN": "post_attention_norm", "GeLU": "gelu", "AllReduce_MHA": "attention_allreduce",
        "AllReduce_FFN": "mlp_allreduce"}
GEMMS = {"Q_K_V", "Wo_proj", "W1_proj", "W2_proj"}


def _measured(phase: str) -> dict[str, float]:
    with DATA.open() as f:
        return {r["op"]: float(r["measured_latency_s"]) for r in csv.DictReader(f) if r["phase"].startswith(phase)}


def breakdown(phase: str) -> list[tuple[str, float, float]]:
    """(op, predicted s, measured s) for layer 0 of the GPT-3 graph."""
    workload = LlmWorkload(phase="prefill" if phase == "prefill" else "decode", batch=8, prompt_tokens=2048,
                           kv_len=3073, dtype="fp16", attention="unfused")
    graph = build_llm(bundled("gpt3-175b"), workload, Parallelism(tp=4))
    est = estimate(graph, "nvidia-a100-sxm4-80gb", fusion=False, check_memory=False, timing="host")
    times = dict(zip((n.name for n in graph.nodes), est.node_time_s.tolist(), strict=True))
    return [(op, times[f"layers.0.{node}"], measured) for op, measured in _measured(phase).items()
            for o, node in NODE.items() if o == op]


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_gpt3_layer_op_by_op(phase: str) -> None:
    rows = breakdown(phase)
    assert len(rows) == 12
    for op, predicted, measured in rows:
        print(f"{phase:8} {op:14} predicted {predicted * 1e3:8.4f} ms  measured {measured * 1e3:8.4f} ms  "
              f"error {100 * (predicted - measured) / measured:+6.1f} %")
    total_p, total_m = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{phase:8} layer total   predicted {total_p * 1e3:8.3f} ms  measured {total_m * 1e3:8.3f} ms  "
          f"error {100 * (total_p - total_m) / total_m:+6.1f} %")
    errors = {op: abs(p - m) / m for op, p, m in rows}
    if phase == "prefill":
        assert all(errors[op] < 0.25 for op in GEMMS), errors
        assert all(e < 0.50 for e in errors.values()), errors
        assert abs(total_p - total_m) / total_m < 0.15
    else:
        assert all(errors[op] < 0.45 for op in GEMMS | {"Q_mul_K", "A_mul_V", "Softmax"}), errors
        assert abs(total_p - total_m) / total_m < 0.35
