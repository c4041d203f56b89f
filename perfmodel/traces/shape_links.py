"""Completing an op call the trace recorded only in part: its dtype from its kernels' names where PyTorch
recorded shapes but no types (``typed_call``), and a forward convolution's output shape from the backward
convolution of the same layer, where the trace records no autograd sequence number to link them (PyTorch 1.8's
profiler) and no scalar arguments (stride, padding).

The backward op records the layer's input, weight and the gradient of its output (shaped like the output):
``aten::cudnn_convolution_backward(input, grad_output, weight, ...)``, ``aten::convolution_backward(grad_output,
input, weight, ...)``. A forward op with the same input and weight shapes takes that output shape, only where every
backward op with those shapes agrees on it (two layers with one input and weight shape but different strides:
no link). Confidence of such a link: medium (shape equality, not identity).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from perfmodel.traces.kernel_names import data_dtype
from perfmodel.traces.records import LIST_TYPE, KernelRecord, OpCall

Shape = tuple[int, ...]
# backward op -> argument index of (input, grad_output, weight)
_BACKWARD_ARGS = {"aten::cudnn_convolution_backward": (0, 1, 2), "aten::miopen_convolution_backward": (0, 1, 2),
                  "aten::convolution_backward": (1, 0, 2)}
MAX_CALLS = 1_000_000  # distinct backward calls read (bounded work on a hostile file)
AMBIGUOUS = ()  # marker: backward ops with these shapes disagree on the output shape


class ConvLinks:
    """Output shape per (input shape, weight shape), read from the backward convolutions of a trace's kernels on
    first use (most traces never ask)."""

    def __init__(self, kernels: Sequence[KernelRecord]) -> None:
        self._kernels = kernels
        self._outputs: dict[tuple[Shape, Shape], Shape] | None = None

    def _read(self) -> dict[tuple[Shape, Shape], Shape]:
        outputs: dict[tuple[Shape, Shape], Shape] = {}
        seen: set[int] = set()
        for kernel in self._kernels:
            for call in kernel.ops:
                where = _BACKWARD_ARGS.get(call.name)
                if where is None or call.call_id in seen or len(seen) >= MAX_CALLS:
                    continue
                seen.add(call.call_id)
                shapes = _shapes(call, where)
                if shapes is None:
                    continue
                x, dy, w = shapes
                known = outputs.setdefault((x, w), dy)
                if known != dy:
                    outputs[(x, w)] = AMBIGUOUS
        return outputs

    def output(self, x: Shape, w: Shape) -> Shape | None:
        """The output shape of a convolution of input ``x`` with weight ``w``, None where no backward op (or no
        single one) tells it."""
        if self._outputs is None:
            self._outputs = self._read()
        found = self._outputs.get((x, w))
        return found if found else None


def _shapes(call: OpCall, where: tuple[int, int, int]) -> tuple[Shape, Shape, Shape] | None:
    dims = call.input_dims
    if dims is None or max(where) >= len(dims):
        return None
    x, dy, w = (dims[i] for i in where)
    if not x or not dy or not w or len(x) != 4 or len(dy) != 4 or len(w) != 4:
        return None
    return x, dy, w


def linked_call(call: OpCall, links: ConvLinks) -> OpCall | None:
    """The forward convolution call with its output shape from a backward op of the same shapes (as a backward
    node's gradient would give it), None where none is known."""
    dims = call.input_dims
    if call.output_dims or dims is None or len(dims) < 2 or not dims[0] or not dims[1]:
        return None
    x, w = dims[0], dims[1]
    assert x is not None and w is not None
    y = links.output(x, w)
    return None if y is None else OpCall(call.call_id, call.name, call.start_s, call.duration_s, call.input_dims,
                                         call.input_types, call.concrete_inputs, call.parent, call.input_strides,
                                         (y,))


# perfmodel dtype -> the ``Input type`` name PyTorch records for it (to type an op whose types were not recorded)
_TORCH_NAMES = {"fp32": "float", "fp16": "c10::Half", "bf16": "c10::BFloat16", "fp64": "double",
                "int64": "long int", "int32": "int", "int8": "signed char", "fp8_e4m3": "c10::Float8_e4m3fn"}
NO_INPUT_TYPE = "no Input type"
STRIDE_NOT_RECORDED = "stride not recorded"
CallDtypes = dict[int, tuple[str, str]]  # call id -> (dtype, the kernel name it was read from)


def typed_call(call: OpCall, kernel: KernelRecord, dtypes: CallDtypes) -> tuple[OpCall, str] | None:
    """A call with shapes but no ``Input type`` (PyTorch 1.8 records ``Input type: []``), typed by the data type its
    kernels' names give (``volta_scudnn_...``, ``implicit_convolve_sgemm<float, ...>``: ``kernel_names.data_dtype``)
    for every tensor argument, and the note saying so; None where no kernel of the call names one."""
    lists = bool(call.input_types) and LIST_TYPE in (call.input_types or ())
    if (call.input_types and not lists) or not call.input_dims:
        return None
    known = dtypes.get(call.call_id)
    if known is None:
        dtype = data_dtype(kernel.name)
        if dtype is None or dtype not in _TORCH_NAMES:
            return None
        known = dtypes[call.call_id] = (dtype, kernel.name)
    if lists:  # a foreach op: its tensor lists' element type (``Input type`` ``TensorList``)
        types = tuple(_TORCH_NAMES[known[0]] if t == LIST_TYPE else t for t in call.input_types or ())
        note = f"tensor lists' element type not recorded: {known[0]} assumed, from its kernel {known[1][:60]!r}"
        return replace(call, input_types=types), note
    types = tuple(_TORCH_NAMES[known[0]] if dims else "" for dims in call.input_dims)
    note = f"Input type not recorded: {known[0]} assumed for every tensor, from its kernel {known[1][:60]!r}"
    return replace(call, input_types=types), note
