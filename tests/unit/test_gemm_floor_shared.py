"""``gemm_floor.floors`` (branch speed31): the per-candidate floors of ``gemm_jit.best``'s bounded scan, figured from
per-op tile counts and K-steps per distinct value and visited by (split, K-step width), equal to the bit the
candidate-by-candidate floors they replace (compute floor and ``memory_floor``), with the same seed, on spaces in
their own order and shuffled, and ``best`` still equals numpy's plain scan on a shuffled space."""

from __future__ import annotations

import numpy as np
import pytest

import perfmodel
from perfmodel.machine import tables
from perfmodel.search import gemm_kernel
from perfmodel.search.gemm_space import GemmCandidates, compact_space, full_space
from tests.unit.test_gemm_memory_floor import (
    _loaded_kernels,  # noqa: F401 (autouse: the kernels compiled)
    _rows,
    assert_compiled_equals_numpy,
    pytestmark,  # noqa: F401 (skipped without numba)
)

DEVICES = ["nvidia-h100-sxm5-80gb", "amd-mi300x", "nvidia-t4", "google-tpu-v5p", "intel-gaudi2",
           "intel-xeon-platinum-8480"]


def _reference(v: np.ndarray, c: np.ndarray, arrays: tuple[np.ndarray, ...], b: float, mm: float, nn: float,
               kk: float, eb: float, comp: float, rb: float, bounded: bool) -> tuple[np.ndarray, int]:
    """The floors and seed as ``best`` figured them before speed31, candidate by candidate in index order (with
    speed32's floor per K-step)."""
    from perfmodel.search import gemm_jit as g
    from perfmodel.search.gemm_kernel import D_FILL, D_OVERHEAD, D_REDUCE_BW, D_UNITS

    bm, bn, _bk, stages, split, _group = arrays
    floor = np.empty(bm.size)
    least, seed = np.inf, -1
    for j in range(bm.size):
        s, kstep = split[j], c[j, g.C_BK]
        mt, nt, ks = np.ceil(mm / bm[j]), np.ceil(nn / bn[j]), np.ceil(kk / s)
        if c[j, g.C_REJECT] > 0.0 or (s > 1.0 and ks < kstep) or c[j, g.C_GRANULAR] > 0.0:
            floor[j] = np.inf
            continue
        partials = 2.0 * s * b * mm * nn * 4.0 if s > 1.0 else 0.0
        tiles = b * mt * nt * s
        least_step = c[j, g.C_STEP_FULL] if tiles >= v[D_UNITS] else c[j, g.C_STEP_FLOOR]  # speed32's step floor
        x = (np.ceil(tiles / v[D_UNITS]) * (np.ceil(ks / kstep) * least_step) + v[D_FILL]
             + partials / v[D_REDUCE_BW])
        if bounded:
            x = max(x, g.memory_floor(v, c, j, bm[j], bn[j], stages[j], s, b, mm, nn, mt, nt, ks, eb, comp, rb))
        x = x + (v[D_OVERHEAD] if s > 1.0 and rb >= 1.0 else 0.0)
        floor[j] = x
        if x < least:
            least, seed = x, j
    return floor, seed


def _shuffled(space: GemmCandidates, seed: int) -> GemmCandidates:
    return space.take(np.random.default_rng(seed).permutation(space.size))


@pytest.mark.parametrize("device", DEVICES)
def test_floors_and_seed_equal_the_candidate_by_candidate_ones(device: str) -> None:
    from perfmodel.search import gemm_jit as g
    from perfmodel.search.gemm_floor import candidate_codes, floors, scratch
    from perfmodel.search.gemm_kernel import D_IN_FLIGHT, D_LLC_FED

    t = tables(perfmodel.load_hardware(device))
    v = gemm_kernel.device_vector(t)
    checked = pruned = 0
    for space in (compact_space(t), _shuffled(compact_space(t), 1), _shuffled(full_space(t), 2)):
        arrays = gemm_kernel.space_arrays(space)
        bm, bn, bk, stages, split, _group = arrays
        codes, values, order, starts = candidate_codes(bm, bn, split, bk)
        per = scratch(codes, bm.size)
        table = np.empty((bm.size, g.C_SIZE))
        batch, m, n, k, elem, peak, compulsory, ratio = _rows(t, len(device), 40 if space.size > 1000 else 200)
        for i in range(batch.size):
            g.fill_candidates(v, bm, bn, bk, stages, elem[i], peak[i], table, ratio[i])
            bounded = bool(v[D_LLC_FED] > 0.0 and v[D_IN_FLIGHT] > 0.0 and compulsory[i] >= 0.0)
            got = np.empty(bm.size)
            seed = floors(v, table, bm, bn, stages, codes, values, order, starts, per, batch[i], m[i], n[i], k[i],
                          elem[i], compulsory[i], ratio[i], bounded, got)
            want, want_seed = _reference(v, table, arrays, batch[i], m[i], n[i], k[i], elem[i], compulsory[i],
                                         ratio[i], bounded)
            np.testing.assert_array_equal(got, want, err_msg=f"{device} row {i}")
            assert seed == want_seed, (device, i)
            checked += 1
            pruned += int(np.isinf(want).sum())
    assert checked > 0 and pruned > 0


@pytest.mark.parametrize("device", ["nvidia-h100-sxm5-80gb", "amd-mi300x", "google-tpu-v5p"])
def test_best_on_a_shuffled_space_equals_numpy(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    t = tables(perfmodel.load_hardware(device))
    space = _shuffled(compact_space(t), 7)
    args = _rows(t, 5 * len(device), 800)
    assert_compiled_equals_numpy(t, space, args, monkeypatch)


def test_codes_group_the_candidates_by_split_and_width() -> None:
    from perfmodel.search.gemm_floor import candidate_codes

    bm = np.array([64.0, 32.0, 64.0, 128.0, 32.0])
    bn = np.array([32.0, 32.0, 64.0, 64.0, 128.0])
    split = np.array([2.0, 1.0, 2.0, 1.0, 4.0])
    bk = np.array([64.0, 128.0, 128.0, 64.0, 64.0])
    codes, values, order, starts = candidate_codes(bm, bn, split, bk)
    assert codes[4, :4].tolist() == [3, 3, 3, 2]
    assert values[2, :3].tolist() == [1.0, 2.0, 4.0]
    assert codes[5, :2].tolist() == [0, 1]  # the first candidate of each K-step width
    groups = [order[starts[p]:starts[p + 1]].tolist() for p in range(starts.size - 1)]
    assert groups == [[3], [1], [0], [2], [4], []]  # (split 1: 64, 128), (split 2: 64, 128), (split 4: 64, 128)
