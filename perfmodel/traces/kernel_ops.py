"""A device activity's op from the activity alone, where no framework op gives its shapes.

- memcpy / memset with their recorded bytes: an on-device copy is a read and a write of every byte (``reshape``,
  non-contiguous), a fill one write (``elementwise`` with no input), a host transfer (HtoD / DtoH, pinned or
  pageable) a ``hostcopy`` over the device's host link (PCIe, NVLink-C2C); a peer copy stays unmatched.
- elementwise and copy kernels from grid x block: PyTorch's ``vectorized_elementwise_kernel<vec, ...>`` and
  ``unrolled_elementwise_kernel`` give each of their 128 threads per block 4 elements
  (``block_work_size = num_threads * thread_work_size``), the legacy ``elementwise_kernel<nt, vt, ...>``
  ``nt * vt`` per block; the tensor count is ``Array<char*, N>`` (N - 1 inputs, one output); a plain kernel
  named for a streaming op (``vecCopy(double*, ...)``, ``addition_kernel<float>(float*, float const*, ...)``) one
  element of its pointer type per thread. The element count is an upper
  bound (the last block may be partly idle): confidence "medium"/"low".
- foreach / fused optimizer kernels (``multi_tensor_apply_kernel<TensorListMetadata<D>, Functor>``, PyTorch's and
  apex's): each block handles one chunk of 65,536 elements (``kChunkSize``) of the parameter list, over D tensor
  lists; an optimizer functor (Adam, LAMB, SGD, Adagrad) writes all lists but the gradient, others write one.
Each result: (op dict, notes, source, confidence).
"""

from __future__ import annotations

import math
import re
from typing import Any

from perfmodel.dtypes import DType
from perfmodel.traces.aten_args import TORCH_DTYPES
from perfmodel.traces.kernel_names import cpp_dtype
from perfmodel.traces.records import KernelRecord

OpDict = dict[str, Any]
Inferred = tuple[OpDict, list[str], str, str]
PYTORCH_THREAD_WORK = 4  # elements per thread of PyTorch's vectorized/unrolled elementwise kernels

_VECTORIZED = re.compile(r"(?:vectorized|unrolled)_elementwise_kernel<")
_LEGACY = re.compile(r"\belementwise_kernel<(\d+), (\d+),")
_TENSORS = re.compile(r"Array<char\s?\*, (\d+)>")
# a plain (hand-written HIP/CUDA) kernel: ``[void ][namespaces::]name[<T>](pointer and scalar arguments)``
_PLAIN = re.compile(r"^(?:void )?(?:[\w<>]+::)*(\w+)(?:<[\w: ]+>)?\(([^()]*)\)")
_IN_PLACE = re.compile(r"axpy", re.IGNORECASE)  # BLAS axpy: y = a*x + y, its output also read
_PLAIN_OPS = re.compile(r"copy|add|addition|sub|subtract|mul|multiply|div|divide|scale|axpy|triad", re.IGNORECASE)
_POINTER = re.compile(r"^(const )?(\w+)( const)?\s?\*$")
_POINTER_DTYPES = {"double": "fp64", "float": "fp32", "int": "int32", "long": "int64", "half": "fp16",
                   "__half": "fp16", "char": "int8"}
HOST_TRANSFER = "host transfer"
CHUNK_ELEMENTS = 65536  # multi_tensor_apply's kChunkSize (PyTorch) / chunk_size (apex): elements per block
_MULTI_TENSOR = re.compile(r"multi_tensor_apply_kernel<[\w:() ]*?TensorListMetadata<(\d+)>")
_OPTIMIZER = re.compile(r"adam|lamb|sgd|adagrad|momentum", re.IGNORECASE)


