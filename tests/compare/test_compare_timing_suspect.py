"""Timings no device can produce are 'timing suspect', not regressions: the real PyTorch 1.8 -> 1.9 ResNet-50 pair
(the 1.8 file's memsets all record 1 us whatever their size), noise-only real pairs (nothing changes), an injected
5 % slowdown (still found), and the roof of the level the bytes come from (L2 when they fit: a DRAM-only ceiling
would have hidden this small op's regression)."""

from __future__ import annotations

from collections.abc import Callable
from xml.etree import ElementTree as ET

import pytest

from perfmodel.compare import diff as diff_module
from perfmodel.compare import diff_sides, side_from_parsed
from perfmodel.compare.physical import ceiling, impossible, least_time_s
from perfmodel.compare.report import diff_json, format_diff, format_markdown, junit_xml
from perfmodel.compare.sides import Group, Side, op_key
from perfmodel.specs import load_hardware
from perfmodel.traces import ParsedTrace
from tests.compare.conftest import HTA_0, HTA_1, RESNET_0, RESNET_4
from tests.compare.test_compare_diff import _slowed

Get = Callable[[str], ParsedTrace]
V100 = "nvidia-v100-sxm2-32gb"
A100 = "nvidia-a100-sxm4-80gb"
RESNET_18 = "kineto_resnet50_autograd_api_num_workers_4__worker0.pt.trace.json.gz"  # PyTorch 1.8's profiler


def test_pytorch_18_memsets_are_suspect_and_the_rest_stands(parsed: Get) -> None:
    hw = load_hardware(V100)
    d = diff_sides(side_from_parsed(parsed(RESNET_18), "1.8"), side_from_parsed(parsed(RESNET_4), "1.9"), hw)
    memsets = [g for g in d.groups if g.kernel_names == ["Memset"]]
    assert len(memsets) > 10 and all(g.verdict == "timing suspect" and g.timing_suspect for g in memsets)
    assert {g.verdict for g in d.groups if g.kernel_names != ["Memset"]} >= {"regression", "no change"}
    assert not [g for g in d.groups if g.timing_suspect and g.kernel_names != ["Memset"]]
    big = {g.op["shape"][0]: g for g in memsets if g.op is not None and g.change_pct >= 100}
    assert sorted(big) == [2097152, 2359296, 4194304, 8388608, 9437184]  # the 5 former memset "regressions"
    why = {size: g.timing_suspect or "" for size, g in big.items()}
    assert "HBM2" in why[9437184] and "records a median" not in why[9437184]
    assert "L2" in why[8388608]  # 8.4 MB in <= 2 us: beyond L2's 3.1 TB/s too
    assert "records a median 1 µs" in why[2097152]  # possible alone from L2: the recording's constant
    regressions = sorted((g.name, g.op["shape"][0] if g.op else 0) for g in d.regressions)
    assert [n for n, _ in regressions].count("aten::cudnn_batch_norm_backward") == 6
    assert [n for n, _ in regressions].count("aten::add_") == 1 and len(regressions) == 7
    data = diff_json(d)
    assert data["regressions"] == 7 and data["timing_suspect"] == len(memsets)
    assert data["verdicts"]["timing suspect"] == len(memsets)
    assert all(g["timing_suspect"] for g in data["groups"] if g["verdict"] == "timing suspect")
    assert "timing suspect, not counted" in format_diff(d) and "timing suspect" in format_markdown(d)
    suite = ET.fromstring(junit_xml(d))
    assert suite.get("failures") == "7"
    skipped = [c for c in suite if (s := c.find("skipped")) is not None and "timing suspect" in s.get("message", "")]
    assert len(skipped) == len(memsets) and all(c.find("failure") is None for c in skipped)


@pytest.mark.parametrize(("base", "new", "hw_id"), [(RESNET_0, RESNET_4, V100), (RESNET_4, RESNET_0, V100),
                                                     (HTA_0, HTA_1, A100)])
def test_noise_only_pairs_change_nothing(parsed: Get, monkeypatch: pytest.MonkeyPatch, base: str, new: str,
                                         hw_id: str) -> None:
    hw = load_hardware(hw_id)
    sides = side_from_parsed(parsed(base), base), side_from_parsed(parsed(new), new)
    d = diff_sides(*sides, hw)
    assert not [g.timing_suspect for g in d.groups if g.timing_suspect]
    doubted = [g for g in d.groups if g.work_suspect]  # HTA: 3 GEMMs whose matched shapes no A100 runs that fast
    assert all(g.op is not None and g.op["kind"] == "matmul" for g in doubted) and len(doubted) <= 3
    monkeypatch.setattr(diff_module, "mark_suspects", lambda *args: None)
    unchecked = diff_sides(*sides, hw)
    assert [(g.key, g.verdict) for g in d.groups] == [(g.key, g.verdict) for g in unchecked.groups]


