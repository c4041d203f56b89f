"""Collectives as NCCL runs them: protocol and algorithm choice, bridges, NVLS, nodes and NICs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import perfmodel
from perfmodel.collectives import (
    LL,
    LL128,
    SIMPLE,
    SOCKET_HOST_PORT_BYTES_PER_S,
    SOCKET_WIRE_SHARE,
    channel_share,
    nccl_choice,
    ring_channels,
    tree_correction,
)
from perfmodel.machine import tables
from perfmodel.specs import derive_variant, load_hardware

A100 = tables(load_hardware("nvidia-a100-sxm4-80gb"))


def _time(hw: str, **op: object) -> float:
    return perfmodel.predict(hw, {"kind": "allreduce", "dtype": "fp16", **op}).time_s


def test_small_messages_run_ll_and_pay_its_latency() -> None:
    """8 B on 8 A100s: LL wins; ring LL latency is 6.6 µs + 14 hops x 0.6 µs = 15 µs, tree LL
    6.8 + 2 x 7 x 0.6 = 15.2 µs (NCCL tuning.cc), of which the 2 µs kernel launch is the model's per-kernel
    overhead: the collective's own time sits on that floor, not on the bytes."""
    algo, proto, seconds = nccl_choice(A100, "allreduce", 8.0, 8)
    assert proto == "LL"
    assert algo == "ring"
    assert seconds == pytest.approx(15.0e-6 - A100.kernel_overhead_s, rel=1e-3)
    assert _time("nvidia-a100-sxm4-80gb", bytes=8, devices=8) == pytest.approx(15.0e-6, rel=1e-3)


def test_large_messages_run_simple_at_the_link_bandwidth() -> None:
    """1 GiB on 8 A100s: Simple ring, 2 x 7/8 x S / (300 GB/s x 0.8) plus 8.4 + 14 x 3.4 µs."""
    size = 2.0**30
    algo, proto, seconds = nccl_choice(A100, "allreduce", size, 8)
    assert (algo, proto) == ("ring", "Simple")
    assert seconds == pytest.approx(2 * 7 / 8 * size / 240e9 + 8.4e-6 + 14 * 3.4e-6 - A100.kernel_overhead_s)


def test_mid_sizes_pass_through_ll128() -> None:
    protocols = [nccl_choice(A100, "allreduce", 2.0**e, 8)[1] for e in range(3, 31)]
    assert protocols[0] == "LL" and protocols[-1] == "Simple"
    assert "LL128" in protocols
    # the choice moves one way with size: LL, then LL128, then Simple
    order = {"LL": 0, "LL128": 1, "Simple": 2}
    assert [order[p] for p in protocols] == sorted(order[p] for p in protocols)


def test_time_grows_with_size_and_devices() -> None:
    sizes = [2.0**e for e in range(3, 34, 2)]
    times = [_time("nvidia-a100-sxm4-80gb", bytes=s, devices=8) for s in sizes]
    assert times == sorted(times)
    assert _time("nvidia-a100-sxm4-80gb", bytes=2e5, devices=8) > _time("nvidia-a100-sxm4-80gb", bytes=2e5, devices=2)


def test_a_bridged_pcie_pair_uses_the_bridge() -> None:
    """Two A100 PCIe cards joined by an NVLink bridge (300 GB/s per direction) against four cards, whose
    ring crosses the host's PCIe (32 GB/s): per byte the pair is ~9x faster (7x too slow before)."""
    size = 512 * 2**20
    pair = _time("nvidia-a100-pcie-80gb", bytes=size, devices=2)
    four = _time("nvidia-a100-pcie-80gb", bytes=size, devices=4)
    assert pair == pytest.approx(size / 240e9, rel=0.02)
    assert four == pytest.approx(1.5 * size / 25.6e9, rel=0.02)


def test_pcie_rings_do_not_run_ll128() -> None:
    t4 = tables(load_hardware("nvidia-t4"))
    assert {nccl_choice(t4, "allreduce", 2.0**e, 4)[1] for e in range(3, 31)} == {"LL", "Simple"}


