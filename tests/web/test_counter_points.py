"""An uploaded Nsight Compute file: its kernels' own measured points, in the API and on the roofline page."""

from __future__ import annotations

import contextlib
import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.web.conftest import A100, TOKEN, make_app

NCU = Path(__file__).resolve().parents[1] / "data" / "traces" / (
    "attention__actual_parameter_analysis__data__5-9__bert_flashattn_nsight.csv")


@pytest.fixture(scope="module")
def uploaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, int]]:
    with TestClient(make_app(tmp_path_factory.mktemp("counters"))) as client:
        response = client.post("/api/v1/traces", files={"file": (NCU.name, NCU.read_bytes(), "text/csv")},
                               data={"hardware": A100}, headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.status_code == 201, response.text
        yield client, response.json()["id"]


def test_trace_detail_has_each_kernel_against_the_roofs(uploaded: tuple[TestClient, int]) -> None:
    client, upload_id = uploaded
    detail = client.get(f"/api/v1/traces/{upload_id}").json()
    counted = {k["name"] for k in detail["kernel_rows"] if k["counters"]}
    roofline = detail["measured_roofline"]
    assert {k["name"] for k in roofline["kernels"]} == counted and len(counted) == 7
    assert sum(roofline["time_by_headroom"].values()) == pytest.approx(1.0)
    longest = roofline["kernels"][0]
    assert longest["time_s"] == max(k["time_s"] for k in roofline["kernels"])
    assert longest["nearest_roof"] in longest["share_of_roof"]


def test_roofline_page_draws_and_lists_the_counter_points(uploaded: tuple[TestClient, int]) -> None:
    client, upload_id = uploaded
    html = client.get(f"/roofline?hardware={A100}&workload=trace&trace={upload_id}").text
    assert "Kernels with profiler counters" in html and 'id="counters-table"' in html
    table = html[html.index('id="counters-table"'):]
    assert len(re.findall(r'<th scope="row"', table[:table.index("</table>")])) == 7
    assert "<unnamed>" not in html and "&lt;unnamed&gt;" in html  # C++ template names are escaped
    figure = json.loads(re.search(r'<script type="application/json" id="roofline-chart-json">(.*?)</script>',
                                  html, re.S).group(1))  # type: ignore[union-attr]
    counter_traces = [t for t in figure["data"] if "kernel counters" in t.get("name", "")]
    assert counter_traces and all(y > 0 for t in counter_traces for y in t["y"])
    assert "no stored runs for trace" not in html  # the counters source turned each launch into a modelled run


def test_stored_counters_of_repeated_launches_add_totals_and_average_rates(uploaded: tuple[TestClient, int]) -> None:
    client, upload_id = uploaded
    metrics: dict[str, dict[str, float]] = {}
    names: dict[str, str] = {}
    with NCU.open(newline="") as handle:
        for row in csv.DictReader(handle):
            with contextlib.suppress(ValueError):
                metrics.setdefault(row["ID"], {})[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
            names[row["ID"]] = row["Kernel Name"]
    repeated = max(set(names.values()), key=list(names.values()).count)
    ids = [i for i, n in names.items() if n == repeated]
    assert len(ids) == 4
    seconds = [metrics[i]["sm__cycles_elapsed.avg"] / metrics[i]["sm__cycles_elapsed.avg.per_second"] for i in ids]
    detail = client.get(f"/api/v1/traces/{upload_id}").json()
    rows = [k for k in detail["kernel_rows"] if k["name"] == repeated]  # one row per launch: each its own counted op
    assert sum(r["instances"] for r in rows) == 4
    assert sum(r["duration_s"] for r in rows) == pytest.approx(sum(seconds))
    assert sum(r["counters"]["dram_bytes"] for r in rows) == pytest.approx(
        sum(metrics[i]["dram__bytes.sum"] for i in ids))
    clock = sum(metrics[i]["sm__cycles_elapsed.avg.per_second"] * s for i, s in zip(ids, seconds, strict=True))
    stored_clock = sum(r["counters"]["sm_clock_hz"] * r["duration_s"] for r in rows)
    assert stored_clock == pytest.approx(clock)  # a rate per row, weighted by time: not summed over launches
