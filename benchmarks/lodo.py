"""Leave-one-device-out (and leave-one-vendor-out) accuracy of the uncalibrated model.

The uncalibrated model has defaults that no datasheet gives (``perfmodel/efficiency.py``); some were
chosen while looking at dev-set measurements. Here every such default is *fitted on the other devices
only*, then the left-out device is scored with it: per op class x device, median and p90 |error| and
the bias (median predicted / measured). The shipped defaults are scored beside it ("shipped").

The fit is coordinate descent, bounded: passes over the defaults until one moves nothing, each default (matrix and
onchip efficiency as a pair, ``lodo_joint``) moving over its grid with the others at their current values, to the
value with the lowest balanced score on the training devices (the mean over (op class, device) cells of the median
|log(pred/meas)|, at most 200 rows a cell). A held-out device's own rows never choose any value.

Harness: how a data set timed its ops is described, not left to the defaults (``measured_data``): flushed Nsight
Compute rows pay ``FLUSHED_CACHE_ROUND_TRIPS``, LLMCompass's compiled calls ``compiled_call_s``, DeepBench's call
loops at least an issue interval (``HARNESS_GRIDS``, fitted without the held-out device). ``loaded_latency_factor``
is not searched; ``dram_latency_scale`` is. ``stream_dram_efficiency`` is fitted once per vendor (``PER_VENDOR``).

Intervals: each prediction gets [pred·q10, pred·q90], the quantiles of measured/predicted of its class
over the *other* folds' held-out rows, every device weighing the same (a class on fewer than three devices
widened by the band pooled over all classes, one on more given the device effect its devices do not show:
``uncalibrated_interval.shifted_band``); coverage is counted on the left-out device, of rows and per device.
``--save-heldout`` stores the held-out predictions and each fold's fitted defaults (``--from-heldout`` reprints
them, ``--screen`` predicts every fold with them under this checkout's model, unrefitted; ``uncalibrated_bands.py``
scores interval rules on them). ``--write-intervals`` stores the per-class bands every uncalibrated prediction carries.

    python benchmarks/lodo.py [--vendor] [--markdown] [--write-intervals] [--folds DEVICE ...] [--classes LABEL ...]
                              [--save-heldout FILE.npz | --from-heldout FILE.npz | --screen FILE.npz]
    python benchmarks/lodo.py --fit-all   # the same fit over every dev device: what the shipped defaults should be
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lodo_joint import pair_trials
from lodo_network import (
    COLLECTIVE_LABELS,
    _in_scope,
    _undescribed_network,
    undescribed_network_variant,
)
from lodo_report import Folds, bands, table, write_intervals
from lodo_vendor import PER_VENDOR, vendor, with_model
from measured_data import (
    FLUSHED_DATASETS,
    HOST_ISSUED_LOOPS,
    UNSYNCED_COLLECTIVE_LAUNCHES,
    Row,
    _read,
    all_rows,
    compiled_call,
    looped_calls,
)

import perfmodel
from perfmodel.efficiency import FLUSHED_CACHE_ROUND_TRIPS, ModelDefaults, defaults_for
from perfmodel.hardware import Hardware
from perfmodel.ops import make_op
from perfmodel.specs import load_hardware
from perfmodel.uncalibrated_interval import (
    TABLE_PATH,
    band_key,
)

# Defaults that measured data set (or could have set): each moves over a physically plausible grid.
GRIDS: dict[str, tuple[float, ...]] = {
    "matrix_efficiency": (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95),
    # a convolution library's kernels (cuDNN, MIOpen) apart from the BLAS GEMMs: only convolution rows move it
    "conv_direct_matrix_efficiency": (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8),  # direct rows only
    "conv_matrix_efficiency": (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8),
    "conv_wgrad_dram_efficiency": (0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.87),
    "vector_efficiency": (0.6, 0.7, 0.8, 0.85, 0.9, 1.0),
    "dram_efficiency": (0.7, 0.75, 0.8, 0.85, 0.87, 0.9, 0.95),
    "stream_dram_efficiency": (0.7, 0.75, 0.8, 0.85, 0.87, 0.9, 0.95),
    "onchip_efficiency": (0.5, 0.6, 0.75, 0.9),
    # loaded_latency_factor is not searched (shipped 3, at most 3: a larger one would keep a full-occupancy stream of
    # 16-byte loads on the A100, 3.5 MB in flight, under the sustained DRAM share it is given: docs/model.md section
    # 5). A spec's idle DRAM round trip (gpu-benches) x dram_latency_scale is a stream's first-byte latency; searched
    # beside the scale, the factor traded against it on one device's rows (the A40 fold: scale 3 with factor 1.5, its
    # short kernels 1.5x too slow): docs/accuracy.md, tenth pass
    "dram_latency_scale": (1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0),
    "kernel_overhead_s": (1e-6, 1.5e-6, 2e-6, 2.5e-6, 3e-6, 4e-6, 5e-6),
    "host_overhead_s": (5e-6, 8e-6, 12e-6, 16e-6, 20e-6, 30e-6, 40e-6),
    "link_efficiency": (0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
    "link_step_latency_s": (0.5e-6, 1e-6, 2e-6, 4e-6, 8e-6),  # the alpha-beta collectives (before NCCL's)
    "network_step_latency_s": (2e-6, 4e-6, 6e-6, 10e-6, 20e-6),
    # collective_latency_scale (x NCCL's published latencies) is not searched: NCCL's tuning.cc tables are taken as
    # published (x1). Searched (0.5-3) it stood in for harness effects now described (Vidur's peer waits) and
    # picked 1-3 by fold (docs/accuracy.md, sixth pass)
}
# A convolution backward's own shares (docs/model.md section 5): the weight gradient's stream searched (W, shipped
# 0.25), the gradients' share (S) not (conv2d worse: docs/accuracy.md, convbwd16, conv17). The direct forwards'
# share (D, MIOpen's direct solvers) is chosen on direct rows only (ROW_SUBSETS); D+R+W with the joint
# matrix/onchip fit (lodo_joint) shipped in conv19; lodo_conv_switches.py turns each off
BACKWARD_GRIDS = {"conv_backward_matrix_efficiency": GRIDS["conv_matrix_efficiency"],
                  "conv_wgrad_dram_efficiency": GRIDS["conv_wgrad_dram_efficiency"]}
DIRECT_GRIDS = {"conv_direct_matrix_efficiency": GRIDS["conv_direct_matrix_efficiency"]}
# Harness terms: how a data set timed its ops, not the device. LLMCompass's compiled ops (measured_data.COMPILED_CALLS)
# add torch.compile's per-call host work; fitted like the defaults, on the other devices' compiled rows only.
# DeepBench's back-to-back call loops (measured_data.HOST_ISSUED_LOOPS) take at least the host's time per call:
# time = max(prediction, issue_interval_s), fitted the same way.
# compiled_call_s was switched off in the fourth pass (beside the others it let the A100 fold's kernel floor drop to
# 1 us); fitted again since (sixth pass: 20-30 us per fold, the A100 fold's floor stays 2 us): layer norm 27.1 ->
# 18.9 %, matmul 11.8 -> 10.5 %, elementwise 23.8 -> 23.2 %, no class of >= 50 rows worse, one device or vendor out.
# Vidur's eager, unsynchronised collective calls (measured_data.UNSYNCED_COLLECTIVE_LAUNCHES) last at least the
# host's interval between two eager torch.distributed calls: time = max(prediction, peer_issue_interval_s), a
# property of that harness, fitted the same way on the other devices' rows of it (never the held-out device's).
HARNESS_GRIDS: dict[str, tuple[float, ...]] = {
    "issue_interval_s": (0.0, 5e-6, 10e-6, 15e-6, 20e-6),
    "compiled_call_s": (0.0, 10e-6, 20e-6, 30e-6, 40e-6, 50e-6),
    "peer_issue_interval_s": (0.0, 10e-6, 20e-6, 30e-6, 40e-6, 50e-6, 60e-6),
}
# what _predict reads from a harness dict
HARNESS_TERMS = frozenset({"compiled_call_s", "issue_interval_s", "peer_issue_interval_s"})
# Defaults fitted once per vendor, as "name@vendor" (lodo_vendor: PER_VENDOR, and what a vendor none of whose
# training rows feel one takes)
# Defaults chosen on a subset of the training rows only: the rows whose op runs the kernels the default is the share of.
# A fold with no such row leaves it unset (None: the shipped fallback, ``conv_direct_matrix_efficiency`` -> the
# library's ``conv_matrix_efficiency``).
ROW_SUBSETS = {"conv_direct_matrix_efficiency": lambda row: row.op.get("algorithm") == "direct"}
FIT_ROWS_PER_CELL = 200
# passes until none moves a value; a value moves only to a strictly lower score (docs/accuracy.md, eighth pass)
FIT_MAX_PASSES = 8


VIDUR_TOPOLOGY_HW = {"a100_dgx": "nvidia-a100-sxm4-80gb", "a100_pairwise_nvlink": "nvidia-a100-pcie-80gb"}


def extra_collectives() -> list[Row]:
    """Vidur's collectives that ``measured_data`` leaves out: all-reduce on 4 A100 PCIe cards joined in
    NVLink-bridged pairs, and NCCL send/recv (within a node and across two) on both clusters."""
    out = []
    for r in _read("vidur_collectives_a100.csv"):
        hw = VIDUR_TOPOLOGY_HW[r["topology"]]
        if r["collective"] == "all_reduce" and r["topology"] == "a100_dgx":
            continue  # already in measured_data
        kind = "allreduce" if r["collective"] == "all_reduce" else "sendrecv"
        op = {"kind": kind, "bytes": float(r["size_bytes"]), "devices": int(r["num_workers"]),
              "devices_per_node": int(r["devices_per_node"]), "dtype": "fp16"}
        out.append(Row("vidur", hw, op, float(r["time_median_ms"]) * 1e-3, "kernel", kind, kind))
    return out


def _predict(rows: Sequence[Row], defaults_of: dict[str, ModelDefaults], harness: dict[str, float] | None = None
             ) -> np.ndarray:
    """Predicted seconds per row, each device with its given defaults; a row measured after a cache flush pays the
    flushed kernel's round trips (``FLUSHED_CACHE_ROUND_TRIPS``), a compiled call the harness's ``compiled_call_s``,
    a call timed in a back-to-back loop at least ``issue_interval_s``."""
    out = np.full(len(rows), np.nan)
    groups: dict[tuple[str, str, bool, bool], list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        groups[(row.hardware, row.timing, row.dataset in FLUSHED_DATASETS, _undescribed_network(row))].append(i)
    for (hw, timing, flushed, undescribed), idx in groups.items():
        defaults = defaults_of[hw]
        if flushed:
            defaults = dataclasses.replace(defaults, cold_start_round_trips=FLUSHED_CACHE_ROUND_TRIPS)
        device: str | Hardware = undescribed_network_variant(hw) if undescribed else hw
        batch = perfmodel.predict_many(device, [rows[i].op for i in idx], timing=timing,  # type: ignore[arg-type]
                                       defaults=defaults)
        out[idx] = batch.time_s
    compiled_s = (harness or {}).get("compiled_call_s", 0.0)
    if compiled_s:
        out = out + compiled_s * np.array([compiled_call(r) for r in rows])
    issue_s = (harness or {}).get("issue_interval_s", 0.0)
    if issue_s:
        looped = np.array([r.dataset in HOST_ISSUED_LOOPS for r in rows])
        calls = np.array([looped_calls(r) for r in rows], dtype=np.float64)  # a backward row: two timed loops
        out = np.where(looped, np.maximum(out, issue_s * calls), out)
    peer_s = (harness or {}).get("peer_issue_interval_s", 0.0)
    if peer_s:
        held = np.array([(r.dataset, r.label) in UNSYNCED_COLLECTIVE_LAUNCHES for r in rows])
        out = np.where(held, np.maximum(out, peer_s), out)
    return out


def _score(log_err: np.ndarray, cells: np.ndarray) -> float:
    """Balanced score: the mean over (op class, device) cells of the median |log(pred/meas)|."""
    return float(np.mean([np.median(np.abs(log_err[cells == c])) for c in np.unique(cells)]))


def _fit_sample(rows: Sequence[Row], index: np.ndarray) -> np.ndarray:
    """At most FIT_ROWS_PER_CELL evenly spaced rows of each (op class, device) cell: bounded fitting work."""
    cells: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i in index:
        cells[(rows[i].label, rows[i].hardware)].append(int(i))
    keep = [idx[j] for idx in cells.values()
            for j in np.unique(np.linspace(0, len(idx) - 1, min(len(idx), FIT_ROWS_PER_CELL)).astype(int))]
    return np.array(sorted(keep))


# The collectives' own defaults and harness term move only collective rows, and only collective rows choose them;
# every other default is chosen on the kernel rows alone, so a collective cell never pulls a kernel default (the
# kernel floor, the issue interval) through the shared score. (Before, the A100 fold's kernel floor followed the
# collective cells: docs/accuracy.md, sixth pass.)
COLLECTIVE_DEFAULTS = frozenset({"link_efficiency", "link_step_latency_s", "network_step_latency_s",
                                 "collective_latency_scale", "peer_issue_interval_s"})


# The small-kernel floor (kernel_overhead_s) is chosen on the device-timed rows it decides: those whose floor is at
# least FLOOR_SHARE of their predicted time (with the values chosen so far). Scored on every row, a large kernel's
# residual bandwidth or matrix-efficiency miss moved it (a GEMM 10 % slow pulled the floor up by a microsecond on
# every small kernel); wall-clock rows carry the host's overhead besides, fitted apart (host_overhead_s), and a
# back-to-back call loop's small kernels last the host's issue interval, which hides the floor (HOST_ISSUED_LOOPS:
# there the NVIDIA fold of --vendor took the 5 us grid edge from the MI25's DeepBench rows).
FLOOR_DEFAULT = "kernel_overhead_s"
FLOOR_SHARE = 0.5


def _floor_rows(rows: Sequence[Row], idx: np.ndarray, defaults_of: dict[str, ModelDefaults]) -> np.ndarray:
    """The rows of ``idx`` timed on the device whose per-kernel floor is >= FLOOR_SHARE of their predicted time."""
    keep = []
    groups: dict[str, list[int]] = defaultdict(list)
    for i in idx:
        if rows[int(i)].timing == "kernel" and rows[int(i)].dataset not in HOST_ISSUED_LOOPS:
            groups[rows[int(i)].hardware].append(int(i))
    for hw, members in groups.items():
        batch = perfmodel.predict_many(hw, [rows[i].op for i in members], timing="kernel", defaults=defaults_of[hw])
        floor = batch.overhead_s >= FLOOR_SHARE * batch.time_s
        keep += [m for m, f in zip(members, floor, strict=True) if f]
    return np.array(sorted(keep), dtype=int)


# Defaults chosen only on the rows whose time moves between the grid's two ends (as the floor is on _floor_rows). Off:
# {"onchip_efficiency"} with D+R+W left matmul 10.86 -> 11.05 % one device out (docs/accuracy.md, conv18; switch O)
DECIDED_DEFAULTS: frozenset[str] = frozenset()
DECIDED_RTOL = 1e-6  # the least relative move between the grid's ends that counts a row as decided


def _decided_rows(rows: Sequence[Row], idx: np.ndarray, shipped: dict[str, ModelDefaults],
                  choice: dict[str, float], name: str, grid: tuple[float, ...]) -> np.ndarray:
    """The rows of ``idx`` whose predicted time moves (by more than ``DECIDED_RTOL``) between ``name`` at the grid's
    lowest and highest values, the other values as chosen."""
    subset, ends = [rows[int(i)] for i in idx], []
    for model, harness in (_split({**choice, name: value}) for value in (min(grid), max(grid))):
        ends.append(_predict(subset, with_model(shipped, model), harness))
    moved = np.abs(ends[0] - ends[1]) > DECIDED_RTOL * np.maximum(ends[0], ends[1])
    return np.asarray(idx[moved], dtype=int)


def fit_defaults(rows: Sequence[Row], shipped: dict[str, ModelDefaults], grids: dict[str, tuple[float, ...]]
                 ) -> dict[str, float]:
    """Coordinate descent over the grids from the shipped values on ``rows`` until a pass moves nothing: a collective
    default (``COLLECTIVE_DEFAULTS``) on the collective rows, every other on the rest."""
    measured = np.array([r.measured_s for r in rows])
    cells = np.array([f"{r.label}|{r.hardware}" for r in rows])
    collective = np.array([r.label in COLLECTIVE_LABELS for r in rows])
    groups = {True: np.nonzero(collective)[0], False: np.nonzero(~collective)[0]}
    first = next(iter(shipped.values()))
    vendors = sorted({vendor(r.hardware) for r in rows})
    grids = {f"{name}@{v}" if name in PER_VENDOR else name: grid
             for name, grid in grids.items() for v in (vendors if name in PER_VENDOR else [""])}
    choice = {name: _shipped_value(first, name) for name in grids}
    choice.update({name: 0.0 for name in HARNESS_GRIDS})
    for _ in range(FIT_MAX_PASSES):
        before = dict(choice)
        for name, grid in {**grids, **HARNESS_GRIDS}.items():
            if not (trials := pair_trials(name, {**grids, **HARNESS_GRIDS})):
                continue  # chosen with the first of lodo_joint.JOINT
            idx = groups[name in COLLECTIVE_DEFAULTS]
            if name == FLOOR_DEFAULT:
                idx = _floor_rows(rows, idx, with_model(shipped, _split(choice)[0]))
            if name in DECIDED_DEFAULTS:
                idx = _decided_rows(rows, idx, shipped, choice, name, grid)
            if name in ROW_SUBSETS:
                idx = np.array([i for i in idx if ROW_SUBSETS[name](rows[int(i)])], dtype=int)
                if not idx.size:
                    choice.pop(name, None)  # no training row runs those kernels: the shipped fallback
                    continue
            if not idx.size:
                continue
            subset = [rows[int(i)] for i in idx]
            scores = []
            for trial in trials:
                model, harness = _split({**choice, **trial})
                predicted = _predict(subset, with_model(shipped, model), harness)
                scores.append(_score(np.log(predicted / measured[idx]), cells[idx]))
            best = int(np.argmin(scores))
            if "@" in name and max(scores) - scores[best] < 1e-12:
                choice.pop(name, None)  # no training row of that vendor feels it: the other vendors' value (with_model)
                continue
            here = {n: choice.get(n) for n in trials[0]}
            current = trials.index(here) if here in trials else None  # type: ignore[arg-type]
            if current is None or scores[best] < scores[current] - 1e-12:  # only a strict improvement moves it
                choice.update(trials[best])
        if choice == before:
            break
    return choice


def _shipped_value(defaults: ModelDefaults, name: str) -> float:
    """A default's shipped value; ``name@vendor`` is a per-vendor copy of ``name``."""
    base = name.split("@")[0]
    if base == "conv_direct_matrix_efficiency" and defaults.conv_direct_matrix_efficiency is None:
        base = "conv_matrix_efficiency"  # unset: the library's share
    return float(defaults.stream_dram if base == "stream_dram_efficiency" else getattr(defaults, base))


