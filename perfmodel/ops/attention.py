"""Scaled dot-product attention: fused (flash) or materialized (S and P written to memory)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

import numpy as np

from perfmodel.dtypes import DType
from perfmodel.ops.base import (
    DTYPE_BYTES,
    FloatArray,
    Op,
    OpColumns,
    OpError,
    Pass,
    Work,
    check_pass,
    column,
    dtype_column,
    pass_factors,
    pass_invalid,
    positive_invalid,
    register,
    require_positive,
)
from perfmodel.ops.checks import one_of

SOFTMAX_VECTOR_FLOPS = 4.0  # scale, running max, subtract, sum per score
LSE_BYTES = 4.0  # fp32 log-sum-exp per query row, kept for the backward
IMPLEMENTATIONS = ("flash", "materialized")


@register
@dataclass(frozen=True)
class Attention(Op):
    """O = softmax(Q Kᵀ / √d) V over ``heads`` query heads sharing ``kv_heads`` K/V heads (GQA).

    Causal masking aligns the last query with the last key (decode with a KV cache); only the
    unmasked scores are computed (``mask_fraction``). ``nominal_matrix_flops`` counts all
    scores, as ``torch.utils.flop_counter`` does.
    """

    kind = "attention"

    batch: int
    heads: int
    seq_q: int
    seq_kv: int
    head_dim: int
    dtype: DType
    kv_heads: int | None = None
    head_dim_v: int | None = None
    causal: bool = False
    implementation: Literal["flash", "materialized"] = "flash"
    pass_: Pass = "forward"

    columnar: ClassVar[bool] = True

    def __post_init__(self) -> None:
        require_positive(self.kind, batch=self.batch, heads=self.heads, seq_q=self.seq_q,
                         seq_kv=self.seq_kv, head_dim=self.head_dim)
        check_pass(self.kind, self.pass_)
        if self.implementation not in IMPLEMENTATIONS:  # a dict's converter names it first; a column's here
            raise OpError(self.kind, "implementation", f"expected one of {', '.join(IMPLEMENTATIONS)}, "
                          f"got {self.implementation!r}")
        kv = self.heads if self.kv_heads is None else self.kv_heads
        if kv <= 0 or self.heads % kv:
            raise OpError(self.kind, "kv_heads", f"{kv} must divide heads ({self.heads})")
        if self.head_dim_v is not None and self.head_dim_v <= 0:
            raise OpError(self.kind, "head_dim_v", "must be > 0")

    @classmethod
    def invalid_rows(cls, cols: OpColumns) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """The rows ``__post_init__`` may reject, found at once (NaN: an unset ``kv_heads`` / ``head_dim_v``)."""
        v = cols.values
        heads = v["heads"]
        kv = np.where(np.isnan(v["kv_heads"]), heads, v["kv_heads"])
        with np.errstate(divide="ignore", invalid="ignore"):
            uneven = np.fmod(heads, np.where(kv > 0, kv, 1.0)) != 0
        bad: np.ndarray[Any, np.dtype[np.bool_]] = (
            positive_invalid(cols, "batch", "heads", "seq_q", "seq_kv", "head_dim") | pass_invalid(cols)
            | (kv <= 0) | uneven | (v["head_dim_v"] <= 0) | ~one_of(v["implementation"], IMPLEMENTATIONS))
        return bad

    def loop_dims(self) -> dict[str, int]:
        return {"b": self.batch, "h": self.heads, "sq": self.seq_q, "skv": self.seq_kv,
                "d": self.head_dim, "dv": self.head_dim_v or self.head_dim}

    @property
    def mask_fraction(self) -> float:
        return float(_mask_fraction(np.array([self.seq_q], float), np.array([self.seq_kv], float),
                                    np.array([self.causal]))[0])

    @property
    def nominal_matrix_flops(self) -> float:
        """All scores counted (torch's counter): 2·b·h·sq·skv·(d + dv) fwd, ·(3d + 2dv) bwd."""
        d, dv = self.head_dim, self.head_dim_v or self.head_dim
        base = 2.0 * self.batch * self.heads * self.seq_q * self.seq_kv
        return base * ((d + dv) * (self.pass_ != "backward") + (3 * d + 2 * dv) * (self.pass_ != "forward"))

    @classmethod
    def work(cls, ops: Sequence[Self] | OpColumns, granularity_bytes: float = 1.0) -> Work:
        b, h, sq, skv, d = (column(ops, f) for f in ("batch", "heads", "seq_q", "seq_kv", "head_dim"))
        if isinstance(ops, OpColumns):
            v = ops.values
            kvh = np.where(np.isnan(v["kv_heads"]), h, v["kv_heads"])
            dv = np.where(np.isnan(v["head_dim_v"]), d, v["head_dim_v"])
            causal = v["causal"] != 0
            materialized = v["implementation"] == "materialized"
        else:
            kvh = np.array([o.heads if o.kv_heads is None else o.kv_heads for o in ops], dtype=np.float64)
            dv = np.array([o.head_dim_v or o.head_dim for o in ops], dtype=np.float64)
            causal = np.array([o.causal for o in ops])
            materialized = np.array([o.implementation == "materialized" for o in ops])
        codes = dtype_column(ops, "dtype")
        elem = DTYPE_BYTES[codes]
        fwd, bwd = pass_factors(ops)
        frac = np.where(materialized, 1.0, _mask_fraction(sq, skv, causal))
        scores = b * h * sq * skv * frac
        matrix = 2.0 * scores * ((d + dv) * fwd + (3 * d + 2 * dv) * bwd)
        vector = scores * SOFTMAX_VECTOR_FLOPS * (fwd + 2.0 * bwd)
        special = scores * (fwd + bwd)  # exp (recomputed in the backward)
        q_bytes, o_bytes = b * h * sq * d * elem, b * h * sq * dv * elem
        kv_bytes = b * kvh * skv * (d + dv) * elem
        lse = b * h * sq * LSE_BYTES
        # materialized: S written and read, P written and read (per pass), full square.
        smat = np.where(materialized, 4.0 * b * h * sq * skv * elem, 0.0)
        roles = {
            "activations_in": q_bytes * fwd + bwd * (q_bytes + 2.0 * o_bytes),
            "kv_cache": kv_bytes * (fwd + 2.0 * bwd),
            "activations_out": o_bytes * fwd + bwd * q_bytes,
            "workspace": (lse + smat) * fwd + bwd * (lse + 2.0 * smat),
        }
        dtypes = codes
        kernels = np.where(materialized, 3.0, 1.0) * fwd + np.where(materialized, 5.0, 2.0) * bwd
        # flash attention (forward and backward kernels) has its own tile model; materialized runs as GEMMs
        flash = ~materialized
        attention = np.stack([np.where(flash, b * h, 0.0), h / kvh, sq, skv, d, dv, causal.astype(float),
                              kv_bytes, fwd, bwd], axis=1)
        gemm_b = np.where(flash, 0.0, b * h * (fwd + bwd))
        return Work(
            n=len(ops), flops_matrix=matrix, flops_vector=vector, flops_special=special,
            bytes_by_role=roles, matrix_dtype=dtypes, vector_dtype=dtypes,
            parallel_items=b * h * np.ceil(sq / 128),
            kernels=kernels,
            # GEMM-equivalent for tile and wave quantization: one tile per 128 query rows.
            attention=attention,
            gemm_batch=gemm_b, gemm_m=sq, gemm_n=dv,
            gemm_k=np.maximum(matrix / np.maximum(2.0 * b * h * sq * dv * (fwd + bwd), 1.0), 1.0),
        )


def _mask_fraction(sq: FloatArray, skv: FloatArray, causal: FloatArray) -> FloatArray:
    """Share of (query, key) pairs a causal mask keeps, bottom-right aligned."""
    kept = np.where(sq <= skv, sq * (skv - sq) + sq * (sq + 1) / 2, skv * (skv + 1) / 2)
    return np.where(causal, kept / (sq * skv), 1.0)
