"""The compiled GEMM costing kernel gives numpy's numbers exactly (numpy is the reference)."""

from __future__ import annotations

import numpy as np
import pytest

import perfmodel
from perfmodel.machine import tables
from perfmodel.search import gemm_kernel
from perfmodel.search.gemm_cost import GemmChoice, GemmCosts, best_gemms, gemm_costs, gemm_costs_numpy, tie_break
from perfmodel.search.gemm_space import compact_space, full_space

DEVICES = ["nvidia-h100-sxm5-80gb", "nvidia-a100-sxm4-80gb", "nvidia-t4", "amd-mi300x", "google-tpu-v5p",
           "generic-npu", "aws-trainium2", "intel-xeon-platinum-8480", "nvidia-b200", "intel-gaudi2"]

pytestmark = pytest.mark.skipif(not gemm_kernel.jit_enabled(), reason="numba kernel disabled or not installed")


@pytest.fixture(autouse=True)
def _loaded_kernels() -> None:
    """Every grid takes the compiled path (small ones do only once the kernels are loaded)."""
    assert gemm_kernel.load()


def _shapes(t: perfmodel.machine.MachineTables, ops: int, seed: int) -> tuple[np.ndarray, ...]:
    """Random GEMMs: odd and round dims from 1 to 20,000, batches, every element size, real peaks."""
    rng = np.random.default_rng(seed)
    dims = np.concatenate([rng.integers(1, 20_000, ops // 2), 2 ** rng.integers(0, 15, ops - ops // 2)]) * 1.0
    m, n, k = (rng.permutation(dims) for _ in range(3))
    elem = rng.choice([0.5, 1.0, 2.0, 4.0], ops)
    peak = rng.choice(t.matrix_peak[t.matrix_peak > 0], ops)
    return rng.integers(1, 5, ops) * 1.0, m, n, k, elem, peak, rng.random(ops) * 1e9


def _with_b_ratio(args: tuple[np.ndarray, ...], seed: int) -> tuple[np.ndarray, ...]:
    """The same GEMMs with B stored narrower (weight-only int4 / int8 over 16 bits) or as wide as A."""
    return (*args, np.random.default_rng(seed).choice([0.25, 0.5, 1.0], args[0].size))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("narrow_b", [False, True])
def test_every_field_of_every_candidate_equals_numpy(device: str, narrow_b: bool) -> None:
    t = tables(perfmodel.load_hardware(device))
    space = full_space(t)
    args = _shapes(t, 6, seed=len(device))
    if narrow_b:
        args = _with_b_ratio(args, seed=len(device))
    fast, reference = gemm_costs(t, space, *args), gemm_costs_numpy(t, space, *args)
    shape = reference.judged_s.shape
    for name in GemmCosts.__dataclass_fields__:
        np.testing.assert_array_equal(np.broadcast_to(getattr(fast, name), shape),
                                      np.broadcast_to(getattr(reference, name), shape), err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("which", ["compact", "full", "full_narrow_b"])
def test_best_schedule_per_op_equals_numpy(device: str, which: str, monkeypatch: pytest.MonkeyPatch) -> None:
    t = tables(perfmodel.load_hardware(device))
    space = compact_space(t) if which == "compact" else full_space(t)
    args = _shapes(t, 400 if which == "compact" else 20, seed=7)
    if which == "full_narrow_b":
        args = _with_b_ratio(args, seed=7)
    fast = best_gemms(t, space, *args)
    monkeypatch.setenv("PERFMODEL_NO_JIT", "1")
    reference = best_gemms(t, space, *args)
    for name in GemmChoice.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(fast, name), getattr(reference, name), err_msg=name)


def test_no_jit_selects_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFMODEL_NO_JIT", "1")
    assert not gemm_kernel.jit_enabled()
    assert not gemm_kernel.use_kernel(10**9)
    assert not gemm_kernel.load()
    monkeypatch.delenv("PERFMODEL_NO_JIT")
    assert gemm_kernel.use_kernel(1)  # loaded: every size


def test_tie_break_takes_the_smallest_footprint_then_the_first_index() -> None:
    time_s = np.array([[2.0, 1.0, 1.0, 1.0, 3.0], [np.inf] * 5, [1.0, np.nan, 0.5, np.nan, 0.5]])
    footprint = np.array([[1.0, 9.0, 4.0, 4.0, 0.5]])
    assert tie_break(time_s, footprint).tolist() == [2, 4, 1]  # equal times: 4 bytes < 9; all rejected: smallest


def test_all_rejected_picks_the_smallest_footprint_as_numpy_does() -> None:
    t = tables(perfmodel.load_hardware("nvidia-h100-sxm5-80gb"))
    space = full_space(t)
    one = np.ones(3)
    # a device with 1 byte of registers rejects every candidate
    regs = gemm_kernel.device_vector(t)
    regs[gemm_kernel.D_REGISTERS] = 1.0
    index, _ = gemm_kernel.best_per_op(regs, space, one, one * 64, one * 64, one * 64, one * 2.0,
                                       one * t.matrix_peak[4], one)
    footprint = (space.bm + space.bn) * np.maximum(np.ceil(space.bk_bytes / 2.0 / t.mma_k) * t.mma_k, t.mma_k) * 2.0
    first_smallest = int(np.argmin(footprint * space.stages))
    assert list(index) == [first_smallest] * 3


@pytest.mark.parametrize("device", DEVICES)
def test_compiled_search_equals_the_numpy_search(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    hw = perfmodel.load_hardware(device)
    rng = np.random.default_rng(len(device))
    dims = [1, 8, 100, 333, 1000, 2048, 4096, 16384]
    ops = [{"kind": "matmul", "m": int(rng.choice(dims)), "n": int(rng.choice(dims)), "k": int(rng.choice(dims)),
            "dtype": dtype, "batch": int(rng.integers(1, 4))}
           for dtype in ("bf16", "fp8_e4m3", "fp32", "int8", "fp16", "bf16")]
    fast = [perfmodel.search(hw, op, cache=False).to_dict() for op in ops]
    monkeypatch.setenv("PERFMODEL_NO_JIT", "1")
    reference = [perfmodel.search(hw, op, cache=False).to_dict() for op in ops]
    for a, b in zip(fast, reference, strict=True):
        a.pop("search_time_s"), b.pop("search_time_s")
        assert a == b
