"""Op base: frozen dataclasses built from plain dicts, and the vectorised ``Work`` they produce.

Each op family implements ``work(ops, granularity_bytes)``: the FLOPs per engine class, the
compulsory bytes per tensor role and the loop structure of many ops at once, as numpy arrays.
The scalar accessors (``flops_by_engine``, ``bytes_by_role``) call the same code on one op, so
the formulas exist once.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self

import numpy as np
import numpy.typing as npt

from perfmodel.dtypes import DType, parse_dtype

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

ROLES = ("weights", "activations_in", "activations_out", "kv_cache", "indices", "scales", "workspace")
ENGINE_CLASSES = ("matrix", "vector", "special")
DTYPES: tuple[DType, ...] = tuple(DType)
DTYPE_INDEX = {d: i for i, d in enumerate(DTYPES)}
Pass = Literal["forward", "backward", "forward_backward"]
PASSES = ("forward", "backward", "forward_backward")
GEMM_SLOTS = 3  # forward, data-gradient, weight-gradient GEMMs of one op
# flash-attention forward shape, for the attention tile model (all 0 for other ops)
ATTENTION_FIELDS = ("batch_heads", "group", "seq_q", "seq_kv", "head_dim", "head_dim_v", "causal", "kv_bytes")


class OpError(ValueError):
    """An op that cannot be built: names the kind, the field and the reason."""

    def __init__(self, kind: str, field_name: str, reason: str) -> None:
        super().__init__(f"op {kind!r}: field {field_name!r}: {reason}")
        self.kind = kind
        self.field = field_name
        self.reason = reason


@dataclass
class Work:
    """What ``n`` ops ask of a machine, one array element per op (SI units)."""

    n: int
    flops_matrix: FloatArray
    flops_vector: FloatArray
    flops_special: FloatArray
    bytes_by_role: dict[str, FloatArray]
    matrix_dtype: IntArray
    vector_dtype: IntArray
    parallel_items: FloatArray
    kernels: FloatArray
    threads: FloatArray = field(default_factory=lambda: np.zeros(0))  # GPU threads launched (0: n/a)
    scratchpad_bytes: FloatArray = field(default_factory=lambda: np.zeros(0))  # through SMEM, x bank conflicts
    bytes_per_thread: FloatArray = field(default_factory=lambda: np.zeros(0))  # loads in flight
    # the kernel's launch caps its threads per unit below what could be resident (0: no cap)
    threads_per_unit_cap: FloatArray = field(default_factory=lambda: np.zeros(0))
    attention: FloatArray = field(default_factory=lambda: np.zeros(0))  # n x len(ATTENTION_FIELDS)
    # GEMM-like work as up to GEMM_SLOTS GEMMs per op (n x slots; a 1-D array fills slot 0)
    gemm_batch: FloatArray = field(default_factory=lambda: np.zeros(0))
    gemm_m: FloatArray = field(default_factory=lambda: np.zeros(0))
    gemm_n: FloatArray = field(default_factory=lambda: np.zeros(0))
    gemm_k: FloatArray = field(default_factory=lambda: np.zeros(0))
    comm_kind: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    comm_bytes: FloatArray = field(default_factory=lambda: np.zeros(0))
    comm_devices: FloatArray = field(default_factory=lambda: np.zeros(0))
    comm_devices_per_node: FloatArray = field(default_factory=lambda: np.zeros(0))
    comm_algorithm: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # bytes streamed by the op's own pre/post-processing kernels (algorithm transforms), added after its body
    serial_bytes: FloatArray = field(default_factory=lambda: np.zeros(0))
    # operand bytes a tensor-core kernel reads in NHWC while the op stores NCHW: converted (read + write) first
    nhwc_bytes: FloatArray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self) -> None:
        zeros = np.zeros(self.n)
        for name in ("threads", "bytes_per_thread", "threads_per_unit_cap", "scratchpad_bytes", "comm_bytes",
                     "comm_devices", "comm_devices_per_node", "serial_bytes", "nhwc_bytes"):
            if getattr(self, name).size == 0:
                setattr(self, name, zeros)
        if self.attention.size == 0:
            self.attention = np.zeros((self.n, len(ATTENTION_FIELDS)))
        for name in ("gemm_batch", "gemm_m", "gemm_n", "gemm_k"):
            value = getattr(self, name)
            if value.size == 0:
                setattr(self, name, np.zeros((self.n, GEMM_SLOTS)))
            elif value.ndim == 1:
                padded = np.zeros((self.n, GEMM_SLOTS))
                padded[:, 0] = value
                setattr(self, name, padded)
        for name in ("comm_kind", "comm_algorithm"):
            if getattr(self, name).size == 0:
                setattr(self, name, np.zeros(self.n, dtype=np.int64))
        for role in ROLES:
            self.bytes_by_role.setdefault(role, zeros)

    @property
    def dram_bytes(self) -> FloatArray:
        total = np.zeros(self.n)
        for values in self.bytes_by_role.values():
            total = total + values
        return total

    @property
    def flops(self) -> FloatArray:
        return self.flops_matrix + self.flops_vector + self.flops_special

    def take(self, index: np.ndarray[Any, np.dtype[np.intp]]) -> Work:
        """The works at ``index`` (reordered, or repeated to cost one op under many schedules)."""
        fields = {k: v[index] for k, v in self.__dict__.items() if isinstance(v, np.ndarray)}
        roles = {r: v[index] for r, v in self.bytes_by_role.items()}
        return Work(n=len(index), bytes_by_role=roles, **fields)

    @staticmethod
    def interleave(parts: Sequence[Work], rows: Sequence[np.ndarray[Any, np.dtype[np.intp]]], n: int) -> Work:
        """Join the works of several op groups, part ``p`` going to the rows ``rows[p]`` of the ``n`` ops
        (``concat`` then ``take`` in one pass)."""
        def place(name: str, arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
            first = arrays[0]
            out = np.empty((n, *first.shape[1:]), dtype=np.result_type(*arrays))
            for values, where in zip(arrays, rows, strict=True):
                out[where] = values
            return out

        names = [f.name for f in dataclasses.fields(Work) if f.name not in ("n", "bytes_by_role")]
        joined = {name: place(name, [getattr(p, name) for p in parts]) for name in names}
        roles = {r: place(r, [p.bytes_by_role[r] for p in parts]) for r in ROLES}
        return Work(n=n, bytes_by_role=roles, **joined)

    @staticmethod
    def concat(parts: Sequence[Work]) -> Work:
        """Join the works of several op groups (in the given order)."""
        def cat(name: str) -> Any:
            return np.concatenate([getattr(p, name) for p in parts])

        names = [f.name for f in dataclasses.fields(Work) if f.name not in ("n", "bytes_by_role")]
        joined = {name: cat(name) for name in names}
        roles = {r: np.concatenate([p.bytes_by_role[r] for p in parts]) for r in ROLES}
        return Work(n=sum(p.n for p in parts), bytes_by_role=roles, **joined)


def dtype_codes(dtypes: Sequence[DType]) -> IntArray:
    return np.fromiter((DTYPE_INDEX[d] for d in dtypes), dtype=np.int64, count=len(dtypes))


DTYPE_BYTES = np.array([d.bytes for d in DTYPES])  # element size in bytes by dtype code
NO_DTYPE = -1  # code of an optional dtype field left unset, in ``OpColumns``


@dataclass
class OpColumns:
    """``n`` ops of one class as columns instead of objects: what ``work`` reads, without building ``Op``s.

    ``values`` maps each dataclass field to an array of length ``n``: numbers and flags as float64,
    dtypes as int64 codes into ``DTYPES`` (``NO_DTYPE`` for an unset optional one), choices (``pass_``)
    as str arrays, shapes as float64 ``n x rank`` arrays right-aligned (leading dims padded with 1).
    """

    cls: type[Op]
    n: int
    values: dict[str, np.ndarray[Any, Any]]

    def __len__(self) -> int:
        return self.n


def dtype_column(ops: Sequence[Any] | OpColumns, name: str, fallback: str | None = None) -> IntArray:
    """Dtype codes of field ``name``, or of ``fallback`` where it is unset (``out_dtype or dtype``)."""
    if isinstance(ops, OpColumns):
        codes: IntArray = ops.values[name]
        if fallback is not None:
            codes = np.where(codes == NO_DTYPE, ops.values[fallback], codes)
        return codes
    if fallback is None:
        return np.fromiter((DTYPE_INDEX[getattr(o, name)] for o in ops), dtype=np.int64, count=len(ops))
    return np.fromiter((DTYPE_INDEX[getattr(o, name) or getattr(o, fallback)] for o in ops), dtype=np.int64,
                       count=len(ops))


def dtype_bytes(ops: Sequence[Any] | OpColumns, name: str, fallback: str | None = None) -> FloatArray:
    """Element size in bytes of field ``name`` (or ``fallback`` where unset)."""
    out: FloatArray = DTYPE_BYTES[dtype_column(ops, name, fallback)]
    return out


def dtype_set(ops: Sequence[Any] | OpColumns, name: str) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Whether the optional dtype field ``name`` is set."""
    if isinstance(ops, OpColumns):
        out: np.ndarray[Any, np.dtype[np.bool_]] = ops.values[name] != NO_DTYPE
        return out
    return np.fromiter((getattr(o, name) is not None for o in ops), dtype=bool, count=len(ops))


