"""Alpha-beta model of collectives: ring and tree within a node, hierarchical across nodes.

With p devices, S bytes per device, link bandwidth B per direction and per-step latency α:

    all-reduce ring      2(p−1)/p · S/B + 2(p−1)·α
    all-reduce tree      2·S/B + 2·⌈log2 p⌉·α        (reduce then broadcast, pipelined)
    all-gather, reduce-scatter   (p−1)/p · S/B + (p−1)·α
    all-to-all           (p−1)/p · S/B + (p−1)·α      (pairwise exchange)

Across nodes (p > devices per node, q): reduce-scatter inside the node, the inter-node
collective on S/q over the network between p/q nodes, all-gather inside the node. All-to-all
sends the off-node share (p−q)/p · S over the network. A send/recv moves S once over the tier
its pair shares: S/B + α.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.hardware import Hardware
from perfmodel.machine import MachineTables
from perfmodel.ops.base import FloatArray, IntArray
from perfmodel.ops.collective import ALGORITHMS, COMM_KINDS

ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, SENDRECV = (
    COMM_KINDS.index(k) for k in ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv"))
RING, TREE = ALGORITHMS.index("ring"), ALGORITHMS.index("tree")


@dataclass(frozen=True)
class Fabric:
    """One tier: bandwidth per device per direction (sustained) and per-step latency."""

    bandwidth_bytes_per_s: float
    step_latency_s: float


DEFAULT_DEVICES_PER_NODE = 8  # a server's accelerators, where the spec does not say


def devices_per_node(hardware: Hardware) -> int:
    """Devices that share one node's fast fabric (NVLink, xGMI, ICI): the spec's figure, else 8."""
    ic = hardware.interconnect
    return int((ic.devices_per_node if ic else None) or DEFAULT_DEVICES_PER_NODE)


def fabrics(t: MachineTables) -> tuple[Fabric, Fabric, float]:
    """(within node, across nodes, default devices per node) for a device."""
    d = t.defaults
    ic = t.hardware.interconnect
    link_bw = (ic.link_bandwidth_bytes_per_s if ic else None) or 25e9  # PCIe 4.0 x16 per direction
    net_bw = (ic.network_bandwidth_bytes_per_s if ic else None) or min(link_bw, 25e9)
    link_lat = (ic.link_latency_s if ic else None) or d.link_step_latency_s
    net_lat = (ic.network_latency_s if ic else None) or d.network_step_latency_s
    per_node = float(devices_per_node(t.hardware))
    return (Fabric(link_bw * d.link_efficiency, link_lat),
            Fabric(net_bw * d.link_efficiency, net_lat), per_node)


def _ring_allreduce(size: FloatArray, p: FloatArray, f: Fabric) -> FloatArray:
    return 2.0 * (p - 1.0) / p * size / f.bandwidth_bytes_per_s + 2.0 * (p - 1.0) * f.step_latency_s


def _tree_allreduce(size: FloatArray, p: FloatArray, f: Fabric) -> FloatArray:
    return 2.0 * size / f.bandwidth_bytes_per_s + 2.0 * np.ceil(np.log2(np.maximum(p, 2.0))) * f.step_latency_s


def _one_way(size: FloatArray, p: FloatArray, f: Fabric) -> FloatArray:
    return (p - 1.0) / p * size / f.bandwidth_bytes_per_s + (p - 1.0) * f.step_latency_s


def _allreduce(size: FloatArray, p: FloatArray, f: Fabric, algo: IntArray) -> FloatArray:
    ring, tree = _ring_allreduce(size, p, f), _tree_allreduce(size, p, f)
    return np.where(algo == RING, ring, np.where(algo == TREE, tree, np.minimum(ring, tree)))


def collective_time(t: MachineTables, kind: IntArray, size: FloatArray, devices: FloatArray,
                    per_node_given: FloatArray, algo: IntArray) -> FloatArray:
    """Seconds per collective (0 where ``kind`` is 0: not a collective)."""
    intra, inter, per_node_default = fabrics(t)
    p = np.maximum(devices, 1.0)
    q = np.minimum(np.where(per_node_given > 0, per_node_given, per_node_default), p)
    nodes = np.ceil(p / q)
    one_node = nodes <= 1.0
    chunk = size / q
    ar = np.where(one_node, _allreduce(size, p, intra, algo),
                  _one_way(size, q, intra) + _allreduce(chunk, nodes, inter, algo) + _one_way(size, q, intra))
    gather = np.where(one_node, _one_way(size, p, intra),
                      _one_way(size / nodes, q, intra) + _one_way(size, nodes, inter))
    off_node = (p - q) / p * size
    a2a = _one_way(size * q / p, q, intra) + np.where(
        one_node, 0.0, off_node / inter.bandwidth_bytes_per_s + (nodes - 1.0) * inter.step_latency_s)
    a2a = np.where(one_node, _one_way(size, p, intra), a2a)
    p2p = np.where(one_node, size / intra.bandwidth_bytes_per_s + intra.step_latency_s,
                   size / inter.bandwidth_bytes_per_s + inter.step_latency_s)
    out = np.select([kind == ALLREDUCE, (kind == ALLGATHER) | (kind == REDUCESCATTER), kind == ALLTOALL,
                     kind == SENDRECV], [ar, gather, a2a, p2p], default=0.0)
    return np.where(p <= 1.0, 0.0, out)
