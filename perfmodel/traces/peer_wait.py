"""How much of each rank's NCCL/RCCL kernel time is waiting for its peers, when the ranks' traces are given together.

A collective kernel starts on each rank when that rank launches it, but moves data only once the last rank has
arrived: on rank r, ``wait = min(last start - start_r, duration_r)``, the rest is the transfer the model predicts.
The i-th collective kernel of one name on one rank is matched with the i-th of that name on the others (NCCL runs
a communicator's collectives in the same order on every rank). The traces' clocks must be comparable (one host,
or hosts synchronised by NTP/PTP to well under a kernel's time): a rank whose clock is off shows as waiting.
``net_of_waiting`` scores a rank's collective runs against their transfer time, the waiting taken out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from perfmodel.traces.kernel_names import kernel_family
from perfmodel.traces.matching import MatchResult
from perfmodel.traces.records import ParsedTrace


@dataclass(frozen=True)
class RankWait:
    """One rank's collective kernels: their summed time (s) and the part spent waiting for peers (s)."""

    rank: int
    kernels: int
    time_s: float
    wait_s: float

    @property
    def wait_share(self) -> float:
        return self.wait_s / self.time_s if self.time_s > 0 else 0.0


def _collectives(parsed: ParsedTrace) -> dict[str, list[int]]:
    """Indices (into ``parsed.kernels``) of the collective kernels, per name, in start order."""
    out: dict[str, list[int]] = defaultdict(list)
    for index, kernel in enumerate(parsed.kernels):
        if kernel.start_s is not None and kernel_family(kernel.name) == "collective":
            out[kernel.name].append(index)
    for indices in out.values():
        indices.sort(key=lambda i: parsed.kernels[i].start_s or 0.0)
    return out


def kernel_waits(ranks: Sequence[ParsedTrace]) -> tuple[list[dict[int, float]], list[str]]:
    """Per rank, the waiting (s) of each paired collective kernel (kernel index -> s), and notes on what did not
    pair up (a kernel name with different counts on different ranks: only the first ``min`` are paired)."""
    if len(ranks) < 2:
        raise ValueError("peer waiting needs the traces of at least two ranks of one job")
    per_rank = [_collectives(parsed) for parsed in ranks]
    waits: list[dict[int, float]] = [{} for _ in ranks]
    notes: list[str] = []
    for name in sorted(set().union(*per_rank)):
        lists = [indices.get(name, []) for indices in per_rank]
        counts = [len(i) for i in lists]
        if len(set(counts)) > 1:
            notes.append(f"{name[:60]}: {counts} kernels per rank, the first {min(counts)} paired")
        for i in range(min(counts)):
            kernels = [parsed.kernels[indices[i]] for parsed, indices in zip(ranks, lists, strict=True)]
            starts = [k.start_s or 0.0 for k in kernels]
            last = max(starts)
            for r, kernel in enumerate(kernels):
                waits[r][lists[r][i]] = min(last - starts[r], kernel.duration_s)
    return waits, notes


def peer_wait(ranks: Sequence[ParsedTrace]) -> tuple[list[RankWait], list[str]]:
    """Per rank (in the given order) its paired collective kernels' time and waiting time, and notes on what did
    not pair up."""
    waits, notes = kernel_waits(ranks)
    out = []
    for r, (parsed, rank_waits) in enumerate(zip(ranks, waits, strict=True)):
        time_s = sum(parsed.kernels[i].duration_s for i in rank_waits)
        out.append(RankWait(r, len(rank_waits), time_s, sum(rank_waits.values())))
    return out, notes


def net_of_waiting(result: MatchResult, waits: dict[int, float]) -> MatchResult:
    """The match result with each run's measured time less its kernels' waiting for peers (``kernel_waits`` of
    this rank): what the model's transfer time is scored against; each changed run says so in a note."""
    by_run: dict[int, float] = defaultdict(float)
    for index, wait_s in waits.items():
        run_of_kernel = result.kernel_runs[index] if index < len(result.kernel_runs) else None
        if run_of_kernel is not None and wait_s > 0:
            by_run[run_of_kernel] += wait_s
    runs = list(result.runs)
    for run_index, wait_s in by_run.items():
        run = runs[run_index]
        net_s = max(run.measured_time_s - wait_s, 0.0)
        note = (f"scored net of {wait_s * 1e6:.0f} us waiting for peers (ranks given together): "
                f"{run.measured_time_s * 1e6:.0f} -> {net_s * 1e6:.0f} us")
        runs[run_index] = replace(run, measured_time_s=net_s, notes=(*run.notes, note))
    return replace(result, runs=runs, matched_time_s=sum(r.measured_time_s for r in runs))
