"""Matrix-engine physics that carries across devices: sustained clocks under matrix load, the operand reads of
the matrix instruction's scope (mma.sync / wgmma / tcgen05) and operand sharing between tiles (TMA multicast,
2-SM MMA). Figures from the specs' cited fields; see docs/model.md §4."""

from __future__ import annotations

import numpy as np
import pytest

import perfmodel
from perfmodel.dtypes import DType
from perfmodel.efficiency import IDEAL
from perfmodel.hardware import Hardware
from perfmodel.machine import tables
from perfmodel.ops import make_op
from perfmodel.roofline import work_of
from perfmodel.search.gemm_cost import gemm_costs_numpy
from perfmodel.search.gemm_space import GemmCandidates
from perfmodel.specs import derive_variant, load_hardware


def test_sustained_clock_scales_the_matrix_peak_per_dtype() -> None:
    mi300x = tables(load_hardware("amd-mi300x"))
    peaks = {p.dtype: p.peak_flops_per_s for p in mi300x.matrix_paths}
    assert peaks[DType.BF16] == pytest.approx(1307.4e12 * 1.207e9 / 2.1e9)
    assert peaks[DType.FP16] == pytest.approx(1307.4e12 * 1.115e9 / 2.1e9)
    # a dtype the vendor did not measure takes the lowest measured clock (dense matrix load)
    assert peaks[DType.FP64] == pytest.approx(163.4e12 * 1.115e9 / 2.1e9)
    # a device without the field keeps its datasheet peak
    a100 = {p.dtype: p.peak_flops_per_s for p in tables(load_hardware("nvidia-a100-sxm4-80gb")).matrix_paths}
    assert a100[DType.BF16] == pytest.approx(312e12)


def test_t4_tensor_cores_run_at_the_power_limited_clock() -> None:
    # Jia et al. 2019 (Citadel), Fig. 4.5: the 70 W T4 settles near 1,155 MHz under a sustained cuBLAS GEMM load
    t4 = {p.dtype: p.peak_flops_per_s for p in tables(load_hardware("nvidia-t4")).matrix_paths}
    assert t4[DType.FP16] == pytest.approx(65e12 * 1.155e9 / 1.59e9)  # 47.2 TFLOP/s of the 65 datasheet
    assert t4[DType.INT8] == pytest.approx(130e12 * 1.155e9 / 1.59e9)  # not measured: the lowest listed clock
    # the same paper sees no throttling on the full-size boards: at the T4's board energy per tensor FLOP
    # (70 W / 47.2 TFLOP/s = 1.48 pJ, TSMC 12 nm) the V100 (12 nm, 300 W, 125 TFLOP/s) would still hold its boost
    energy_j = _board_energy("nvidia-t4", DType.FP16)
    assert energy_j == pytest.approx(1.483e-12, rel=1e-3)
    v100 = load_hardware("nvidia-v100-sxm2-32gb")
    assert v100.tdp_w and v100.tdp_w / (energy_j * v100.engines_of("matrix")[0].peak_flops_per_s[DType.FP16]) > 1.0


def test_a_what_if_clock_scales_the_sustained_clock_too() -> None:
    fast = derive_variant("amd-mi300x", "mi300x-fast", {"clock_hz": "x1.25"})
    peaks = {p.dtype: p.peak_flops_per_s for p in tables(fast).matrix_paths}
    assert peaks[DType.BF16] == pytest.approx(1.25 * 1307.4e12 * 1.207e9 / 2.1e9)


def test_power_limited_share_from_energy_per_flop() -> None:
    # MI355X: no measured clock; 1400 W / (0.717 pJ x 2516.6 TFLOP/s) = 0.7759 of the BF16 peak (hand-computed)
    mi355x = tables(load_hardware("amd-mi355x"))
    peaks = {p.dtype: p.peak_flops_per_s for p in mi355x.matrix_paths}
    assert peaks[DType.BF16] == pytest.approx(2516.6e12 * 0.7759, rel=1e-4)
    assert peaks[DType.FP16] == pytest.approx(1400 / 0.771e-12, rel=1e-9)  # 1815.8 TFLOP/s
    # int8 has no energy figure: it takes the lowest listed share (fp16's 0.7215)
    assert peaks[DType.INT8] == pytest.approx(5033.2e12 * 1400 / (0.771e-12 * 2516.6e12), rel=1e-9)
    # more board power lifts the cap; at 2000 W BF16 needs 1804 W at its full peak, so the share is 1
    big = derive_variant("amd-mi355x", "mi355x-2kw", {"tdp_w": 2000})
    assert {p.dtype: p.peak_flops_per_s for p in tables(big).matrix_paths}[DType.BF16] == pytest.approx(2516.6e12)
    # a measured sustained clock takes precedence over an energy figure
    data = load_hardware("amd-mi300x").model_dump(mode="json")
    data["id"] = "amd-mi300x-with-energy"
    data["engines"][0]["energy_per_flop_j"] = {"bf16": 1e-9}
    both = Hardware.model_validate(data)
    assert {p.dtype: p.peak_flops_per_s for p in tables(both).matrix_paths}[DType.BF16] == pytest.approx(
        1307.4e12 * 1.207e9 / 2.1e9)


def _board_energy(device: str, dtype: DType) -> float:
    """J per dense FLOP at the power limit from a spec's measured sustained clock: TDP / (peak x f_sus / f)."""
    hw = load_hardware(device)
    engine = hw.engines_of("matrix")[0]
    assert engine.sustained_clock_hz and hw.tdp_w and hw.clock_hz
    return hw.tdp_w / (engine.peak_flops_per_s[dtype] * engine.sustained_clock_hz[dtype] / hw.clock_hz)