def shape_elements(ops: Sequence[Any] | OpColumns, name: str = "shape") -> FloatArray:
    """Elements of the shape field ``name`` of each op."""
    if isinstance(ops, OpColumns):
        out: FloatArray = ops.values[name].prod(axis=1)
        return out
    return np.fromiter((float(np.prod(getattr(o, name), dtype=np.float64)) for o in ops), dtype=np.float64,
                       count=len(ops))


def last_dim(ops: Sequence[Any] | OpColumns, name: str = "shape") -> FloatArray:
    """The last dimension of the shape field ``name`` of each op."""
    if isinstance(ops, OpColumns):
        out: FloatArray = ops.values[name][:, -1].astype(np.float64)
        return out
    return np.fromiter((float(getattr(o, name)[-1]) for o in ops), dtype=np.float64, count=len(ops))


GemmArrays = tuple[FloatArray, FloatArray, FloatArray, FloatArray]


def gemm_slots(*slots: GemmArrays) -> GemmArrays:
    """(batch, m, n, k) arrays of shape ops x slots from one (batch, m, n, k) per slot.

    A batch of 0 means no GEMM in that slot.
    """
    b, m, n, k = (np.stack([slot[i] for slot in slots], axis=1) for i in range(4))
    return b, m, n, k


def column(ops: Sequence[Any] | OpColumns, name: str) -> FloatArray:
    """One numeric (or flag) field of many ops as a float array."""
    if isinstance(ops, OpColumns):
        values: FloatArray = ops.values[name].astype(np.float64, copy=False)
        return values
    return np.fromiter((getattr(o, name) for o in ops), dtype=np.float64, count=len(ops))


