"""Whether the device a trace names (Kineto ``deviceProperties``, nsys's device column) is the device it was
uploaded for: a ResNet-50 trace of a V100 stored as A100 runs would fit the A100's calibration to V100 timings.

Both sides are reduced to their model numbers (``V100``, ``A100``, ``MI250X``, ``L40S``, ``GH200``: letters then
digits, one token); form factor, memory and board codes (``SXM4``, ``PCIe``, ``80GB``) are left out, so an
A100 PCIe trace on the A100 SXM4 spec does not warn. Names without a model number ("AMD Radeon Graphics", as
ROCm's Kineto writes an MI250) give no verdict."""

from __future__ import annotations

from collections.abc import Iterable

from perfmodel.device_names import model_numbers
from perfmodel.hardware import Hardware
from perfmodel.traces.records import KernelRecord

# a Kineto device kind (``KernelRecord.device_kind``) that names an accelerator, and the words of a spec for it
_ACCELERATOR_WORDS = {"mtia": ("mtia",), "hpu": ("gaudi", "hpu")}


def accelerator_of(kernels: Iterable[KernelRecord]) -> str | None:
    """The accelerator every device record of a trace ran on where it is not a GPU (Meta's MTIA, Intel's HPU),
    else None (GPU kernels, a CUPTI range, or a mix)."""
    kinds = {k.device_kind for k in kernels}
    return next(iter(kinds)) if len(kinds) == 1 and next(iter(kinds)) in _ACCELERATOR_WORDS else None


def device_mismatch(hardware: Hardware, device_name: str | None,
                    kernels: Iterable[KernelRecord] = ()) -> str | None:
    """A warning where the trace names a device whose model number the chosen spec does not have, or where its
    device work is all another accelerator's (an MTIA trace, whose ``deviceProperties`` is empty, uploaded for a
    GPU); else None."""
    accelerator = accelerator_of(kernels)
    spec_text = f"{hardware.id} {hardware.name}".lower()
    if accelerator is not None and not any(word in spec_text for word in _ACCELERATOR_WORDS[accelerator]):
        return (f"the trace's device work is all {accelerator.upper()} events, but its runs are stored for "
                f"{hardware.id} ({hardware.name}): a calibration of {hardware.id} will fit them; upload it for a "
                "spec of that accelerator if this is not what you meant")
    if not device_name:
        return None
    named = model_numbers(device_name)
    chosen = model_numbers(hardware.id) | model_numbers(hardware.name)
    if not named or not chosen or named & chosen:
        return None
    return (f"the trace was recorded on {device_name!r}, but its runs are stored for {hardware.id} "
            f"({hardware.name}): a calibration of {hardware.id} will fit them; upload it again for the right device "
            "if this is not what you meant")
