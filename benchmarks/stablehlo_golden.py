"""StableHLO golden FLOPs: JAX functions lowered (``jax.jit(f).lower(...).as_text()``), imported, FLOPs compared
with XLA's own count (``Lowered.cost_analysis()['flops']``, HloCostAnalysis).

    python benchmarks/stablehlo_golden.py            # print the table
    python benchmarks/stablehlo_golden.py --write    # refresh tests/data/stablehlo/*.mlir and golden.json

XLA's cost analysis counts a ``while`` body once; the importer unrolls a counted loop, so ``fori_loop_fp32``
(4 iterations) reads about 4x. Needs ``jax`` (CPU wheels). The test ``tests/graph/test_stablehlo_import.py``
reads the written files, so it runs without jax.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "stablehlo"


def cases() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    import jax
    import jax.numpy as jnp

    def mlp(x: Any, w1: Any, w2: Any) -> Any:
        return jax.nn.softmax(jax.nn.gelu(x @ w1) @ w2, axis=-1)

    def attention(q: Any, k: Any, v: Any) -> Any:
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / 8.0
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

    def layernorm_linear(x: Any, g: Any, w: Any) -> Any:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return ((x - mean) * jax.lax.rsqrt(var + 1e-5) * g) @ w

    def conv_relu(x: Any, k1: Any, k2: Any) -> Any:
        dn = ("NCHW", "OIHW", "NCHW")
        h = jax.nn.relu(jax.lax.conv_general_dilated(x, k1, (1, 1), "SAME", dimension_numbers=dn))
        return jax.lax.conv_general_dilated(h, k2, (2, 2), "VALID", dimension_numbers=dn)

    def conv_nhwc_grouped(x: Any, k: Any) -> Any:
        return jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                            feature_group_count=4)

    def loop(x: Any, w: Any) -> Any:
        return jax.lax.fori_loop(0, 4, lambda i, h: jnp.tanh(h @ w), x)

    f32, bf16 = jnp.float32, jnp.bfloat16
    return {
        "mlp_bf16": (mlp, (jnp.ones((256, 1024), bf16), jnp.ones((1024, 4096), bf16), jnp.ones((4096, 1024), bf16))),
        "attention_fp16": (attention, tuple(jnp.ones((2, 8, 512, 64), jnp.float16) for _ in range(3))),
        "layernorm_linear_fp32": (layernorm_linear, (jnp.ones((512, 768), f32), jnp.ones((768,), f32),
                                                     jnp.ones((768, 3072), f32))),
        "conv_relu_fp32": (conv_relu, (jnp.ones((8, 64, 56, 56), f32), jnp.ones((64, 64, 3, 3), f32),
                                       jnp.ones((128, 64, 3, 3), f32))),
        "conv_nhwc_grouped_fp32": (conv_nhwc_grouped, (jnp.ones((4, 32, 32, 64), f32), jnp.ones((3, 3, 16, 64), f32))),
        "fori_loop_fp32": (loop, (jnp.ones((128, 256), f32), jnp.ones((256, 256), f32))),
    }


def model_flops(text: str) -> tuple[float, int, list[str]]:
    """FLOPs of the imported graph (per op, unfused), its parameters and its unsupported nodes' reasons."""
    from perfmodel.graph.estimate import estimate
    from perfmodel.graph.stablehlo_import import import_stablehlo

    graph = import_stablehlo(text)
    result = estimate(graph, "nvidia-h100-sxm5-80gb", fusion=False)
    return float(result.batch.flops[result.index].sum()), graph.params, [n.unsupported or "" for n in
                                                                          graph.unsupported()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="refresh the test fixtures")
    args = parser.parse_args()
    import jax

    golden: dict[str, dict[str, Any]] = {}
    print(f"{'case':<24} {'XLA FLOPs':>14} {'model FLOPs':>14} {'ratio':>7}  unsupported")
    for name, (fn, inputs) in cases().items():
        lowered = jax.jit(fn).lower(*inputs)
        text = lowered.as_text()
        xla = float((lowered.cost_analysis() or {})["flops"])
        flops, _, unsupported = model_flops(text)
        golden[name] = {"xla_flops": xla, "jax": jax.__version__}
        print(f"{name:<24} {xla:>14,.0f} {flops:>14,.0f} {flops / xla:>7.4f}  {'; '.join(unsupported) or '-'}")
        if args.write:
            DATA.mkdir(parents=True, exist_ok=True)
            (DATA / f"{name}.mlir").write_text(text)
    if args.write:
        (DATA / "golden.json").write_text(json.dumps(golden, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
