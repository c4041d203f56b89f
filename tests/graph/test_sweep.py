"""Design-space sweeps: variants, Pareto fronts, local processes, Dask on loopback, the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from perfmodel.graph import GraphError, sweep_exec
from perfmodel.graph.sweep import SweepSpec, pareto, run_sweep, variants
from perfmodel.store import Store

SPEC: dict[str, Any] = {"base": "nvidia-h100-sxm5-80gb",
        "axes": {"levels.dram.bandwidth_bytes_per_s": ["x0.5", "x1", "x2"], "engines.*.peak_flops_per_s": ["x1", "x2"],
                 "devices": [1, 2]},
        "workloads": [{"model": "llama-3-8b", "phase": "decode", "batch": 8, "kv_len": 2048},
                      {"model": "gpt2", "phase": "prefill", "batch": 4, "prompt_tokens": 512}]}


def test_grid_and_random_variants() -> None:
    spec = SweepSpec.from_json(SPEC)
    assert len(variants(spec)) == 12
    sample = variants(SweepSpec.from_json({**SPEC, "mode": "random", "samples": 5, "seed": 3}))
    assert len(sample) == 5 and len({str(v) for v in sample}) == 5


def test_bad_axis_is_rejected_before_running() -> None:
    with pytest.raises(ValueError, match=r"levels.nope"):
        SweepSpec.from_json({**SPEC, "axes": {"levels.nope.bandwidth_bytes_per_s": ["x2"]}})
    with pytest.raises(GraphError, match=r"workload fields"):
        SweepSpec.from_json({**SPEC, "workloads": [{"model": "gpt2", "bogus": 1}]})


def test_serial_sweep_orders_variants_by_bandwidth() -> None:
    results = run_sweep(SweepSpec.from_json(SPEC))
    rows = results["rows"]
    assert len(rows) == 24 and results["executor"] == "serial"
    decode = {(r["overrides"]["levels.dram.bandwidth_bytes_per_s"], r["overrides"]["engines.*.peak_flops_per_s"],
               r["devices"]): r["time_s"] for r in rows if r["workload"] == 0}
    # decode is weight-bandwidth-bound: 2x bandwidth speeds it up far more than 2x peak
    assert decode[("x2", "x1", 1)] < 0.7 * decode[("x1", "x1", 1)]
    assert decode[("x1", "x2", 1)] > 0.9 * decode[("x1", "x1", 1)]
    for label, front in results["pareto"].items():
        costs = [rows[i]["cost_proxy"] for i in front]
        times = [rows[i]["time_s"] for i in front]
        assert costs == sorted(costs) and times == sorted(times, reverse=True), label
        for r in rows:  # nothing off the front beats a front point on both axes
            if r["label"] == label:
                assert not any(r["cost_proxy"] < rows[i]["cost_proxy"] and r["time_s"] < rows[i]["time_s"]
                               for i in front)


def test_pareto_of_hand_rows() -> None:
    rows = [{"label": "w", "fits": True, "cost_proxy": c, "time_s": t} for c, t in
            [(1.0, 5.0), (2.0, 3.0), (2.0, 4.0), (3.0, 3.5), (4.0, 1.0), (0.5, 9.0)]]
    rows.append({"label": "w", "fits": False, "cost_proxy": 0.1, "time_s": 0.1})
    assert pareto(rows)["w"] == [5, 0, 1, 4]


def test_process_pool_matches_serial() -> None:
    spec = SweepSpec.from_json({**SPEC, "workloads": SPEC["workloads"][:1]})
    serial, local = run_sweep(spec), run_sweep(spec, workers=2)
    assert local["executor"] == "processes"
    assert local["rows"] == serial["rows"] and local["pareto"] == serial["pareto"]


def test_dask_local_cluster_matches_serial() -> None:
    distributed = pytest.importorskip("distributed")
    spec = SweepSpec.from_json({**SPEC, "workloads": SPEC["workloads"][:1]})
    serial = run_sweep(spec)
    ticks: list[tuple[int, int]] = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        remote = run_sweep(spec, client=client, progress=lambda d, t: ticks.append((d, t)))
        before = client.run(sweep_exec.task_cpu_s)
        again = run_sweep(spec, client=client)  # a second sweep on the same client
        spread = [cpu - before[worker] for worker, cpu in client.run(sweep_exec.task_cpu_s).items()]
        via_address = run_sweep(spec, scheduler=cluster.scheduler_address)
    assert remote["executor"] == "dask" and ticks[-1] == (2, 2)  # one task per worker thread
    assert len(spread) == 2 and min(spread) > 0  # one chunk ran on each worker (their task threads' CPU)
    for result in (remote, again, via_address):  # every field of every row, and the Pareto fronts
        assert result["rows"] == serial["rows"] and result["pareto"] == serial["pareto"]


def test_results_are_stored(tmp_path: Path) -> None:
    spec = SweepSpec.from_json({**SPEC, "axes": {"levels.dram.bandwidth_bytes_per_s": ["x1", "x2"]}})
    results = run_sweep(spec)
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    store.migrate()
    sweep_id = store.add_sweep("bw", spec.to_json(), results)
    row = store.get_sweep(sweep_id)
    assert row is not None and row.name == "bw" and len(row.results["rows"]) == 4
    assert row.spec["base"] == "nvidia-h100-sxm5-80gb"
    assert [s.id for s in store.list_sweeps()] == [sweep_id]
