"""benchmarks/lodo.py's collective rows (issue 24): each data set on the machine it ran on, multi-node rows over an
undescribed network banded apart from the rest."""

from __future__ import annotations

import sys
from pathlib import Path

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


def test_vidurs_unsynchronised_all_reduce_lasts_at_least_the_peer_issue_interval() -> None:
    """Vidur's all-reduce (rank 0's kernels over eager, unsynchronised calls) is max(device time, the host's issue
    interval); its send/recv and the other data sets' all-reduce are device time."""
    a100 = "nvidia-a100-sxm4-80gb"
    small = {"kind": "allreduce", "bytes": 2048.0, "devices": 8, "devices_per_node": 8, "dtype": "fp16"}
    send = {**small, "kind": "sendrecv", "devices": 2, "devices_per_node": 2}
    rows = [data.Row("vidur", a100, small, 3e-5, "kernel", "allreduce", "allreduce"),
            data.Row("llmcompass", a100, small, 3e-5, "kernel", "allreduce", "allreduce"),
            data.Row("vidur", a100, send, 3e-5, "kernel", "sendrecv", "sendrecv")]
    shipped = {a100: lodo.defaults_for(load_hardware(a100))}
    device = lodo._predict(rows, shipped)
    held = lodo._predict(rows, shipped, {"peer_issue_interval_s": 60e-6})
    assert device[0] < 60e-6 and held[0] == 60e-6
    assert list(held[1:]) == list(device[1:])


def test_collective_rows_choose_only_collective_defaults() -> None:
    """The joint refit: kernel defaults are chosen on the kernel rows alone, collective ones on the collective rows
    alone, so adding collective rows never moves a kernel default."""
    a100 = "nvidia-a100-sxm4-80gb"
    kernels = [r for r in data.vidur() if r.hardware == a100][:40:4]
    ar = [r for r in data.collectives() if r.dataset == "llmcompass"][::4]
    shipped = {a100: lodo.defaults_for(load_hardware(a100))}
    grids = {k: lodo.GRIDS[k] for k in ("kernel_overhead_s", "link_efficiency")}
    alone = lodo.fit_defaults(kernels, shipped, grids)
    both = lodo.fit_defaults([*kernels, *ar], shipped, grids)
    assert both["kernel_overhead_s"] == alone["kernel_overhead_s"]
    assert lodo.fit_defaults(ar, shipped, grids)["link_efficiency"] == both["link_efficiency"]


def test_vidur_multi_node_rows_run_over_an_undescribed_socket_network() -> None:
    """Vidur names no network: its multi-node collectives are predicted over NCCL's TCP sockets on one 100 GbE port
    per node (UNDESCRIBED_NETWORK), its one-node rows and the other data sets' rows over the spec's own fabric."""
    a100 = "nvidia-a100-sxm4-80gb"
    across = _allreduce("vidur", a100, 2, 1)
    on_node = _allreduce("vidur", a100, 8, 8)
    other = _allreduce("llmcompass", a100, 2, 1)
    assert lodo._undescribed_network(across)
    assert not lodo._undescribed_network(on_node) and not lodo._undescribed_network(other)
    variant = lodo.undescribed_network_variant(a100)
    assert variant.interconnect is not None and variant.interconnect.network_transport == "socket"
    shipped = {a100: lodo.defaults_for(load_hardware(a100))}
    slow, fast = lodo._predict([across, other], shipped)
    assert slow > 2 * fast  # 6.25 GB/s through the port against one 20 GB/s HDR NIC
    assert lodo._predict([on_node], shipped)[0] == lodo._predict([_allreduce("llmcompass", a100, 8, 8)], shipped)[0]


def test_a_saved_held_out_run_is_read_back_only_for_the_same_rows_and_folds(tmp_path: Path) -> None:
    import numpy as np
    import pytest

    rows = [_allreduce("deepbench", "nvidia-p100-pcie-16gb", 8, None),
            _allreduce("vidur", "nvidia-a100-sxm4-80gb", 8, 8)]
    fold_of = np.array([r.hardware for r in rows])  # type: ignore[attr-defined]
    path = tmp_path / "heldout.npz"
    np.savez_compressed(path, classes=np.array(["allreduce"] * 2), devices=fold_of, folds=fold_of,
                        measured=np.array([1e-4, 1e-4]), predicted=np.array([2e-4, 3e-4]),
                        shipped=np.array([1.5e-4, 2.5e-4]))
    folds = lodo.heldout_folds(rows, fold_of, path)
    np.testing.assert_array_equal(folds.predicted, [2e-4, 3e-4])
    np.testing.assert_array_equal(folds.shipped, [1.5e-4, 2.5e-4])
    with pytest.raises(SystemExit):  # another fold split (one vendor out) is not this run
        lodo.heldout_folds(rows, np.array(["nvidia", "nvidia"]), path)
    with pytest.raises(SystemExit):  # other rows
        lodo.heldout_folds(rows[:1], fold_of[:1], path)
