"""Point-to-point send/recv: one message over the tier the pair shares."""

from __future__ import annotations

import pytest

import perfmodel
from perfmodel.collectives import fabrics
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


def test_a_small_send_runs_ll_at_half_the_link() -> None:
    """Up to NCCL's P2P_LL_THRESHOLD (16 KiB) a send runs LL: one LL hop (0.6 µs on NVLink) and 8-byte stores that
    carry 4 data bytes, so half the link: 16 KiB on an A100 pair = 2 + 0.6 + 16384 / (0.5 x 240 GB/s) µs = 2.737 µs.
    (At 8 KiB the link path, 2.668 µs, is under the sender's HBM round trip, 2 x 0.341 µs plus the bytes, since the
    A100's published DRAM latency landed in the tenth pass: the larger of the two is charged.)"""
    t = tables(load_hardware(HW))
    intra, _, _ = fabrics(t)
    assert intra.bandwidth_bytes_per_s == pytest.approx(240e9)
    small = perfmodel.predict(HW, {"kind": "sendrecv", "bytes": 16384})
    assert small.time_s == pytest.approx(2.736533e-6, rel=1e-5)
    smaller = perfmodel.predict(HW, {"kind": "sendrecv", "bytes": 8192})
    assert 2.668267e-6 < smaller.time_s < small.time_s
    # one byte over the threshold runs Simple: its 3.4 µs hop, the full link
    above = perfmodel.predict(HW, {"kind": "sendrecv", "bytes": 16385})
    assert above.time_s == pytest.approx(2e-6 + 3.4e-6 + 16385 / 240e9, rel=1e-6)


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
