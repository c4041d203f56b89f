"""How much of each real trace's device time reaches a modelled op, by which source, and how well it is predicted.

Reads every real profiler file in the repo (``tests/data/traces``, ``benchmarks/data``) and in
``../shared/data/traces`` (found relative to the repo; missing folders are skipped; files that are not
traces, and copies of one file, are skipped). Per file: device time, the share matched to a modelled op,
the share by match source, the time-weighted median |error| of the matched ops (uncalibrated, on the device
the file names, else the device its data README gives), and the unmatched time by reason category. Ranks of
one job given together (Kineto files, same world size, overlapping spans): their collectives are scored net of
the time they waited for their peers (``peer_wait``), the raw error shown beside it. Convolution calls the matcher
flags as cuDNN benchmark-mode trials (several algorithms in one call) count as matched but are not scored.
Runs sized by their launch alone (source ``launch geometry``, confidence low) are scored apart too: the pooled
median is printed with and without them. Files whose records carry no work per launch (a summary of kernel names,
calls and durations: nsys ``cuda_gpu_kern_sum``, rocprofv3 ``kernel_stats.csv``) cannot be matched by any tool:
they are listed under their own heading with their share of the device time and are not counted as GPU files for
the mean and the 50 % rule (the figures with them are printed beside).

    .venv/bin/python benchmarks/trace_coverage.py            # this tree
    cd /tmp/pm-base && PYTHONPATH=. /work/main/.venv/bin/python /work/main/benchmarks/trace_coverage.py \
        --shared /work/shared/data/traces --data-root /work/main     # an older tree's code on today's files

Works on older trees too: where the matcher records no source or reason category, they are derived
from what it does record. Figures only, nothing asserted.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path.cwd() if (Path.cwd() / "perfmodel").is_dir() else Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfmodel.specs import load_hardware  # noqa: E402
from perfmodel.traces import match_runs, parse_trace  # noqa: E402
from perfmodel.traces.records import TraceError  # noqa: E402
from perfmodel.traces.report import trace_report  # noqa: E402

FOLDERS = ("tests/data/traces", "benchmarks/data")
SHARED = "../shared/data/traces"
DEVICE_CATEGORIES = ("kernel", "memcpy", "memset", "device")
# the device of files that do not name theirs, from the hardware column of the data READMEs
# (None: no spec of that device; an AMD file naming no device is predicted on none: "no spec")
README_DEVICES: tuple[tuple[str, str | None], ...] = (
    # omniperf's "MI200" vcopy workload ran on an MI210 (its sysinfo.csv: gfx90a, 104 CUs, HBM 1638.4 GB/s)
    ("mtia", None), ("vernier", None),  # vernier: Jetson AGX Thor / RTX 5000 Ada laptop, no spec of either
    ("mi100", "amd-mi100"), ("mi200", "amd-mi210"), ("mi250", "amd-mi250x"),
    ("mi300", "amd-mi300x"), ("rocprof", None),
                  ("resnet50", "nvidia-v100-sxm2-32gb"), ("sampled_rank", "nvidia-a100-sxm4-80gb"),
                  ("nsight", "nvidia-a100-sxm4-80gb"), ("", "nvidia-a100-sxm4-80gb"))
# a device name a Kineto trace records -> hardware id (first match, case-insensitive)
DEVICE_NAMES = (("a100-sxm4-80gb", "nvidia-a100-sxm4-80gb"), ("a100-pg509", "nvidia-a100-sxm4-40gb"),
                ("a100-sxm4-40gb", "nvidia-a100-sxm4-40gb"), ("a100", "nvidia-a100-sxm4-80gb"),
                ("gh200", "nvidia-gh200-96gb"), ("h200", "nvidia-h200-sxm-141gb"), ("h100", "nvidia-h100-sxm5-80gb"),
                ("gb200", "nvidia-gb200"), ("b200", "nvidia-b200"), ("v100", "nvidia-v100-sxm2-32gb"),
                ("mi300", "amd-mi300x"), ("mi250", "amd-mi250x"), ("mi210", "amd-mi210"), ("mi100", "amd-mi100"),
                # AMD gfx architectures (rocprof sysinfo, rocminfo): one spec per arch
                ("gfx942", "amd-mi300x"), ("gfx90a", "amd-mi250x"), ("gfx908", "amd-mi100"))
# where a file's device name is read: Kineto deviceProperties, ncu's display name / Device column, gfx arch
_HEAD_NAMES = (re.compile(r'"deviceProperties"\s*:\s*\[\s*\{[^}]*?"name"\s*:\s*"([^"]+)"'),
               re.compile(r'"device__attribute_display_name"(?:,"[^"]*"){0,3},"([^"]+)"'),
               re.compile(r"\b(gfx9[0-9a-f]{2})\b"))


@dataclass
class FileRow:
    name: str
    fmt: str
    hardware: str
    device_s: float
    matched_s: float
    by_source: dict[str, float] = field(default_factory=dict)
    by_reason: dict[str, float] = field(default_factory=dict)
    errors: list[tuple[float, float]] = field(default_factory=list)  # (|error| %, measured s) per op row
    raw_errors: list[tuple[float, float]] = field(default_factory=list)  # before taking peer waiting out
    # per match confidence (high: read from the file; medium / low: bounded or assumed): its runs' (|error|, s)
    by_confidence: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    # the runs sized by their launch alone (source "launch geometry") and all the others, scored apart
    geometry_errors: list[tuple[float, float]] = field(default_factory=list)
    other_errors: list[tuple[float, float]] = field(default_factory=list)
    note: str = ""
    no_work: str = ""  # why the file carries no work per launch (a summary of names and durations), else ""

    @property
    def share(self) -> float:
        return self.matched_s / self.device_s if self.device_s > 0 else float("nan")


def weighted_median(pairs: list[tuple[float, float]]) -> float:
    """The value below which half the weight lies ((value, weight) pairs); nan when empty."""
    pairs = [(v, w) for v, w in pairs if np.isfinite(v) and w > 0]
    if not pairs:
        return float("nan")
    pairs.sort()
    values, weights = np.array([v for v, _ in pairs]), np.cumsum([w for _, w in pairs])
    return float(values[np.searchsorted(weights, weights[-1] / 2.0)])


def trace_files(shared: Path, data_root: Path = ROOT) -> list[Path]:
    seen: set[str] = set()
    out = []
    for base in [*(data_root / folder for folder in FOLDERS), shared]:
        if not base.is_dir():
            continue
        for path in sorted(p for p in base.rglob("*") if p.is_file() and p.suffix.lower() != ".md"):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest not in seen:
                seen.add(digest)
                out.append(path)
    return out


def _device_id(name: str | None) -> str | None:
    if not name:
        return None
    return next((hw for token, hw in DEVICE_NAMES if token in name.lower()), None)


def _head(path: Path) -> str:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as stream:
        return str(stream.read(1 << 20).decode("utf-8", "replace"))


def _readme_device(path: Path) -> str | None:
    """The hardware column of the file's row in a data README next to it (``| `name` | format | hardware |``)."""
    readme = path.parent / "README.md"
    if not readme.is_file():
        return None
    for line in readme.read_text(encoding="utf-8", errors="replace").splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 4 and cells[1].strip("`") == path.name:
            return _device_id(cells[3])
    return None


