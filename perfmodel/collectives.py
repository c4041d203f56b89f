"""Collectives as NCCL/RCCL run them: algorithms x protocols, each a latency plus bytes over a bandwidth.

NCCL (``src/graph/tuning.cc``, v2.19, NVIDIA/nccl@b6475625) predicts every (algorithm, protocol) pair as

    time = latency + bytes / algorithm bandwidth

and runs the fastest. We follow its model (docs/model.md §3, "Collectives", derives each term):

- **Bus bandwidth** B: the device's links per direction x the sustained share (NCCL's own per-link figures,
  20 GB/s per 25 GB/s NVLink, are 0.8); across nodes min(B, q x the per-device NIC bandwidth) (q devices
  per node, one NIC each, the channels spread over them); over TCP sockets (``network_transport`` "socket") the
  node's one host port instead, at SOCKET_WIRE_SHARE of its rate; two cards joined by a bridge use the bridge.
- **Protocols** scale B: Simple 1; LL128 0.92 (120 of 128 bytes are data; 0.7 with one device per node;
  NVLink only); LL 1/4 for rings (8-byte stores carry 4 bytes and a flag), 1/3.8 for trees, capped at
  NCCL's per-architecture LL ceiling.
- **Algorithm bandwidth**: ring all-reduce B x p / (2(p-1)), all-gather / reduce-scatter B x p / (p-1);
  tree B x 0.92 x 0.5, its network share doubled on two nodes (each direction of a node's link carries the
  buffer once, not twice); NVLS (NVSwitch reduction) B x 5/6.
- **Latency** (NCCL's base + per-hop tables, NVLink / PCIe / network): ring base + (steps - inter-node
  steps) x intra hop + inter-node steps x network hop, steps 2(p-1) for all-reduce (p-1 otherwise);
  tree base + 2((p/n - 1) x intra hop + log2(n) x network hop); NVLS one NVLS hop (+ network hop).
  NCCL's base includes launching its kernel, which the model charges per kernel already: the base here
  is NCCL's less the device's kernel overhead.

NCCL picks by those times on all channels, then runs a small message on the channels it fills (``channel_share``,
``enqueue.cc``): its share of the bandwidth is what the op is charged.

TPUs and NPUs run only the Simple-like bandwidth transfers (LL and LL128 are GPU protocols).
All-to-all and send/recv run NCCL's p2p path, outside its tuning model: no collective base, one hop per peer,
LL up to 16 KiB (half the bandwidth), Simple above; the pairwise exchange sends (p-1)/p of the buffer within the
node and the off-node share (p-q)/p over the node's NICs; send/recv moves its bytes once, within a node no faster than
its busiest channel moves its part (``p2p_channel_bytes``: NCCL's calcP2pChunkSize) at one NVLink's sustained rate.
``bytes`` is the per-device buffer (all-gather: its output), as NCCL's ``nBytes``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from perfmodel.machine import MachineTables
from perfmodel.ops.base import FloatArray, IntArray
from perfmodel.ops.collective import ALGORITHMS, COMM_KINDS

if TYPE_CHECKING:
    from perfmodel.hardware import Hardware

ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, SENDRECV, HOSTCOPY, HOSTCOPY_PAGEABLE = (
    COMM_KINDS.index(k) for k in ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv", "hostcopy",
                                  "hostcopy_pageable"))
HOST_LINK_DEFAULT_BYTES_PER_S = 25e9  # PCIe 4.0 x16 per direction, where the spec gives no host link
# A pageable host copy is staged by one host thread's memcpy into the driver's pinned buffer, pipelined with the
# DMA: the host copy sets the rate, not the link. CUDA bandwidthTest (32 MB, pageable vs pinned, H2D) on A100
# hosts: DGX A100 10.0 vs 25.7 GB/s, a Dell A100 PCIe server 3.3 vs 17.3 GB/s; a host property the GPU spec
# cannot know: the geometric middle of that range, sqrt(3.3 x 10.0) = 5.7 GB/s.
PAGEABLE_STAGING_BYTES_PER_S = 5.7e9
AUTO, RING, TREE = (ALGORITHMS.index(k) for k in ("auto", "ring", "tree"))
LL, LL128, SIMPLE = 0, 1, 2
PROTOCOLS = ("LL", "LL128", "Simple")

# NCCL tuning.cc (v2.19): base latency (µs) per algorithm x protocol (LL, LL128, Simple).
_BASE_US = {"ring": (6.6, 14.0, 8.4), "tree": (6.8, 14.0, 0.0), "nvls": (0.0, 0.0, 0.0)}
# NCCL tuning.cc hwLat (µs per hop): NVLink, PCIe, network; algorithm x protocol.
_HOP_US = {
    "nvlink": {"ring": (0.6, 1.9, 3.4), "tree": (0.6, 1.25, 28.0), "nvls": (0.0, 0.0, 23.0)},
    "pcie": {"ring": (1.0, 2.5, 5.7), "tree": (1.0, 1.9, 28.0), "nvls": (0.0, 0.0, 0.0)},
    "net": {"ring": (2.7, 4.0, 14.0), "tree": (5.0, 8.5, 28.0), "nvls": (0.0, 0.0, 18.0)},
}
# NCCL tuning.cc llMaxBws (GB/s): LL's ceiling on one node (Volta, Ampere, Hopper), two nodes, more.
_LL_MAX_GBPS_ONE_NODE = {"volta": 39.0, "ampere": 87.7, "hopper": 87.7}
_LL_MAX_GBPS_MULTI_NODE = (39.0, 20.4)  # two nodes, more than two (x86 hosts)
_TREE_SHARE = 0.92  # NCCL: tree bus bandwidth x .92
_NVLS_RATIO = 5.0 / 6.0  # NCCL: NVLS bus -> algorithm bandwidth
_NET_OVERHEAD_US = 1.0  # NCCL getNetOverhead: per-step host post on x86 (x3 for Simple), multi-node rings
# NCCL enqueue.cc NCCL_PARAM(P2pLLThreshold, "P2P_LL_THRESHOLD", 16384): a send/recv up to this runs LL
P2P_LL_THRESHOLD_BYTES = 16384.0
# NCCL over TCP sockets (no RDMA NIC, NCCL's "NET/Socket"): the host's Ethernet port, one per node, where the spec
# gives none: 100 GbE (the ports of NVIDIA/nccl#450's and nccl-tests#83's clusters)
SOCKET_HOST_PORT_BYTES_PER_S = 12.5e9
# NCCL's sockets reach about half the wire rate: all-reduce bus bandwidth 4-6 GB/s on 100 Gb/s TCP (NVIDIA/nccl#450),
# at most 60 % of a 32 Gb/s link (NVIDIA/nccl#209); NCCL runs at the speed of its slowest socket (nccl-tests#83)
SOCKET_WIRE_SHARE = 0.5


@dataclass(frozen=True)
class Fabric:
    """One tier: bus bandwidth per device per direction (sustained) and its kind of hop ("nvlink", "pcie", "net")."""

    bandwidth_bytes_per_s: float
    hop: str


DEFAULT_DEVICES_PER_NODE = 8  # a server's accelerators, where the spec does not say


def devices_per_node(hardware: Hardware) -> int:
    """Devices that share one node's fast fabric (NVLink, xGMI, ICI): the spec's figure, else 8."""
    ic = hardware.interconnect
    return int((ic.devices_per_node if ic else None) or DEFAULT_DEVICES_PER_NODE)


def _topology(hardware: Hardware) -> str:
    ic = hardware.interconnect
    if ic is not None and ic.topology is not None:
        return ic.topology
    return "switch" if ic is not None and ic.devices_per_node else "pcie"


def _generation(hardware: Hardware) -> str:
    """NCCL's architecture index for LL ceilings: by the newest dtype the matrix engine has."""
    dtypes = {d.value for e in hardware.engines_of("matrix") for d in e.peak_flops_per_s}
    if dtypes & {"fp8_e4m3", "fp8_e5m2"}:
        return "hopper"
    return "ampere" if dtypes & {"bf16", "tf32"} else "volta"


