"""Quantize / dequantize runs (HTA's FBGEMM fp8 quantizers, parsed from real traces) have no ``dtype`` field:
their class key names their computing side, and a calibration over them fits instead of failing (qa14: every
A100 calibration of the stored real traces failed with "'Quantize' object has no attribute 'dtype'")."""

from __future__ import annotations

import numpy as np

import perfmodel
from perfmodel.calibration import class_key, fit_calibration, predict_calibrated
from perfmodel.calibration.classes import class_keys
from perfmodel.ops import make_op

HW = "nvidia-a100-sxm4-80gb"


def _quant(kind: str, rows: int, src: str, dst: str) -> dict[str, object]:
    return {"kind": kind, "shape": [rows, 1024], "from_dtype": src, "to_dtype": dst}


def test_quant_keys_name_the_computing_dtype() -> None:
    ops = [make_op(_quant("quantize", 64, "fp32", "fp8_e4m3")), make_op(_quant("dequantize", 64, "int8", "fp16")),
           make_op(_quant("quantize", 64, "fp16", "int8")),
           make_op({"kind": "elementwise", "shape": [8], "dtype": "bf16"})]
    expected = ["quant/quantize:fp32", "quant/dequantize:fp16", "quant/quantize:fp16", "elementwise/1in1out:bf16"]
    assert [class_key(op) for op in ops] == expected
    assert class_keys(ops) == expected  # the batched path (one key per distinct field tuple) agrees


def test_a_calibration_with_quantize_runs_fits_and_predicts_them() -> None:
    rng = np.random.default_rng(0)
    runs = []
    for rows in (256, 1024, 4096, 16384, 65536, 262144) * 2:
        for kind, src, dst in (("quantize", "fp32", "fp8_e4m3"), ("dequantize", "fp8_e4m3", "fp32")):
            op = make_op(_quant(kind, rows, src, dst))
            runs.append((op, float(perfmodel.predict(HW, op).time_s) * 1.3 * float(rng.lognormal(0.0, 0.05))))
    cal = fit_calibration(HW, runs, folds=2)
    assert {"quant/quantize:fp32", "quant/dequantize:fp8_e4m3"} <= set(cal.report["classes"])
    op = make_op(_quant("quantize", 8192, "fp32", "fp8_e4m3"))
    ratio = float(predict_calibrated(HW, [op], cal).time_s[0]) / float(perfmodel.predict(HW, op).time_s)
    assert 1.1 < ratio < 1.5  # the fitted class moves the prediction toward the measured 1.3x