# AMD gfx architecture -> the specs of that architecture (told apart by their compute units)
ARCH_SPECS = {"gfx908": ("amd-mi100",), "gfx90a": ("amd-mi210", "amd-mi250x"), "gfx942": ("amd-mi300x", "amd-mi325x")}


def _sysinfo_device(sysinfo: Path) -> str | None:
    """The spec of an omniperf/rocprof ``sysinfo.csv``: of its gfx arch's specs, the one whose compute units are
    the file's ``cu_per_gpu`` (gfx90a: an MI210 has 104, an MI250X 220); None where none is."""
    import csv

    with open(sysinfo, encoding="utf-8", errors="replace", newline="") as handle:
        row = next(csv.DictReader(handle), None)
    units = (row or {}).get("cu_per_gpu") or ""
    if not row or not units.isdigit():
        return None
    specs = [load_hardware(h) for h in ARCH_SPECS.get((row.get("gpu_arch") or "").strip().lower(), ())]
    return next((h.id for h in specs if h.units == int(units)), None)


def named_device(path: Path, parsed: Any) -> tuple[str | None, str]:
    """(hardware id, where it came from) of the device the file names: parsed metadata; the file's head
    (Kineto deviceProperties, ncu display name / Device column, gfx arch) or its rocprof sysinfo sibling;
    the README row of the file; else (None, "")."""
    found = _device_id(getattr(parsed, "device_name", None))
    if found:
        return found, "file"
    sysinfo = path.with_name(path.name.split("__")[0] + "__" + path.name.split("__")[1] + "__sysinfo.csv") \
        if path.name.count("__") >= 2 else None
    if sysinfo is not None and sysinfo.is_file() and (found := _sysinfo_device(sysinfo)):
        return found, "sysinfo CUs"
    for candidate in (path, sysinfo):
        if candidate is None or not candidate.is_file():
            continue
        head = _head(candidate)
        for pattern in _HEAD_NAMES:
            match = pattern.search(head)
            if match and (found := _device_id(match.group(1))):
                return found, "file" if candidate == path else "sysinfo"
    found = _readme_device(path)
    return (found, "README") if found else (None, "")


