"""Speed of ``perfmodel compare`` on two large traces: a real Kineto trace (ResNet-50 training steps on a V100)
repeated until it has ``--kernels`` kernels, the second copy with 2 % noise on every kernel and a 5 % slowdown of
the kernels of every convolution call of one input shape. Prints the CPU time of parsing both, matching and grouping
both, the diff (tests, predictions) and the total, for this tree and for a baseline ref (``--baseline``, a temporary
git worktree; each run in its own interpreter, alternated), their ratio, and whether both compared alike. Then the
wall and CPU time (with child processes) of reading both sides as ``perfmodel compare`` does (``load.file_sides``:
the new side in a forked child where the tree has it; ``file_side`` in turn where not).

    .venv/bin/python benchmarks/compare_speed.py --kernels 100000 --baseline main --repeats 2
"""

from __future__ import annotations

import argparse
import copy
import gzip
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from perfmodel.compare import diff_sides, side_from_parsed
from perfmodel.specs import load_hardware
from perfmodel.traces import parse_trace

SOURCE = Path(__file__).resolve().parents[1] / "tests" / "data" / "traces" / \
    "kineto_resnet50_num_workers_0__worker0.1623143566756.pt.trace.json.gz"
ID_STRIDE = 10_000_000
SLOWED_OP = "aten::cudnn_convolution"


def _shift(event: dict[str, Any], copy_index: int, span_us: float) -> dict[str, Any]:
    out = copy.copy(event)
    if "ts" in out:
        out["ts"] = out["ts"] + copy_index * span_us
    args = out.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in ("correlation", "External id", "external id", "Ev Idx", "Python id", "Python parent id"):
            if isinstance(args.get(key), int):
                args[key] += copy_index * ID_STRIDE
        out["args"] = args
    return out


