"""The trials of one step of benchmarks/lodo.py's fold fit (conv19): a default alone on its grid, or
``matrix_efficiency`` and ``onchip_efficiency`` together on their grids' product (``JOINT``), in place of one at a
time. Chosen one at a time, ``onchip_efficiency`` moved with the convolution terms (D+R+W) and the matmul folds lost
through the defaults fitted alongside it (docs/accuracy.md, conv17-18); a joint choice lets a GEMM cell trade the
two at once. ``JOINT = ()``: coordinate-wise, as before conv19 (``lodo_conv_switches.py`` without J). lodo.py stays
under 500 lines, so this lives here; it imports nothing of lodo's (no cycle).
"""

from __future__ import annotations

import itertools

JOINT_PAIR: tuple[str, ...] = ("matrix_efficiency", "onchip_efficiency")
JOINT: tuple[str, ...] = JOINT_PAIR  # chosen as one step where the first comes in the descent; () for none


def pair_trials(name: str, grids: dict[str, tuple[float, ...]]) -> list[dict[str, float]]:
    """The values one step of the descent scores for ``name``: ``{name: v}`` over its grid; for the first of
    ``JOINT`` (both in ``grids``) every pair of the two grids; none (``[]``) for the second, chosen with the
    first."""
    names: tuple[str, ...] = (name,)
    if JOINT and all(n in grids for n in JOINT) and name in JOINT:
        if name != JOINT[0]:
            return []
        names = JOINT
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*(grids[n] for n in names))]
