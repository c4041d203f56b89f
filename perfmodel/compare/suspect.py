"""Mark the groups whose timings no device can produce (``physical``): on either side, the median call faster than
the least time the op's bytes and FLOPs need on that side's device; or one kernel recording the same time for every
size (its median call) while that time is impossible at one of them (the recorder set it: PyTorch 1.8's memsets all
last 1 us). Such groups are reported as "timing suspect" with the reason and kept out of the tests and the gate."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfmodel.compare.physical import MIN_CONSTANT_GROUPS, MIN_WORK_SPAN, ceiling, constant_recording, impossible
from perfmodel.compare.sides import Side
from perfmodel.hardware import Hardware

if TYPE_CHECKING:
    from perfmodel.compare.diff import GroupDiff


def _side(groups: list[GroupDiff], side: Side, hw: Hardware, name: str) -> dict[int, str]:
    c = ceiling(hw)
    reasons: dict[int, str] = {}
    by_kernel: dict[str, list[GroupDiff]] = {}
    for g in groups:
        pred = g.base_prediction if name == "base" else g.new_prediction
        if pred is None or g.op is None:
            continue
        times = side.groups[g.key].times_s
        calls = len(times)
        launches = (g.base_launches if name == "base" else g.new_launches) / max(calls, 1)
        median = g.base_median_s if name == "base" else g.new_median_s
        why = impossible(name, c, pred.bytes_moved, pred.flops, g.op.get("dtype"), median, times, launches)
        if why is not None:
            reasons[id(g)] = why
        kernels = g.kernel_names if name == "base" else g.new_kernel_names
        if len(kernels) == 1:
            by_kernel.setdefault(kernels[0], []).append(g)
    for kernel, members in by_kernel.items():
        proven = [g for g in members if id(g) in reasons]
        if not proven or len(members) < MIN_CONSTANT_GROUPS:
            continue
        values = {g.base_median_s if name == "base" else g.new_median_s for g in members}
        sizes = [_bytes(g, name) for g in members]
        if len(values) != 1 or min(sizes) <= 0 or max(sizes) < MIN_WORK_SPAN * min(sizes):
            continue
        proof = reasons[id(max(proven, key=lambda g: _bytes(g, name)))]
        for g in members:
            reasons.setdefault(id(g), constant_recording(name, kernel, next(iter(values)),
                                                         sizes, proof.split(": ", 1)[1]))
    return reasons


def _bytes(g: GroupDiff, name: str) -> float:
    pred = g.base_prediction if name == "base" else g.new_prediction
    return pred.bytes_moved if pred is not None else 0.0


def mark_suspects(groups: list[GroupDiff], base: Side, new: Side, base_hw: Hardware | None,
                  new_hw: Hardware | None) -> None:
    """Set ``timing_suspect`` on the groups whose timings are impossible on one side (the change compares a recording
    artefact), ``work_suspect`` where both sides are: the matched op's work, not a timing, is then in doubt (HTA's
    sampled ranks: 3 GEMMs whose shapes need 10x the A100's peak on both ranks), and the verdict stands."""
    found: dict[int, list[str]] = {}
    for side, hw, name in ((base, base_hw, "base"), (new, new_hw, "new")):
        if hw is None:
            continue
        for key, why in _side(groups, side, hw, name).items():
            found.setdefault(key, []).append(why)
    for g in groups:
        reasons = found.get(id(g))
        if not reasons:
            continue
        if len(reasons) == 2:  # both sides timed the same kernels faster than the op allows: the op's work (its
            g.work_suspect = "; ".join(reasons)  # matched shapes) is in doubt, not one recording; verdict kept
        else:
            g.timing_suspect = reasons[0]
