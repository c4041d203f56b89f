"""Data types: storage width and the names users may give them."""

from __future__ import annotations

from enum import StrEnum


class DType(StrEnum):
    """A numeric data type; the value is the canonical name used in specs and JSON."""

    FP64 = "fp64"
    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8_E4M3 = "fp8_e4m3"
    FP8_E5M2 = "fp8_e5m2"
    INT32 = "int32"
    INT8 = "int8"
    INT4 = "int4"
    INT64 = "int64"

    @property
    def bits(self) -> int:
        """Storage bits per element (TF32 is stored in a 32-bit word)."""
        return _BITS[self]

    @property
    def bytes(self) -> float:
        """Storage bytes per element (0.5 for INT4: two values per byte)."""
        return _BITS[self] / 8

    @property
    def is_float(self) -> bool:
        return self.value.startswith(("fp", "bf", "tf"))


_BITS = {
    DType.FP64: 64,
    DType.FP32: 32,
    DType.TF32: 32,
    DType.FP16: 16,
    DType.BF16: 16,
    DType.FP8_E4M3: 8,
    DType.FP8_E5M2: 8,
    DType.INT64: 64,
    DType.INT32: 32,
    DType.INT8: 8,
    DType.INT4: 4,
}

_ALIASES = {
    "float64": DType.FP64, "double": DType.FP64, "f64": DType.FP64,
    "float32": DType.FP32, "float": DType.FP32, "f32": DType.FP32,
    "tensorfloat32": DType.TF32,
    "float16": DType.FP16, "half": DType.FP16, "f16": DType.FP16,
    "bfloat16": DType.BF16,
    "fp8": DType.FP8_E4M3, "float8_e4m3fn": DType.FP8_E4M3, "e4m3": DType.FP8_E4M3,
    "float8_e5m2": DType.FP8_E5M2, "e5m2": DType.FP8_E5M2,
    "long": DType.INT64, "int": DType.INT32, "uint8": DType.INT8, "uint4": DType.INT4,
}

DTYPE_NAMES = tuple(d.value for d in DType)
_CANONICAL: dict[str, DType] = {d.value: d for d in DType}


def parse_dtype(value: str | DType) -> DType:
    """Return the DType for a canonical name or a common alias ('float16', 'half', 'bfloat16')."""
    if value.__class__ is str:  # a canonical name, as JSON gives it: one dict lookup
        found = _CANONICAL.get(value)
        if found is not None:
            return found
    if isinstance(value, DType):
        return value
    key = str(value).strip().lower().removeprefix("torch.")
    try:
        return DType(key)
    except ValueError:
        pass
    if key in _ALIASES:
        return _ALIASES[key]
    raise ValueError(f"unknown dtype {value!r}; known: {', '.join(DTYPE_NAMES)}")
