"""Which aten op names perfmodel models, and building a perfmodel op dict from one recorded call."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from perfmodel.ops import OpError, make_op
from perfmodel.traces import aten_comms, aten_foreach, aten_gemm, aten_nn, aten_simple, fbgemm_ops, triton_ops
from perfmodel.traces.aten_args import Args, Unbuildable
from perfmodel.traces.records import OpCall

OpDict = dict[str, Any]
Builder = Callable[[Args], OpDict | tuple[OpDict, list[str]]]

BUILDERS: dict[str, Builder] = {
    "aten::mm": aten_gemm.mm, "aten::addmm": aten_gemm.addmm, "aten::bmm": aten_gemm.bmm,
    "aten::baddbmm": aten_gemm.baddbmm, "aten::matmul": aten_gemm.matmul, "aten::linear": aten_gemm.linear,
    "aten::layer_norm": aten_simple.layernorm, "aten::native_layer_norm": aten_simple.layernorm,
    "aten::rms_norm": aten_simple.rmsnorm, "aten::_fused_rms_norm": aten_simple.rmsnorm,
    "aten::softmax": aten_simple.softmax, "aten::_softmax": aten_simple.softmax,
    "aten::embedding": aten_simple.embedding, "aten::index_select": aten_simple.index_select,
    "aten::copy_": aten_simple.copy, "aten::clone": aten_simple.copy, "aten::contiguous": aten_simple.copy,
    "aten::transpose": aten_simple.transpose, "aten::permute": aten_simple.transpose,
    "aten::sum": aten_simple.reduction, "aten::mean": aten_simple.reduction, "aten::amax": aten_simple.reduction,
    "aten::amin": aten_simple.reduction, "aten::cat": aten_simple.cat,
    "aten::linalg_vector_norm": aten_simple.vector_norm,
}
BUILDERS.update(dict.fromkeys(aten_gemm._CONV_ARGS, aten_gemm.convolution))
BUILDERS["aten::convolution_backward"] = aten_gemm.convolution_backward
BUILDERS.update(dict.fromkeys(
    [f"aten::{op}{suffix}" for op in ("add", "sub", "mul", "div") for suffix in ("", "_")], aten_simple.binary))
BUILDERS.update(dict.fromkeys(aten_simple.ACTIVATION_NAMES, aten_simple.activation))
BUILDERS.update(aten_comms.BUILDERS)
BUILDERS.update(aten_nn.BUILDERS)
BUILDERS.update(dict.fromkeys(("aten::_log_softmax", "aten::log_softmax"), aten_simple.softmax))
BUILDERS.update(dict.fromkeys(aten_foreach.NAMES, aten_foreach.foreach))


@functools.lru_cache(maxsize=1 << 16)  # asked once per kernel per enclosing op: a trace repeats a few hundred names
def recognised(name: str) -> bool:
    """True for an op name perfmodel has a builder for (``aten::_scaled_dot_product_*`` and TorchInductor's
    ``triton_poi_...`` kernel records included)."""
    return name in BUILDERS or _is_sdpa(name) or triton_ops.is_inductor_kernel(name) or fbgemm_ops.recognised(name)


def _is_sdpa(name: str) -> bool:
    return name.startswith(("aten::_scaled_dot_product_", "aten::scaled_dot_product_attention"))


def build(call: OpCall) -> tuple[OpDict, list[str]]:
    """The perfmodel op dict of one call and notes on what was assumed; ``Unbuildable`` if impossible."""
    args = Args(call)
    builder: Builder = aten_gemm.attention if _is_sdpa(call.name) else triton_ops.build \
        if triton_ops.is_inductor_kernel(call.name) else fbgemm_ops.build if fbgemm_ops.recognised(call.name) \
        else BUILDERS[call.name]
    result = builder(args)
    op, notes = result if isinstance(result, tuple) else (result, [])
    notes = [*args.notes, *notes]
    try:
        make_op(op)
    except OpError as exc:
        raise Unbuildable(f"{call.name}: recorded shapes give an invalid op ({exc})") from None
    return op, notes
