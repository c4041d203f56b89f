"""The slowest of N synchronised devices (``training.variability``, Sinha et al. 2022: 8 % spread)."""

from __future__ import annotations

import pytest

from perfmodel.graph.ir import GraphError
from perfmodel.graph.llm_config import bundled
from perfmodel.roofline import resolve_hardware
from perfmodel.training.layout import TrainingSetup
from perfmodel.training.search import SearchSpace, search_layouts
from perfmodel.training.variability import DEVICE_SPEED_SPREAD, slowest_device_slowdown


def test_golden_values_of_the_slowest_of_n() -> None:
    """1 / (1 − s/2 + s/(N + 1)) with s = 0.08: one device loses nothing, eight 3.2 %, very many s/2 = 4 %."""
    assert float(slowest_device_slowdown(1)) == 1.0
    assert float(slowest_device_slowdown(8)) == pytest.approx(1.0 / (0.96 + 0.08 / 9))  # 1.0324
    assert float(slowest_device_slowdown(8192)) == pytest.approx(1.0 / 0.96, rel=1e-4)
    assert float(slowest_device_slowdown(10**9)) == pytest.approx(1.0 / (1.0 - DEVICE_SPEED_SPREAD / 2))
    assert float(slowest_device_slowdown(64, 0.0)) == 1.0


def test_more_devices_are_never_faster() -> None:
    n = [1, 2, 8, 64, 1024, 16384]
    out = [float(slowest_device_slowdown(x)) for x in n]
    assert out == sorted(out)


@pytest.mark.parametrize("bad", [-0.1, 1.0, 2.0])
def test_a_spread_outside_0_1_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="spread"):
        slowest_device_slowdown(8, bad)
    with pytest.raises(GraphError, match="device_speed_spread"):
        TrainingSetup(device_speed_spread=bad)


def test_the_spread_slows_compute_and_leaves_communication() -> None:
    """Same layout with and without the spread: compute × 1/(0.96 + 0.08/17) on 16 devices, tp comm unchanged."""
    cfg, hw = bundled("llama-3-8b"), resolve_hardware("nvidia-h100-sxm5-80gb")
    space = SearchSpace(tp=(8,), pp=(2,), cp=(1,), ep=(1,), zero=(0,), recompute=("none",), micro_batch=(1,),
                        virtual_stages=(1,), schedules=("1f1b",))
    rows = [search_layouts(cfg, hw, 16, TrainingSetup(seq_len=2048, global_batch=16, device_speed_spread=s),
                           space).row(0)["time_s"] for s in (0.0, DEVICE_SPEED_SPREAD)]
    assert rows[1]["compute_s"] / rows[0]["compute_s"] == pytest.approx(1.0 / (0.96 + 0.08 / 17))
    assert rows[1]["tp_comm_s"] == rows[0]["tp_comm_s"]
