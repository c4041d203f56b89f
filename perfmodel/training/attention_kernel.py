"""Which flash-attention kernel a training run's attention runs (issue 29, fourteenth pass).

The op model costs an attention on a device with the kernel that device's matrix instruction allows: on Hopper
(``mma_scope: warpgroup``, wgmma) FlashAttention-3's warp-specialised ping-pong, on mma.sync devices
FlashAttention-2's (docs/model.md, 'Flash attention: FA2 vs FA3'). A run from before FlashAttention-3 existed
(Shah et al. 2024, arXiv:2407.08608, v1 of 2024-07-11) ran FlashAttention-2 on Hopper too, whose mma.sync kernel
the model costs as the same device with warp-scope MMAs (as ``benchmarks/flash_attention.py`` does for the FA3
paper's FA2 rows). ``fa2_device`` builds that device; only the attention ops are costed on it, every GEMM and
stream stays on the device as specified.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfmodel.training.layout import ATTENTION_KERNELS

if TYPE_CHECKING:
    from perfmodel.hardware import Hardware

_CACHE: dict[str, Hardware] = {}


def fa2_device(hardware: Hardware) -> Hardware:
    """``hardware`` with its matrix engines' instruction scope set to ``warp`` (mma.sync: FlashAttention-2's);
    the device itself where no engine states a scope (no asynchronous-MMA kernel to replace)."""
    if not any(e.mma_scope for e in hardware.engines):
        return hardware
    from perfmodel.search import fa2_tiles

    key = f"{hardware.content_hash}:{fa2_tiles.MMA_SYNC_SHARE}"
    if key not in _CACHE:
        from perfmodel.specs import load_hardware, parse_spec  # pydantic: only when a variant is built

        dump = getattr(hardware, "model_dump", None)  # a plain frozen copy has none: its validated spec has
        data = dump(mode="json") if dump else load_hardware(hardware.id).model_dump(mode="json")
        fa2_tiles.mma_sync_engines(data["engines"])
        data.update(id=f"{hardware.id}-mma-sync", derived_from=hardware.id)
        _CACHE[key] = parse_spec(data, f"{hardware.id} with mma.sync (FlashAttention-2)")
    return _CACHE[key]


def attention_device(hardware: Hardware, kernel: str) -> Hardware:
    """The device to cost a run's attention ops on: ``native`` the device's own best kernel, ``fa2``
    FlashAttention-2's."""
    if kernel == "native":
        return hardware
    if kernel == "fa2":
        return fa2_device(hardware)
    raise ValueError(f"attention kernel must be one of {', '.join(ATTENTION_KERNELS)}, got {kernel!r}")
