"""Small ONNX models built with ``onnx.helper`` for the importer tests."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _w(name: str, *shape: int, dtype: type = np.float16) -> onnx.TensorProto:
    rng = np.random.default_rng(0)
    return numpy_helper.from_array(rng.standard_normal(shape).astype(dtype), name)


def _ints(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def transformer_block(batch: int = 2, seq: int = 128, dim: int = 256, heads: int = 4,
                      extra: onnx.NodeProto | None = None) -> onnx.ModelProto:
    """Pre-norm block: LN, Q/K/V MatMuls, MatMul-Div-Softmax-MatMul attention, out proj, residual,
    LN, int8 weight DequantizeLinear → MatMul (+bias, Gelu), MatMul, residual."""
    d = dim // heads
    h = helper.make_node
    nodes = [
        h("LayerNormalization", ["x", "ln1_g", "ln1_b"], ["ln1"], name="/block/ln1/LayerNorm", axis=-1),
        h("MatMul", ["ln1", "wq"], ["q"], name="/block/attn/q_proj/MatMul"),
        h("MatMul", ["ln1", "wk"], ["k"], name="/block/attn/k_proj/MatMul"),
        h("MatMul", ["ln1", "wv"], ["v"], name="/block/attn/v_proj/MatMul"),
        h("Reshape", ["q", "heads_shape"], ["q4"], name="/block/attn/q_reshape"),
        h("Reshape", ["k", "heads_shape"], ["k4"], name="/block/attn/k_reshape"),
        h("Reshape", ["v", "heads_shape"], ["v4"], name="/block/attn/v_reshape"),
        h("Transpose", ["q4"], ["qt"], name="/block/attn/q_transpose", perm=[0, 2, 1, 3]),
        h("Transpose", ["k4"], ["kt"], name="/block/attn/k_transpose", perm=[0, 2, 3, 1]),
        h("Transpose", ["v4"], ["vt"], name="/block/attn/v_transpose", perm=[0, 2, 1, 3]),
        h("MatMul", ["qt", "kt"], ["scores"], name="/block/attn/qk/MatMul"),
        h("Div", ["scores", "scale"], ["scaled"], name="/block/attn/scale/Div"),
        h("Softmax", ["scaled"], ["probs"], name="/block/attn/Softmax", axis=-1),
        h("MatMul", ["probs", "vt"], ["ctx"], name="/block/attn/av/MatMul"),
        h("Transpose", ["ctx"], ["ctx_t"], name="/block/attn/ctx_transpose", perm=[0, 2, 1, 3]),
        h("Reshape", ["ctx_t", "flat_shape"], ["ctx2"], name="/block/attn/ctx_reshape"),
        h("MatMul", ["ctx2", "wo"], ["attn"], name="/block/attn/o_proj/MatMul"),
        h("Add", ["x", "attn"], ["res1"], name="/block/residual1/Add"),
        h("LayerNormalization", ["res1", "ln2_g", "ln2_b"], ["ln2"], name="/block/ln2/LayerNorm", axis=-1),
        h("DequantizeLinear", ["w1_q", "w1_scale"], ["w1"], name="/block/mlp/fc1/DequantizeLinear", axis=1),
        h("MatMul", ["ln2", "w1"], ["fc1"], name="/block/mlp/fc1/MatMul"),
        h("Add", ["fc1", "b1"], ["fc1b"], name="/block/mlp/fc1/Add"),
        h("Gelu", ["fc1b"], ["act"], name="/block/mlp/Gelu"),
        h("MatMul", ["act", "w2"], ["fc2"], name="/block/mlp/fc2/MatMul"),
        h("Add", ["res1", "fc2"], ["y"], name="/block/residual2/Add"),
    ]
    if extra is not None:
        nodes.append(extra)
    inits = [
        _w("ln1_g", dim), _w("ln1_b", dim), _w("ln2_g", dim), _w("ln2_b", dim),
        _w("wq", dim, dim), _w("wk", dim, dim), _w("wv", dim, dim), _w("wo", dim, dim),
        numpy_helper.from_array(np.ones((dim, 4 * dim), dtype=np.int8), "w1_q"),
        _w("w1_scale", 4 * dim), _w("b1", 4 * dim), _w("w2", 4 * dim, dim),
        numpy_helper.from_array(np.array(d ** 0.5, dtype=np.float16), "scale"),
        _ints("heads_shape", [batch, seq, heads, d]), _ints("flat_shape", [batch, seq, dim]),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)]
    if extra is not None:
        outputs += [helper.make_tensor_value_info(o, TensorProto.FLOAT16, None) for o in extra.output]
    graph = helper.make_graph(nodes, "tiny_block",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [batch, seq, dim])],
                              outputs, inits)
    opsets = [helper.make_opsetid("", 21)]
    if extra is not None and extra.domain:
        opsets.append(helper.make_opsetid(extra.domain, 1))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    return model


def torch_transformer() -> tuple[object, tuple[object, ...]]:
    """A 2-block pre-norm transformer (embedding, LayerNorm, fused QKV Linear, SDPA, GELU MLP, head)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self, dim: int = 64, heads: int = 4) -> None:
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, s, d = x.shape
            q, k, v = (t.view(b, s, self.heads, -1).transpose(1, 2) for t in self.qkv(self.ln1(x)).split(d, dim=-1))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d)
            x = x + self.out(a)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(100, 64)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.head = nn.Linear(64, 100, bias=False)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            x = self.emb(ids)
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    return Model(), (torch.zeros(2, 16, dtype=torch.long),)