def _source(result: Any, parsed: Any, index: int) -> str:
    sources = getattr(result, "kernel_sources", None)
    if sources is not None:
        return str(sources[index])
    return "collective metadata" if parsed.kernels[index].collective is not None else "framework shapes"


def _category(result: Any, index: int) -> str:
    categories = getattr(result, "kernel_categories", None)
    if categories is not None:
        return str(categories[index])
    reason = result.kernel_reasons[index] or ""
    for pattern, category in ((r"Input Dims|not recorded|shapes unknown|no recorded shape", "shapes not recorded"),
                              (r"memcpy|memset", "copy not modelled"),
                              (r"is not modelled|not a modelled", "op not modelled"),
                              (r"unrecognised", "unrecognised kernel")):
        if re.search(pattern, reason):
            return category
    return "other"


TRIALS_NOTE = "benchmark mode trying each"  # matching's note on a call that ran several convolution algorithms


def scored(result: Any) -> Any:
    """The match result whose runs are compared with the model: without calls flagged as autotuning trials (cuDNN
    benchmark mode ran every candidate algorithm: their time is several convolutions', not one). They stay
    matched."""
    runs = [r for r in result.runs if not any(TRIALS_NOTE in note for note in r.notes)]
    if len(runs) == len(result.runs):
        return result
    from dataclasses import replace
    return replace(result, runs=runs)


CONFIDENCES = ("high", "medium", "low")
GEOMETRY = "launch geometry"  # geometry_ops.GEOMETRY (kept literal: older trees have no such module)


def _no_work(parsed: Any) -> str:
    """Why the file carries no work per launch, "" where it does (or the tree cannot tell)."""
    try:
        from perfmodel.traces.geometry_ops import no_launch_work
    except ImportError:  # an older tree
        return ""
    return no_launch_work(parsed.kernels, parsed.format) or ""


def _split_geometry(hardware: Any, parsed: Any, result: Any) -> tuple[list[tuple[float, float]], ...]:
    """(|error|, s) of the runs sized by their launch alone, and of all the other runs, each scored alone."""
    from dataclasses import replace

    out = []
    for geometry in (True, False):
        runs = [r for r in result.runs if (getattr(r, "source", "") == GEOMETRY) == geometry]
        report = trace_report(hardware, parsed, replace(result, runs=runs)) if runs else None
        out.append([(abs(r.error_pct), r.measured_s) for r in report.ops if r.measured_s > 0] if report else [])
    return out[0], out[1]