def fabrics(t: MachineTables) -> tuple[Fabric, Fabric, float]:
    """(within node, one NIC across nodes, default devices per node) for a device."""
    d = t.defaults
    ic = t.hardware.interconnect
    link_bw = (ic.link_bandwidth_bytes_per_s if ic else None) or 25e9  # PCIe 4.0 x16 per direction
    net_bw = (ic.network_bandwidth_bytes_per_s if ic else None) or min(link_bw, 25e9)
    hop = "pcie" if _topology(t.hardware) == "pcie" else "nvlink"
    return (Fabric(link_bw * d.link_efficiency, hop), Fabric(net_bw * d.link_efficiency, "net"),
            float(devices_per_node(t.hardware)))


def node_network_bytes_per_s(t: MachineTables, q: FloatArray) -> FloatArray:
    """A node's network bandwidth per direction (sustained) for q of its devices: q RDMA NICs (one per device), or
    over TCP sockets the host's one port at SOCKET_WIRE_SHARE of its rate, shared by all q."""
    ic = t.hardware.interconnect
    if ic is not None and ic.network_transport == "socket":
        port = ic.network_bandwidth_bytes_per_s or SOCKET_HOST_PORT_BYTES_PER_S
        return np.full(q.shape, port * SOCKET_WIRE_SHARE)
    return q * fabrics(t)[1].bandwidth_bytes_per_s


