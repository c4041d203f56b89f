"""TorchInductor's Triton kernels, from the op record Inductor wraps each launch in.

A compiled graph's kernel is launched inside a ``record_function`` of its own name
(``triton_poi_fused_add_cos_sin_0``) whose ``Input Dims`` are the kernel's tensor arguments (in_ptr*, out_ptr*,
in_out_ptr*) followed by its scalar sizes (``xnumel``, and ``rnumel`` for a reduction; ``Concrete Inputs`` hold
their values). The name's prefix says the kernel's kind: ``poi`` pointwise, ``red`` / ``per`` a (persistent)
reduction over its inner ``rnumel`` elements, ``tem`` a template (GEMM: not built here).

- pointwise: an ``elementwise`` over ``xnumel`` elements (else its largest tensor), every tensor argument but
  the last read and the last written (Inductor lists outputs after inputs), the FLOPs and transcendentals of
  the aten ops its name says it fused (``fused_add_cos_sin``: 1 and 2 per element);
- reduction: a ``reduce`` of ``[xnumel, rnumel]`` over its last axis.
Which arguments are outputs is not recorded: confidence "medium".
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from perfmodel.traces.aten_args import TORCH_DTYPES, Args, Unbuildable, numel

OpDict = dict[str, Any]
_INDUCTOR = re.compile(r"^triton_(poi|red|per|tem)_\w+$")
_TRANSCENDENTAL = frozenset({"exp", "exp2", "expm1", "log", "log2", "log1p", "sin", "cos", "tan", "tanh", "sigmoid",
                             "erf", "gelu", "silu", "rsqrt", "sqrt", "pow", "softplus", "atan", "asin", "acos"})
_ARITHMETIC = frozenset({"add", "sub", "mul", "div", "neg", "relu", "maximum", "minimum", "where", "clamp", "abs",
                         "sum", "mean", "amax", "amin", "addmm", "lerp", "reciprocal", "rsub", "threshold"})


def is_inductor_kernel(name: str) -> bool:
    """True for a TorchInductor kernel name (``triton_{poi,red,per,tem}_...``)."""
    return _INDUCTOR.match(name) is not None


def _fused_ops(name: str) -> tuple[float, float]:
    """(FLOPs, transcendentals) per element from the aten ops a kernel's name says it fused
    (``triton_poi_fused_add_cos_sin_0``: one add, two transcendentals); at least one FLOP."""
    parts = name.split("_fused_", 1)[1].split("_") if "_fused_" in name else []
    special = sum(1 for p in parts if p in _TRANSCENDENTAL)
    flops = sum(1 for p in parts if p in _ARITHMETIC)
    return float(max(flops, 1 if not special else 0)), float(special)


def _scalars(a: Args) -> list[int]:
    """The recorded values of the call's scalar arguments (``xnumel``, ``rnumel``), in order."""
    dims = a.call.input_dims or ()
    out = []
    for index, shape in enumerate(dims):
        value = a.concrete(index)
        if not shape and value is not None and re.fullmatch(r"\d+", value.strip()):
            out.append(int(value))
    return out


def _dtype(a: Args) -> str:
    dims, types = a.call.input_dims or (), a.call.input_types or ()
    names = [types[i] for i, shape in enumerate(dims) if shape and i < len(types)]
    known = [TORCH_DTYPES[n] for n in names if n in TORCH_DTYPES]
    if not known:
        raise Unbuildable(f"{a.name}: no tensor argument with a known dtype ({', '.join(names[:3]) or 'none'})")
    return Counter(known).most_common(1)[0][0]


def build(a: Args) -> tuple[OpDict, list[str]]:
    """The op of one Inductor kernel's record (``Unbuildable`` for templates and calls without shapes)."""
    match = _INDUCTOR.match(a.name)
    if match is None:
        raise Unbuildable(f"{a.name}: not a TorchInductor kernel name")
    if a.call.input_dims is None:
        raise Unbuildable(f"{a.name}: no Input Dims (profile with record_shapes=True)")
    tensors = a.tensor_shapes()
    if not tensors:
        raise Unbuildable(f"{a.name}: no tensor argument recorded")
    kind, dtype, sizes = match.group(1), _dtype(a), _scalars(a)
    if kind == "tem":
        raise Unbuildable(f"{a.name}: an Inductor template (GEMM) kernel is not modelled from its arguments")
    if kind == "poi":
        elements = sizes[0] if sizes else max(numel(s) for s in tensors)
        note = "xnumel" if sizes else "its largest tensor"
        flops, special = _fused_ops(a.name)
        return ({"kind": "elementwise", "shape": [elements], "dtype": dtype, "inputs": max(len(tensors) - 1, 1),
                 "outputs": 1, "flops_per_element": flops, "transcendentals_per_element": special},
                [f"Inductor pointwise kernel over {elements} elements ({note}), {len(tensors)} tensor arguments: "
                 "the last written, the others read"])
    if len(sizes) < 2:
        raise Unbuildable(f"{a.name}: a reduction's xnumel and rnumel are not recorded (needs 'Concrete Inputs')")
    return ({"kind": "reduce", "shape": [sizes[0], sizes[1]], "axes": [1], "dtype": dtype, "op": "sum"},
            [f"Inductor reduction of {sizes[0]} x {sizes[1]} elements over the inner {sizes[1]}"])