def _by_confidence(hardware: Any, parsed: Any, result: Any) -> dict[str, list[tuple[float, float]]]:
    """Each match confidence's runs scored on their own, so that ops whose work was bounded or assumed (a GEMM's
    K, an elementwise kernel's grid) cannot hide, or take the credit of, those read from the file."""
    from dataclasses import replace

    out: dict[str, list[tuple[float, float]]] = {}
    for confidence in CONFIDENCES:
        runs = [r for r in result.runs if getattr(r, "confidence", "high") == confidence]
        if runs:
            report = trace_report(hardware, parsed, replace(result, runs=runs))
            out[confidence] = [(abs(r.error_pct), r.measured_s) for r in report.ops if r.measured_s > 0]
    return out


def measure(path: Path, waits: dict[int, float] | None = None) -> FileRow | None:
    """One file's row; ``waits`` (kernel index -> s waiting for peers, its ranks given together): its collective
    runs are scored net of that waiting (the raw error is kept in ``raw_errors``)."""
    try:
        parsed = parse_trace(path)
        result = match_runs(parsed)
    except TraceError:
        return None
    device = [k.category in DEVICE_CATEGORIES for k in parsed.kernels]  # "device": an accelerator's own events
    hardware, where = named_device(path, parsed)
    named = getattr(parsed, "device_name", None)
    if hardware is None and not named:  # fallback: the device of the file's data set, by name (README_DEVICES)
        hardware, where = next(hw for token, hw in README_DEVICES if token in path.name.lower()), "by name"
    # a file that names a device without a spec here is predicted on none, not on its data set's default
    no_spec = f"no spec ({named[:24]})" if named and hardware is None else "no spec"
    row = FileRow(path.name, parsed.format, f"{hardware} ({where})" if hardware else no_spec, 0.0, 0.0)
    row.no_work = _no_work(parsed)
    if not any(device):
        row.note = "no device timing (CPU ops only)" if parsed.kernels else "no records"
    elif not any(k.duration_s > 0 for k in parsed.kernels):
        row.note = "device activities without durations: " + "; ".join(parsed.warnings[:1])
    for i, kernel in enumerate(parsed.kernels):
        if not device[i] or kernel.duration_s <= 0:
            continue
        row.device_s += kernel.duration_s
        if result.kernel_runs[i] is not None:
            row.matched_s += kernel.duration_s
            key = _source(result, parsed, i)
            row.by_source[key] = row.by_source.get(key, 0.0) + kernel.duration_s
        else:
            key = _category(result, i)
            row.by_reason[key] = row.by_reason.get(key, 0.0) + kernel.duration_s
    if row.device_s > 0 and hardware is not None:
        report = trace_report(load_hardware(hardware), parsed, scored(result))
        row.errors = [(abs(r.error_pct), r.measured_s) for r in report.ops]
        net_result = result
        if waits:
            from perfmodel.traces.peer_wait import net_of_waiting
            row.raw_errors, row.note = row.errors, "collectives scored net of waiting for peers"
            net_result = net_of_waiting(result, waits)
            net = trace_report(load_hardware(hardware), parsed, scored(net_result))
            row.errors = [(abs(r.error_pct), r.measured_s) for r in net.ops if r.measured_s > 0]
        row.by_confidence = _by_confidence(load_hardware(hardware), parsed, scored(net_result))
        row.geometry_errors, row.other_errors = _split_geometry(load_hardware(hardware), parsed, scored(net_result))
    return row


def _pooled(rows: list[FileRow], pick: Any) -> float:
    """Time-weighted median of the (|error|, s) pairs ``pick(row)`` gives, each file weighing the same."""
    return weighted_median([(e, w / r.device_s) for r in rows for e, w in pick(r)])


