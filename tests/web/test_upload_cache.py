"""The upload page's table of recent traces (issue 25): its kernel-launch totals, an aggregate over every kernel
row, are computed once per data version and recomputed after a new upload."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient

from tests.web.conftest import H100, make_app
from web.testing import seed_trace


def launches(html: str) -> list[str]:
    return re.findall(r'<td class="num">([\d,]+)</td>', html)


def test_upload_totals_are_cached_until_the_data_changes(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    with TestClient(app) as client:
        store = app.state.perfmodel.store
        seed_trace(store, 120, H100)
        cache = app.state.dashboard_cache
        first = client.get("/upload").text
        hits = cache.hits
        assert client.get("/upload").text == first and cache.hits == hits + 1
        seed_trace(store, 30, H100, seed_value=2)
        after = client.get("/upload").text
        totals = store.trace_totals([u.id for u in store.list_trace_uploads()])
        assert sorted(t.kernels for t in totals.values()) == [30, 120]
        assert "120" in launches(after) and "30" in launches(after) and "30" not in launches(first)