def build(kernels: int, noise: float, slow: float, seed: int, path: Path) -> int:
    data = json.loads(gzip.decompress(SOURCE.read_bytes()))
    events = [e for e in data["traceEvents"] if isinstance(e, dict)]
    per_copy = sum(e.get("cat") in ("Kernel", "kernel", "Memcpy", "Memset", "gpu_memcpy", "gpu_memset")
                   for e in events)
    times = [e["ts"] + e.get("dur", 0) for e in events if isinstance(e.get("ts"), int | float)]
    span = max(times) - min(times) + 1000.0
    rng = random.Random(seed)
    convs = [e for e in events if e.get("name") == SLOWED_OP and "dur" in e]
    shape = convs[0].get("args", {}).get("Input Dims") if convs else None
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in convs if e.get("args", {}).get("Input Dims") == shape]
    slowed = {e["args"]["correlation"] for e in events if str(e.get("cat", "")).lower() in ("runtime", "cuda_runtime")
              and "correlation" in e.get("args", {}) and any(a <= e["ts"] <= b for a, b in spans)}
    out: list[dict[str, Any]] = []
    copies = max(1, -(-kernels // max(per_copy, 1)))
    for c in range(copies):
        for event in events:
            shifted = _shift(event, c, span)
            if str(event.get("cat", "")).lower() == "kernel" and "dur" in event:
                factor = 1.0 + rng.gauss(0.0, noise)
                if event.get("args", {}).get("correlation") in slowed:
                    factor *= slow
                shifted["dur"] = event["dur"] * factor
            out.append(shifted)
    path.write_bytes(gzip.compress(json.dumps({**data, "traceEvents": out}).encode(), compresslevel=1))
    return copies * per_copy


def measure(base_path: Path, new_path: Path) -> dict[str, Any]:
    """One comparison from files with the ``perfmodel`` on the path: CPU s of each stage and what it found."""
    hw = load_hardware("nvidia-v100-sxm2-32gb")
    try:  # the columnar path (``perfmodel.compare.fast_side``) where the tree has it
        from perfmodel.compare.fast_side import read_columns, side_from_columns
    except ImportError:
        read_columns = None  # type: ignore[assignment]
    c0 = time.process_time()
    base_read = read_columns(base_path) if read_columns is not None else None
    new_read = read_columns(new_path) if base_read is not None else None
    if base_read is not None and new_read is not None:
        c1 = time.process_time()
        base_side = side_from_columns(base_read[0], base_path.name, base_read[1], base_read[2])
        new_side = side_from_columns(new_read[0], new_path.name, new_read[1], new_read[2])
        count = len(base_read[0].devices)
    else:
        base, new = parse_trace(base_path, base_path.name), parse_trace(new_path, new_path.name)
        c1 = time.process_time()
        base_side, new_side = side_from_parsed(base, base_path.name), side_from_parsed(new, new_path.name)
        count = len(base.kernels)
    c2 = time.process_time()
    result = diff_sides(base_side, new_side, hw)
    c3 = time.process_time()
    verdicts: dict[str, int] = {}
    for g in result.groups:
        verdicts[g.verdict] = verdicts.get(g.verdict, 0) + 1
    return {"parse": c1 - c0, "match": c2 - c1, "diff": c3 - c2, "total": c3 - c0, "records": count,
            "groups": len(result.groups), "verdicts": verdicts,
            "digest": hashlib.sha1(repr(result).encode()).hexdigest(),
            "regressions": [f"{g.name} {g.key[2][:80]}: {g.change_pct:+.1f}% ({g.base_calls} calls)"
                            for g in result.regressions[:5]]}


def measure_cached(base_path: Path, new_path: Path) -> dict[str, Any]:
    """The CI gate's case with the side cache (``perfmodel.compare.cache``): CPU s of a comparison whose base was
    compared before (new parsed), and of one where both were; the cache filled by a first, untimed comparison."""
    from perfmodel.compare import cache, load  # on demand: absent from older trees

    hw = load_hardware("nvidia-v100-sxm2-32gb")
    with tempfile.TemporaryDirectory() as folder:
        os.environ[cache.ENV] = folder
        load.file_side(base_path)
        c0 = time.process_time()
        base_side, new_side = load.file_side(base_path), load.file_side(new_path)
        diff_sides(base_side, new_side, hw)
        c1 = time.process_time()
        digest = hashlib.sha1(repr(diff_sides(load.file_side(base_path), load.file_side(new_path), hw)).encode())
        c2 = time.process_time()
    return {"base_cached": c1 - c0, "both_cached": c2 - c1, "digest": digest.hexdigest()}


def measure_pair(base_path: Path, new_path: Path) -> dict[str, Any]:
    """Both sides as ``perfmodel compare`` reads them: ``load.file_sides`` (the new side in a forked child where
    the tree has it), else ``file_side`` in turn. Wall s, and CPU s of this process and its children together."""
    import resource

    from perfmodel.compare import load

    def cpu() -> float:
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    read_both = getattr(load, "file_sides", None)
    w0, c0 = time.perf_counter(), cpu()
    sides = read_both(base_path, new_path) if read_both else (load.file_side(base_path), load.file_side(new_path))
    wall, cpu_s = time.perf_counter() - w0, cpu() - c0
    return {"wall": wall, "cpu": cpu_s, "parallel": read_both is not None and load._in_parallel(base_path, new_path),
            "digest": hashlib.sha1(repr(sides).encode()).hexdigest()}


def _child(tree: Path, base_path: Path, new_path: Path, mode: str = "--measure",
           parallel: bool = False) -> dict[str, Any]:
    """``measure`` in a fresh interpreter with ``tree``'s perfmodel first on the path (``parallel``: with the
    opt-in to read the two files side by side, ``PERFMODEL_COMPARE_PARALLEL``)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PERFMODEL_COMPARE_PARALLEL": "1" if parallel else ""}
    out = subprocess.run([sys.executable, __file__, mode, str(base_path), str(new_path)], env=env, cwd=tree,
                         check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kernels", type=int, default=100_000)
    parser.add_argument("--baseline", default="merge-base",
                        help="git ref measured in the same run (alternated; default: where this branch left main); "
                             "'' for none")
    parser.add_argument("--repeats", type=int, default=1, help="alternated runs of each")
    parser.add_argument("--measure", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--measure-cached", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--measure-pair", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure or args.measure_cached or args.measure_pair:
        print(json.dumps(measure(*args.measure) if args.measure else measure_cached(*args.measure_cached)
                         if args.measure_cached else measure_pair(*args.measure_pair)))
        return
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as folder:
        base_path, new_path = Path(folder, "base.json.gz"), Path(folder, "new.json.gz")
        count = build(args.kernels, 0.0, 1.0, 1, base_path)
        build(args.kernels, 0.02, 1.05, 2, new_path)
        trees = {"this tree": root}
        if args.baseline == "merge-base":
            args.baseline = subprocess.run(["git", "-C", str(root), "merge-base", "HEAD", "main"], check=True,
                                           capture_output=True, text=True).stdout.strip()[:10]
        if args.baseline:
            old = Path(folder, "baseline")
            subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", str(old), args.baseline], check=True,
                           capture_output=True)
            trees[args.baseline] = old
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        pairs: dict[str, list[dict[str, Any]]] = {name: [] for name in [*trees, "side by side"]}
        try:
            for _ in range(args.repeats):
                for name, tree in trees.items():
                    runs[name].append(_child(tree, base_path, new_path))
                for name, tree in trees.items():
                    pairs[name].append(_child(tree, base_path, new_path, "--measure-pair", parallel=False))
                pairs["side by side"].append(_child(root, base_path, new_path, "--measure-pair", parallel=True))
            cached = _child(root, base_path, new_path, "--measure-cached")
        finally:
            if args.baseline:
                subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(old)], check=False)
    print(f"{count:,} device activities per trace ({runs['this tree'][0]['records']:,} records parsed); CPU s "
          "(process time, best of the alternated runs; the machine is shared)")
    best = {name: min(each, key=lambda r: r["total"]) for name, each in runs.items()}
    for name, r in best.items():
        print(f"  {name:>10}: parse both {r['parse']:.2f}; match and group both {r['match']:.2f}; diff "
              f"{r['diff']:.2f}; total {r['total']:.2f}  ({r['groups']} groups: {r['verdicts']})")
    if args.baseline:
        old_r, new_r = best[args.baseline], best["this tree"]
        print(f"  ratio {args.baseline} / this tree: parse {old_r['parse'] / new_r['parse']:.2f}x, match "
              f"{old_r['match'] / new_r['match']:.2f}x, diff {old_r['diff'] / new_r['diff']:.2f}x, total "
              f"{old_r['total'] / new_r['total']:.2f}x; same comparison: {old_r['digest'] == new_r['digest']}")
    print("  both sides read as `perfmodel compare` reads them (wall s / CPU s of the process and its children; "
          "each run; 'side by side': this tree with PERFMODEL_COMPARE_PARALLEL=1):")
    for name, each in pairs.items():
        print(f"  {name:>12}: " + "; ".join(f"wall {r['wall']:.2f} cpu {r['cpu']:.2f}" for r in each)
              + f"  (new side in a child process: {each[0]['parallel']})")
    in_turn, together = pairs["this tree"], pairs["side by side"]
    print(f"  ratio in turn / side by side, best of each: wall "
          f"{min(r['wall'] for r in in_turn) / min(r['wall'] for r in together):.2f}x, cpu "
          f"{min(r['cpu'] for r in in_turn) / min(r['cpu'] for r in together):.2f}x; same sides: "
          f"{len({r['digest'] for each in pairs.values() for r in each}) == 1}")
    same = cached["digest"] == best["this tree"]["digest"]
    print(f"  with the side cache (PERFMODEL_COMPARE_CACHE), this tree: base compared before, new parsed "
          f"{cached['base_cached']:.2f}; both compared before {cached['both_cached']:.2f}; same comparison: {same}")
    for line in best["this tree"]["regressions"]:
        print(f"  regression {line}")


if __name__ == "__main__":
    main()
