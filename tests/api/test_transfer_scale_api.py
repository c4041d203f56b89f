"""Through the service: a calibration seeded from a related device's (``base_calibration``) with a few runs of the
target's own rescales the transferred classes' band by those runs (``calibration/target_band.py``), stored with the
calibration and used by ``/predict``."""

from __future__ import annotations

import math
from typing import Any

import pytest
from fastapi.testclient import TestClient
from job_client import calibrate

from api.main import create_app
from api.settings import Settings

TOKEN = "transfer-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
A100, H100 = "nvidia-a100-sxm4-80gb", "nvidia-h100-sxm5-80gb"


def _store(client: TestClient, hardware: str, ops: list[dict[str, Any]], factors: list[float], source: str) -> None:
    model = client.post("/api/v1/predict/batch", json={"hardware": hardware, "ops": ops}).json()["results"]
    runs = [{"hardware": hardware, "op": op, "measured_time_s": f * r["time_s"], "source": source}
            for op, r, f in zip(ops, model, factors, strict=True)]
    assert client.post("/api/v1/runs/bulk", json=runs, headers=AUTH).status_code == 201


def test_the_targets_first_runs_rescale_the_transferred_band_through_the_service(database_url: str) -> None:
    with TestClient(create_app(Settings(database_url=database_url, api_token=TOKEN))) as client:
        gemms = [{"kind": "matmul", "m": 64 * i, "n": 1024, "k": 512 * j, "dtype": "bf16"}
                 for i in (1, 2, 4, 8) for j in (1, 2, 4)]
        _store(client, A100, gemms, [1.3] * len(gemms), "source")
        base = calibrate(client, {"hardware": A100, "filter": {"source": "source"}}, AUTH)
        softmax = [{"kind": "softmax", "shape": [2 ** (5 + i), 4096], "dtype": "bf16"} for i in range(5)]
        _store(client, H100, softmax, [3.0, 1 / 3, 3.0, 1 / 3, 2.0], "first")
        seeded = calibrate(client, {"hardware": H100, "filter": {"source": "first"}, "base_calibration": base["id"]},
                           AUTH)
        scale = seeded["report"]["transfer_scale"]["scale"]
        assert scale is not None and scale > 1.5  # the H100's runs are 3x off: far outside the model's band
        op = {"kind": "matmul", "m": 256, "n": 1024, "k": 2048, "dtype": "bf16"}
        plain = client.post("/api/v1/predict", json={"hardware": H100, "op": op}).json()
        got = client.post("/api/v1/predict", json={"hardware": H100, "op": op, "calibration": seeded["id"]}).json()
        assert got["time_s"] == plain["time_s"]  # a transferred class predicts the model (transfer weight 0)
        low, high = (math.log(v / plain["time_s"]) for v in plain["uncalibrated_interval_s"])
        centre, half = (low + high) / 2, (high - low) / 2
        want = (min(centre - scale * half, 0.0), max(centre + scale * half, 0.0))
        edges = tuple(math.log(v / got["time_s"]) for v in got["interval_s"])
        assert edges == pytest.approx(want, rel=1e-9, abs=1e-12)
        wider = (got["interval_s"][1] - got["interval_s"][0]) / (plain["uncalibrated_interval_s"][1]
                                                                 - plain["uncalibrated_interval_s"][0])
        assert wider > 1.5

