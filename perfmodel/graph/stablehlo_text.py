"""StableHLO text (``jax.jit(f).lower(...).as_text()``, MLIR pretty form) → op records, one per line.

Each function's top-level operations become ``HloOp``: result names, op name (``stablehlo.dot_general``),
operand names, the text between them (attributes) and the operand / result tensor types from the trailing
type signature (``(tensor<AxBxf32>, ...) -> tensor<...>``, or one type shared by operands and result).
Nested regions (a reduce's reducer, a while's body) are skipped here and reported by the importer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from perfmodel.graph.ir import GraphError

# MLIR element types -> perfmodel dtypes
ELEMENT_TYPES = {"f64": "fp64", "f32": "fp32", "f16": "fp16", "bf16": "bf16", "f8E4M3FN": "fp8_e4m3",
                 "f8E4M3FNUZ": "fp8_e4m3", "f8E4M3B11FNUZ": "fp8_e4m3", "f8E5M2": "fp8_e5m2",
                 "f8E5M2FNUZ": "fp8_e5m2", "i1": "bool", "i4": "int4", "ui4": "int4", "i8": "int8", "ui8": "int8",
                 "i16": "int32", "ui16": "int32", "i32": "int32", "ui32": "int32", "i64": "int64", "ui64": "int64"}
_OP_LINE = re.compile(r"^\s*(?P<results>%[\w.$-]+(?::\d+)?(?:\s*,\s*%[\w.$-]+)*)\s*=\s*"
                      r"(?P<op>\"?[A-Za-z_][\w.]*\"?)(?P<rest>.*)$")
_FUNC = re.compile(r"func\.func\s+(?:public\s+|private\s+)?@([\w.$-]+)\s*\((?P<args>.*?)\)\s*(?:->|\{|attributes)")


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str


@dataclass
class HloOp:
    results: list[str]
    name: str  # e.g. 'dot_general' (the dialect prefix removed)
    dialect: str
    operands: list[str]
    attributes: str
    inputs: list[TensorType]
    outputs: list[TensorType]
    line: int
    has_region: bool = False
    region_lines: list[str] = field(default_factory=list)  # the text of its regions (a while's cond and do)


@dataclass
class HloFunction:
    name: str
    args: dict[str, TensorType]
    ops: list[HloOp] = field(default_factory=list)


def tensor_type(text: str, where: str) -> TensorType:
    """'128x256xbf16' -> ((128, 256), 'bf16'); a dynamic '?' dimension is an error naming ``where``."""
    parts = text.split(",")[0].strip().split("x")
    element = parts[-1]
    if element not in ELEMENT_TYPES:
        raise GraphError(where, f"element type {element!r} is not one the model knows ({', '.join(ELEMENT_TYPES)})")
    dims = parts[:-1]
    if any(d == "?" for d in dims):
        raise GraphError(where, f"dynamic dimension '?' in tensor<{text}>: bind it before lowering (static shapes)")
    try:
        return TensorType(tuple(int(d) for d in dims), ELEMENT_TYPES[element])
    except ValueError as exc:
        raise GraphError(where, f"cannot read the shape of tensor<{text}>") from exc


def tensor_texts(text: str) -> list[tuple[int, str]]:
    """(position, inside) of every ``tensor<...>`` in ``text``, nested brackets kept (complex<f32>)."""
    out: list[tuple[int, str]] = []
    start = text.find("tensor<")
    while start >= 0:
        depth, i = 0, start + len("tensor")
        while i < len(text):
            depth += {"<": 1, ">": -1}.get(text[i], 0)
            if depth == 0:
                break
            i += 1
        out.append((start, text[start + len("tensor<"): i]))
        start = text.find("tensor<", i)
    return out


def _types(text: str, where: str) -> list[TensorType]:
    return [tensor_type(t, where) for _, t in tensor_texts(text)]


def _signature(rest: str) -> tuple[str, str]:
    """Split '<operands and attributes> : <type signature>' at the last top-level ' : '."""
    depth = 0
    for i in range(len(rest) - 1, -1, -1):
        c = rest[i]
        if c == ">" and rest[i - 1: i] == "-":  # the arrow of '(...) -> ...'
            continue
        if c in ")]}>":
            depth += 1
        elif c in "([{<":
            depth -= 1
        elif c == ":" and depth == 0 and rest[i - 1: i + 2] == " : ":
            return rest[:i], rest[i + 1:]
    return rest, ""


def parse_stablehlo(text: str) -> dict[str, HloFunction]:
    """Functions by name, each with its top-level ops in order."""
    functions: dict[str, HloFunction] = {}
    current: HloFunction | None = None
    pending: HloOp | None = None  # a generic-form op whose region is still open
    depth = 0  # braces open inside the current function body
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        head = _FUNC.search(stripped)
        if head and current is None:
            args = {}
            for m in re.finditer(r"%([\w.$-]+)\s*:\s*(?=tensor<)", head.group("args")):
                inside = tensor_texts(head.group("args")[m.end():])[0][1]
                args[m.group(1)] = tensor_type(inside, f"@{head.group(1)} argument %{m.group(1)}")
            current = functions[head.group(1)] = HloFunction(head.group(1), args)
            depth = 1
            continue
        if current is None:
            continue
        opens, closes = stripped.count("{"), stripped.count("}")
        if depth == 1 and (match := _OP_LINE.match(line)):
            op = _add_op(current, match, number, opens > closes)
            pending = op if op.has_region and not op.outputs else None  # generic form: types after the region
        elif current.ops and (depth > 1 or opens > closes):  # inside (or opening) the last op's regions
            current.ops[-1].region_lines.append(line)
            current.ops[-1].has_region = True
        depth += opens - closes
        if depth == 1 and pending is not None and pending.line != number:
            _, signature = _signature(stripped)
            _fill_types(pending, signature, f"line {number} ({pending.dialect}.{pending.name})")
            pending = None
        if depth <= 0:
            current, depth = None, 0
    if not functions:
        raise GraphError("<module>", "no func.func found: expected StableHLO text from jax.jit(f).lower(...).as_text()")
    return functions


def _add_op(fn: HloFunction, match: re.Match[str], number: int, region: bool) -> HloOp:
    full = match.group("op").strip('"')
    dialect, _, name = full.rpartition(".")
    body, signature = _signature(match.group("rest"))
    operands = re.findall(r"%([\w.$-]+)", body.split("{", 1)[0])
    results = [r.strip().lstrip("%").split(":")[0] for r in match.group("results").split(",")]
    op = HloOp(results, name, dialect or "builtin", operands, body, [], [], number, region)
    _fill_types(op, signature, f"line {number} ({full})")
    fn.ops.append(op)
    return op


def _fill_types(op: HloOp, signature: str, where: str) -> None:
    if "->" in signature:
        left, right = signature.rsplit("->", 1)
        op.inputs, op.outputs = _types(left, where), _types(right, where)
    else:
        op.outputs = _types(signature, where)
