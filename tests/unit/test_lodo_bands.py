"""benchmarks/lodo.py's collective rows (issue 24): each data set on the machine it ran on, multi-node rows over an
undescribed network banded apart from the rest."""

from __future__ import annotations

import sys

from benchmark_module import load_benchmark

from perfmodel.specs import load_hardware

lodo = load_benchmark("lodo", "lodo_bands_benchmark")
data = sys.modules["measured_data"]


def _allreduce(dataset: str, hardware: str, devices: int, per_node: int | None) -> object:
    op = {"kind": "allreduce", "bytes": 2.0**20, "devices": devices, "dtype": "fp16"}
    if per_node is not None:
        op["devices_per_node"] = per_node
    return data.Row(dataset, hardware, op, 1e-4, "kernel", "allreduce", "allreduce")


def test_deepbench_all_reduce_runs_on_a_pcie_node() -> None:
    rows = [r for r in data.collectives() if r.dataset == "deepbench"]
    assert len(rows) == 28
    for row in rows:
        ic = load_hardware(row.hardware).interconnect
        assert ic is not None and ic.topology == "pcie" and ic.devices_per_node == 8
        assert row.timing == "kernel"  # a loop of back-to-back calls, divided


def test_vidur_multi_node_rows_are_banded_as_unknown_network() -> None:
    a100 = "nvidia-a100-sxm4-80gb"
    across = _allreduce("vidur", a100, 2, 1)
    on_node = _allreduce("vidur", a100, 8, 8)
    deepbench = _allreduce("deepbench", "nvidia-p100-pcie-16gb", 16, None)  # two 8-GPU nodes, FDR described
    assert lodo._in_scope(across, "across, unknown network") and not lodo._in_scope(across, "network known")
    assert lodo._in_scope(on_node, "network known") and not lodo._in_scope(on_node, "across, unknown network")
    assert lodo._in_scope(deepbench, "across nodes") and lodo._in_scope(deepbench, "network known")
    assert all(lodo._in_scope(r, "all") for r in (across, on_node, deepbench))
