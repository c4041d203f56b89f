"""Waiting for peers inside NCCL kernels, from several ranks' traces of one step."""

from __future__ import annotations

from dataclasses import replace

import pytest
from trace_builders import DATA

from perfmodel.traces import parse_trace
from perfmodel.traces.matching import match_runs
from perfmodel.traces.peer_wait import kernel_waits, net_of_waiting, peer_wait
from perfmodel.traces.records import CommArgs, KernelRecord, ParsedTrace

ALLREDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, ncclWorkElem)"


def _rank(*spans: tuple[float, float], name: str = ALLREDUCE) -> ParsedTrace:
    kernels = [KernelRecord(name, "kernel", duration, "test", start_s=start) for start, duration in spans]
    kernels.append(KernelRecord("ampere_sgemm_128x64_nn", "kernel", 1.0, "test", start_s=0.0))
    return ParsedTrace("test", kernels)


def test_the_early_rank_waits_until_the_last_one_arrives() -> None:
    # collective 1: rank 0 starts at 0, rank 1 at 3 ms, both end at 5 ms; collective 2: rank 1 is early
    waits, notes = peer_wait([_rank((0.0, 5e-3), (10e-3, 2e-3)), _rank((3e-3, 2e-3), (9e-3, 3e-3))])
    assert notes == []
    assert [w.kernels for w in waits] == [2, 2]
    assert [w.time_s for w in waits] == pytest.approx([7e-3, 5e-3])
    assert [w.wait_s for w in waits] == pytest.approx([3e-3, 1e-3])
    assert waits[0].wait_share == pytest.approx(3 / 7)


def test_waiting_is_capped_at_the_kernel_time_and_unpaired_kernels_are_noted() -> None:
    waits, notes = peer_wait([_rank((0.0, 1e-3), (5e-3, 1e-3)), _rank((4e-3, 1e-3))])
    assert waits[0].wait_s == pytest.approx(1e-3) and waits[0].kernels == 1
    assert notes and "[2, 1] kernels per rank" in notes[0]


def test_one_rank_alone_cannot_say() -> None:
    with pytest.raises(ValueError, match="at least two ranks"):
        peer_wait([_rank((0.0, 1e-3))])


def test_two_real_sampled_ranks_of_one_step() -> None:
    """HTA's sampled ranks 0 and 1 of a 128-rank job, the same step: a third to a half of their NCCL time waits."""
    ranks = [parse_trace(DATA / name) for name in ("timeline_analysis__sampled_rank-0.json.gz",
                                                   "trace_filter__sampled_rank-1.json.gz")]
    waits, notes = peer_wait(ranks)
    assert notes == [] and [w.kernels for w in waits] == [10, 10]
    assert all(0.2 < w.wait_share < 0.6 for w in waits)


def test_a_ranks_collective_runs_are_scored_net_of_their_waiting() -> None:
    ranks = [_rank((0.0, 5e-3)), _rank((3e-3, 2e-3))]
    waits, _ = kernel_waits(ranks)
    assert waits == [{0: pytest.approx(3e-3)}, {0: 0.0}]
    kernels = [k for k in ranks[0].kernels if k.name == ALLREDUCE]
    result = match_runs(ParsedTrace("test", [replace(kernels[0], collective=CommArgs("allreduce", 1024, 1024, 2,
                                                                                     "Float"))]))
    net = net_of_waiting(result, waits[0])
    (run,) = net.runs
    assert run.measured_time_s == pytest.approx(2e-3) and net.matched_time_s == pytest.approx(2e-3)
    assert "net of 3000 us waiting for peers" in run.notes[-1]
    assert result.runs[0].measured_time_s == pytest.approx(5e-3)  # the input is left as it was
