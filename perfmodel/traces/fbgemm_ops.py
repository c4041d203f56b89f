"""FBGEMM table-batched embedding lookups (TorchRec's pooled embeddings) as ``embedding_bag`` ops.

The forward op ``fbgemm::split_embedding_codegen_lookup_<optimizer>_function`` records (FBGEMM's generated
signature): 1 ``dev_weights`` (every table's rows, flattened), 2 ``uvm_weights``, 5 ``weights_offsets`` (one per
table), 6 ``D_offsets`` (tables + 1), 7 ``total_D`` (a scalar), 11 ``indices`` (every lookup), 12 ``offsets``
(tables x batch + 1 bag bounds), 14 ``indice_weights`` (weighted bags only), then the optimizer's state (for a
row-wise optimizer, 20 ``momentum1_dev``: one value per table row). Rows looked up: the indices' length; bags:
offsets - 1; the mean row length (elements): ``total_D`` / tables where recorded (``Concrete Inputs``), else for a
row-wise optimizer the weights over their rows. Its backward node ``torch::autograd::CppNode<SplitLookupFunction_
<optimizer>_Op>`` records only the pooled output's gradient ``[batch, total_D]``: it is linked to the latest
forward lookup of the same optimizer before it with that batch (``EmbeddingLinks``), whose lookups it updates.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from perfmodel.ops import OpError, make_op
from perfmodel.traces.aten_args import Args, Unbuildable
from perfmodel.traces.records import KernelRecord, OpCall

OpDict = dict[str, Any]
_FORWARD = re.compile(r"^fbgemm::split_embedding_codegen_lookup_(\w+?)_function(?:_cpu)?$")
_BACKWARD = re.compile(r"^torch::autograd::CppNode<SplitLookupFunction_(\w+?)_Op>$")
NEEDS_FORWARD = "needs its forward lookup's shapes"
LINK_NOTE = "backward node linked to its forward lookup (same optimizer, batch and total_D; the latest before it)"
(WEIGHTS, UVM_WEIGHTS, WEIGHTS_OFFSETS, D_OFFSETS, TOTAL_D, INDICES, OFFSETS, INDICE_WEIGHTS,
 MOMENTUM1) = (1, 2, 5, 6, 7, 11, 12, 14, 20)
STATE_BYTES = 4.0  # a row-wise optimizer's fp32 state per row (rowwise adagrad's momentum)
RADIX_BITS = 8  # CUB's onesweep radix sort: digits per pass


# FBGEMM's communication quantizers (fbgemm_gpu/src/quantize_ops): float <-> one-byte hfp8 per element, and FP8
# row-wise: each row's bytes then its fp32 scale and bias (8 bytes: ``[rows, columns + 8]``)
_QUANT = {"fbgemm::FloatToHFP8Quantized": ("quantize", "tensor"),
          "fbgemm::HFP8QuantizedToFloat": ("dequantize", "tensor"),
          "fbgemm::FloatToFP8RowwiseQuantized": ("quantize", "channel"),
          "fbgemm::FP8RowwiseQuantizedToFloat": ("dequantize", "channel")}
ROW_SCALE_BIAS_BYTES = 8


# pooled embeddings reordered by feature (``permute_pooled_embs(pooled [batch, total_D], offsets, permute, ...)``) and
# its backward node (the gradient, the same shape): every element read and written elsewhere in its row
_PERMUTE = re.compile(r"^fbgemm::permute_pooled_embs(?:_auto_grad)?$|^torch::autograd::CppNode<fbgemm_gpu::"
                      r"PermutePooledEmbsFunction<")


def recognised(name: str) -> bool:
    return bool(_FORWARD.match(name) or _BACKWARD.match(name) or name in _QUANT or _PERMUTE.match(name))


def build(args: Args) -> tuple[OpDict, list[str]]:
    """The forward lookup's or a quantizer's op; a backward node raises ``Unbuildable`` (``NEEDS_FORWARD``): see
    ``backward``."""
    if args.name in _QUANT:
        return quantizer(args)
    if _PERMUTE.match(args.name):
        shape = list(args.shape(0))
        return ({"kind": "reshape", "shape": shape, "new_shape": shape, "dtype": args.dtype(0), "contiguous": False},
                ["pooled embeddings permuted by feature: each element read and written once"])
    if _BACKWARD.match(args.name):
        raise Unbuildable(f"{args.name}: the gradient [batch, total_D] alone: {NEEDS_FORWARD}")
    return forward(args)


def quantizer(args: Args) -> tuple[OpDict, list[str]]:
    """float -> one byte per element (hfp8 / fp8, as int8: its size) or back; row-wise: one scale per row."""
    kind, granularity = _QUANT[args.name]
    shape = list(args.shape(0))
    if kind == "dequantize" and granularity == "channel":
        if len(shape) < 2 or shape[-1] <= ROW_SCALE_BIAS_BYTES:
            raise Unbuildable(f"{args.name}: rows of {shape[-1:]} bytes hold no data after their scale and bias")
        shape[-1] -= ROW_SCALE_BIAS_BYTES
    low, high = "int8", "fp32"
    dtype = args.dtype(0)
    if dtype != (high if kind == "quantize" else low):
        raise Unbuildable(f"{args.name}: input {dtype}, expected {high if kind == 'quantize' else low}")
    return ({"kind": kind, "shape": shape, "from_dtype": high if kind == "quantize" else low,
             "to_dtype": low if kind == "quantize" else high, "granularity": granularity},
            ["8-bit float codes counted as int8 (one byte each)"])


def _elements(args: Args, index: int) -> int:
    """An argument's element count; 0 where it is empty, a scalar or not recorded."""
    dims = args.call.input_dims
    shape = dims[index] if dims is not None and index < len(dims) else None
    return math.prod(shape) if shape else 0


