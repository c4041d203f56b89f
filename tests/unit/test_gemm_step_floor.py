"""``gemm_jit.best``'s floor per K-step (branch speed32): the candidate table's ``C_STEP_FLOOR`` (load step with one
active tile) and ``C_STEP_FULL`` (every unit active, for grids of at least as many tiles as units) never exceed
``element``'s time per K-step, so the compute floor built on them never exceeds its compute time; ``floors`` never
exceeds any candidate's judged time; the floor is tighter than the compute step alone somewhere; and ``best``
still picks numpy's plain scan's choice to the bit."""

from __future__ import annotations

import numpy as np
import pytest

import perfmodel
from perfmodel.machine import tables
from perfmodel.search import gemm_kernel
from perfmodel.search.gemm_space import compact_space, full_space
from tests.unit.test_gemm_memory_floor import (
    _loaded_kernels,  # noqa: F401 (autouse: the kernels compiled)
    _rows,
    assert_compiled_equals_numpy,
    pytestmark,  # noqa: F401 (skipped without numba)
)

DEVICES = ["nvidia-h100-sxm5-80gb", "nvidia-a100-sxm4-80gb", "amd-mi300x", "nvidia-t4", "google-tpu-v5p",
           "intel-gaudi2", "intel-xeon-platinum-8480"]


@pytest.mark.parametrize("device", DEVICES)
def test_step_floor_is_under_every_candidates_compute_time(device: str) -> None:
    from perfmodel.search import gemm_jit as g
    from perfmodel.search.gemm_kernel import D_FILL, D_REDUCE_BW, D_UNITS

    t = tables(perfmodel.load_hardware(device))
    v = gemm_kernel.device_vector(t)
    bm, bn, bk, stages, split, group = gemm_kernel.space_arrays(full_space(t))
    batch, m, n, k, elem, peak, compulsory, ratio = _rows(t, 11 * len(device), 60)
    table = np.empty((bm.size, g.C_SIZE))
    checked = tighter = full = 0
    for i in range(batch.size):
        g.fill_candidates(v, bm, bn, bk, stages, elem[i], peak[i], table, ratio[i])
        for j in range(i % 5, bm.size, 5):
            e = g.element(v, table, j, bm[j], bn[j], stages[j], split[j], group[j], batch[i], m[i], n[i], k[i],
                          elem[i], compulsory[i], ratio[i])
            mt, nt, ks = np.ceil(m[i] / bm[j]), np.ceil(n[i] / bn[j]), np.ceil(k[i] / split[j])
            tiles = batch[i] * mt * nt * split[j]
            steps = np.ceil(ks / table[j, g.C_BK])
            at_full = tiles >= v[D_UNITS]
            step = table[j, g.C_STEP_FULL] if at_full else table[j, g.C_STEP_FLOOR]
            partial = (2.0 * split[j] * batch[i] * m[i] * n[i] * 4.0 if split[j] > 1.0 else 0.0) / v[D_REDUCE_BW]
            floor = np.ceil(tiles / v[D_UNITS]) * (steps * step) + v[D_FILL] + partial
            assert floor <= e[0], (device, i, j, floor, e[0])  # e[0]: the compute time
            assert table[j, g.C_STEP_FLOOR] <= table[j, g.C_STEP_FULL]
            checked += 1
            full += bool(at_full)
            tighter += step > table[j, g.C_COMPUTE_STEP]
    assert checked > 0 and full > 0 and tighter > 0


@pytest.mark.parametrize("device", DEVICES)
def test_floors_are_under_every_candidates_judged_time(device: str) -> None:
    from perfmodel.search import gemm_jit as g
    from perfmodel.search.gemm_floor import candidate_codes, floors, scratch
    from perfmodel.search.gemm_kernel import D_IN_FLIGHT, D_LLC_FED

    t = tables(perfmodel.load_hardware(device))
    v = gemm_kernel.device_vector(t)
    for space in (compact_space(t), full_space(t)):
        bm, bn, bk, stages, split, group = gemm_kernel.space_arrays(space)
        codes, values, order, starts = candidate_codes(bm, bn, split, bk)
        per = scratch(codes, bm.size)
        table = np.empty((bm.size, g.C_SIZE))
        batch, m, n, k, elem, peak, compulsory, ratio = _rows(t, 13 * len(device), 30 if space.size > 1000 else 300)
        for i in range(batch.size):
            g.fill_candidates(v, bm, bn, bk, stages, elem[i], peak[i], table, ratio[i])
            bounded = bool(v[D_LLC_FED] > 0.0 and v[D_IN_FLIGHT] > 0.0 and compulsory[i] >= 0.0)
            floor = np.empty(bm.size)
            floors(v, table, bm, bn, stages, codes, values, order, starts, per, batch[i], m[i], n[i], k[i], elem[i],
                   compulsory[i], ratio[i], bounded, floor)
            for j in range(bm.size):
                judged = g.element(v, table, j, bm[j], bn[j], stages[j], split[j], group[j], batch[i], m[i], n[i],
                                   k[i], elem[i], compulsory[i], ratio[i])[4]
                assert not floor[j] > judged, (device, i, j, floor[j], judged)


@pytest.mark.parametrize("device", ["nvidia-h100-sxm5-80gb", "nvidia-t4", "google-tpu-v5p",
                                    "intel-xeon-platinum-8480"])
def test_best_equals_numpy_where_grids_straddle_the_units(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """M from 1 to ~2 waves of the largest tile over the units, N and K across their ranges: grids on both sides of
    tiles = units, where the floor switches column."""
    t = tables(perfmodel.load_hardware(device))
    rng = np.random.default_rng(len(device))
    count = 1200
    m = 1.0 + rng.integers(0, 2 * 256 * int(t.gemm_units or t.units), count)
    n = rng.choice([16.0, 128.0, 256.0, 1000.0, 4096.0], count)
    k = rng.choice([16.0, 64.0, 512.0, 4096.0, 8192.0], count)
    batch = rng.integers(1, 3, count) * 1.0
    elem = rng.choice([1.0, 2.0, 4.0], count)
    peak = rng.choice(t.matrix_peak[t.matrix_peak > 0], count)
    compulsory = batch * elem * (m * k + k * n + m * n)
    ratio = rng.choice([0.5, 1.0, 1.0], count)
    assert_compiled_equals_numpy(t, compact_space(t), (batch, m, n, k, elem, peak, compulsory, ratio), monkeypatch)
