"""PyTorch's foreach ops (``aten::_foreach_add_(TensorList self, TensorList other, Scalar alpha)``, the optimizers'
multi-tensor steps): one elementwise op over every element of the tensor lists, from the lists' recorded shapes
(``OpCall.input_lists``). The lists' element type is not recorded (``Input type`` says ``TensorList``): the
matcher types the call from its kernel's name (``shape_links.typed_call``: ``BinaryOpListAlphaFunctor<float, ...>``).
Each list argument is read (an in-place op reads ``self`` too), one list is written."""

from __future__ import annotations

import math
import re

from perfmodel.traces.aten_args import Args, Unbuildable
from perfmodel.traces.records import LIST_TYPE, OpCall
from perfmodel.traces.shape_links import NO_INPUT_TYPE

OpDict = dict[str, object]
# op -> (FLOPs, transcendental ops) per element; add/sub/... also take a Scalar or a ScalarList instead of a list
_OPS = {"add": (1.0, 0.0), "sub": (1.0, 0.0), "mul": (1.0, 0.0), "div": (1.0, 0.0), "maximum": (1.0, 0.0),
        "minimum": (1.0, 0.0), "addcmul": (3.0, 0.0), "addcdiv": (3.0, 0.0), "lerp": (3.0, 0.0),
        "neg": (1.0, 0.0), "abs": (1.0, 0.0), "reciprocal": (1.0, 0.0), "sqrt": (0.0, 1.0), "exp": (0.0, 1.0),
        "zero": (0.0, 0.0), "copy": (0.0, 0.0)}
NAMES = tuple(f"aten::_foreach_{op}{suffix}" for op in _OPS for suffix in ("", "_")
              if not (op in ("zero", "copy") and suffix == ""))
_NAME = re.compile(r"^aten::_foreach_(\w+?)_?$")


def _lists(call: OpCall) -> list[tuple[tuple[int, ...], ...]]:
    return [shapes for shapes in (call.input_lists or ()) if shapes]


def foreach(a: Args) -> tuple[OpDict, list[str]]:
    """The elementwise op of one foreach call over its lists' elements (the first list's shapes)."""
    lists = _lists(a.call)
    if not lists:
        raise Unbuildable(f"{a.name}: the shapes of its tensor lists were not recorded")
    types = a.call.input_types or ()
    first = next(i for i, shapes in enumerate(a.call.input_lists or ()) if shapes)
    if first >= len(types) or types[first] == LIST_TYPE:
        raise Unbuildable(f"{a.name}: {NO_INPUT_TYPE} for its tensor lists' elements (recorded as 'TensorList')")
    elements = sum(math.prod(shape) for shape in lists[0])
    if elements <= 0:
        raise Unbuildable(f"{a.name}: its tensor list has no elements")
    match = _NAME.match(a.name)
    op = match.group(1) if match else ""
    flops, transcendentals = _OPS.get(op, (1.0, 0.0))
    reads = 0 if op == "zero" else len(lists) - 1 if op == "copy" else len(lists)
    return ({"kind": "elementwise", "shape": [elements], "dtype": a.dtype(first), "inputs": reads, "outputs": 1,
             "flops_per_element": flops, "transcendentals_per_element": transcendentals},
            [f"foreach over {len(lists[0])} tensors ({elements:,} elements), {len(lists)} tensor list(s) read"])
