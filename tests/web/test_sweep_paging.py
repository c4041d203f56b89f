"""A stored sweep's results table (issue 25): paged on the server, sorted on the server over every row (not one
page), axis columns headed in words with the override path as their title."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.web.conftest import make_app
from web import sweeps_view

DRAM = "levels.dram.bandwidth_bytes_per_s"
PEAK = "engines.*.peak_flops_per_s"
ROWS = 250


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, int]]:
    app = make_app(tmp_path_factory.mktemp("sweep-paging"))
    rows = [{"variant": i, "label": "gpt2:decode:b8", "overrides": {DRAM: f"x{1 + i % 5}", PEAK: f"x{1 + i % 3}"},
             "time_s": 1e-3 * (1 + (i * 37) % ROWS), "cost_proxy": 1.0 + (i * 11) % 17, "fits": True,
             "tokens_per_s": 1e4 / (1 + (i * 37) % ROWS), "memory_bytes": 1e9}
            for i in range(ROWS)]
    with TestClient(app) as client:
        spec = {"base": "nvidia-h100-sxm5-80gb", "axes": {DRAM: ["x1"], PEAK: ["x1"], "devices": [1]}}
        sweep_id = app.state.perfmodel.store.add_sweep("paged", spec, {"rows": rows})
        yield client, sweep_id


def variants(html: str) -> list[int]:
    body = re.search(r'id="sweep-table">.*?<tbody>(.*?)</tbody>', html, re.S)
    assert body is not None
    return [int(v) for v in re.findall(r'<tr[^>]*><td class="num">(\d+)</td>', body.group(1))]


def test_table_is_paged_and_every_page_together_is_every_row(sweep: tuple[TestClient, int]) -> None:
    client, sweep_id = sweep
    pages = [client.get(f"/sweeps/{sweep_id}", params={"page": p}).text for p in (1, 2, 3)]
    shown = [variants(html) for html in pages]
    assert [len(s) for s in shown] == [100, 100, 50]
    assert sorted(v for s in shown for v in s) == list(range(ROWS))
    assert "Rows 1–100 of 250" in pages[0] and "Rows 201–250 of 250" in pages[2]
    assert 'rel="next"' in pages[0] and 'rel="next"' not in pages[2]
    assert f'id="sweep-estimates">{ROWS}<' in pages[0]
    assert variants(client.get(f"/sweeps/{sweep_id}", params={"page": "999"}).text) == shown[2]  # clamped


@pytest.mark.parametrize(("sort", "key", "reverse"), [("time", "time_s", False), ("tokens", "tokens_per_s", True),
                                                      ("variant", "variant", False)])
def test_sort_orders_all_rows_across_pages(sweep: tuple[TestClient, int], sort: str, key: str,
                                           reverse: bool) -> None:
    client, sweep_id = sweep
    order = [v for p in (1, 2, 3) for v in variants(client.get(f"/sweeps/{sweep_id}",
                                                                 params={"sort": sort, "page": p}).text)]
    def values(v: int) -> float:
        step = 1 + (v * 37) % ROWS
        return {"time_s": 1e-3 * step, "tokens_per_s": 1e4 / step, "variant": float(v)}[key]

    assert [values(v) for v in order] == sorted((values(v) for v in order), reverse=reverse)
    assert len(order) == ROWS


def test_unknown_sort_falls_back_to_the_workload_order(sweep: tuple[TestClient, int]) -> None:
    client, sweep_id = sweep
    html = client.get(f"/sweeps/{sweep_id}", params={"sort": "<script>"}).text
    assert "Sorted by workload, Pareto first, cost" in html and "<script>" not in html.split("<h1>")[1]
    assert variants(html) == variants(client.get(f"/sweeps/{sweep_id}").text)


def test_axis_columns_are_headed_in_words(sweep: tuple[TestClient, int]) -> None:
    client, sweep_id = sweep
    html = client.get(f"/sweeps/{sweep_id}").text
    assert f'<th scope="col" title="{DRAM}">DRAM bandwidth</th>' in html
    assert f'<th scope="col" title="{PEAK}">Peak FLOP/s (all engines)</th>' in html
    assert sweeps_view.axis_heading("devices") == "Devices"
    head = re.search(r"<thead>(.*?)</thead>", html, re.S)
    assert head is not None and head.group(1).count(">Devices<") == 1
    assert sweeps_view.axis_heading("levels.l2.capacity_bytes") == "L2 capacity"
