"""The Triton hook's ranking against published per-config autotune timings.

    .venv/bin/python benchmarks/triton_ranking.py

``benchmarks/data/inductor_autotune_l40s.csv``: PyTorch Inductor's ``AUTOTUNE mm(...)`` tables (torch 2.8.0,
``mode="max-autotune"``, fp16, NVIDIA L40S), transcribed from guan404ming/gmc-ithome ``code/day23/run.log``
@ d994ce30fff9a428117f9bfb95f06488e370ac2d: the ten fastest choices Inductor prints per shape (the cuBLAS
``mm`` row left out: it is no Triton config) and the configs it dropped as out of shared memory (its
``Required: ... Hardware limit: 101376`` lines). Each config is costed by ``TritonMatmulModel("nvidia-l40s")``
as ``triton.autotune`` would ask it; prints predicted vs measured per config, and per shape Spearman's rho and
Kendall's tau-b between predicted and measured times, whether the dropped configs are pruned, and the measured
time of the config the model ranks first relative to the measured best.

``benchmarks/data/inductor_autotune_vllm_doc.csv``: a second skinny family, 8×2048 @ 2048×3072 (16-bit), the table
vLLM's ``docs/design/torch_compile.md`` (@ c85b49b2) prints; its device is not named (an A100/H100-class part: its
16×128×128 4-stage config ran, 147,456 B of shared memory), so it is ranked on both (``SECOND``).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from scipy.stats import kendalltau, spearmanr  # type: ignore[import-untyped,unused-ignore]

from perfmodel.roofline import HardwareLike
from perfmodel.tuners.triton_hook import TritonMatmulModel

DATA = Path(__file__).resolve().parent / "data" / "inductor_autotune_l40s.csv"
HARDWARE = "nvidia-l40s"
VLLM_DATA = Path(__file__).resolve().parent / "data" / "inductor_autotune_vllm_doc.csv"
SECOND = (VLLM_DATA, ("nvidia-a100-sxm4-80gb", "nvidia-h100-sxm5-80gb"))  # the file and the devices it may be


@dataclass(frozen=True)
class ShapeAgreement:
    """One GEMM shape: configs, measured ms (None: out of resources), predicted ms, and the agreement."""

    shape: tuple[int, int, int]
    configs: list[dict[str, int]]
    measured_ms: list[float | None]
    predicted_ms: list[float]
    spearman: float
    kendall: float
    pruned_as_published: bool  # every config Inductor dropped for shared memory is inf, every measured one finite
    top_pick_ratio: float  # measured time of the model's first pick / the measured best


def load(path: Path = DATA) -> dict[tuple[int, int, int], list[dict[str, str]]]:
    """The CSV's rows grouped by (m, n, k)."""
    out: dict[tuple[int, int, int], list[dict[str, str]]] = {}
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            out.setdefault((int(row["m"]), int(row["n"]), int(row["k"])), []).append(row)
    return out


def agreement(hardware: HardwareLike = HARDWARE, path: Path = DATA) -> list[ShapeAgreement]:
    """Predicted vs measured for every shape in the file."""
    result = []
    for (m, n, k), rows in load(path).items():
        model = TritonMatmulModel(hardware, m=m, n=n, k=k, dtype=rows[0]["dtype"])
        configs = [{"BLOCK_M": int(r["block_m"]), "BLOCK_N": int(r["block_n"]), "BLOCK_K": int(r["block_k"]),
                    "GROUP_M": int(r["group_m"]), "num_warps": int(r["num_warps"]),
                    "num_stages": int(r["num_stages"])} for r in rows]
        predicted = [model.perf_model(**c) for c in configs]
        measured = [float(r["measured_ms"]) if r["status"] == "ok" else None for r in rows]
        ok = [(t, p) for t, p in zip(measured, predicted, strict=True) if t is not None]
        rho = float(spearmanr([t for t, _ in ok], [p for _, p in ok]).statistic)
        tau = float(kendalltau([t for t, _ in ok], [p for _, p in ok]).statistic)
        pruned = all(math.isinf(p) == (t is None) for t, p in zip(measured, predicted, strict=True))
        pick = min(ok, key=lambda tp: tp[1])[0]
        result.append(ShapeAgreement((m, n, k), configs, measured, predicted, rho, tau, pruned,
                                     pick / min(t for t, _ in ok)))
    return result


def main() -> None:
    runs = [(HARDWARE, a) for a in agreement()]
    runs += [(hw, a) for hw in SECOND[1] for a in agreement(hw, SECOND[0])]
    for hardware, a in runs:
        m, n, k = a.shape
        print(f"\nmm {m}x{k} @ {k}x{n} 16-bit on {hardware}")
        print("| BLOCK_M x N x K | stages | warps | measured ms | predicted ms |")
        print("|---|---:|---:|---:|---:|")
        for c, t, p in zip(a.configs, a.measured_ms, a.predicted_ms, strict=True):
            measured = f"{t:.4f}" if t is not None else "out of SMEM"
            print(f"| {c['BLOCK_M']}x{c['BLOCK_N']}x{c['BLOCK_K']} | {c['num_stages']} | {c['num_warps']} | "
                  f"{measured} | {p:.4f} |")
        print(f"Spearman {a.spearman:+.2f}, Kendall tau-b {a.kendall:+.2f}; SMEM pruning as published: "
              f"{a.pruned_as_published}; the model's first pick measures {a.top_pick_ratio:.3f}x the best")


if __name__ == "__main__":
    main()