def test_nvls_reduces_in_the_switch_for_large_messages_only() -> None:
    h100 = tables(load_hardware("nvidia-h100-sxm5-80gb"))
    assert nccl_choice(h100, "allreduce", 2.0**30, 8)[0] == "nvls"
    assert nccl_choice(h100, "allreduce", 2.0**12, 8)[0] != "nvls"  # 23 µs NVLS latency loses
    assert nccl_choice(h100, "allreduce", 2.0**30, 16, per_node=8)[0] != "nvls"  # one node only
    link = h100.hardware.interconnect
    assert link is not None
    no_sharp = dataclasses.replace(h100, hardware=h100.hardware.model_copy(update={
        "interconnect": link.model_copy(update={"in_network_reduction": False})}))
    assert nccl_choice(no_sharp, "allreduce", 2.0**30, 8)[0] == "ring"


def test_across_nodes_the_nics_of_a_node_share_the_ring() -> None:
    """Two nodes: bus bandwidth min(links, q x NIC): 1 device per node gets one NIC, 4 get four."""
    size = 2.0**30
    one = _time("nvidia-a100-sxm4-80gb", bytes=size, devices=2, devices_per_node=1)
    four = _time("nvidia-a100-sxm4-80gb", bytes=size, devices=8, devices_per_node=4, algorithm="ring")
    nic = 25e9 * 0.8
    assert one == pytest.approx(size / nic, rel=0.01)
    assert four == pytest.approx(2 * 7 / 8 * size / (4 * nic), rel=0.01)
    assert four < one


def test_forced_algorithms() -> None:
    ring = _time("nvidia-a100-sxm4-80gb", bytes=1e9, devices=8, algorithm="ring")
    tree = _time("nvidia-a100-sxm4-80gb", bytes=1e9, devices=8, algorithm="tree")
    auto = _time("nvidia-a100-sxm4-80gb", bytes=1e9, devices=8)
    assert auto == min(ring, tree)
    assert tree > ring  # a chain in the node moves 2 S at 0.46 of the bus; the ring 2(p-1)/p S at all of it


def test_tpus_and_npus_run_no_gpu_protocols() -> None:
    tpu = tables(load_hardware("google-tpu-v5e"))
    assert {nccl_choice(tpu, "allreduce", 2.0**e, 8)[1] for e in range(3, 31, 3)} == {"Simple"}


def test_p100_pcie_node_rings_run_over_pcie_and_one_fdr_port() -> None:
    """DeepBench's all-reduce node (8 P100 PCIe cards, two on each PLX switch, InfiniBand FDR across nodes): a 256 MB
    ring on one socket's 4 cards moves 2 x 3/4 x S at half of PCIe 3.0 x16 (15.75 GB/s x 0.8 / 2: the switch's one
    uplink carries both its cards' traffic); across two nodes the node's one FDR port (6.8 GB/s, 0.85 GB/s per GPU
    x 8) sets the ring's bus bandwidth, not the NVLink of the SXM2 part."""
    p100 = tables(load_hardware("nvidia-p100-pcie-16gb"))
    eff = p100.defaults.link_efficiency
    size = 256e6
    algo, proto, seconds = nccl_choice(p100, "allreduce", size, 4)
    assert (algo, proto) == ("ring", "Simple")
    assert 2 * 3 / 4 * size / (15.75e9 * eff / 2) < seconds < 1.05 * 2 * 3 / 4 * size / (15.75e9 * eff / 2)
    _, _, across = nccl_choice(p100, "allreduce", size, 16)
    assert across == pytest.approx(2 * 15 / 16 * size / (8 * 0.85e9 * eff), rel=0.02)
    sxm2 = _time("nvidia-p100-sxm2-16gb", bytes=size, devices=8)
    assert _time("nvidia-p100-pcie-16gb", bytes=size, devices=8) > 4 * sxm2


