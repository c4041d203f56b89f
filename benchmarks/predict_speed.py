"""Prediction throughput: single calls and ``predict_many`` on 10,000 mixed ops (one core), the
columnar entry (``perfmodel.columnar.predict_columns``) on a table of matmuls and rmsnorms (``--rows``,
1,000,000 by default; repeated rows, every row predicted, and a table whose rows all differ) with its peak traced
memory per row, and ``predict_calibrated`` with a
calibration fitted on Vidur's A100 runs (local correction included). Rates are ops per CPU second
(``time.process_time``).

    python benchmarks/predict_speed.py [--hardware ID] [--ops 10000] [--rows 1000000] [--dict-rows 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

import perfmodel
from perfmodel.ops import make_op


def mixed_ops(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """A reproducible mix of the op kinds a compiler asks about."""
    rng = random.Random(seed)
    dims = [1, 16, 64, 128, 512, 1024, 2048, 4096, 8192]
    makers: list[Callable[[], dict[str, Any]]] = [
        lambda: {"kind": "matmul", "m": rng.choice(dims), "n": rng.choice(dims[2:]),
                 "k": rng.choice(dims[2:]), "dtype": rng.choice(["bf16", "fp16", "fp8_e4m3", "fp32"])},
        lambda: {"kind": "attention", "batch": rng.choice([1, 4, 16]), "heads": 32, "kv_heads": 8,
                 "seq_q": rng.choice([1, 512, 2048]), "seq_kv": rng.choice([512, 2048, 8192]),
                 "head_dim": 128, "causal": True, "dtype": "bf16"},
        lambda: {"kind": "rmsnorm", "shape": [rng.choice(dims), 4096], "dtype": "bf16"},
        lambda: {"kind": "softmax", "shape": [rng.choice(dims), rng.choice(dims[3:])], "dtype": "fp16"},
        lambda: {"kind": "elementwise", "shape": [rng.choice(dims), 4096], "inputs": 2, "dtype": "bf16"},
        lambda: {"kind": "conv2d", "batch": rng.choice([1, 8, 32]), "in_channels": 64, "out_channels": 128,
                 "height": 56, "width": 56, "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp16"},
        lambda: {"kind": "embedding", "num_embeddings": 128256, "embedding_dim": 4096,
                 "num_indices": rng.choice(dims), "dtype": "bf16"},
        lambda: {"kind": "allreduce", "bytes": rng.choice([1e4, 1e6, 1e8]), "devices": rng.choice([2, 8, 16])},
    ]
    return [rng.choice(makers)() for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hardware", default="nvidia-h100-sxm5-80gb")
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dict-rows", type=int, default=100_000, help="distinct JSON dicts whose memory is traced")
    args = parser.parse_args()
    hw = perfmodel.load_hardware(args.hardware)
    from perfmodel import allocator
    from perfmodel.search import call_memo, gemm_kernel

    start = time.process_time()
    gemm_kernel.load()  # a long-running process loads the compiled schedule kernels once
    print(f"compiled kernels loaded in {time.process_time() - start:.2f} s CPU (once per process)")
    dicts = mixed_ops(args.ops)
    ops = [make_op(d) for d in dicts]
    perfmodel.predict_many(hw, ops[:100])  # warm the per-device tables
    print(f"glibc allocator thresholds (perfmodel/allocator.py, set on the model's import): {allocator.outcome()}")

    singles = ops[:2000]
    start = time.process_time()
    for op in singles:
        perfmodel.predict(hw, op)
    single_rate = len(singles) / (time.process_time() - start)

    unique = _distinct_mix(dicts)  # the same mix with no dict repeated (nothing to predict once for many)
    best_ops, best_dicts, best_unique, best_fresh = 0.0, 0.0, 0.0, 0.0
    for _ in range(5):
        start = time.process_time()
        perfmodel.predict_many(hw, ops)
        best_ops = max(best_ops, len(ops) / (time.process_time() - start))
        start = time.process_time()
        perfmodel.predict_many(hw, dicts)
        best_dicts = max(best_dicts, len(dicts) / (time.process_time() - start))
        start = time.process_time()
        perfmodel.predict_many(hw, unique)
        best_unique = max(best_unique, len(unique) / (time.process_time() - start))
        call_memo.clear()  # nothing kept from the last call: what a stream of new dicts costs
        start = time.process_time()
        perfmodel.predict_many(hw, unique)
        best_fresh = max(best_fresh, len(unique) / (time.process_time() - start))

    print(f"hardware {hw.id}, {len(ops)} mixed ops ({len({d['kind'] for d in dicts})} kinds); load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"predict (one op per call):          {single_rate:>10,.0f} ops/s")
    print(f"predict_many (Op objects, batched): {best_ops:>10,.0f} ops/s")
    print(f"predict_many (JSON dicts, batched): {best_dicts:>10,.0f} ops/s  (includes parsing; "
          f"{len({repr(d) for d in dicts}):,} distinct dicts, each predicted once)")
    print(f"predict_many (JSON dicts, distinct): {best_unique:>9,.0f} ops/s  (the same mix, no dict repeated)")
    print(f"  the same, call memo cleared first: {best_fresh:>9,.0f} ops/s  (no collective or attention answer kept "
          "from the previous call)")
    many = _distinct_mix(mixed_ops(args.dict_rows))  # a batch long enough to be predicted chunk by chunk
    tracemalloc.start()
    batch = perfmodel.predict_many(hw, many)
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del batch
    print(f"predict_many ({len(many):,} JSON dicts, distinct) memory: peak {peak / len(many):,.0f} B/op while "
          f"predicting, {kept / len(many):,.0f} B/op kept with the result (the dicts themselves not counted)")
    print(f"goals from JSON dicts: >= 300 k/s: the mix {'met' if best_dicts >= 3e5 else 'missed'}, no dict repeated "
          f"{'met' if best_unique >= 3e5 else 'missed'} (memo cleared: {'met' if best_fresh >= 3e5 else 'missed'}); "
          f"<= 300 B per op (peak, no dict repeated): "
          f"{'met' if peak / len(many) <= 300 else 'missed'}")
    columnar_speed(hw, args.rows)
    calibrated_speed(args.ops)


def _distinct_mix(dicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``dicts`` with one size field of row i grown by i, and by one more while the row equals an earlier one (two
    base sizes apart by j - i would otherwise meet: 2 % of 10,000 rows), so that no two rows are equal."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, d in enumerate(dicts):
        d = dict(d)
        grow = i
        while True:
            if "shape" in d:
                d["shape"] = [dicts[i]["shape"][0] + grow, *d["shape"][1:]]
            else:
                key = next(k for k in ("m", "num_indices", "bytes", "batch") if k in d)
                d[key] = dicts[i][key] + grow
            if repr(d) not in seen:
                break
            grow += 1
        seen.add(repr(d))
        out.append(d)
    return out


def table(rows: int, seed: int = 0) -> dict[str, Any]:
    """A table of matmuls and rmsnorms (half each) over three dtypes, one row per op."""
    rng = np.random.default_rng(seed)
    dims = np.array([16, 64, 128, 512, 1024, 2048, 4096, 8192])
    return {"kind": np.where(rng.random(rows) < 0.5, "matmul", "rmsnorm"), "m": rng.choice(dims, rows),
            "n": rng.choice(dims, rows), "k": rng.choice(dims, rows),
            "dtype": rng.choice(["bf16", "fp16", "fp8_e4m3"], rows),
            "shape": np.stack([rng.choice(dims, rows), np.full(rows, 4096)], axis=1)}


def distinct_table(rows: int, seed: int = 0) -> dict[str, Any]:
    """``table``'s kinds with no two rows alike (up to 1.5M rows): row i's (m, n, k, dtype) is i in mixed radix
    (m = 1 + i mod 8192, then n, k over ``table``'s 8 sizes and the dtype over its 3), so each matmul is a GEMM
    shape of its own, searched once; its shape is [1 + i, 4096]."""
    columns = table(rows, seed)
    dims = np.array([16, 64, 128, 512, 1024, 2048, 4096, 8192])
    i = np.arange(rows)
    rest = i // 8192
    columns.update(m=1 + i % 8192, n=dims[rest % 8], k=dims[rest // 8 % 8],
                   dtype=np.array(["bf16", "fp16", "fp8_e4m3"])[rest // 64 % 3])
    columns["shape"] = np.stack([1 + i, np.full(rows, 4096)], axis=1)
    return columns


def columnar_speed(hw: perfmodel.Hardware, rows: int) -> None:
    """``predict_columns`` on ``rows`` rows: ops per CPU second (best of 3), alternately in the same run: the table
    of repeated rows merged (the default); the same table with every row predicted chunk by chunk
    (``MOST_DISTINCT = 0``: what a table whose rows all differ but whose GEMM shapes repeat costs); and a table
    whose rows all differ (``distinct_table``: the default path, which finds nothing to merge); then (traced runs)
    peak bytes per row of each."""
    from perfmodel import columnar

    tables = {"repeated": table(rows), "distinct": distinct_table(rows)}
    columnar.predict_columns(hw, {k: v[:1000] for k, v in tables["repeated"].items()})  # compile / load the kernels
    default = columnar.MOST_DISTINCT
    modes = (("merged", "repeated", default), ("chunked", "repeated", 0.0), ("distinct", "distinct", default))
    best = {mode: 0.0 for mode, _, _ in modes}
    memory: dict[str, tuple[float, float]] = {}
    for _ in range(3):
        for mode, name, share in modes:
            columnar.MOST_DISTINCT = share
            start = time.process_time()
            columnar.predict_columns(hw, tables[name])
            best[mode] = max(best[mode], rows / (time.process_time() - start))
    for mode, name, share in modes:
        columnar.MOST_DISTINCT = share
        tracemalloc.start()
        batch = columnar.predict_columns(hw, tables[name])
        kept, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        memory[mode] = (peak / rows, kept / rows)
        del batch
    columnar.MOST_DISTINCT = default
    labels = {"merged": "repeated rows predicted once", "chunked": "every row, chunk by chunk",
              "distinct": "all rows distinct, each matmul its own GEMM"}
    for mode, label in labels.items():
        print(f"predict_columns ({rows:,} rows, matmul + rmsnorm, {label}): {best[mode]:>10,.0f} ops/s  (peak "
              f"{memory[mode][0]:,.0f} B/row while predicting, {memory[mode][1]:,.0f} B/row kept with the result)")
    print(f"  merged / chunked: {best['merged'] / best['chunked']:.2f}")
    rates = ", ".join(f"{mode} {'met' if best[mode] >= 1e6 else 'missed'}" for mode in labels)
    sizes = ", ".join(f"{mode} {'met' if memory[mode][0] <= 300 else 'missed'}" for mode in labels)
    print(f"goals from columns: >= 1 M ops/s: {rates}; <= 300 B per op (peak): {sizes}")


def calibrated_speed(count: int) -> None:
    """Fit on Vidur's A100 runs, then time predict_calibrated on ``count`` mixed ops for that device."""
    from measured_data import vidur

    from perfmodel.calibration import fit_calibration, predict_calibrated

    hw = "nvidia-a100-sxm4-80gb"
    runs = [(r.op, r.measured_s) for r in vidur() if r.hardware == hw]
    start = time.process_time()
    cal = fit_calibration(hw, runs)
    fit_s = time.process_time() - start
    points = sum(len(c.local.points) for c in cal.classes.values() if c.local is not None)
    print(f"fit_calibration ({len(runs)} Vidur A100 runs):   {fit_s:>10.1f} s  "
          f"({points} local-correction points, {len(json.dumps(cal.params)) / 1e6:.1f} MB as JSON)")
    for mix, dicts in (("the mix", mixed_ops(count)), ("no op repeated", _distinct_mix(mixed_ops(count)))):
        ops = [make_op(d) for d in dicts]
        predict_calibrated(hw, ops[:100], cal)  # warm the per-device tables (and load the trees' compiled walk)
        best, plain, ratios = 0.0, 0.0, []
        for _ in range(7):  # alternately: the uncalibrated prediction of the same ops, the baseline of the ratio
            start = time.process_time()
            perfmodel.predict_many(hw, ops, timing="host" if cal.timing == "host" else "kernel", space=cal.space)
            uncalibrated = len(ops) / (time.process_time() - start)
            start = time.process_time()
            batch = predict_calibrated(hw, ops, cal)
            calibrated = len(ops) / (time.process_time() - start)
            best, plain = max(best, calibrated), max(plain, uncalibrated)
            ratios.append(calibrated / uncalibrated)
        assert batch.in_calibrated_range is not None
        noted = sum(any(n.startswith("calibration: beyond") for n in texts) for texts in batch.notes.values())
        outside = (~batch.in_calibrated_range).mean()
        print(f"predict_calibrated (Op objects, {mix}): {best:>10,.0f} ops/s  ({outside:.0%} outside the "
              f"calibrated range; {noted / len(ops):.0%} of a fitted class, with a note saying why)")
        print(f"predict_many uncalibrated, same ops: {plain:>9,.0f} ops/s  (calibrated / uncalibrated: best "
              f"{best / plain:.2f}, median of 7 alternate runs {float(np.median(ratios)):.2f}; goal >= 0.5)")


if __name__ == "__main__":
    main()
