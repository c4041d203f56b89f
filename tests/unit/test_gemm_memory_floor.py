"""``gemm_jit.best``'s DRAM floor (branch speed28): ``memory_floor`` never exceeds the DRAM time ``element`` figures
for the same candidate (a property over shapes, element sizes, B ratios and compulsory bytes on the devices it
applies to), it is above the compute floor for the memory-bound rows it is there for, and the all-distinct table
benchmark's rows get the same choices and figures to the bit as numpy's plain scan."""

from __future__ import annotations

import numpy as np
import pytest

import perfmodel
from perfmodel import columnar
from perfmodel.machine import tables
from perfmodel.search import gemm_kernel
from perfmodel.search.gemm_cost import GemmChoice, best_gemms
from perfmodel.search.gemm_space import GemmCandidates, compact_space, full_space
from tests.benchmark_module import load_benchmark
from tests.unit.test_columnar_chunks import _identical

pytestmark = pytest.mark.skipif(not gemm_kernel.jit_enabled(), reason="numba kernel disabled or not installed")

BOUNDED = ["nvidia-h100-sxm5-80gb", "nvidia-a100-sxm4-80gb", "amd-mi300x", "nvidia-b200", "nvidia-t4"]


@pytest.fixture(autouse=True)
def _loaded_kernels() -> None:
    assert gemm_kernel.load()


def _rows(t: perfmodel.machine.MachineTables, seed: int, count: int = 400) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    m = np.concatenate([1.0 + np.arange(count // 2), 2.0 ** rng.integers(0, 15, count - count // 2)])
    n = rng.choice([16.0, 64.0, 128.0, 512.0, 4096.0, 8192.0, 3.0, 1000.0], count)
    k = rng.choice([16.0, 64.0, 512.0, 8192.0, 65536.0, 7.0, 999.0], count)
    batch = rng.integers(1, 5, count) * 1.0
    elem = rng.choice([0.5, 1.0, 2.0, 4.0], count)
    peak = rng.choice(t.matrix_peak[t.matrix_peak > 0], count)
    compulsory = batch * elem * (m * k + k * n + m * n) * rng.choice([1.0, 0.0, 1e-3, 50.0], count)
    ratio = rng.choice([0.25, 0.5, 1.0, 1.0], count)
    return batch, m, n, k, elem, peak, compulsory, ratio


def assert_compiled_equals_numpy(t: perfmodel.machine.MachineTables, space: GemmCandidates,
                                 args: tuple[np.ndarray, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every field of the compiled search's choice equals the numpy reference's (``PERFMODEL_NO_JIT``), bit for bit."""
    fast = best_gemms(t, space, *args)
    with monkeypatch.context() as patch:
        patch.setenv("PERFMODEL_NO_JIT", "1")
        reference = best_gemms(t, space, *args)
    for name in GemmChoice.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(fast, name), getattr(reference, name), err_msg=name)


@pytest.mark.parametrize("device", BOUNDED)
def test_memory_floor_is_under_every_candidates_dram_time(device: str) -> None:
    from perfmodel.search import gemm_jit
    from perfmodel.search.gemm_kernel import D_IN_FLIGHT, D_LLC_FED

    t = tables(perfmodel.load_hardware(device))
    v = gemm_kernel.device_vector(t)
    if not (v[D_LLC_FED] > 0 and v[D_IN_FLIGHT] > 0):
        pytest.skip("the floor applies where an L2 feeds the tiles and loads in flight bound DRAM's rate")
    space = full_space(t)
    bm, bn, bk, stages, split, group = gemm_kernel.space_arrays(space)
    batch, m, n, k, elem, peak, compulsory, ratio = _rows(t, len(device), 60)
    table = np.empty((bm.size, gemm_jit.C_SIZE))
    above = 0
    for i in range(batch.size):
        gemm_jit.fill_candidates(v, bm, bn, bk, stages, elem[i], peak[i], table, ratio[i])
        for j in range(0, bm.size, 7):
            mt, nt, ks = np.ceil(m[i] / bm[j]), np.ceil(n[i] / bn[j]), np.ceil(k[i] / split[j])
            floor = gemm_jit.memory_floor(v, table, j, bm[j], bn[j], stages[j], split[j], batch[i], m[i], n[i],
                                          mt, nt, ks, elem[i], compulsory[i], ratio[i])
            e = gemm_jit.element(v, table, j, bm[j], bn[j], stages[j], split[j], group[j], batch[i], m[i], n[i],
                                 k[i], elem[i], compulsory[i], ratio[i])
            assert floor <= e[1], (i, j, floor, e[1])  # e[1]: the DRAM time
            above += floor > e[0]  # above the compute time: where it prunes
    assert above > 0


@pytest.mark.parametrize("device", [*BOUNDED, "google-tpu-v5p", "intel-gaudi2"])
def test_bounded_choice_equals_numpy_on_skinny_and_memory_bound_rows(device: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    t = tables(perfmodel.load_hardware(device))
    for space in (compact_space(t), full_space(t)):
        args = _rows(t, 3 * len(device), 300 if space.size > 1000 else 1500)
        assert_compiled_equals_numpy(t, space, args, monkeypatch)


def test_distinct_table_rows_equal_numpys_plain_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """3,000 rows of ``predict_speed.distinct_table`` (each matmul its own GEMM shape) on H100: every output array
    of ``predict_columns`` equal to the bit with the compiled kernel and with numpy."""
    speed = load_benchmark("predict_speed", "predict_speed_for_memory_floor")
    hw = perfmodel.load_hardware("nvidia-h100-sxm5-80gb")
    whole = speed.distinct_table(30_000)
    rows = {key: value[::10] for key, value in whole.items()}  # m, n, k and dtype over their whole ranges
    fast = columnar.predict_columns(hw, rows)
    with monkeypatch.context() as patch:
        patch.setenv("PERFMODEL_NO_JIT", "1")
        reference = columnar.predict_columns(hw, rows)
    _identical(fast, reference)