def pass_factors(ops: Sequence[Any] | OpColumns) -> tuple[FloatArray, FloatArray]:
    """(forward share, backward share) per op: 1/0, 0/1 or 1/1."""
    if isinstance(ops, OpColumns):
        passes = ops.values["pass_"]
        return (passes != "backward").astype(np.float64), (passes != "forward").astype(np.float64)
    fwd = np.fromiter((o.pass_ != "backward" for o in ops), dtype=np.float64, count=len(ops))
    bwd = np.fromiter((o.pass_ != "forward" for o in ops), dtype=np.float64, count=len(ops))
    return fwd, bwd


_REGISTRY: dict[str, type[Op]] = {}


def register(cls: type[Op]) -> type[Op]:
    _REGISTRY[cls.kind] = cls
    return cls


def op_kinds() -> list[str]:
    return sorted(_REGISTRY)


def op_class(kind: str) -> type[Op]:
    try:
        return _REGISTRY[kind]
    except KeyError:
        raise OpError(kind, "kind", f"unknown op kind; known: {', '.join(op_kinds())}") from None


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
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            key = next((k for k, v in self.aliases.items() if v == spec.name), spec.name)
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
def _schema(cls: type[Op]) -> tuple[dict[str, Any], dict[str, dataclasses.Field[Any]], tuple[str, ...]]:
    """Type hints, fields and required field names of an op class (computed once)."""
    hints = typing.get_type_hints(cls)
    names = {f.name: f for f in dataclasses.fields(cls)}
    required = tuple(n for n, f in names.items()
                     if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    return hints, names, required


Converter = typing.Callable[[str, Any], Any]


@functools.cache
def _converters(cls: type[Op]) -> tuple[dict[str, Converter], tuple[str, ...]]:
    """One JSON-value converter per field of an op class, built once from its type hints."""
    hints, names, required = _schema(cls)
    return {name: _converter(cls.kind, hints[name]) for name in names}, required


def _converter(kind: str, hint: Any) -> Converter:
    """A function (key, raw) -> value that checks and converts one JSON value to ``hint``."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = _converter(kind, next(a for a in args if a is not type(None)))
        optional = type(None) in args
        return lambda key, raw: None if raw is None and optional else inner(key, raw)
    if hint is DType:
        return functools.partial(_as_dtype, kind)
    if hint is bool:
        return functools.partial(_as_bool, kind)
    if hint is int:
        return functools.partial(_as_int, kind)
    if hint is float:
        return functools.partial(_as_float, kind)
    if origin is tuple:
        return functools.partial(_as_int_tuple, kind)
    if origin is Literal:
        return functools.partial(_as_choice, kind, args)
    if hint is str:
        return functools.partial(_as_str, kind)
    return lambda key, raw: raw


def _as_dtype(kind: str, key: str, raw: Any) -> DType:
    try:
        return parse_dtype(raw)
    except ValueError as exc:
        raise OpError(kind, key, str(exc)) from None


def _as_bool(kind: str, key: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in ("true", "false", "1", "0", "yes", "no"):
        return raw.lower() in ("true", "1", "yes")
    raise OpError(kind, key, f"expected true/false, got {raw!r}")


def _as_float(kind: str, key: str, raw: Any) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise OpError(kind, key, f"expected a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise OpError(kind, key, f"expected a finite number, got {raw!r}")
    return value


def _as_int_tuple(kind: str, key: str, raw: Any) -> tuple[int, ...]:
    if isinstance(raw, str):
        raw = [p for p in raw.replace("x", ",").split(",") if p.strip()]
    if not isinstance(raw, list | tuple):
        raise OpError(kind, key, f"expected a list, got {raw!r}")
    return tuple(_as_int(kind, key, item) for item in raw)


def _as_choice(kind: str, choices: tuple[Any, ...], key: str, raw: Any) -> Any:
    if raw not in choices:
        raise OpError(kind, key, f"expected one of {', '.join(map(str, choices))}, got {raw!r}")
    return raw


def _as_str(kind: str, key: str, raw: Any) -> str:
    if not isinstance(raw, str):
        raise OpError(kind, key, f"expected a string, got {raw!r}")
    return raw


def _as_int(kind: str, key: str, raw: Any) -> int:
    if type(raw) is int:
        return raw
    if isinstance(raw, bool):
        raise OpError(kind, key, f"expected an integer, got {raw!r}")
    if isinstance(raw, int):
        return int(raw)
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
        return int(raw)
    raise OpError(kind, key, f"expected an integer, got {raw!r}")


MAX_DIMENSION = 2**40  # beyond any real tensor dimension or byte count: a typo, not a workload


def require_positive(kind: str, **values: int | float) -> None:
    for name, value in values.items():
        if value <= 0:
            raise OpError(kind, name, f"must be > 0, got {value}")
        if value > MAX_DIMENSION:
            raise OpError(kind, name, f"{value:g} is larger than {MAX_DIMENSION:g}: not a real workload")


def positive_invalid(cols: OpColumns, *names: str) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Rows where a field of ``names`` breaks ``require_positive`` (<= 0 or beyond ``MAX_DIMENSION``)."""
    bad = np.zeros(cols.n, dtype=bool)
    for name in names:
        values = cols.values[name]
        bad |= (values <= 0) | (values > MAX_DIMENSION)
    return bad


def pass_invalid(cols: OpColumns) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Rows whose ``pass_`` breaks ``check_pass``."""
    out: np.ndarray[Any, np.dtype[np.bool_]] = ~np.isin(cols.values["pass_"], PASSES)
    return out


def shape_invalid(cols: OpColumns, name: str = "shape") -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Rows whose shape ``name`` breaks ``check_shape`` (rank 1..16, dims > 0, elements within bounds)."""
    block = cols.values[name]
    bad: np.ndarray[Any, np.dtype[np.bool_]] = ((block <= 0).any(axis=1) | (block.prod(axis=1) > MAX_DIMENSION)
                                                | (block.shape[1] > 16))
    return bad


def require_non_negative(kind: str, **values: int | float) -> None:
    for name, value in values.items():
        if value < 0:
            raise OpError(kind, name, f"must be >= 0, got {value}")


def check_pass(kind: str, value: str) -> None:
    if value not in PASSES:
        raise OpError(kind, "pass", f"expected one of {', '.join(PASSES)}, got {value!r}")


def check_shape(kind: str, name: str, shape: tuple[int, ...]) -> None:
    if len(shape) == 0:
        raise OpError(kind, name, "shape must have at least one dimension")
    if len(shape) > 16:
        raise OpError(kind, name, f"{len(shape)} dimensions: at most 16")
    for dim in shape:
        if dim <= 0:
            raise OpError(kind, name, f"dimensions must be > 0, got {list(shape)}")
    if numel(shape) > MAX_DIMENSION:
        raise OpError(kind, name, f"{numel(shape):g} elements: larger than {MAX_DIMENSION:g}, not a real workload")


def numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)
