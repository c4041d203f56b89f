"""Op base: frozen dataclasses built from plain dicts, and the vectorised ``Work`` they produce.

Each op family implements ``work(ops, granularity_bytes)``: the FLOPs per engine class, the
compulsory bytes per tensor role and the loop structure of many ops at once, as numpy arrays.
The scalar accessors (``flops_by_engine``, ``bytes_by_role``) call the same code on one op, so
the formulas exist once.

(``Work`` and its tables live in ``work``, the field readers in ``readers``, the checks in ``checks`` and
the JSON converters in ``convert``; they are re-exported here.)
"""

from __future__ import annotations

import dataclasses
import functools
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import import_module
from typing import Any, ClassVar, Self

from perfmodel.dtypes import DType
from perfmodel.ops.checks import (
    MAX_DIMENSION,
    OpError,
    check_pass,
    check_shape,
    numel,
    pass_invalid,
    positive_invalid,
    require_non_negative,
    require_positive,
    shape_invalid,
)
from perfmodel.ops.convert import Converter, _converter, _converters, _schema
from perfmodel.ops.readers import (
    GemmArrays,
    OpColumns,
    column,
    dtype_bytes,
    dtype_column,
    dtype_set,
    gemm_slots,
    last_dim,
    pass_factors,
    shape_elements,
)
from perfmodel.ops.work import (
    ATTENTION_FIELDS,
    DTYPE_BYTES,
    DTYPE_INDEX,
    DTYPES,
    ENGINE_CLASSES,
    GEMM_SLOTS,
    NO_DTYPE,
    PASSES,
    ROLES,
    FloatArray,
    IntArray,
    Pass,
    Work,
    dtype_codes,
)

__all__ = [
    "ATTENTION_FIELDS", "DTYPES", "DTYPE_BYTES", "DTYPE_INDEX", "ENGINE_CLASSES", "GEMM_SLOTS", "MAX_DIMENSION",
    "NO_DTYPE", "OP_MODULES", "PASSES", "ROLES", "Converter", "FloatArray", "GemmArrays", "IntArray", "Op",
    "OpColumns", "OpError", "Pass", "Work", "_converter", "_converters", "_schema", "check_pass", "check_shape",
    "column", "dtype_bytes", "dtype_codes", "dtype_column", "dtype_set", "gemm_slots", "import_all_ops", "last_dim",
    "numel", "op_class", "op_kinds", "pass_factors", "pass_invalid", "positive_invalid", "register",
    "require_non_negative", "require_positive", "shape_elements", "shape_invalid",
]

_REGISTRY: dict[str, type[Op]] = {}

# The module defining each op kind: ``op_class`` imports only the one it needs (``perfmodel predict`` builds one
# op: issue 25); ``op_kinds`` imports them all. tests/unit/test_ops.py keeps this map equal to the registry.
OP_MODULES: dict[str, str] = {
    **dict.fromkeys(["allreduce", "allgather", "reducescatter", "alltoall", "sendrecv", "hostcopy"],
                    "perfmodel.ops.collective"),
    "attention": "perfmodel.ops.attention",
    "conv2d": "perfmodel.ops.conv",
    "embedding_bag": "perfmodel.ops.embedding_bag",
    **dict.fromkeys(["elementwise", "reduce", "transpose", "reshape"], "perfmodel.ops.elementwise"),
    **dict.fromkeys(["gather", "embedding", "scatter"], "perfmodel.ops.indexing"),
    "matmul": "perfmodel.ops.matmul",
    **dict.fromkeys(["layernorm", "rmsnorm", "batchnorm", "softmax"], "perfmodel.ops.norm"),
    **dict.fromkeys(["quantize", "dequantize"], "perfmodel.ops.quant"),
}


def register(cls: type[Op]) -> type[Op]:
    _REGISTRY[cls.kind] = cls
    return cls


def import_all_ops() -> None:
    """Import every op module (each registers its kinds)."""
    for module in sorted(set(OP_MODULES.values())):
        import_module(module)


def op_kinds() -> list[str]:
    import_all_ops()
    return sorted(_REGISTRY)


