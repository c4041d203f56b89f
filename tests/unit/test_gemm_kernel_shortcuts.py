"""The compiled kernels' shortcuts keep numpy's answers (the reference) to the bit: ``best`` skips candidates whose
compute floor exceeds the best time so far (many shapes, devices, and the degenerate ops it scans plainly); the search
kernel shares group-free terms across raster-group variants."""

from __future__ import annotations

import numpy as np
import pytest

import perfmodel
from perfmodel.machine import tables
from perfmodel.search import gemm_kernel
from perfmodel.search.gemm_cost import GemmChoice, best_gemms
from perfmodel.search.gemm_space import compact_space, full_space

DEVICES = ["nvidia-h100-sxm5-80gb", "nvidia-a100-sxm4-80gb", "nvidia-t4", "amd-mi300x", "google-tpu-v5p",
           "generic-npu", "aws-trainium2", "intel-xeon-platinum-8480", "nvidia-b200", "intel-gaudi2"]

pytestmark = pytest.mark.skipif(not gemm_kernel.jit_enabled(), reason="numba kernel disabled or not installed")


def _ops(t: perfmodel.machine.MachineTables, seed: int) -> tuple[np.ndarray, ...]:
    """Skinny, square, split-K-prone (small M x N, long K), batched and odd GEMMs; every element size; the table
    benchmark's rows (M from 1 to 8192, N and K over powers of two); zero and tiny compulsory bytes; B as wide as A
    or stored narrower (weight-only int4 / int8: r = 0.25 / 0.5, whose split-K adds no launch)."""
    rng = np.random.default_rng(seed)
    count = 1500
    pow2 = 2.0 ** rng.integers(0, 15, count)
    odd = rng.integers(1, 20_000, count) * 1.0
    m = np.concatenate([odd[:500], pow2[:500], 1.0 + np.arange(500)])
    n = np.concatenate([rng.permutation(pow2)[:500], rng.permutation(odd)[:500], rng.choice([16.0, 4096.0], 500)])
    k = np.concatenate([rng.permutation(odd)[:500], 2.0 ** rng.integers(10, 21, 500), rng.choice([64.0, 8192.0], 500)])
    batch = rng.integers(1, 9, count) * 1.0
    elem = rng.choice([0.5, 1.0, 2.0, 4.0], count)
    peak = rng.choice(t.matrix_peak[t.matrix_peak > 0], count)
    compulsory = np.where(rng.random(count) < 0.1, 0.0, rng.random(count) * 1e10)
    ratio = rng.choice([0.25, 0.5, 1.0, 1.0], count)
    return batch, m, n, k, elem, peak, compulsory, ratio


def _same(t: perfmodel.machine.MachineTables, space: object, args: tuple[np.ndarray, ...],
          monkeypatch: pytest.MonkeyPatch) -> None:
    fast = best_gemms(t, space, *args)  # type: ignore[arg-type]
    with monkeypatch.context() as patch:
        patch.setenv("PERFMODEL_NO_JIT", "1")
        reference = best_gemms(t, space, *args)  # type: ignore[arg-type]
    for name in GemmChoice.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(fast, name), getattr(reference, name), err_msg=name)


@pytest.fixture(autouse=True)
def _loaded_kernels() -> None:
    assert gemm_kernel.load()


@pytest.mark.parametrize("device", DEVICES)
def test_bounded_choice_equals_numpy_on_the_compact_space(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    t = tables(perfmodel.load_hardware(device))
    _same(t, compact_space(t), _ops(t, len(device)), monkeypatch)


@pytest.mark.parametrize("device", ["nvidia-h100-sxm5-80gb", "google-tpu-v5p", "intel-gaudi2"])
def test_bounded_choice_equals_numpy_on_the_full_space(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    t = tables(perfmodel.load_hardware(device))
    args = tuple(a[::75] for a in _ops(t, 3))  # 20 ops x the full space
    _same(t, full_space(t), args, monkeypatch)


def test_degenerate_ops_take_the_plain_scan_with_numpys_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Zero and fractional dimensions (no floor is claimed for them) and a device that rejects every candidate.
    (M = 0 is left out: numpy's DRAM time is NaN there and the kernel's finite, on main as here.)"""
    t = tables(perfmodel.load_hardware("nvidia-h100-sxm5-80gb"))
    space = compact_space(t)
    m = np.array([0.5, 64.0, 64.0, 4096.0, 1.0, 3.0])
    n = np.array([64.0, 0.0, 64.0, 0.25, 1.0, 3.0])
    k = np.array([64.0, 64.0, 0.0, 4096.0, 1.0, 0.5])
    one = np.ones(m.size)
    args = (one, m, n, k, one * 2.0, one * t.matrix_peak[4], one * 1e6)
    _same(t, space, args, monkeypatch)
    regs = gemm_kernel.device_vector(t)
    regs[gemm_kernel.D_REGISTERS] = 1.0  # every candidate rejected: the smallest footprint, as the plain scan
    bounded, _ = gemm_kernel.best_per_op(regs, space, one, one * 64, one * 64, one * 64, one * 2.0,
                                         one * t.matrix_peak[4], one)
    footprint = (space.bm + space.bn) * np.maximum(np.ceil(space.bk_bytes / 2.0 / t.mma_k) * t.mma_k, t.mma_k) * 2.0
    assert list(bounded) == [int(np.argmin(footprint * space.stages))] * m.size


@pytest.mark.parametrize("device", ["nvidia-h100-sxm5-80gb", "amd-mi300x", "google-tpu-v5p", "intel-gaudi2",
                                    "intel-xeon-platinum-8480"])
@pytest.mark.parametrize("shape", [(1, 8192, 8192, 8192), (1, 1, 4096, 4096), (4, 333, 1000, 2048),
                                   (1, 128, 128, 1 << 20)])
@pytest.mark.parametrize("ratio", [1.0, 0.25])
def test_search_scoring_shares_group_free_terms_with_numpys_figures(device: str, shape: tuple[int, ...],
                                                                     ratio: float) -> None:
    """The search kernel computes a candidate's group-free terms once per run of raster-group variants and reuses a
    variant's figures when its DRAM bytes repeat: every kept candidate's time, footprint and waves, the rejects and
    the front stay ``score_numpy``'s, with B as wide as A and weight-only (r = 0.25)."""
    from perfmodel.search.gemm_scoring import prune, score_compiled, score_numpy

    t = tables(perfmodel.load_hardware(device))
    space = full_space(t)
    b, m, n, k = (float(x) for x in shape)
    args = (b, m, n, k, 2.0, float(t.matrix_peak[t.matrix_peak > 0][0]), 2.0 * b * (m * k + k * n + m * n), ratio)
    keep = prune(space, m, n, k, 2.0, t)
    fast, reference = score_compiled(t, space, *args), score_numpy(t, space, keep, space.size - keep.size, *args)
    for name in ("keep", "judged_s", "footprint_bytes", "waves", "front"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(reference, name), err_msg=name)
    assert (fast.rejected, fast.pruned) == (reference.rejected, reference.pruned)