def _lookup(args: Args) -> tuple[int, int, int, int, str, list[str]]:
    """(lookups, bags, tables, mean row elements, table dtype, notes) of a forward lookup call."""
    optimizer = _FORWARD.match(args.name)
    assert optimizer is not None
    if _elements(args, UVM_WEIGHTS) > 0:
        raise Unbuildable(f"{args.name}: tables in host memory (UVM): their rows cross the host link")
    weights, lookups = math.prod(args.shape(WEIGHTS)), math.prod(args.shape(INDICES))
    tables, bags = args.shape(WEIGHTS_OFFSETS)[0], math.prod(args.shape(OFFSETS)) - 1
    if tables < 1 or bags < tables or bags % tables:
        raise Unbuildable(f"{args.name}: {bags} bags do not split over {tables} tables")
    total_d = args.concrete(TOTAL_D)
    if total_d is not None and total_d.isdigit() and int(total_d) >= tables:
        dim, notes = int(total_d) / tables, [f"row length total_D {total_d} / {tables} tables"]
    elif "rowwise" in optimizer.group(1) and _elements(args, MOMENTUM1) > 0:
        rows = _elements(args, MOMENTUM1)
        dim, notes = weights / rows, [f"row length from the weights over the row-wise optimizer's {rows} rows"]
    else:
        raise Unbuildable(f"{args.name}: row length not recorded (total_D needs 'Concrete Inputs')")
    if dim < 1:
        raise Unbuildable(f"{args.name}: {weights} weights over more rows: no row length")
    notes.append("mean row length over tables, lookups assumed spread evenly; output fp32 (FBGEMM's default)")
    return lookups, bags, tables, max(round(dim), 1), args.dtype(WEIGHTS), notes


def forward(args: Args) -> tuple[OpDict, list[str]]:
    lookups, bags, _, dim, dtype, notes = _lookup(args)
    weighted = _elements(args, INDICE_WEIGHTS) > 0
    return ({"kind": "embedding_bag", "num_indices": lookups, "embedding_dim": dim, "num_bags": bags,
             "dtype": dtype, "weighted": weighted}, notes)


def backward(node: OpCall, lookup: OpCall) -> tuple[OpDict, list[str]]:
    """The backward node's op from its gradient ``[batch, total_D]`` and the forward ``lookup`` it belongs to."""
    grad = (node.input_dims or ((),))[0] or ()
    lookups, bags, tables, dim, dtype, notes = _lookup(Args(lookup))
    if len(grad) == 2 and grad[1] >= tables:
        dim, notes = max(round(grad[1] / tables), 1), [f"row length from the gradient's total_D {grad[1]} / "
                                                       f"{tables} tables"]
    args = Args(lookup)
    rows = _elements(args, MOMENTUM1) or _elements(args, WEIGHTS) // dim
    passes = max(math.ceil(math.log2(max(rows, 2)) / RADIX_BITS), 1)
    state = STATE_BYTES if "rowwise" in node.name else 0.0
    notes = [*notes, f"linked to its forward lookup ({lookups} lookups over {tables} tables)",
             "every lookup's row read and written: an upper bound (repeated rows are merged, how many is not "
             f"recorded); {passes} radix-sort passes over {rows} rows' indices"]
    return ({"kind": "embedding_bag", "num_indices": lookups, "embedding_dim": dim, "num_bags": bags,
             "dtype": dtype, "weighted": _elements(args, INDICE_WEIGHTS) > 0, "pass": "backward",
             "sort_passes": passes, "state_bytes_per_row": state}, notes)


def linked_backward(node: OpCall, links: EmbeddingLinks) -> tuple[OpDict, list[str]] | str | None:
    """The backward node's op through its linked forward lookup, the reason it does not build, or None unlinked."""
    lookup = links.forward_of(node)
    if lookup is None:
        return None
    try:
        op, notes = backward(node, lookup)
        make_op(op)
    except (Unbuildable, OpError) as exc:
        return f"{node.name}: {exc}"
    return op, notes


class EmbeddingLinks:
    """The forward lookup of each backward node: the latest forward call of the same optimizer before it whose
    batch (bags / tables) is the gradient's; of several, one whose tables x mean row length is its total_D."""

    def __init__(self, kernels: Sequence[KernelRecord]) -> None:
        self._kernels = kernels
        self._forwards: dict[str, list[OpCall]] | None = None

    def _read(self) -> dict[str, list[OpCall]]:
        forwards: dict[str, list[OpCall]] = {}
        seen: set[int] = set()
        for kernel in self._kernels:
            for call in kernel.ops:
                found = _FORWARD.match(call.name)
                if found and call.call_id not in seen:
                    seen.add(call.call_id)
                    forwards.setdefault(found.group(1), []).append(call)
        for calls in forwards.values():
            calls.sort(key=lambda c: c.start_s)
        return forwards

    def forward_of(self, node: OpCall) -> OpCall | None:
        found = _BACKWARD.match(node.name)
        grad = (node.input_dims or ((),))[0] or ()
        if found is None or len(grad) != 2:
            return None
        if self._forwards is None:
            self._forwards = self._read()
        candidates: list[tuple[OpCall, bool]] = []
        for call in self._forwards.get(found.group(1), []):
            if call.start_s >= node.start_s:
                break
            try:
                _, bags, tables, dim, _, _ = _lookup(Args(call))
            except Unbuildable:
                continue
            if bags // tables == grad[0]:
                candidates.append((call, tables * dim == grad[1]))
        exact = [c for c, same_d in candidates if same_d]
        chosen = exact or [c for c, _ in candidates]
        return chosen[-1] if chosen else None
