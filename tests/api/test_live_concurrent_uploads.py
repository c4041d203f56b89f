"""20 uploads of one real trace at once, at a live server (uvicorn, 2 workers, thread pools), on SQLite and
PostgreSQL: the trace and its runs (31 when written) are stored once, every answer names the same trace."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from live_server import live_server

from perfmodel.store import Store

TOKEN = "live-token"
TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "host_cpu_linear_train.pt.trace.json.gz"
DEVICE = "nvidia-a100-sxm4-80gb"
UPLOADS = 20


def test_twenty_concurrent_uploads_store_one_trace(database_url: str) -> None:
    store = Store(database_url)
    try:
        store.migrate()  # once here, not raced by every worker
        content = TRACE.read_bytes()
        barrier = threading.Barrier(UPLOADS)
        with live_server(database_url, TOKEN) as base:

            def upload(_: int) -> httpx.Response:
                barrier.wait(timeout=60)
                return httpx.post(f"{base}/api/v1/traces", files={"file": (TRACE.name, content, "application/gzip")},
                                  data={"hardware": DEVICE}, headers={"Authorization": f"Bearer {TOKEN}"},
                                  timeout=300)

            with ThreadPoolExecutor(UPLOADS) as pool:
                responses = list(pool.map(upload, range(UPLOADS)))
            sequential = upload_once_more(base, content)
        assert all(r.status_code in (200, 201) for r in responses), [(r.status_code, r.text) for r in responses]
        bodies = [r.json() for r in responses]
        assert [r.status_code for r in responses].count(201) == 1
        assert sum(not b["duplicate"] for b in bodies) == 1
        assert {b["id"] for b in bodies} == {sequential["id"]}
        runs_created = sequential["runs_created"]
        assert isinstance(runs_created, int) and runs_created > 0
        assert {b["runs_created"] for b in bodies} == {runs_created}
        assert {b["kernels"] for b in bodies} == {sequential["kernels"]}
        uploads = store.list_trace_uploads(DEVICE)
        assert [(u.id, u.status) for u in uploads] == [(sequential["id"], "parsed")]
        runs, total = store.list_runs(hardware_id=DEVICE, limit=1000)
        assert total == runs_created and {r.trace_upload_id for r in runs} == {sequential["id"]}
    finally:
        store.dispose()


def upload_once_more(base: str, content: bytes) -> dict[str, object]:
    """A sequential re-upload after the storm: 200, the same trace."""
    response = httpx.post(f"{base}/api/v1/traces", files={"file": (TRACE.name, content, "application/gzip")},
                          data={"hardware": DEVICE}, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=300)
    assert response.status_code == 200 and response.json()["duplicate"], response.text
    body: dict[str, object] = response.json()
    return body
