"""``gemm_jit.best``'s floor pass in two parts (branch speed33): the first split's floors, then the other splits'
cut at the seed's judged time. A skipped split's candidates all have full floors above the cut (so none could win
or tie), the floors kept equal the full pass's to the bit, the cut skips something on the all-distinct benchmark's
kind of GEMMs, ``best`` still equals numpy's plain scan, and the wave count by a low reciprocal equals
ceil(tiles / units)."""

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

DEVICES = ["nvidia-h100-sxm5-80gb", "amd-mi300x", "nvidia-t4", "google-tpu-v5p", "intel-gaudi2",
           "intel-xeon-platinum-8480"]


@pytest.mark.parametrize("device", DEVICES)
def test_a_cut_split_holds_only_floors_above_the_cut(device: str) -> None:
    from perfmodel.search import gemm_jit as g
    from perfmodel.search.gemm_floor import candidate_codes, floors, scratch
    from perfmodel.search.gemm_kernel import D_IN_FLIGHT, D_LLC_FED

    t = tables(perfmodel.load_hardware(device))
    v = gemm_kernel.device_vector(t)
    skipped = 0
    for space in (compact_space(t), full_space(t)):
        arrays = gemm_kernel.space_arrays(space)
        bm, bn, bk, stages, split, group = arrays
        codes, values, order, starts = candidate_codes(bm, bn, split, bk)
        per = scratch(codes, bm.size)
        table = np.empty((bm.size, g.C_SIZE))
        batch, m, n, k, elem, peak, compulsory, ratio = _rows(t, 3 * len(device), 30 if space.size > 1000 else 200)
        for i in range(batch.size):
            g.fill_candidates(v, bm, bn, bk, stages, elem[i], peak[i], table, ratio[i])
            bounded = bool(v[D_LLC_FED] > 0.0 and v[D_IN_FLIGHT] > 0.0 and compulsory[i] >= 0.0)
            row = (batch[i], m[i], n[i], k[i], elem[i], compulsory[i], ratio[i], bounded)
            full = np.empty(bm.size)
            floors(v, table, bm, bn, stages, codes, values, order, starts, per, *row, full)
            cut = np.empty(bm.size)
            seed = floors(v, table, bm, bn, stages, codes, values, order, starts, per, *row, cut, 0, 1)
            if seed < 0:
                continue
            judged = g.element(v, table, seed, bm[seed], bn[seed], stages[seed], split[seed], group[seed],
                               batch[i], m[i], n[i], k[i], elem[i], compulsory[i], ratio[i])[4]
            floors(v, table, bm, bn, stages, codes, values, order, starts, per, *row, cut, 1, -1, judged)
            kept = np.isfinite(cut)
            np.testing.assert_array_equal(cut[kept], full[kept], err_msg=f"{device} row {i}")
            assert (full[~kept] > judged).all(), (device, i)  # +inf (rejected) or above the cut
            skipped += int((np.isfinite(full) & ~kept).sum())
    assert skipped > 0


@pytest.mark.parametrize("device", ["nvidia-h100-sxm5-80gb", "nvidia-t4", "google-tpu-v5p"])
def test_best_with_the_cut_equals_numpy(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    t = tables(perfmodel.load_hardware(device))
    assert_compiled_equals_numpy(t, compact_space(t), _rows(t, 11 * len(device), 800), monkeypatch)


def test_the_wave_count_by_a_low_reciprocal_is_the_ceiling() -> None:
    from perfmodel.search.gemm_floor import WAVE_SLACK

    tiles = np.concatenate([np.arange(1.0, 5000.0), 2.0 ** np.arange(13, 40), 3.0 ** np.arange(8, 25)])
    for units in (1.0, 2.0, 7.0, 80.0, 108.0, 132.0, 304.0, 1024.0):
        low = 1.0 / units * (1.0 - WAVE_SLACK)
        np.testing.assert_array_equal(np.ceil(tiles * low), np.ceil(tiles / units), err_msg=str(units))
