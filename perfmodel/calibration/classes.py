"""Op classes a calibration is fitted per (class x dtype), and which devices may share one."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from perfmodel.calibration.op_groups import Group, by_type
from perfmodel.dtypes import DType
from perfmodel.hardware import Hardware
from perfmodel.ops import Op
from perfmodel.ops.base import IntArray

CLASS_OF_KIND: dict[str, str] = {
    "matmul": "gemm", "conv2d": "conv", "attention": "attention",
    "layernorm": "norm", "rmsnorm": "norm", "batchnorm": "norm", "softmax": "softmax",
    "elementwise": "elementwise", "reduce": "reduce",
    "gather": "gather", "embedding": "gather", "scatter": "scatter",
    "transpose": "layout", "reshape": "layout", "quantize": "quant", "dequantize": "quant",
    "allreduce": "collective_allreduce", "allgather": "collective_allgather",
    "reducescatter": "collective_reducescatter", "alltoall": "collective_alltoall",
}
# training passes of GEMM-like ops run other GEMM shapes and kernels: their own class
_PASS_SPLIT = frozenset({"gemm", "conv", "attention"})
MULTINODE = "_multinode"  # suffix of a collective's class across nodes
_MULTI_KIND = frozenset(c for c in CLASS_OF_KIND.values() if list(CLASS_OF_KIND.values()).count(c) > 1)


def op_class_name(op: Op, per_node_default: int | None = None) -> str:
    """The op's class: ``gemm``, ``conv``, ``norm``, ... (``conv_bwd`` for a training pass,
    ``collective_allreduce_multinode`` for a collective on more devices than one node holds -- its
    ``devices_per_node``, else ``per_node_default``, the device's: NCCL over the network runs at another
    fabric's efficiency than over NVLink)."""
    name = CLASS_OF_KIND.get(op.kind, op.kind)
    pass_ = getattr(op, "pass_", "forward")
    if name in _PASS_SPLIT and pass_ != "forward":
        name = f"{name}_bwd"
    per_node = getattr(op, "devices_per_node", None) or per_node_default
    if name.startswith("collective_") and per_node is not None and per_node < getattr(op, "devices", 0):
        name = f"{name}{MULTINODE}"
    return name


def single_node_key(key: str) -> str | None:
    """``collective_allreduce:fp16`` for ``collective_allreduce_multinode:fp16``; None for other keys."""
    name, _, dtype = key.partition(":")
    return f"{name.removesuffix(MULTINODE)}:{dtype}" if name.endswith(MULTINODE) else None


def op_variant(op: Op) -> str | None:
    """The kernel family within a class: the kind where a class groups several (``norm/rmsnorm``),
    the arity of an elementwise chain (``elementwise/2in1out``, ``_sfu`` with transcendentals), the
    combining op of a reduction (``reduce/mean``: frameworks run sum, mean and max through
    different kernels, e.g. PyTorch's CPU bf16 mean accumulates through a slow upcast path)."""
    if op.kind == "reduce":
        return str(getattr(op, "op", "sum"))
    if op.kind == "elementwise":
        sfu = "_sfu" if getattr(op, "transcendentals_per_element", 0) > 0 else ""
        return f"{getattr(op, 'inputs', 1)}in{getattr(op, 'outputs', 1)}out{sfu}"
    name = CLASS_OF_KIND.get(op.kind, op.kind)
    if name in _MULTI_KIND:
        return op.kind
    return None


def class_key(op: Op, per_node_default: int | None = None) -> str:
    """``class[/variant]:dtype``, the unit a calibration fits (``gemm:fp16``, ``norm/rmsnorm:fp16``);
    ``per_node_default``: the device's devices per node, for collectives that do not say."""
    variant = op_variant(op)
    base = op_class_name(op, per_node_default)
    name = base if variant is None else f"{base}/{variant}"
    return f"{name}:{key_dtype(op).value}"


def key_dtype(op: Op) -> DType:
    """The dtype a class key names: the op's ``dtype``; a quantize / dequantize, which has none, the side its work
    computes in (``QuantOp.compute_dtype``). Without it every calibration of runs with such an op (HTA's FBGEMM fp8
    quantizers) failed."""
    dtype = getattr(op, "dtype", None)
    if isinstance(dtype, DType):
        return dtype
    compute: DType = op.compute_dtype  # type: ignore[attr-defined]
    return compute


def parent_key(key: str) -> str | None:
    """``norm:fp16`` for ``norm/rmsnorm:fp16``; None for a key without a variant."""
    name, _, dtype = key.partition(":")
    if "/" not in name:
        return None
    return f"{name.split('/')[0]}:{dtype}"


