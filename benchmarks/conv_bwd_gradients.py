"""DeepBench's convolution backwards split by gradient (convbwd18): each row's data gradient and weight gradient
predicted alone, against the sheet's own ``bwd_inputs_ms`` and ``bwd_params_ms`` columns.

A gradient alone is the backward op's Work with the other gradient's GEMM slot emptied, one kernel, its own
compulsory stream (the data gradient dy, W in and dx out: ``Work.dgrad_stream_bytes``; the weight gradient x, dy in
and dW out: ``wgrad_stream_bytes``) and at least one issue interval. An algorithm's transform kernels
(``Work.serial_bytes``: non-fused Winograd, FFT) stay whole in both, so those rows read slow. With a saved
``lodo.py --save-heldout`` run, each device takes the defaults its held-out fold fitted; without, the shipped ones.

    python benchmarks/conv_bwd_gradients.py [--run RUN.npz] [--device p100] [--switches N]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lodo import _split
from lodo_conv_switches import switch_on
from lodo_vendor import vendor, with_model
from measured_data import Row, _number, _read, deepbench

from perfmodel.efficiency import ModelDefaults, defaults_for
from perfmodel.ops import make_op
from perfmodel.ops.conv import Conv2d
from perfmodel.ops.work import Work
from perfmodel.roofline import evaluate
from perfmodel.specs import load_hardware

SHIPPED_ISSUE_S = 15e-6  # the harness's issue interval without a fitted run (DeepBench's loops, lodo.HARNESS_GRIDS)
DATA, WEIGHT = 1, 2  # GEMM slots of a convolution's Work: forward, data gradient, weight gradient


def alone(work: Work, slot: int) -> Work:
    """The backward's Work with only ``slot``'s GEMMs, one kernel and that gradient's compulsory stream."""
    batch = work.gemm_batch.copy()
    batch[:, DATA + WEIGHT - slot] = 0.0
    stream = work.dgrad_stream_bytes if slot == DATA else work.wgrad_stream_bytes
    return dataclasses.replace(
        work,
        gemm_batch=batch,
        kernels=np.ones(work.n),
        bytes_by_role={"stream": stream},
        dgrad_stream_bytes=stream * (slot == DATA),
        wgrad_stream_bytes=stream * (slot == WEIGHT),
    )


def measured_gradients() -> list[tuple[Row, float, float]]:
    """Every DeepBench backward row with its sheet's data- and weight-gradient seconds (the CSV's order)."""
    seconds = [
        (float(r["bwd_inputs_ms"]) * 1e-3, float(r["bwd_params_ms"]) * 1e-3)
        for r in _read("deepbench_conv.csv")
        if _number(r["bwd_inputs_ms"]) and _number(r["bwd_params_ms"])
    ]
    rows = [r for r in deepbench() if r.label == "conv2d_bwd"]
    if len(rows) != len(seconds):
        raise SystemExit("deepbench_conv.csv: backward rows and gradient columns disagree")
    return [(r, dx, dw) for r, (dx, dw) in zip(rows, seconds, strict=True)]


def gradients(rows: list[Row], defaults: ModelDefaults, issue_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Predicted data- and weight-gradient seconds of one device's backward rows."""
    ops = [make_op(r.op) for r in rows]
    work = Conv2d.work(ops)  # type: ignore[arg-type]
    hardware = load_hardware(rows[0].hardware)
    out = [
        np.maximum(evaluate(alone(work, slot), ops, hardware, "kernel", False, defaults).time_s, issue_s)
        for slot in (DATA, WEIGHT)
    ]
    return out[0], out[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, help="a lodo.py --save-heldout file: each device at its fold's defaults")
    parser.add_argument("--device", default="", help="only devices whose id contains this")
    parser.add_argument("--switches", default="DRWJAT", help="lodo_conv_switches letters (default: the tip's)")
    args = parser.parse_args()
    switch_on(args.switches)
    fitted = json.loads(str(np.load(args.run)["fitted"])) if args.run else {}
    by_device: dict[str, list[tuple[Row, float, float]]] = defaultdict(list)
    for r, measured_dx, measured_dw in measured_gradients():
        if args.device in r.hardware:
            by_device[r.hardware].append((r, measured_dx, measured_dw))
    cells: dict[tuple[object, ...], list[tuple[float, float]]] = defaultdict(list)
    for hw, members in sorted(by_device.items()):
        choice = fitted.get(hw) or fitted.get(vendor(hw)) or {"issue_interval_s": SHIPPED_ISSUE_S}
        model, harness = _split(choice)
        defaults = with_model({hw: defaults_for(load_hardware(hw))}, model)[hw]
        dx, dw = gradients([m[0] for m in members], defaults, harness.get("issue_interval_s", 0.0))
        for (r, mx, mw), px, pw in zip(members, dx, dw, strict=True):
            key: tuple[object, ...] = (
                hw,
                r.op["dtype"],
                r.op.get("algorithm", "implicit_gemm"),
                f"{r.op['kernel_h']}x{r.op['kernel_w']} s{r.op['stride']}",
            )
            cells[key].append((px / mx, pw / mw))
    print(f"{'device, dtype, algorithm, filter':68} rows  data grad  weight grad  (model / measured, median)")
    for key, ratios in sorted(cells.items()):
        v = np.array(ratios)
        print(f"{' '.join(map(str, key)):68} {len(v):4}  {np.median(v[:, 0]):9.2f}  {np.median(v[:, 1]):11.2f}")


if __name__ == "__main__":
    main()