def _print_no_work(rows: list[FileRow], gpu: list[FileRow]) -> None:
    """The files with device time but no work per launch, under their own heading, and the goals with them."""
    if not rows:
        return
    everything = sum(r.device_s for r in [*gpu, *rows])
    print(f"\n{len(rows)} files with device time but NO WORK PER LAUNCH (names, calls and durations only: no grid, "
          "no shapes, no counters, no bytes). No tool can match them, so they are not counted as GPU files for the "
          "mean and the 50% rule above; they are:")
    for r in rows:
        print(f"  {r.name[:70]:<72}{r.device_s * 1e3:>10.2f} ms ({r.device_s / everything:.1%} of all device time), "
              f"{r.share:.0%} matched")
    shares = [r.share for r in [*gpu, *rows]]
    print(f"  counted as GPU files too: matched share mean {np.mean(shares):.1%}, {sum(s < 0.5 for s in shares)} "
          "below 50%")


def _print(rows: list[FileRow], top_reasons: int) -> None:
    timed = [r for r in rows if r.device_s > 0]
    gpu = [r for r in timed if not r.no_work]
    no_work = [r for r in timed if r.no_work]
    sources = sorted({s for r in gpu for s in r.by_source}, key=lambda s: -sum(r.by_source.get(s, 0) for r in gpu))
    print(f"{'file':<46}{'format':<20}{'device':<34}{'device time':>12}{'matched':>8}{'|err| med':>10}  "
          "by source / unmatched by reason (share of the file's device time)")
    for r in rows:
        if r.device_s <= 0:
            print(f"{r.name[:45]:<46}{r.fmt[:19]:<20}{'-':<34}{'-':>12}{'-':>8}{'-':>10}  {r.note}")
            continue
        err = weighted_median(r.errors)
        src = ", ".join(f"{s} {v / r.device_s:.0%}" for s, v in sorted(r.by_source.items(), key=lambda x: -x[1]))
        why = ", ".join(f"{s} {v / r.device_s:.0%}" for s, v in
                        sorted(r.by_reason.items(), key=lambda x: -x[1])[:top_reasons])
        net = f" ({r.note}; raw |err| med {weighted_median(r.raw_errors):.1f}%)" if r.raw_errors else ""
        head = "NO WORK PER LAUNCH " if r.no_work else ""
        print(f"{r.name[:45]:<46}{r.fmt[:19]:<20}{r.hardware[:33]:<34}{r.device_s * 1e3:>10.2f}ms{r.share:>8.1%}"
              f"{err:>9.1f}%  {head}[{src or '-'}] unmatched: [{why or '-'}]{net}")
    if not gpu:
        _print_no_work(no_work, gpu)
        return
    shares = [r.share for r in gpu]
    total = sum(r.device_s for r in gpu)
    print(f"\n{len(gpu)} GPU files with work per launch ({len(no_work)} with device time but no work per launch, "
          f"{len(rows) - len(timed)} without device time): matched share mean "
          f"{np.mean(shares):.1%}, min {min(shares):.1%}, {sum(s < 0.5 for s in shares)} below 50%; "
          f"all their device time {sum(r.matched_s for r in gpu) / total:.1%} matched")
    for r in sorted((r for r in gpu if r.share < 0.5), key=lambda r: r.share):
        top = max(r.by_reason.items(), key=lambda x: x[1], default=("-", 0.0))
        print(f"  below 50%: {r.name[:60]} {r.share:.0%} matched; most of the rest: {top[0]} "
              f"{top[1] / r.device_s:.0%}")
    print(f"time-weighted median |error| of matched ops, uncalibrated: per file mean "
          f"{np.nanmean([weighted_median(r.errors) for r in gpu if r.errors] or [np.nan]):.1f}%, "
          f"pooled (files weighted equally) {_pooled(gpu, lambda r: r.errors):.1f}%")
    geometry_files = [r for r in gpu if r.geometry_errors]
    print(f"  without the {GEOMETRY} runs: pooled {_pooled(gpu, lambda r: r.other_errors):.1f}%; {GEOMETRY} runs "
          f"alone: pooled {_pooled(geometry_files, lambda r: r.geometry_errors):.1f}% ({len(geometry_files)} files, "
          f"mean {np.mean([r.by_source.get(GEOMETRY, 0.0) / r.device_s for r in gpu]):.1%} of a file's device time)")
    parts = []
    for confidence in CONFIDENCES:
        scored_files = [r for r in gpu if r.by_confidence.get(confidence)]
        pairs = [(e, w / r.device_s) for r in scored_files for e, w in r.by_confidence[confidence]]
        share = sum(w / r.device_s for r in scored_files for _, w in r.by_confidence[confidence]) / len(gpu)
        parts.append(f"{confidence} {weighted_median(pairs):.1f}% ({len(scored_files)} files, mean "
                     f"{share:.1%} of a file's device time)")
    print("  by match confidence, each scored alone (pooled, files weighted equally): " + "; ".join(parts))
    by_source: dict[str, float] = defaultdict(float)
    by_reason: dict[str, float] = defaultdict(float)
    for r in gpu:
        for s, v in r.by_source.items():
            by_source[s] += v / r.device_s / len(gpu)
        for s, v in r.by_reason.items():
            by_reason[s] += v / r.device_s / len(gpu)
    print("mean share by source: " + ", ".join(f"{s} {by_source[s]:.1%}" for s in sources))
    print("mean unmatched share by reason: " + ", ".join(
        f"{s} {v:.1%}" for s, v in sorted(by_reason.items(), key=lambda x: -x[1])))
    _print_no_work(no_work, gpu)