def socket_bound_bytes_per_s(t: MachineTables, p: FloatArray, q: FloatArray) -> FloatArray:
    """A ring over more of a dual-root PCIe node's devices than one socket holds (q/2) crosses the socket link:
    its bandwidth as NCCL's topology counts it (``socket_link_bandwidth_bytes_per_s``); inf otherwise."""
    ic = t.hardware.interconnect
    link = ic.socket_link_bandwidth_bytes_per_s if ic is not None else None
    if link is None or _topology(t.hardware) != "pcie":
        return np.full(p.shape, np.inf)
    per_node = float(devices_per_node(t.hardware))
    return np.where(np.minimum(p, q) > per_node / 2.0, link, np.inf)


def switch_bound_bytes_per_s(t: MachineTables, p: FloatArray) -> FloatArray:
    """A PCIe node whose devices share a switch uplink (``devices_per_pcie_switch``): a ring's members behind one
    switch (ranks packed in order) all send up and receive down that one link, each getting its share; inf
    otherwise."""
    ic = t.hardware.interconnect
    shared = ic.devices_per_pcie_switch if ic is not None else None
    if not shared or shared < 2 or _topology(t.hardware) != "pcie":
        return np.full(p.shape, np.inf)
    link = (ic.link_bandwidth_bytes_per_s if ic is not None else None) or 25e9
    return link * t.defaults.link_efficiency / np.clip(p, 1.0, float(shared))


def _base_s(t: MachineTables, base_us: float) -> float:
    """NCCL's base latency without the kernel launch, which the model already charges per kernel."""
    return max(base_us * 1e-6 * t.defaults.collective_latency_scale - t.kernel_overhead_s, 0.0)


def _hop_s(t: MachineTables, hop: str, algo: str, proto: int) -> float:
    """One hop's latency: the spec's own figure for its tier where it gives one, else NCCL's table."""
    ic = t.hardware.interconnect
    given = (ic.network_latency_s if hop == "net" else ic.link_latency_s) if ic is not None else None
    if given is not None:
        return given
    return _HOP_US[hop][algo][proto] * 1e-6 * t.defaults.collective_latency_scale


