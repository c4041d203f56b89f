"""``stablehlo.while`` loops with a static trip count (``jax.lax.fori_loop``, ``scan``): the count and the body.

The count comes from the loop's ``cond`` (``compare LT|LE|GT|GE, %counter, %bound``), the counter's initial
value (a scalar ``constant`` the loop is given) and its step (``add %counter, %step`` in ``do``), all constants.
The body (the ``do`` region) becomes a function whose arguments are the loop's carried values; the importer
emits it once per iteration. A loop whose count is not a constant is left to the caller to report.
"""

from __future__ import annotations

import math
import re

from perfmodel.graph.stablehlo_text import ELEMENT_TYPES, HloFunction, HloOp, TensorType, parse_stablehlo

_CONSTANT = re.compile(r"%([\w.$-]+)\s*=\s*stablehlo\.constant\s+dense<(-?[\d.]+(?:e[+-]?\d+)?)>")
_NAME = r"%([\w.$-]+)"
MLIR_ELEMENT = {v: k for k, v in reversed(list(ELEMENT_TYPES.items()))}  # perfmodel dtype -> one MLIR spelling


def scalar_constant(op: HloOp) -> float | None:
    """The value of a scalar ``stablehlo.constant dense<N>`` (None for tensors and non-numbers)."""
    found = re.search(r"dense<(-?[\d.]+(?:e[+-]?\d+)?)>", op.attributes)
    return float(found.group(1)) if op.name == "constant" and found and op.outputs and not op.outputs[0].shape else None


def carried(op: HloOp) -> list[tuple[str, str]]:
    """(iteration argument, initial operand) pairs of a while, in order."""
    return re.findall(rf"{_NAME}\s*=\s*{_NAME}", op.attributes)


def _regions(op: HloOp) -> tuple[str, str]:
    text = "\n".join(op.region_lines)
    cond, sep, body = text.partition("} do {")
    if not sep:
        return "", ""
    return cond, body.rsplit("}", 1)[0]


def trip_count(op: HloOp, constants: dict[str, float]) -> int | None:
    """Iterations of a counted while, or None when the count is not made of constants."""
    cond, body = _regions(op)
    in_cond = {name: float(value) for name, value in _CONSTANT.findall(cond)}  # each region has its own names
    in_body = {name: float(value) for name, value in _CONSTANT.findall(body)}
    compare = re.search(rf"stablehlo\.compare\s+(LT|LE|GT|GE),\s*{_NAME},\s*{_NAME}", cond)
    pairs = dict(carried(op))
    if not compare:
        return None
    direction, left, right = compare.groups()
    if right in pairs and left not in pairs:  # 'bound < counter' is 'counter > bound'
        left, right = right, left
        direction = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE"}[direction]
    if left not in pairs:
        return None
    bound = in_cond.get(right, constants.get(right))
    start = constants.get(pairs[left])
    step_match = re.search(rf"stablehlo\.add\s+%{re.escape(left)},\s*{_NAME}", body)
    step = in_body.get(step_match.group(1), constants.get(step_match.group(1))) if step_match else None
    if bound is None or start is None or not step:
        return None
    span = bound - start if direction in ("LT", "LE") else start - bound
    per = step if direction in ("LT", "LE") else -step
    if per <= 0:
        return None
    count = math.ceil(span / per) if direction in ("LT", "GT") else math.floor(span / per) + 1
    return max(count, 0)


def body_function(op: HloOp) -> HloFunction | None:
    """The ``do`` region as a function of the carried values (typed as the loop's results)."""
    _, body = _regions(op)
    names = [name for name, _ in carried(op)]
    if not body or len(names) != len(op.outputs):
        return None
    args = ", ".join(f"%{n}: tensor<{_spell(t)}>" for n, t in zip(names, op.outputs, strict=True))
    parsed = parse_stablehlo(f"func.func private @while_body({args}) {{\n{body}\n}}\n")
    return parsed["while_body"]


def cond_function(op: HloOp) -> HloFunction | None:
    """The ``cond`` region as a function of the carried values: a ``while_loop``'s exit test (e.g. a reduce over
    the state), run once per iteration on the device."""
    cond, _ = _regions(op)
    names = [name for name, _ in carried(op)]
    text = "\n".join(line for line in cond.split("\n") if line.strip() != "cond {")
    if not text.strip() or len(names) != len(op.outputs):
        return None
    args = ", ".join(f"%{n}: tensor<{_spell(t)}>" for n, t in zip(names, op.outputs, strict=True))
    parsed = parse_stablehlo(f"func.func private @while_cond({args}) {{\n{text}\n}}\n")
    return parsed["while_cond"]


def _spell(t: TensorType) -> str:
    return "x".join([*(str(d) for d in t.shape), MLIR_ELEMENT[t.dtype]])