def class_keys(ops: Sequence[Op], per_node_default: int | None = None) -> list[str]:
    names, code = class_codes(ops, per_node_default)
    keys: list[str] = names[code].tolist()
    return keys


# every field ``class_key`` reads of an op (the kind is its class's)
_KEY_FIELDS = ("dtype", "from_dtype", "to_dtype", "pass_", "devices_per_node", "devices", "op", "inputs", "outputs",
               "transcendentals_per_element")


@functools.cache
def _key_reader(cls: type[Op]) -> Callable[[Op], Any] | None:
    """The fields of ``_KEY_FIELDS`` that ``cls`` has, read as one tuple (None: it has none of them)."""
    names = [name for name in _KEY_FIELDS if hasattr(cls, name) or name in getattr(cls, "__dataclass_fields__", {})]
    if not names:
        return None
    getter = attrgetter(*names)
    return getter if len(names) > 1 else lambda op: (getter(op),)


@functools.cache
def _key_names(cls: type[Op]) -> tuple[str, ...]:
    """The fields of ``_KEY_FIELDS`` that ``cls`` has (``_key_reader``'s)."""
    return tuple(name for name in _KEY_FIELDS if hasattr(cls, name) or name in getattr(cls, "__dataclass_fields__",
                                                                                             {}))


def _one_key_tuple(cls: type[Op], members: list[Op]) -> bool:
    """Whether every op of ``members`` (of class ``cls``) holds one value of one type in each field ``class_key``
    reads (``_key_names``), read a field at a time (a set of the values and one of their types: C loops, no tuple
    per op); then their tuples are one and so is their key. False where a value does not hash."""
    for name in _key_names(cls):
        column = list(map(attrgetter(name), members))
        try:
            if len(set(column)) > 1 or len(set(map(type, column))) > 1:
                return False
        except TypeError:
            return False
    return True


def class_codes(ops: Sequence[Op], per_node_default: int | None = None,
                groups: list[Group] | None = None) -> tuple[np.ndarray[Any, np.dtype[np.str_]], IntArray]:
    """(names, code): the distinct ``class_key``s of ``ops``, sorted (as ``np.unique`` sorts them), and each op's
    position among them. ``class_key`` runs once per op class and distinct tuple of the fields it reads
    (``_KEY_FIELDS``; a class whose values of one field are of several types, where 1 and 1.0 would format apart,
    once per op): a batch of ops that all differ in their shapes pays a tuple and a dict lookup per op.
    ``groups``: ``op_groups.by_type(ops)`` where the caller has it."""
    keys: dict[str, int] = {}
    code = np.empty(len(ops), dtype=np.intp)
    for cls, index, members in by_type(ops) if groups is None else groups:
        if _one_key_tuple(cls, members):  # every op of the class has the same key: no tuple per op
            code[index] = keys.setdefault(class_key(members[0], per_node_default), len(keys))
            continue
        reader = _key_reader(cls)
        values = [()] * len(members) if reader is None else list(map(reader, members))
        width = len(values[0]) if values else 0
        if not all(len(set(map(type, map(itemgetter(j), values)))) == 1 for j in range(width)):
            values = list(range(len(members)))  # mixed types in a field: each op its own
        try:
            first = dict.fromkeys(values)
        except TypeError:  # a value that does not hash: each op its own
            values = list(range(len(members)))
            first = dict.fromkeys(values)
        if len(first) < len(values):
            where = dict(zip(reversed(values), range(len(values) - 1, -1, -1), strict=True))  # first op of each
        else:
            where = dict(zip(values, range(len(values)), strict=True))
        of_value = {value: keys.setdefault(class_key(members[where[value]], per_node_default), len(keys))
                    for value in first}
        code[index] = np.fromiter(map(of_value.__getitem__, values), dtype=np.intp, count=len(values))
    names = sorted(keys)
    order = np.array([keys[name] for name in names], dtype=np.intp)  # sorted position -> first-seen code
    position = np.empty(len(names), dtype=np.intp)
    position[order] = np.arange(len(names))
    return np.array(names, dtype=str).reshape(len(names)), position[code]


def related(source: dict[str, str], target: Hardware) -> bool:
    """Whether a calibration of ``source`` (id, vendor, kind) may seed ``target``.

    Same vendor and same kind (gpu/npu/tpu/cpu): the corrections are ratios to the model, which
    already carries each device's peaks and bandwidths, so within one vendor's software stack
    (cuBLAS/cuDNN, rocBLAS/MIOpen) they carry over to first order.
    """
    return source.get("vendor") == target.vendor and source.get("kind") == target.kind
