"""How long ``fit_calibration`` takes and how much memory it holds, from 1,000 to 100,000 runs.

Runs: the Vidur A100 kernel rows (``measured_data.vidur``: 4,964 real runs of 8 LLMs' transformer blocks).
Below that many, a seeded random subset; above, the real rows plus copies with realistic shape variation:
each copy scales the op's token dimension (a GEMM's ``m``, a shape's first dimension, an embedding's
indices) by 2^u, u uniform in [-0.5, 0.5], and its measured time by the model's own ratio for the new
shape times a log-normal 3 % repeat noise. So the copies keep the real runs' residual structure and add
distinct shapes (as a larger trace would), not only repeats.

Each size runs in a fresh process (``--one N``) on one thread: wall and CPU seconds of the fit alone (on a
loaded machine the CPU seconds are the steadier figure), and peak RSS (``ru_maxrss``) of the process and its
growth from the RSS before the fit (the imports and rows). The runs are made in another process (their
making predicts every copy twice) and handed over as a pickle, so the fitting process's peak is the imports,
the runs and the fit, as in the service's worker that loads stored runs (and not a parent's: a child's
``ru_maxrss`` starts at its parent's, kept across exec).

    python benchmarks/calibration_speed.py                    # 1k, 5k, 20k, 100k
    python benchmarks/calibration_speed.py --sizes 1000 5000 --timeout 600
    python benchmarks/calibration_speed.py --profile 5000     # cProfile: the hot spots' shares
    python benchmarks/calibration_speed.py --sizes 5000 --baseline /tmp/pm-base --repeat 3
        # another checkout's code on the same runs file, alternating with this one: CPU s old -> new, ratio

Figures (issue 22, fast fits: 752a2ec -> the trees' 2-fold validation): CPU s of the fit, each run in a fresh
process on one thread, the two checkouts alternating on one runs file (``--baseline``), on the shared 2-core VM
at a load average of 5-7 (identical runs differ by up to 25 %); peak RSS of the fitting process:

    runs      CPU s before -> after (median; range)           peak RSS MB before -> after
    1,000     1.47 (1.39-1.66) -> 1.32 (1.04-1.59), 3 each     119 -> 119
    5,000     2.09 (2.04-2.56) -> 1.73 (1.68-2.52), 6 each     138-142 -> 139-142
    20,000    5.55 (5.47-6.50) -> 4.58 (4.35-5.17), 4 each     241-245 -> 236-254
    100,000   10.8 (10.2-11.4) -> 9.9 (9.8-10.5), 4 each       348-352 -> 354-361

Scaling 1k -> 100k: 1.3 -> 9.9 s (7.5x for 100x the runs: the trees see at most 12,000 runs, each class's
forms are cross-validated on at most 4,000, the local correction keeps at most 2,500 ops).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pickle
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measured_data import vidur

import perfmodel

HW = "nvidia-a100-sxm4-80gb"
SIZES = (1000, 5000, 20000, 100000)
NOISE = 0.03  # log-normal repeat noise of a copied run


def _scaled(op: dict[str, Any], factor: float) -> dict[str, Any]:
    """``op`` with its token dimension times ``factor`` (at least 1)."""
    out = dict(op)
    if "m" in out:
        out["m"] = max(1, round(out["m"] * factor))
    elif "num_indices" in out:
        out["num_indices"] = max(1, round(out["num_indices"] * factor))
    elif isinstance(out.get("shape"), list) and out["shape"]:
        out["shape"] = [max(1, round(out["shape"][0] * factor)), *out["shape"][1:]]
    return out


def runs(n: int, seed: int = 0) -> list[tuple[dict[str, Any], float]]:
    """``n`` (op, measured seconds) runs of the A100 (see the module docstring)."""
    real = [(r.op, r.measured_s) for r in vidur() if r.hardware == HW and r.timing == "kernel"]
    rng = np.random.default_rng(seed)
    if n <= len(real):
        return [real[int(i)] for i in np.sort(rng.choice(len(real), size=n, replace=False))]
    picks = rng.integers(0, len(real), size=n - len(real))
    ops = [_scaled(real[int(i)][0], float(2.0 ** rng.uniform(-0.5, 0.5))) for i in picks]
    before = perfmodel.predict_many(HW, [real[int(i)][0] for i in picks]).time_s
    after = perfmodel.predict_many(HW, ops).time_s
    seconds = np.array([real[int(i)][1] for i in picks]) * np.where(before > 0, after / np.where(before > 0, before, 1),
                                                                    1.0)
    seconds *= np.exp(NOISE * rng.standard_normal(seconds.size))
    return real + list(zip(ops, seconds.tolist(), strict=True))


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def traced_peak_mb(n: int) -> float:
    """Peak MB the fit of ``n`` runs allocates (Python and numpy, ``tracemalloc``), the runs made before."""
    import gc
    import tracemalloc

    from perfmodel.calibration import fit_calibration

    data = runs(n)
    gc.collect()
    tracemalloc.start()
    fit_calibration(HW, data)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 1e6


def one(n: int, runs_file: str | None = None) -> dict[str, Any]:
    """Fit ``n`` runs in this process (made here, or loaded from ``runs_file``, a pickle of ``runs(n)``): seconds,
    RSS before, peak RSS (MB), stages seen, what was kept."""
    from perfmodel.calibration import fit_calibration

    if runs_file is None:
        data = runs(n)
    else:
        with open(runs_file, "rb") as handle:
            data = pickle.load(handle)
    before_mb = _rss_mb()
    stages: dict[str, float] = {}
    start, cpu_start = time.perf_counter(), time.process_time()

    def seen(stage: str, done: float) -> None:
        stages.setdefault(stage, time.perf_counter() - start)
    cal = fit_calibration(HW, data, progress=seen)
    seconds, cpu_s = time.perf_counter() - start, time.process_time() - cpu_start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
    trees = cal.report.get("residual_trees") or {}
    return {"runs": n, "seconds": seconds, "cpu_s": cpu_s, "rss_before_mb": before_mb, "peak_rss_mb": peak_mb,
            "fit_mb": peak_mb - before_mb, "stage_start_s": stages, "trees_kept": trees.get("kept")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per size before it is given up")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--runs-file", help=argparse.SUPPRESS)
    parser.add_argument("--make-runs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--profile", type=int, metavar="N", help="cProfile one fit of N runs, print the top 25")
    parser.add_argument("--baseline", metavar="CHECKOUT", help="also fit each runs file with this checkout's code "
                        "(its perfmodel on PYTHONPATH), alternating with this tree's: CPU s of both and their ratio")
    parser.add_argument("--repeat", type=int, default=1, help="fits per size (and per checkout with --baseline)")
    parser.add_argument("--traced", type=int, metavar="N", help="peak MB the fit of N runs allocates (tracemalloc; "
                        "slower): the process's peak RSS also holds the runs' own making")
    args = parser.parse_args()
    if args.traced:
        print(f"{args.traced} runs: the fit allocated at most {traced_peak_mb(args.traced):.0f} MB (tracemalloc)")
        return
    if args.make_runs:
        with open(args.runs_file, "wb") as handle:
            pickle.dump(runs(args.make_runs), handle)
        return
    if args.one:
        print(json.dumps(one(args.one, args.runs_file)))
        return
    if args.profile:
        from perfmodel.calibration import fit_calibration

        data = runs(args.profile)
        profiler = cProfile.Profile()
        profiler.enable()
        fit_calibration(HW, data)
        profiler.disable()
        stats = pstats.Stats(profiler)
        total = max(getattr(stats, "total_tt", 0.0), 1e-9)
        print(f"{args.profile} runs: {total:.1f} s under cProfile; cumulative share of the top functions:")
        rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][3])  # type: ignore[attr-defined]
        for (path, line, name), (_, calls, _, cumulative, _) in rows[:25]:
            print(f"  {100 * cumulative / total:5.1f} %  {calls:>8} calls  {Path(path).name}:{line} {name}")
        return
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    here = Path(__file__).resolve().parents[1]
    trees = [("new", here)] + ([("old", Path(args.baseline).resolve())] if args.baseline else [])
    print(f"fit_calibration on {HW}, Vidur A100 kernel rows (copied with shape variation above 4,964), one core")
    print(f"{'runs':>7} {'code':>4} {'seconds':>8} {'cpu s':>7} {'us/run':>7} {'fit MB':>7} {'peak MB':>8}  "
          "trees kept  stage starts (s)")
    for n in args.sizes:
        cpu: dict[str, list[float]] = {name: [] for name, _ in trees}
        with tempfile.NamedTemporaryFile(suffix=".pickle") as handle:
            # made in a process of its own: a child's ru_maxrss starts at its parent's (kept across exec)
            subprocess.run([sys.executable, __file__, "--make-runs", str(n), "--runs-file", handle.name],
                           env={**env, "PYTHONPATH": str(here)}, check=True)
            for _ in range(args.repeat):
                for name, tree in (trees if len(cpu["new"]) % 2 == 0 else trees[::-1]):  # alternating order
                    script = tree / "benchmarks" / "calibration_speed.py"
                    command = [sys.executable, str(script), "--one", str(n), "--runs-file", handle.name]
                    try:
                        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout,
                                              env={**env, "PYTHONPATH": str(tree)}, check=True)
                    except subprocess.TimeoutExpired:
                        print(f"{n:>7} {name:>4} {'> ' + format(args.timeout, '.0f'):>8}  (given up)")
                        continue
                    r = json.loads(done.stdout.strip().splitlines()[-1])
                    cpu[name].append(r["cpu_s"])
                    starts = " ".join(f"{k} {v:.1f}" for k, v in r["stage_start_s"].items())
                    print(f"{n:>7} {name:>4} {r['seconds']:>8.1f} {r['cpu_s']:>7.2f} {1e6 * r['seconds'] / n:>7.0f} "
                          f"{r['fit_mb']:>7.0f} {r['peak_rss_mb']:>8.0f}  {r['trees_kept']!s:>10}  {starts}",
                          flush=True)
        if args.baseline and cpu["new"] and cpu["old"]:
            old, new = sorted(cpu["old"])[len(cpu["old"]) // 2], sorted(cpu["new"])[len(cpu["new"]) // 2]
            print(f"{n:>7} median CPU s old {old:.2f} -> new {new:.2f}: ratio {new / old:.2f}", flush=True)

if __name__ == "__main__":
    main()
