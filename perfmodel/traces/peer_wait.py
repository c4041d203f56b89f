"""How much of each rank's NCCL/RCCL kernel time is waiting for its peers, when the ranks' traces are given together.

A collective kernel starts on each rank when that rank launches it, but moves data only once the last rank has
arrived: on rank r, ``wait = min(last start - start_r, duration_r)``, the rest is the transfer the model predicts.
The i-th collective kernel of one name on one rank is matched with the i-th of that name on the others (NCCL runs
a communicator's collectives in the same order on every rank). The traces' clocks must be comparable (one host,
or hosts synchronised by NTP/PTP to well under a kernel's time): a rank whose clock is off shows as waiting.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from perfmodel.traces.kernel_names import kernel_family
from perfmodel.traces.records import KernelRecord, ParsedTrace


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


def _collectives(parsed: ParsedTrace) -> dict[str, list[KernelRecord]]:
    out: dict[str, list[KernelRecord]] = defaultdict(list)
    for kernel in parsed.kernels:
        if kernel.start_s is not None and kernel_family(kernel.name) == "collective":
            out[kernel.name].append(kernel)
    for kernels in out.values():
        kernels.sort(key=lambda k: k.start_s or 0.0)
    return out


def peer_wait(ranks: Sequence[ParsedTrace]) -> tuple[list[RankWait], list[str]]:
    """Per rank (in the given order) its collective kernel time and waiting time, and notes on what did not pair
    up (a kernel name with different counts on different ranks: only the first ``min`` are paired)."""
    if len(ranks) < 2:
        raise ValueError("peer waiting needs the traces of at least two ranks of one job")
    per_rank = [_collectives(parsed) for parsed in ranks]
    totals = [[0, 0.0, 0.0] for _ in ranks]
    notes: list[str] = []
    names = set().union(*per_rank)
    for name in sorted(names):
        lists = [kernels.get(name, []) for kernels in per_rank]
        counts = [len(k) for k in lists]
        if len(set(counts)) > 1:
            notes.append(f"{name[:60]}: {counts} kernels per rank, the first {min(counts)} paired")
        for i in range(min(counts)):
            starts = [k[i].start_s or 0.0 for k in lists]
            last = max(starts)
            for r, kernels in enumerate(lists):
                kernel = kernels[i]
                totals[r][0] += 1
                totals[r][1] += kernel.duration_s
                totals[r][2] += min(last - starts[r], kernel.duration_s)
    return [RankWait(r, int(n), t, w) for r, (n, t, w) in enumerate(totals)], notes
