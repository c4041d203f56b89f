"""``evaluate`` times collectives on their own rows only (``roofline``: the rest of a mixed batch costs nothing in
``collective_time``): the answers are those of the whole-row call, to the bit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel import collectives
from perfmodel.machine import tables
from perfmodel.ops import make_op
from perfmodel.ops.collective import ALGORITHMS, COMM_KINDS
from perfmodel.roofline import work_of
from perfmodel.search import call_memo

DEVICES = ["nvidia-h100-sxm5-80gb", "nvidia-a100-pcie-80gb", "nvidia-l4", "amd-mi300x", "google-tpu-v5p",
           "intel-gaudi3"]


@pytest.mark.parametrize("device", DEVICES)
def test_collective_time_row_by_row(device: str) -> None:
    """Any subset of rows gives the whole call's values on those rows (every kind, node split and algorithm)."""
    rng = np.random.default_rng(len(device))
    n = 4000
    kind = rng.integers(0, len(COMM_KINDS), n)
    size = rng.choice([1.0, 64.0, 4096.0, 1e5, 3e6, 1e8, 5e9], n) * rng.uniform(0.5, 2.0, n)
    devices = rng.choice([1.0, 2.0, 4.0, 8.0, 16.0, 64.0, 512.0], n)
    per_node = rng.choice([0.0, 1.0, 2.0, 4.0, 8.0], n)
    algo = rng.integers(0, len(ALGORITHMS), n)
    t = tables(perfmodel.load_hardware(device))
    with call_memo.not_kept():
        whole = collectives.collective_time(t, kind, size, devices, per_node, algo)
        for at in (np.flatnonzero(kind > 0), np.sort(rng.choice(n, 37, replace=False)), np.array([n - 1])):
            part = collectives.collective_time(t, kind[at], size[at], devices[at], per_node[at], algo[at])
            assert part.tobytes() == whole[at].tobytes()
    assert np.isfinite(whole).all() and (whole[kind > 0] > 0).any()


def _mix(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    out: list[dict[str, Any]] = []
    for i in range(n):
        pick = int(rng.integers(0, 6))
        if pick == 0:
            out.append({"kind": "matmul", "m": 16 + i, "n": 4096, "k": 1024, "dtype": "bf16"})
        elif pick == 1:
            out.append({"kind": "rmsnorm", "shape": [8 + i, 4096], "dtype": "bf16"})
        elif pick == 2:
            out.append({"kind": "hostcopy", "bytes": 1e6 + i, "pageable": bool(i % 2)})
        else:
            kind = str(rng.choice(["allreduce", "allgather", "reducescatter", "alltoall", "sendrecv"]))
            op: dict[str, Any] = {"kind": kind, "bytes": float(rng.choice([1e3, 1e6, 1e9])) + i,
                                  "devices": int(rng.choice([2, 8, 16, 64]))}
            if i % 3 == 0 and kind != "sendrecv":
                op["algorithm"] = str(rng.choice(ALGORITHMS))
            if i % 5 == 0:
                op["devices_per_node"] = int(rng.choice([1, 4, 8]))
            out.append(op)
    return out


def _same(got: perfmodel.CostBatch, want: perfmodel.CostBatch) -> None:
    assert got.to_dicts() == want.to_dicts()
    for name in ("time_s", "overhead_s", "compulsory_bytes", "utilization", "uncalibrated_interval_s"):
        assert getattr(got, name).tobytes() == getattr(want, name).tobytes(), name
    assert got.notes == want.notes


@pytest.mark.parametrize("device", ["nvidia-h100-sxm5-80gb", "amd-mi300x", "google-tpu-v5p"])
def test_a_mixed_batch_gives_each_groups_own_answers(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The collectives of a mixed batch (only their rows timed) equal a batch of collectives alone (every row
    timed), and the other rows a batch without collectives, to the bit; the call sees the collectives' rows only."""
    dicts = _mix(600, len(device))
    comm = np.array([d["kind"] not in ("matmul", "rmsnorm") for d in dicts])
    seen: list[int] = []
    real = collectives.collective_time

    def spy(*args: Any) -> Any:
        seen.append(len(args[1]))
        return real(*args)

    monkeypatch.setattr(collectives, "collective_time", spy)
    with call_memo.not_kept():
        mixed = perfmodel.predict_many(device, dicts)
        assert seen == [int(comm.sum())]
        alone = perfmodel.predict_many(device, [d for d, c in zip(dicts, comm, strict=True) if c])
        rest = perfmodel.predict_many(device, [d for d, c in zip(dicts, comm, strict=True) if not c])
    _same(mixed.take(np.flatnonzero(comm)), alone)
    _same(mixed.take(np.flatnonzero(~comm)), rest)
    hw = perfmodel.load_hardware(device)  # and the whole-row call on the batch's own work
    work = work_of([make_op(d) for d in dicts], float(hw.dram.access_granularity_bytes or 1))
    with call_memo.not_kept():
        whole = real(tables(hw), work.comm_kind, work.comm_bytes, work.comm_devices, work.comm_devices_per_node,
                     work.comm_algorithm)
    assert mixed.time_s_by_engine["interconnect"].tobytes() == whole.tobytes()
    assert (whole[comm] > 0).all() and not whole[~comm].any()