def test_injected_slowdown_still_found(parsed: Get) -> None:
    base = parsed(RESNET_0)
    slowed, target = _slowed(base, 1.05)
    d = diff_sides(side_from_parsed(base, "base"), side_from_parsed(slowed, "new"), load_hardware(V100),
                   threshold_pct=3.0)
    assert [g.key for g in d.regressions] == [target] and 4.0 <= d.regressions[0].change_pct <= 6.0
    assert not [g for g in d.groups if g.timing_suspect]


def _side(label: str, op: dict[str, object], times_s: list[float]) -> Side:
    key = op_key("aten::add_", op)
    group = Group(key, "elementwise", op, list(times_s), len(times_s), ["add_kernel"])
    return Side(label, "pytorch_kineto", None, {key: group}, sum(times_s))


def test_bytes_that_fit_in_l2_meet_the_l2_roof_not_dram() -> None:
    """4 MB in 2 us (2.1 TB/s) is above the V100's DRAM (0.9 TB/s) but under its L2 (3.1 TB/s): possible, so its
    10 % slowdown stays a regression; the same 4 MB in 1.0 us (4.2 TB/s) is impossible."""
    hw = load_hardware(V100)
    op: dict[str, object] = {"kind": "elementwise", "shape": [1 << 20], "dtype": "fp32", "inputs": 0, "outputs": 1,
                             "flops_per_element": 0.0}
    base = [2.0e-6 + i * 1e-9 for i in range(20)]
    d = diff_sides(_side("a", op, base), _side("b", op, [t * 1.1 for t in base]), hw)
    assert [g.verdict for g in d.groups] == ["regression"]
    fast = [1.0e-6 + i * 1e-9 for i in range(20)]  # the new side (1.5x) at 1.5 us: possible
    d = diff_sides(_side("a", op, fast), _side("b", op, [t * 1.5 for t in fast]), hw)
    assert [g.verdict for g in d.groups] == ["timing suspect"] and d.regressions == []
    assert "L2" in (d.groups[0].timing_suspect or "") and (d.groups[0].timing_suspect or "").startswith("base: ")


def test_least_time_levels_flops_and_resolution() -> None:
    c = ceiling(load_hardware(V100))
    assert least_time_s(c, 4e6, 0.0, "fp32")[0] == pytest.approx(4e6 / 3.133e12)  # L2-resident
    t, why = least_time_s(c, 12.291456e6, 0.0, "fp32")  # 6 MB beyond L2 from HBM2
    assert t == pytest.approx(6e6 / 900e9) and "HBM2" in why
    t, why = least_time_s(c, 0.0, 1e12, "fp16")  # tensor 125 + CUDA cores' 31.3 TFLOP/s
    assert t == pytest.approx(1e12 / (125e12 + 31.33e12)) and "FLOP" in why
    assert least_time_s(c, 0.0, 1e12, "fp32")[0] <= t  # a library may convert fp32 to fp16
    # 9.4 MB recorded as 1 us at 1 us resolution: still impossible (3.5 us from HBM2); at 4 us: possible
    assert impossible("base", c, 9437184, 0.0, "int8", 1e-6, [1e-6] * 5, 1.0) is not None
    assert impossible("base", c, 9437184, 0.0, "int8", 4e-6, [4e-6] * 5, 1.0) is None
    assert impossible("base", c, 4194304, 0.0, "int8", 1e-6, [1e-6] * 5, 1.0) is None  # <= 2 us: 2.1 TB/s from L2
    assert impossible("base", c, 4194304, 0.0, "int8", 1e-6, [1.003e-6] * 5, 1.0) is not None  # ns timer


def test_both_sides_impossible_doubts_the_work_and_keeps_the_verdict() -> None:
    """Both sides faster than the op allows: the same kernels timed twice, so the op's matched shapes are in doubt,
    not a recording; the 20 % slowdown between them stays a regression, and the reason is said."""
    op: dict[str, object] = {"kind": "elementwise", "shape": [1 << 22], "dtype": "fp32", "inputs": 0, "outputs": 1,
                             "flops_per_element": 0.0}  # 16.8 MB: >= 11.6 us on a V100
    base = [1.0e-6 + i * 1e-9 for i in range(20)]
    d = diff_sides(_side("a", op, base), _side("b", op, [t * 1.2 for t in base]), load_hardware(V100))
    g = d.groups[0]
    assert g.verdict == "regression" and g.timing_suspect is None
    assert g.work_suspect is not None and "base: " in g.work_suspect and "new: " in g.work_suspect
    assert "shapes are in doubt" in format_diff(d) and diff_json(d)["groups"][0]["work_suspect"] == g.work_suspect
