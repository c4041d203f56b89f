"""Defaults ``benchmarks/lodo.py`` fits once per vendor, and what a vendor none of whose training rows feel one
takes (issue 24; docs/accuracy.md, fifteenth pass, smx17).

A per-vendor default is fitted as ``name@vendor`` on that vendor's training rows only. Where no training row of a
vendor feels it (one device out: the MI210 fold's AMD, whose other part, the MI25, has only GEMM and convolution
rows; the A100 fold's NVIDIA for the host floor, no other NVIDIA part being timed by a host clock), the vendor takes
the model's own fallback (``UNSEEN_VENDOR_OWN_DEFAULT``, on) instead of the mean of the other vendors' values:
the streaming share unset (``ModelDefaults.stream_dram``: the fold's fitted ``dram_efficiency``), the host floor the
GPU default (MODELING.md's 5-20 us range, 12 us).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from perfmodel.efficiency import ModelDefaults

# A streaming kernel's sustained DRAM share differs by vendor (the dev set's ROCm PyTorch GELU, layer norm and softmax
# stream at 37-45 % of the MI210's HBM peak, NVIDIA's at 80-90 %: docs/model.md section 5), and one shared value let
# the MI210's cells set the A100's.
PER_VENDOR_SHIPPED = frozenset({"stream_dram_efficiency"})
# The host floor of a call timed by a wall clock around it and a synchronize (LLMCompass's rows): the vendor's driver
# stack's launch and synchronize (CUDA's or HIP's), not the device's. Off (shipped): one value for every vendor, the
# A100 fold's chosen on the MI210's LLMCompass rows (20 us) and the MI210 fold's on the A100's (12 us).
HOST_OVERHEAD_PER_VENDOR = False
PER_VENDOR = PER_VENDOR_SHIPPED | ({"host_overhead_s"} if HOST_OVERHEAD_PER_VENDOR else set())
# On: a vendor without a value of its own takes the model's own fallback (module docstring); off: the mean of the
# other vendors' values. On since smx17: one device out softmax 45.8 -> 41.0 %, layer norm 17.3 -> 16.4 %, one vendor
# out softmax 49.2 -> 41.3 %, elementwise 20.6 -> 15.7 %, layer norm 17.5 -> 17.0 %, no class worse in either split
# (docs/accuracy.md, fifteenth pass, smx17)
UNSEEN_VENDOR_OWN_DEFAULT = True


def vendor(hardware: str) -> str:
    """A spec id's vendor (its first dash-separated word)."""
    return hardware.split("-")[0]


def with_model(shipped: dict[str, ModelDefaults], model: dict[str, float]) -> dict[str, ModelDefaults]:
    """Each device's defaults with the fitted values: ``name@vendor`` on that vendor's devices only; a vendor without
    its own value takes the mean of the other vendors' (``PER_VENDOR``; ``UNSEEN_VENDOR_OWN_DEFAULT``: its own
    fallback, the shipped default)."""
    out = {}
    for hw, d in shipped.items():
        mine = {k.split("@")[0]: v for k, v in model.items() if "@" not in k or k.split("@")[1] == vendor(hw)}
        for name in PER_VENDOR:
            others = [v for k, v in model.items() if k.startswith(name + "@")]
            if name not in mine and others and not UNSEEN_VENDOR_OWN_DEFAULT:
                mine[name] = float(np.mean(others))
        out[hw] = dataclasses.replace(d, **mine)
    return out
