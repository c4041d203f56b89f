"""benchmarks/lodo.py with the convolution terms switched on by letter (conv17); the tip is DRWJAT (conv19's DRWJ, the
fourteenth pass's A, convbwd18's T; the letters not given are switched off): ``--switches`` letters
D (MIOpen's direct forwards at their own share, ``measured_data.MIOPEN_DIRECT_SOLVER`` and ``lodo.DIRECT_GRIDS``),
R (MIOpen's RxS Winograd, ``measured_data.MIOPEN_RXS_WINOGRAD``), W and S (the backward's weight-gradient stream and
gradient share, ``lodo.BACKWARD_GRIDS``). The searched ones go right after ``conv_matrix_efficiency`` (D before it),
W and S starting from 0.25 and 0.6 as convbwd16 ran them. O (conv18): ``onchip_efficiency`` chosen only on the rows
whose prediction it decides (``lodo.DECIDED_DEFAULTS``). J (conv19): ``onchip_efficiency`` and ``matrix_efficiency``
chosen jointly on a 2-D grid (``lodo_joint.JOINT``). P (conv19): ``onchip_efficiency`` not searched,
every fold at the shipped 0.75 (te42kyfo/gpu-benches gpu-l2-cache: the A100's L2 sustains ~5.4 of 7.22 TB/s, the
MI210's 4.3-5.1 of 6.96). A (conv20): the T4's sgemm clock on SIMT matrix work (``machine.SIMT_SUSTAINED_CLOCK``).
I (conv20): a library's SIMT implicit GEMM at the GEMM's share where integer work issues beside the FMAs
(``machine.SIMT_INTEGER_OVERLAP``). N (convbwd18): a fused Winograd backward's weight gradient as cuDNN's
non-fused Winograd one (``conv.FUSED_WGRAD_NONFUSED``); T (convbwd18): an FFT forward's backward runs the same FFT
(``measured_data.FFT_BACKWARD``).
Every other argument is lodo.py's.

    python benchmarks/lodo_conv_switches.py --switches DRWJAT [--vendor] [--save-heldout FILE.npz] ...
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lodo
import lodo_joint
import measured_data

from perfmodel import machine
from perfmodel.efficiency import ModelDefaults
from perfmodel.ops import conv

START = {"conv_backward_matrix_efficiency": 0.6, "conv_wgrad_dram_efficiency": 0.25}
LETTERS = {"S": "conv_backward_matrix_efficiency", "W": "conv_wgrad_dram_efficiency"}
_shipped_value = lodo._shipped_value


def _start(defaults: ModelDefaults, name: str) -> float:
    """A switched-on default's starting value where it is shipped unset."""
    if name in START and getattr(defaults, name) is None:
        return START[name]
    return _shipped_value(defaults, name)


def switch_on(letters: str) -> None:
    machine.SIMT_SUSTAINED_CLOCK = "A" in letters
    machine.SIMT_INTEGER_OVERLAP = "I" in letters
    machine._CACHE.clear()
    conv.FUSED_WGRAD_NONFUSED = "N" in letters
    measured_data.FFT_BACKWARD = "T" in letters
    measured_data.MIOPEN_DIRECT_SOLVER = "D" in letters
    measured_data.MIOPEN_RXS_WINOGRAD = "R" in letters
    lodo.DECIDED_DEFAULTS = frozenset({"onchip_efficiency"}) if "O" in letters else frozenset()
    lodo_joint.JOINT = lodo_joint.JOINT_PAIR if "J" in letters else ()
    after = {LETTERS[c]: lodo.BACKWARD_GRIDS[LETTERS[c]] for c in "SW" if c in letters}
    grids: dict[str, tuple[float, ...]] = {}
    for name, grid in lodo.GRIDS.items():
        if name in lodo.DIRECT_GRIDS or name in lodo.BACKWARD_GRIDS:
            continue  # shipped searched since conv19: back in below where switched on
        if name == "conv_matrix_efficiency" and "D" in letters:
            grids.update(lodo.DIRECT_GRIDS)
        grids[name] = grid
        if name == "conv_matrix_efficiency":
            grids.update(after)
    if "P" in letters:
        grids.pop("onchip_efficiency")
    lodo.GRIDS.clear()
    lodo.GRIDS.update(grids)
    lodo._shipped_value = _start


if __name__ == "__main__":
    letters = ""
    if "--switches" in sys.argv:
        at = sys.argv.index("--switches")
        letters = sys.argv[at + 1]
        del sys.argv[at:at + 2]
    switch_on(letters)
    print(f"switches {letters!r}: searched {', '.join(lodo.GRIDS)}", flush=True)
    lodo.main()
