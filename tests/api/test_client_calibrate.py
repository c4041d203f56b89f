"""``Client.calibrate``: POSTs the calibration job, polls its URL with a progress callback, returns the stored
calibration; a refusal, or a job that failed, raises ApiError with the reason (the in-process app, SQLite)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from db_urls import database_url as fresh_database
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from perfmodel.client import ApiError, Client

TOKEN = "client-token"
H100 = "nvidia-h100-sxm5-80gb"
MI300X = "amd-mi300x"


def _store_runs(pm: Client, hardware: str, source: str) -> None:
    ops = [{"kind": "matmul", "m": 64 * i, "n": 1024, "k": 512 * j, "dtype": "bf16"} for i in (1, 2, 4, 8)
           for j in (1, 2, 4)]
    model = pm.predict_batch(hardware, ops)
    pm.add_runs([{"hardware": hardware, "op": op, "measured_time_s": 1.3 * r["time_s"], "source": source}
                 for op, r in zip(ops, model, strict=True)])


def test_calibrate_polls_the_job_with_progress_and_returns_the_calibration(tmp_path: Path) -> None:
    with fresh_database("sqlite", tmp_path) as url, \
            TestClient(create_app(Settings(database_url=url, api_token=TOKEN))) as app:
        pm = Client("http://testserver", token=TOKEN, transport=app._transport)
        _store_runs(pm, H100, "synthetic")
        seen: list[tuple[str, float]] = []
        calibration = pm.calibrate(H100, {"source": "synthetic"}, notes="client", poll_s=0.05,
                                   progress=lambda stage, done: seen.append((stage, done)))
        assert calibration["hardware"] == H100 and calibration["notes"] == "client"
        assert calibration["runs_used"] == 12
        assert seen[-1] == ("done", 1.0)
        fractions = [done for _, done in seen]
        assert fractions == sorted(fractions) and len(set(seen)) == len(seen)  # called on changes only
        with pytest.raises(ApiError) as refused:  # refused at once: nothing matches
            pm.calibrate(H100, {"source": "nothing"}, poll_s=0.05)
        assert refused.value.status == 422 and "no stored runs" in refused.value.detail
        _store_runs(pm, MI300X, "amd")
        amd: dict[str, Any] = pm.calibrate(MI300X, {"source": "amd"}, poll_s=0.05)
        with pytest.raises(ApiError) as failed:  # the fit refuses another vendor's base: the job's reason
            pm.calibrate(H100, {"source": "synthetic"}, base_calibration=amd["id"], poll_s=0.05)
        assert "failed" in failed.value.detail and MI300X in failed.value.detail
        pm.close()