def transfer_direction(name: str) -> str:
    """'h2d', 'd2h', 'd2d', 'p2p' or 'memset' from a Kineto/CUPTI memcpy or memset name."""
    lowered = name.lower()
    for token, direction in (("htod", "h2d"), ("dtoh", "d2h"), ("dtod", "d2d"), ("ptop", "p2p"),
                             ("memset", "memset"), ("host -> device", "h2d"), ("device -> host", "d2h"),
                             ("device -> device", "d2d"), ("host-to-device", "h2d"), ("device-to-host", "d2h"),
                             ("device-to-device", "d2d"), ("peer-to-peer", "p2p")):
        if token in lowered:
            return direction
    return "unknown"


def copy_op(kernel: KernelRecord) -> Inferred | tuple[str, str]:
    """The op of a memcpy/memset record, or (reason, category) where it has none."""
    direction = transfer_direction(kernel.name)
    size = kernel.transfer_bytes
    sized_by_op = False
    if (size is None or size <= 0) and kernel.category == "memcpy":
        size = _copy_op_bytes(kernel)
        sized_by_op = size is not None
    if direction == "p2p":
        return "peer-to-peer memcpy: the peer's link is not known from the record", HOST_TRANSFER
    if size is None or size <= 0:
        return f"{kernel.category} without its byte count", "size not recorded"
    if direction in ("h2d", "d2h"):
        pageable = "pageable" in kernel.name.lower()
        notes = [f"{direction} memcpy over the host link (PCIe / NVLink-C2C) of its recorded bytes"]
        if sized_by_op:
            notes[0] = (f"{direction} memcpy over the host link (PCIe / NVLink-C2C); no byte count recorded: "
                        f"{size} bytes, the source tensor of its {kernel.ops[-1].name}")
        if pageable:
            notes.append("pageable host memory: staged by a host copy into the driver's pinned buffer, pipelined "
                         "with the link: the slower of the two sets the rate")
        return ({"kind": "hostcopy", "bytes": size, "direction": direction, "pageable": pageable}, notes,
                "memcpy/memset", "medium" if pageable or sized_by_op else "high")
    if direction == "memset" or kernel.category == "memset":
        return ({"kind": "elementwise", "shape": [size], "dtype": "int8", "inputs": 0, "outputs": 1,
                 "flops_per_element": 0.0}, ["memset: one write of its recorded bytes"], "memcpy/memset", "high")
    if direction == "d2d":
        return ({"kind": "reshape", "shape": [size], "new_shape": [size], "dtype": "int8", "contiguous": False},
                ["device-to-device memcpy: a read and a write of its recorded bytes"], "memcpy/memset", "high")
    return f"memcpy of unknown direction ({kernel.name[:60]})", HOST_TRANSFER


_COPY_OPS = ("aten::copy_", "aten::_to_copy", "aten::to", "aten::_copy_from")


def _copy_op_bytes(kernel: KernelRecord) -> int | None:
    """A memcpy's bytes from the copy op that launched it (``aten::copy_(self, src)``: the source tensor, the
    last tensor argument with a shape and a known dtype), where the record has no byte count (ROCm's Kineto)."""
    call = next((c for c in reversed(kernel.ops) if c.name in _COPY_OPS and c.input_dims), None)
    if call is None or call.input_dims is None or call.input_types is None:
        return None
    index = 1 if call.name in ("aten::copy_", "aten::_copy_from") else 0  # copy_(self, src); _to_copy(self, ...)
    if index >= len(call.input_dims) or index >= len(call.input_types):
        return None
    shape, type_name = call.input_dims[index], call.input_types[index]
    if not shape or type_name not in TORCH_DTYPES:
        return None
    return int(math.prod(shape) * DType(TORCH_DTYPES[type_name]).bytes)


