"""Which math fp32 convolutions and matmuls of an estimated graph run in: TF32 tensor cores or IEEE fp32.

The op models cost ``dtype: fp32`` as IEEE fp32 (CUDA cores) unless ``compute_dtype`` says otherwise; the
frameworks that run an imported fp32 graph choose TF32 on their own on NVIDIA Ampere and later, so a whole-graph
estimate sets ``compute_dtype: tf32`` on the ops its mode names (``fp32_math``):

- ``framework`` (default): what the frameworks do by default. Convolutions on TF32: PyTorch
  ``torch.backends.cudnn.allow_tf32`` defaults to True, TensorFlow's ``enable_tensor_float_32_execution`` is on
  by default, ONNX Runtime's CUDA EP ``use_tf32`` defaults to true. Matmuls on TF32 only in graphs TensorFlow
  made (TFLite files, ONNX files whose producer is tf2onnx / keras2onnx / TensorFlow); PyTorch's
  ``torch.backends.cuda.matmul.allow_tf32`` defaults to False since 1.12, so other graphs' matmuls stay fp32.
  Only on NVIDIA devices with native TF32 tensor cores (the TF32 switch is CUDA's; older GPUs ignore it).
- ``tf32``: every fp32 convolution and matmul on TF32 wherever the matrix engine has TF32 natively (also
  AMD's XF32, Trainium / Inferentia).
- ``ieee``: nothing changed (fp32 on the vector engine, the figures before this option).

An op with an explicit ``compute_dtype`` (a trace or a user said which math ran) is left alone.
"""

from __future__ import annotations

from typing import Any, Literal

from perfmodel.dtypes import DType, parse_dtype
from perfmodel.graph.ir import Graph
from perfmodel.hardware import Hardware
from perfmodel.machine import tables
from perfmodel.ops.base import DTYPES

Fp32Math = Literal["framework", "tf32", "ieee"]
FP32_MATH: tuple[Fp32Math, ...] = ("framework", "tf32", "ieee")
_TF_PRODUCERS = ("tf2onnx", "keras2onnx", "tensorflow", "tflite")


def check(mode: str) -> Fp32Math:
    """``mode`` if it is one of ``FP32_MATH``, else a ValueError naming the choices."""
    for known in FP32_MATH:
        if mode == known:
            return known
    raise ValueError(f"fp32_math {mode!r}: expected one of {', '.join(FP32_MATH)}")


def has_tf32(hw: Hardware) -> bool:
    """The device's matrix engine runs TF32 natively (not a fallback to fp32)."""
    path = tables(hw).matrix_paths[DTYPES.index(DType.TF32)]
    return path.supported and path.dtype == DType.TF32


def tensorflow_made(graph: Graph) -> bool:
    """A graph TensorFlow produced: a TFLite file, or an ONNX file from tf2onnx / keras2onnx."""
    producer = str(graph.meta.get("producer") or "").lower()
    return graph.meta.get("kind") == "tflite" or producer.startswith(_TF_PRODUCERS)


def tf32_kinds(graph: Graph, hw: Hardware, mode: str) -> tuple[str, ...]:
    """The op kinds whose fp32 ops run on TF32 under ``mode`` on ``hw`` (empty: none)."""
    mode = check(mode)
    if mode == "ieee" or not has_tf32(hw):
        return ()
    if mode == "tf32":
        return ("conv2d", "matmul")
    if hw.vendor != "nvidia":
        return ()
    return ("conv2d", "matmul") if tensorflow_made(graph) else ("conv2d",)


def retyped(op: dict[str, Any], kinds: tuple[str, ...]) -> dict[str, Any]:
    """``op`` with ``compute_dtype: tf32`` when it is an fp32 op of one of ``kinds`` without a compute dtype."""
    if not kinds or op.get("kind") not in kinds or op.get("compute_dtype") is not None:
        return op
    try:
        fp32 = op.get("dtype") is not None and parse_dtype(op["dtype"]) == DType.FP32
    except (ValueError, TypeError):
        return op  # the op model reports the bad dtype
    return {**op, "compute_dtype": "tf32"} if fp32 else op


def summary(mode: str, kinds: tuple[str, ...], retyped_nodes: int) -> dict[str, Any]:
    """What the report says: the mode, the op kinds it put on TF32 and how many nodes."""
    return {"mode": mode, "tf32_kinds": list(kinds), "tf32_nodes": retyped_nodes}
