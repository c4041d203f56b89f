"""Collectives across devices: all-reduce, all-gather, reduce-scatter, all-to-all; a host <-> device copy.

``bytes`` is the per-device buffer: the input of all-reduce and reduce-scatter, the output of
all-gather, the send buffer of all-to-all, the message of a send/recv.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

import numpy as np

from perfmodel.dtypes import DType
from perfmodel.ops.base import (
    DTYPE_BYTES,
    MAX_DIMENSION,
    Op,
    OpColumns,
    OpError,
    Work,
    column,
    dtype_codes,
    dtype_column,
    positive_invalid,
    register,
    require_positive,
)
from perfmodel.ops.checks import one_of

# "hostcopy_pageable": a host copy staged through the driver's pinned buffer (``HostCopy.pageable``)
COMM_KINDS = ("none", "allreduce", "allgather", "reducescatter", "alltoall", "sendrecv", "hostcopy",
              "hostcopy_pageable")
ALGORITHMS = ("auto", "ring", "tree")


@dataclass(frozen=True)
class Collective(Op):
    size_bytes: float
    devices: int
    dtype: DType = DType.BF16
    devices_per_node: int | None = None
    algorithm: Literal["auto", "ring", "tree"] = "auto"

    reduces: ClassVar[bool] = False
    aliases: ClassVar[dict[str, str]] = {"pass": "pass_", "bytes": "size_bytes"}
    columnar: ClassVar[bool] = True

    def __post_init__(self) -> None:
        require_positive(self.kind, bytes=self.size_bytes, devices=self.devices)
        if self.devices_per_node is not None and self.devices_per_node <= 0:
            raise OpError(self.kind, "devices_per_node", "must be > 0")
        if self.algorithm not in ALGORITHMS:  # a dict's converter names it first; a column's here
            raise OpError(self.kind, "algorithm", f"expected one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}")

    @classmethod
    def invalid_rows(cls, cols: OpColumns) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """The rows ``__post_init__`` may reject, found at once (NaN: an unset ``devices_per_node``)."""
        v = cols.values
        bad: np.ndarray[Any, np.dtype[np.bool_]] = (
            positive_invalid(cols, "size_bytes", "devices") | (v["devices_per_node"] <= 0)
            | (v["devices_per_node"] > MAX_DIMENSION) | ~one_of(v["algorithm"], ALGORITHMS))
        return bad

    def loop_dims(self) -> dict[str, int]:
        return {"devices": self.devices, "bytes": int(self.size_bytes)}

    @classmethod
    def work(cls, ops: Sequence[Self] | OpColumns, granularity_bytes: float = 1.0) -> Work:
        size = column(ops, "size_bytes")
        p = column(ops, "devices")
        codes = dtype_column(ops, "dtype")
        elem = DTYPE_BYTES[codes]
        share = (p - 1.0) / p
        vector = size / elem * share if cls.reduces else np.zeros(len(ops))
        if isinstance(ops, OpColumns):
            dpn = np.nan_to_num(ops.values["devices_per_node"], nan=0.0)
            algorithms = np.asarray(ops.values["algorithm"])
            algo = np.zeros(ops.n, dtype=np.int64)
            for code, name in enumerate(ALGORITHMS):
                algo[algorithms == name] = code
        else:
            dpn = np.array([float(o.devices_per_node or 0) for o in ops])
            algo = np.array([ALGORITHMS.index(o.algorithm) for o in ops], dtype=np.int64)
        return Work(
            n=len(ops), flops_matrix=np.zeros(len(ops)), flops_vector=vector,
            flops_special=np.zeros(len(ops)),
            bytes_by_role={"activations_in": size, "activations_out": size},
            matrix_dtype=codes, vector_dtype=codes, parallel_items=np.full(len(ops), np.inf),
            kernels=np.ones(len(ops)),
            comm_kind=np.full(len(ops), COMM_KINDS.index(cls.kind), dtype=np.int64),
            comm_bytes=size, comm_devices=p, comm_devices_per_node=dpn, comm_algorithm=algo,
        )


@register
@dataclass(frozen=True)
class AllReduce(Collective):
    """Sum a ``bytes`` buffer across ``devices``: every device ends with the total."""

    kind = "allreduce"
    reduces = True


@register
@dataclass(frozen=True)
class AllGather(Collective):
    """Every device contributes ``bytes / devices`` and ends with the whole ``bytes`` buffer."""

    kind = "allgather"


@register
@dataclass(frozen=True)
class ReduceScatter(Collective):
    """Reduce a ``bytes`` buffer across ``devices``; each keeps ``bytes / devices`` of it."""

    kind = "reducescatter"
    reduces = True


@register
@dataclass(frozen=True)
class AllToAll(Collective):
    """Each device sends ``bytes / devices`` to every other device (expert parallelism)."""

    kind = "alltoall"


@register
@dataclass(frozen=True)
class SendRecv(Collective):
    """Point-to-point: one device sends a ``bytes`` message to a peer (a pipeline-parallel hop).

    ``devices`` is the pair (2); ``devices_per_node=1`` puts the peer on another node, so the message
    crosses the network instead of the node's links. ``algorithm`` does not apply.
    """

    kind = "sendrecv"
    devices: int = 2


@register
@dataclass(frozen=True)
class HostCopy(Op):
    """A ``bytes`` copy between host memory and the device over the host link (PCIe, NVLink-C2C): its time is
    the bytes over the link's per-direction bandwidth (``Interconnect.host_link_bandwidth_bytes_per_s``) plus
    the per-copy overhead; the device side writes (``h2d``) or reads (``d2h``) the bytes once.

    ``pageable``: a pageable host buffer, which the CUDA driver stages through a pinned buffer in chunks (CUDA C++
    Best Practices Guide, "Pinned Memory" / "Data Transfer Between Host and Device"): a host CPU copy into the
    staging buffer, pipelined with the DMA, so the slower of the two sets the rate
    (``collectives.PAGEABLE_STAGING_BYTES_PER_S``).
    """

    kind = "hostcopy"
    size_bytes: float
    direction: Literal["h2d", "d2h"] = "h2d"
    pageable: bool = False
    dtype: DType = DType.INT8  # bytes, untyped
    aliases: ClassVar[dict[str, str]] = {"bytes": "size_bytes"}

    def __post_init__(self) -> None:
        require_positive(self.kind, bytes=self.size_bytes)
        if self.direction not in ("h2d", "d2h"):
            raise OpError(self.kind, "direction", "must be 'h2d' or 'd2h'")

    def loop_dims(self) -> dict[str, int]:
        return {"bytes": int(self.size_bytes)}

    @classmethod
    def work(cls, ops: Sequence[Self], granularity_bytes: float = 1.0) -> Work:
        size = np.array([o.size_bytes for o in ops], dtype=np.float64)
        h2d = np.array([o.direction == "h2d" for o in ops])
        zeros = np.zeros(len(ops))
        codes = dtype_codes([o.dtype for o in ops])
        return Work(
            n=len(ops), flops_matrix=zeros, flops_vector=zeros, flops_special=zeros,
            bytes_by_role={"activations_in": np.where(h2d, 0.0, size), "activations_out": np.where(h2d, size, 0.0)},
            matrix_dtype=codes, vector_dtype=codes, parallel_items=np.full(len(ops), np.inf),
            kernels=np.ones(len(ops)), comm_bytes=size, comm_devices=np.ones(len(ops)),
            comm_kind=np.array([COMM_KINDS.index("hostcopy_pageable" if o.pageable else cls.kind) for o in ops],
                               dtype=np.int64),
        )
