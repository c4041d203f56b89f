"""Reading one recorded op call's arguments: shapes (``Input Dims``), dtypes (``Input type``) and
scalar values (``Concrete Inputs``), with a precise ``Unbuildable`` reason when one is missing."""

from __future__ import annotations

import math
import re

from perfmodel.traces.records import OpCall

# PyTorch's ``Input type`` strings (c10 scalar type names) -> perfmodel dtypes
TORCH_DTYPES = {
    "float": "fp32", "double": "fp64", "c10::Half": "fp16", "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8_e4m3", "c10::Float8_e4m3fnuz": "fp8_e4m3", "c10::Float8_e5m2": "fp8_e5m2",
    "c10::Float8_e5m2fnuz": "fp8_e5m2", "signed char": "int8", "unsigned char": "int8", "bool": "int8",
    "int": "int32", "long int": "int64", "long": "int64", "int64_t": "int64", "short int": "int32",
    "float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64",
}
_INT_LIST = re.compile(r"^\[\s*-?\d+(\s*,\s*-?\d+)*\s*\]$")


class Unbuildable(ValueError):
    """An op recognised by name whose perfmodel op cannot be built from what the trace recorded."""


class Args:
    """Typed access to one op call's recorded arguments."""

    def __init__(self, call: OpCall) -> None:
        self.call = call
        self.name = call.name
        self.notes: list[str] = []  # what a builder inferred rather than read (joined to its own notes)

    def shape(self, index: int) -> tuple[int, ...]:
        dims = self.call.input_dims
        if dims is None:
            raise Unbuildable(f"{self.name}: no Input Dims (profile with record_shapes=True)")
        if index >= len(dims) or dims[index] is None:
            raise Unbuildable(f"{self.name}: argument {index} has no recorded shape")
        shape = dims[index]
        assert shape is not None
        if not shape or any(d <= 0 for d in shape):
            raise Unbuildable(f"{self.name}: argument {index} has shape {list(shape)} (empty or scalar)")
        return shape

    def strides(self, index: int) -> tuple[int, ...] | None:
        """The argument's recorded strides (elements), None where not recorded."""
        strides = self.call.input_strides
        if strides is None or index >= len(strides):
            return None
        return strides[index]

    def has_tensor(self, index: int) -> bool:
        dims = self.call.input_dims
        return dims is not None and index < len(dims) and bool(dims[index])

    def tensor_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of every argument that is a non-scalar tensor."""
        return [d for d in (self.call.input_dims or ()) if d]

    def dtype(self, index: int) -> str:
        types = self.call.input_types
        if types is None or index >= len(types):
            raise Unbuildable(f"{self.name}: no Input type for argument {index}")
        name = types[index]
        if name not in TORCH_DTYPES:
            raise Unbuildable(f"{self.name}: dtype {name!r} has no perfmodel equivalent")
        return TORCH_DTYPES[name]

    def concrete(self, index: int) -> str | None:
        values = self.call.concrete_inputs
        if values is None or index >= len(values) or values[index] == "":
            return None
        return values[index]

    def int_list(self, index: int, what: str) -> list[int]:
        text = self.concrete(index)
        if text is None:
            raise Unbuildable(f"{self.name}: {what} not recorded (needs a PyTorch with 'Concrete Inputs')")
        text = text.strip()
        if text == "[]":
            return []
        if _INT_LIST.match(text):
            return [int(v) for v in text.strip("[]").split(",")]
        if re.fullmatch(r"-?\d+", text):
            return [int(text)]
        raise Unbuildable(f"{self.name}: {what} is {text[:40]!r}, not a list of integers")

    def flag(self, index: int) -> bool | None:
        return _bool(self.concrete(index))

    def flags(self, index: int) -> list[bool] | None:
        """A recorded bool list (``[False, True, True]``), None where not recorded or not one."""
        text = self.concrete(index)
        if text is None:
            return None
        values = [_bool(part.strip()) for part in text.strip().strip("[]").split(",")]
        return None if not values or None in values else [v is True for v in values]


def _bool(text: str | None) -> bool | None:
    if text in ("True", "true", "1"):
        return True
    if text in ("False", "false", "0"):
        return False
    return None


def broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """NumPy broadcast of several shapes (a mismatch takes the larger dimension)."""
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + s for s in shapes]
    return tuple(max(column) for column in zip(*padded, strict=True))


def numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)