def test_mi355x_energy_is_derived_from_the_cdna3_measurements_only() -> None:
    # the spec's figures = mean of MI300X and MI325X board energies x 0.68 (TSMC N5 -> N3E, -32 % power)
    engine = load_hardware("amd-mi355x").engines_of("matrix")[0]
    assert engine.energy_per_flop_j
    for dtype in (DType.FP16, DType.BF16, DType.FP8_E4M3):
        derived = 0.68 * (_board_energy("amd-mi300x", dtype) + _board_energy("amd-mi325x", dtype)) / 2.0
        assert engine.energy_per_flop_j[dtype] == pytest.approx(derived, rel=2e-3)
    # leave-one-device-out within CDNA 3 (docs/model.md): MI300X's BF16 energy predicts MI325X's clock at 1609 MHz
    # (1447 measured), MI325X's predicts MI300X's at 1085 MHz (1207 measured)
    assert 1000.0 / (_board_energy("amd-mi300x", DType.BF16) * 1307.4e12) * 2100 == pytest.approx(1609, abs=1)
    assert 750.0 / (_board_energy("amd-mi325x", DType.BF16) * 1307.4e12) * 2100 == pytest.approx(1085, abs=1)


def test_energy_per_flop_must_be_positive() -> None:
    data = load_hardware("amd-mi355x").model_dump(mode="json")
    data["engines"][0]["energy_per_flop_j"] = {"bf16": 0.0}
    with pytest.raises(ValueError, match="energy_per_flop_j"):
        Hardware.model_validate(data)


def test_sustained_clock_must_be_positive() -> None:
    data = load_hardware("amd-mi300x").model_dump(mode="json")
    data["engines"][0]["sustained_clock_hz"] = {"bf16": -1.0}
    with pytest.raises(ValueError, match="sustained_clock_hz"):
        Hardware.model_validate(data)


def _with(device: str, **engine: object) -> Hardware:
    """``device`` with its matrix engine's fields replaced (a new id, so the tables are built afresh)."""
    data = load_hardware(device).model_dump(mode="json")
    data["id"] = f"{device}-{'-'.join(f'{k}-{v}' for k, v in engine.items())}".lower().replace("_", "-")
    data["engines"][0].update(engine)
    return Hardware.model_validate(data)


def _one_tile(t_hw: Hardware, bm: float, bn: float) -> tuple[float, float]:
    """SMEM and LLC-to-SMEM bytes of an 8192^3 bf16 GEMM on one BM x BN x 32 tile schedule."""
    t = tables(t_hw)
    space = GemmCandidates(*(np.array([x], dtype=np.float64) for x in (bm, bn, 64.0, 3.0, 1.0, 1.0)))
    one = np.array([1.0])
    big = np.array([8192.0])
    c = gemm_costs_numpy(t, space, one, big, big, big, np.array([2.0]), np.array([989.4e12]), np.array([0.0]))
    return float(c.smem_bytes[0, 0]), float(c.reuse_bytes[0, 0])


@pytest.mark.parametrize(("scope", "reads_per_step"), [("warp", 2 * (256 + 128)), ("warpgroup", 256 + 2 * 128),
                                                       ("cta", 256 + 128)])
def test_the_instruction_scope_sets_shared_memory_operand_reads(scope: str, reads_per_step: int) -> None:
    hw = _with("nvidia-h100-sxm5-80gb", mma_scope=scope)
    smem, _ = _one_tile(hw, 256.0, 128.0)
    tiles, steps = 32 * 64, 8192 / 32
    assert smem == pytest.approx(tiles * steps * reads_per_step * 32 * 2)


def test_operand_sharing_loads_each_b_panel_once_per_group_of_m_tiles() -> None:
    alone = _with("nvidia-h100-sxm5-80gb", operand_sharing_tiles=1)
    paired = _with("nvidia-h100-sxm5-80gb", operand_sharing_tiles=2)
    _, reuse_alone = _one_tile(alone, 128.0, 256.0)
    _, reuse_paired = _one_tile(paired, 128.0, 256.0)
    # A is loaded once per N-tile (32 of them), B once per M-tile (64) alone, once per pair (32) paired
    e, size = 2.0, 8192.0 * 8192.0
    assert reuse_alone - reuse_paired == pytest.approx(e * size * (64 - 32))


def test_hopper_and_blackwell_best_gemms_are_not_l2_bound() -> None:
    for device in ("nvidia-h100-sxm5-80gb", "nvidia-b200"):
        op = {"kind": "matmul", "m": 8192, "n": 8192, "k": 8192, "dtype": "bf16"}
        cost = perfmodel.predict(device, op, defaults=IDEAL)
        peak = load_hardware(device).peak_flops_per_s(DType.BF16)
        assert peak is not None
        work = work_of([make_op(op)], 1.0)
        assert float(work.flops_matrix[0]) / cost.time_s > 0.9 * peak, device


def test_gaudi_gemm_tiles_run_on_the_mmes_streaming_from_the_on_die_sram() -> None:
    gaudi2 = tables(load_hardware("intel-gaudi2"))
    assert (gaudi2.gemm_units, gaudi2.gemm_scratchpad_bytes, gaudi2.tiles_from_llc) == (2, 48 * 2**20 / 2, True)
    # the units keep their own meaning (24 TPCs) for everything else
    assert gaudi2.units == 24
    # a device whose matrix engines are its units is unchanged (TPU v4: 2 TensorCores of 4 MXUs each)
    tpu = tables(load_hardware("google-tpu-v4"))
    assert (tpu.gemm_units, tpu.tiles_from_llc) == (2, False)
    cost = perfmodel.predict("intel-gaudi2", {"kind": "matmul", "m": 8192, "n": 8192, "k": 8192, "dtype": "bf16"})
    assert cost.bound == "mme"
