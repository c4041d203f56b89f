"""Whether the device a trace names (Kineto ``deviceProperties``, nsys's device column) is the device it was
uploaded for: a ResNet-50 trace of a V100 stored as A100 runs would fit the A100's calibration to V100 timings.

Both sides are reduced to their model numbers (``V100``, ``A100``, ``MI250X``, ``L40S``, ``GH200``: letters then
digits, one token); form factor, memory and board codes (``SXM4``, ``PCIe``, ``80GB``) are left out, so an
A100 PCIe trace on the A100 SXM4 spec does not warn. Names without a model number ("AMD Radeon Graphics", as
ROCm's Kineto writes an MI250) give no verdict."""

from __future__ import annotations

from perfmodel.device_names import model_numbers
from perfmodel.hardware import Hardware


def device_mismatch(hardware: Hardware, device_name: str | None) -> str | None:
    """A warning where the trace names a device whose model number the chosen spec does not have; else None."""
    if not device_name:
        return None
    named = model_numbers(device_name)
    chosen = model_numbers(hardware.id) | model_numbers(hardware.name)
    if not named or not chosen or named & chosen:
        return None
    return (f"the trace was recorded on {device_name!r}, but its runs are stored for {hardware.id} "
            f"({hardware.name}): a calibration of {hardware.id} will fit them; upload it again for the right device "
            "if this is not what you meant")
