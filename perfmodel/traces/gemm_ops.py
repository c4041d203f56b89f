"""A library GEMM kernel's op from its name and grid alone, where no framework op gives its shapes.

The name gives the block tile (``ampere_sgemm_128x64_nn``: 128 x 64; CUTLASS 3
``cutlass3x_sm100_tensorop_s64x256x32gemm_f8_f8_f32_f16_f16_64x256x128_...``: 64 x 256, K step 128) and the data
types (cuBLAS's precision letter, CUTLASS's ``<A>_<B>_<accumulator>_<C>_<D>`` after ``gemm``); the grid gives
the tiles: M <= tile M x grid.x and N <= tile N x grid.y (an upper bound: the edge tiles may be partly idle; a
persistent kernel whose blocks loop over several tiles would make it a lower bound). grid.z is a batch under a
batched op (``aten::bmm``, ``baddbmm``) and K slices (split-K) otherwise.

K is in neither the name nor the grid (deriving it from the measured time would be circular), so it is
*assumed*: K = sqrt(M x N) (a square-ish problem, the GEMM's geometric-mean dimension), at least one K step per
slice. Confidence "low"; the notes give the bound on M x N and say that K is assumed.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any

from perfmodel.traces.kernel_names import data_dtype, gemm_tile, kernel_family, math_dtype
from perfmodel.traces.records import KernelRecord

OpDict = dict[str, Any]
Inferred = tuple[OpDict, list[str], str, str]
TILE_GRID = "GEMM tile x grid"
BATCHED_OPS = ("aten::bmm", "aten::baddbmm", "aten::_bmm")
MAX_DIM = 1 << 24  # a tile x grid beyond this is not a GEMM dimension (hostile grid)
# CUTLASS type tokens -> perfmodel dtypes
_CUTLASS_TYPES = {"f8": "fp8_e4m3", "e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2", "bf16": "bf16", "f16": "fp16",
                  "tf32": "fp32", "f32": "fp32", "f64": "fp64", "s8": "int8", "i8": "int8"}
_CUTLASS = re.compile(r"gemm_(?P<a>[a-z0-9]+)_(?P<b>[a-z0-9]+)_(?P<acc>[a-z0-9]+)_(?P<c>[a-z0-9]+)_(?P<d>[a-z0-9]+)_",
                      re.IGNORECASE)
_CUTLASS2 = re.compile(r"tensorop_[a-z]?\d*gemm_(bf16|f16|e4m3|e5m2|s8|i8|tf32|f64)_", re.IGNORECASE)
_K_STEP = re.compile(r"_(\d{2,3})x(\d{2,3})x(\d{2,3})_")


def _types(name: str) -> tuple[str | None, str | None]:
    """(input dtype, output dtype) a GEMM kernel's name gives (CUTLASS's type list, else ``data_dtype``)."""
    cutlass = _CUTLASS.search(name[:512])
    if cutlass is not None and cutlass.group("a").lower() in _CUTLASS_TYPES:
        a = _CUTLASS_TYPES[cutlass.group("a").lower()]
        d = _CUTLASS_TYPES.get(cutlass.group("d").lower())
        return a, d if d != a else None
    cutlass2 = _CUTLASS2.search(name[:512])
    if cutlass2 is not None:  # CUTLASS 2 ``tensorop_s1688gemm_f16_<tile>``: the input type after ``gemm_``
        return _CUTLASS_TYPES[cutlass2.group(1).lower()], None
    named = data_dtype(name)
    if named is None and math_dtype(name) == "tf32":  # CUTLASS ``tensorop_s1688gemm_<tile>``: fp32 data, TF32 math
        return "fp32", None
    return named, None


@functools.lru_cache(maxsize=4096)  # a trace repeats a few hundred kernel names over millions of launches
def _name_parts(name: str) -> tuple[tuple[int, int], str, str | None, int, bool] | None:
    """(tile, input dtype, output dtype, K step, TF32 math) of a GEMM kernel's name; None where it is not one or
    names no tile or data type."""
    if kernel_family(name) != "gemm":
        return None
    tile = gemm_tile(name)
    dtype, out_dtype = _types(name)
    if tile is None or dtype is None:
        return None
    step = _K_STEP.search(name[:512])
    return tile, dtype, out_dtype, int(step.group(3)) if step else 1, math_dtype(name) == "tf32"


def tile_grid_op(kernel: KernelRecord) -> Inferred | None:
    """The matmul of a GEMM kernel sized by its name's tile and its grid, K assumed (module docstring); None
    where the kernel is not a GEMM, names no tile or data type, or has no grid."""
    parts = None if kernel.grid is None else _name_parts(kernel.name)
    if parts is None or kernel.grid is None:
        return None
    tile, dtype, out_dtype, k_step, tf32 = parts
    x, y, z = kernel.grid
    m, n = tile[0] * x, tile[1] * y
    if min(m, n, z) <= 0 or max(m, n, z) > MAX_DIM:
        return None
    caller = kernel.ops[-1].name if kernel.ops else ""
    batched = caller in BATCHED_OPS
    k = max(math.isqrt(m * n), k_step * (1 if batched else z))
    op: OpDict = {"kind": "matmul", "m": m, "n": n, "k": k, "dtype": dtype, "batch": z if batched else 1}
    if out_dtype is not None:
        op["out_dtype"] = out_dtype
    if tf32 and dtype == "fp32":
        op["compute_dtype"] = "tf32"
    notes = [f"GEMM by kernel name and grid: tile {tile[0]}x{tile[1]} x grid ({x}, {y}, {z}) gives M <= {m}, "
             f"N <= {n} (edge tiles may be partly idle)",
             f"K is not in the file: assumed sqrt(M x N) = {k} (a guess, not a bound)"]
    if z > 1:
        notes.append(f"grid.z {z}: {'the batch of ' + caller if batched else 'K split in ' + str(z) + ' slices'}")
    return op, notes, TILE_GRID, "low"
