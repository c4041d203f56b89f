"""cuDNN / MIOpen / native training ops -> perfmodel op dicts: batch norm forward and backward, the convolution
backward of older PyTorch (``aten::cudnn_convolution_backward``), fills and activation gradients; and the stride
and padding of a convolution whose trace did not record them, inferred from its input and output shapes."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from perfmodel.traces.aten_args import TORCH_DTYPES, Args, Unbuildable, broadcast

OpDict = dict[str, Any]
MAX_STRIDE = 8


def infer_stride_padding(size: int, out: int, kernel: int, dilation: int = 1) -> tuple[int, int]:
    """(stride, padding) of one spatial axis from its input and output sizes: the smallest stride for which a
    padding gives ``out = (size + 2 p - dilation (kernel - 1) - 1) // stride + 1``, the usual ("same") padding
    ``dilation (kernel - 1) // 2`` tried first, then no padding; ``Unbuildable`` where none fits."""
    extent = dilation * (kernel - 1)
    for stride in range(1, MAX_STRIDE + 1):
        for padding in dict.fromkeys((extent // 2, 0, *range(extent + 1))):
            if (size + 2 * padding - extent - 1) // stride + 1 == out:
                return stride, padding
    raise Unbuildable(f"no stride <= {MAX_STRIDE} and padding map {size} to {out} with a {kernel}-wide kernel")


def conv_geometry(x: tuple[int, ...], w: tuple[int, ...], y: tuple[int, ...]) -> tuple[OpDict, str]:
    """stride/padding fields of a 2-D convolution (input ``x``, weight ``w``, output ``y``, NCHW) and a note."""
    if len(y) != 4 or y[0] != x[0] or y[1] != w[0]:
        raise Unbuildable(f"output shape {list(y)} does not fit input {list(x)} and weight {list(w)}")
    stride, padding = infer_stride_padding(x[2], y[2], w[2])
    stride_w, padding_w = infer_stride_padding(x[3], y[3], w[3])
    fields: OpDict = {"stride": stride, "padding": padding}
    if stride_w != stride:
        fields["stride_w"] = stride_w
    if padding_w != padding:
        fields["padding_w"] = padding_w
    note = f"stride {stride}, padding {padding} inferred from the input and output shapes"
    return fields, note


def _groups(x: tuple[int, ...], w: tuple[int, ...]) -> int:
    if w[1] <= 0 or x[1] % w[1]:
        raise Unbuildable(f"input channels {x[1]} are not a multiple of the weight's {w[1]}")
    return x[1] // w[1]


def cudnn_convolution_backward(a: Args) -> tuple[OpDict, list[str]]:
    """``aten::cudnn_convolution_backward(input, grad_output, weight, padding, stride, dilation, groups, ...,
    output_mask)`` (PyTorch < 1.11): both gradients of one layer; the geometry follows from the shapes."""
    x, dy, w = a.shape(0), a.shape(1), a.shape(2)
    if len(x) != 4 or len(w) != 4:
        raise Unbuildable(f"{a.name}: only 2-D convolutions are modelled (input rank {len(x)})")
    geometry, note = conv_geometry(x, w, dy)
    op: OpDict = {"kind": "conv2d", "batch": x[0], "in_channels": x[1], "height": x[2], "width": x[3],
                  "out_channels": w[0], "kernel_h": w[2], "kernel_w": w[3], "dtype": a.dtype(0),
                  "groups": _groups(x, w), "pass": "backward", **geometry}
    return op, [note, "output_mask not recorded: both gradients assumed"]


def _channels_last(shape: tuple[int, ...]) -> list[int]:
    """An NC... activation as perfmodel's batchnorm rows: (N * spatial, C)."""
    if len(shape) < 2:
        raise Unbuildable(f"batch norm of a rank-{len(shape)} tensor")
    return [shape[0] * math.prod(shape[2:]), shape[1]]


# argument index of ``training`` per forward batch-norm op
_TRAINING_ARG = {"aten::cudnn_batch_norm": 5, "aten::native_batch_norm": 5, "aten::miopen_batch_norm": 5,
                 "aten::_native_batch_norm_legit": 5, "aten::_batch_norm_impl_index": 5, "aten::batch_norm": 5}


def batch_norm(a: Args) -> tuple[OpDict, list[str]]:
    """A forward batch norm: training (batch statistics) where recorded, or where a backward node is linked."""
    shape = a.shape(0)
    training = a.flag(_TRAINING_ARG.get(a.name, 5))
    notes = []
    if training is None:
        training = a.call.output_dims is not None
        notes.append("training " + ("assumed: its backward node is in the trace" if training
                                    else "not recorded and no backward node: inference assumed"))
    return {"kind": "batchnorm", "shape": _channels_last(shape), "dtype": a.dtype(0), "training": training}, notes


def batch_norm_backward(a: Args) -> OpDict:
    """``*_batch_norm_backward(input | grad_out, ...)``: one backward pass over the activation."""
    return {"kind": "batchnorm", "shape": _channels_last(a.shape(0)), "dtype": a.dtype(0), "pass": "backward"}


def fill(a: Args) -> OpDict | tuple[OpDict, list[str]]:
    """fill_/zero_: one write of every element. A 0-dim tensor (``Input Dims`` ``[]`` with a tensor dtype, not
    ``Scalar``: ``torch.ones_like`` of a loss) is one element."""
    dims, types = a.call.input_dims, a.call.input_types
    if dims and dims[0] == () and types and types[0] in TORCH_DTYPES:
        return ({"kind": "elementwise", "shape": [1], "dtype": a.dtype(0), "inputs": 0, "outputs": 1,
                 "flops_per_element": 0.0}, ["a 0-dim tensor: one element"])
    return {"kind": "elementwise", "shape": list(a.shape(0)), "dtype": a.dtype(0), "inputs": 0, "outputs": 1,
            "flops_per_element": 0.0}


def activation_backward(a: Args) -> OpDict:
    """threshold_backward / gelu_backward / ...: reads the gradient and the saved input, writes one gradient."""
    return {"kind": "elementwise", "shape": list(a.shape(0)), "dtype": a.dtype(0), "inputs": 2, "outputs": 1,
            "flops_per_element": 1.0}


_REDUCTIONS = {"0": "none", "1": "mean", "2": "sum"}  # at::Reduction


def mse_loss(a: Args) -> tuple[OpDict, list[str]]:
    """``mse_loss(self, target, reduction)``: (x - y)^2 per element; reduced (mean, sum: PyTorch's default mean) by a
    second kernel over the squared errors, counted here as one more read of them (its output: one element)."""
    shape = list(broadcast([a.shape(0), a.shape(1)]))
    reduction = _REDUCTIONS.get(a.concrete(2) or "1", "mean")
    notes = [] if a.concrete(2) else ["reduction not recorded: mean (the default) assumed"]
    reads = 2 if reduction == "none" else 3
    return ({"kind": "elementwise", "shape": shape, "dtype": a.dtype(0), "inputs": reads, "outputs": 1,
             "flops_per_element": 3.0}, notes)


def mse_loss_backward(a: Args) -> OpDict:
    """``mse_loss_backward(grad_output, self, target, reduction)``: 2 (x - y) g [/ n] per element; a scalar
    gradient (reduced loss) is not a tensor read."""
    shape = list(a.shape(1))
    reads = 2 + (1 if a.has_tensor(0) else 0)
    return {"kind": "elementwise", "shape": shape, "dtype": a.dtype(1), "inputs": reads, "outputs": 1,
            "flops_per_element": 3.0}


BUILDERS: dict[str, Callable[[Args], OpDict | tuple[OpDict, list[str]]]] = {
    "aten::mse_loss": mse_loss, "aten::mse_loss_backward": mse_loss_backward,
    "aten::cudnn_convolution_backward": cudnn_convolution_backward,
    "aten::miopen_convolution_backward": cudnn_convolution_backward,
    **dict.fromkeys(("aten::cudnn_batch_norm", "aten::native_batch_norm", "aten::miopen_batch_norm",
                     "aten::_native_batch_norm_legit", "aten::_batch_norm_impl_index", "aten::batch_norm"),
                    batch_norm),
    **dict.fromkeys(("aten::cudnn_batch_norm_backward", "aten::native_batch_norm_backward",
                     "aten::miopen_batch_norm_backward"), batch_norm_backward),
    **dict.fromkeys(("aten::fill_", "aten::zero_"), fill),
    **dict.fromkeys(("aten::threshold_backward", "aten::gelu_backward", "aten::silu_backward",
                     "aten::sigmoid_backward", "aten::tanh_backward"), activation_backward),
}
