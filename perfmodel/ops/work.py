"""The vectorised ``Work`` of many ops (FLOPs per engine, bytes per role, loop structure) and the
tables it is indexed by: tensor roles, engine classes and dtype codes (SI units: FLOPs, bytes)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from perfmodel.dtypes import DType

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

ROLES = ("weights", "activations_in", "activations_out", "kv_cache", "indices", "scales", "workspace")
ENGINE_CLASSES = ("matrix", "vector", "special")
DTYPES: tuple[DType, ...] = tuple(DType)
DTYPE_INDEX = {d: i for i, d in enumerate(DTYPES)}
Pass = Literal["forward", "backward", "forward_backward"]
PASSES = ("forward", "backward", "forward_backward")
GEMM_SLOTS = 3  # forward, data-gradient, weight-gradient GEMMs of one op
# flash-attention shape and passes (1 where the op runs the forward / backward kernel), for the attention tile
# model (all 0 for other ops)
ATTENTION_FIELDS = ("batch_heads", "group", "seq_q", "seq_kv", "head_dim", "head_dim_v", "causal", "kv_bytes",
                    "forward", "backward")

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
    # 1 where a GEMM slot is a library's SIMT implicit-GEMM convolution, whose tiles are fixed when its dtype runs
    # off the matrix engine (``perfmodel.search.conv_space``); n x slots like gemm_batch
    gemm_simt_conv: FloatArray = field(default_factory=lambda: np.zeros(0))
    # GEMMs of a slot issued one after another (a library's loop over the batch: MIOpen's per-image im2col GEMMs),
    # each a kernel of gemm_batch GEMMs paying its own waves and launch; 0 or 1: one kernel; n x slots
    gemm_serial: FloatArray = field(default_factory=lambda: np.zeros(0))
    # channels per filter tap of a slot whose reduction is an implicit GEMM's (taps x channels, NHWC): a tensor-core
    # kernel steps through it one tap and one whole channel interval at a time (``conv_space.CHANNEL_INTERVAL_BYTES``);
    # 0: a plain reduction; n x slots
    gemm_channels: FloatArray = field(default_factory=lambda: np.zeros(0))
    # bytes per element of a slot's B operand where it is stored narrower than the matrix dtype (weight-only int4 /
    # int8: 0.5 / 1 B, dequantised in registers after the load); 0: the matrix dtype's; n x slots
    gemm_b_bytes: FloatArray = field(default_factory=lambda: np.zeros(0))
    comm_kind: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    comm_bytes: FloatArray = field(default_factory=lambda: np.zeros(0))
    comm_devices: FloatArray = field(default_factory=lambda: np.zeros(0))
    comm_devices_per_node: FloatArray = field(default_factory=lambda: np.zeros(0))
    comm_algorithm: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # bytes streamed by the op's own pre/post-processing kernels (algorithm transforms), added after its body
    serial_bytes: FloatArray = field(default_factory=lambda: np.zeros(0))
    # operand bytes a tensor-core kernel reads in NHWC while the op stores NCHW: converted (read + write) first
    nhwc_bytes: FloatArray = field(default_factory=lambda: np.zeros(0))
    # 1 where the op's GEMMs run in a convolution library's kernels (cuDNN, MIOpen), whose sustained share of the
    # matrix peak is ``ModelDefaults.conv_matrix_efficiency``; 0 elsewhere
    conv_library: FloatArray = field(default_factory=lambda: np.zeros(0))
    # share of a convolution's library GEMM FLOPs in its gradient kernels (0 forward, 1 backward), which run at
    # ``ModelDefaults.conv_backward_matrix_efficiency``
    conv_gradient_share: FloatArray = field(default_factory=lambda: np.zeros(0))
    # 1 where the forward runs a library's direct (non-GEMM, non-Winograd, non-FFT) kernels, at
    # ``ModelDefaults.conv_direct_matrix_efficiency``; 0 elsewhere
    conv_direct: FloatArray = field(default_factory=lambda: np.zeros(0))
    # a convolution backward's two kernels' compulsory DRAM streams: the data gradient's (dy, W in, dx out) and the
    # weight gradient's (x, dy in, dW out); 0 elsewhere
    dgrad_stream_bytes: FloatArray = field(default_factory=lambda: np.zeros(0))
    wgrad_stream_bytes: FloatArray = field(default_factory=lambda: np.zeros(0))
    # DRAM round trips a GPU kernel makes one after another, each waiting for the last (0: none; its loads overlap)
    dependent_round_trips: FloatArray = field(default_factory=lambda: np.zeros(0))
    # a gather's index -> row chain: output elements whose indices share one DRAM sector of the index array (0: no
    # chain). A grid-stride loop's elements in flight / this = the cold index sectors it meets per iteration; it waits
    # a DRAM round trip for them (at most one: fetched together) before its row loads issue (memory_time.in_flight_time)
    index_sector_elements: FloatArray = field(default_factory=lambda: np.zeros(0))
    # LLC round trips a GPU kernel makes one after another after its stream, each load waiting on the last store
    # (layer norm's normalize loop: docs/model.md, "Small-kernel floors per device and layer norm's ..."); 0: none
    llc_round_trips: FloatArray = field(default_factory=lambda: np.zeros(0))
    # fp32 instructions a GPU kernel's threads issue between their own loads (a serial reduction's per-element
    # update): a thread computing holds no load in flight, so their time adds to the latency-bound stream (Little's
    # law), not to the bandwidth-bound one (docs/model.md, "Layer norm's Welford update between its loads"); 0: none
    fp32_instructions_between_loads: FloatArray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self) -> None:
        zeros = np.zeros(self.n)
        for name in ("threads", "bytes_per_thread", "threads_per_unit_cap", "scratchpad_bytes", "comm_bytes",
                     "comm_devices", "comm_devices_per_node", "serial_bytes", "nhwc_bytes", "conv_library",
                     "conv_gradient_share", "conv_direct", "dgrad_stream_bytes", "wgrad_stream_bytes",
                     "dependent_round_trips", "index_sector_elements", "llc_round_trips",
                     "fp32_instructions_between_loads"):
            if getattr(self, name).size == 0:
                setattr(self, name, zeros)
        if self.attention.size == 0:
            self.attention = np.zeros((self.n, len(ATTENTION_FIELDS)))
        for name in ("gemm_batch", "gemm_m", "gemm_n", "gemm_k", "gemm_simt_conv", "gemm_serial", "gemm_channels",
                     "gemm_b_bytes"):
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
            shape, dtype = (n, *first.shape[1:]), np.result_type(*arrays)
            if not any(values.any() for values in arrays):  # a field no part uses (comm_* of GEMMs): zeros
                return np.zeros(shape, dtype=dtype)
            out = np.empty(shape, dtype=dtype)
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
