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
    # NCCL's Simple protocol: 8.4 µs base (its kernel launch included), one NVLink hop 3.4 µs, one network hop 14 µs
    near_s, far_s = 11.8e-6, 22.4e-6
    near = perfmodel.predict(HW, {"kind": "sendrecv", "bytes": size})
    far = perfmodel.predict(HW, {"kind": "sendrecv", "bytes": size, "devices_per_node": 1})
    assert near.bound == far.bound == "interconnect"
    assert near.time_s == pytest.approx(near_s + size / intra.bandwidth_bytes_per_s)
    assert far.time_s == pytest.approx(far_s + size / inter.bandwidth_bytes_per_s)
    assert far.time_s > near.time_s


def test_send_time_grows_with_the_message() -> None:
    small, big = (perfmodel.predict(HW, {"kind": "sendrecv", "bytes": b}).time_s for b in (1e3, 1e9))
    assert big > 100 * small


def test_send_rejects_an_empty_message() -> None:
    with pytest.raises(ValueError, match="bytes"):
        perfmodel.predict(HW, {"kind": "sendrecv", "bytes": 0})
