"""The memory hierarchy's time terms of the roofline (``perfmodel.roofline.evaluate``): a level's latency plus
bytes over bandwidth, the DRAM stream's Little's-law ramp under load (bytes in flight / loaded latency), and the
share of a warm stream the last-level cache serves."""

from __future__ import annotations

import numpy as np

from perfmodel.machine import MachineTables
from perfmodel.ops import Work
from perfmodel.ops.base import FloatArray

__all__ = ["in_flight_time", "level_time", "llc_hit_share"]


def level_time(bytes_: FloatArray, bandwidth: float, latency_s: float, efficiency: float,
               share: FloatArray) -> FloatArray:
    """Time of one memory level, s: its latency plus ``bytes_`` over bandwidth x efficiency x unit share (0 where
    no bytes)."""
    return np.where(bytes_ > 0, latency_s + bytes_ / (bandwidth * efficiency * share), 0.0)


def in_flight_time(work: Work, t: MachineTables, latency_s: float, bandwidth: float,
                   hit: FloatArray | None = None, llc_latency_s: float = 0.0, llc_bandwidth: float = 1.0,
                   dram_bytes: FloatArray | None = None) -> FloatArray:
    """Little's law: bandwidth = bytes in flight / latency, with latency rising under load.

    Bytes in flight F = resident threads (capped by units x resident threads per unit, or by what the
    kernel's launch puts on a unit) x the bytes each thread keeps outstanding. Latency grows linearly with
    utilisation, L = L0 · (1 + a · bw / BW) with a = loaded factor − 1. A share ``hit`` of the loads is served
    by the last-level cache (warm, partly resident): their round trip is the LLC's, loaded by the LLC's own
    utilisation, L = h·Lc·(1 + a·h·bw/BWc) + (1−h)·L0·(1 + a·(1−h)·bw/BW), so the achieved bandwidth solves
    A·bw² + B·bw − F = 0 with A = a·(h²·Lc/BWc + (1−h)²·L0/BW), B = h·Lc + (1−h)·L0. A kernel whose threads
    keep few bytes in flight cannot reach the bandwidth roof, however large the tensor. Returns the time after
    the first round trip (whose latency is B). ``dram_bytes``: ``work.dram_bytes`` where the caller has it.
    """
    if t.hardware.kind != "gpu":
        return np.zeros(work.n)
    h = np.zeros(work.n) if hit is None else hit
    cap = work.threads_per_unit_cap
    per_unit = np.where(cap > 0, np.minimum(cap, t.resident_threads_per_unit), t.resident_threads_per_unit)
    resident = np.minimum(work.threads, t.units * per_unit)
    in_flight = resident * work.bytes_per_thread
    a = max(t.defaults.loaded_latency_factor - 1.0, 1e-9)
    quad = a * (h * h * llc_latency_s / llc_bandwidth + (1.0 - h) ** 2 * max(latency_s, 1e-12) / bandwidth)
    lin = np.maximum(h * llc_latency_s + (1.0 - h) * latency_s, 1e-12)
    chained = work.index_sector_elements > 0
    if chained.any():  # a gather's index -> row chain (docs/model.md section 3): cold index sectors, then rows
        cold = np.minimum(1.0, resident / np.maximum(work.index_sector_elements, 1.0))
        lin = np.where(chained, lin + cold * latency_s, lin)
        quad = np.where(chained, 0.0, quad)  # its round trips at the first-byte latency, unlifted
    # the stable root 2F / (B + sqrt(B² + 4AF)) of A·bw² + B·bw − F = 0
    achieved = 2.0 * in_flight / (lin + np.sqrt(lin * lin + 4.0 * quad * in_flight))
    rest = np.maximum((work.dram_bytes if dram_bytes is None else dram_bytes) - in_flight, 0.0)
    return np.where(in_flight > 0, rest / np.maximum(achieved, 1e-30), 0.0)


def llc_hit_share(compulsory: FloatArray, capacity_bytes: float, resident_fraction: float) -> FloatArray:
    """Share of a warm stream's bytes the last-level cache serves: all of a working set within the share of
    the cache it can count on (``resident_fraction`` x capacity), and that share of a larger one, f·C / W.

    A repeated stream larger than the cache keeps the part its last pass left behind when replacement is not
    strict LRU (NVIDIA's and AMD's L2s are not; strict LRU would keep none of a cyclic stream): the knee is
    smooth, hits fall as 1 / W past it instead of dropping to zero at f·C.
    """
    held = capacity_bytes * resident_fraction
    share: FloatArray = np.where(compulsory > 0, np.minimum(1.0, held / np.maximum(compulsory, 1.0)), 0.0)
    return share
