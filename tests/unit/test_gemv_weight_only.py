"""Decode GEMMs (M = 1..16) with weight-only int4 / int8 weights: weight-read-bound, the stored bytes moved once.

Published reference: Marlin (Frantar & Alistarh, IST-DASLab/marlin README @ 2f6d7c1 and arXiv 2408.11743): an FP16 x
INT4 kernel (group size 128) reaches "the maximum possible 3.87x speedup" over FP16 weights "up to batchsizes around
16-32" on a large matrix (its ``bench.py``: N = 72 * 256, K = 4 * N); 3.87x is the ratio of the bytes moved, with
their ``ideal`` traffic 2mk + kn/2 + 2mn + 2(k/128)n. So the model's fp16 / int4 time ratio on large decode GEMMs
should sit near the byte ratio, the DRAM bytes be exactly those, and the bound be DRAM, not the tensor cores.
"""

from __future__ import annotations

import pytest

import perfmodel
from perfmodel.graph import LlmWorkload, build_llm, bundled, estimate
from perfmodel.roofline import predict
from perfmodel.tuners.ranking import rank_schedules

DEVICES = ["nvidia-a100-sxm4-80gb", "nvidia-h100-sxm5-80gb"]
SHAPES = [(16384, 16384), (72 * 256, 4 * 72 * 256)]  # square, and Marlin's benchmark matrix (N, K)
STORED_BYTES = {None: 2.0, "int8": 1.0, "int4": 0.5}
GROUP = 128


def _op(m: int, n: int, k: int, weight_dtype: str | None) -> dict[str, object]:
    op: dict[str, object] = {"kind": "matmul", "m": m, "n": n, "k": k, "dtype": "fp16"}
    if weight_dtype is not None:
        op["weight_dtype"] = weight_dtype
    return op


def _ideal_bytes(m: int, n: int, k: int, weight_dtype: str | None) -> float:
    """Marlin's traffic: fp16 activations in and out, the weights at their stored width, one fp16 scale per group."""
    scales = 2.0 * (k / GROUP) * n if weight_dtype is not None else 0.0
    return 2.0 * m * k + STORED_BYTES[weight_dtype] * k * n + 2.0 * m * n + scales


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("n", "k"), SHAPES)
@pytest.mark.parametrize("m", [1, 16])
@pytest.mark.parametrize("weight_dtype", ["int4", "int8"])
def test_decode_gemm_is_dram_bound_on_the_stored_bytes(device: str, n: int, k: int, m: int,
                                                       weight_dtype: str) -> None:
    hw = perfmodel.load_hardware(device)
    cost = predict(hw, _op(m, n, k, weight_dtype))
    assert cost.bound == hw.dram.name  # before: "tensor" for int4 (16-row tiles fed at 2 B per weight)
    assert cost.bytes_by_level[hw.dram.name] == pytest.approx(_ideal_bytes(m, n, k, weight_dtype), rel=1e-9)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("n", "k"), SHAPES)
@pytest.mark.parametrize("m", [1, 16])
def test_speedup_over_fp16_weights_is_near_the_byte_ratio(device: str, n: int, k: int, m: int) -> None:
    fp16 = predict(device, _op(m, n, k, None)).time_s
    for weight_dtype in ("int4", "int8"):
        ideal = _ideal_bytes(m, n, k, None) / _ideal_bytes(m, n, k, weight_dtype)  # 3.87x / 1.97x
        ratio = fp16 / predict(device, _op(m, n, k, weight_dtype)).time_s
        # before: int4 2.39-2.83x on 16384^2 (A100 / H100); Marlin measures ~the ideal on large matrices
        assert 0.9 * ideal <= ratio <= ideal * 1.001, (weight_dtype, ratio, ideal)


def test_the_tile_holds_int4_weights_at_half_a_byte() -> None:
    cost = predict("nvidia-a100-sxm4-80gb", _op(1, 16384, 16384, "int4"))
    s = cost.schedule
    a_bytes = s["tile_m"] * s["tile_k"] * 2.0
    b_bytes = s["tile_n"] * s["tile_k"] * 0.5
    assert s["footprint_bytes"] == pytest.approx((a_bytes + b_bytes) * s["stages"])


def test_ranked_schedules_load_the_stored_weights() -> None:
    """The batch ranking (and so the Triton hook and `perfmodel search`) costs B at its stored width too."""
    schedule = {"tile_m": [16.0], "tile_n": [64.0], "tile_k": [128.0], "stages": [4.0], "split_k": [1.0],
                "group_m": [8.0], "warps": [4.0]}
    times = {wd: float(rank_schedules("nvidia-h100-sxm5-80gb", _op(1, 16384, 16384, wd), schedule).time_s[0])
             for wd in (None, "int4")}
    assert times[None] / times["int4"] > 2.5  # 2.99x; before 1.98x (94.4 us: the tile fed 2 B per weight)


def test_gptq_llama_decode_is_weight_read_bound() -> None:
    """compiler11's finding: a GPTQ int4 Llama decode step on an H100 came out 87 % tensor-bound."""
    est = estimate(build_llm(bundled("llama-3-8b"), LlmWorkload(batch=1, kv_len=1024, weight_dtype="int4")),
                   "nvidia-h100-sxm5-80gb")
    shares = est.to_json(detail=False)["bottleneck"]["shares"]
    assert shares[0]["category"] == "HBM3-bound weight reads" and shares[0]["share"] > 0.5


def test_weight_only_split_k_reduces_in_its_own_kernel() -> None:
    """Marlin reduces split partials in its output buffer (no second kernel); a 16-bit split-K GEMM still launches
    a reduction kernel. Without it, the int8 decode GEMM's split paid 2 us more: fp16 / int8 1.51x (byte ratio 1.97)."""
    a100 = "nvidia-a100-sxm4-80gb"
    int8 = predict(a100, _op(1, 4096, 4096, "int8"))
    fp16 = predict(a100, _op(1, 4096, 4096, None))
    assert int8.schedule["split_k"] > 1 and fp16.schedule["split_k"] == 1
    assert int8.overhead_s == fp16.overhead_s  # one launch each
    split16 = predict(a100, {"kind": "matmul", "m": 128, "n": 128, "k": 65536, "dtype": "fp16"})
    assert split16.schedule["split_k"] > 1 and split16.overhead_s == 2 * fp16.overhead_s
    assert fp16.time_s / int8.time_s > 1.7
