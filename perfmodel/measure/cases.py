"""The ops the host suite times: torch calls on the CPU, each with the perfmodel op it corresponds to.

Every case names the modelled op kind (``docs/ops.md``) and the top-level ``aten::`` op the
PyTorch profiler records for it (what a trace-to-op mapper sees).

No case writes an output above 48 MiB: above glibc's mmap threshold (32 MiB at most) each call's
output is a fresh mapping whose page faults cost what the VM's memory path costs at that
moment (0.2-4 GB/s seen on the same host within minutes), which no kernel model can predict;
the outputs from 32 to 48 MiB still carry that cost (modelled as first-touch bandwidth).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

Runner = Callable[[], object]

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class SuiteCase:
    """One op instance: ``make()`` allocates its tensors and returns the call to time."""

    name: str
    op: dict[str, Any]  # the perfmodel op (kind + fields)
    aten: str  # the top-level aten op the profiler records
    make: Callable[[], Runner]
    cost_s: float  # rough time of one call, only to pick the quick subset and the repeats
    alloc_bytes: float = 0.0  # what ``make`` allocates beyond the call's own traffic (gather tables)


def _rand(shape: tuple[int, ...], dtype: str) -> torch.Tensor:
    return torch.randn(shape).to(TORCH_DTYPES[dtype])


def _estimate_s(flops: float, moved_bytes: float) -> float:
    return flops / 1.0e11 + moved_bytes / 2.0e10 + 5e-6


def _matmuls() -> Iterator[SuiteCase]:
    shapes = [(s, s, s) for s in (64, 128, 256, 384, 512, 768, 1024, 1536, 2048)]
    shapes += [(m, n, k) for m in (1, 8, 32, 128) for n, k in ((1024, 1024), (1024, 4096), (4096, 1024),
                                                               (2048, 2048))]
    for dtype in ("fp32", "bf16"):
        for m, n, k in shapes:
            def make(m: int = m, n: int = n, k: int = k, dtype: str = dtype) -> Runner:
                a, b = _rand((m, k), dtype), _rand((k, n), dtype)
                return lambda: torch.mm(a, b)
            size = 2 if dtype == "bf16" else 4
            yield SuiteCase(f"mm {m}x{n}x{k} {dtype}", {"kind": "matmul", "m": m, "n": n, "k": k, "dtype": dtype},
                            "aten::mm", make, _estimate_s(2.0 * m * n * k, size * (m * k + k * n + m * n)))


_ELEMENTWISE: dict[str, tuple[Callable[..., torch.Tensor], int, float, float]] = {
    # name: (call, inputs, flops per element, transcendentals per element)
    "add": (torch.add, 2, 1.0, 0.0),
    "mul": (torch.mul, 2, 1.0, 0.0),
    "gelu": (F.gelu, 1, 6.0, 1.0),  # 0.5·x·(1 + erf(x/√2)): erf counted as one transcendental
    "silu": (F.silu, 1, 3.0, 1.0),  # x / (1 + exp(-x))
}


def spread_shapes(count: int, low_elements: float, high_elements: float) -> tuple[tuple[int, int], ...]:
    """``count`` 2-D shapes whose sizes are log-spaced from ``low_elements`` to ``high_elements``
    (rows of 256-4096 elements in turn, so row length varies too): enough distinct shapes per class
    for the calibration's ramp and local correction (12 fitted shapes) to follow the step from
    cache-resident to DRAM-bound sizes."""
    widths = (1024, 256, 4096, 512, 2048)
    out: list[tuple[int, int]] = []
    for i, elements in enumerate(np.geomspace(low_elements, high_elements, count)):
        width = widths[i % len(widths)]
        out.append((max(1, round(float(elements) / width)), width))
    return tuple(dict.fromkeys(out))


# elementwise and row classes: 16 K elements to a 48 MiB (fp32) / 32 MiB (bf16) output
SPREAD = {"fp32": spread_shapes(26, 2**14, 12 * 2**20), "bf16": spread_shapes(26, 2**14, 16 * 2**20)}


def _elementwise() -> Iterator[SuiteCase]:
    for dtype, shapes in SPREAD.items():
        for shape in shapes:
            for name, (fn, inputs, flops, trans) in _ELEMENTWISE.items():
                def make(shape: tuple[int, ...] = shape, dtype: str = dtype, fn: Callable[..., torch.Tensor] = fn,
                         inputs: int = inputs) -> Runner:
                    args = [_rand(shape, dtype) for _ in range(inputs)]
                    return lambda: fn(*args)
                elements = shape[0] * shape[1]
                op = {"kind": "elementwise", "shape": list(shape), "dtype": dtype, "inputs": inputs, "outputs": 1,
                      "flops_per_element": flops, "transcendentals_per_element": trans}
                yield SuiteCase(f"{name} {shape} {dtype}", op, f"aten::{name}", make,
                                _estimate_s(elements * flops, elements * 4 * (inputs + 1)))


def _rows(kind: str, aten: str, shapes: dict[str, tuple[tuple[int, int], ...]],
          call: Callable[[torch.Tensor], object], extra: dict[str, Any] | None = None) -> Iterator[SuiteCase]:
    for dtype, dtype_shapes in shapes.items():
        for shape in dtype_shapes:
            def make(shape: tuple[int, int] = shape, dtype: str = dtype) -> Runner:
                x = _rand(shape, dtype)
                return lambda: call(x)
            op = {"kind": kind, "shape": list(shape), "dtype": dtype, **(extra or {})}
            elements = shape[0] * shape[1]
            yield SuiteCase(f"{aten.removeprefix('aten::')} {shape} {dtype}", op, aten, make,
                            _estimate_s(8.0 * elements, 8.0 * elements))


def _norms_and_layout() -> Iterator[SuiteCase]:
    yield from _rows("softmax", "aten::softmax", SPREAD, lambda x: torch.softmax(x, dim=-1))
    yield from _rows("layernorm", "aten::layer_norm", SPREAD, lambda x: F.layer_norm(x, (x.shape[-1],)))
    yield from _rows("transpose", "aten::contiguous", {
        "fp32": spread_shapes(26, 2**14, 8 * 2**20), "bf16": spread_shapes(26, 2**14, 8 * 2**20)},
        lambda x: x.transpose(0, 1).contiguous(), {"perm": [1, 0]})
    for op_name in ("sum", "mean"):
        yield from _rows("reduce", f"aten::{op_name}", SPREAD,
                         (lambda x: x.sum(dim=-1)) if op_name == "sum" else (lambda x: x.mean(dim=-1)),
                         {"axes": [1], "op": op_name})
    yield from _rows("reduce", "aten::sum", {"fp32": ((2048, 2048), (8192, 4096))}, lambda x: x.sum(),
                     {"axes": [0, 1], "op": "sum"})


def _gathers() -> Iterator[SuiteCase]:
    tables = ((8192, 256), (50000, 768), (32000, 1024))
    for rows, dim in tables:
        for count in (64, 256, 1024, 4096, 8192):
            for kind, aten in (("embedding", "aten::embedding"), ("gather", "aten::index_select")):
                if kind == "gather" and count == 1024:
                    continue
                def make(rows: int = rows, dim: int = dim, count: int = count, kind: str = kind) -> Runner:
                    table = torch.randn(rows, dim)
                    index = torch.randint(0, rows, (count,))
                    if kind == "embedding":
                        return lambda: F.embedding(index, table)
                    return lambda: torch.index_select(table, 0, index)
                op = {"kind": kind, "table_shape": [rows, dim], "num_indices": count, "dtype": "fp32"}
                yield SuiteCase(f"{aten.removeprefix('aten::')} {rows}x{dim}[{count}]", op, aten, make,
                                _estimate_s(0.0, 8.0 * count * dim), alloc_bytes=4.0 * rows * dim)


# (batch, in, out, height/width, kernel, stride, padding, dtype)
_CONVS = ((1, 64, 64, 56, 3, 1, 1, "fp32"), (1, 128, 128, 28, 3, 1, 1, "fp32"), (1, 256, 256, 14, 3, 1, 1, "fp32"),
          (1, 512, 512, 7, 3, 1, 1, "fp32"), (8, 64, 64, 56, 1, 1, 0, "fp32"), (1, 3, 64, 224, 7, 2, 3, "fp32"),
          (4, 32, 64, 64, 3, 1, 1, "fp32"), (1, 64, 256, 56, 1, 1, 0, "fp32"), (1, 64, 64, 56, 3, 1, 1, "bf16"),
          (1, 256, 256, 14, 3, 1, 1, "bf16"), (8, 64, 64, 56, 1, 1, 0, "bf16"))


def _convs() -> Iterator[SuiteCase]:
    for batch, cin, cout, hw, kernel, stride, pad, dtype in _CONVS:
        def make(batch: int = batch, cin: int = cin, cout: int = cout, hw: int = hw, kernel: int = kernel,
                 stride: int = stride, pad: int = pad, dtype: str = dtype) -> Runner:
            x, w = _rand((batch, cin, hw, hw), dtype), _rand((cout, cin, kernel, kernel), dtype)
            return lambda: F.conv2d(x, w, stride=stride, padding=pad)
        op = {"kind": "conv2d", "batch": batch, "in_channels": cin, "out_channels": cout, "height": hw, "width": hw,
              "kernel_h": kernel, "kernel_w": kernel, "stride": stride, "padding": pad, "dtype": dtype}
        out_hw = (hw + 2 * pad - kernel) // stride + 1
        flops = 2.0 * batch * cout * out_hw * out_hw * cin * kernel * kernel
        yield SuiteCase(f"conv2d {batch}x{cin}x{hw}x{hw} k{kernel} -> {cout} {dtype}", op, "aten::conv2d", make,
                        _estimate_s(flops, 4.0 * (batch * cin * hw * hw + cout * cin * kernel * kernel)))


def suite_cases(quick: bool = False) -> list[SuiteCase]:
    """Every case (~560); ``quick``: the cheapest two of each aten op (a few dozen, well under a second)."""
    cases = [*_matmuls(), *_elementwise(), *_norms_and_layout(), *_gathers(), *_convs()]
    if not quick:
        return cases
    kept: list[SuiteCase] = []
    for aten in dict.fromkeys(c.aten for c in cases):
        kept += sorted((c for c in cases if c.aten == aten), key=lambda c: c.cost_s + c.alloc_bytes / 1e9)[:2]
    return kept
