"""``predict_many`` on distinct JSON dicts (call memo cleared before each call, best of ``--calls``) and
``predict_columns`` on the all-distinct table (``predict_speed.distinct_table``, ``--rows`` rows, best of 3, with the
CPU time inside ``gemm_jit.best``), for this tree and a baseline git ref (``--baseline``, exported with ``git archive``
to a temporary folder; both trees' numba kernels compiled to their disk caches first, so no measured process
compiles), each run in a fresh interpreter, the two alternating for ``--pairs`` rounds (the first
side alternating too). Rates are ops per CPU second (``time.process_time``); prints each pair's branch / baseline
ratio, their median and the load average: on a shared machine the load moves both sides of a pair alike.

    python benchmarks/predict_ab.py [--baseline main] [--pairs 3] [--rows 100000] [--dicts 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def measure(rows: int, dicts: int, calls: int) -> dict[str, float]:
    """The figures of one process (this interpreter's ``perfmodel``)."""
    sys.path.insert(0, str(HERE))
    import predict_speed

    import perfmodel
    from perfmodel import columnar
    from perfmodel.search import call_memo, gemm_kernel

    hw = perfmodel.load_hardware("nvidia-h100-sxm5-80gb")
    gemm_kernel.load()
    unique = predict_speed._distinct_mix(predict_speed.mixed_ops(dicts))
    perfmodel.predict_many(hw, unique[:200])
    best_dicts = 0.0
    for _ in range(calls):
        call_memo.clear()
        start = time.process_time()
        perfmodel.predict_many(hw, unique)
        best_dicts = max(best_dicts, len(unique) / (time.process_time() - start))
    kernels = gemm_kernel._kernels()
    assert kernels is not None
    spent = [0.0]

    def timed(*args: Any) -> None:
        start = time.process_time()
        kernels[1](*args)
        spent[0] += time.process_time() - start

    gemm_kernel._kernels = lambda: (kernels[0], timed)  # type: ignore[assignment]
    table = predict_speed.distinct_table(rows)
    columnar.predict_columns(hw, {k: v[:1000] for k, v in table.items()})
    best_rows, best_share = 0.0, 0.0
    for _ in range(3):
        spent[0] = 0.0
        start = time.process_time()
        columnar.predict_columns(hw, table)
        took = time.process_time() - start
        if rows / took > best_rows:
            best_rows, best_share = rows / took, spent[0] / took
    return {"dicts": best_dicts, "rows": best_rows, "best_share": best_share, "load": os.getloadavg()[0]}


def run(tree: Path, args: argparse.Namespace) -> dict[str, float]:
    code = (f"import json, sys; sys.path.insert(0, {str(HERE)!r}); import predict_ab; "
            f"print(json.dumps(predict_ab.measure({args.rows}, {args.dicts}, {args.calls})))")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tree, check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dicts", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        archive = subprocess.run(["git", "archive", args.baseline], cwd=ROOT, check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        for tree in (base, ROOT):  # numba's disk cache filled first: no side compiles (and keeps the compiler's
            subprocess.run([sys.executable, "-m", "perfmodel.search.gemm_kernel"], cwd=tree, check=True,  # objects)
                           env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True)
        ratios: dict[str, list[float]] = {"dicts": [], "rows": []}
        for pair in range(args.pairs):
            sides = [("baseline", base), ("branch", ROOT)]
            figures = {name: run(tree, args) for name, tree in (sides if pair % 2 == 0 else sides[::-1])}
            b, t = figures["baseline"], figures["branch"]
            for key in ratios:
                ratios[key].append(t[key] / b[key])
            print(f"pair {pair + 1} (load {b['load']:.1f} / {t['load']:.1f}): distinct dicts {b['dicts']:,.0f} / "
                  f"{t['dicts']:,.0f} ops/s ({t['dicts'] / b['dicts']:.3f}); all-distinct columns, {args.rows:,} rows "
                  f"{b['rows']:,.0f} / {t['rows']:,.0f} rows/s ({t['rows'] / b['rows']:.3f}); gemm_jit.best's share "
                  f"{b['best_share']:.0%} / {t['best_share']:.0%}", flush=True)
        for key, label in (("dicts", "distinct dicts (memo cleared)"), ("rows", "all-distinct columns")):
            print(f"branch / {args.baseline}, {label}: median {statistics.median(ratios[key]):.3f} "
                  f"(range {min(ratios[key]):.3f}-{max(ratios[key]):.3f})")


if __name__ == "__main__":
    main()