def test_a_small_message_runs_on_the_channels_it_fills() -> None:
    """64 KiB on 4 A100s: the tuner picks ring LL (10.2 µs + 64 KiB at 40 GB/s of algorithm bandwidth: 240 GB/s / 4
    x 4/6), but NCCL runs it on 4 of its 24 channels (12 NVLinks, doubled): 64 KiB < 5 x 512 threads x 8 B x 4 ranks
    (enqueue.cc), so 10.2 µs + 65536 B / (40 GB/s x 4/24) = 20.03 µs, where 22.9 µs is measured (LLMCompass)."""
    assert nccl_choice(A100, "allreduce", 65536.0, 4)[:2] == ("ring", "LL")
    assert _time("nvidia-a100-sxm4-80gb", bytes=65536, devices=4) == pytest.approx(
        10.2e-6 + 65536 / (40e9 * 4 / 24), rel=1e-6)
    # from 24 x 16 KiB = 384 KiB up every channel runs LL; Simple needs 24 x 512 x 64 B = 768 KiB
    share = channel_share(np.array([2.0**16, 384 * 2.0**10, 2.0**19]), np.full(3, 24.0), LL, np.full(3, 4.0))
    assert list(share) == pytest.approx([4 / 24, 1.0, 1.0])
    share = channel_share(np.array([2.0**16, 384 * 2.0**10, 768 * 2.0**10]), np.full(3, 24.0), SIMPLE, np.ones(3))
    assert list(share) == pytest.approx([2 / 24, 12 / 24, 1.0])


def test_channels_are_nvlinks_doubled_and_two_over_pcie() -> None:
    one = np.array([4.0])
    assert ring_channels(A100, one, one / 4)[0] == 24  # 300 GB/s = 12 NVLinks
    assert ring_channels(tables(load_hardware("nvidia-h100-sxm5-80gb")), one, one / 4)[0] == 32  # 18 links, capped
    pcie = tables(load_hardware("nvidia-a100-pcie-80gb"))
    assert ring_channels(pcie, one, one / 4)[0] == 2
    assert ring_channels(pcie, one / 2, one / 4)[0] == 24  # a bridged pair: the bridge's 12 links


def test_tree_bandwidth_takes_nccls_mid_size_correction() -> None:
    """NCCL's treeCorrectionFactor (tuning.cc): at log2(bytes / 64) = 10 (64 KiB) LL / LL128 / Simple trees reach
    0.6 / 0.6 / 0.6 of their modelled bandwidth, at 14 (1 MiB) 0.5 / 0.6 / 0.5; 1 below 64 B."""
    sizes = np.array([8.0, 65536.0, 2.0**20])
    assert list(tree_correction(sizes, LL)) == pytest.approx([1.0, 0.6, 0.5])
    assert list(tree_correction(sizes, LL128)) == pytest.approx([1.0, 0.6, 0.6])
    assert list(tree_correction(sizes, SIMPLE)) == pytest.approx([1.0, 0.6, 0.5])


def test_a_ring_across_nodes_pays_nccls_plateau_latency() -> None:
    """16 A100s, 8 a node, 1 GiB forced onto the ring: Simple, bus min(240, 8 x 25 GB/s x 0.8) = 160 GB/s, algorithm
    bandwidth 160 x 16/30; latency (8.4 - 2) + 26 x 3.4 + 4 x 14 = 150.8 µs, x1.4 on Ampere (NCCL's "plateau effect
    of ring" across nodes), plus the 2 µs kernel launch."""
    size = 2.0**30
    expected = 150.8e-6 * 1.4 + size / (160e9 * 16 / 30) + 2e-6
    got = _time("nvidia-a100-sxm4-80gb", bytes=size, devices=16, devices_per_node=8, algorithm="ring")
    assert got == pytest.approx(expected, rel=1e-6)