def _candidates(t: MachineTables, kind: IntArray, size: FloatArray, p: FloatArray, q: FloatArray,
                nodes: FloatArray, runtime: bool = False) -> dict[tuple[str, int], FloatArray]:
    """Seconds of every (algorithm, protocol) NCCL could run, inf where it cannot: as NCCL's tuner predicts them
    (all channels), or with ``runtime`` as they run (the channels the message fills, ``channel_share``)."""
    intra, _, _ = fabrics(t)
    ic = t.hardware.interconnect
    bus = np.full(p.shape, intra.bandwidth_bytes_per_s)
    hop = np.full(p.shape, intra.hop, dtype=object)
    if ic is not None and ic.bridge_bandwidth_bytes_per_s:  # a bridged pair talks over the bridge
        pair = (p == 2) & (nodes == 1)
        bus = np.where(pair, ic.bridge_bandwidth_bytes_per_s * t.defaults.link_efficiency, bus)
        hop = np.where(pair, "nvlink", hop)
    multi = nodes > 1
    node_net = node_network_bytes_per_s(t, q)
    intra_bus = np.minimum(bus, np.minimum(socket_bound_bytes_per_s(t, p, q), switch_bound_bytes_per_s(t, p)))
    bus = np.where(multi, np.minimum(intra_bus, node_net), intra_bus)
    # tree on two nodes: each node's link carries the buffer once per direction (half of it in each of the two
    # trees, up and down), against twice in a tree over more nodes: the network's share doubles (docs/model.md)
    tree_net = np.where(nodes == 2, 2.0, 1.0) * node_net
    tree_bus_raw = np.where(multi, np.minimum(intra_bus, tree_net), intra_bus)
    nvlink = hop == "nvlink"
    channels = ring_channels(t, p, nodes)
    ll_max = np.where(multi, np.where(nodes <= 2, _LL_MAX_GBPS_MULTI_NODE[0], _LL_MAX_GBPS_MULTI_NODE[1]),
                      _LL_MAX_GBPS_ONE_NODE[_generation(t.hardware)]) * 1e9
    reduce_all = kind == ALLREDUCE
    steps = np.where(reduce_all, 2.0 * (p - 1.0), p - 1.0)
    inter_steps = np.where(multi, np.where(reduce_all, 2.0 * nodes, nodes - 1.0), 0.0)
    scale = t.defaults.collective_latency_scale
    out: dict[tuple[str, int], FloatArray] = {}
    # LL and LL128 are NCCL/RCCL's GPU protocols (flag-polling stores from the GPU's threads); TPUs and NPUs
    # stream their collectives through DMA engines: bandwidth-only (Simple-like) transfers
    protocols = (LL, LL128, SIMPLE) if t.hardware.kind == "gpu" else (SIMPLE,)
    for proto in (LL, LL128, SIMPLE):
        if proto not in protocols:
            out[("ring", proto)] = out[("tree", proto)] = np.full(p.shape, np.inf)
            continue
        # ring
        if proto == LL:
            ring_bus = np.minimum(ll_max, bus * np.where(multi | reduce_all, 1.0 / 4.0, 1.0 / 3.0))
        elif proto == LL128:
            ring_bus = np.where(nvlink, bus * np.where(q < 2, 0.7, 0.92), 0.0)
        else:
            ring_bus = bus
        intra_hop = np.where(nvlink, _hop_s(t, "nvlink", "ring", proto), _hop_s(t, "pcie", "ring", proto))
        net_overhead = _NET_OVERHEAD_US * 1e-6 * (3.0 if proto == SIMPLE else 1.0) * scale
        intra_hop = np.where(multi, np.maximum(intra_hop, net_overhead), intra_hop)
        latency = _base_s(t, _BASE_US["ring"][proto]) + (steps - inter_steps) * intra_hop + \
            inter_steps * _hop_s(t, "net", "ring", proto)
        if proto == SIMPLE:  # NCCL's "plateau effect of ring" across nodes (ncclTopoGetAlgoTime)
            plateau = multi & reduce_all & (size / (channels * p) >= 64.0)
            latency = np.where(plateau, latency * _ring_plateau(t), latency)
        algbw = ring_bus * p / np.maximum(steps, 1.0)
        if runtime:
            algbw = algbw * channel_share(size, channels, proto, np.where(proto == LL, p, 1.0))
        out[("ring", proto)] = np.where(algbw > 0, latency + size / np.maximum(algbw, 1e-30), np.inf)
        # tree (all-reduce only): a chain inside the node, a double binary tree across nodes
        tree_bus = tree_bus_raw * _TREE_SHARE
        if proto == LL:
            tree_bus = np.minimum(tree_bus / 3.8, ll_max)
        elif proto == LL128:
            tree_bus = np.where(nvlink, tree_bus * np.where(multi, 120.0 / 128.0, 7.0 / 9.0), 0.0)
        intra_tree = np.where(nvlink, _hop_s(t, "nvlink", "tree", proto), _hop_s(t, "pcie", "tree", proto))
        latency = _base_s(t, _BASE_US["tree"][proto]) + 2.0 * ((p / nodes - 1.0) * intra_tree + np.log2(
            np.maximum(nodes, 1.0)) * _hop_s(t, "net", "tree", proto))
        algbw = tree_bus * 0.5 * tree_correction(size, proto)
        if runtime:
            algbw = algbw * channel_share(size, channels, proto, np.ones(p.shape))
        ok = reduce_all & (algbw > 0)
        out[("tree", proto)] = np.where(ok, latency + size / np.maximum(algbw, 1e-30), np.inf)
    # NVLS: the switch reduces (NVLink SHARP), one node, Simple only
    nvls_ok = bool(ic is not None and ic.in_network_reduction) & ~multi & nvlink & (kind != ALLTOALL)
    nvls_latency = _hop_s(t, "nvlink", "nvls", SIMPLE)
    nvls_bw = bus * _NVLS_RATIO * (channel_share(size, channels, SIMPLE, np.ones(p.shape)) if runtime else 1.0)
    out[("nvls", SIMPLE)] = np.where(nvls_ok, nvls_latency + size / nvls_bw, np.inf)
    return out