def grid_op(kernel: KernelRecord) -> Inferred | None:
    """An elementwise or copy kernel's op from its grid and block, None where the name is not one of them."""
    if kernel.grid is None or kernel.block is None:
        return None
    blocks = kernel.grid[0] * kernel.grid[1] * kernel.grid[2]
    threads = kernel.block[0] * kernel.block[1] * kernel.block[2]
    if blocks <= 0 or threads <= 0:
        return None
    name = kernel.name
    lists = _MULTI_TENSOR.search(name)
    if lists:
        return _multi_tensor(name, int(lists.group(1)), blocks)
    legacy = _LEGACY.search(name)
    if _VECTORIZED.search(name) or legacy:
        per_block = int(legacy.group(1)) * int(legacy.group(2)) if legacy else threads * PYTORCH_THREAD_WORK
        tensors = _TENSORS.search(name)
        count = int(tensors.group(1)) if tensors else 2
        dtype = cpp_dtype(name)
        notes = ["elementwise kernel sized by grid x block x items per thread: an upper bound"]
        if dtype is None:
            dtype = "fp32"
            notes.append("element type not in the kernel name: fp32 assumed")
        op = {"kind": "elementwise", "shape": [blocks * per_block], "dtype": dtype, "inputs": max(count - 1, 0),
              "outputs": 1, "flops_per_element": 1.0 if count > 2 else 0.0}
        return op, notes, "grid/block", "medium" if tensors and dtype else "low"
    return _plain_kernel(name, blocks * threads)


def plain_kernel_name(name: str) -> str | None:
    """The op word of a hand-written streaming kernel's name (``saxpyKernel`` of ``ns::saxpyKernel(float, ...)``),
    None where the name is not one."""
    plain = _PLAIN.match(name)
    return plain.group(1) if plain is not None and _PLAIN_OPS.search(plain.group(1)) else None


def _plain_kernel(name: str, elements: int) -> Inferred | None:
    """A hand-written streaming kernel named for what it does (``vecCopy(double*, ...)``,
    ``addition_kernel<float>(float*, float const*, float const*, int, int)``): one element per thread; const
    pointers are read, the others written (a copy: one read, one write)."""
    plain = _PLAIN.match(name)
    if plain is None or not _PLAIN_OPS.search(plain.group(1)):
        return None
    pointers = [m for m in (_POINTER.match(a.strip()) for a in plain.group(2).split(",")) if m]
    types = {m.group(2) for m in pointers}
    if not pointers or len(types) != 1 or next(iter(types)) not in _POINTER_DTYPES:
        return None
    dtype = _POINTER_DTYPES[next(iter(types))]
    if "copy" in plain.group(1).lower():
        return ({"kind": "reshape", "shape": [elements], "new_shape": [elements], "dtype": dtype,
                 "contiguous": False},
                [f"a copy kernel by name: one {dtype} element per thread of its grid"], "grid/block", "low")
    reads = sum(1 for m in pointers if m.group(1) or m.group(3))
    writes = len(pointers) - reads
    if reads == 0 or writes == 0:
        return None
    note = (f"{plain.group(1)} by name: one {dtype} element per thread of its grid, const pointers read, the others "
            "written")
    if _IN_PLACE.search(plain.group(1)):
        reads += writes
        note += " (axpy updates y in place: y is read too)"
    return ({"kind": "elementwise", "shape": [elements], "dtype": dtype, "inputs": reads, "outputs": writes,
             "flops_per_element": 2.0 if _IN_PLACE.search(plain.group(1)) else 1.0}, [note], "grid/block", "low")


def _multi_tensor(name: str, depth: int, blocks: int) -> Inferred:
    """A foreach / fused optimizer kernel over ``depth`` tensor lists, one 65,536-element chunk per block."""
    dtype = cpp_dtype(name) or "fp32"
    outputs = max(depth - 1, 1) if _OPTIMIZER.search(name) else 1
    elements = blocks * CHUNK_ELEMENTS
    op = {"kind": "elementwise", "shape": [elements], "dtype": dtype, "inputs": depth, "outputs": outputs,
          "flops_per_element": 2.0 * depth}
    notes = [f"multi_tensor_apply sized by grid x {CHUNK_ELEMENTS}-element chunks over {depth} tensor lists: an "
             "upper bound (each tensor's last chunk may be partial)"]
    return op, notes, "grid/block", "low"
