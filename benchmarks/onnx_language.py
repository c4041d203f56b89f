"""ONNX language models through the importer (issue 26): HF BERT / GPT-2 built from config classes (random
weights, no download), exported with ``torch.onnx.export`` (opset 17), imported; prints nodes, parameters vs
the module, matmul FLOPs vs the analytic count, and the fallback ops with their share of the A100 step.
Run: ``PYTHONPATH=$PWD python benchmarks/onnx_language.py`` (needs torch and transformers)."""

from __future__ import annotations

import collections
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "graph"))

import test_onnx_language as t  # type: ignore[import-not-found,unused-ignore]
import transformers  # type: ignore[import-not-found,unused-ignore]

from perfmodel.graph import estimate
from perfmodel.graph.onnx_import import import_onnx


def row(name: str, model: Any, layers: int, hidden: int, batch: int, seq: int) -> str:
    t.BATCH, t.SEQ = batch, seq
    graph = import_onnx(t._export(model))
    module = sum(p.numel() for p in model.parameters())
    analytic = 2 * batch * seq * t._linear_params(model) + layers * 4 * batch * seq * seq * hidden
    est = estimate(graph, "nvidia-a100-sxm4-80gb", fusion=False)
    times = dict(zip((n.name for n in est.graph.nodes), est.node_time_s, strict=True))
    fb = collections.Counter(n.source_op for n in graph.unsupported())
    share = sum(float(times.get(n.name, 0.0)) for n in graph.unsupported()) / float(sum(times.values()))
    return (f"| {name} (B={batch}, S={seq}) | {len(graph.nodes)} | {graph.params:,} vs {module:,} "
            f"({graph.params / module:.4f}) | {t._matmul_flops(graph):.4g} vs {analytic:.4g} "
            f"({t._matmul_flops(graph) / analytic:.4f}) | {dict(fb) or 'none'} | {share:.2%} |")


def main() -> None:
    print("| model | nodes | parameters vs module | matmul FLOPs vs analytic | fallback ops | fallback share (A100) |")
    print("|---|---|---|---|---|---|")
    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
                 vocab_size=1000, max_position_embeddings=64)
    print(row("BERT tiny", transformers.BertModel(transformers.BertConfig(**small), add_pooling_layer=False),
              2, 64, 2, 16))
    print(row("BERT-base", transformers.BertModel(transformers.BertConfig(), add_pooling_layer=False),
              12, 768, 1, 128))
    print(row("GPT-2 tiny", transformers.GPT2Model(transformers.GPT2Config(
        vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=64)), 2, 64, 2, 16))
    print(row("GPT-2 small", transformers.GPT2Model(transformers.GPT2Config()), 12, 768, 1, 128))


if __name__ == "__main__":
    main()