# NCCL tuning.cc (v2.12-v2.19) treeCorrectionFactor: "Trees are not perfectly sticking to the model for medium
# sizes": tree all-reduce bandwidth x this, per protocol (LL, LL128, Simple), at log2(bytes / 64) = 0..22
_TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
)


def tree_correction(size: FloatArray, proto: int) -> FloatArray:
    """NCCL's measured share of the tree's modelled bandwidth at this message size (1 outside 64 B-512 MiB)."""
    log_size = np.floor(np.log2(np.maximum(size, 1.0) / 64.0))
    table = np.array(_TREE_CORRECTION[proto])
    inside = (log_size >= 0) & (log_size < len(table))
    return np.where(inside, table[np.clip(log_size, 0, len(table) - 1).astype(np.int64)], 1.0)


def _ring_plateau(t: MachineTables) -> float:
    """NCCL ncclTopoGetAlgoTime: a multi-node Simple ring all-reduce's latency x1.4 (compute capability >= 8.0),
    x1.9 before."""
    return 1.9 if _generation(t.hardware) == "volta" else 1.4


# NCCL enqueue.cc: a collective runs on fewer channels while nBytes < channels x threads x threshold; tuning.cc's
# thresholds (bytes per thread: LL 8, times nRanks for rings; LL128 8; Simple 64) and the threads per channel
# (NCCL_LL_MAX_NTHREADS 512, NCCL_LL128_MAX_NTHREADS 640, NCCL_SIMPLE_MAX_NTHREADS 512)
_THREADS = {LL: 512.0, LL128: 640.0, SIMPLE: 512.0}
_THREAD_THRESHOLD_BYTES = {LL: 8.0, LL128: 8.0, SIMPLE: 64.0}
NVLINK_LINK_BYTES_PER_S = 25e9  # one NVLink 2/3/4 link per direction
MAX_CHANNELS = 32  # NCCL MAXCHANNELS
PCIE_CHANNELS = 2  # one ring over the PCIe tree, duplicated (NCCL's ncclTopoPostset doubles the search's channels)


def ring_channels(t: MachineTables, p: FloatArray, nodes: FloatArray) -> FloatArray:
    """NCCL's channel count: one ring per NVLink (the search's), doubled, at most 32; two over PCIe."""
    ic = t.hardware.interconnect
    raw = (ic.link_bandwidth_bytes_per_s if ic else None) or 0.0
    nvlink = _topology(t.hardware) != "pcie"
    links = np.full(p.shape, raw / NVLINK_LINK_BYTES_PER_S if nvlink else 0.0)
    if ic is not None and ic.bridge_bandwidth_bytes_per_s:
        links = np.where((p == 2) & (nodes == 1), ic.bridge_bandwidth_bytes_per_s / NVLINK_LINK_BYTES_PER_S, links)
    return np.where(links >= 1.0, np.minimum(2.0 * np.round(links), MAX_CHANNELS), PCIE_CHANNELS)


def channel_share(size: FloatArray, channels: FloatArray, proto: int, ranks: FloatArray) -> FloatArray:
    """Share of the channels a message of ``size`` bytes runs on (NCCL enqueue.cc's reduction for small ones)."""
    per_channel = _THREADS[proto] * _THREAD_THRESHOLD_BYTES[proto] * ranks
    return np.clip(np.floor(size / per_channel), 1.0, channels) / channels


# NCCL init.cc: a p2p step (NCCL_P2P_NVL_CHUNKSIZE over NVLink, NCCL_P2P_PCI_CHUNKSIZE over PCIe)
P2P_NVL_CHUNK_BYTES = 524288.0
P2P_PCI_CHUNK_BYTES = 131072.0


