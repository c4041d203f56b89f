"""Collective rows by network scope for ``lodo.py``: the data sets whose multi-node runs crossed a network they
do not describe, the device variant they are predicted on, and the band scopes (one node, across nodes, ...)."""

from __future__ import annotations

from measured_data import Row

from perfmodel.collectives import SOCKET_HOST_PORT_BYTES_PER_S, devices_per_node
from perfmodel.hardware import Hardware
from perfmodel.specs import derive_variant, load_hardware

COLLECTIVE_LABELS = frozenset({"allreduce", "allgather", "reducescatter", "alltoall", "sendrecv"})

# Data sets whose multi-node runs crossed a network they do not describe: Vidur's clusters (README: 'A100 DGX with
# 8 80GB A100s', 'Azure Standard_NC96ads_A100_v4 with 4 80GB A100s') name no NIC, and their 1-GPU-per-node runs
# level off at 6-8 GB/s, well below the 25 GB/s per GPU of a DGX A100's HDR ports. Scored, but banded apart.
UNKNOWN_NETWORK_DATASETS = frozenset({"vidur"})
# Their multi-node rows are predicted over the network a cluster that names no RDMA fabric is assumed to have, not
# the spec's DGX InfiniBand: NCCL over TCP sockets on one 100 GbE host port per node (``network_transport``
# "socket", ``collectives.SOCKET_*``; Azure names Ethernet, no InfiniBand, for the NC A100 v4 VMs; docs/model.md,
# "Collectives"). A stated default, not a fit: no
# measured row chooses it.
UNDESCRIBED_NETWORK = {"interconnect.network_transport": "socket",
                       "interconnect.network_bandwidth_bytes_per_s": SOCKET_HOST_PORT_BYTES_PER_S}
_VARIANTS: dict[str, Hardware] = {}


def undescribed_network_variant(hardware: str) -> Hardware:
    """The device over an undescribed network (``UNDESCRIBED_NETWORK``), built once per device."""
    if hardware not in _VARIANTS:
        _VARIANTS[hardware] = derive_variant(hardware, f"{hardware}-undescribed-network", UNDESCRIBED_NETWORK)
    return _VARIANTS[hardware]


def _across_nodes(row: Row) -> bool:
    """A collective row whose devices span more than one node."""
    per_node = row.op.get("devices_per_node") or devices_per_node(load_hardware(row.hardware))
    return int(per_node) < int(row.op["devices"])


def _undescribed_network(row: Row) -> bool:
    """A multi-node collective of a data set that does not describe its network."""
    if row.dataset not in UNKNOWN_NETWORK_DATASETS or row.label not in COLLECTIVE_LABELS:
        return False
    return _across_nodes(row)


def _in_scope(row: Row, scope: str) -> bool:
    """Whether a row belongs to a band's scope: all, network known (all but multi-node rows over an undescribed
    network), one node, across nodes, across nodes over an unknown network."""
    if scope == "all":
        return True
    across = _across_nodes(row)
    unknown = across and row.dataset in UNKNOWN_NETWORK_DATASETS
    if scope == "network known":
        return not unknown
    if scope == "across, unknown network":
        return unknown
    return across if scope == "across nodes" else not across
