"""A brute-force loop-nest simulator counts the bytes each level moves for one GEMM schedule;
the analytical traffic of ``perfmodel.search.gemm_cost`` must equal it exactly.

The simulated kernel: for each K-split, for each group of G tile-rows, for each tile-column,
for each tile-row of the group, one CTA tile; each K-step loads its A block (BM x BK) and B
block (BK x BN) from L2 into SMEM (valid elements only), and each of the 2 x 2 warps reads its
half of both from SMEM. L2 keeps A panels (BM x Ks) and B panels (Ks x BN) in two LRU halves of
half the L2 each (the model's usable share), sized by whole tiles; a miss reads the panel's
valid bytes from DRAM. C is written once.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest

import perfmodel
from perfmodel.hardware import Hardware
from perfmodel.machine import tables
from perfmodel.search.gemm_cost import gemm_costs
from perfmodel.search.gemm_space import GemmCandidates


class Lru:
    def __init__(self, capacity: float) -> None:
        self.capacity = capacity
        self.held: OrderedDict[tuple[int, int], float] = OrderedDict()

    def touch(self, key: tuple[int, int], size: float) -> bool:
        """True on a hit; on a miss, insert (evicting least recently used)."""
        if key in self.held:
            self.held.move_to_end(key)
            return True
        self.held[key] = size
        while sum(self.held.values()) > self.capacity and len(self.held) > 1:
            self.held.popitem(last=False)
        if sum(self.held.values()) > self.capacity:
            self.held.popitem(last=False)
        return False


def simulate(m: int, n: int, k: int, bm: int, bn: int, bk: int, split: int, group: int, elem: float,
             llc_half: float) -> dict[str, float]:
    mt, nt, ks = math.ceil(m / bm), math.ceil(n / bn), math.ceil(k / split)
    a_cache, b_cache = Lru(llc_half), Lru(llc_half)
    l2_to_smem = dram = smem_to_rf = 0.0
    for s in range(split):
        k0, k1 = s * ks, min(k, (s + 1) * ks)
        for g0 in range(0, mt, group):
            for j in range(nt):
                for i in range(g0, min(g0 + group, mt)):
                    rows = min(m, (i + 1) * bm) - i * bm
                    cols = min(n, (j + 1) * bn) - j * bn
                    if not a_cache.touch((i, s), bm * ks * elem):
                        dram += rows * (k1 - k0) * elem
                    if not b_cache.touch((j, s), bn * ks * elem):
                        dram += cols * (k1 - k0) * elem
                    for kk in range(k0, k1, bk):
                        depth = min(k1, kk + bk) - kk
                        l2_to_smem += (rows + cols) * depth * elem
                        smem_to_rf += 2 * 2 * (bm / 2 * bk + bk * bn / 2) * elem
    dram += m * n * elem  # C written once
    return {"l2_to_smem": l2_to_smem, "dram": dram, "smem_to_rf": smem_to_rf}


def analytical(hw: Hardware, m: int, n: int, k: int, bm: int, bn: int, bk: int, split: int, group: int,
               elem: float) -> dict[str, float]:
    t = tables(hw)
    space = GemmCandidates(*(np.array([float(v)]) for v in (bm, bn, bk * elem, 3, split, group)))
    one = np.ones(1)
    compulsory = (m * k + k * n + m * n) * elem
    c = gemm_costs(t, space, one, one * m, one * n, one * k, one * elem, one * t.matrix_peak[3], one * compulsory)
    partials = 2.0 * split * m * n * 4 if split > 1 else 0.0
    return {"l2_to_smem": float(c.reuse_bytes[0, 0]) - m * n * elem - partials,
            "dram": float(c.dram_bytes[0, 0]), "smem_to_rf": float(c.smem_bytes[0, 0])}


CASES = [
    # (m, n, k, bm, bn, bk, split, group, L2 bytes): panels fit / A panels thrash / B panels thrash
    (256, 256, 256, 64, 64, 32, 1, 2, 4 * 2**20),
    (200, 120, 96, 64, 32, 32, 1, 2, 4 * 2**20),     # ragged edges in M, N and K
    (512, 384, 256, 64, 64, 32, 1, 4, 96 * 1024),    # A group panel 64 KiB > 48 KiB half: A re-read
    (512, 384, 256, 64, 64, 32, 1, 1, 300 * 1024),   # A fits, B (192 KiB) > 150 KiB: B re-read per group
    (512, 512, 512, 64, 128, 64, 2, 2, 160 * 1024),  # split-K halves the panels
    (512, 1280, 256, 64, 64, 32, 1, 4, 128 * 1024),  # both thrash
]


@pytest.mark.parametrize(("m", "n", "k", "bm", "bn", "bk", "split", "group", "l2"), CASES)
def test_traffic_matches_the_loop_nest(toy: Hardware, m: int, n: int, k: int, bm: int, bn: int, bk: int,
                                       split: int, group: int, l2: int) -> None:
    hw = perfmodel.derive_variant(toy, "toy-l2", {"levels.L2.capacity_bytes": float(l2)})
    elem = 2.0
    llc_half = l2 * tables(hw).defaults.llc_resident_fraction
    assert tables(hw).mma_k <= bk
    simulated = simulate(m, n, k, bm, bn, bk, split, group, elem, llc_half)
    model = analytical(hw, m, n, k, bm, bn, bk, split, group, elem)
    assert model == pytest.approx(simulated, rel=1e-12)


def test_the_cases_cover_every_regime(toy: Hardware) -> None:
    """Across CASES: A re-read, B re-read, and nothing re-read all occur (not a vacuous check)."""
    seen = set()
    for m, n, k, bm, bn, bk, split, group, l2 in CASES:
        sim = simulate(m, n, k, bm, bn, bk, split, group, 2.0, l2 * 0.5)
        compulsory = (m * k + k * n + m * n) * 2.0
        seen.add("reread" if sim["dram"] > compulsory else "compulsory")
    assert seen == {"reread", "compulsory"}
