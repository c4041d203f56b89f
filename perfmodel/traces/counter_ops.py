"""A kernel's op from its own profiler counters, where no framework op or kernel name gives its work.

Nsight Compute (``dram__bytes.sum``, ``sm__sass_thread_inst_executed_op_{f,d,h}{add,mul,fma}_pred_on.sum``)
and rocprof / rocprofv3 (``FETCH_SIZE`` + ``WRITE_SIZE``, VALU instructions) count what a kernel moved to and
from device memory and the SIMT FLOPs it ran, per dtype (``records.KernelRecord.counters``: ``dram_bytes``,
``flops_fp32``...). A kernel that moved no DRAM byte (its data stayed in L2) is sized by the L1/TEX bytes
its threads requested (``l1_bytes``). That measured work is a streaming op: an ``elementwise`` of its DRAM
bytes (read half, write half) running its counted FLOPs at the dtype that counted most of them. The time is not
used: the counters are work, not a rate, so nothing is circular.

Limits, said in the notes: DRAM bytes are what missed the last-level cache (an L2-resident operand moves
fewer); tensor-core (matrix) instructions are not FLOPs in these counters, so a kernel that ran them is
modelled by its bytes and SIMT FLOPs only (a lower bound on its work, confidence "low").
"""

from __future__ import annotations

from typing import Any

from perfmodel.traces.records import KernelRecord

OpDict = dict[str, Any]
Inferred = tuple[OpDict, list[str], str, str]
COUNTERS = "counters"
# counted SIMT FLOPs -> the dtype they ran at, and that dtype's bytes per element
_FLOP_DTYPES = (("flops_fp32", "fp32", 4), ("flops_fp16", "fp16", 2), ("flops_fp64", "fp64", 8))
_MATRIX_KEYS = ("tensor_inst", "matrix_flops_fp16", "matrix_flops_bf16", "matrix_flops_fp32",
                "matrix_flops_fp64", "matrix_flops_fp8", "matrix_flops_int8")
MIN_BYTES = 1.0  # a kernel that moved no byte has no streaming work to model


def counter_op(kernel: KernelRecord) -> Inferred | None:
    """The measured-work op of a kernel with a DRAM byte counter (L1/TEX bytes where DRAM moved none), else None."""
    counters = kernel.counters
    moved, level = float(counters.get("dram_bytes", 0.0)), "DRAM"
    if moved < MIN_BYTES:  # no DRAM traffic: its data stayed in the caches; size it by what its threads asked
        moved, level = float(counters.get("l1_bytes", 0.0)), "L1/TEX (no DRAM traffic: cache-resident)"
    if moved < MIN_BYTES:
        return None
    flops = {dtype: (float(counters.get(key, 0.0)), size) for key, dtype, size in _FLOP_DTYPES}
    total_flops = sum(value for value, _ in flops.values())
    dtype, (top_flops, size) = max(flops.items(), key=lambda item: item[1][0])
    notes = [f"measured work from its counters: {moved:.4g} {level} bytes (read half, write half)"]
    if top_flops <= 0:
        dtype, size = "int8", 1
    else:
        notes.append(f"{total_flops:.4g} counted SIMT FLOPs, at {dtype} (the dtype that counted most)")
    elements = max(int(moved / (2 * size)), 1)
    op: OpDict = {"kind": "elementwise", "shape": [elements], "dtype": dtype, "inputs": 1, "outputs": 1,
                  "flops_per_element": total_flops / elements}
    matrix = any(float(counters.get(key, 0.0)) > 0 for key in _MATRIX_KEYS)
    if matrix:
        notes.append("matrix (tensor-core) instructions counted but not modelled: its bytes and SIMT FLOPs only, "
                     "a lower bound")
    return op, notes, COUNTERS, "low" if matrix else "medium"