def p2p_channel_bytes(t: MachineTables, size: FloatArray, p: FloatArray, nodes: FloatArray,
                      nvlink: FloatArray) -> FloatArray:
    """Bytes the busiest channel of a send moves within a node (NCCL enqueue.cc ``calcP2pChunkSize``): the send
    is cut into parts of max(step / 8, bytes / nChannelsMin), one per channel; nChannelsMin is the pair's channels
    per peer (``ncclTopoGetNchannels``: 2 x its NVLinks, 2 over PCIe, rounded up to a power of two) halved while
    it times the ranks exceeds the communicator's p2p channels (its ring channels, at most 32, rounded up to a power
    of two). Parts grow past step x 32 only by doubling the channels, which a 2-rank send never needs below 256 MiB
    on NVLink; across nodes the network, not a channel, is the bound (not modelled here: the whole message)."""
    ic = t.hardware.interconnect
    raw = (ic.link_bandwidth_bytes_per_s if ic else None) or 0.0
    links = np.full(p.shape, raw / NVLINK_LINK_BYTES_PER_S)
    if ic is not None and ic.bridge_bandwidth_bytes_per_s:
        links = np.where((p == 2) & (nodes == 1), ic.bridge_bandwidth_bytes_per_s / NVLINK_LINK_BYTES_PER_S, links)
    per_peer = np.where(nvlink, 2.0 * np.maximum(1.0, np.floor(links)), 2.0)
    per_peer = 2.0 ** np.ceil(np.log2(per_peer))
    comm = 2.0 ** np.ceil(np.log2(np.minimum(ring_channels(t, p, nodes), MAX_CHANNELS)))
    ranks = np.maximum(p, 1.0)
    halvings = np.maximum(np.ceil(np.log2(np.maximum(per_peer * ranks / comm, 1.0))), 0.0)
    channels_min = np.maximum(per_peer / 2.0 ** halvings, 1.0)
    step = np.where(nvlink, P2P_NVL_CHUNK_BYTES, P2P_PCI_CHUNK_BYTES)
    part = np.maximum(step / 8.0, size / channels_min)
    return np.where(nodes > 1, size, np.minimum(size, part))


def _point_to_point(t: MachineTables, kind: IntArray, size: FloatArray, p: FloatArray, q: FloatArray,
                    nodes: FloatArray) -> FloatArray:
    """All-to-all (pairwise exchange) and send/recv: NCCL's p2p path, one hop per peer, no collective base."""
    intra, _, _ = fabrics(t)
    ic = t.hardware.interconnect
    link = np.full(p.shape, intra.bandwidth_bytes_per_s)
    # a device's share of its node's network: its own NIC (RDMA), or the host port one pair uses alone (send/recv)
    # or the node's q devices share (all-to-all) over sockets
    nic_bw = node_network_bytes_per_s(t, np.ones(p.shape))
    node_bw = node_network_bytes_per_s(t, q)
    nvlink = np.full(p.shape, intra.hop != "pcie")
    if ic is not None and ic.bridge_bandwidth_bytes_per_s:  # a bridged pair talks over the bridge: NVLink
        bridged = (p == 2) & (nodes == 1)
        link = np.where(bridged, ic.bridge_bandwidth_bytes_per_s * t.defaults.link_efficiency, link)
        nvlink = nvlink | bridged
    multi = nodes > 1
    # a message up to P2P_LL_THRESHOLD_BYTES runs LL (8-byte stores: 4 data bytes and a flag), larger ones Simple
    ll = (size <= P2P_LL_THRESHOLD_BYTES) & (t.hardware.kind == "gpu")
    proto_share = np.where(ll, 0.5, 1.0)
    hop = np.where(ll, np.where(nvlink, _hop_s(t, "nvlink", "ring", LL), _hop_s(t, "pcie", "ring", LL)),
                   np.where(nvlink, _hop_s(t, "nvlink", "ring", SIMPLE), _hop_s(t, "pcie", "ring", SIMPLE)))
    net_hop = np.where(ll, _hop_s(t, "net", "ring", LL), _hop_s(t, "net", "ring", SIMPLE))
    # within a node each channel is one CTA on one link: a send is done when its busiest channel has moved its
    # part at one NVLink's sustained share (NCCL's topology counts 20 of 25 GB/s per link), or when the pair's
    # links have moved it all, whichever is later
    channel_bw = np.where(nvlink, NVLINK_LINK_BYTES_PER_S * t.defaults.link_efficiency, link)
    one_node = np.maximum(size / link, p2p_channel_bytes(t, size, p, nodes, nvlink) / channel_bw)
    send = np.where(multi, net_hop + size / (nic_bw * proto_share),
                    hop + one_node / proto_share)
    # all-to-all: each device keeps 1/p, sends (q-1)/p to its node and (p-q)/p over its own NIC, all at once
    on_node = size * (np.minimum(q, p) - 1.0) / p / (link * proto_share)
    off_node = size * (p - q) / p / (node_bw / q * proto_share)
    a2a = (np.minimum(q, p) - 1.0) * hop + np.where(multi, (nodes - 1.0) * net_hop, 0.0) + \
        np.maximum(on_node, np.where(multi, off_node, 0.0))
    return np.where(kind == SENDRECV, send, a2a)


