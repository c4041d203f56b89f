"""The core diff on real pairs (noise only: nothing flagged), on pairs with an injected slowdown (found at its
magnitude), and bad input (clear errors)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from perfmodel.compare import CompareError, diff_sides, side_from_parsed
from perfmodel.compare.names import normalise_kernel_name
from perfmodel.compare.sides import Side, op_key
from perfmodel.compare.stats import holm_reject, measure_change
from perfmodel.specs import load_hardware
from perfmodel.traces import ParsedTrace, match_runs
from tests.compare.conftest import HTA_0, HTA_1, RESNET_0, RESNET_4

Get = Callable[[str], ParsedTrace]
V100 = "nvidia-v100-sxm2-32gb"


def test_kernel_names_normalised() -> None:
    a = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, " \
        "1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"
    b = "at::native::vectorized_elementwise_kernel<4,at::native::FillFunctor<float>,at::detail::Array<char*,1>>"
    assert normalise_kernel_name(a) == normalise_kernel_name(b)
    assert normalise_kernel_name("k(0x7f00aa, int)") == normalise_kernel_name("k(0x7f11bb, int)") == "k"
    assert normalise_kernel_name("kern<0x10>") == normalise_kernel_name("kern<0x20>")
    assert normalise_kernel_name("gemm<128, 64>") != normalise_kernel_name("gemm<64, 64>")


def test_statistics() -> None:
    base = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02, 0.98, 1.01, 0.99]
    assert measure_change(base[:4], base) is None  # too few repeats on one side
    same = measure_change(base, base)
    assert same is not None and same.ratio == 1.0 and same.p_value == 1.0
    slower = measure_change(base, [t * 1.2 for t in base])
    assert slower is not None and slower.ratio == pytest.approx(1.2) and slower.p_value < 0.01
    assert slower.ci_low > 1.0 and slower.p_paired is not None
    unpaired = measure_change(base, [t * 1.2 for t in base[:8]])
    assert unpaired is not None and unpaired.p_paired is None and unpaired.p_value == unpaired.p_mann_whitney
    assert holm_reject([0.001, 0.04, 0.5], 0.05) == [True, False, False]
    assert holm_reject([0.001, 0.02, 0.5], 0.05) == [True, True, False]


@pytest.mark.parametrize(("base", "new"), [(RESNET_0, RESNET_4), (RESNET_4, RESNET_0), (HTA_0, HTA_1)])
def test_noise_only_pairs_flag_no_regression(parsed: Get, base: str, new: str) -> None:
    """The same workload profiled twice (ResNet-50 on a V100, two runs) and two sampled ranks of one HTA job."""
    hw = load_hardware(V100) if base.startswith("kineto_resnet50") else None
    d = diff_sides(side_from_parsed(parsed(base), base), side_from_parsed(parsed(new), new), hw)
    assert len(d.groups) > 50
    assert d.regressions == []
    tested = [g for g in d.groups if g.verdict != "too few repeats"]
    assert tested and all(g.change is not None for g in tested)
    if hw is not None:  # cuDNN chose other kernels for one backward conv in the second run: said, not flagged
        switched = [g for g in d.groups if g.verdict == "kernels changed"]
        assert switched and all(g.kernels_changed and abs(g.change_pct) > 5 for g in switched)
    if hw is not None:  # the same op on the same device: the model expects no change
        modelled = [g for g in d.groups if g.op is not None and g.expected_ratio is not None]
        assert len(modelled) > 50 and all(g.expected_ratio == pytest.approx(1.0) for g in modelled)
        assert {g.new_prediction.bound for g in modelled if g.new_prediction} >= {"HBM2", "cuda_core"}
    assert sum(k["base_s"] for k in d.kinds) == pytest.approx(d.base_total_s, rel=1e-9)


def _slowed(trace: ParsedTrace, factor: float, min_calls: int = 10) -> tuple[ParsedTrace, tuple[str, str, str]]:
    """The trace with every kernel of one op group (>= min_calls calls, the longest median) slowed by factor."""
    matched = match_runs(trace)
    calls: dict[tuple[str, str, str], list[float]] = {}
    for run in matched.runs:
        calls.setdefault(op_key(run.op_name, run.op), []).append(run.measured_time_s)
    target = max((k for k, v in calls.items() if len(v) >= min_calls),
                 key=lambda k: sorted(calls[k])[len(calls[k]) // 2])
    runs = {i for i, run in enumerate(matched.runs) if op_key(run.op_name, run.op) == target}
    kernels = [dataclasses.replace(k, duration_s=k.duration_s * factor) if r in runs else k
               for k, r in zip(trace.kernels, matched.kernel_runs, strict=True)]
    return ParsedTrace(trace.format, kernels, [], trace.device_name, trace.world_size), target


@pytest.mark.parametrize("name", [RESNET_0, HTA_0])
def test_injected_slowdown_found_at_its_magnitude(parsed: Get, name: str) -> None:
    base = parsed(name)
    slowed, target = _slowed(base, 1.05)
    d = diff_sides(side_from_parsed(base, "base"), side_from_parsed(slowed, "new"), threshold_pct=3.0)
    assert [g.key for g in d.regressions] == [target]
    assert 4.0 <= d.regressions[0].change_pct <= 6.0
    unchanged, _ = _slowed(base, 1.0)
    d0 = diff_sides(side_from_parsed(base, "base"), side_from_parsed(unchanged, "new"), threshold_pct=3.0)
    assert d0.regressions == [] and all(g.verdict in ("no change", "too few repeats") for g in d0.groups)


def test_injected_slowdown_over_real_noise(parsed: Get) -> None:
    """5 % added to one op of the second real ResNet-50 run: found, its change 5 points above the noise-only one."""
    base, other = parsed(RESNET_0), parsed(RESNET_4)
    hw = load_hardware(V100)
    slowed, target = _slowed(other, 1.05)
    noise = diff_sides(side_from_parsed(base, "a"), side_from_parsed(other, "b"), hw, threshold_pct=3.0)
    d = diff_sides(side_from_parsed(base, "a"), side_from_parsed(slowed, "b"), hw, threshold_pct=3.0)
    before = next(g for g in noise.groups if g.key == target)
    after = next(g for g in d.groups if g.key == target)
    assert after.ratio / before.ratio == pytest.approx(1.05, abs=0.01)
    if abs(before.change_pct) < 1.0:
        assert [g.key for g in d.regressions] == [target]
    assert all(g.key == target for g in d.regressions)


def test_bad_input_is_a_clear_error(parsed: Get) -> None:
    resnet = side_from_parsed(parsed(RESNET_0), "resnet")
    other_format = Side("ncu.csv", "ncu_csv", None, resnet.groups, 1.0)
    with pytest.raises(CompareError, match="different trace formats"):
        diff_sides(resnet, other_format)
    other_device = dataclasses.replace(resnet, label="mi250", device_name="AMD Instinct MI250X")
    with pytest.raises(CompareError, match="different devices"):
        diff_sides(resnet, other_device)
    hta = side_from_parsed(parsed(HTA_0), "hta")
    with pytest.raises(CompareError, match="in common"):
        diff_sides(resnet, dataclasses.replace(hta, device_name=None, groups={
            k: v for k, v in hta.groups.items() if k not in resnet.groups}))
    with pytest.raises(CompareError, match="no kernels"):
        diff_sides(resnet, dataclasses.replace(resnet, groups={}))
    with pytest.raises(CompareError, match="threshold"):
        diff_sides(resnet, resnet, threshold_pct=-1)


def test_change_the_model_expected_is_not_a_regression(parsed: Get) -> None:
    """The base on a V100, the 'new' run on an A100 made from it: every modelled op scaled by the model's predicted
    V100 -> A100 ratio is 'expected'; one op 20 % slower than that is the one regression."""
    base = parsed(RESNET_0)
    v100, a100 = load_hardware(V100), load_hardware("nvidia-a100-sxm4-80gb")
    _, target = _slowed(base, 1.0)
    probe = diff_sides(side_from_parsed(base, "v100"), side_from_parsed(base, "a100"), v100, a100)
    expected = {g.key: g.expected_ratio for g in probe.groups if g.expected_ratio is not None}
    assert expected[target] < 0.9  # the A100 is predicted faster for this conv
    matched = match_runs(base)
    keys = [op_key(run.op_name, run.op) for run in matched.runs]
    for extra in (1.0, 1.2):
        factors = {k: r * (extra if k == target else 1.0) for k, r in expected.items()}
        kernels = [k if r is None else dataclasses.replace(k, duration_s=k.duration_s * factors.get(keys[r], 1.0))
                   for k, r in zip(base.kernels, matched.kernel_runs, strict=True)]
        moved = ParsedTrace(base.format, kernels, [], "NVIDIA A100-SXM4-80GB", base.world_size)
        d = diff_sides(side_from_parsed(base, "v100"), side_from_parsed(moved, "a100"), v100, a100)
        group = next(g for g in d.groups if g.key == target)
        assert group.unexpected_pct == pytest.approx((extra - 1) * 100, abs=0.5)
        assert group.verdict == ("regression" if extra > 1 else "expected")
        assert [g.key for g in d.regressions] == ([target] if extra > 1 else [])
        assert sum(g.verdict == "expected" for g in d.groups) > 20
