"""Parallelism layout (tensor, pipeline, data, expert) and the collectives it inserts.

A point-to-point send of S bytes between pipeline stages is costed as a 2-device all-gather of
2·S bytes: (p−1)/p · 2S / B + α = S / B + α, the alpha-beta time of one send.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfmodel.graph.ir import GraphError


@dataclass(frozen=True)
class Parallelism:
    """Degrees of parallelism; devices = tp · pp · dp (expert parallelism reuses tp or dp ranks)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    microbatches: int = 1  # pipeline microbatches per step (the batch is split into them)
    devices_per_node: int | None = None  # None: the hardware's

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "ep", "microbatches"):
            if int(getattr(self, name)) < 1:
                raise GraphError("parallelism", f"{name} must be >= 1, got {getattr(self, name)}")
        ep_ok = self.ep == 1 or self.ep == self.tp or (self.tp == 1 and self.dp % self.ep == 0)
        if not ep_ok:
            raise GraphError("parallelism", f"ep={self.ep} must be 1, equal tp ({self.tp}), or divide dp "
                                            f"({self.dp}) with tp=1 (data-parallel attention)")

    @property
    def devices(self) -> int:
        return self.tp * self.pp * self.dp

    @staticmethod
    def for_devices(devices: int, tp: int | None = None, pp: int | None = None, dp: int | None = None,
                    ep: int = 1, microbatches: int = 1) -> Parallelism:
        """Fill in the degree left out so that tp · pp · dp = devices (tp takes all by default)."""
        if devices < 1:
            raise GraphError("parallelism", f"devices must be >= 1, got {devices}")
        pp_ = pp or 1
        if tp is None and dp is None:
            tp_, dp_ = devices // pp_, 1
        elif tp is None:
            tp_, dp_ = devices // (pp_ * (dp or 1)), dp or 1
        else:
            tp_, dp_ = tp, dp if dp is not None else devices // (tp * pp_)
        if tp_ < 1 or dp_ < 1 or tp_ * pp_ * dp_ != devices:
            raise GraphError("parallelism", f"tp={tp_} x pp={pp_} x dp={dp_} does not make {devices} devices")
        return Parallelism(tp=tp_, pp=pp_, dp=dp_, ep=ep, microbatches=microbatches)

    def to_json(self) -> dict[str, Any]:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "ep": self.ep, "microbatches": self.microbatches,
                "devices": self.devices}


def shard(value: int, ways: int, what: str) -> int:
    """``value / ways``, or an error naming what does not divide."""
    if value % ways:
        raise GraphError("parallelism", f"{what} ({value}) is not divisible by {ways}")
    return value // ways


def allreduce(size_bytes: float, devices: int, dtype: str) -> dict[str, Any]:
    return {"kind": "allreduce", "bytes": size_bytes, "devices": devices, "dtype": dtype}


def allgather(size_bytes: float, devices: int, dtype: str) -> dict[str, Any]:
    return {"kind": "allgather", "bytes": size_bytes, "devices": devices, "dtype": dtype}


def alltoall(size_bytes: float, devices: int, dtype: str) -> dict[str, Any]:
    return {"kind": "alltoall", "bytes": size_bytes, "devices": devices, "dtype": dtype}


def send(size_bytes: float, dtype: str, across_nodes: bool) -> dict[str, Any]:
    """One point-to-point send (pipeline hop) as a 2-device all-gather (see the module doc)."""
    op: dict[str, Any] = {"kind": "allgather", "bytes": 2.0 * size_bytes, "devices": 2, "dtype": dtype}
    if across_nodes:
        op["devices_per_node"] = 1
    return op
