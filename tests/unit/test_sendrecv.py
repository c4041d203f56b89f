"""Point-to-point send/recv: one message over the tier the pair shares."""

from __future__ import annotations

import numpy as np
import pytest

import perfmodel
from perfmodel.collectives import fabrics, p2p_channel_bytes
from perfmodel.machine import tables
from perfmodel.specs import load_hardware

HW = "nvidia-a100-sxm4-80gb"


def test_send_within_a_node_uses_the_link_and_across_nodes_the_network() -> None:
    size = 64e6
    t = tables(load_hardware(HW))
    intra, inter, _ = fabrics(t)
    # NCCL's p2p path has no collective base latency (tuning.cc models collectives only): the 2 µs kernel launch,
    # then one Simple hop, NVLink 3.4 µs or network 14 µs
    near_s, far_s = 5.4e-6, 16.0e-6
    near = perfmodel.predict(HW, {"kind": "sendrecv", "bytes": size})
    far = perfmodel.predict(HW, {"kind": "sendrecv", "bytes": size, "devices_per_node": 1})
    assert near.bound == far.bound == "interconnect"
    assert near.time_s == pytest.approx(near_s + size / intra.bandwidth_bytes_per_s)
    assert far.time_s == pytest.approx(far_s + size / inter.bandwidth_bytes_per_s)
    assert far.time_s > near.time_s


def test_a_small_send_runs_ll_at_half_the_link_on_one_channel() -> None:
    """Up to NCCL's P2P_LL_THRESHOLD (16 KiB) a send runs LL: one LL hop (0.6 µs on NVLink) and 8-byte stores that
    carry 4 data bytes, so half the rate. A message under NCCL's smallest p2p part (step / 8 = 64 KiB on NVLink,
    enqueue.cc calcP2pChunkSize) runs on one channel, one CTA, at one NVLink's sustained 20 GB/s: 16 KiB on an A100
    pair = 2 + 0.6 + 16384 / (0.5 x 20 GB/s) µs = 4.2384 µs (the whole pair's 240 GB/s would give 2.737 µs)."""
    t = tables(load_hardware(HW))
    intra, _, _ = fabrics(t)
    assert intra.bandwidth_bytes_per_s == pytest.approx(240e9)
    small = perfmodel.predict(HW, {"kind": "sendrecv", "bytes": 16384})
    assert small.time_s == pytest.approx(2e-6 + 0.6e-6 + 16384 / 10e9, rel=1e-6)
    smaller = perfmodel.predict(HW, {"kind": "sendrecv", "bytes": 8192})
    assert smaller.time_s == pytest.approx(2e-6 + 0.6e-6 + 8192 / 10e9, rel=1e-6)
    # one byte over the threshold runs Simple: its 3.4 µs hop, still one channel at the full 20 GB/s
    above = perfmodel.predict(HW, {"kind": "sendrecv", "bytes": 16385})
    assert above.time_s == pytest.approx(2e-6 + 3.4e-6 + 16385 / 20e9, rel=1e-6)


def test_a_send_is_cut_into_parts_one_per_channel() -> None:
    """NCCL cuts a send within a node into parts of max(64 KiB, bytes / nChannelsMin), one per channel. An A100
    pair: 12 NVLinks give 2 x 12 = 24 channels per peer, 32 after rounding to a power of two, and the
    communicator's 24 ring channels round to 32 p2p channels; 32 x 2 ranks > 32 halves nChannelsMin to 16. So
    66-1024 KiB move 64 KiB on their busiest channel (3.28 µs at 20 GB/s): 264 KiB takes 2 + 3.4 + 3.2768 µs, not
    the 1.1 µs of 264 KiB over the pair's 240 GB/s; from 1 MiB (16 parts of 64 KiB) the pair's links bound it."""
    t = tables(load_hardware(HW))
    size = np.array([67584.0, 264192.0, 2.0**20, 2.0**26])
    two = np.full(size.shape, 2.0)
    one = np.ones(size.shape)
    parts = p2p_channel_bytes(t, size, two, one, np.ones(size.shape, dtype=bool))
    assert parts.tolist() == [65536.0, 65536.0, 65536.0, 2.0**26 / 16]
    mid = perfmodel.predict(HW, {"kind": "sendrecv", "bytes": 264192}).time_s
    assert mid == pytest.approx(2e-6 + 3.4e-6 + 65536 / 20e9, rel=1e-6)
    big = perfmodel.predict(HW, {"kind": "sendrecv", "bytes": 2.0**20}).time_s
    assert big == pytest.approx(2e-6 + 3.4e-6 + 2.0**20 / 240e9, rel=1e-6)
    # over PCIe a pair has 2 channels per peer and 2 p2p channels: one part, the whole message, the link's rate
    p100 = tables(load_hardware("nvidia-p100-pcie-16gb"))
    pcie = p2p_channel_bytes(p100, size, two, one, np.zeros(size.shape, dtype=bool))
    assert pcie.tolist() == size.tolist()
    # across nodes the network, not a channel, bounds it: the whole message
    assert p2p_channel_bytes(t, size, two, two, np.ones(size.shape, dtype=bool)).tolist() == size.tolist()


def test_send_time_grows_with_the_message() -> None:
    small, big = (perfmodel.predict(HW, {"kind": "sendrecv", "bytes": b}).time_s for b in (1e3, 1e9))
    assert big > 100 * small


def test_send_rejects_an_empty_message() -> None:
    with pytest.raises(ValueError, match="bytes"):
        perfmodel.predict(HW, {"kind": "sendrecv", "bytes": 0})


def test_all_to_all_in_a_node_is_one_hop_per_peer_and_the_off_device_share() -> None:
    """64 MiB all-to-all on 8 A100s (NCCL's p2p path, Simple): each device keeps 1/8 and sends 7/8 over its
    240 GB/s of NVLink, one 3.4 µs hop per peer, plus the 2 µs kernel launch: 2 + 7 x 3.4 µs + 58.7 MB / 240 GB/s."""
    size = 64 * 2**20
    got = perfmodel.predict(HW, {"kind": "alltoall", "bytes": size, "devices": 8}).time_s
    assert got == pytest.approx(2e-6 + 7 * 3.4e-6 + size * 7 / 8 / 240e9, rel=1e-6)
