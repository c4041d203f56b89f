"""The dashboard's aggregate views read runs as columns and group them (issue 25): the numbers must equal the
per-run definitions they replace, and long tables are paged on the server."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from perfmodel.roofline import predict_many
from perfmodel.store import RunIn
from tests.web.conftest import A100, H100, TOKEN, make_app
from web import runs_view
from web.run_columns import predict_columns, read_run_columns
from web.testing import seed_runs, seed_trace
from web.workloads import from_runs

GEMM = {"kind": "matmul", "m": 500, "n": 4096, "k": 4096, "dtype": "bf16"}
NORM = {"kind": "rmsnorm", "shape": [520, 4096], "dtype": "bf16"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    app = make_app(tmp_path_factory.mktemp("scale"))
    with TestClient(app) as test_client:
        store = app.state.perfmodel.store
        seed_runs(store, 90)
        store.add_runs([RunIn(hardware_id=A100, op=GEMM, measured_time_s=t, source="grouped", tags={"name": "qkv"})
                        for t in (1e-4, 2e-4, 3e-4)] +
                       [RunIn(hardware_id=A100, op=NORM, measured_time_s=5e-6, source="grouped")])
        seed_trace(store, 300, H100)
        yield test_client


def test_columns_predict_each_run_as_predict_many_does(client: TestClient) -> None:
    state = client.app.state.perfmodel  # type: ignore[attr-defined]
    runs = read_run_columns(state.store)
    pred = predict_columns(state, runs)
    assert runs.size == state.store.list_runs(limit=1)[1] and pred.ok.all()
    stored, _ = state.store.list_runs(limit=10_000)
    for row in stored[::7]:
        i = int(np.nonzero(runs.run_id == row.id)[0][0])
        assert runs.measured_s[i] == row.measured_time_s and runs.op_kind[i] == row.op_kind
        assert pred.predicted_s[i] == pytest.approx(float(predict_many(row.hardware_id, [row.op]).time_s[0]))


def test_runs_summary_and_histogram_count_every_run(client: TestClient) -> None:
    state = client.app.state.perfmodel  # type: ignore[attr-defined]
    built = runs_view.build(state, A100, None, None, None)
    rows = {s["op_kind"]: s for s in built["summary"]}
    assert rows["all"]["count"] == built["shown"] == built["total"]
    assert sum(s["count"] for kind, s in rows.items() if kind != "all") == built["shown"]
    runs = read_run_columns(state.store, hardware_id=A100)
    errors = runs_view.error_percent(predict_columns(state, runs).predicted_s, runs.measured_s)
    assert rows["all"]["median_abs_error_percent"] == pytest.approx(float(np.median(np.abs(errors))))
    histogram = runs_view.histogram_figure(errors)
    assert int(np.sum(histogram.data[0].y)) == runs.size  # errors beyond the range fall in the end bins


def test_stored_runs_workload_has_one_entry_per_distinct_op(client: TestClient) -> None:
    state = client.app.state.perfmodel  # type: ignore[attr-defined]
    work = from_runs(state.store, A100, None)
    gemm = work.ops.index(GEMM)
    assert work.counts[gemm] == 3 and work.measured_s[gemm] == pytest.approx(2e-4) and work.names[gemm] == "qkv"
    assert work.counts[work.ops.index(NORM)] == 1
    assert sum(work.counts) == state.store.list_runs(hardware_id=A100, limit=1)[1]


def test_op_table_is_paged_on_the_server(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from web import pages_analysis

    monkeypatch.setattr(pages_analysis, "OPS_PAGE_SIZE", 4)
    path = f"/roofline?hardware={H100}&workload=trace&trace=1"
    first = client.get(path).text
    ops = int(re.search(r"<dt>Ops</dt><dd>(\d+)</dd>", first).group(1))  # type: ignore[union-attr]
    assert ops > 8 and f"Ops 1–4 of {ops}" in first and 'rel="next"' in first and 'rel="prev"' not in first
    table = first[first.index('id="ops-table"'):]
    assert len(re.findall(r'<th scope="row"', table[:table.index("</table>")])) == 4
    second = client.get(path + "&page=2").text
    assert f"Ops 5–8 of {ops}" in second and 'rel="prev"' in second
    last = client.get(path + "&page=999").text  # past the end: the last page
    assert f"of {ops}</span>" in last and 'rel="next"' not in last


@pytest.mark.parametrize("name", ["critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
                                  "activation__relu__nsight_result_first500.csv"])
def test_upload_answer_and_uploads_table_count_the_same_two_things(client: TestClient, name: str) -> None:
    """'kernels' are launches (every timed GPU activity), 'distinct_kernels' the stored rows they group into; the
    uploads table shows both under those names (it showed the rows as 'Kernels' against the answer's launches)."""
    traces = Path(__file__).resolve().parents[1] / "data" / "traces"
    path = traces / name
    if not path.is_file():
        pytest.skip(f"no {path.name}")
    with path.open("rb") as handle:
        answer = client.post("/api/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"},
                             data={"hardware": A100}, files={"file": (path.name, handle)}).json()
    detail = client.get(f"/api/v1/traces/{answer['id']}?kernel_limit=100000").json()
    assert answer["kernels"] == sum(k["instances"] for k in detail["kernel_rows"])
    assert answer["distinct_kernels"] == len(detail["kernel_rows"]) <= answer["kernels"]
    html = client.get("/upload").text
    row = re.search(rf"<tr><td>{answer['id']}</td>.*?</tr>", html, re.S)
    assert row is not None
    cells = re.findall(r'<td class="num">([\d,]+)</td>', row.group(0))
    assert cells == [f"{answer['kernels']:,}", f"{answer['distinct_kernels']:,}"]
    assert "Kernel launches" in html and "Distinct kernels" in html
