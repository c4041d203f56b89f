"""The runs page's scatter past ``SCATTER_MAX_POINTS`` (issue 25): a seeded sample of each op class, every class
kept, the note saying how many of how many runs it draws; the histogram and tables still count every run."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.web.conftest import A100, H100, make_app
from web import runs_view
from web.run_columns import codes, predict_columns, read_run_columns
from web.testing import seed_runs


def test_sample_keeps_every_class_in_proportion() -> None:
    kind_of = np.repeat(np.arange(3), [9_000, 900, 50])
    shown = runs_view.scatter_sample(kind_of, limit=1_000)
    assert np.all(np.diff(shown) > 0)  # ascending, no repeats
    counts = np.bincount(kind_of[shown], minlength=3)
    assert counts[0] == round(9_000 * 1_000 / 9_950)
    assert counts[1] == runs_view.SCATTER_MIN_PER_CLASS and counts[2] == 50  # small classes kept whole
    assert np.array_equal(shown, runs_view.scatter_sample(kind_of, limit=1_000))  # the same every time
    assert np.array_equal(runs_view.scatter_sample(kind_of[:800], limit=1_000), np.arange(800))


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    app = make_app(tmp_path_factory.mktemp("scatter"))
    with TestClient(app) as test_client:
        seed_runs(app.state.perfmodel.store, 600)
        yield test_client


def test_runs_page_says_how_many_runs_the_scatter_draws(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs_view, "SCATTER_MAX_POINTS", 150)
    monkeypatch.setattr(runs_view, "SCATTER_MIN_PER_CLASS", 5)
    state = client.app.state.perfmodel  # type: ignore[attr-defined]
    built = runs_view.build(state, A100, None, None, None)
    runs = read_run_columns(state.store, hardware_id=A100)
    pred = predict_columns(state, runs)
    assert built["shown"] == runs.size == int(pred.ok.sum()) > 150
    assert sum(s["count"] for s in built["summary"] if s["op_kind"] != "all") == runs.size
    expected = runs_view.scatter_sample(codes(runs.op_kind)[1])
    assert built["drawn"] == expected.size < runs.size
    figure = str(built["scatter"])
    assert f"{expected.size:,} of {runs.size:,} runs drawn" in figure
    html = client.get("/runs", params={"hardware": A100}).text
    assert f"Showing {expected.size:,} of {runs.size:,} runs" in html


def test_small_stores_draw_every_run(client: TestClient) -> None:
    state = client.app.state.perfmodel  # type: ignore[attr-defined]
    built = runs_view.build(state, H100, None, None, None)  # another device: the page above is view-cached
    assert built["drawn"] == built["shown"] > 0 and "runs drawn" not in str(built["scatter"])
    assert "Showing" not in client.get("/runs", params={"hardware": H100}).text
