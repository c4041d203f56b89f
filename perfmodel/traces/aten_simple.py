"""Memory-bound aten ops -> perfmodel op dicts: norms, softmax, elementwise, reductions, indexing, copies."""

from __future__ import annotations

from typing import Any

from perfmodel.traces.aten_args import Args, Unbuildable, broadcast, numel

OpDict = dict[str, Any]

# (FLOPs, transcendentals) per element of unary activations
_ACTIVATIONS = {
    "gelu": (8.0, 1.0), "silu": (3.0, 1.0), "relu": (1.0, 0.0), "sigmoid": (3.0, 1.0), "tanh": (1.0, 1.0),
    "clamp_min": (1.0, 0.0), "hardtanh": (2.0, 0.0), "exp": (0.0, 1.0), "neg": (1.0, 0.0),
}


def layernorm(a: Args) -> OpDict:
    return {"kind": "layernorm", "shape": list(a.shape(0)), "dtype": a.dtype(0)}


def rmsnorm(a: Args) -> OpDict:
    return {"kind": "rmsnorm", "shape": list(a.shape(0)), "dtype": a.dtype(0)}


def softmax(a: Args) -> OpDict:
    return {"kind": "softmax", "shape": list(a.shape(0)), "dtype": a.dtype(0)}


def binary(a: Args) -> OpDict:
    """add/sub/mul/div: one FLOP per output element, reading every non-scalar tensor operand."""
    shapes = a.tensor_shapes()
    if not shapes:
        raise Unbuildable(f"{a.name}: no tensor operand with a recorded shape")
    first = next(i for i, d in enumerate(a.call.input_dims or ()) if d)
    return {"kind": "elementwise", "shape": list(broadcast(shapes)), "dtype": a.dtype(first),
            "inputs": len(shapes), "outputs": 1, "flops_per_element": 1.0}


def activation(a: Args) -> OpDict:
    base = a.name.removeprefix("aten::").rstrip("_")
    flops, transcendentals = _ACTIVATIONS[base]
    return {"kind": "elementwise", "shape": list(a.shape(0)), "dtype": a.dtype(0), "inputs": 1, "outputs": 1,
            "flops_per_element": flops, "transcendentals_per_element": transcendentals}


def reduction(a: Args) -> OpDict:
    """sum/mean/amax/amin over the recorded ``dim`` list (all axes when the call has no dim)."""
    shape = a.shape(0)
    recorded = a.call.input_dims or ()
    # sum(self, dtype) / mean(self, dtype) reduce everything; the .dim overloads carry a dim list
    axes = list(range(len(shape))) if len(recorded) <= 2 else a.int_list(1, "reduction dims")
    kind = {"aten::sum": "sum", "aten::mean": "mean", "aten::amax": "max", "aten::amin": "min"}[a.name]
    return {"kind": "reduce", "shape": list(shape), "axes": axes or list(range(len(shape))), "dtype": a.dtype(0),
            "op": kind}


def vector_norm(a: Args) -> OpDict:
    """``linalg_vector_norm(self, ord, dim, keepdim, dtype)``: a sum (of |x|^ord) over ``dim``, all axes where
    ``dim`` is None or not recorded (the elementwise power and the final root are not counted)."""
    shape = a.shape(0)
    dim = a.concrete(2)
    axes = a.int_list(2, "norm dims") if dim not in (None, "None", "[]") else []
    rank = len(shape)
    return {"kind": "reduce", "shape": list(shape), "axes": [d % rank for d in axes] or list(range(rank)),
            "dtype": a.dtype(0), "op": "sum"}


def embedding(a: Args) -> OpDict:
    table, indices = a.shape(0), a.shape(1)
    return {"kind": "embedding", "table_shape": list(table), "num_indices": numel(indices), "dtype": a.dtype(0),
            "index_dtype": a.dtype(1)}


def index_select(a: Args) -> OpDict:
    table, indices = a.shape(0), a.shape(2)
    dim = a.int_list(1, "dim")[0]
    if dim != 0:
        raise Unbuildable(f"{a.name}: a gather along dim {dim} is not a row gather")
    return {"kind": "gather", "table_shape": list(table), "num_indices": numel(indices), "dtype": a.dtype(0),
            "index_dtype": a.dtype(2)}


def copy(a: Args) -> tuple[OpDict, list[str]]:
    """copy_/clone/contiguous/_to_copy: one read and one write of every element (a non-view reshape)."""
    shape = a.shape(0)
    notes: list[str] = []
    dtype = a.dtype(0)
    if a.name == "aten::copy_" and a.has_tensor(1):
        source = a.dtype(1)
        if source != dtype:
            notes.append(f"dtype conversion {source} -> {dtype}: bytes counted at {source} width")
            dtype = source
    return {"kind": "reshape", "shape": list(shape), "new_shape": list(shape), "dtype": dtype,
            "contiguous": False}, notes


def transpose(a: Args) -> OpDict:
    """transpose/permute return a view in PyTorch: no data moves and no kernel runs, so there is nothing to
    model; on the CPU the event is framework dispatch time. The copy, if any, is the ``contiguous`` or
    ``clone`` that follows, matched as its own op."""
    raise Unbuildable(f"{a.name} returns a view: no data moved, only framework dispatch time "
                      "(the copy is the contiguous/clone that follows)")


def cat(a: Args) -> OpDict:
    """cat: a copy of every input into the output; needs the tensor list's shapes."""
    lists = a.call.input_dims
    if not lists or lists[0] is None:
        raise Unbuildable(f"{a.name}: the shapes of the concatenated tensor list were not recorded")
    shapes = a.tensor_shapes()
    if not shapes:  # PyTorch before the tensor-list recording writes a TensorList argument as []
        raise Unbuildable(f"{a.name}: the shapes of the concatenated tensor list were not recorded (Input Dims [])")
    total = sum(numel(s) for s in shapes)
    return {"kind": "elementwise", "shape": [total], "dtype": a.dtype(0), "inputs": 1, "outputs": 1,
            "flops_per_element": 0.0}


ACTIVATION_NAMES = tuple(f"aten::{n}{s}" for n in _ACTIVATIONS for s in ("", "_"))