def _rank_groups(paths: list[Path]) -> tuple[list[str], dict[Path, dict[int, float]]]:
    """NCCL waiting per rank for Kineto files of one job given together (same world size, overlapping spans):
    the lines to print, and per file its kernels' waiting (kernel index -> s)."""
    try:
        from perfmodel.traces.peer_wait import kernel_waits, peer_wait
    except ImportError:  # an older tree
        return [], {}
    ranks: dict[int, list[tuple[Path, Any, float, float]]] = defaultdict(list)
    for path in paths:
        if ".json" not in path.name:
            continue
        try:
            parsed = parse_trace(path)
        except TraceError:
            continue
        starts = [k.start_s for k in parsed.kernels if k.start_s is not None]
        world = getattr(parsed, "world_size", None)
        if world and world > 1 and starts:
            ranks[world].append((path, parsed, min(starts), max(starts)))
    lines = []
    by_file: dict[Path, dict[int, float]] = {}
    for group in ranks.values():
        group.sort(key=lambda item: item[2])
        together = [g for g in group if g[2] < group[0][3] and g[3] > group[0][2]]
        if len(together) < 2:
            continue
        waits, _ = peer_wait([g[1] for g in together])
        per_kernel, _ = kernel_waits([g[1] for g in together])
        by_file.update({g[0]: w for g, w in zip(together, per_kernel, strict=True)})
        lines.append("NCCL waiting for peers (ranks of one step given together): " + "; ".join(
            f"{g[0].name[:40]} {w.wait_share:.0%} of {w.time_s * 1e3:.0f} ms" for g, w in zip(together, waits,
                                                                                            strict=True)))
    return lines, by_file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reasons", type=int, default=3, help="reason categories shown per file")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead")
    parser.add_argument("--shared", type=Path, default=ROOT / SHARED, help="the shared traces folder")
    parser.add_argument("--data-root", type=Path, default=ROOT,
                        help="the repo whose tests/data and benchmarks/data are read (default: the code's tree)")
    args = parser.parse_args()
    paths = trace_files(args.shared.resolve(), args.data_root.resolve())
    wait_lines, waits = _rank_groups(paths)
    rows = [row for path in paths if (row := measure(path, waits.get(path))) is not None]
    if args.json:
        print(json.dumps([{**r.__dict__, "share": r.share, "median_abs_error_pct": weighted_median(r.errors)}
                          for r in rows], default=str, indent=1))
        return
    print(f"tree: {ROOT}")
    _print(rows, args.reasons)
    for line in wait_lines:
        print(line)


if __name__ == "__main__":
    main()
