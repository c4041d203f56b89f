"""A kernel's op from its launch geometry alone: the last source, for kernels no library rule names.

The issue's rule: grid and block sizes bound the problem (elementwise: elements ~ grid x block x items per
thread). A hand-written or compiler-generated kernel whose name no rule recognises (``kernel_names.kernel_family``
is None) but whose grid and block the file records becomes a streaming op over one element per launched thread:

- element type: the pointer arguments of its demangled signature (``double const*``: fp64), else the element type
  of its template arguments, else fp32 (said in a note);
- reads: its pointer-to-const arguments, writes: its other pointer arguments (a signature without pointers, or a
  name without a signature: one read and one write assumed; pointers none of them const, in a kernel not named
  for a fill: each read and written, as where the inputs come in a struct of pointers);
- a kernel named for a reduction (``norm``, ``reduce``, ``dot``, ``sum``) reads its arrays and writes at most
  one partial result per block: a ``reduce`` over each block's threads (one input array), else a stream of reads;
- a compiler-generated offload region (OpenMP / OpenACC): its grid is the runtime's team count, which the runtime
  caps (LLVM's AMDGPU plugin: a few teams per compute unit) and strides the loop over: its trip count is at least
  the launched threads, so the op is a lower bound of its work and its predicted time a floor.

Everything here is assumed from the launch: source ``launch geometry``, confidence ``low``, scored on its own.
Also: whether a file carries any work per launch at all (``no_launch_work``), for the report's first line."""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from perfmodel.traces.kernel_names import cpp_dtype, kernel_family, offload_region
from perfmodel.traces.records import DEVICE_TIME_CATEGORIES, KernelRecord

GEOMETRY = "launch geometry"
Inferred = tuple[dict[str, Any], list[str], str, str]

# pointee type -> perfmodel dtype (the C spellings a demangler writes)
POINTER_DTYPES = {"double": "fp64", "float": "fp32", "int": "int32", "unsigned int": "int32", "long": "int64",
                  "unsigned long": "int64", "long long": "int64", "half": "fp16", "__half": "fp16",
                  "__nv_bfloat16": "bf16", "hip_bfloat16": "bf16", "char": "int8", "unsigned char": "int8",
                  "signed char": "int8", "bool": "int8", "short": "int16", "c10::Half": "fp16",
                  "c10::BFloat16": "bf16"}
# a word starting with norm / reduc / dot / sum: lower case after no lower-case letter, or capitalised (camelCase)
_REDUCTION = re.compile(r"(?<![a-z])(?:norm|reduc|dot|sum)|Norm|Reduc|Dot|Sum")
_CONST = re.compile(r"\bconst\b")
_FILL = re.compile(r"fill|zero|memset|init|clear", re.IGNORECASE)  # kernels that write without reading
# a vendor library's kernels (cuDNN's ``cask_cudnn::`` / ``cudnn::ops::`` helpers, ...): their launch is the
# library's choice over a problem the name does not give, so no element-per-thread guess for them
_LIBRARY = re.compile(r"cudnn|cask|cublas|cutlass|cutensor|cufft|miopen|rocblas|hipblas|rocfft|xmma|nccl|rccl",
                      re.IGNORECASE)


def signature_args(name: str) -> list[str] | None:
    """The top-level arguments of a demangled name's last parenthesised list (``f<T>(int, float const*)`` ->
    ['int', 'float const*']), None where the name does not end in one."""
    text = name.rstrip()
    if not text.endswith(")"):
        return None
    depth, start = 0, -1
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            start = i
            break
    if start <= 0:
        return None
    args: list[str] = []
    current: list[str] = []
    level = 0
    for ch in text[start + 1:-1]:
        level += {"<": 1, "(": 1, "[": 1, ">": -1, ")": -1, "]": -1}.get(ch, 0)
        if ch == "," and level == 0:
            args.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    last = "".join(current).strip()
    return [*args, last] if last or args else []


def _pointee(arg: str) -> tuple[str, bool] | None:
    """(pointee type, read-only) of a pointer argument (``double const*``, ``const float *``, ``float* const``),
    None for any other argument."""
    if not arg.endswith("*") and not re.search(r"\*\s*(?:const\s*)?(?:__restrict__\s*)?$", arg):
        return None
    head = arg[:arg.rfind("*")].rstrip("* ").strip()  # the pointee: what precedes the last '*'
    if "*" in head:  # a pointer to pointers (an array of arrays): its element type is not one stream's
        return None
    readonly = bool(_CONST.search(head))
    base = _CONST.sub("", head.replace("__restrict__", "")).strip()
    return " ".join(base.split()), readonly