def collective_time(t: MachineTables, kind: IntArray, size: FloatArray, devices: FloatArray,
                    per_node_given: FloatArray, algo: IntArray) -> FloatArray:
    """Seconds per collective (0 where ``kind`` is 0: not a collective); a small call seen before with the same
    tables is answered from ``call_memo``."""
    from perfmodel.search import call_memo

    return call_memo.kept("collective_time", (t,), [kind, size, devices, per_node_given, algo],
                          lambda: _collective_time(t, kind, size, devices, per_node_given, algo), np.array)


def _collective_time(t: MachineTables, kind: IntArray, size: FloatArray, devices: FloatArray,
                     per_node_given: FloatArray, algo: IntArray) -> FloatArray:
    p = np.maximum(devices, 1.0)
    per_node_default = float(devices_per_node(t.hardware))
    q = np.minimum(np.where(per_node_given > 0, per_node_given, per_node_default), p)
    nodes = np.ceil(p / q)
    tuned = _candidates(t, kind, size, p, q, nodes)
    run = _candidates(t, kind, size, p, q, nodes, runtime=True)
    allowed = {key: (algo == AUTO) | ((algo == RING) & (key[0] == "ring")) | (
        (algo == TREE) & np.where(kind == ALLREDUCE, key[0] == "tree", True)) for key in tuned}
    keys = list(tuned)
    predicted = np.vstack([np.where(allowed[k], tuned[k], np.inf) for k in keys])
    pick = np.argmin(predicted, axis=0)  # NCCL picks by its tuner's times, then runs on the channels it fills
    chosen = np.vstack([run[k] for k in keys])[pick, np.arange(p.size)]
    chosen = np.where(np.isfinite(predicted.min(axis=0)), chosen, np.inf)
    p2p = _point_to_point(t, kind, size, p, q, nodes)
    out = np.where((kind == ALLTOALL) | (kind == SENDRECV), p2p, chosen)
    out = np.where((kind == SENDRECV) & (p > 1.0), p2p, np.where(p <= 1.0, 0.0, out))
    link = host_link_bytes_per_s(t.hardware) * t.defaults.link_efficiency
    out = np.where(kind == HOSTCOPY, size / link, out)
    out = np.where(kind == HOSTCOPY_PAGEABLE, size / min(link, PAGEABLE_STAGING_BYTES_PER_S), out)
    return np.where(kind == 0, 0.0, out)


def host_link_bytes_per_s(hardware: Hardware) -> float:
    """The host link's bandwidth per direction (PCIe, NVLink-C2C): the spec's, else PCIe 4.0 x16."""
    ic = hardware.interconnect
    return (ic.host_link_bandwidth_bytes_per_s if ic else None) or HOST_LINK_DEFAULT_BYTES_PER_S


def nccl_choice(t: MachineTables, kind: str, size_bytes: float, devices: int,
                per_node: int | None = None) -> tuple[str, str, float]:
    """(algorithm, protocol, seconds) NCCL's tuner picks for one collective (all-reduce, all-gather,
    reduce-scatter), and the seconds it runs on the channels it fills: what ``collective_time`` charges, named."""
    p = np.array([float(devices)])
    q = np.minimum(np.array([float(per_node or devices_per_node(t.hardware))]), p)
    args = (t, np.array([COMM_KINDS.index(kind)]), np.array([size_bytes]), p, q, np.ceil(p / q))
    tuned, run = _candidates(*args), _candidates(*args, runtime=True)
    algo, proto = min(tuned, key=lambda key: float(tuned[key][0]))
    return algo, PROTOCOLS[proto], float(run[(algo, proto)][0])