def _split(choice: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """A fitted choice as (model defaults, harness terms)."""
    return ({k: v for k, v in choice.items() if k not in HARNESS_TERMS},
            {k: v for k, v in choice.items() if k in HARNESS_TERMS})


def run_folds(rows: Sequence[Row], fold_of: np.ndarray, only: Sequence[str] = ()) -> Folds:
    """Fit the defaults without each fold, predict the fold with them (``only``: just these folds, the others'
    rows left unpredicted, nan)."""
    devices = sorted({r.hardware for r in rows})
    shipped_defaults = {hw: defaults_for(load_hardware(hw)) for hw in devices}
    shipped = _predict(rows, shipped_defaults)
    grids = {k: v for k, v in GRIDS.items() if all(hasattr(d, k) for d in shipped_defaults.values())}
    predicted = np.full(len(rows), np.nan)
    fitted: dict[str, dict[str, float]] = {}
    # rows over a network their data set does not describe choose no default: that network is not the spec's
    described = np.array(["devices" not in r.op or not _in_scope(r, "across, unknown network") for r in rows])
    for fold in sorted(set(fold_of)):
        if only and fold not in only:
            continue
        train = _fit_sample(rows, np.nonzero((fold_of != fold) & described)[0])
        choice = fit_defaults([rows[i] for i in train], shipped_defaults, grids)
        fitted[fold] = choice
        held = np.nonzero(fold_of == fold)[0]
        model, harness = _split(choice)
        defaults = with_model(shipped_defaults, model)
        predicted[held] = _predict([rows[int(i)] for i in held], defaults, harness)
    return Folds(predicted, shipped, fitted)


def _saved_run(rows: Sequence[Row], fold_of: np.ndarray, path: Path) -> Any:
    """A ``--save-heldout`` file, checked to be of these rows and folds."""
    data = np.load(path)
    same = (data["measured"].size == len(rows) and np.array_equal(data["folds"], fold_of)
            and np.array_equal(data["devices"], [r.hardware for r in rows])
            and np.allclose(data["measured"], [r.measured_s for r in rows], rtol=0, atol=0))
    if not same:
        raise SystemExit(f"{path}: not a --save-heldout run of these rows and folds")
    return data


def heldout_folds(rows: Sequence[Row], fold_of: np.ndarray, path: Path) -> Folds:
    """The held-out predictions a ``--save-heldout`` run stored, checked to be of these rows and folds (no fit: the
    fitted values are not read)."""
    data = _saved_run(rows, fold_of, path)
    devices = sorted({r.hardware for r in rows})
    shipped = data["shipped"] if "shipped" in data else _predict(rows, {hw: defaults_for(load_hardware(hw))
                                                                        for hw in devices})
    return Folds(np.asarray(data["predicted"], dtype=float), np.asarray(shipped, dtype=float), {})


def save_heldout(path: Path, rows: Sequence[Row], fold_of: np.ndarray, folds: Folds) -> None:
    """Store each row's class, device, fold, measured, held-out and shipped prediction, and each fold's fitted
    defaults (JSON), for ``--from-heldout``, ``--screen`` and ``benchmarks/uncalibrated_bands.py``."""
    np.savez_compressed(path, classes=np.array([band_key(make_op(r.op)) for r in rows]),
                        devices=np.array([r.hardware for r in rows]), folds=fold_of,
                        measured=np.array([r.measured_s for r in rows]), predicted=folds.predicted,
                        shipped=folds.shipped, fitted=np.array(json.dumps(folds.fitted)))


def screen_folds(rows: Sequence[Row], fold_of: np.ndarray, path: Path, keep: np.ndarray | None = None) -> Folds:
    """Each fold's rows predicted by this checkout's model with the defaults that fold fitted in a saved run, not
    refitted: a model change screened in seconds. Unchanged, it reproduces the saved run; changed, it shows the rows
    it moves, not what a refit would move in the other classes (only a full run does). ``keep``: the rows to
    predict (the others nan)."""
    data = _saved_run(rows, fold_of, path)
    if "fitted" not in data:
        raise SystemExit(f"{path}: saved without the fitted defaults; rerun it with --save-heldout")
    fitted: dict[str, dict[str, float]] = json.loads(str(data["fitted"]))
    devices = sorted({r.hardware for r in rows})
    shipped_defaults = {hw: defaults_for(load_hardware(hw)) for hw in devices}
    wanted = np.ones(len(rows), dtype=bool) if keep is None else keep
    predicted = np.full(len(rows), np.nan)
    shipped = np.full(len(rows), np.nan)
    for fold, choice in fitted.items():
        held = np.nonzero((fold_of == fold) & wanted)[0]
        if not held.size:
            continue
        model, harness = _split(choice)
        subset = [rows[int(i)] for i in held]
        predicted[held] = _predict(subset, with_model(shipped_defaults, model), harness)
        shipped[held] = _predict(subset, shipped_defaults)
    return Folds(predicted, shipped, fitted)


def fit_all(rows: Sequence[Row]) -> dict[str, float]:
    """The fold fit over every device's rows (none held out): the values the shipped defaults should carry where no
    single device's rows choose them (``--fit-all``)."""
    devices = sorted({r.hardware for r in rows})
    shipped_defaults = {hw: defaults_for(load_hardware(hw)) for hw in devices}
    grids = {k: v for k, v in GRIDS.items() if all(hasattr(d, k) for d in shipped_defaults.values())}
    described = np.array(["devices" not in r.op or not _in_scope(r, "across, unknown network") for r in rows])
    train = _fit_sample(rows, np.nonzero(described)[0])
    return fit_defaults([rows[i] for i in train], shipped_defaults, grids)


def _buildable(row: Row) -> bool:
    """Whether this perfmodel has the row's op (an older checkout, run for "before" figures, may not)."""
    try:
        make_op(row.op)
    except (ValueError, TypeError):
        return False
    return True


def _subset(folds: Folds, index: Sequence[int]) -> Folds:
    """The folds' predictions of the rows at ``index`` (a class or fold filter)."""
    return Folds(folds.predicted[list(index)], folds.shipped[list(index)], folds.fitted)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vendor", action="store_true", help="leave one vendor out instead of one device")
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown")
    parser.add_argument("--folds", nargs="*", default=(), metavar="FOLD",
                        help="hold out only these devices (or vendors): a shorter run, the other rows unscored")
    parser.add_argument("--classes", nargs="*", default=(), metavar="LABEL",
                        help="print only these op classes (every class still fits the defaults)")
    parser.add_argument("--write-intervals", action="store_true",
                        help=f"store the per-class bands of the held-out residuals in {TABLE_PATH.name}")
    parser.add_argument("--save-heldout", metavar="NPZ", type=Path,
                        help="also store each row's class, device, measured and held-out predicted time (npz) for "
                             "benchmarks/uncalibrated_bands.py, which compares interval rules without refitting")
    parser.add_argument("--from-heldout", metavar="NPZ", type=Path,
                        help="take the held-out predictions from a --save-heldout file of the same rows instead of "
                             "refitting (an interval rule's change, tried or written in seconds)")
    parser.add_argument("--screen", metavar="NPZ", type=Path,
                        help="predict each fold's rows with the defaults it fitted in a --save-heldout run, not "
                             "refitted (a model change screened in seconds; --classes predicts only those, so the "
                             "interval coverage then pools only their bands)")
    parser.add_argument("--fit-all", action="store_true",
                        help="only fit the defaults over every device (none held out) and print them")
    args = parser.parse_args()
    known = set(perfmodel.list_hardware())
    rows = [r for r in [*all_rows(), *extra_collectives()] if r.hardware in known and _buildable(r)]
    if args.fit_all:
        print("fitted defaults over every device: "
              + ", ".join(f"{k}={v:g}" for k, v in fit_all(rows).items()))
        return
    fold_of = np.array([vendor(r.hardware) if args.vendor else r.hardware for r in rows])
    if args.from_heldout and args.folds:
        parser.error("--from-heldout holds every fold's predictions: drop --folds")
    if args.write_intervals and args.folds:
        parser.error("--write-intervals needs every fold: drop --folds")
    if args.screen and (args.from_heldout or args.folds or args.write_intervals or args.save_heldout):
        parser.error("--screen reads one saved run and writes nothing: drop the other run options")
    if args.screen:
        keep = np.array([not args.classes or r.label in args.classes for r in rows])
        folds = screen_folds(rows, fold_of, args.screen, keep)
    else:
        folds = (heldout_folds(rows, fold_of, args.from_heldout) if args.from_heldout
                 else run_folds(rows, fold_of, args.folds))
    if args.save_heldout:
        save_heldout(args.save_heldout, rows, fold_of, folds)
    scored = [i for i, r in enumerate(rows) if np.isfinite(folds.predicted[i])
              and (not args.classes or r.label in args.classes)]
    print("\n".join(table([rows[i] for i in scored], _subset(folds, scored), fold_of[scored], args.markdown)))
    if not args.folds and not (args.screen and args.classes):
        print("\n".join(bands(rows, folds)))
    print("\nfitted defaults per left-out " + ("vendor" if args.vendor else "device") + ":")
    for fold, values in folds.fitted.items():
        print(f"  {fold:<24} " + ", ".join(f"{k}={v:g}" for k, v in values.items()))
    if args.write_intervals:
        if args.vendor:
            parser.error("--write-intervals takes the leave-one-device-out residuals: drop --vendor")
        print("\n".join(write_intervals(rows, folds, TABLE_PATH)))


if __name__ == "__main__":
    main()