@functools.lru_cache(maxsize=4096)
def _streams(name: str) -> tuple[str | None, int, int, bool]:
    """(element type or None, arrays read, arrays written, signature had pointers) from a kernel's signature."""
    args = signature_args(name) or []
    pointers = [p for p in (_pointee(a) for a in args) if p is not None]
    # the arrays read are the data streamed (a histogram's ``int*`` bins are not): their type first
    known = [POINTER_DTYPES[t] for t, readonly in pointers if readonly and t in POINTER_DTYPES] or [
        POINTER_DTYPES[t] for t, _ in pointers if t in POINTER_DTYPES]
    dtype = Counter(known).most_common(1)[0][0] if known else cpp_dtype(name) if "<" in name else None
    reads = sum(1 for _, readonly in pointers if readonly)
    return dtype, reads, len(pointers) - reads, bool(pointers)


def geometry_op(kernel: KernelRecord) -> Inferred | None:
    """The op of a kernel sized by its launch (module docstring), None where the name is a library kernel's or
    the launch is not recorded."""
    if kernel.category != "kernel" or kernel.grid is None or kernel.block is None:
        return None
    region = offload_region(kernel.name)
    if region is None and (kernel_family(kernel.name) is not None or _LIBRARY.search(kernel.name[:512])):
        return None
    blocks, threads = math.prod(kernel.grid), math.prod(kernel.block)
    if blocks <= 0 or threads <= 0:
        return None
    elements = blocks * threads
    dtype, reads, writes, typed = _streams(kernel.name)
    notes = [f"sized by its launch: {blocks:,} blocks x {threads} threads = {elements:,} elements, one per thread "
             "(a grid-stride loop would do more)"]
    if region is not None:
        notes[0] = (f"offload region {region[0]} (line {region[1]}) sized by its launch: {elements:,} work-items; "
                    "the runtime caps its teams and strides the loop over them, so the trip count is at least this: "
                    "a lower bound of its work, its predicted time a floor")
    if dtype is None:
        dtype = "fp32"
        notes.append("element type not in the name: fp32 assumed")
    if not typed:
        reads, writes = 1, 1
        notes.append("no pointer arguments in the name: one array read and one written assumed")
    elif reads == 0 and _FILL.search(kernel.name[:512]) is None:
        reads = writes  # nothing declared const (or its inputs passed in a struct): what it writes, it reads
        notes.append(f"no pointer-to-const argument: its {writes} pointer(s) assumed read and written")
    else:
        notes.append(f"{reads} pointer-to-const argument(s) read, {writes} other pointer(s) written")
    if _REDUCTION.search(kernel.name[:512]) is not None:
        notes.append("a reduction by name: its arrays read, at most one partial result per block written")
        op: dict[str, Any]
        if max(reads, 1) == 1:
            op = {"kind": "reduce", "shape": [blocks, threads], "axes": [1], "dtype": dtype, "op": "sum"}
        else:
            op = {"kind": "elementwise", "shape": [elements], "dtype": dtype, "inputs": reads, "outputs": 0,
                  "flops_per_element": float(reads)}
        return op, notes, GEOMETRY, "low"
    if reads + writes == 0:
        return None
    stream: dict[str, Any] = {"kind": "elementwise", "shape": [elements], "dtype": dtype, "inputs": reads,
                              "outputs": writes, "flops_per_element": 1.0 if reads + writes > 2 else 0.0}
    return stream, notes, GEOMETRY, "low"


def _has_work(kernel: KernelRecord) -> bool:
    """Whether a device record carries anything that sizes its work: a launch, shapes, counters, bytes, a
    collective's arguments."""
    return bool(kernel.grid is not None or kernel.ops or kernel.counters or kernel.input_dims
                or kernel.collective is not None or (kernel.transfer_bytes or 0) > 0)


def no_launch_work(kernels: Sequence[KernelRecord], file_format: str) -> str | None:
    """Why nothing of a file can be modelled where none of its timed device records carries work (a summary of
    names, calls and durations: ``nsys stats cuda_gpu_kern_sum``, rocprofv3 ``kernel_stats.csv``); None where
    some record does, or where there is no device time."""
    timed = [k for k in kernels if k.category in DEVICE_TIME_CATEGORIES and k.duration_s > 0]
    if not timed or any(_has_work(k) for k in timed):
        return None
    launches = sum(k.instances for k in timed)
    typed = any(_streams(k.name)[3] for k in timed)
    names = (" Its names give argument and element types, not counts." if typed else "")
    return (f"NO WORK PER LAUNCH: this {file_format} file gives {len(timed):,} kernel name(s), {launches:,} launches "
            "and their durations only: no launch grid, no shapes, no counters, no byte counts. No tool can size a "
            f"kernel from it, so none of its device time can be modelled.{names} Profile with a per-dispatch trace "
            "(nsys cuda_gpu_trace, rocprofv3 --kernel-trace) to get each launch's grid.")