def test_a_ring_over_both_sockets_of_a_dual_root_node_crosses_qpi() -> None:
    """DeepBench's P100 node: 8 PCIe 3.0 cards, 4 per CPU socket, sockets joined by QPI (NCCL topo.h QPI_BW 6 GB/s).
    256 MB on 8 cards: a ring over both sockets, bus min(15.75 x 0.8, 6) = 6 GB/s, so 2 x 7/8 x 256 MB / 6 GB/s
    = 74.7 ms plus Simple's 8.4 + 14 x 5.7 µs on PCIe (76.6 ms measured); on 4 cards, one socket, the two cards
    behind each PLX switch share its x16 uplink: 12.6 / 2 = 6.3 GB/s (67.2 ms measured, 2 x 3/4 x 256 MB / 6.3 GB/s
    = 61.0 ms; was 30.6 ms at the full 12.6)."""
    size = 256e6
    eight = _time("nvidia-p100-pcie-16gb", bytes=size, devices=8, dtype="fp32")
    assert eight == pytest.approx(2 * 7 / 8 * size / 6e9 + (8.4 + 14 * 5.7) * 1e-6, rel=1e-6)
    four = _time("nvidia-p100-pcie-16gb", bytes=size, devices=4, dtype="fp32")
    assert four == pytest.approx(2 * 3 / 4 * size / (15.75e9 * 0.8 / 2) + (8.4 + 6 * 5.7) * 1e-6, rel=1e-6)


def test_two_cards_behind_one_pcie_switch_share_its_uplink() -> None:
    """DeepBench's README: two GPUs per PLX switch, 'all pairs of GPUs communicate simultaneously over 16 lanes of
    PCIe v3'. 258 MB (64.5 M floats) on 2 cards: each sends S and receives S through the one x16 uplink, so
    S / (15.75 GB/s x 0.8 / 2) + (8.4 + 2 x 5.7) µs = 40.96 ms (43.8 ms measured; 20.5 ms at the full x16). A spec
    without the field keeps each card's own link."""
    size = 258e6
    two = _time("nvidia-p100-pcie-16gb", bytes=size, devices=2, dtype="fp32")
    assert two == pytest.approx(size / (15.75e9 * 0.8 / 2) + (8.4 + 2 * 5.7) * 1e-6, rel=1e-6)
    assert _time("nvidia-a100-pcie-80gb", bytes=size, devices=4) == pytest.approx(1.5 * size / (32e9 * 0.8), rel=0.01)


def test_a_bridged_pairs_send_pays_the_nvlink_hop() -> None:
    """A send between two A100 PCIe cards joined by an NVLink bridge crosses NVLink, as the pair's all-reduce does:
    64 KiB (Simple) = 2 µs launch + NVLink's 3.4 µs Simple hop + 65536 B on one channel at one NVLink's 25 GB/s x
    0.8 (NCCL's smallest p2p part is 64 KiB: docs/model.md, "Point to point"); 8 KiB (LL) = 2 + 0.6 µs + 8192 B /
    (½ x 20 GB/s). (It paid PCIe's 5.7 / 1.0 µs hops.)"""
    send = _time("nvidia-a100-pcie-80gb", kind="sendrecv", bytes=65536, devices=2, devices_per_node=2)
    assert send == pytest.approx(2e-6 + 3.4e-6 + 65536 / 20e9, rel=1e-6)
    small = _time("nvidia-a100-pcie-80gb", kind="sendrecv", bytes=8192, devices=2, devices_per_node=2)
    assert small == pytest.approx(2e-6 + 0.6e-6 + 8192 / 10e9, rel=1e-6)


def test_a_two_node_tree_carries_the_buffer_once_each_way() -> None:
    """Tree all-reduce on two nodes: each node's link carries S once per direction (half in each of the two trees,
    up and down), so its network share is 2 x q x NIC; on three nodes a node is inner in one tree (1.5 S each way)
    and a leaf in the other (0.5 S): 2 S, the plain q x NIC. 1 GiB on 2 x 4 A100s (4 HDR NICs a node): min(240,
    2 x 4 x 20) x 0.92 x 0.5 = 73.6 GB/s, beating the ring's 80 x 8 / 14 = 45.7 GB/s (NCCL picks the tree on two
    nodes: nccl-tests#196); on 3 x 4 the tree gets 80 x 0.46 = 36.8 GB/s."""
    size = 2.0**30
    two = tables(load_hardware("nvidia-a100-sxm4-80gb"))
    algo, proto, seconds = nccl_choice(two, "allreduce", size, 8, per_node=4)
    assert (algo, proto) == ("tree", "Simple")
    latency = 2 * (3 * 28e-6 + 1 * 28e-6)  # Simple tree: base 0 (no launch to take off), 28 µs hops
    assert seconds == pytest.approx(latency + size / (160e9 * 0.92 * 0.5), rel=1e-6)
    three = _time("nvidia-a100-sxm4-80gb", bytes=size, devices=12, devices_per_node=4, algorithm="tree")
    assert three > size / (80e9 * 0.92 * 0.5)
    assert three < 1.01 * (size / (80e9 * 0.92 * 0.5) + 2 * (3 + np.log2(3)) * 28e-6)


