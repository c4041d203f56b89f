"""The runs page's per-calibration table (``web/calibrations.py``) reads the device's runs once, from the
in-memory run columns, not once per calibration as ORM rows with their tags (issue 27, pages14: 2.6 s of a
3.0 s first ``/runs?hardware=`` over 16,176 A100 runs with one calibration; each further calibration read them
again). Its figures are those of ``compare`` reading the store, as ``GET /api/v1/comparisons`` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.routers.comparisons import MAX_COMPARED_RUNS, compare
from perfmodel.calibration.stored import fit_stored
from perfmodel.jobs.run import stored_hardware
from perfmodel.roofline import predict_many
from perfmodel.store import RunIn
from tests.web.conftest import A100, H100, make_app
from web.calibrations import calibration_summaries, device_runs


def test_summaries_read_the_runs_once_and_match_compare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app(tmp_path)
    with TestClient(app) as client:
        state = app.state.perfmodel
        store = state.store
        ops: list[dict[str, Any]] = [{"kind": "matmul", "m": m, "n": 1024, "k": 1024, "dtype": "bf16"}
                                     for m in (64, 256, 1024, 4096) * 3]
        ops += [{"kind": "rmsnorm", "shape": [rows, 4096], "dtype": "bf16"} for rows in (64, 1024, 16384) * 2]
        times = predict_many(A100, ops).time_s
        store.add_runs([RunIn(hardware_id=A100, op=op, measured_time_s=float(t) * (1.1 + 0.02 * i), source="bench",
                              tags={"name": f"r{i}"}) for i, (op, t) in enumerate(zip(ops, times, strict=True))])
        store.add_runs([RunIn(hardware_id=H100, op=ops[0], measured_time_s=1e-5, source="bench")])  # not the A100's
        fit_stored(store, stored_hardware(store, A100), {})
        store.add_runs([RunIn(hardware_id=A100, op=ops[2], measured_time_s=float(times[2]) * 0.8, source="later")])
        fit_stored(store, stored_hardware(store, A100), {})
        calibrations = store.list_calibrations(A100)
        assert len(calibrations) == 2
        expected = [compare(state, A100, str(c.id), limit=MAX_COMPARED_RUNS)["summary"] for c in calibrations]

        runs = device_runs(state, A100)
        assert [r.id for r in runs] == [r.id for r in store.list_runs(hardware_id=A100, limit=1000)[0]]
        assert {r.source for r in runs} == {"bench", "later"} and runs[0].op == ops[0]

        reads: list[str | None] = []
        list_runs = store.list_runs

        def counted(*args: Any, **kwargs: Any) -> Any:
            reads.append(kwargs.get("hardware_id"))
            return list_runs(*args, **kwargs)

        monkeypatch.setattr(store, "list_runs", counted)
        summaries, note = calibration_summaries(state, A100)
        assert note is None and reads == []  # no ORM read of the runs, whatever the number of calibrations
        assert [s["summary"] for s in summaries] == expected  # the same figures, class by class
        assert [s["id"] for s in summaries] == [c.id for c in calibrations]
        assert sum(row["count"] for row in expected[0] if row["op_kind"] != "all") == len(ops) + 1

        page = client.get(f"/runs?hardware={A100}")
        assert page.status_code == 200 and f"calibration {calibrations[-1].id}" in page.text.lower().replace("#", "")
