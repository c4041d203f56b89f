"""Where a class's held-out error sits, from a saved ``benchmarks/lodo.py --save-heldout`` run (conv20).

Three views of one op class (default conv2d), each row's held-out prediction / measured time:

1. the largest residual groups by (device, dtype, algorithm, filter, stride): rows, median ratio, range and the sum of
   |log ratio| (the group's share of the error);
2. the de-bias ceiling: the class's median |error| % if every group of a grouping (device; + dtype; + algorithm;
   + filter and stride) were divided by its own median ratio. What no per-group constant (a per-architecture share,
   a clock, a library factor) can get under is shape-level error;
3. batch pairs: for every shape measured at batch N and 2N on a device, t(2N) / t(N) measured against predicted,
   apart for shapes with fewer 128 x 128 output tiles than the device has units (fill < 1).

    python benchmarks/lodo_residual_groups.py RUN.npz [--label conv2d] [--top 25]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lodo import _buildable, extra_collectives
from measured_data import Row, all_rows

import perfmodel
from perfmodel.ops import make_op
from perfmodel.specs import load_hardware

TILE = 128  # output tile side for the fill count (cuDNN's SIMT and tensor-core forward tiles are 128 rows)


def debiased_median(log_ratio: np.ndarray, keys: Sequence[Hashable]) -> float:
    """Median |error| (fraction) after dividing every group of ``keys`` by its own median ratio."""
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        groups[key].append(i)
    adjusted = log_ratio.copy()
    for index in groups.values():
        adjusted[index] -= np.median(log_ratio[index])
    return float(np.median(np.abs(np.expm1(adjusted))))


def conv_key(row: Row, depth: int) -> tuple[object, ...]:
    """A convolution row's group at ``depth``: device, + dtype, + algorithm, + filter and stride."""
    op = row.op
    parts: list[object] = [row.hardware, f"{op['dtype']}/{op.get('compute_dtype', op['dtype'])}",
                           op.get("algorithm", "implicit_gemm"), f"{op['kernel_h']}x{op['kernel_w']} s{op['stride']}"]
    return tuple(parts[:depth])


def fill(row: Row) -> float:
    """Output tiles of TILE x TILE (N·P·Q rows by K columns) per unit of the row's device."""
    op = make_op(row.op)
    m = op.batch * op.out_h * op.out_w  # type: ignore[attr-defined]
    n = op.out_channels  # type: ignore[attr-defined]
    return float(math.ceil(m / TILE) * math.ceil(n / TILE) / load_hardware(row.hardware).units)


def batch_pairs(rows: Sequence[Row], predicted: np.ndarray) -> list[tuple[str, float, float, float]]:
    """(device, measured t(2N)/t(N), predicted t(2N)/t(N), fill at N) for every shape measured at N and 2N."""
    shapes: dict[tuple[object, ...], dict[int, int]] = defaultdict(dict)
    for i, row in enumerate(rows):
        shape = tuple(sorted((k, str(v)) for k, v in row.op.items() if k != "batch"))
        shapes[(row.hardware, shape)][int(row.op["batch"])] = i
    out = []
    for (hardware, _), by_batch in shapes.items():
        for batch, i in by_batch.items():
            if 2 * batch in by_batch:
                j = by_batch[2 * batch]
                out.append((str(hardware), rows[j].measured_s / rows[i].measured_s, predicted[j] / predicted[i],
                            fill(rows[i])))
    return out


def _print_pairs(pairs: list[tuple[str, float, float, float]], group: Callable[[str], str]) -> None:
    cells: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for hardware, measured, predicted, tiles in pairs:
        cells[group(hardware)].append((measured, predicted, tiles))
        cells["all devices"].append((measured, predicted, tiles))
    for name, values in sorted(cells.items()):
        v = np.array(values)
        low = v[:, 2] < 1
        parts = [f"{name:28} pairs {len(v):3}: measured {np.median(v[:, 0]):.2f} predicted {np.median(v[:, 1]):.2f}"]
        for label, mask in (("fill < 1", low), ("fill >= 1", ~low)):
            if mask.any():
                parts.append(f"{label} ({mask.sum()}) {np.median(v[mask, 0]):.2f} vs {np.median(v[mask, 1]):.2f}")
        print(" | ".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a lodo.py --save-heldout file")
    parser.add_argument("--label", default="conv2d", help="op class (conv2d or conv2d_bwd)")
    parser.add_argument("--top", type=int, default=25, help="residual groups to list")
    args = parser.parse_args()
    known = set(perfmodel.list_hardware())
    every = [r for r in [*all_rows(), *extra_collectives()] if r.hardware in known and _buildable(r)]
    saved = np.load(args.run)
    if saved["predicted"].size != len(every):
        raise SystemExit(f"{args.run}: not a --save-heldout run of these rows")
    index = [i for i, r in enumerate(every) if r.label == args.label and np.isfinite(saved["predicted"][i])]
    rows = [every[i] for i in index]
    predicted = np.asarray(saved["predicted"], dtype=float)[index]
    log_ratio = np.log(predicted / np.array([r.measured_s for r in rows]))
    median = np.median(np.abs(np.expm1(log_ratio))) * 100
    print(f"{args.label}: {len(rows)} rows, held-out median |error| {median:.2f} %")
    groups: dict[tuple[object, ...], list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        groups[conv_key(row, 4)].append(i)
    print(f"\nlargest residual groups (device, dtype, algorithm, filter/stride), of {len(groups)}:")
    ranked = sorted(groups.items(), key=lambda kv: -float(np.abs(log_ratio[kv[1]]).sum()))
    for key, members in ranked[: args.top]:
        r = np.exp(log_ratio[members])
        print(f"  {' '.join(map(str, key)):58} rows {len(r):3}  median {np.median(r):.2f}  range "
              f"{r.min():.2f}-{r.max():.2f}  sum|log| {np.abs(np.log(r)).sum():5.1f}")
    print("\nde-bias ceiling (every group divided by its own median ratio):")
    for depth, name in ((1, "device"), (2, "+ dtype"), (3, "+ algorithm"), (4, "+ filter, stride")):
        keys = [conv_key(r, depth) for r in rows]
        print(f"  {name:18} {len(set(keys)):3} groups: {debiased_median(log_ratio, keys) * 100:5.1f} %")
    print("\nbatch pairs, t(2N) / t(N):")
    _print_pairs(batch_pairs(rows, predicted), lambda hw: hw)


if __name__ == "__main__":
    main()
