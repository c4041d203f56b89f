"""MIOpen's direct 1x1 forward on its own work-group tile (issue 24, mio22): ``conv_space.MIOPEN_DIRECT_1X1``,
ConvOclDirectFwd1x1's 64 pixels x 32 output maps per work-group, input channels in groups of 128."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import perfmodel
from perfmodel.search import conv_space

MI25 = "amd-mi25"
# DeepBench's MI25 direct forward, 1x1 832 -> 256 on 7x7 maps, 16 images (113 us measured)
DEEP = {"kind": "conv2d", "batch": 16, "in_channels": 832, "out_channels": 256, "height": 7, "width": 7,
        "kernel_h": 1, "kernel_w": 1, "dtype": "fp32", "algorithm": "direct"}


@pytest.fixture
def switch() -> Iterator[None]:
    """Restore the switch after a test that turns it."""
    saved = conv_space.MIOPEN_DIRECT_1X1
    yield
    conv_space.MIOPEN_DIRECT_1X1 = saved


def test_shipped_off() -> None:
    """Findings only: off (docs/accuracy.md, fifteenth pass, mio22)."""
    assert conv_space.MIOPEN_DIRECT_1X1 is False


def test_work_groups_are_miopens(switch: None) -> None:
    """On, the forward runs ConvOclDirectFwd1x1's grid: ceil(16·49 / 64) = 13 pixel groups x 256 / 32 = 8 map
    groups x ceil(832 / 128) = 7 channel groups = 728 work-groups of 64x32, unsplit; off, the free search's."""
    conv_space.MIOPEN_DIRECT_1X1 = True
    on = perfmodel.predict(MI25, DEEP)
    assert (on.schedule["tile_m"], on.schedule["tile_n"], on.schedule["split_k"]) == (64, 32, 1)
    assert on.schedule["tiles"] == 13 * 8 * 7
    assert on.flops == pytest.approx(2.0 * 16 * 49 * 256 * 832)
    conv_space.MIOPEN_DIRECT_1X1 = False
    off = perfmodel.predict(MI25, DEEP)
    assert off.schedule["tiles"] != on.schedule["tiles"]


def test_other_convolutions_untouched(switch: None) -> None:
    """A direct 3x3 and an implicit-GEMM 1x1 predict the same either way."""
    for op in ({**DEEP, "kernel_h": 3, "kernel_w": 3, "padding": 1}, {**DEEP, "algorithm": "implicit_gemm"}):
        conv_space.MIOPEN_DIRECT_1X1 = False
        off = perfmodel.predict(MI25, op).time_s
        conv_space.MIOPEN_DIRECT_1X1 = True
        assert perfmodel.predict(MI25, op).time_s == off
