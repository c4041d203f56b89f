"""The conv forward's batch/fill regime (issue 24, convfill21): cuDNN 7's tensor-core forward tiles
(``conv_space.TENSOR_FORWARD``) and the busiest unit's CTA concurrency (``conv_space.UNIT_CONCURRENCY``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import perfmodel
from perfmodel.search import conv_space

V100 = "nvidia-v100-sxm2-32gb"
# DeepBench's V100 fp16 3x3 512 -> 512 on 7x7 maps (NHWC, cuDNN 7): 47 us at 8 images, 71 us at 16
DEEP = {"kind": "conv2d", "batch": 8, "in_channels": 512, "out_channels": 512, "height": 7, "width": 7,
        "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp16", "layout": "nhwc"}
# V100 fp32 (CUDA cores) 1x1 512 -> 512 on 7x7 maps: 4 x 16 = 64 CTAs of 128x32 at 8 images, 112 at 16
SIMT = {"kind": "conv2d", "batch": 8, "in_channels": 512, "out_channels": 512, "height": 7, "width": 7,
        "kernel_h": 1, "kernel_w": 1, "dtype": "fp32"}


@pytest.fixture
def switches() -> Iterator[None]:
    """Restore the module's switches after a test that turns them."""
    saved = (conv_space.TENSOR_FORWARD, conv_space.UNIT_CONCURRENCY)
    yield
    conv_space.TENSOR_FORWARD, conv_space.UNIT_CONCURRENCY = saved


def test_tensor_forward_menu_is_cudnn_tiles_and_one_split_kernel(switches: None) -> None:
    """With the switch at "all" the forward on NVIDIA tensor cores chooses among 256x128, 256x64, 128x128 unsplit
    and the 128x128 split-K kernel only; "unsplit" drops the split kernel."""
    from perfmodel.machine import tables
    from perfmodel.specs import load_hardware

    t = tables(load_hardware(V100))
    conv_space.TENSOR_FORWARD = "all"
    space = conv_space.simt_conv_space(t, 5)
    pairs = set(zip(space.bm.tolist(), space.bn.tolist(), space.split.tolist(), strict=True))
    assert {(bm, bn) for bm, bn, _ in pairs} == {(256.0, 128.0), (256.0, 64.0), (128.0, 128.0)}
    assert {(bm, bn) for bm, bn, split in pairs if split > 1} == {(128.0, 128.0)}
    conv_space.TENSOR_FORWARD = "unsplit"
    assert set(conv_space.simt_conv_space(t, 5).split.tolist()) == {1.0}


def test_tensor_forward_switch_off_keeps_the_free_search(switches: None) -> None:
    """Off ("none"), a tensor-core forward may take any tile of the compact space (here a 64-wide one); on, only
    the menu's: the 3x3 forward then runs 128x128 split-K CTAs, slower than the free schedule."""
    conv_space.TENSOR_FORWARD = "none"
    free = perfmodel.predict(V100, DEEP)
    conv_space.TENSOR_FORWARD = "all"
    menu = perfmodel.predict(V100, DEEP)
    assert (menu.schedule["tile_m"], menu.schedule["tile_n"]) == (128, 128)
    assert menu.schedule["split_k"] > 1
    assert free.schedule["tile_n"] < 128 and menu.time_s > free.time_s
    conv_space.TENSOR_FORWARD = "unsplit"
    unsplit = perfmodel.predict(V100, DEEP)
    assert unsplit.schedule["split_k"] == 1 and unsplit.time_s > 2 * menu.time_s  # 16 CTAs of 144 K-steps


def test_unit_concurrency_off_is_linear_on_is_flat_below_two_ctas(switches: None) -> None:
    """Off (1.0), 64 CTAs on 80 SMs take half the time of 112 (two on 32 SMs); at 2.0 the busiest unit runs two
    CTAs' time in both, so doubling the batch costs nothing more. A tensor-core forward is not touched."""
    conv_space.UNIT_CONCURRENCY = 1.0
    eight, sixteen = (perfmodel.predict(V100, {**SIMT, "batch": n}) for n in (8, 16))
    assert (eight.schedule["tiles"], sixteen.schedule["tiles"]) == (64, 112)
    assert sixteen.time_s == pytest.approx(2 * eight.time_s, rel=0.1)
    fp16 = perfmodel.predict(V100, DEEP)
    conv_space.UNIT_CONCURRENCY = 2.0
    flat_eight, flat_sixteen = (perfmodel.predict(V100, {**SIMT, "batch": n}) for n in (8, 16))
    assert flat_eight.time_s == pytest.approx(flat_sixteen.time_s, rel=1e-9)
    assert flat_sixteen.time_s == pytest.approx(sixteen.time_s, rel=1e-9)
    assert perfmodel.predict(V100, DEEP).time_s == fp16.time_s


def test_shipped_switches() -> None:
    """The tensor-core forward menu ships on with its split kernel ("all"); the unit concurrency is a finding
    (docs/accuracy.md, fifteenth pass, convfill21), off."""
    assert conv_space.TENSOR_FORWARD == "all"
    assert conv_space.UNIT_CONCURRENCY == 1.0


def test_the_cudnn7_menu_stays_on_volta_and_turing_mma_shapes() -> None:
    """cuDNN 7's s884 / s1688 kernels are Volta's m8n8k4 and Turing's m16n8k8 HMMA; an A100 (m16n8k16) runs cuDNN 8's
    other menu, so its fp16 forward keeps the free search (a tile the menu lacks) and is never slower than its
    fp32 twin (the framework's TF32 ResNet convolutions, tests/graph/test_fp32_math.py); the T4 takes the menu."""
    a100, t4 = "nvidia-a100-sxm4-80gb", "nvidia-t4"
    menu = {(256, 128), (256, 64), (128, 128)}
    assert (perfmodel.predict(t4, DEEP).schedule["tile_m"], perfmodel.predict(t4, DEEP).schedule["tile_n"]) in menu
    free = perfmodel.predict(a100, DEEP)
    assert (free.schedule["tile_m"], free.schedule["tile_n"]) not in menu
    assert free.time_s < perfmodel.predict(a100, {**DEEP, "dtype": "fp32"}).time_s