def _socket(hw: str = "nvidia-a100-sxm4-80gb") -> perfmodel.Hardware:
    return derive_variant(hw, "socket-a100", {"interconnect.network_transport": "socket",
                                              "interconnect.network_bandwidth_bytes_per_s": 12.5e9})


def test_socket_transport_shares_one_host_port_at_half_its_rate() -> None:
    """NCCL over TCP sockets: the node's one 100 GbE port (12.5 GB/s) at SOCKET_WIRE_SHARE 0.5, shared by all its
    devices: a 64 MiB send between nodes = 2 µs launch + 14 µs network hop + S / 6.25 GB/s; a 1 GiB ring on 2 x 4
    devices moves 2 x 7/8 x S through the node's 6.25 GB/s, not through four 25 GB/s NICs."""
    hw = _socket()
    assert hw.interconnect is not None and hw.interconnect.network_transport == "socket"
    size = 64 * 2.0**20
    send = perfmodel.predict(hw, {"kind": "sendrecv", "bytes": size, "devices": 2, "devices_per_node": 1,
                                  "dtype": "fp16"}).time_s
    assert send == pytest.approx(2e-6 + 14e-6 + size / 6.25e9, rel=1e-6)
    big = 2.0**30
    ring = perfmodel.predict(hw, {"kind": "allreduce", "bytes": big, "devices": 8, "devices_per_node": 4,
                                  "algorithm": "ring", "dtype": "fp16"}).time_s
    assert ring == pytest.approx(2 * 7 / 8 * big / 6.25e9, rel=0.01)
    rdma = _time("nvidia-a100-sxm4-80gb", bytes=big, devices=8, devices_per_node=4, algorithm="ring")
    assert ring > 10 * rdma
    # one node: the network is not crossed, the transport changes nothing
    assert perfmodel.predict(hw, {"kind": "allreduce", "bytes": big, "devices": 8, "dtype": "fp16"}).time_s == \
        _time("nvidia-a100-sxm4-80gb", bytes=big, devices=8)


def test_socket_ports_default_to_100_gbe_and_all_to_all_shares_it() -> None:
    """A socket node whose spec gives no port: 100 GbE (SOCKET_HOST_PORT_BYTES_PER_S); an all-to-all's off-node
    share of 4 devices goes through the one port: 4 x (4/8) x S / 6.25 GB/s, against S / 2 / 6.25 for one device."""
    hw = derive_variant("nvidia-a100-pcie-80gb", "socket-pcie", {"interconnect.network_transport": "socket"})
    assert hw.interconnect is not None and hw.interconnect.network_bandwidth_bytes_per_s is None
    size = 2.0**30
    send = perfmodel.predict(hw, {"kind": "sendrecv", "bytes": size, "devices": 2, "devices_per_node": 1,
                                  "dtype": "fp16"}).time_s
    assert send == pytest.approx(size / (SOCKET_HOST_PORT_BYTES_PER_S * SOCKET_WIRE_SHARE), rel=1e-3)
    a2a = perfmodel.predict(_socket(), {"kind": "alltoall", "bytes": size, "devices": 8, "devices_per_node": 4,
                                        "dtype": "fp16"}).time_s
    assert a2a == pytest.approx(4 * 0.5 * size / 6.25e9, rel=1e-3)


def test_network_transport_is_a_word_field_of_derive_variant() -> None:
    with pytest.raises(perfmodel.SpecError):
        derive_variant("nvidia-a100-sxm4-80gb", "bad", {"interconnect.network_transport": "carrier-pigeon"})
    with pytest.raises(perfmodel.SpecError):  # a numeric field still takes only numbers and scales
        derive_variant("nvidia-a100-sxm4-80gb", "bad", {"interconnect.network_bandwidth_bytes_per_s": "socket"})
