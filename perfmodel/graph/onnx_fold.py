"""Constant folding of ONNX shape arithmetic (what ONNX Runtime's graph optimizer folds before the first run):
a node whose inputs are all constants (initializers, ``Constant`` outputs, earlier folded values, or the
``Shape`` of a tensor whose shape is static) is evaluated once with ``onnx.reference`` and its outputs become
folded constants (free at run time). Exporters build attention masks and reshape targets this way
(``ConstantOfShape`` → ``Equal`` → ``Where`` → ``Expand``), which shape inference alone cannot resolve.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

FOLDABLE = frozenset({
    "Shape", "Size", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Cast", "Mul", "Add", "Sub", "Div",
    "Equal", "Less", "Greater", "Not", "And", "Or", "Where", "ConstantOfShape", "Range", "Reshape", "Expand",
    "Identity", "Neg", "Abs", "Min", "Max", "ReduceProd", "Trilu", "CumSum", "Sqrt", "Pow", "Floor", "Ceil",
    "Reciprocal", "Mod",
})
MAX_FOLD_ELEMENTS = 1 << 20  # larger constant tensors stay run-time work (their shapes are still recorded)


Array = np.ndarray[Any, Any]


def fold_node(node: onnx.NodeProto, values: dict[str, Array], shapes: dict[str, tuple[int, ...]],
              opset: list[onnx.OperatorSetIdProto]) -> dict[str, Array]:
    """Output values of ``node`` when every input is known (``values``, or ``shapes`` for a ``Shape`` node);
    empty when the node cannot or should not be folded (non-default domain, unknown input, too large)."""
    if node.op_type not in FOLDABLE or node.domain not in ("", "ai.onnx"):
        return {}
    ins = [x for x in node.input if x]
    if node.op_type == "Shape" and ins and ins[0] in shapes and ins[0] not in values:
        shape = np.array(shapes[ins[0]], dtype=np.int64)
        at = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        start, end = int(at.get("start", 0)), at.get("end")
        return {node.output[0]: shape[start:None if end is None else int(end)]}
    if not all(i in values for i in ins):
        return {}
    if node.op_type == "Gather" and values[ins[0]].dtype.kind == "f":  # an embedding lookup stays a kernel
        return {}
    from onnx.reference import ReferenceEvaluator  # imported lazily: only graphs with shape arithmetic pay

    graph = helper.make_graph(
        [node], "fold",
        [helper.make_tensor_value_info(i, helper.np_dtype_to_tensor_dtype(values[i].dtype), values[i].shape)
         for i in dict.fromkeys(ins)],
        [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in node.output if o])
    try:
        run = ReferenceEvaluator(helper.make_model(graph, opset_imports=list(opset)))
        outs = run.run(None, {i: values[i] for i in dict.fromkeys(ins)})
    except Exception:
        return {}
    result = {o: np.asarray(v) for o, v in zip([o for o in node.output if o], outs, strict=False)}
    if any(v.size > MAX_FOLD_ELEMENTS for v in result.values()):
        return {}
    return result


def tensor_value(t: onnx.TensorProto) -> Array:
    """The numpy value of an initializer or ``Constant`` tensor."""
    return np.asarray(numpy_helper.to_array(t))


BROADCASTING = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Where", "Equal", "Less", "Greater", "And", "Or",
                          "Max", "Min", "Cast", "Erf", "Tanh", "Sqrt", "Relu", "Sigmoid", "Neg", "Not", "Softmax",
                          "LayerNormalization", "Identity", "Dropout"})


def late_shape(op_type: str, in_shapes: list[tuple[int, ...] | None], at: dict[str, Any],
               shape_arg: list[int] | None) -> tuple[int, ...] | None:
    """Output shape of a node that shape inference left unresolved but whose inputs folding resolved:
    broadcasting element-wise ops, ``MatMul``, ``Transpose`` (``perm``), ``Gather`` (``axis``), ``Expand`` and
    ``Reshape`` (target ``shape_arg``); None otherwise."""
    if any(s is None for s in in_shapes) or not in_shapes:
        return None
    shapes = [s for s in in_shapes if s is not None]
    x = shapes[0]
    try:
        if op_type in BROADCASTING:
            return tuple(int(d) for d in np.broadcast_shapes(*shapes))
        if op_type == "Expand" and shape_arg is not None:
            return tuple(int(d) for d in np.broadcast_shapes(x, tuple(shape_arg)))
        if op_type == "MatMul" and len(shapes) == 2 and len(x) >= 2 and len(shapes[1]) >= 2:
            batch = np.broadcast_shapes(x[:-2], shapes[1][:-2])
            return (*(int(d) for d in batch), x[-2], shapes[1][-1])
    except ValueError:
        return None
    if op_type == "Transpose":
        perm = at.get("perm") or list(reversed(range(len(x))))
        return tuple(x[int(p)] for p in perm)
    if op_type == "Reshape" and shape_arg is not None:
        out = [x[i] if d == 0 and i < len(x) else d for i, d in enumerate(shape_arg)]
        if out.count(-1) == 1:
            known = int(np.prod([d for d in out if d != -1]))
            out[out.index(-1)] = int(np.prod(x)) // max(known, 1)
        return tuple(out) if all(d >= 0 for d in out) and int(np.prod(out)) == int(np.prod(x)) else None
    if op_type == "Gather" and len(shapes) == 2 and x:
        a = int(at.get("axis", 0)) % len(x)
        return (*x[:a], *shapes[1], *x[a + 1:])
    return None


def _expand_ellipsis(terms: list[str], out: str, shapes: list[tuple[int, ...]]) -> tuple[list[str], str] | None:
    """``...`` replaced by unused letters, one per broadcast dim, right-aligned as numpy broadcasts them."""
    if "..." not in "".join(terms) + out:
        return terms, out
    used = set("".join(terms) + out)
    ranks = [len(s) - len(t.replace("...", "")) if "..." in t else 0 for t, s in zip(terms, shapes, strict=True)]
    free = [c for c in string.ascii_letters if c not in used]
    if min(ranks) < 0 or max(ranks) > len(free) or any(t.count(".") not in (0, 3) for t in [*terms, out]):
        return None
    letters = "".join(free[:max(ranks)])
    terms = [t.replace("...", letters[len(letters) - r:] if r else "") for t, r in zip(terms, ranks, strict=True)]
    return terms, out.replace("...", letters)


def einsum_dims(equation: str, shapes: list[tuple[int, ...]]) -> tuple[int, int, int, int] | None:
    """(batch, m, n, k) of a two-operand ONNX ``Einsum`` read as a batched GEMM: batch = letters in both
    inputs and the output, k = in both inputs only (contracted), m / n = in one input and the output.
    Letters in one input only and not in the output are summed first (counted into k); an ellipsis stands for
    the broadcast dims (batch letters). None: not 2 operands, or shapes that do not match the equation."""
    lhs, arrow, out = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != 2 or len(shapes) != 2:
        return None
    if not arrow:  # implicit output: the ellipsis dims, then letters that appear once, alphabetical
        out = ("..." if "..." in lhs else "") + "".join(
            sorted(c for c in set(lhs) if c.isalpha() and lhs.count(c) == 1))
    expanded = _expand_ellipsis(terms, out, shapes)
    if expanded is None:
        return None
    terms, out = expanded
    lhs = ",".join(terms)
    size: dict[str, int] = {}
    for term, shape in zip(terms, shapes, strict=True):
        if len(term) != len(shape):
            return None
        for c, d in zip(term, shape, strict=True):
            if size.setdefault(c, int(d)) != int(d) and min(size[c], int(d)) != 1:
                return None
            size[c] = max(size[c], int(d))
    a, b = set(terms[0]), set(terms[1])

    def prod(letters: set[str]) -> int:
        return int(np.prod([size[c] for c in letters])) if letters else 1

    batch = prod(a & b & set(out))
    k = prod((a & b) - set(out)) * prod((a ^ b) - set(out))
    return batch, prod((a - b) & set(out)), prod((b - a) & set(out)), k
