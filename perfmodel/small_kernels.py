"""A GPU's small-kernel interval from public microbenchmarks, for a per-device kernel floor (issue 24, ln16).

te42kyfo/gpu-benches (NHR@FAU) ``gpu-small-kernels`` queues 10,000 launches of a streaming SCALE kernel
(``A[i] = B[i] * 0.25``, fp64, 4 K - 16 K elements: 64 - 256 KB, L2-resident) in one CUDA / HIP graph, so the host's
launch rate is out of it, and reports GB/s per size and block size. The best block size's time per kernel
T = V / bandwidth, fitted as T = a + V / b over those sizes (the repository's own fit form, ``plot.py``), gives a:
the device's time per back-to-back small kernel (seconds). Figures (``*_graph.txt``; docs/model.md,
"Small-kernel floors per device"): A100 SXM4 80GB 1.332 us (a100_80_graph.txt), A40 1.068 us (a40_graph.txt),
L40 0.911 us (l40_graph.txt), H200 2.180 us (h200_graph.txt), MI210 1.981 us (mi210_rocm60_graph.txt, ROCm 6.0).

With ``ModelDefaults.small_kernel_reference_s`` set, a listed device's kernel floor is the fitted
``kernel_overhead_s`` x its interval / the reference (``MachineTables.kernel_overhead_s``); unset (shipped), or a
device without a figure, the floor is ``kernel_overhead_s`` as before. Off: refitted in both leave-one-out splits it
made elementwise, embedding and RMSNorm worse (docs/accuracy.md, ln16).
"""

from __future__ import annotations

# seconds per back-to-back small kernel in a graph launch, by spec id (the fits above)
SMALL_KERNEL_INTERVAL_S: dict[str, float] = {
    "nvidia-a100-sxm4-80gb": 1.332e-6,
    "nvidia-a40": 1.068e-6,
    "nvidia-l40": 0.911e-6,
    "nvidia-h200-sxm-141gb": 2.180e-6,
    "amd-mi210": 1.981e-6,
}
# the A100 SXM4 80GB's interval: the part the GPU default floor (2 us, MODELING.md) was read on
A100_INTERVAL_S = SMALL_KERNEL_INTERVAL_S["nvidia-a100-sxm4-80gb"]


def floor_scale(hardware_id: str, derived_from: str | None, reference_s: float | None) -> float:
    """The factor on the fitted kernel floor for a device (1 where off or without a published interval)."""
    if reference_s is None:
        return 1.0
    interval = SMALL_KERNEL_INTERVAL_S.get(hardware_id)
    if interval is None and derived_from is not None:
        interval = SMALL_KERNEL_INTERVAL_S.get(derived_from)
    return 1.0 if interval is None else interval / reference_s
