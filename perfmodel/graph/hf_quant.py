"""Hugging Face ``quantization_config`` → how an LLM's linear weights are stored and multiplied.

fp8 (DeepSeek-V3 / FineGrainedFP8, ``quant_method: fp8``): weights 1 byte, activations quantized on the fly,
so the GEMMs run in fp8 (W8A8) with one fp32 scale per ``weight_block_size`` block. GPTQ / AWQ: int4 (or
``bits``) weight-only, one fp16 scale and one packed zero point per ``group_size`` weights; the GEMM runs at
the activation dtype after dequantizing. bitsandbytes: ``load_in_8bit`` (LLM.int8, int8 weights, one fp32
scale per row, about 4 bytes per 4096 weights) or ``load_in_4bit`` (NF4/FP4, 64-weight blocks with an fp32
absmax, or about 1 byte with double quantization). mxfp4 (gpt-oss): OCP microscaling FP4, 4-bit e2m1 values
with one e8m0 (1-byte) scale per 32 → 4.25 bits per weight, on the MoE experts only (attention, router,
embeddings and head in bf16, as the checkpoint's ``modules_to_not_convert`` lists); the GEMM dequantizes
(weight-only). Embeddings and the LM head stay unquantized, as the libraries leave them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfmodel.graph.ir import GraphError

FP8_SCALE_BYTES = 4.0  # fp32 scale_inv per weight block
FP16_SCALE_BYTES = 2.0
PACKED_INT4_ZERO_BYTES = 0.5  # GPTQ/AWQ qzeros: one 4-bit zero point per group
NF4_BLOCK = 64  # bitsandbytes 4-bit blocksize
INT8_ROW_WEIGHTS = 4096  # LLM.int8: one fp32 scale per output row (~hidden weights)
MX_BLOCK = 32  # OCP MX: elements per shared scale
E8M0_SCALE_BYTES = 1.0
KNOWN_METHODS = ("fp8", "gptq", "awq", "bitsandbytes", "mxfp4")


@dataclass(frozen=True)
class WeightQuant:
    """Storage of quantized linear weights: dtype, weights per scale group, scale bytes per group, and
    the dtype the GEMM runs in (None: the workload's activation dtype); ``experts_only``: only the MoE expert
    weights are quantized."""

    method: str
    weight_dtype: str
    group_size: int
    scale_bytes_per_group: float
    gemm_dtype: str | None = None
    experts_only: bool = False

    @property
    def scale_bytes_per_weight(self) -> float:
        return self.scale_bytes_per_group / self.group_size


def _bits(q: dict[str, Any], default: int) -> int:
    bits = q.get("bits", q.get("w_bit", default))
    if bits not in (4, 8):
        raise GraphError("config", f"quantization_config.bits: {bits!r} is not modelled (4 or 8)")
    return int(bits)


def parse_quantization(q: Any) -> WeightQuant | None:
    """The weight storage a ``quantization_config`` describes; None when absent."""
    if q is None:
        return None
    if not isinstance(q, dict):
        raise GraphError("config", "quantization_config: expected a JSON object")
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8":
        block = q.get("weight_block_size") or [128, 128]
        if not (isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block)):
            raise GraphError("config", f"quantization_config.weight_block_size: expected [rows, cols], got {block!r}")
        return WeightQuant("fp8", "fp8_e4m3", int(block[0]) * int(block[1]), FP8_SCALE_BYTES, gemm_dtype="fp8_e4m3")
    if method in ("gptq", "awq"):
        bits = _bits(q, 4)
        raw = q.get("group_size", q.get("q_group_size", 128))
        if not isinstance(raw, int):
            raise GraphError("config", f"quantization_config.group_size: expected an integer, got {raw!r}")
        group = raw
        if group == -1:  # GPTQ per-channel: one scale per output column (~ a group of the input width)
            group = 4096
        if group <= 0:
            raise GraphError("config", f"quantization_config.group_size: expected > 0 or -1, got {group}")
        return WeightQuant(method, f"int{bits}", group, FP16_SCALE_BYTES + PACKED_INT4_ZERO_BYTES)
    if method == "mxfp4":  # 4-bit storage (int4's 0.5 byte per weight) + one e8m0 scale per 32
        return WeightQuant("mxfp4", "int4", MX_BLOCK, E8M0_SCALE_BYTES, experts_only=True)
    if method == "bitsandbytes":
        if q.get("load_in_4bit"):
            double = bool(q.get("bnb_4bit_use_double_quant", False))
            return WeightQuant("bitsandbytes-4bit", "int4", NF4_BLOCK, 1.0 if double else 4.0)
        if q.get("load_in_8bit"):
            return WeightQuant("bitsandbytes-8bit", "int8", INT8_ROW_WEIGHTS, 4.0)
        raise GraphError("config", "quantization_config (bitsandbytes): neither load_in_4bit nor load_in_8bit is set")
    raise GraphError("config", f"quantization_config.quant_method {method!r} is not modelled; known: "
                               f"{', '.join(KNOWN_METHODS)}")
