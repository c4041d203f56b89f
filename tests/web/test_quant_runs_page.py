"""The runs page and the predicted-vs-measured comparison of a device whose stored runs include quantize /
dequantize ops (HTA's FBGEMM fp8 quantizers, from real traces) once it has a calibration. qa14's walkthrough:
``/runs?hardware=nvidia-a100-sxm4-80gb`` answered 500 ("'Quantize' object has no attribute 'dtype'") as soon as
one A100 calibration existed, because the page applies it to every stored run."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from perfmodel.calibration.stored import fit_stored
from perfmodel.jobs.run import stored_hardware
from perfmodel.roofline import predict_many
from perfmodel.store import RunIn
from tests.web.conftest import A100, make_app


def test_runs_page_with_quantize_runs_and_a_calibration(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    with TestClient(app) as client:
        store = app.state.perfmodel.store
        gemms = [{"kind": "matmul", "m": m, "n": 1024, "k": 1024, "dtype": "bf16"} for m in (64, 256, 1024, 4096) * 3]
        times = predict_many(A100, gemms).time_s * 1.2
        store.add_runs([RunIn(hardware_id=A100, op=op, measured_time_s=float(t), source="bench")
                        for op, t in zip(gemms, times, strict=True)])
        fit_stored(store, stored_hardware(store, A100), {})  # a calibration fitted before the quantizers came
        quant = [{"kind": kind, "shape": [rows, 1024], "from_dtype": src, "to_dtype": dst}
                 for rows in (512, 4096) for kind, src, dst in (("quantize", "fp32", "fp8_e4m3"),
                                                                ("dequantize", "fp8_e4m3", "fp32"))]
        store.add_runs([RunIn(hardware_id=A100, op=op, measured_time_s=2e-5, source="trace") for op in quant])
        page = client.get(f"/runs?hardware={A100}")
        assert page.status_code == 200, page.text[:300]
        compared = client.get(f"/api/v1/comparisons?hardware={A100}&calibration=latest")
        assert compared.status_code == 200, compared.text[:300]
        assert "quantize" in compared.text