def op_class(kind: str) -> type[Op]:
    cls = _REGISTRY.get(kind)
    if cls is None and kind in OP_MODULES:
        import_module(OP_MODULES[kind])
        cls = _REGISTRY.get(kind)
    if cls is None:
        raise OpError(kind, "kind", f"unknown op kind; known: {', '.join(op_kinds())}")
    return cls


@dataclass(frozen=True)
class Op(ABC):
    """Base of every op: a kind, a dtype and shape fields, built with ``Op.from_dict``."""

    kind: ClassVar[str] = "op"
    aliases: ClassVar[dict[str, str]] = {"pass": "pass_"}
    columnar: ClassVar[bool] = False  # ``work`` also reads ``OpColumns`` (and ``check_columns`` validates them)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Op:
        """Build the op named by ``data['kind']`` with precise errors for missing/wrong fields."""
        if not isinstance(data, dict):
            raise OpError("?", "<op>", f"expected a mapping, got {type(data).__name__}")
        kind = data.get("kind")
        if not isinstance(kind, str):
            raise OpError("?", "kind", f"missing or not a string; known: {', '.join(op_kinds())}")
        target = op_class(kind) if cls is Op else cls
        return target._build({k: v for k, v in data.items() if k != "kind"})

    @classmethod
    def _build(cls, data: dict[str, Any]) -> Self:
        values = cls.field_values(data)
        try:
            return cls(**values)
        except OpError:
            raise
        except (ValueError, TypeError) as exc:
            raise OpError(cls.kind, "<op>", str(exc)) from exc

    @classmethod
    def field_values(cls, data: dict[str, Any]) -> dict[str, Any]:
        """The fields given in ``data`` (JSON keys; ``kind`` is skipped), converted and checked one by one;
        every required field present. The op's own checks (``__post_init__``) are not run."""
        converters, required = _converters(cls)
        values: dict[str, Any] = {}
        aliases = cls.aliases
        for key, raw in data.items():
            name = aliases.get(key, key)
            convert = converters.get(name)
            if convert is None:
                if key == "kind":
                    continue
                public = sorted({k for k in converters if k not in aliases.values()} | set(aliases))
                raise OpError(cls.kind, key, f"unknown field; fields: {', '.join(public)}")
            values[name] = convert(key, raw)
        if len(values) < len(required):
            for name in required:
                if name not in values:
                    raise OpError(cls.kind, name, "missing required field")
        return values

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        for name, key in _json_keys(type(self)):
            value = getattr(self, name)
            out[key] = value.value if isinstance(value, DType) else (list(value) if isinstance(value, tuple) else value)
        return out

    # --- vectorised model ------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def work(cls, ops: Sequence[Self], granularity_bytes: float = 1.0) -> Work:
        """FLOPs, bytes and loop structure of many ops of this kind at once."""

    @abstractmethod
    def loop_dims(self) -> dict[str, int]:
        """Loop dimensions of the op's iteration space."""

    # --- scalar views of the same model ----------------------------------------------------
    def _one(self, granularity_bytes: float = 1.0) -> Work:
        return type(self).work([self], granularity_bytes)

    def flops_by_engine(self) -> dict[str, float]:
        """Executed FLOPs per engine class: matrix, vector, special (transcendentals)."""
        w = self._one()
        return {"matrix": float(w.flops_matrix[0]), "vector": float(w.flops_vector[0]),
                "special": float(w.flops_special[0])}

    @property
    def flops(self) -> float:
        return sum(self.flops_by_engine().values())

    def bytes_by_role(self, granularity_bytes: float = 1.0) -> dict[str, float]:
        """Compulsory DRAM bytes per tensor role (random rows rounded up to the granularity)."""
        w = self._one(granularity_bytes)
        return {role: float(w.bytes_by_role[role][0]) for role in ROLES if w.bytes_by_role[role][0]}

    @property
    def bytes(self) -> float:
        return sum(self.bytes_by_role().values())


@functools.cache
def _json_keys(cls: type[Op]) -> tuple[tuple[str, str], ...]:
    """Each dataclass field of ``cls`` and its JSON key (the first alias naming it, else its own name)."""
    first_alias: dict[str, str] = {}
    for key, name in cls.aliases.items():
        first_alias.setdefault(name, key)
    return tuple((spec.name, first_alias.get(spec.name, spec.name)) for spec in dataclasses.fields(cls))
